/*
 * Fuzz driver of the node agent's assignment table (src/agent/devplugin_assign.c): the pods it
 * reads come from the API server, their annotation gpusched.io/assigned-gpus from whoever can
 * write pods. The input is JSON: a list of Pod objects (or one), each applied as a watch's
 * ADDED; then claims of 1..4 devices of nvidia.com/gpu and of nvidia.com/mig-1g.18gb are asked
 * and consumed until none is left, and every pod removed. Checked: no crash, leak or UB, claims
 * as long as asked with GPU indices below 64 and shares within the annotation's bounds (milli
 * -1..1000, mem_mib 0..2^40, a MIG entry's start 0..7 and -1 for others), and the table empty
 * at the end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpusched/dpkube.h"
#include "gpusched/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The oracle's checks stay in every build (assert would vanish under NDEBUG, and with it the
 * consume call inside one). */
#define check(ok) check_at((ok), __LINE__)
static void check_at(int ok, int line)
{
    if (!ok) {
        (void)fprintf(stderr, "fuzz_dpkube: check failed at line %d\n", line);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (doc == NULL)
        return 0;
    struct gs_dp_assign *t = NULL;
    if (gs_dp_assign_new(&t) != GS_OK) {
        json_decref(doc);
        return 0;
    }
    size_t n = json_is_array(doc) ? json_array_size(doc) : 1;
    for (size_t i = 0; i < n; i++) {
        char why[300];
        const json_t *pod = json_is_array(doc) ? json_array_get(doc, i) : doc;
        int rc = gs_dp_assign_update(t, pod, why, sizeof why);
        check(rc == GS_OK || rc == GS_EINVAL || rc == GS_ENOMEM);
    }
    /* Every claim is handed out once: at most 16 GPUs per pod, so this ends. */
    static const char *const resources[] = {"nvidia.com/gpu", "nvidia.com/mig-1g.18gb"};
    for (size_t r = 0; r < sizeof resources / sizeof resources[0]; r++)
        for (uint32_t count = 1; count <= 4; count++) {
            struct gs_dp_claim c;
            for (int guard = 0;
                 guard < 1000 && gs_dp_assign_match(t, resources[r], count, &c) == GS_OK; guard++) {
                check(c.n_gpus == count);
                for (uint32_t k = 0; k < c.n_gpus; k++) {
                    check(c.gpu[k] < 64);
                    check(c.milli[k] >= -1 && c.milli[k] <= 1000);
                    check(c.mem_mib[k] >= 0 && c.mem_mib[k] <= ((int64_t)1 << 40));
                    if (c.mig_profile[k][0] != '\0')
                        check(c.mig_start[k] >= 0 && c.mig_start[k] <= 7);
                    else
                        check(c.mig_start[k] == -1);
                }
                check(gs_dp_assign_consume(t, c.uid, count, NULL) == GS_OK);
            }
        }
    for (size_t i = 0; i < n; i++) {
        const json_t *pod = json_is_array(doc) ? json_array_get(doc, i) : doc;
        const char *uid =
            json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
        if (uid != NULL)
            gs_dp_assign_remove(t, uid);
    }
    check(gs_dp_assign_count(t) == 0);
    gs_dp_assign_free(t);
    json_decref(doc);
    return 0;
}
