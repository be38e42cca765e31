/*
 * The replay unit tests' trace world (replay_fixture.h).
 */
#include "replay_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "util/file.h"

static void path_of(char *buf, size_t cap, const char *dir, const char *name)
{
    const char *src = getenv("GS_SOURCE_DIR");
    (void)snprintf(buf, cap, "%s/tests/data/%s/%s", src ? src : ".", dir, name);
}

void replay_world_load(struct replay_world *w, const char *dir)
{
    char p[1024];
    struct gs_diag d;
    memset(w, 0, sizeof *w);
    path_of(p, sizeof p, dir, "nodes.csv");
    assert_int_equal(gs_trace_read_nodes(p, &w->nodes, &d), GS_OK);
    path_of(p, sizeof p, dir, "pods.csv");
    assert_int_equal(gs_trace_read_pods(p, &w->pods, &d), GS_OK);
    path_of(p, sizeof p, dir, "queues.yaml");
    assert_int_equal(gs__read_file(p, 1u << 20, &w->queues, &w->queues_len, &d), GS_OK);
    assert_int_equal(gs_qconfig_parse(w->queues, w->queues_len, "queues.yaml", &w->qc, &d), GS_OK);
}

void replay_world_fini(struct replay_world *w)
{
    gs_trace_nodes_fini(&w->nodes);
    gs_trace_pods_fini(&w->pods);
    gs_qconfig_free(w->qc);
    free(w->queues);
}
