/*
 * Node filters that Kubernetes users write: nodeSelector, required and preferred node affinity,
 * taints and tolerations, and cordon (spec.unschedulable), as filter classes of a cluster.
 *
 * A pod's filter is interned once into a *filter class*: pods with the same selector, affinity
 * and tolerations share one class, and the cluster keeps, per class, the set of nodes that pass
 * it as a bitmap. The set is computed when the class is created and kept exact on every node
 * change that can alter it (labels, taints, cordon, add, remove), touching only that node's bit
 * in each class. A decision then pays one bit test per node for its selector, whatever the
 * selector says. Resources (CPU, memory, GPUs) are not part of a class: they change on every
 * bind and are checked by the fit view (cluster.h).
 *
 * Semantics follow kube-scheduler's filter plugins (Kubernetes API reference, core/v1
 * NodeSelectorRequirement, Taint, Toleration; pkg/scheduler/framework/plugins/nodeaffinity,
 * tainttoleration, nodeunschedulable):
 *  - nodeSelector: every `key=value` must be a label of the node;
 *  - required node affinity: the terms are ORed, the expressions of a term ANDed; an empty term
 *    list matches nothing, as in Kubernetes; operators In, NotIn, Exists, DoesNotExist, Gt, Lt
 *    (Gt/Lt compare the label as a decimal integer; a label that is not one does not match);
 *    matchFields supports `metadata.name` with In and NotIn;
 *  - taints: a node with a NoSchedule or NoExecute taint that the pod does not tolerate is
 *    filtered out; PreferNoSchedule is a score;
 *  - a toleration matches a taint when the effects match (empty effect: all) and either the
 *    operator is Exists and the key matches (empty key with Exists: every taint) or the operator
 *    is Equal and key and value are equal;
 *  - a cordoned node is filtered out unless the pod tolerates the taint
 *    `node.kubernetes.io/unschedulable:NoSchedule`.
 * A node failing several filters is counted under the first in the order: unschedulable, taints,
 * affinity/selector (the order of gs_filter_verdict).
 *
 * Scores (preferred node affinity and PreferNoSchedule taints) are normalised as kube-scheduler
 * does and weighted by its defaults: NodeAffinity 2, TaintToleration 3; gs_sched_place() adds
 * them to the policy's 0..100 score.
 *
 * Classes are bounded: GS_FILTER_CLASSES_MAX live at once. A class whose last pod released it is
 * kept for reuse and recycled least recently released first.
 */
#ifndef GPUSCHED_FILTER_H
#define GPUSCHED_FILTER_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/cluster.h"

/** Most filter classes one cluster holds at once (class 0 included). */
#define GS_FILTER_CLASSES_MAX 4096
/** The default filter class: no selector, no affinity, no toleration. Always present. */
#define GS_FILTER_DEFAULT 0u
/** The taint key of a cordoned node, as Kubernetes names it. */
#define GS_TAINT_UNSCHEDULABLE "node.kubernetes.io/unschedulable"

/** Set in the id of a pinned filter (gs_filter_intern()); the rest of the id is its index. */
#define GS_FILTER_PINNED 0x80000000u

/** Operators of a node selector requirement (core/v1 NodeSelectorOperator). */
enum gs_sel_op {
    GS_SEL_IN = 0,
    GS_SEL_NOT_IN = 1,
    GS_SEL_EXISTS = 2,
    GS_SEL_DOES_NOT_EXIST = 3,
    GS_SEL_GT = 4,
    GS_SEL_LT = 5,
};

/** One requirement (matchExpressions or matchFields entry). Strings borrowed. */
struct gs_sel_expr {
    const char *key;           /**< label key; for a field, must be "metadata.name" */
    uint8_t op;                /**< enum gs_sel_op */
    bool field;                /**< a matchFields entry (In/NotIn on metadata.name only) */
    const char *const *values; /**< In/NotIn: one or more; Gt/Lt: exactly one integer; else 0 */
    uint32_t n_values;         /**< entries in values */
};

/** A node selector term: its expressions ANDed. An empty term matches no node. */
struct gs_sel_term {
    const struct gs_sel_expr *exprs; /**< borrowed */
    uint32_t n_exprs;
};

/** A preferred scheduling term with its weight. */
struct gs_pref_term {
    int32_t weight;          /**< 1..100 */
    struct gs_sel_term term; /**< as for required terms */
};

/** Toleration operators (core/v1 TolerationOperator). */
enum gs_toleration_op {
    GS_TOL_EQUAL = 0,  /**< key and value equal */
    GS_TOL_EXISTS = 1, /**< key present (empty key: every key) */
};

/** A toleration. Strings borrowed. */
struct gs_toleration {
    const char *key;   /**< may be NULL or empty only with GS_TOL_EXISTS */
    uint8_t op;        /**< enum gs_toleration_op */
    const char *value; /**< Equal: the value (NULL = empty); Exists: ignored */
    uint8_t effect;    /**< enum gs_taint_effect, or 0 for every effect */
};

/** A pod's node filter. Everything borrowed by gs_filter_intern(), which copies it. */
struct gs_filter_spec {
    const char *const *node_selector; /**< `key=value` entries, ANDed */
    uint32_t n_node_selector;
    const struct gs_sel_term *required; /**< requiredDuringScheduling terms, ORed */
    uint32_t n_required;                /**< 0: no required affinity (not "match nothing") */
    const struct gs_pref_term *preferred;
    uint32_t n_preferred;
    const struct gs_toleration *tolerations;
    uint32_t n_tolerations;
};

