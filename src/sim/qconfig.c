/*
 * Queue configuration loader (contract in include/gpusched/qconfig.h, format in docs/queues.md).
 *
 * The text is read in two stages. The shared YAML walker (src/util/yaml.h) first builds a tree
 * that keeps every node's source position and enforces this reader's limits, the ones that
 * protect everything after it: nesting depth, the number of nodes with aliases expanded (so a
 * "billion laughs" document stops early), no tags, one document. The tree is then walked along
 * the fixed schema:
 * every mapping is checked for unknown and repeated keys, every value for type, unit and range,
 * and cross-references (parents, rule targets, PriorityClasses) are resolved by name through
 * hash tables, so a file with 10,000 queues takes linear time. The first problem stops the read
 * with the position of the offending node and the key it belongs to.
 *
 * Sections are read in a fixed order whatever their order in the file (apiVersion, kind,
 * preemptMinRuntime, queues, priorityClasses, assignment, podGroups), because the later ones refer
 * to the earlier ones. The tree lives in a scratch arena freed when parsing ends; the configuration
 * keeps what it needs (names, positions for apply's diagnostics) in its own arena.
 */
#define _POSIX_C_SOURCE 200809L /* fileno, fstat, strerror_r (XSI form) */

#include "qconfig_int.h"

#include "gpusched/err.h"
#include "util/file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- queues ----------------------------------------------------------------------------- */

/* Reads resources.gpu.byModel: a mapping from GPU model names to {quota, limit}. */
static int parse_by_model(struct pctx *c, const struct gs_yaml_node *m, struct qqueue *q)
{
    static const char *const keys[] = {"quota", "limit", NULL};
    char a[32], b[32];
    int rc = gs__qc_need_kind(c, m, "byModel", GS_YAML_MAP);
    if (rc)
        return rc;
    if (m->n == 0)
        return FAIL(c, m, "byModel", "empty mapping; leave byModel out for no per-model bounds");
    if (m->n > LIST_MAX)
        return FAIL(c, m->u.items[2 * (size_t)LIST_MAX], "byModel", "more than %u models",
                    LIST_MAX);
    q->models = gs__arena_alloc(&c->qc->ar, m->n * sizeof *q->models);
    if (q->models == NULL)
        return gs__qc_oom(c);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct gs_yaml_node *k = m->u.items[2 * (size_t)i],
                                  *v = m->u.items[2 * (size_t)i + 1];
        struct qmodel *x = &q->models[i];
        memset(x, 0, sizeof *x);
        x->limit = GS_UNLIMITED;
        x->at = x->quota_at = k->at;
        if ((rc = gs__qc_get_name(c, k, "byModel", &x->model)) != GS_OK)
            return rc;
        if (strchr(x->model, '|') != NULL)
            return FAIL(c, k, "byModel", "a model name cannot contain '|'");
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(q->models[j].model, x->model) == 0)
                return FAIL(c, k, "byModel", "duplicate model '%s' (first on line %u)", x->model,
                            q->models[j].at.line);
        if ((rc = gs__qc_check_map(c, v, x->model, keys)) != GS_OK)
            return rc;
        const struct gs_yaml_node *quota = gs__qc_get(v, "quota"), *limit = gs__qc_get(v, "limit");
        if (quota != NULL) {
            if ((rc = gs__qc_get_quantity(c, quota, "quota", GS_RES_GPU, false, &x->quota)) !=
                GS_OK)
                return rc;
            x->quota_at = quota->at;
        }
        if (limit != NULL) {
            if ((rc = gs__qc_get_quantity(c, limit, "limit", GS_RES_GPU, true, &x->limit)) != GS_OK)
                return rc;
            if (x->limit < x->quota)
                return FAIL(c, limit, "limit", "%s limit %s is below the quota %s", x->model,
                            gs__qc_fmt_qty(a, sizeof a, GS_RES_GPU, x->limit),
                            gs__qc_fmt_qty(b, sizeof b, GS_RES_GPU, x->quota));
        }
        q->nmodels++;
    }
    return GS_OK;
}

