/*
 * The Prometheus text exposition format 0.0.4 (include/gpusched/usage_ingest.h,
 * gs_prom_parse_text()), as a scrape target such as the node agent's /metrics serves it
 * (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format):
 *
 *   # HELP name text            # TYPE name type            # any other comment
 *   name{label="value",...} value [timestamp]
 *
 * Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*; a label
 * value is a double-quoted string with the escapes \\, \" and \n; a trailing comma inside the
 * braces is allowed; the value is a float (NaN, +Inf, -Inf included); the timestamp, Unix ms,
 * an integer. Spaces and tabs separate the parts; blank lines are skipped. Every refusal names
 * the line. Pure: no I/O.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/usage_ingest.h"

/* The most labels of one sample and the longest label value accepted. */
#define LABELS_MAX 64
#define VALUE_MAX 4096

static GS_PRINTF(3, 4) void put_msg(char *msg, size_t cap, const char *fmt, ...)
{
    if (!msg || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
}

/* One line being read: [p, end), its number for messages. */
struct cursor {
    const char *p, *end;
    size_t line;
};

static bool name_start(char c, bool metric)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}

static bool name_char(char c, bool metric)
{
    return name_start(c, metric) || (c >= '0' && c <= '9');
}

static void skip_blank(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

/* Reads a metric or label name; its length, 0 when there is none. */
static size_t read_name(struct cursor *c, bool metric)
{
    const char *s = c->p;
    if (c->p >= c->end || !name_start(*c->p, metric))
        return 0;
    while (c->p < c->end && name_char(*c->p, metric))
        c->p++;
    return (size_t)(c->p - s);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A float as the format writes it: Go's ParseFloat forms, NaN, +Inf, -Inf, Inf. */
static int read_float(const char *s, size_t n, double *v)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (strcmp(buf, "NaN") == 0) {
        *v = NAN;
        return 0;
    }
    if (strcmp(buf, "+Inf") == 0 || strcmp(buf, "Inf") == 0) {
        *v = INFINITY;
        return 0;
    }
    if (strcmp(buf, "-Inf") == 0) {
        *v = -INFINITY;
        return 0;
    }
    /* strtod would also take "nan", "infinity" and hex; the format's floats are decimal. */
    for (size_t i = 0; i < n; i++) {
        char ch = buf[i];
        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '+' ||
              ch == '-'))
            return -1;
    }
    char *e;
    errno = 0;
    *v = strtod(buf, &e);
    return *e == '\0' && errno != ERANGE ? 0 : -1;
}

/* An integer timestamp, Unix ms. */
static int read_ts(const char *s, size_t n, int64_t *t)
{
    char buf[32];
    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *e;
    errno = 0;
    long long v = strtoll(buf, &e, 10);
    if (*e || errno)
        return -1;
    *t = (int64_t)v;
    return 0;
}

/* The labels of one sample being read. */
struct labels {
    char *name[LABELS_MAX], *value[LABELS_MAX];
    uint32_t n;
};

static void labels_free(struct labels *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        free(l->name[i]);
        free(l->value[i]);
    }
    l->n = 0;
}

