/*
 * Prometheus utilisation series into the accounting store (include/gpusched/usage_ingest.h):
 * each sample mapped to the pod whose allocation interval held that GPU at that time, the value
 * split by charged shares on a shared GPU, written with gs_usage_add_util() one range query per
 * transaction. A series with a pod_uid label is the pod's own measured value (the agent's
 * per-process sums, issue 9): it goes to that pod as it is, never split again.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, st_mtim */
#include "gpusched/usage_ingest.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "prom_int.h"

/*
 * Steps per range query: a day at the default 60 s. Prometheus refuses more than 11,000 points
 * per series; the smaller bound keeps a big cluster's answer in memory (1,000 GPU series of
 * 1,440 points are about 50 MB of JSON).
 */
#define STEPS_PER_QUERY 1440

static GS_PRINTF(3, 4) void put_msg(char *msg, size_t cap, const char *fmt, ...)
{
    if (!msg || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
}

/* One GPU grant of one allocation interval: who held the GPU from when to when, how much. */
struct holder {
    char *uid, *ns, *name, *node;
    int64_t start_ms, end_ms; /* [start, end) */
    double share;             /* charged share of the GPU */
    uint32_t gpu_index;
};

struct holders {
    struct holder *v;
    size_t n, cap;
};

static void holders_clear(struct holders *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].uid);
        free(h->v[i].ns);
        free(h->v[i].name);
        free(h->v[i].node);
    }
    h->n = 0;
}

static char *col_dup(sqlite3_stmt *st, int c)
{
    const char *t = (const char *)sqlite3_column_text(st, c);
    if (!t)
        return NULL;
    size_t n = strlen(t);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, t, n + 1);
    return d;
}

static bool same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* The last committed heartbeat, or INT64_MAX when there is none (nothing committed). */
static int heartbeat(sqlite3 *db, int64_t *hb, char *msg, size_t cap)
{
    sqlite3_stmt *st = NULL;
    *hb = INT64_MAX;
    int rc = sqlite3_prepare_v2(db, "SELECT t_ms FROM heartbeat WHERE id = 1", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        *hb = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        put_msg(msg, cap, "reading the heartbeat: %s", sqlite3_errmsg(db));
        return GS_EIO;
    }
    return GS_OK;
}

/* The grants of intervals in [from, to) on the series' GPU (by UUID, else node and index). */
static int load_holders(sqlite3_stmt *st, const char *uuid, const char *node, int64_t gpu,
                        struct holders *h, char *msg, size_t cap)
{
    holders_clear(h);
    if (uuid)
        (void)sqlite3_bind_text(st, 4, uuid, -1, SQLITE_STATIC);
    else
        (void)sqlite3_bind_null(st, 4);
    if (node)
        (void)sqlite3_bind_text(st, 5, node, -1, SQLITE_STATIC);
    else
        (void)sqlite3_bind_null(st, 5);
    if (gpu >= 0)
        (void)sqlite3_bind_int64(st, 6, gpu);
    else
        (void)sqlite3_bind_null(st, 6);
    int rc;
    int err = GS_OK;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (h->n == h->cap) {
            size_t c = h->cap ? h->cap * 2 : 16;
            struct holder *v = realloc(h->v, c * sizeof(*v));
            if (!v) {
                err = GS_ENOMEM;
                break;
            }
            h->v = v;
            h->cap = c;
        }
        struct holder *x = &h->v[h->n++];
        *x = (struct holder){col_dup(st, 0),
                             col_dup(st, 1),
                             col_dup(st, 2),
                             col_dup(st, 3),
                             sqlite3_column_int64(st, 4),
                             sqlite3_column_int64(st, 5),
                             sqlite3_column_double(st, 6),
                             (uint32_t)sqlite3_column_int64(st, 7)};
        if (!x->uid || !x->node) {
            err = GS_ENOMEM;
            break;
        }
    }
    if (!err && rc != SQLITE_DONE) {
        put_msg(msg, cap, "reading allocation intervals: %s",
                sqlite3_errmsg(sqlite3_db_handle(st)));
        err = GS_EIO;
    } else if (err) {
        put_msg(msg, cap, "out of memory reading allocation intervals");
    }
    (void)sqlite3_reset(st);
    return err;
}

