/*
 * libFuzzer target for the Prometheus range-query body parser (gs_prom_parse_range(), what
 * `report ingest` reads from a server). Besides the sanitizers' checks it asserts what the
 * parser promises: GS_OK with a matrix whose nsamples is the sum of its series' samples and
 * whose labels all read back through gs_prom_label() (an empty value as none), or a refusal
 * (GS_EPARSE, GS_EREJECTED; GS_ENOMEM only under memory pressure) with no matrix and a message.
 * A broken promise aborts, which the fuzzer reports as a crash.
 */
#include <math.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_prom_matrix *m = NULL;
    char msg[256];
    int rc = gs_prom_parse_range((const char *)data, size, &m, msg, sizeof(msg));
    check(rc == GS_OK || rc == GS_EPARSE || rc == GS_EREJECTED || rc == GS_ENOMEM);
    if (rc != GS_OK) {
        check(m == NULL && msg[0] != '\0');
        return 0;
    }
    check(m != NULL);
    uint64_t n = 0;
    for (uint32_t i = 0; i < m->nseries; i++) {
        const struct gs_prom_series *s = &m->series[i];
        n += s->n;
        for (uint32_t k = 0; k < s->nlabels; k++) {
            const char *v = gs_prom_label(s, s->label_names[k]);
            check(s->label_values[k][0] ? v != NULL : v == NULL);
        }
        for (uint32_t k = 0; k < s->n; k++)
            check(s->t_ms[k] > INT64_C(-10000000000000000) &&
                  s->t_ms[k] < INT64_C(10000000000000000));
    }
    check(n == m->nsamples);
    gs_prom_matrix_free(m);
    return 0;
}