static int parse_resource(struct pctx *c, const struct gs_yaml_node *m, int r, struct qqueue *q)
{
    static const char *const keys[] = {"quota", "limit", "overQuotaWeight", NULL};
    static const char *const gkeys[] = {"quota", "limit", "overQuotaWeight", "byModel", NULL};
    char a[32], b[32];
    int rc = gs__qc_check_map(c, m, gs__qc_res_names[r], r == GS_RES_GPU ? gkeys : keys);
    if (rc)
        return rc;
    const struct gs_yaml_node *quota = gs__qc_get(m, "quota"), *limit = gs__qc_get(m, "limit");
    const struct gs_yaml_node *w = gs__qc_get(m, "overQuotaWeight");
    if (quota != NULL) {
        if ((rc = gs__qc_get_quantity(c, quota, "quota", r, false, &q->quota[r])) != GS_OK)
            return rc;
        q->quota_set[r] = true;
        q->quota_at[r] = quota->at;
    }
    if (limit != NULL) {
        if ((rc = gs__qc_get_quantity(c, limit, "limit", r, true, &q->limit[r])) != GS_OK)
            return rc;
        q->limit_at[r] = limit->at;
        if (q->limit[r] < q->quota[r])
            return FAIL(c, limit, "limit", "%s limit %s is below the quota %s", gs__qc_res_names[r],
                        gs__qc_fmt_qty(a, sizeof a, r, q->limit[r]),
                        gs__qc_fmt_qty(b, sizeof b, r, q->quota[r]));
    }
    if (w != NULL) {
        double v = 0;
        if ((rc = gs__qc_get_weight(c, w, "overQuotaWeight", &v)) != GS_OK)
            return rc;
        if (q->weight_from >= 0 && v != q->weight)
            return FAIL(c, w, "overQuotaWeight",
                        "overQuotaWeight %g differs from the %g given for %s; a queue has one "
                        "over-quota weight",
                        v, q->weight, gs__qc_res_names[q->weight_from]);
        q->weight = v;
        q->weight_from = r;
    }
    const struct gs_yaml_node *bm = r == GS_RES_GPU ? gs__qc_get(m, "byModel") : NULL;
    if (bm != NULL && (rc = parse_by_model(c, bm, q)) != GS_OK)
        return rc;
    for (uint32_t i = 0; i < q->nmodels; i++)
        if (q->limit[GS_RES_GPU] != GS_UNLIMITED && q->models[i].quota > q->limit[GS_RES_GPU])
            return gs__qc_fail_at(c, GS_EPARSE, &q->models[i].quota_at, "quota",
                                  "%s quota %s is above the queue's gpu limit %s",
                                  q->models[i].model,
                                  gs__qc_fmt_qty(a, sizeof a, GS_RES_GPU, q->models[i].quota),
                                  gs__qc_fmt_qty(b, sizeof b, GS_RES_GPU, q->limit[GS_RES_GPU]));
    return GS_OK;
}

/* Children's per-model quotas within their parent's entry for the model, where it has one. */
static int check_model_sums(struct pctx *c)
{
    struct qqueue *q = c->qc->q;
    char a[32], b[32];
    for (uint32_t i = 0; i < c->qc->nq; i++) {
        if (q[i].parent == NONE)
            continue;
        struct qqueue *par = &q[q[i].parent];
        for (uint32_t k = 0; k < q[i].nmodels; k++)
            for (uint32_t j = 0; j < par->nmodels; j++)
                if (strcmp(par->models[j].model, q[i].models[k].model) == 0)
                    par->models[j].child_sum += q[i].models[k].quota;
    }
    for (uint32_t i = 0; i < c->qc->nq; i++)
        for (uint32_t j = 0; j < q[i].nmodels; j++) {
            const struct qmodel *x = &q[i].models[j];
            if (x->child_sum > x->quota)
                return gs__qc_fail_at(c, GS_EPARSE, &x->quota_at, "quota",
                                      "the children's %s quotas sum to %s, above this queue's %s "
                                      "quota %s",
                                      x->model,
                                      gs__qc_fmt_qty(a, sizeof a, GS_RES_GPU, x->child_sum),
                                      x->model, gs__qc_fmt_qty(b, sizeof b, GS_RES_GPU, x->quota));
        }
    return GS_OK;
}

/* Reads one queue entry; its parent is kept as a name node in parents[i]. */
static int parse_queue(struct pctx *c, const struct gs_yaml_node *m, struct qqueue *q,
                       const struct gs_yaml_node **parent)
{
    static const char *const keys[] = {"name", "parentQueue", "resources", "preemptMinRuntime",
                                       NULL};
    static const char *const rkeys[] = {"gpu", "cpu", "memory", NULL};
    const struct gs_yaml_node *n;
    int rc = gs__qc_check_map(c, m, "queues", keys);
    if (rc)
        return rc;
    if ((rc = gs__qc_require(c, m, "name", &n)) != GS_OK ||
        (rc = gs__qc_get_object_name(c, n, "name", &q->name)))
        return rc;
    q->at = n->at;
    if (strcmp(q->name, "root") == 0)
        return FAIL(c, n, "name", "'root' is the implicit top of the tree; name queues otherwise");
    const struct qqueue *first = gs__strmap_get(&c->qnames, q->name, n->n);
    if (first != NULL)
        return FAIL(c, n, "name", "duplicate queue name '%s' (first on line %u)", q->name,
                    first->at.line);
    if (gs__strmap_put(&c->qnames, q->name, n->n, q) != GS_OK)
        return gs__qc_oom(c);
    *parent = gs__qc_get(m, "parentQueue");
    if (*parent != NULL) {
        const char *pname;
        if ((rc = gs__qc_get_name(c, *parent, "parentQueue", &pname)) != GS_OK)
            return rc;
        q->parent_at = (*parent)->at;
        if (strcmp(pname, "root") == 0)
            *parent = NULL;
    }
    const struct gs_yaml_node *res = gs__qc_get(m, "resources");
    if (res != NULL) {
        if ((rc = gs__qc_check_map(c, res, "resources", rkeys)) != GS_OK)
            return rc;
        for (int r = 0; r < GS_RES_COUNT; r++) {
            const struct gs_yaml_node *rm = gs__qc_get(res, gs__qc_res_names[r]);
            if (rm != NULL && (rc = parse_resource(c, rm, r, q)) != GS_OK)
                return rc;
        }
    }
    const struct gs_yaml_node *mr = gs__qc_get(m, "preemptMinRuntime");
    if (mr != NULL) {
        if ((rc = gs__qc_get_duration(c, mr, "preemptMinRuntime", &q->min_runtime_ms)) != GS_OK)
            return rc;
        q->min_runtime_set = true;
    }
    return GS_OK;
}