static const char holders_sql[] =
    "SELECT a.pod_uid, a.namespace, a.name, a.node, a.start_ms, coalesce(a.end_ms, ?3),"
    " g.charged, g.gpu_index FROM allocation a JOIN allocation_gpu g ON g.allocation_id = a.id"
    " WHERE a.node IS NOT NULL AND a.start_ms < ?2 AND coalesce(a.end_ms, ?3) > ?1 AND"
    " ((?4 IS NOT NULL AND g.gpu_uuid = ?4) OR"
    "  ((?4 IS NULL OR g.gpu_uuid IS NULL) AND a.node = ?5 AND g.gpu_index = ?6))";

/* A label holding a device index ("0".."4095"), or -1. */
static int64_t gpu_index_label(const char *v)
{
    if (!v)
        return -1;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > 4095)
        return -1;
    return x;
}

int gs_usage_ingest_matrix(struct gs_usage_store *s, const struct gs_prom_matrix *m,
                           int64_t from_ms, int64_t to_ms, struct gs_usage_ingest_stats *stats,
                           char *msg, size_t cap)
{
    sqlite3 *db = gs_usage_db(s);
    int64_t hb;
    int err = heartbeat(db, &hb, msg, cap);
    if (err)
        return err;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, holders_sql, -1, &st, NULL) != SQLITE_OK) {
        put_msg(msg, cap, "reading allocation intervals: %s", sqlite3_errmsg(db));
        return GS_EIO;
    }
    (void)sqlite3_bind_int64(st, 1, from_ms);
    (void)sqlite3_bind_int64(st, 2, to_ms);
    (void)sqlite3_bind_int64(st, 3, hb);
    struct holders h = {0};
    for (uint32_t i = 0; i < m->nseries && !err; i++) {
        const struct gs_prom_series *se = &m->series[i];
        uint64_t in = 0;
        for (uint32_t k = 0; k < se->n; k++)
            in += se->t_ms[k] >= from_ms && se->t_ms[k] < to_ms;
        stats->series++;
        stats->samples += in;
        if (!in)
            continue;
        if (gs_prom_label(se, "GPU_I_ID")) {
            stats->skipped_mig += in;
            continue;
        }
        const char *uuid = gs_prom_label(se, "UUID");
        const char *node = gs_prom_label(se, "Hostname");
        if (!node)
            node = gs_prom_label(se, "node");
        int64_t gpu = gpu_index_label(gs_prom_label(se, "gpu"));
        if (!uuid && (!node || gpu < 0)) {
            stats->skipped_no_gpu += in;
            continue;
        }
        const char *ns = gs_prom_label(se, "namespace"), *pod = gs_prom_label(se, "pod");
        /* pod_uid: the agent measured this pod's processes; ns/pod alone: a pod series that
         * repeats the device's value (dcgm-exporter, agents before issue 9), to be split. */
        const char *uid = gs_prom_label(se, "pod_uid");
        bool measured = uid != NULL;
        bool labelled = measured || (ns && pod);
        if ((err = load_holders(st, uuid, node, gpu, &h, msg, cap)) != GS_OK)
            break;
        for (uint32_t k = 0; k < se->n; k++) {
            int64_t t = se->t_ms[k];
            if (t < from_ms || t >= to_ms)
                continue;
            double v = se->value[k];
            if (!(v >= 0 && v <= 100)) {
                stats->skipped_value++;
                continue;
            }
            double sum = 0;
            size_t active = 0;
            const struct holder *target = NULL;
            for (size_t j = 0; j < h.n; j++) {
                const struct holder *x = &h.v[j];
                if (t < x->start_ms || t >= x->end_ms)
                    continue;
                active++;
                sum += x->share;
                if (measured   ? same(x->uid, uid)
                    : labelled ? same(x->ns, ns) && same(x->name, pod)
                               : true)
                    target = x;
            }
            if (active == 0) {
                stats->skipped_no_holder++;
                continue;
            }
            if (labelled && !target) {
                stats->skipped_other_pod++;
                continue;
            }
            if (!labelled && active > 1) {
                stats->skipped_shared++;
                continue;
            }
            /* The GPU's value split by charged shares among its holders then (#587); a
             * measured value is the pod's already. */
            double u = measured || sum <= 0 ? v : v * target->share / sum;
            if (u > 100)
                u = 100;
            if ((err = gs_usage_add_util(s, t, target->uid, target->node, target->gpu_index, u)) !=
                GS_OK) {
                put_msg(msg, cap, "%s", gs_usage_errmsg(s));
                break;
            }
            stats->written++;
        }
    }
    holders_clear(&h);
    free(h.v);
    sqlite3_finalize(st);
    return err;
}

