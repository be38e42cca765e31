/*
 * Internal to kworld (src/k8s): a pod's node selection read into the core's filter spec, and
 * its object with avoided nodes. Not a public header.
 */
#ifndef GPUSCHED_K8S_KSELECT_H
#define GPUSCHED_K8S_KSELECT_H

#include <jansson.h>

#include "gpusched/filter.h"

/** A pod's filter spec and the arrays it points into (strings borrowed from the pod object). */
struct gs__kfilter {
    const char **selector;           /**< nodeSelector entries as "key=value" (into sel_block) */
    struct gs_sel_term *req_terms;   /**< required node affinity terms */
    char *sel_block;                 /**< the "key=value" strings, one block */
    struct gs_pref_term *pref_terms; /**< preferred node affinity terms */
    struct gs_sel_expr *exprs;       /**< every term's expressions */
    const char **values;             /**< every expression's values */
    struct gs_toleration *tols;      /**< tolerations */
    struct gs_filter_spec f;         /**< the spec, pointing into the arrays above */
};

/**
 * Reads spec.nodeSelector, spec.affinity.nodeAffinity (required terms ORed, expressions and
 * fields ANDed; preferred terms with weights) and spec.tolerations into k (zeroed first by the
 * caller). Strings stay borrowed from spec: k is valid while the pod object is.
 * @return GS_OK; GS_EINVAL (an unknown operator or effect, a key or value that is not a
 *         string); GS_ENOMEM. Release with gs__kfilter_fini either way.
 */
int gs__kfilter_read(struct gs__kfilter *k, const json_t *spec);

/** Frees the arrays and zeroes k. */
void gs__kfilter_fini(struct gs__kfilter *k);

/**
 * A deep copy of a pod object whose required node affinity also has one `matchFields
 * metadata.name NotIn [node]` per node of `nodes` (an array of strings) ANDed into every term,
 * or a term of its own when it has none (the API allows one value per field NotIn).
 * @return a new reference; NULL when out of memory or the pod has no spec object.
 */
json_t *gs__kpod_with_avoided(const json_t *pod, const json_t *nodes);

#endif /* GPUSCHED_K8S_KSELECT_H */