/* Reads `{name="value",...}` after the '{'; GS_OK, GS_EPARSE (msg), GS_ENOMEM. */
static int read_labels(struct cursor *c, struct labels *l, char *msg, size_t cap)
{
    char val[VALUE_MAX];
    for (;;) {
        skip_blank(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return GS_OK;
        }
        const char *ns = c->p;
        size_t nn = read_name(c, false);
        if (!nn) {
            put_msg(msg, cap, "line %zu: expected a label name or '}'", c->line);
            return GS_EPARSE;
        }
        for (uint32_t i = 0; i < l->n; i++)
            if (strlen(l->name[i]) == nn && memcmp(l->name[i], ns, nn) == 0) {
                put_msg(msg, cap, "line %zu: label %.*s given twice", c->line, (int)nn, ns);
                return GS_EPARSE;
            }
        skip_blank(c);
        if (c->p >= c->end || *c->p != '=') {
            put_msg(msg, cap, "line %zu: label %.*s: expected '='", c->line, (int)nn, ns);
            return GS_EPARSE;
        }
        c->p++;
        skip_blank(c);
        if (c->p >= c->end || *c->p != '"') {
            put_msg(msg, cap, "line %zu: label %.*s: expected a double-quoted value", c->line,
                    (int)nn, ns);
            return GS_EPARSE;
        }
        c->p++;
        size_t vn = 0;
        bool closed = false;
        while (c->p < c->end) {
            char ch = *c->p++;
            if (ch == '"') {
                closed = true;
                break;
            }
            if (ch == '\\') {
                char e = c->p < c->end ? *c->p++ : '\0';
                if (e == 'n')
                    ch = '\n';
                else if (e == '\\' || e == '"')
                    ch = e;
                else {
                    put_msg(msg, cap, "line %zu: label %.*s: unknown escape in its value", c->line,
                            (int)nn, ns);
                    return GS_EPARSE;
                }
            }
            if (ch == '\0') {
                put_msg(msg, cap, "line %zu: label %.*s: a NUL byte in its value", c->line, (int)nn,
                        ns);
                return GS_EPARSE;
            }
            if (vn + 1 >= sizeof(val)) {
                put_msg(msg, cap, "line %zu: label %.*s: value over %d bytes", c->line, (int)nn, ns,
                        VALUE_MAX - 1);
                return GS_EPARSE;
            }
            val[vn++] = ch;
        }
        if (!closed) {
            put_msg(msg, cap, "line %zu: label %.*s: its value is not closed by '\"'", c->line,
                    (int)nn, ns);
            return GS_EPARSE;
        }
        if (l->n == LABELS_MAX) {
            put_msg(msg, cap, "line %zu: more than %d labels", c->line, LABELS_MAX);
            return GS_EPARSE;
        }
        l->name[l->n] = dup_n(ns, nn);
        l->value[l->n] = dup_n(val, vn);
        l->n++;
        if (!l->name[l->n - 1] || !l->value[l->n - 1])
            return GS_ENOMEM;
        skip_blank(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return GS_OK;
        }
        put_msg(msg, cap, "line %zu: after label %.*s: expected ',' or '}'", c->line, (int)nn, ns);
        return GS_EPARSE;
    }
}

/* Appends one series of one sample to m, taking the labels. GS_OK; GS_ENOMEM; GS_EPARSE. */
static int add_series(struct gs_prom_matrix *m, uint32_t *cap_series, struct labels *l, int64_t t,
                      double v, char *msg, size_t cap, size_t line)
{
    if (m->nseries == UINT32_MAX) {
        put_msg(msg, cap, "line %zu: more than 2^32-1 samples", line);
        return GS_EPARSE;
    }
    if (m->nseries == *cap_series) {
        uint32_t nc =
            *cap_series ? (*cap_series > UINT32_MAX / 2 ? UINT32_MAX : *cap_series * 2) : 64;
        struct gs_prom_series *s = realloc(m->series, (size_t)nc * sizeof(*s));
        if (!s)
            return GS_ENOMEM;
        m->series = s;
        *cap_series = nc;
    }
    struct gs_prom_series *s = &m->series[m->nseries];
    memset(s, 0, sizeof(*s));
    s->t_ms = malloc(sizeof(*s->t_ms));
    s->value = malloc(sizeof(*s->value));
    if (l->n) {
        s->label_names = malloc(l->n * sizeof(char *));
        s->label_values = malloc(l->n * sizeof(char *));
    }
    m->nseries++; /* freed with the matrix from here on */
    if (!s->t_ms || !s->value || (l->n && (!s->label_names || !s->label_values)))
        return GS_ENOMEM;
    for (uint32_t i = 0; i < l->n; i++) {
        s->label_names[i] = l->name[i];
        s->label_values[i] = l->value[i];
    }
    s->nlabels = l->n;
    l->n = 0;
    s->t_ms[0] = t;
    s->value[0] = v;
    s->n = 1;
    m->nsamples++;
    return GS_OK;
}