/* Finds a cycle of parents through queue k and reports it at its first member in file order. */
static int report_cycle(struct pctx *c, uint32_t k)
{
    const struct qqueue *q = c->qc->q;
    uint32_t first = k;
    for (uint32_t j = q[k].parent; j != k; j = q[j].parent)
        if (j < first)
            first = j;
    char chain[200];
    size_t len = 0;
    uint32_t j = first;
    do {
        int w = snprintf(chain + len, sizeof chain - len, "%s -> ", q[j].name);
        if (w < 0 || (size_t)w >= sizeof chain - len)
            break;
        len += (size_t)w;
        j = q[j].parent;
    } while (j != first);
    if (len < sizeof chain)
        (void)snprintf(chain + len, sizeof chain - len, "%s", q[first].name);
    return gs__qc_fail_at(c, GS_EPARSE, &q[first].parent_at, "parentQueue",
                          "parent queues form a cycle: %s", chain);
}

/*
 * Links parents, then checks the tree: no cycle, not too deep; derives unset parent quotas as
 * their children's sum; checks children's sums against set quotas and limits against derived
 * quotas; resolves inherited min run times; fixes the order apply adds queues in.
 */
static int link_queues(struct pctx *c, const struct gs_yaml_node **parents)
{
    struct gs_qconfig *qc = c->qc;
    struct qqueue *q = qc->q;
    uint32_t nq = qc->nq;
    char a[32], b[32];
    int rc = GS_OK;

    for (uint32_t i = 0; i < nq; i++) {
        if (parents[i] == NULL)
            continue;
        struct qqueue *p = gs__strmap_get(&c->qnames, parents[i]->u.s, parents[i]->n);
        if (p == NULL)
            return FAIL(c, parents[i], "parentQueue", "unknown parent queue '%s'", parents[i]->u.s);
        q[i].parent = (uint32_t)(p - q);
    }
    /* Cycles: walk up from each queue, stamping the walk; meeting the stamp again is a cycle. */
    uint32_t *stamp = calloc(nq ? nq : 1, sizeof *stamp);
    qc->order = gs__arena_alloc(&qc->ar, (nq ? nq : 1) * sizeof *qc->order);
    if (stamp == NULL || qc->order == NULL) {
        free(stamp);
        return gs__qc_oom(c);
    }
    for (uint32_t i = 0; i < nq && rc == GS_OK; i++) {
        uint32_t j = i;
        while (j != NONE && stamp[j] == 0) {
            stamp[j] = i + 1;
            j = q[j].parent;
        }
        if (j != NONE && stamp[j] == i + 1)
            rc = report_cycle(c, j);
    }
    free(stamp);
    if (rc)
        return rc;
    /* Depths, each walk cut just past the limit; the first queue too deep in file order fails. */
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t d = 0;
        for (uint32_t j = i; j != NONE && d <= GS_QCONFIG_DEPTH_MAX; j = q[j].parent)
            d++;
        if (d > GS_QCONFIG_DEPTH_MAX)
            return gs__qc_fail_at(c, GS_EPARSE, &q[i].at, "name",
                                  "queue '%s' is nested more than %u levels deep", q[i].name,
                                  GS_QCONFIG_DEPTH_MAX);
        q[i].depth = d;
        if (q[i].parent != NONE)
            q[q[i].parent].children++;
    }
    /* Order: file order with each queue moved after its parent (its unadded ancestors are
       added first, top down). */
    bool *added = calloc(nq ? nq : 1, sizeof *added);
    if (added == NULL)
        return gs__qc_oom(c);
    uint32_t no = 0;
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t chain[GS_QCONFIG_DEPTH_MAX], len = 0;
        for (uint32_t j = i; j != NONE && !added[j]; j = q[j].parent)
            chain[len++] = j;
        while (len > 0) {
            uint32_t k = chain[--len];
            added[k] = true;
            qc->order[no++] = k;
        }
    }
    free(added);
    /* Children's sums, children before parents. */
    int64_t(*sum)[GS_RES_COUNT] = calloc(nq ? nq : 1, sizeof *sum);
    if (sum == NULL)
        return gs__qc_oom(c);
    for (uint32_t k = nq; k-- > 0;) {
        struct qqueue *x = &q[qc->order[k]];
        for (int r = 0; r < GS_RES_COUNT; r++) {
            if (x->children > 0 && !x->quota_set[r])
                x->quota[r] = sum[qc->order[k]][r];
            if (x->parent != NONE)
                sum[x->parent][r] += x->quota[r];
        }
    }
    for (uint32_t i = 0; i < nq && rc == GS_OK; i++) {
        for (int r = 0; r < GS_RES_COUNT && rc == GS_OK; r++) {
            if (q[i].children == 0)
                continue;
            if (q[i].quota_set[r] && sum[i][r] > q[i].quota[r])
                rc = gs__qc_fail_at(
                    c, GS_EPARSE, &q[i].quota_at[r], "quota",
                    "the children's %s quotas sum to %s, above this queue's quota %s",
                    gs__qc_res_names[r], gs__qc_fmt_qty(a, sizeof a, r, sum[i][r]),
                    gs__qc_fmt_qty(b, sizeof b, r, q[i].quota[r]));
            else if (!q[i].quota_set[r] && q[i].limit[r] < q[i].quota[r])
                rc = gs__qc_fail_at(c, GS_EPARSE, &q[i].limit_at[r], "limit",
                                    "%s limit %s is below the quota %s (the sum of the children's)",
                                    gs__qc_res_names[r],
                                    gs__qc_fmt_qty(a, sizeof a, r, q[i].limit[r]),
                                    gs__qc_fmt_qty(b, sizeof b, r, q[i].quota[r]));
        }
    }
    free(sum);
    if (rc || (rc = check_model_sums(c)) != GS_OK)
        return rc;
    /* Min run times: own, else the parent's (resolved first), else the top-level default. */
    for (uint32_t k = 0; k < nq; k++) {
        struct qqueue *x = &q[qc->order[k]];
        if (!x->min_runtime_set)
            x->min_runtime_ms =
                x->parent != NONE ? q[x->parent].min_runtime_ms : qc->min_runtime_ms;
    }
    return GS_OK;
}

