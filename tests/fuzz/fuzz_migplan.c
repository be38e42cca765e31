/*
 * libFuzzer target for the dynamic MIG annotations' readers (src/k8s/kmigplan.c): the node
 * agent reads gpusched.io/mig-plan and the scheduler gpusched.io/mig-plan-status from Node
 * annotations anyone with patch rights on the Node can write. Besides the sanitizers' checks it
 * asserts the header's promises: every answer is GS_OK or GS_EINVAL with a message; a plan
 * read has its members in range (GPU 0..63, 0..8 instances each with a start 0..7 and a
 * non-empty profile, at least one create, "ns/name" pod); and what was read, written again and
 * read back is the same record (the writer and the reader agree).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kmigplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void insts_ok(const struct gs_kmig_inst *in, uint32_t n)
{
    check(n <= GS_MIG_INSTANCES_MAX);
    for (uint32_t i = 0; i < n; i++)
        check(in[i].start <= 7 && in[i].profile[0] != '\0' &&
              memchr(in[i].profile, '\0', sizeof(in[i].profile)) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[20000];
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    char err[300] = "";
    struct gs_kmig_plan p, q;
    int rc = gs_kmig_plan_read(text, &p, err, sizeof(err));
    check(rc == GS_OK || (rc == GS_EINVAL && err[0] != '\0'));
    if (rc == GS_OK) {
        check(p.id[0] != '\0' && p.gpu <= 63 && p.n_create >= 1 && strchr(p.pod, '/') != NULL);
        insts_ok(p.destroy, p.n_destroy);
        insts_ok(p.create, p.n_create);
        char *again = gs_kmig_plan_write(&p);
        check(again != NULL);
        check(gs_kmig_plan_read(again, &q, err, sizeof(err)) == GS_OK);
        free(again);
        check(strcmp(p.id, q.id) == 0 && p.gpu == q.gpu && strcmp(p.uuid, q.uuid) == 0 &&
              p.n_destroy == q.n_destroy && p.n_create == q.n_create && strcmp(p.pod, q.pod) == 0 &&
              strcmp(p.created, q.created) == 0);
        for (uint32_t i = 0; i < p.n_destroy; i++)
            check(strcmp(p.destroy[i].profile, q.destroy[i].profile) == 0 &&
                  p.destroy[i].start == q.destroy[i].start);
        for (uint32_t i = 0; i < p.n_create; i++)
            check(strcmp(p.create[i].profile, q.create[i].profile) == 0 &&
                  p.create[i].start == q.create[i].start);
    }
    struct gs_kmig_status s, t;
    err[0] = '\0';
    rc = gs_kmig_status_read(text, &s, err, sizeof(err));
    check(rc == GS_OK || (rc == GS_EINVAL && err[0] != '\0'));
    if (rc == GS_OK) {
        check(s.id[0] != '\0');
        char *again = gs_kmig_status_write(&s);
        check(again != NULL);
        check(gs_kmig_status_read(again, &t, err, sizeof(err)) == GS_OK);
        free(again);
        check(strcmp(s.id, t.id) == 0 && s.done == t.done && strcmp(s.reason, t.reason) == 0);
    }
    return 0;
}
