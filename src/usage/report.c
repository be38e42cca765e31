/*
 * Usage reports (include/gpusched/usage_report.h): reads the accounting store over a period,
 * charges every allocation interval for the part inside it, groups, and writes table, CSV or
 * JSON (the HTML page is report_html.c).
 *
 * The totals reconcile by construction: idle = capacity - charged, each summed over the same
 * clipped intervals, so charged rows plus the idle row add up to the capacity-hours.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "gpusched/usage_report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "gpusched/charge.h"
#include "gpusched/err.h"

#define H_MS 3600000.0

static const char *const by_names[] = {"team", "queue",         "namespace", "model",
                                       "node", "priorityclass", "profile"};
/* The allocation column of each grouping: a fixed list, so it may be put into SQL text. NULL:
 * an expression (by_expr()). */
static const char *const by_columns[] = {"team", "queue",          "namespace", "model",
                                         "node", "priority_class", NULL};

/*
 * Writes the SQL of the group key of an allocation row named `alias` into buf: its column, or
 * for GS_USAGE_BY_PROFILE the kind of its grants (allocation_gpu): the MIG profile of a MIG
 * instance, "whole-gpu" for a whole GPU, "fraction" for a milli-GPU or memory share below a
 * whole GPU, "time-sliced" for a replica; a pod whose GPUs differ in kind gets the kinds
 * joined by '+' in name order, one without GPUs "no-gpu". Every part is fixed text.
 */
static void by_expr(enum gs_usage_by by, const char *alias, char *buf, size_t cap)
{
    if (by_columns[by]) {
        (void)snprintf(buf, cap, "%s.%s", alias, by_columns[by]);
        return;
    }
    (void)snprintf(buf, cap,
                   "(SELECT coalesce(group_concat(k, '+'), 'no-gpu') FROM (SELECT DISTINCT "
                   "CASE g.sharing WHEN 'mig' THEN coalesce(g.mig_profile, 'mig') "
                   "WHEN 'timeslice' THEN 'time-sliced' ELSE CASE WHEN g.gpu_milli >= 1000 "
                   "THEN 'whole-gpu' ELSE 'fraction' END END k FROM allocation_gpu g "
                   "WHERE g.allocation_id = %s.id ORDER BY k))",
                   alias);
}

const char *gs_usage_by_name(enum gs_usage_by by)
{
    return (unsigned)by < sizeof(by_names) / sizeof(by_names[0]) ? by_names[by] : NULL;
}

int gs_usage_by_find(const char *name, enum gs_usage_by *by)
{
    for (unsigned i = 0; i < sizeof(by_names) / sizeof(by_names[0]); i++) {
        if (strcmp(name, by_names[i]) == 0) {
            *by = (enum gs_usage_by)i;
            return GS_OK;
        }
    }
    return GS_ENOENT;
}

/* ---- time ------------------------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant, "chrono-Compatible
 * Low-Level Date Algorithms", days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* Reads exactly n digits. */
static bool digits(const char **p, int n, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return false;
        *v = *v * 10 + (unsigned)(**p - '0');
    }
    return true;
}

int gs_usage_parse_time(const char *s, int64_t *ms)
{
    const char *p = s;
    unsigned y, mo, d, h = 0, mi = 0, sec = 0, frac_ms = 0;
    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d) || mo < 1 || mo > 12 || d < 1 || d > 31)
        return GS_EPARSE;
    int64_t off_s = 0;
    if (*p) {
        if ((*p != 'T' && *p != 't' && *p != ' ') || (p++, !digits(&p, 2, &h)) || *p++ != ':' ||
            !digits(&p, 2, &mi) || *p++ != ':' || !digits(&p, 2, &sec) || h > 23 || mi > 59 ||
            sec > 60)
            return GS_EPARSE;
        if (*p == '.') {
            p++;
            unsigned scale = 100;
            if (*p < '0' || *p > '9')
                return GS_EPARSE;
            for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
                frac_ms += (unsigned)(*p - '0') * scale;
        }
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1;
            unsigned oh, om;
            if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om) || oh > 23 || om > 59)
                return GS_EPARSE;
            off_s = sign * (int64_t)(oh * 3600 + om * 60);
        } else {
            return GS_EPARSE;
        }
        if (*p)
            return GS_EPARSE;
    }
    int64_t days = days_from_civil(y, mo, d);
    int64_t yy;
    unsigned mm, dd;
    civil_from_days(days, &yy, &mm, &dd);
    if (mm != mo || dd != d) /* 2026-02-30 */
        return GS_EPARSE;
    *ms = ((days * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + sec) - off_s) * 1000 + frac_ms;
    return GS_OK;
}

void gs_usage_format_time(int64_t ms, char *buf, size_t cap)
{
    int64_t s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    int64_t days = s >= 0 ? s / 86400 : -((-s + 86399) / 86400);
    int64_t rem = s - days * 86400;
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    (void)snprintf(buf, cap, "%04lld-%02u-%02uT%02u:%02u:%02uZ", (long long)y, m, d,
                   (unsigned)(rem / 3600), (unsigned)(rem / 60 % 60), (unsigned)(rem % 60));
}

void gs_usage_format_time_tz(int64_t ms, int32_t tz_offset_min, char *buf, size_t cap)
{
    if (tz_offset_min == 0) {
        gs_usage_format_time(ms, buf, cap);
        return;
    }
    char local[40];
    gs_usage_format_time(ms + (int64_t)tz_offset_min * 60000, local, sizeof(local));
    size_t n = strlen(local);
    if (n > 0 && local[n - 1] == 'Z')
        local[n - 1] = '\0';
    int32_t a = tz_offset_min < 0 ? -tz_offset_min : tz_offset_min;
    (void)snprintf(buf, cap, "%s%c%02d:%02d", local, tz_offset_min < 0 ? '-' : '+', (int)(a / 60),
                   (int)(a % 60));
}