static int parse_queues(struct pctx *c, const struct gs_yaml_node *seq)
{
    struct gs_qconfig *qc = c->qc;
    int rc = gs__qc_need_kind(c, seq, "queues", GS_YAML_SEQ);
    if (rc)
        return rc;
    if (seq->n > GS_QCONFIG_QUEUES_MAX)
        return FAIL(c, seq->u.items[GS_QCONFIG_QUEUES_MAX], "queues", "more than %u queues",
                    GS_QCONFIG_QUEUES_MAX);
    if (seq->n == 0)
        return FAIL(c, seq, "queues", "no queues; a configuration needs at least one");
    qc->q = gs__arena_alloc(&qc->ar, seq->n * sizeof *qc->q);
    const struct gs_yaml_node **parents = calloc(seq->n, sizeof(const struct gs_yaml_node *));
    if (qc->q == NULL || parents == NULL) {
        free(parents);
        return gs__qc_oom(c);
    }
    for (uint32_t i = 0; i < seq->n && rc == GS_OK; i++) {
        struct qqueue *q = &qc->q[i];
        memset(q, 0, sizeof *q);
        q->parent = NONE;
        q->weight = 1;
        q->weight_from = -1;
        for (int r = 0; r < GS_RES_COUNT; r++)
            q->limit[r] = GS_UNLIMITED;
        rc = parse_queue(c, seq->u.items[i], q, &parents[i]);
        qc->nq = i + 1;
    }
    if (rc == GS_OK)
        rc = link_queues(c, parents);
    free(parents);
    return rc;
}

/* ---- PriorityClasses -------------------------------------------------------------------- */

