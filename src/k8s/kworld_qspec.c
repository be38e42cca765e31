/*
 * Queue objects' resource amounts and per-GPU-model bounds (kworld_qspec.h).
 */
#include "kworld_qspec.h"

#include <stdio.h>
#include <string.h>

#include "gpusched/err.h"
#include "kjson.h"
#include "kworld_xres.h"

int gs__kqueue_amount(const json_t *v, int res, bool kai, int64_t dflt, int64_t *out)
{
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (json_is_number(v) && json_number_value(v) < 0) {
        *out = GS_UNLIMITED;
        return 0;
    }
    if (res == GS_RES_GPU)
        return gs__kquantity_json(v, 1e-3, true, out); /* GPUs, fractional: to milli */
    if (res == GS_RES_CPU)
        return gs__kquantity_json(v, kai ? 1.0 : 1e-3, true, out); /* KAI: millicores */
    return gs__kquantity_json(v, kai ? 1048576.0 / 1e6 : 1048576.0, true, out); /* KAI: MB */
}

int gs__kqueue_by_model(const json_t *by_model, struct gs_cluster *c, struct gs_model_quota *out,
                        uint32_t *n, char *why, size_t cap)
{
    *n = 0;
    if (!by_model || json_is_null(by_model))
        return 0;
    char shown[2][48]; /* jshow() writes at most 46 bytes */
    if (!json_is_object(by_model)) {
        (void)snprintf(why, cap,
                       "spec.resources.gpu.byModel is %s, not a mapping from GPU model to "
                       "{quota, limit}",
                       jshow(by_model, shown[0], sizeof(shown[0])));
        return -1;
    }
    if (json_object_size(by_model) > GS_MODELS_MAX) {
        (void)snprintf(why, cap, "spec.resources.gpu.byModel names %zu models, more than %d",
                       json_object_size(by_model), GS_MODELS_MAX);
        return -1;
    }
    const char *model;
    const json_t *v;
    json_object_foreach((json_t *)by_model, model, v)
    {
        if (!*model || strchr(model, '|')) {
            (void)snprintf(why, cap,
                           "spec.resources.gpu.byModel: \"%.60s\" is not a GPU model name "
                           "(non-empty, no '|')",
                           model);
            return -1;
        }
        if (!json_is_object(v)) {
            (void)snprintf(why, cap, "spec.resources.gpu.byModel.%.60s is %s, not {quota, limit}",
                           model, jshow(v, shown[0], sizeof(shown[0])));
            return -1;
        }
        struct gs_model_quota *e = &out[*n];
        const char *bad = NULL;
        const json_t *qv = json_object_get(v, "quota"), *lv = json_object_get(v, "limit");
        if (gs__kqueue_amount(qv, GS_RES_GPU, false, 0, &e->quota_milli) != 0 ||
            e->quota_milli == GS_UNLIMITED)
            bad = "quota";
        else if (gs__kqueue_amount(lv, GS_RES_GPU, false, GS_UNLIMITED, &e->limit_milli) != 0)
            bad = "limit";
        if (bad) {
            (void)snprintf(why, cap,
                           "spec.resources.gpu.byModel.%.60s.%s is %s, not a number of GPUs", model,
                           bad, jshow(bad[0] == 'q' ? qv : lv, shown[0], sizeof(shown[0])));
            return -1;
        }
        if (e->limit_milli < e->quota_milli) {
            (void)snprintf(
                why, cap, "spec.resources.gpu.byModel.%.60s.limit: %s is below the quota %s", model,
                jshow(lv, shown[0], sizeof(shown[0])), jshow(qv, shown[1], sizeof(shown[1])));
            return -1;
        }
        int err = gs_cluster_model_id(c, model, &e->model);
        if (err) {
            (void)snprintf(why, cap, "spec.resources.gpu.byModel.%.60s: %s", model,
                           err == GS_ELIMIT ? "the cluster has too many GPU models"
                                            : gs_strerror(err));
            return -1;
        }
        (*n)++;
    }
    return 0;
}