/* The span of the store's allocation intervals: first start to last end (open: heartbeat). */
static int allocation_span(sqlite3 *db, int64_t *lo, int64_t *hi, char *msg, size_t cap)
{
    int64_t hb;
    int err = heartbeat(db, &hb, msg, cap);
    if (err)
        return err;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT min(start_ms), max(coalesce(end_ms, ?1)), count(*) FROM "
                                "allocation WHERE node IS NOT NULL",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        (void)sqlite3_bind_int64(st, 1, hb == INT64_MAX ? INT64_MIN : hb);
        rc = sqlite3_step(st);
    }
    if (rc != SQLITE_ROW) {
        put_msg(msg, cap, "reading allocation intervals: %s", sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return GS_EIO;
    }
    bool any = sqlite3_column_int64(st, 2) > 0;
    *lo = sqlite3_column_int64(st, 0);
    *hi = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    if (!any) {
        put_msg(msg, cap,
                "the store has no allocation interval on a node: no period and no pod "
                "to map samples to");
        return GS_ENOENT;
    }
    return GS_OK;
}

/* Ingest adds rows: the store open for writing, no batch of the caller's open. GS_OK;
 * GS_EINVAL. */
static int check_writable(struct gs_usage_store *s, char *msg, size_t cap)
{
    sqlite3 *db = gs_usage_db(s);
    if (sqlite3_db_readonly(db, "main") == 1) {
        put_msg(msg, cap, "the store is open read-only");
        return GS_EINVAL;
    }
    if (!sqlite3_get_autocommit(db)) {
        put_msg(msg, cap, "a batch is open: gs_usage_commit() it first");
        return GS_EINVAL;
    }
    return GS_OK;
}

int gs_usage_ingest_prometheus(struct gs_usage_store *s, const struct gs_usage_ingest_options *opt,
                               struct gs_usage_ingest_stats *stats, int64_t *from_used,
                               int64_t *to_used, char *msg, size_t cap)
{
    memset(stats, 0, sizeof(*stats));
    put_msg(msg, cap, "%s", "");
    int err0 = check_writable(s, msg, cap);
    if (err0 != GS_OK)
        return err0;
    int64_t step = opt->step_ms ? opt->step_ms : 60000;
    if (step < 1000) {
        put_msg(msg, cap, "step: %lld ms is under Prometheus' 1 s resolution here",
                (long long)step);
        return GS_EINVAL;
    }
    int64_t from = opt->from_ms, to = opt->to_ms;
    if (from == INT64_MIN || to == INT64_MAX) {
        int64_t lo, hi;
        int err = allocation_span(gs_usage_db(s), &lo, &hi, msg, cap);
        if (err)
            return err;
        if (from == INT64_MIN)
            from = lo;
        if (to == INT64_MAX)
            to = hi;
    }
    if (from_used)
        *from_used = from;
    if (to_used)
        *to_used = to;
    if (from >= to) {
        put_msg(msg, cap, "the period is empty (from is not before to)");
        return GS_EINVAL;
    }
    const char *query = opt->query && opt->query[0] ? opt->query : "DCGM_FI_DEV_GPU_UTIL";
    for (int64_t cs = from; cs < to;) {
        /* Evaluation times cs, cs + step, ... while below to; at most STEPS_PER_QUERY. */
        int64_t room = (to - 1 - cs) / step;
        int64_t n = room + 1 < STEPS_PER_QUERY ? room + 1 : STEPS_PER_QUERY;
        struct gs_prom_range q = {opt->base_url,       query, cs,
                                  cs + (n - 1) * step, step,  opt->timeout_ms};
        struct gs_prom_matrix *m = NULL;
        uint64_t written = stats->written;
        int err = gs_prom_query_range(&q, &m, msg, cap);
        stats->queries++;
        if (err)
            return err;
        err = gs_usage_ingest_matrix(s, m, from, to, stats, msg, cap);
        gs_prom_matrix_free(m);
        if (err) {
            gs_usage_rollback(s);
            return err;
        }
        /* INT64_MIN: the heartbeat stays the writer's (samples are not events). */
        if (stats->written > written && (err = gs_usage_commit(s, INT64_MIN)) != GS_OK) {
            put_msg(msg, cap, "%s", gs_usage_errmsg(s));
            return err;
        }
        if (n < STEPS_PER_QUERY)
            break;
        cs += n * step;
    }
    return GS_OK;
}