static int parse_classes(struct pctx *c, const struct gs_yaml_node *seq)
{
    static const char *const keys[] = {"name", "value", "preemptible", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = gs__qc_need_kind(c, seq, "priorityClasses", GS_YAML_SEQ);
    if (rc)
        return rc;
    if (seq->n > CLASSES_MAX)
        return FAIL(c, seq->u.items[CLASSES_MAX], "priorityClasses", "more than %u PriorityClasses",
                    CLASSES_MAX);
    qc->pc = gs__arena_alloc(&qc->ar, (seq->n ? seq->n : 1) * sizeof *qc->pc);
    if (qc->pc == NULL)
        return gs__qc_oom(c);
    for (uint32_t i = 0; i < seq->n; i++) {
        const struct gs_yaml_node *m = seq->u.items[i], *n, *v;
        struct qclass *pc = &qc->pc[i];
        int64_t value = 0;
        if ((rc = gs__qc_check_map(c, m, "priorityClasses", keys)) != GS_OK ||
            (rc = gs__qc_require(c, m, "name", &n)) != GS_OK ||
            (rc = gs__qc_get_object_name(c, n, "name", &pc->name)) != GS_OK)
            return rc;
        pc->at = n->at;
        const struct qclass *first = gs__strmap_get(&c->cnames, pc->name, n->n);
        if (first != NULL)
            return FAIL(c, n, "name", "duplicate PriorityClass name '%s' (first on line %u)",
                        pc->name, first->at.line);
        if (gs__strmap_put(&c->cnames, pc->name, n->n, pc) != GS_OK)
            return gs__qc_oom(c);
        if ((rc = gs__qc_require(c, m, "value", &v)) != GS_OK ||
            (rc = gs__qc_get_int(c, v, "value", INT32_MIN, INT32_MAX, &value)) != GS_OK)
            return rc;
        pc->value = (int32_t)value;
        pc->preemptible = -1;
        const struct gs_yaml_node *p = gs__qc_get(m, "preemptible");
        if (p != NULL) {
            bool b = false;
            if ((rc = gs__qc_get_bool(c, p, "preemptible", &b)) != GS_OK)
                return rc;
            pc->preemptible = b;
        }
        qc->npc = i + 1;
    }
    return GS_OK;
}

/* ---- assignment ------------------------------------------------------------------------- */

static int parse_match(struct pctx *c, const struct gs_yaml_node *m, struct qrule *rule)
{
    static const char *const keys[] = {"qos", "gpuModel", "numGpu", "namePrefix", NULL};
    static const char *const nkeys[] = {"min", "max", NULL};
    int rc = gs__qc_check_map(c, m, "match", keys);
    if (rc)
        return rc;
    const struct gs_yaml_node *qos = gs__qc_get(m, "qos"), *models = gs__qc_get(m, "gpuModel");
    const struct gs_yaml_node *num = gs__qc_get(m, "numGpu"), *prefix = gs__qc_get(m, "namePrefix");
    if (qos != NULL) {
        if ((rc = gs__qc_need_kind(c, qos, "qos", GS_YAML_SEQ)) != GS_OK)
            return rc;
        if (qos->n == 0)
            return FAIL(c, qos, "qos", "empty list; leave qos out to match any QoS");
        for (uint32_t i = 0; i < qos->n; i++) {
            const struct gs_yaml_node *e = qos->u.items[i];
            if ((rc = gs__qc_need_kind(c, e, "qos", GS_YAML_SCALAR)) != GS_OK)
                return rc;
            int k = gs__qc_qos_index(e->u.s, e->n);
            if (k < 0)
                return gs__qc_bad_qos(c, e, "qos");
            rule->qos_mask |= (uint8_t)(1u << k);
        }
    }
    if (models != NULL) {
        if ((rc = gs__qc_need_kind(c, models, "gpuModel", GS_YAML_SEQ)) != GS_OK)
            return rc;
        if (models->n == 0)
            return FAIL(c, models, "gpuModel", "empty list; leave gpuModel out to match any");
        if (models->n > LIST_MAX)
            return FAIL(c, models->u.items[LIST_MAX], "gpuModel", "more than %u models", LIST_MAX);
        rule->models = gs__arena_alloc(&c->qc->ar, models->n * sizeof *rule->models);
        if (rule->models == NULL)
            return gs__qc_oom(c);
        for (uint32_t i = 0; i < models->n; i++) {
            const struct gs_yaml_node *e = models->u.items[i];
            if ((rc = gs__qc_get_name(c, e, "gpuModel", &rule->models[i])) != GS_OK)
                return rc;
            if (strchr(rule->models[i], '|') != NULL)
                return FAIL(c, e, "gpuModel", "a model name cannot contain '|'");
        }
        rule->nmodels = models->n;
    }
    if (num != NULL) {
        const struct gs_yaml_node *lo, *hi;
        int64_t v = 0;
        if ((rc = gs__qc_check_map(c, num, "numGpu", nkeys)) != GS_OK)
            return rc;
        rule->has_num = true;
        rule->num_max = NUM_GPU_MAX;
        if ((lo = gs__qc_get(num, "min")) != NULL) {
            if ((rc = gs__qc_get_int(c, lo, "min", 0, NUM_GPU_MAX, &v)) != GS_OK)
                return rc;
            rule->num_min = (uint32_t)v;
        }
        if ((hi = gs__qc_get(num, "max")) != NULL) {
            if ((rc = gs__qc_get_int(c, hi, "max", 0, NUM_GPU_MAX, &v)) != GS_OK)
                return rc;
            rule->num_max = (uint32_t)v;
            if (rule->num_max < rule->num_min)
                return FAIL(c, hi, "max", "max %u is below min %u", rule->num_max, rule->num_min);
        }
    }
    if (prefix != NULL) {
        if ((rc = gs__qc_get_name(c, prefix, "namePrefix", &rule->prefix)) != GS_OK)
            return rc;
        rule->prefix_len = prefix->n;
    }
    return GS_OK;
}

static int parse_hash(struct pctx *c, const struct gs_yaml_node *m, struct qrule *rule)
{
    int rc = gs__qc_need_kind(c, m, "hashQueues", GS_YAML_MAP);
    if (rc)
        return rc;
    if (m->n == 0)
        return FAIL(c, m, "hashQueues", "no queues to hash over");
    rule->hash = gs__arena_alloc(&c->qc->ar, m->n * sizeof *rule->hash);
    if (rule->hash == NULL)
        return gs__qc_oom(c);
    uint32_t nq = c->qc->nq;
    uint32_t *first = calloc((size_t)nq + 1, sizeof *first);
    if (first == NULL)
        return gs__qc_oom(c);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct gs_yaml_node *k = m->u.items[2 * (size_t)i],
                                  *v = m->u.items[2 * (size_t)i + 1];
        char buf[64];
        const char *field = k->kind == GS_YAML_SCALAR ? k->u.s : "hashQueues";
        int64_t w = 0;
        if (k->kind != GS_YAML_SCALAR) {
            free(first);
            return FAIL(c, k, "hashQueues", "a key must be a queue name, found %s",
                        gs__yaml_describe(k, buf, sizeof buf));
        }
        if ((rc = gs__qc_leaf_ref(c, k, field, &rule->hash[i].queue)) != GS_OK) {
            free(first);
            return rc;
        }
        /* first[q] = 1 + the entry that named queue q: duplicates found in O(1). */
        uint32_t q = rule->hash[i].queue;
        if (q < nq && first[q]) {
            uint32_t j = first[q] - 1;
            free(first);
            return FAIL(c, k, field, "duplicate key '%.60s' (first on line %u)", k->u.s,
                        m->u.items[2 * (size_t)j]->at.line);
        }
        if (q < nq)
            first[q] = i + 1;
        if ((rc = gs__qc_get_int(c, v, field, 1, HASH_WEIGHT_MAX, &w)) != GS_OK) {
            free(first);
            return rc;
        }
        rule->hash[i].weight = (uint32_t)w;
        rule->weight_sum += (uint64_t)w;
    }
    free(first);
    rule->nhash = m->n;
    return GS_OK;
}