void gs_usage_report_format_time(const struct gs_usage_report *r, int64_t ms, char *buf, size_t cap)
{
    int32_t off = r->tz_offset_at ? r->tz_offset_at(ms, r->tz_ctx) : r->tz_offset_min;
    gs_usage_format_time_tz(ms, off, buf, cap);
}

int gs_usage_parse_tz(const char *s, int32_t *tz_offset_min)
{
    if (strcmp(s, "UTC") == 0 || strcmp(s, "utc") == 0 || strcmp(s, "Z") == 0) {
        *tz_offset_min = 0;
        return GS_OK;
    }
    const char *p = s + 1;
    unsigned h, m;
    if ((s[0] != '+' && s[0] != '-') || !digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &m) ||
        *p || h > 23 || m > 59)
        return GS_EPARSE;
    *tz_offset_min = (int32_t)(h * 60 + m) * (s[0] == '-' ? -1 : 1);
    return GS_OK;
}

/* ---- building ----------------------------------------------------------------------------- */

struct group_map {
    uint32_t *slot; /* row index + 1, 0 empty */
    uint32_t cap;   /* power of two */
};

struct build {
    struct gs_usage_report *r;
    struct group_map map;
    uint32_t rows_cap;
    sqlite3 *db;
    const char *path_msg;
    char *msg;
    size_t msg_cap;
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The row of `key`, added when new; *index receives its index. @return the row, or NULL when
 * out of memory. */
static struct gs_usage_row *group(struct build *b, const char *key, uint32_t *index)
{
    struct gs_usage_report *r = b->r;
    if (!key)
        key = "-";
    if (2 * (r->nrows + 1) > b->map.cap) {
        uint32_t cap = b->map.cap ? b->map.cap * 2 : 64;
        uint32_t *slot = calloc(cap, sizeof(*slot));
        if (!slot)
            return NULL;
        for (uint32_t i = 0; i < b->map.cap; i++) {
            if (!b->map.slot[i])
                continue;
            uint32_t j = (uint32_t)fnv1a(r->rows[b->map.slot[i] - 1].key) & (cap - 1);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = b->map.slot[i];
        }
        free(b->map.slot);
        b->map.slot = slot;
        b->map.cap = cap;
    }
    uint32_t j = (uint32_t)fnv1a(key) & (b->map.cap - 1);
    while (b->map.slot[j]) {
        if (strcmp(r->rows[b->map.slot[j] - 1].key, key) == 0) {
            *index = b->map.slot[j] - 1;
            return &r->rows[*index];
        }
        j = (j + 1) & (b->map.cap - 1);
    }
    if (r->nrows == b->rows_cap) {
        uint32_t cap = b->rows_cap ? b->rows_cap * 2 : 16;
        struct gs_usage_row *v = realloc(r->rows, cap * sizeof(*v));
        if (!v)
            return NULL;
        r->rows = v;
        b->rows_cap = cap;
    }
    char *k = malloc(strlen(key) + 1);
    if (!k)
        return NULL;
    memcpy(k, key, strlen(key) + 1);
    r->rows[r->nrows] = (struct gs_usage_row){.key = k,
                                              .used_gpu_h = NAN,
                                              .used_pct = NAN,
                                              .quota_gpu_h = NAN,
                                              .wait_mean_s = NAN,
                                              .wait_p95_s = NAN};
    b->map.slot[j] = ++r->nrows;
    *index = r->nrows - 1;
    return &r->rows[*index];
}

static int fail(struct build *b, const char *what)
{
    (void)snprintf(b->msg, b->msg_cap, "%s: %s: %s", b->path_msg, what, sqlite3_errmsg(b->db));
    return sqlite3_errcode(b->db) == SQLITE_NOMEM ? GS_ENOMEM : GS_EIO;
}

static int prepare(struct build *b, const char *sql, sqlite3_stmt **st)
{
    if (sqlite3_prepare_v2(b->db, sql, -1, st, NULL) != SQLITE_OK)
        return fail(b, "reading the database");
    return GS_OK;
}

/* One integer from a query; *found false (and *v 0) when it gives no row or NULL. */
static int one_int(struct build *b, const char *sql, int64_t *v, bool *found)
{
    sqlite3_stmt *st;
    int err = prepare(b, sql, &st);
    *v = 0;
    *found = false;
    if (err)
        return err;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *v = sqlite3_column_int64(st, 0);
        *found = true;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return fail(b, "reading the database");
    return GS_OK;
}

struct wait_rec {
    uint32_t row;
    double wait_s;
};

static int cmp_wait(const void *a, const void *b)
{
    const struct wait_rec *x = a, *y = b;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return x->wait_s < y->wait_s ? -1 : x->wait_s > y->wait_s;
}

/* An interval kept for the charts: its row and its clipped span. */
struct span {
    uint32_t row;
    double gpus;
    int64_t s, e;
};

static const struct gs_usage_report *sort_ctx;
static int cmp_row_index(const void *a, const void *b)
{
    const struct gs_usage_row *x = &sort_ctx->rows[*(const uint32_t *)a];
    const struct gs_usage_row *y = &sort_ctx->rows[*(const uint32_t *)b];
    if (x->charged_gpu_h != y->charged_gpu_h)
        return x->charged_gpu_h > y->charged_gpu_h ? -1 : 1;
    return strcmp(x->key, y->key);
}

static int cmp_idle(const void *a, const void *b)
{
    const struct gs_usage_idle *x = a, *y = b;
    if (x->held_h != y->held_h)
        return x->held_h > y->held_h ? -1 : 1;
    return strcmp(x->pod_uid, y->pod_uid);
}

/* Integrates a queue's GPU quota (a step function of its snapshots) over the period. */
static int quota_hours(struct build *b, const char *queue, double *out)
{
    struct gs_usage_report *r = b->r;
    sqlite3_stmt *st;
    int err = prepare(b,
                      "SELECT t_ms, gpu_quota_milli FROM quota_snapshot WHERE queue = ?1 "
                      "ORDER BY t_ms",
                      &st);
    *out = NAN;
    if (err)
        return err;
    (void)sqlite3_bind_text(st, 1, queue, -1, SQLITE_STATIC);
    int64_t prev_t = 0, prev_q = 0;
    bool have = false, unlimited = false;
    double milli_ms = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t t = sqlite3_column_int64(st, 0), q = sqlite3_column_int64(st, 1);
        if (have)
            milli_ms +=
                (double)prev_q * (double)gs_charge_overlap_ms(prev_t, t, r->from_ms, r->to_ms);
        prev_t = t;
        prev_q = q;
        unlimited |= q < 0;
        have = true;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return fail(b, "reading quota snapshots");
    if (have && !unlimited) {
        milli_ms +=
            (double)prev_q * (double)gs_charge_overlap_ms(prev_t, r->to_ms, r->from_ms, r->to_ms);
        *out = milli_ms / 1000.0 / H_MS;
    }
    return GS_OK;
}

int gs_usage_report_build(struct gs_usage_store *s, const struct gs_usage_report_options *opt,
                          struct gs_usage_report **out, char *msg, size_t cap)
{
    *out = NULL;
    if (msg && cap)
        msg[0] = '\0';
    char local_msg[8] = "";
    if (!msg || !cap) {
        msg = local_msg;
        cap = sizeof(local_msg);
    }
    if (!gs_usage_by_name(opt->by)) {
        (void)snprintf(msg, cap, "unknown grouping");
        return GS_EINVAL;
    }
    struct gs_usage_report *r = calloc(1, sizeof(*r));
    if (!r)
        return GS_ENOMEM;
    struct build b = {.r = r, .db = gs_usage_db(s), .msg = msg, .msg_cap = cap};
    b.path_msg = sqlite3_db_filename(b.db, "main");
    if (!b.path_msg)
        b.path_msg = "the database";
    struct span *spans = NULL;
    struct wait_rec *waits = NULL;
    uint32_t nspans = 0, cspans = 0, nwaits = 0, cwaits = 0;
    sqlite3_stmt *st = NULL, *ut = NULL;
    uint32_t *order = NULL, *rank = NULL;
    int err;
    r->by = opt->by;
    r->tz_offset_min = opt->tz_offset_min;
    r->tz_offset_at = opt->tz_offset_at;
    r->tz_ctx = opt->tz_ctx;
    int64_t hb, first;
    bool have_hb, have_first;
    if ((err = one_int(&b, "SELECT t_ms FROM heartbeat WHERE id = 1", &hb, &have_hb)) != GS_OK ||
        (err = one_int(&b,
                       "SELECT min(t) FROM (SELECT min(start_ms) t FROM allocation UNION ALL "
                       "SELECT min(start_ms) FROM capacity)",
                       &first, &have_first)) != GS_OK)
        goto out;
    if (!have_hb || !have_first) {
        (void)snprintf(msg, cap, "%s: holds no committed records to report", b.path_msg);
        err = GS_ENOENT;
        goto out;
    }
    r->records_from_ms = first;
    r->records_to_ms = hb;
    r->from_ms = opt->from_ms == INT64_MIN ? first : opt->from_ms;
    r->to_ms = opt->to_ms == INT64_MAX ? hb : opt->to_ms;
    if (r->from_ms >= r->to_ms) {
        char f[40], t[40];
        gs_usage_report_format_time(r, r->from_ms, f, sizeof(f));
        gs_usage_report_format_time(r, r->to_ms, t, sizeof(t));
        (void)snprintf(msg, cap, "empty period: from %s is not before to %s", f, t);
        err = GS_EINVAL;
        goto out;
    }
    /* Buckets for the charts: the shortest of these that gives at most 60. */
    static const int64_t bucket_choices[] = {INT64_C(3600000),       INT64_C(6) * 3600000,
                                             INT64_C(86400000),      INT64_C(7) * 86400000,
                                             INT64_C(30) * 86400000, INT64_C(365) * 86400000};
    int64_t span_ms = r->to_ms - r->from_ms;
    r->bucket_ms = bucket_choices[5];
    for (unsigned i = 0; i < 6; i++) {
        if ((span_ms + bucket_choices[i] - 1) / bucket_choices[i] <= 60) {
            r->bucket_ms = bucket_choices[i];
            break;
        }
    }
    r->nbuckets = (uint32_t)((span_ms + r->bucket_ms - 1) / r->bucket_ms);
    r->bucket_capacity = calloc(r->nbuckets, sizeof(double));
    err = GS_ENOMEM;
    if (!r->bucket_capacity)
        goto out;