/* Reads a whole file into a NUL-terminated buffer (at most 512 MiB), and its mtime. */
static int read_file(const char *path, char **body, size_t *len, int64_t *mtime_ms, char *msg,
                     size_t cap)
{
    *body = NULL;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        put_msg(msg, cap, "%.200s: cannot read: %s", path, strerror(errno));
        if (f)
            (void)fclose(f);
        return GS_EIO;
    }
    *mtime_ms = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
    size_t n = 0, c = 65536;
    char *b = malloc(c);
    int err = b ? GS_OK : GS_ENOMEM;
    while (!err) {
        if (n + 1 >= c) {
            if (c >= ((size_t)512 << 20)) {
                put_msg(msg, cap, "%.200s: over 512 MiB", path);
                err = GS_EIO;
                break;
            }
            char *q = realloc(b, c * 2);
            if (!q) {
                err = GS_ENOMEM;
                break;
            }
            b = q;
            c *= 2;
        }
        size_t got = fread(b + n, 1, c - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                put_msg(msg, cap, "%.200s: cannot read: %s", path, strerror(errno));
                err = GS_EIO;
            }
            break;
        }
    }
    (void)fclose(f);
    if (err) {
        if (err == GS_ENOMEM)
            put_msg(msg, cap, "%.200s: out of memory", path);
        free(b);
        return err;
    }
    b[n] = '\0';
    *body = b;
    *len = n;
    return GS_OK;
}

int gs_usage_ingest_agent(struct gs_usage_store *s, const struct gs_usage_agent_options *opt,
                          struct gs_usage_ingest_stats *stats, int64_t *t_used, char *msg,
                          size_t cap)
{
    memset(stats, 0, sizeof(*stats));
    put_msg(msg, cap, "%s", "");
    int err0 = check_writable(s, msg, cap);
    if (err0 != GS_OK)
        return err0;
    const char *src = opt->source ? opt->source : "";
    bool url = strncmp(src, "http://", 7) == 0 || strncmp(src, "https://", 8) == 0;
    char *body = NULL;
    size_t len = 0;
    int64_t t = opt->t_ms, mtime_ms = 0;
    int err = url ? gs__prom_get(src, opt->timeout_ms, &body, &len, msg, cap)
                  : read_file(src, &body, &len, &mtime_ms, msg, cap);
    if (err)
        return err;
    if (t == INT64_MIN) {
        struct timespec now;
        (void)clock_gettime(CLOCK_REALTIME, &now);
        t = url ? (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 : mtime_ms;
    }
    if (t_used)
        *t_used = t;
    struct gs_prom_matrix *m = NULL;
    char pmsg[400];
    const char *metric = opt->metric && opt->metric[0] ? opt->metric : "DCGM_FI_DEV_GPU_UTIL";
    err = gs_prom_parse_text(body, len, metric, t, &m, pmsg, sizeof(pmsg));
    free(body);
    if (err) {
        put_msg(msg, cap, "%.200s: %s", src, pmsg);
        return err;
    }
    stats->queries = 1;
    /* The samples' own span: the scrape time, or their timestamps. */
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (uint32_t i = 0; i < m->nseries; i++)
        for (uint32_t k = 0; k < m->series[i].n; k++) {
            int64_t st = m->series[i].t_ms[k];
            lo = st < lo ? st : lo;
            hi = st > hi ? st : hi;
        }
    if (m->nseries) {
        err = gs_usage_ingest_matrix(s, m, lo, hi < INT64_MAX ? hi + 1 : hi, stats, msg, cap);
        if (err)
            gs_usage_rollback(s);
        else if (stats->written && (err = gs_usage_commit(s, INT64_MIN)) != GS_OK)
            put_msg(msg, cap, "%s", gs_usage_errmsg(s));
    }
    gs_prom_matrix_free(m);
    return err;
}
