/*
 * libFuzzer target for the Prometheus text exposition parser (gs_prom_parse_text(), what
 * `report ingest --agent` reads from a node agent's /metrics). Besides the sanitizers' checks
 * it asserts what the parser promises: GS_OK with a matrix of one sample per series, each at
 * the default time or its own timestamp, whose labels all read back through gs_prom_label()
 * (an empty value as none), the same input filtered by a metric name giving at most as many
 * series; or a refusal (GS_EPARSE; GS_ENOMEM only under memory pressure) with no matrix and a
 * message naming a line. A broken promise aborts, which the fuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/usage_ingest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

#define T_DEFAULT INT64_C(1796083200000)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_prom_matrix *m = NULL;
    char msg[256];
    int rc = gs_prom_parse_text((const char *)data, size, NULL, T_DEFAULT, &m, msg, sizeof(msg));
    check(rc == GS_OK || rc == GS_EPARSE || rc == GS_ENOMEM);
    if (rc != GS_OK) {
        check(m == NULL && (rc == GS_ENOMEM || strncmp(msg, "line ", 5) == 0));
        return 0;
    }
    check(m != NULL && m->nsamples == m->nseries);
    for (uint32_t i = 0; i < m->nseries; i++) {
        const struct gs_prom_series *s = &m->series[i];
        check(s->n == 1);
        for (uint32_t k = 0; k < s->nlabels; k++) {
            const char *v = gs_prom_label(s, s->label_names[k]);
            check(s->label_values[k][0] ? v != NULL : v == NULL);
        }
    }
    struct gs_prom_matrix *f = NULL;
    rc = gs_prom_parse_text((const char *)data, size, "DCGM_FI_DEV_GPU_UTIL", T_DEFAULT, &f, msg,
                            sizeof(msg));
    check(rc == GS_OK || rc == GS_ENOMEM);
    if (rc == GS_OK)
        check(f->nseries <= m->nseries);
    gs_prom_matrix_free(f);
    gs_prom_matrix_free(m);
    return 0;
}