    /* Capacity. */
    if ((err = prepare(&b,
                       "SELECT healthy, start_ms, coalesce(end_ms, ?3) FROM capacity "
                       "WHERE start_ms < ?2 AND coalesce(end_ms, ?3) > ?1",
                       &st)) != GS_OK)
        goto out;
    (void)sqlite3_bind_int64(st, 1, r->from_ms);
    (void)sqlite3_bind_int64(st, 2, r->to_ms);
    (void)sqlite3_bind_int64(st, 3, hb);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t a = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
        double h = (double)gs_charge_overlap_ms(a, e, r->from_ms, r->to_ms) / H_MS;
        r->capacity_gpu_h += h;
        if (!sqlite3_column_int(st, 0))
            r->unhealthy_gpu_h += h;
        for (uint32_t k = 0; k < r->nbuckets; k++) {
            int64_t bs = r->from_ms + (int64_t)k * r->bucket_ms;
            r->bucket_capacity[k] +=
                (double)gs_charge_overlap_ms(a, e, bs, bs + r->bucket_ms) / H_MS;
        }
    }
    if (rc != SQLITE_DONE) {
        err = fail(&b, "reading capacity");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;

    /* Utilisation samples in the period. */
    int64_t nutil;
    bool found;
    {
        char sql[160];
        (void)snprintf(sql, sizeof(sql),
                       "SELECT count(*) FROM util_sample WHERE t_ms >= %lld AND t_ms < %lld",
                       (long long)r->from_ms, (long long)r->to_ms);
        if ((err = one_int(&b, sql, &nutil, &found)) != GS_OK)
            goto out;
        r->util_samples = (uint64_t)nutil;
    }
    if (nutil > 0 && (err = prepare(&b,
                                    "SELECT avg(util_pct), count(*) FROM util_sample WHERE "
                                    "pod_uid = ?1 AND t_ms >= ?2 AND t_ms < ?3",
                                    &ut)) != GS_OK)
        goto out;

    /* Allocations. */
    {
        char sql[1024], key[512];
        by_expr(opt->by, "allocation", key, sizeof(key));
        (void)snprintf(sql, sizeof(sql),
                       "SELECT pod_uid, name, %s, gpus_charged, queued_ms, start_ms, "
                       "coalesce(end_ms, ?3), end_reason FROM allocation WHERE start_ms < ?2 AND "
                       "(coalesce(end_ms, ?3) > ?1 OR start_ms >= ?1)",
                       key);
        if ((err = prepare(&b, sql, &st)) != GS_OK)
            goto out;
    }
    (void)sqlite3_bind_int64(st, 1, r->from_ms);
    (void)sqlite3_bind_int64(st, 2, r->to_ms);
    (void)sqlite3_bind_int64(st, 3, hb);
    int64_t idle_min = opt->idle_min_ms > 0 ? opt->idle_min_ms : INT64_C(3600000);
    double idle_pct = opt->idle_util_pct > 0 ? opt->idle_util_pct : 5.0;
    uint32_t cidle = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 2);
        uint32_t gi;
        struct gs_usage_row *row = group(&b, key, &gi);
        err = GS_ENOMEM;
        if (!row)
            goto out;
        double gpus = sqlite3_column_double(st, 3);
        int64_t queued = sqlite3_column_int64(st, 4), a = sqlite3_column_int64(st, 5),
                e = sqlite3_column_int64(st, 6);
        const char *reason = (const char *)sqlite3_column_text(st, 7);
        int64_t held = gs_charge_overlap_ms(a, e, r->from_ms, r->to_ms);
        double charged = gpus * (double)held / H_MS;
        row->charged_gpu_h += charged;
        row->intervals++;
        if (reason && strncmp(reason, "evicted-", 8) == 0 && e >= r->from_ms && e < r->to_ms)
            row->preemptions_suffered++;
        if (a >= r->from_ms && a < r->to_ms) {
            row->starts++;
            if (nwaits == cwaits) {
                cwaits = cwaits ? cwaits * 2 : 1024;
                struct wait_rec *v = realloc(waits, cwaits * sizeof(*v));
                if (!v)
                    goto out;
                waits = v;
            }
            waits[nwaits++] = (struct wait_rec){gi, (double)(a - queued) / 1000.0};
        }
        if (held > 0) {
            if (nspans == cspans) {
                cspans = cspans ? cspans * 2 : 1024;
                struct span *v = realloc(spans, cspans * sizeof(*v));
                if (!v)
                    goto out;
                spans = v;
            }
            spans[nspans++] = (struct span){gi, gpus, a > r->from_ms ? a : r->from_ms,
                                            e < r->to_ms ? e : r->to_ms};
        }
        if (ut && held > 0) {
            const char *uid = (const char *)sqlite3_column_text(st, 0);
            (void)sqlite3_bind_text(ut, 1, uid, -1, SQLITE_TRANSIENT);
            (void)sqlite3_bind_int64(ut, 2, a > r->from_ms ? a : r->from_ms);
            (void)sqlite3_bind_int64(ut, 3, e < r->to_ms ? e : r->to_ms);
            int urc = sqlite3_step(ut);
            if (urc != SQLITE_ROW) {
                err = fail(&b, "reading utilisation samples");
                goto out;
            }
            bool sampled = sqlite3_column_int64(ut, 1) > 0;
            double util = sqlite3_column_double(ut, 0);
            sqlite3_reset(ut);
            if (sampled) {
                /* util_pct is % of a whole GPU on each GPU held: used = util x GPUs x time. */
                double used = util / 100.0 * ceil(gpus - 1e-9) * (double)held / H_MS;
                if (used > charged)
                    used = charged; /* a pod never uses more than its share is charged */
                row->used_gpu_h = isnan(row->used_gpu_h) ? used : row->used_gpu_h + used;
                if (held >= idle_min && used < charged * idle_pct / 100.0) {
                    if (r->nidle == cidle) {
                        cidle = cidle ? cidle * 2 : 16;
                        struct gs_usage_idle *v = realloc(r->idle, cidle * sizeof(*v));
                        if (!v)
                            goto out;
                        r->idle = v;
                    }
                    const char *nm = (const char *)sqlite3_column_text(st, 1);
                    struct gs_usage_idle *id = &r->idle[r->nidle];
                    memset(id, 0, sizeof(*id));
                    id->pod_uid = strdup(uid);
                    id->name = strdup(nm ? nm : "-");
                    id->key = strdup(row->key);
                    r->nidle++;
                    if (!id->pod_uid || !id->name || !id->key)
                        goto out;
                    id->held_h = (double)held / H_MS;
                    id->charged_gpu_h = charged;
                    id->used_gpu_h = used;
                }
            }
        }
    }
    if (rc != SQLITE_DONE) {
        err = fail(&b, "reading allocations");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;

    /* Preemptions caused: the group of the pod named in evicted_by, by its uid (what the
     * recorders write), else as "namespace/name" (what the live scheduler wrote before it
     * stored uids), so that older files attribute too. The uid lookup uses the (pod_uid,
     * start_ms) index; the name lookup runs only when it finds nothing. */
    {
        char sql[2048], key[512];
        by_expr(opt->by, "p", key, sizeof(key));
        (void)snprintf(sql, sizeof(sql),
                       "SELECT coalesce((SELECT %s FROM allocation p WHERE p.pod_uid = "
                       "v.evicted_by ORDER BY p.start_ms LIMIT 1), (SELECT %s FROM allocation "
                       "p WHERE p.namespace || '/' || p.name = v.evicted_by ORDER BY p.start_ms "
                       "LIMIT 1)), count(*) FROM allocation v WHERE v.evicted_by IS NOT NULL AND "
                       "v.end_reason LIKE 'evicted-%%' AND v.end_ms >= ?1 AND v.end_ms < ?2 "
                       "GROUP BY 1",
                       key, key);
        if ((err = prepare(&b, sql, &st)) != GS_OK)
            goto out;
    }
    (void)sqlite3_bind_int64(st, 1, r->from_ms);
    (void)sqlite3_bind_int64(st, 2, r->to_ms);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint32_t gi;
        struct gs_usage_row *row = group(&b, (const char *)sqlite3_column_text(st, 0), &gi);
        err = GS_ENOMEM;
        if (!row)
            goto out;
        row->preemptions_caused += (uint64_t)sqlite3_column_int64(st, 1);
    }
    if (rc != SQLITE_DONE) {
        err = fail(&b, "reading evictions");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;

    /* Waits per group. */
    if (nwaits > 1)
        qsort(waits, nwaits, sizeof(*waits), cmp_wait);
    for (uint32_t i = 0; i < nwaits;) {
        uint32_t j = i;
        double sum = 0;
        while (j < nwaits && waits[j].row == waits[i].row)
            sum += waits[j++].wait_s;
        uint32_t n = j - i, k = (uint32_t)ceil(0.95 * n);
        r->rows[waits[i].row].wait_mean_s = sum / n;
        /* waits[0, nwaits) is written above; the analyzer loses track of nwaits. */
        /* NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign) */
        r->rows[waits[i].row].wait_p95_s = waits[i + (k ? k - 1 : 0)].wait_s;
        i = j;
    }

    /* Quota attainment: for queues, and for teams (a team's quota is its top-level queue's). */
    if (opt->by == GS_USAGE_BY_QUEUE || opt->by == GS_USAGE_BY_TEAM) {
        for (uint32_t i = 0; i < r->nrows; i++)
            if ((err = quota_hours(&b, r->rows[i].key, &r->rows[i].quota_gpu_h)) != GS_OK)
                goto out;
    }

    /* Sort rows; remap spans and build the per-bucket series. */
    err = GS_ENOMEM;
    order = malloc((r->nrows + 1) * sizeof(*order));
    rank = malloc((r->nrows + 1) * sizeof(*rank));
    r->bucket_charged = calloc((size_t)r->nbuckets * (r->nrows + 1), sizeof(double));
    if (!order || !rank || !r->bucket_charged)
        goto out;
    for (uint32_t i = 0; i < r->nrows; i++)
        order[i] = i;
    sort_ctx = r;
    if (r->nrows > 1)
        qsort(order, r->nrows, sizeof(*order), cmp_row_index);
    sort_ctx = NULL;
    {
        struct gs_usage_row *sorted = malloc((r->nrows + 1) * sizeof(*sorted));
        if (!sorted)
            goto out;
        for (uint32_t i = 0; i < r->nrows; i++) {
            sorted[i] = r->rows[order[i]];
            rank[order[i]] = i;
        }
        free(r->rows);
        r->rows = sorted;
    }
    for (uint32_t i = 0; i < nspans; i++) {
        const struct span *sp = &spans[i];
        uint32_t k0 = (uint32_t)((sp->s - r->from_ms) / r->bucket_ms);
        for (uint32_t k = k0; k < r->nbuckets; k++) {
            int64_t bs = r->from_ms + (int64_t)k * r->bucket_ms;
            if (bs >= sp->e)
                break;
            /* rank[] holds every row index (< nrows), and sp->row is one. */
            /* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
            r->bucket_charged[(size_t)k * r->nrows + rank[sp->row]] +=
                sp->gpus * (double)gs_charge_overlap_ms(sp->s, sp->e, bs, bs + r->bucket_ms) / H_MS;
        }
    }
    for (uint32_t i = 0; i < r->nrows; i++) {
        struct gs_usage_row *w = &r->rows[i];
        r->charged_gpu_h += w->charged_gpu_h;
        if (!isnan(w->used_gpu_h) && w->charged_gpu_h > 0)
            w->used_pct = 100.0 * w->used_gpu_h / w->charged_gpu_h;
    }
    r->idle_gpu_h = r->capacity_gpu_h - r->charged_gpu_h;
    if (r->nidle > 1)
        qsort(r->idle, r->nidle, sizeof(*r->idle), cmp_idle);

    /* Per-queue allocated and fair share over the period, % of its capacity-hours: each queue's
     * snapshots are a step function (a value holds until the next snapshot, the last until the
     * heartbeat; the recorder writes only changes), integrated over the period as quota_hours()
     * does, and the snapshot before the period gives its value at the start. */
    {
        if ((err = prepare(&b,
                           "SELECT queue, t_ms, gpu_allocated_milli, gpu_fair_milli FROM "
                           "quota_snapshot WHERE t_ms < ?1 AND queue IN (SELECT DISTINCT queue "
                           "FROM allocation) ORDER BY queue, t_ms",
                           &st)) != GS_OK)
            goto out;
        int64_t end_ms = r->to_ms < hb ? r->to_ms : hb;
        (void)sqlite3_bind_int64(st, 1, end_ms);
        uint32_t qcap = 0;
        char *cur = NULL; /* the queue whose rows are being read */
        int64_t prev_t = 0;
        double prev_a = 0, prev_f = 0, alloc_ms = 0, fair_ms = 0;
        double cap_milli_ms = r->capacity_gpu_h * H_MS * 1000.0;
        err = GS_ENOMEM;
        for (;;) {
            rc = sqlite3_step(st);
            const char *qn = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
            if (rc == SQLITE_ROW && !qn)
                qn = "-";
            if (cur && (!qn || strcmp(qn, cur) != 0)) { /* cur's last step runs to the end */
                alloc_ms +=
                    prev_a * (double)gs_charge_overlap_ms(prev_t, end_ms, r->from_ms, end_ms);
                fair_ms +=
                    prev_f * (double)gs_charge_overlap_ms(prev_t, end_ms, r->from_ms, end_ms);
                if (r->nqueues == qcap) {
                    qcap = qcap ? qcap * 2 : 8;
                    char **nv = realloc(r->queue_names, qcap * sizeof(*nv));
                    if (nv)
                        r->queue_names = nv;
                    double *av = realloc(r->queue_alloc_pct, qcap * sizeof(*av));
                    if (av)
                        r->queue_alloc_pct = av;
                    double *fv = realloc(r->queue_fair_pct, qcap * sizeof(*fv));
                    if (fv)
                        r->queue_fair_pct = fv;
                    if (!nv || !av || !fv) {
                        free(cur);
                        goto out;
                    }
                }
                r->queue_names[r->nqueues] = cur;
                r->queue_alloc_pct[r->nqueues] =
                    cap_milli_ms > 0 ? 100.0 * alloc_ms / cap_milli_ms : 0;
                r->queue_fair_pct[r->nqueues] =
                    cap_milli_ms > 0 ? 100.0 * fair_ms / cap_milli_ms : 0;
                r->nqueues++;
                cur = NULL;
            }
            if (rc != SQLITE_ROW)
                break;
            int64_t t = sqlite3_column_int64(st, 1);
            double a = sqlite3_column_double(st, 2), f = sqlite3_column_double(st, 3);
            if (!cur) {
                if (!(cur = strdup(qn)))
                    goto out;
                alloc_ms = fair_ms = 0;
            } else {
                alloc_ms += prev_a * (double)gs_charge_overlap_ms(prev_t, t, r->from_ms, end_ms);
                fair_ms += prev_f * (double)gs_charge_overlap_ms(prev_t, t, r->from_ms, end_ms);
            }
            prev_t = t;
            prev_a = a;
            prev_f = f;
        }
        if (rc != SQLITE_DONE) {
            err = fail(&b, "reading quota snapshots");
            goto out;
        }
    }
    err = GS_OK;
out:
    sqlite3_finalize(st);
    sqlite3_finalize(ut);
    free(b.map.slot);
    free(spans);
    free(waits);
    free(order);
    free(rank);
    if (err) {
        if (err == GS_ENOMEM && !msg[0])
            (void)snprintf(msg, cap, "%s", gs_strerror(err));
        gs_usage_report_free(r);
        return err;
    }
    *out = r;
    return GS_OK;
}

void gs_usage_report_free(struct gs_usage_report *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->nrows; i++)
        free(r->rows[i].key);
    free(r->rows);
    for (uint32_t i = 0; i < r->nidle; i++) {
        free(r->idle[i].pod_uid);
        free(r->idle[i].name);
        free(r->idle[i].key);
    }
    free(r->idle);
    free(r->bucket_charged);
    free(r->bucket_capacity);
    for (uint32_t i = 0; i < r->nqueues; i++)
        free(r->queue_names[i]);
    free(r->queue_names);
    free(r->queue_alloc_pct);
    free(r->queue_fair_pct);
    free(r);
}

/* ---- writing ------------------------------------------------------------------------------ */

static void fmt_num(double v, int decimals, char *buf, size_t cap)
{
    if (isnan(v))
        (void)snprintf(buf, cap, "-");
    else
        (void)snprintf(buf, cap, "%.*f", decimals, v);
}

static void fmt_dur(double s, char *buf, size_t cap)
{
    if (isnan(s))
        (void)snprintf(buf, cap, "-");
    else if (s < 120)
        (void)snprintf(buf, cap, "%.0fs", s);
    else if (s < 7200)
        (void)snprintf(buf, cap, "%.1fm", s / 60);
    else
        (void)snprintf(buf, cap, "%.1fh", s / 3600);
}

static double attainment(const struct gs_usage_row *w)
{
    return isnan(w->quota_gpu_h) || w->quota_gpu_h <= 0 ? NAN
                                                        : 100.0 * w->charged_gpu_h / w->quota_gpu_h;
}

static const char *const no_util_note =
    "no utilisation samples: GPU-hours used and idle allocations are not reported";

/* Whether the period misses every record of the store: its zeros then mean "not recorded",
 * not "nothing ran", and the report says so. */
static bool outside_records(const struct gs_usage_report *r)
{
    return r->to_ms <= r->records_from_ms || r->from_ms >= r->records_to_ms;
}

static void write_table(const struct gs_usage_report *r, FILE *f)
{
    char from[40], to[40];
    gs_usage_report_format_time(r, r->from_ms, from, sizeof(from));
    gs_usage_report_format_time(r, r->to_ms, to, sizeof(to));
    double period_h = (double)(r->to_ms - r->from_ms) / H_MS;
    (void)fprintf(f, "usage %s to %s (%.1f h) by %s\n", from, to, period_h,
                  gs_usage_by_name(r->by));
    (void)fprintf(f, "capacity %.2f GPU-hours (mean %.1f GPUs; %.2f on unhealthy GPUs)\n",
                  r->capacity_gpu_h, period_h > 0 ? r->capacity_gpu_h / period_h : 0,
                  r->unhealthy_gpu_h);
    (void)fprintf(f, "%-20s %12s %7s %11s %6s %11s %8s %9s %7s %9s %9s %6s\n",
                  gs_usage_by_name(r->by), "charged GPUh", "share%", "used GPUh", "used%",
                  "quota GPUh", "attain%", "preempted", "caused", "wait mean", "wait p95",
                  "starts");
    for (uint32_t i = 0; i < r->nrows; i++) {
        const struct gs_usage_row *w = &r->rows[i];
        char used[24], used_pct[24], quota[24], att[24], wm[16], wp[16];
        fmt_num(w->used_gpu_h, 2, used, sizeof(used));
        fmt_num(w->used_pct, 1, used_pct, sizeof(used_pct));
        fmt_num(w->quota_gpu_h, 2, quota, sizeof(quota));
        fmt_num(attainment(w), 1, att, sizeof(att));
        fmt_dur(w->wait_mean_s, wm, sizeof(wm));
        fmt_dur(w->wait_p95_s, wp, sizeof(wp));
        (void)fprintf(f, "%-20.20s %12.2f %7.1f %11s %6s %11s %8s %9llu %7llu %9s %9s %6u\n",
                      w->key, w->charged_gpu_h,
                      r->capacity_gpu_h > 0 ? 100.0 * w->charged_gpu_h / r->capacity_gpu_h : 0.0,
                      used, used_pct, quota, att, (unsigned long long)w->preemptions_suffered,
                      (unsigned long long)w->preemptions_caused, wm, wp, w->starts);
    }
    (void)fprintf(f, "%-20s %12.2f %7.1f\n", "(idle)", r->idle_gpu_h,
                  r->capacity_gpu_h > 0 ? 100.0 * r->idle_gpu_h / r->capacity_gpu_h : 0.0);
    (void)fprintf(f, "%-20s %12.2f %7.1f\n", "(capacity)", r->capacity_gpu_h,
                  r->capacity_gpu_h > 0 ? 100.0 : 0.0);
    (void)fprintf(f, "share%%: charged / capacity GPU-hours over the whole period (replay's "
                     "share%%: only while the queue waited)\n");
    if (outside_records(r)) {
        char rf[40], rt[40];
        gs_usage_report_format_time(r, r->records_from_ms, rf, sizeof(rf));
        gs_usage_report_format_time(r, r->records_to_ms, rt, sizeof(rt));
        (void)fprintf(f, "note: the store's records run from %s to %s; none fall in this period\n",
                      rf, rt);
    }
    if (r->util_samples == 0) {
        (void)fprintf(f, "note: %s\n", no_util_note);
    } else {
        (void)fprintf(f, "idle allocations (held over the threshold, used under it): %u\n",
                      r->nidle);
        for (uint32_t i = 0; i < r->nidle; i++)
            (void)fprintf(f, "  %s %s (%s): %.1f h held, %.2f GPU-hours charged, %.2f used\n",
                          r->idle[i].pod_uid, r->idle[i].name, r->idle[i].key, r->idle[i].held_h,
                          r->idle[i].charged_gpu_h, r->idle[i].used_gpu_h);
    }
}

/* CSV field: quoted when it holds a comma, quote or line break. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        (void)fputs(s, f);
        return;
    }
    (void)fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            (void)fputc('"', f);
        (void)fputc(*s, f);
    }
    (void)fputc('"', f);
}

static void csv_num(FILE *f, double v, int decimals)
{
    (void)fputc(',', f);
    if (!isnan(v))
        (void)fprintf(f, "%.*f", decimals, v);
}

static void write_csv(const struct gs_usage_report *r, FILE *f)
{
    (void)fprintf(
        f,
        "%s,charged_gpu_hours,used_gpu_hours,used_pct,quota_gpu_hours,attainment_pct,"
        "preemptions_suffered,preemptions_caused,wait_mean_s,wait_p95_s,starts,intervals\n",
        gs_usage_by_name(r->by));
    for (uint32_t i = 0; i < r->nrows; i++) {
        const struct gs_usage_row *w = &r->rows[i];
        csv_field(f, w->key);
        csv_num(f, w->charged_gpu_h, 6);
        csv_num(f, w->used_gpu_h, 6);
        csv_num(f, w->used_pct, 3);
        csv_num(f, w->quota_gpu_h, 6);
        csv_num(f, attainment(w), 3);
        (void)fprintf(f, ",%llu,%llu", (unsigned long long)w->preemptions_suffered,
                      (unsigned long long)w->preemptions_caused);
        csv_num(f, w->wait_mean_s, 3);
        csv_num(f, w->wait_p95_s, 3);
        (void)fprintf(f, ",%u,%u\n", w->starts, w->intervals);
    }
    (void)fprintf(f, "(idle),%.6f,,,,,,,,,,\n", r->idle_gpu_h);
    (void)fprintf(f, "(capacity),%.6f,,,,,,,,,,\n", r->capacity_gpu_h);
}

static json_t *jnum(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static int write_json(const struct gs_usage_report *r, FILE *f)
{
    char from[40], to[40], rf[40], rt[40];
    gs_usage_report_format_time(r, r->from_ms, from, sizeof(from));
    gs_usage_report_format_time(r, r->to_ms, to, sizeof(to));
    gs_usage_report_format_time(r, r->records_from_ms, rf, sizeof(rf));
    gs_usage_report_format_time(r, r->records_to_ms, rt, sizeof(rt));
    json_t *root = json_object(), *rows = json_array(), *idle = json_array(),
           *queues = json_array();
    int err = GS_ENOMEM;
    if (!root || !rows || !idle || !queues)
        goto out;
    for (uint32_t q = 0; q < r->nqueues; q++) {
        json_t *o = json_pack("{s:s, s:f, s:f}", "name", r->queue_names[q], "alloc_pct",
                              r->queue_alloc_pct[q], "fair_pct", r->queue_fair_pct[q]);
        if (!o || json_array_append_new(queues, o))
            goto out;
    }
    for (uint32_t i = 0; i < r->nrows; i++) {
        const struct gs_usage_row *w = &r->rows[i];
        json_t *o =
            json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:I, s:I}", "key", w->key,
                      "charged_gpu_hours", jnum(w->charged_gpu_h), "used_gpu_hours",
                      jnum(w->used_gpu_h), "used_pct", jnum(w->used_pct), "quota_gpu_hours",
                      jnum(w->quota_gpu_h), "attainment_pct", jnum(attainment(w)),
                      "preemptions_suffered", (json_int_t)w->preemptions_suffered,
                      "preemptions_caused", (json_int_t)w->preemptions_caused, "wait_mean_s",
                      jnum(w->wait_mean_s), "wait_p95_s", jnum(w->wait_p95_s), "starts",
                      (json_int_t)w->starts, "intervals", (json_int_t)w->intervals);
        if (!o || json_array_append_new(rows, o))
            goto out;
    }
    for (uint32_t i = 0; i < r->nidle; i++) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:f, s:f}", "pod_uid", r->idle[i].pod_uid,
                              "name", r->idle[i].name, "key", r->idle[i].key, "held_hours",
                              r->idle[i].held_h, "charged_gpu_hours", r->idle[i].charged_gpu_h,
                              "used_gpu_hours", r->idle[i].used_gpu_h);
        if (!o || json_array_append_new(idle, o))
            goto out;
    }
    if (json_object_set_new(root, "from", json_string(from)) ||
        json_object_set_new(root, "to", json_string(to)) ||
        json_object_set_new(root, "records_from", json_string(rf)) ||
        json_object_set_new(root, "records_to", json_string(rt)) ||
        json_object_set_new(root, "period_outside_records", json_boolean(outside_records(r))) ||
        json_object_set_new(root, "by", json_string(gs_usage_by_name(r->by))) ||
        json_object_set_new(root, "capacity_gpu_hours", json_real(r->capacity_gpu_h)) ||
        json_object_set_new(root, "unhealthy_gpu_hours", json_real(r->unhealthy_gpu_h)) ||
        json_object_set_new(root, "charged_gpu_hours", json_real(r->charged_gpu_h)) ||
        json_object_set_new(root, "idle_gpu_hours", json_real(r->idle_gpu_h)) ||
        json_object_set_new(root, "utilisation_samples",
                            json_integer((json_int_t)r->util_samples)) ||
        json_object_set_new(root, "note",
                            r->util_samples ? json_null() : json_string(no_util_note)) ||
        json_object_set(root, "groups", rows) || json_object_set(root, "idle_allocations", idle) ||
        json_object_set(root, "queues", queues))
        goto out;
    err = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) ? GS_EIO : GS_OK;
    (void)fputc('\n', f);
out:
    json_decref(rows);
    json_decref(idle);
    json_decref(queues);
    json_decref(root);
    return err;
}

/* A Prometheus label value: backslash, double quote and line feed escaped. */
static void prom_label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            (void)fputc('\\', f);
        if (*s == '\n') {
            (void)fputs("\\n", f);
            continue;
        }
        (void)fputc(*s, f);
    }
}

