/*
 * libFuzzer target for the Kubernetes object translation: YAML or JSON text (a cluster dump, as
 * `gpusched whatif --cluster` reads it) through the YAML reader (src/k8s/yamljson.c) into
 * kworld (src/k8s/kworld.c), then a few scheduling cycles of the core. Beyond the sanitizers'
 * checks it asserts the contracts: a refused document or object leaves a message; every call
 * returns a documented code; after each cycle the engine's own invariant check passes (GPU and
 * queue books, states), whatever the objects said.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kworld.h"
#include "gpusched/tenant.h"
#include "k8s/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define check(ok) check_at((ok), __LINE__)
static void check_at(int ok, int line)
{
    if (!ok) {
        (void)fprintf(stderr, "fuzz_kworld: check failed at line %d\n", line);
        abort();
    }
}

/* ctx: the input's size; a uid is read from the input, so it is no longer (and ASan sees a
 * read past a freed or foreign string). */
static void on_pending(void *ctx, const char *ns, const char *name, const char *uid,
                       const char *reason)
{
    check(ns && name && reason && *reason);
    check(!uid || strlen(uid) <= *(const size_t *)ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    char err[512] = "";
    json_t *doc = NULL;
    if (gs_yaml_to_json("fuzz.yaml", (const char *)data, size, &doc, err, sizeof(err)) != 0) {
        check(err[0] != '\0' && doc == NULL);
        return 0;
    }
    json_t *items = json_is_array(doc) ? doc : json_object_get(doc, "items");
    struct gs_kworld_config cfg = {.policy = "bestfit", .preemption = true, .reclaim = true};
    struct gs_kworld *w = NULL;
    check(gs_kworld_new(&cfg, &w) == GS_OK);
    for (size_t i = 0; i < json_array_size(items); i++) {
        err[0] = '\0';
        int rc = gs_kworld_apply(w, GS_KADDED, json_array_get(items, i), 0, err, sizeof(err));
        check(rc == GS_OK || rc == GS_ENOMEM || (rc == GS_EINVAL && err[0] != '\0'));
    }
    for (int c = 0; c < 4; c++) {
        uint32_t changes = 0;
        err[0] = '\0';
        int rc = gs_kworld_cycle(w, (int64_t)1000 * c, &changes, err, sizeof(err));
        check(rc == GS_OK || rc == GS_ENOMEM || (rc == GS_EINVAL && err[0] != '\0'));
        if (rc != GS_OK)
            break;
        char msg[256];
        int ck = gs_engine_check(gs_kworld_engine(w), msg, sizeof(msg));
        if (ck != GS_OK)
            (void)fprintf(stderr, "fuzz_kworld: engine check: %s\n", msg);
        check(ck == GS_OK);
        if (changes == 0)
            break;
    }
    if (gs_kworld_engine(w))
        gs_kworld_each_pending(w, on_pending, &size);
    gs_kworld_free(w);
    json_decref(doc);
    return 0;
}