int gs_prom_parse_text(const char *body, size_t len, const char *metric, int64_t t_ms,
                       struct gs_prom_matrix **out, char *msg, size_t cap)
{
    *out = NULL;
    if (msg && cap)
        msg[0] = '\0';
    struct gs_prom_matrix *m = calloc(1, sizeof(*m));
    if (!m) {
        put_msg(msg, cap, "out of memory");
        return GS_ENOMEM;
    }
    uint32_t cap_series = 0;
    struct labels l = {.n = 0};
    int err = GS_OK;
    const char *p = body, *end = body + len;
    size_t line = 0;
    while (p < end && !err) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        struct cursor c = {p, le, line};
        p = nl ? nl + 1 : end;
        if (c.end > c.p && c.end[-1] == '\r')
            c.end--; /* CRLF, as some servers write */
        skip_blank(&c);
        if (c.p == c.end || *c.p == '#')
            continue; /* blank, HELP, TYPE or a comment: nothing to keep */
        if (memchr(c.p, '\0', (size_t)(c.end - c.p))) {
            put_msg(msg, cap, "line %zu: a NUL byte", line);
            err = GS_EPARSE;
            break;
        }
        const char *ms = c.p;
        size_t mn = read_name(&c, true);
        if (!mn) {
            int shown = c.end - c.p > 20 ? 20 : (int)(c.end - c.p); /* not NUL-terminated */
            put_msg(msg, cap, "line %zu: expected a metric name, got '%.*s'", line, shown, c.p);
            err = GS_EPARSE;
            break;
        }
        const char *after_name = c.p;
        skip_blank(&c);
        if (c.p < c.end && *c.p == '{') {
            c.p++;
            if ((err = read_labels(&c, &l, msg, cap)) != GS_OK)
                break;
        } else {
            c.p = after_name; /* no labels: the blanks separate the value */
        }
        if (c.p < c.end && *c.p != ' ' && *c.p != '\t') {
            put_msg(msg, cap, "line %zu: %.*s: expected a space before the value", line, (int)mn,
                    ms);
            err = GS_EPARSE;
            break;
        }
        skip_blank(&c);
        const char *vs = c.p;
        while (c.p < c.end && *c.p != ' ' && *c.p != '\t')
            c.p++;
        double v;
        if (read_float(vs, (size_t)(c.p - vs), &v) != 0) {
            put_msg(msg, cap, "line %zu: %.*s: expected a number as the value, got '%.*s'", line,
                    (int)mn, ms, (int)(c.p - vs > 40 ? 40 : c.p - vs), vs);
            err = GS_EPARSE;
            break;
        }
        skip_blank(&c);
        int64_t t = t_ms;
        if (c.p < c.end) {
            const char *ts = c.p;
            while (c.p < c.end && *c.p != ' ' && *c.p != '\t')
                c.p++;
            if (read_ts(ts, (size_t)(c.p - ts), &t) != 0) {
                put_msg(msg, cap, "line %zu: %.*s: expected a timestamp in ms, got '%.*s'", line,
                        (int)mn, ms, (int)(c.p - ts > 40 ? 40 : c.p - ts), ts);
                err = GS_EPARSE;
                break;
            }
            skip_blank(&c);
            if (c.p < c.end) {
                put_msg(msg, cap, "line %zu: %.*s: text after the timestamp", line, (int)mn, ms);
                err = GS_EPARSE;
                break;
            }
        }
        if (metric && (strlen(metric) != mn || memcmp(metric, ms, mn) != 0)) {
            labels_free(&l);
            continue;
        }
        err = add_series(m, &cap_series, &l, t, v, msg, cap, line);
        labels_free(&l);
    }
    labels_free(&l);
    if (err) {
        if (err == GS_ENOMEM)
            put_msg(msg, cap, "line %zu: out of memory", line);
        gs_prom_matrix_free(m);
        return err;
    }
    *out = m;
    return GS_OK;
}