static void write_prometheus(const struct gs_usage_report *r, FILE *f)
{
    const char *by = gs_usage_by_name(r->by);
    static const struct {
        const char *name, *help;
    } m[] = {
        {"gpusched_usage_charged_gpu_seconds",
         "GPU-seconds charged by capacity (share of each GPU held x time) over the report "
         "period."},
        {"gpusched_usage_preemptions_suffered", "Intervals ended by eviction in the period."},
        {"gpusched_usage_quota_gpu_seconds",
         "Quota GPU-seconds over the period (queues and teams)."},
        {"gpusched_usage_used_gpu_seconds",
         "GPU-seconds used, from utilisation samples (groups with samples)."},
        {"gpusched_usage_used_ratio",
         "Used over charged GPU-seconds in the period (groups with samples)."},
    };
    for (unsigned k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
        (void)fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", m[k].name, m[k].help, m[k].name);
        for (uint32_t i = 0; i < r->nrows; i++) {
            const struct gs_usage_row *w = &r->rows[i];
            double v = k == 0   ? w->charged_gpu_h * 3600.0
                       : k == 1 ? (double)w->preemptions_suffered
                       : k == 2 ? w->quota_gpu_h * 3600.0
                       : k == 3 ? w->used_gpu_h * 3600.0
                                : w->used_pct / 100.0;
            if (isnan(v))
                continue;
            (void)fprintf(f, "%s{%s=\"", m[k].name, by);
            prom_label(f, w->key);
            (void)fprintf(f, "\"} %.*f\n", k == 4 ? 6 : 3, v);
        }
    }
    (void)fprintf(f,
                  "# HELP gpusched_usage_idle_gpu_seconds Capacity minus charged over the "
                  "period.\n"
                  "# TYPE gpusched_usage_idle_gpu_seconds gauge\n"
                  "gpusched_usage_idle_gpu_seconds %.3f\n"
                  "# HELP gpusched_usage_capacity_gpu_seconds GPU-seconds of the GPUs present "
                  "over the period.\n"
                  "# TYPE gpusched_usage_capacity_gpu_seconds gauge\n"
                  "gpusched_usage_capacity_gpu_seconds %.3f\n"
                  "# HELP gpusched_usage_period_seconds Length of the report period.\n"
                  "# TYPE gpusched_usage_period_seconds gauge\n"
                  "gpusched_usage_period_seconds %.3f\n",
                  r->idle_gpu_h * 3600.0, r->capacity_gpu_h * 3600.0,
                  (double)(r->to_ms - r->from_ms) / 1000.0);
}

int gs_usage_report_write(const struct gs_usage_report *r, enum gs_usage_format fmt, FILE *f)
{
    int err = GS_OK;
    switch (fmt) {
    case GS_USAGE_TABLE:
        write_table(r, f);
        break;
    case GS_USAGE_CSV:
        write_csv(r, f);
        break;
    case GS_USAGE_JSON:
        err = write_json(r, f);
        break;
    case GS_USAGE_HTML:
        err = gs__usage_report_html(r, f);
        break;
    case GS_USAGE_PROMETHEUS:
        write_prometheus(r, f);
        break;
    default:
        return GS_EINVAL;
    }
    if (!err && (fflush(f) != 0 || ferror(f)))
        err = GS_EIO;
    return err;
}