static int parse_rules(struct pctx *c, const struct gs_yaml_node *seq)
{
    static const char *const keys[] = {"match", "queue", "hashQueues", "priorityClass", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = gs__qc_need_kind(c, seq, "rules", GS_YAML_SEQ);
    if (rc)
        return rc;
    if (seq->n > RULES_MAX)
        return FAIL(c, seq->u.items[RULES_MAX], "rules", "more than %u rules", RULES_MAX);
    qc->rules = gs__arena_alloc(&qc->ar, (seq->n ? seq->n : 1) * sizeof *qc->rules);
    if (qc->rules == NULL)
        return gs__qc_oom(c);
    for (uint32_t i = 0; i < seq->n; i++) {
        const struct gs_yaml_node *m = seq->u.items[i];
        struct qrule *rule = &qc->rules[i];
        memset(rule, 0, sizeof *rule);
        rule->queue = NONE;
        rule->pclass = NONE;
        if ((rc = gs__qc_check_map(c, m, "rules", keys)) != GS_OK)
            return rc;
        const struct gs_yaml_node *match = gs__qc_get(m, "match"), *queue = gs__qc_get(m, "queue");
        const struct gs_yaml_node *hash = gs__qc_get(m, "hashQueues"),
                                  *pc = gs__qc_get(m, "priorityClass");
        if (match != NULL && (rc = parse_match(c, match, rule)) != GS_OK)
            return rc;
        if (queue != NULL && hash != NULL)
            return FAIL(c, hash, "hashQueues", "a rule takes either queue or hashQueues, not both");
        if (queue == NULL && hash == NULL)
            return FAIL(c, m, "queue", "a rule needs queue or hashQueues");
        if (queue != NULL && (rc = gs__qc_leaf_ref(c, queue, "queue", &rule->queue)) != GS_OK)
            return rc;
        if (hash != NULL && (rc = parse_hash(c, hash, rule)) != GS_OK)
            return rc;
        if (pc != NULL && (rc = gs__qc_class_ref(c, pc, "priorityClass", &rule->pclass)) != GS_OK)
            return rc;
        qc->nrules = i + 1;
    }
    return GS_OK;
}

static int parse_assignment(struct pctx *c, const struct gs_yaml_node *m)
{
    static const char *const keys[] = {"defaultQueue", "defaultPriorityClass", "priorityByQoS",
                                       "rules", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = gs__qc_check_map(c, m, "assignment", keys);
    if (rc)
        return rc;
    const struct gs_yaml_node *dq = gs__qc_get(m, "defaultQueue"),
                              *dc = gs__qc_get(m, "defaultPriorityClass");
    const struct gs_yaml_node *map = gs__qc_get(m, "priorityByQoS"),
                              *rules = gs__qc_get(m, "rules");
    if (dq != NULL && (rc = gs__qc_leaf_ref(c, dq, "defaultQueue", &qc->default_queue)) != GS_OK)
        return rc;
    if (dc != NULL &&
        (rc = gs__qc_class_ref(c, dc, "defaultPriorityClass", &qc->default_class)) != GS_OK)
        return rc;
    if (map != NULL) {
        if ((rc = gs__qc_need_kind(c, map, "priorityByQoS", GS_YAML_MAP)) != GS_OK)
            return rc;
        for (uint32_t i = 0; i < map->n; i++) {
            const struct gs_yaml_node *k = map->u.items[2 * (size_t)i],
                                      *v = map->u.items[2 * (size_t)i + 1];
            char buf[64];
            if (k->kind != GS_YAML_SCALAR)
                return FAIL(c, k, "priorityByQoS", "a key must be a QoS name, found %s",
                            gs__yaml_describe(k, buf, sizeof buf));
            int q = gs__qc_qos_index(k->u.s, k->n);
            if (q < 0)
                return gs__qc_bad_qos(c, k, k->u.s);
            if (qc->qos_class[q] != NONE)
                return FAIL(c, k, k->u.s, "duplicate key '%s'", gs__qc_qos_names[q]);
            if ((rc = gs__qc_class_ref(c, v, gs__qc_qos_names[q], &qc->qos_class[q])) != GS_OK)
                return rc;
        }
    }
    if (rules != NULL && (rc = parse_rules(c, rules)) != GS_OK)
        return rc;
    return GS_OK;
}

/* ---- podGroups -------------------------------------------------------------------------- */

static int parse_pod_groups(struct pctx *c, const struct gs_yaml_node *seq)
{
    static const char *const keys[] = {"queues", "minGpu", "window", "minMember", "timeout", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = gs__qc_need_kind(c, seq, "podGroups", GS_YAML_SEQ);
    if (rc)
        return rc;
    if (seq->n > RULES_MAX)
        return FAIL(c, seq->u.items[RULES_MAX], "podGroups", "more than %u podGroups rules",
                    RULES_MAX);
    qc->pg = gs__arena_alloc(&qc->ar, (seq->n ? seq->n : 1) * sizeof *qc->pg);
    if (qc->pg == NULL)
        return gs__qc_oom(c);
    for (uint32_t i = 0; i < seq->n; i++) {
        const struct gs_yaml_node *m = seq->u.items[i], *n;
        struct qpgroup *g = &qc->pg[i];
        int64_t v;
        memset(g, 0, sizeof *g);
        g->min_gpu = 2;
        if ((rc = gs__qc_check_map(c, m, "podGroups", keys)) != GS_OK)
            return rc;
        if ((n = gs__qc_get(m, "queues")) != NULL) {
            if ((rc = gs__qc_need_kind(c, n, "queues", GS_YAML_SEQ)) != GS_OK)
                return rc;
            if (n->n == 0)
                return FAIL(c, n, "queues", "empty list; leave queues out to look at every queue");
            if (n->n > LIST_MAX)
                return FAIL(c, n->u.items[LIST_MAX], "queues", "more than %u queues in one rule",
                            LIST_MAX);
            g->queues = gs__arena_alloc(&qc->ar, n->n * sizeof *g->queues);
            if (g->queues == NULL)
                return gs__qc_oom(c);
            for (uint32_t k = 0; k < n->n; k++)
                if ((rc = gs__qc_leaf_ref(c, n->u.items[k], "queues", &g->queues[k])) != GS_OK)
                    return rc;
            g->nqueues = n->n;
        }
        if ((n = gs__qc_get(m, "minGpu")) != NULL) {
            if ((rc = gs__qc_get_int(c, n, "minGpu", 1, NUM_GPU_MAX, &v)) != GS_OK)
                return rc;
            g->min_gpu = (uint32_t)v;
        }
        if ((rc = gs__qc_require(c, m, "minMember", &n)) != GS_OK ||
            (rc = gs__qc_get_int(c, n, "minMember", 2, 1000, &v)) != GS_OK)
            return rc;
        g->size = (uint32_t)v;
        if ((rc = gs__qc_require(c, m, "window", &n)) != GS_OK ||
            (rc = gs__qc_get_duration(c, n, "window", &g->window_ms)) != GS_OK)
            return rc;
        if (g->window_ms == 0)
            return FAIL(c, n, "window", "a window of 0 groups nothing; give it a length");
        if ((n = gs__qc_get(m, "timeout")) != NULL &&
            (rc = gs__qc_get_duration(c, n, "timeout", &g->timeout_ms)) != GS_OK)
            return rc;
        qc->npg = i + 1;
    }
    return GS_OK;
}

/* ---- sharing ---------------------------------------------------------------------------- */

static int parse_sharing(struct pctx *c, const struct gs_yaml_node *seq)
{
    static const char *const keys[] = {"kind", "pods", "share", "gpuMemMib", "migProfile", NULL};
    static const char *const kinds[] = {"memory", "mig", "timeslice"};
    static const char *const pods[] = {"shared", "whole", "any"};
    struct gs_qconfig *qc = c->qc;
    int rc = gs__qc_need_kind(c, seq, "sharing", GS_YAML_SEQ);
    if (rc)
        return rc;
    if (seq->n > RULES_MAX)
        return FAIL(c, seq->u.items[RULES_MAX], "sharing", "more than %u sharing rules", RULES_MAX);
    qc->sh = gs__arena_alloc(&qc->ar, (seq->n ? seq->n : 1) * sizeof *qc->sh);
    if (qc->sh == NULL)
        return gs__qc_oom(c);
    for (uint32_t i = 0; i < seq->n; i++) {
        const struct gs_yaml_node *m = seq->u.items[i], *n;
        struct qshare *r = &qc->sh[i];
        const char *text;
        int64_t v;
        memset(r, 0, sizeof *r);
        r->share_pct = 100;
        if ((rc = gs__qc_check_map(c, m, "sharing", keys)) != GS_OK)
            return rc;
        if ((rc = gs__qc_require(c, m, "kind", &n)) != GS_OK ||
            (rc = gs__qc_get_name(c, n, "kind", &text)) != GS_OK)
            return rc;
        uint32_t k = 0;
        while (k < 3 && strcmp(text, kinds[k]) != 0)
            k++;
        if (k == 3)
            return FAIL(c, n, "kind", "unknown kind '%s'; one of memory, mig, timeslice", text);
        r->kind = (uint8_t)k;
        if ((n = gs__qc_get(m, "pods")) != NULL) {
            if ((rc = gs__qc_get_name(c, n, "pods", &text)) != GS_OK)
                return rc;
            k = 0;
            while (k < 3 && strcmp(text, pods[k]) != 0)
                k++;
            if (k == 3)
                return FAIL(c, n, "pods", "unknown pods '%s'; one of shared, whole, any", text);
            r->pods = (uint8_t)k;
        }
        if ((n = gs__qc_get(m, "share")) != NULL) {
            if ((rc = gs__qc_get_int(c, n, "share", 1, 100, &v)) != GS_OK)
                return rc;
            r->share_pct = (uint32_t)v;
        }
        n = gs__qc_get(m, "gpuMemMib");
        if (r->kind == QSHARE_MEMORY) {
            if ((rc = gs__qc_require(c, m, "gpuMemMib", &n)) != GS_OK ||
                (rc = gs__qc_get_int(c, n, "gpuMemMib", 1, INT64_C(1) << 40, &r->gpu_mem_mib)) !=
                    GS_OK)
                return rc;
        } else if (n != NULL) {
            return FAIL(c, n, "gpuMemMib", "gpuMemMib is for kind memory only");
        }
        n = gs__qc_get(m, "migProfile");
        if (r->kind == QSHARE_MIG) {
            if ((rc = gs__qc_require(c, m, "migProfile", &n)) != GS_OK ||
                (rc = gs__qc_get_name(c, n, "migProfile", &r->mig_profile)) != GS_OK)
                return rc;
            if (strlen(r->mig_profile) >= GS_MIG_NAME_MAX)
                return FAIL(c, n, "migProfile", "profile name of %zu bytes; at most %d",
                            strlen(r->mig_profile), GS_MIG_NAME_MAX - 1);
        } else if (n != NULL) {
            return FAIL(c, n, "migProfile", "migProfile is for kind mig only");
        }
        qc->nsh = i + 1;
    }
    return GS_OK;
}

/* ---- top level -------------------------------------------------------------------------- */

static int parse_root(struct pctx *c, const struct gs_yaml_node *root)
{
    static const char *const keys[] = {
        "apiVersion", "kind",      "preemptMinRuntime", "queues", "priorityClasses",
        "assignment", "podGroups", "sharing",           NULL};
    struct gs_qconfig *qc = c->qc;
    const struct gs_yaml_node *n;
    char buf[64];
    int rc;

    if (root->kind != GS_YAML_MAP)
        return FAIL(c, root, "", "expected a mapping with apiVersion, kind and queues, found %s",
                    gs__yaml_is_null(root) ? "null" : gs__yaml_describe(root, buf, sizeof buf));
    if ((rc = gs__qc_check_map(c, root, "", keys)) != GS_OK)
        return rc;
    if ((rc = gs__qc_require(c, root, "apiVersion", &n)) != GS_OK)
        return rc;
    if (!gs__yaml_text_is(n, API_VERSION))
        return FAIL(c, n, "apiVersion", "apiVersion must be '" API_VERSION "', found %s",
                    gs__yaml_describe(n, buf, sizeof buf));
    if ((rc = gs__qc_require(c, root, "kind", &n)) != GS_OK)
        return rc;
    if (!gs__yaml_text_is(n, KIND))
        return FAIL(c, n, "kind", "kind must be '" KIND "', found %s",
                    gs__yaml_describe(n, buf, sizeof buf));
    if ((n = gs__qc_get(root, "preemptMinRuntime")) != NULL &&
        (rc = gs__qc_get_duration(c, n, "preemptMinRuntime", &qc->min_runtime_ms)) != GS_OK)
        return rc;
    if ((rc = gs__qc_require(c, root, "queues", &n)) != GS_OK || (rc = parse_queues(c, n)) != GS_OK)
        return rc;
    if ((n = gs__qc_get(root, "priorityClasses")) != NULL && (rc = parse_classes(c, n)) != GS_OK)
        return rc;
    if ((n = gs__qc_get(root, "assignment")) != NULL && (rc = parse_assignment(c, n)) != GS_OK)
        return rc;
    if ((n = gs__qc_get(root, "podGroups")) != NULL && (rc = parse_pod_groups(c, n)) != GS_OK)
        return rc;
    if ((n = gs__qc_get(root, "sharing")) != NULL && (rc = parse_sharing(c, n)) != GS_OK)
        return rc;
    return GS_OK;
}

int gs_qconfig_parse(const char *buf, size_t len, const char *name, struct gs_qconfig **out,
                     struct gs_diag *diag)
{
    struct gs_diag scratch;
    struct pctx c;
    int rc;

    *out = NULL;
    memset(&c, 0, sizeof c);
    c.d = diag ? diag : &scratch;
    memset(c.d, 0, sizeof *c.d);
    (void)snprintf(c.d->file, sizeof c.d->file, "%s", name ? name : "");
    if (buf == NULL)
        len = 0;
    if (len > GS_QCONFIG_FILE_MAX)
        return gs__qc_fail_at(&c, GS_EIO, NULL, "", "file is %zu bytes, over the limit of %u", len,
                              GS_QCONFIG_FILE_MAX);
    c.qc = calloc(1, sizeof *c.qc);
    if (c.qc == NULL)
        return gs__qc_oom(&c);
    (void)snprintf(c.qc->name, sizeof c.qc->name, "%s", name ? name : "");
    c.qc->default_queue = NONE;
    c.qc->default_class = NONE;
    for (int i = 0; i < QOS_COUNT; i++)
        c.qc->qos_class[i] = NONE;
    static const struct gs_yaml_limits limits = {
        .bytes_max = GS_QCONFIG_FILE_MAX,
        .depth_max = GS_QCONFIG_DEPTH_MAX,
        .nodes_max = NODES_MAX,
        .aliases = true,
        .tags = false,
        .what = "a configuration",
    };
    rc = gs__yaml_load(buf, len, &limits, &c.doc, c.d);
    if (rc == GS_OK && c.doc.root == NULL)
        rc = gs__qc_fail_at(&c, GS_EPARSE, NULL, "", "empty file: no configuration");
    if (rc == GS_OK)
        rc = parse_root(&c, c.doc.root);
    gs__yaml_doc_fini(&c.doc);
    gs__strmap_fini(&c.qnames);
    gs__strmap_fini(&c.cnames);
    if (rc != GS_OK) {
        gs_qconfig_free(c.qc);
        return rc;
    }
    memset(c.d, 0, sizeof *c.d);
    *out = c.qc;
    return GS_OK;
}

int gs_qconfig_load(const char *path, struct gs_qconfig **out, struct gs_diag *diag)
{
    char *buf;
    size_t len;
    *out = NULL;
    int rc = gs__read_file(path, GS_QCONFIG_FILE_MAX, &buf, &len, diag);
    if (rc != GS_OK)
        return rc;
    rc = gs_qconfig_parse(buf, len, path, out, diag);
    free(buf);
    return rc;
}

void gs_qconfig_free(struct gs_qconfig *qc)
{
    if (qc == NULL)
        return;
    gs__arena_fini(&qc->ar);
    free(qc);
}
