/*
 * The trace world shared by the replay unit tests (test_replay.c, test_replay_dynmig.c,
 * test_replay_defrag.c): a node list, a pod list and a queues file read from one directory of
 * tests/data ($GS_SOURCE_DIR/tests/data/DIR/{nodes.csv,pods.csv,queues.yaml}). Each loader
 * fails the running cmocka test on an unexpected return code. Linked into those tests only
 * (tests/CMakeLists.txt).
 */
#ifndef GPUSCHED_TESTS_REPLAY_FIXTURE_H
#define GPUSCHED_TESTS_REPLAY_FIXTURE_H

#include <stddef.h>

#include "gpusched/qconfig.h"
#include "gpusched/trace.h"

/** One test's trace world; owns everything in it until replay_world_fini(). */
struct replay_world {
    struct gs_trace_nodes nodes; /* nodes.csv */
    struct gs_trace_pods pods;   /* pods.csv */
    char *queues;                /* queues.yaml's text, NUL-terminated */
    size_t queues_len;           /* its length in bytes */
    struct gs_qconfig *qc;       /* queues.yaml parsed */
};

/**
 * Reads tests/data/`dir`/ into `w` (overwritten). `dir` is borrowed ("gangs", "dynmig").
 */
void replay_world_load(struct replay_world *w, const char *dir);

/** Frees what `w` owns; `w` may then be loaded again. */
void replay_world_fini(struct replay_world *w);

#endif