/** Why a node fails a filter class, in the order reasons are counted. */
enum gs_filter_verdict {
    GS_FILTER_PASS = 0,
    GS_FILTER_ABSENT = 1,        /**< a free node slot */
    GS_FILTER_UNSCHEDULABLE = 2, /**< cordoned, not tolerated */
    GS_FILTER_TAINT = 3,         /**< an untolerated NoSchedule/NoExecute taint */
    GS_FILTER_AFFINITY = 4,      /**< nodeSelector or required node affinity */
};

/**
 * Interns a filter: returns the class of an equal filter (same content, order included) or
 * creates one and computes its node set (O(nodes)). Takes one reference.
 *
 * A filter whose required node affinity is one term of one expression naming one node,
 * `matchFields metadata.name In [x]` (what a DaemonSet writes) or `kubernetes.io/hostname In
 * [x]`, is *pinned* when node x exists (and, for the label, carries kubernetes.io/hostname=x):
 * the id returned has GS_FILTER_PINNED set and names node x plus the class of the rest of the
 * filter (nodeSelector, preferred terms, tolerations; GS_FILTER_DEFAULT when there is none). It
 * makes no class of its own (gs_filter_class_count() does not see it; gs_filter_pin_count()
 * does), costs nothing on node changes, and is judged against its node directly: it passes that
 * node only (the same node: not a later one in its slot) when the rest of the filter passes it.
 * Equal filters on the same node share one pin. Every function below accepts pinned ids, except
 * gs_filter_nodes(). A filter naming a node that does not exist yet is an ordinary class.
 *
 * @param spec   borrowed; NULL or an empty spec gives GS_FILTER_DEFAULT.
 * @param out    receives the class id.
 * @return GS_OK; GS_EINVAL for a malformed spec (empty key, bad operator, In/NotIn without
 *         values, Gt/Lt without exactly one integer value, a field other than metadata.name or
 *         with an operator other than In/NotIn, a weight outside 1..100, Equal without key, an
 *         unknown effect, a nodeSelector entry without '='); GS_ELIMIT when
 *         GS_FILTER_CLASSES_MAX classes are referenced; GS_ENOMEM. Nothing changes on failure.
 */
int gs_filter_intern(struct gs_cluster *c, const struct gs_filter_spec *spec, uint32_t *out);

/** Takes one more reference on a class (a second pod of the same shape). */
void gs_filter_ref(struct gs_cluster *c, uint32_t cls);

/** Drops one reference. The default class and unknown ids are ignored. */
void gs_filter_release(struct gs_cluster *c, uint32_t cls);

/** Returns the number of classes referenced now (the default class counts). */
uint32_t gs_filter_class_count(const struct gs_cluster *c);

/**
 * Returns the node set of a class: bit i of word i/64 is set when node i passes it. Valid until
 * the next change of the cluster's nodes or classes. NULL for an unknown class and for a pinned
 * filter (see gs_filter_pinned()).
 */
const uint64_t *gs_filter_nodes(const struct gs_cluster *c, uint32_t cls);

/** Whether cls is a live class or pinned filter. */
bool gs_filter_valid(const struct gs_cluster *c, uint32_t cls);

/**
 * Whether cls is a pinned filter; then *node (may be NULL) receives the node slot it names (which
 * gs_filter_pass() still checks: the node may have gone).
 */
bool gs_filter_pinned(const struct gs_cluster *c, uint32_t cls, uint32_t *node);

/** The class of the rest of a pinned filter; cls itself for a class. */
uint32_t gs_filter_base(const struct gs_cluster *c, uint32_t cls);

/** Returns the number of pinned filters referenced now. */
uint32_t gs_filter_pin_count(const struct gs_cluster *c);

/**
 * A counter that moves whenever a node change (labels, taints, cordon, a node added or removed)
 * flips whether some node passes some interned class; it never moves otherwise. Who caches an
 * answer that depends on which nodes pass a class (the engine's pending charges, charge.h)
 * compares it to know when to recompute. O(1).
 */
uint64_t gs_filter_gen(const struct gs_cluster *c);

/** Whether node i passes class cls (one bit test). False for unknown ids. */
bool gs_filter_pass(const struct gs_cluster *c, uint32_t cls, uint32_t i);

/**
 * Judges node i against class cls from scratch (what the node set caches), naming the first
 * filter it fails.
 * @param taint  receives the first untolerated NoSchedule/NoExecute taint for GS_FILTER_TAINT
 *               (borrowed from the node); may be NULL.
 */
enum gs_filter_verdict gs_filter_check(const struct gs_cluster *c, uint32_t cls, uint32_t i,
                                       const struct gs_taint **taint);

/** Whether class cls has preferred terms (so affinity scores matter). */
bool gs_filter_has_preferences(const struct gs_cluster *c, uint32_t cls);

/** Returns the number of present nodes with at least one PreferNoSchedule taint. */
uint32_t gs_filter_prefer_tainted_nodes(const struct gs_cluster *c);

/**
 * The raw scores of node i for class cls, before normalisation:
 * @param affinity  receives the sum of the weights of the preferred terms the node matches.
 * @param taints    receives the number of PreferNoSchedule taints the pod does not tolerate.
 */
void gs_filter_raw_scores(const struct gs_cluster *c, uint32_t cls, uint32_t i, int64_t *affinity,
                          int64_t *taints);

#endif /* GPUSCHED_FILTER_H */
