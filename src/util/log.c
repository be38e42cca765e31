/*
 * Formatting of log lines, as text or JSON, and the stderr sinks (contract in
 * include/gpusched/log.h).
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r, clock_gettime */

#include "gpusched/log.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"

void gs_vlog(gs_log_fn fn, void *ctx, const char *fmt, va_list ap)
{
    char line[GS_LOG_LINE_MAX];
    if (fn == NULL)
        return;
    (void)vsnprintf(line, sizeof line, fmt, ap);
    fn(ctx, line);
}

void gs_log(gs_log_fn fn, void *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gs_vlog(fn, ctx, fmt, ap);
    va_end(ap);
}

void gs_log_stderr_plain(void *ctx, const char *line)
{
    (void)ctx;
    (void)fprintf(stderr, "%s\n", line);
}

void gs_log_stderr_stamped(void *ctx, const char *line)
{
    const char *prefix = ctx;
    struct timespec ts = {0, 0};
    struct tm tm;
    char when[32] = "";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm) != NULL)
        (void)strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    (void)fprintf(stderr, "%s.%03ldZ %s%s%s\n", when, ts.tv_nsec / 1000000L,
                  prefix != NULL ? prefix : "", prefix != NULL ? " " : "", line);
}

int gs_log_format_parse(const char *name, enum gs_log_format *out)
{
    if (name == NULL)
        return GS_EINVAL;
    if (strcmp(name, "text") == 0)
        *out = GS_LOG_FORMAT_TEXT;
    else if (strcmp(name, "json") == 0)
        *out = GS_LOG_FORMAT_JSON;
    else
        return GS_EINVAL;
    return GS_OK;
}

/* A bounded writer: once a write does not fit, nothing more is written and full stays set. */
struct jbuf {
    char *p;
    size_t cap, len;
    bool full;
};

static void put(struct jbuf *b, const char *s, size_t n)
{
    if (b->full || n >= b->cap - b->len) {
        b->full = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void puts_(struct jbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF), or 0 when s[0] does not begin one; n bytes are readable at s (n >= 1). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* s (n bytes) as a JSON string, quotes included. */
static void put_jstr(struct jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    put(b, "\"", 1);
    for (size_t i = 0; i < n && !b->full;) {
        unsigned char c = u[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named)
                puts_(b, named);
            else {
                (void)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)c);
                put(b, esc, 6);
            }
            i++;
        } else {
            size_t len = utf8_seq(u + i, n - i);
            if (len == 0) {
                puts_(b, "\xEF\xBF\xBD"); /* U+FFFD for a byte that begins no sequence */
                i++;
            } else {
                put(b, s + i, len);
                i += len;
            }
        }
    }
    put(b, "\"", 1);
}

/* The value of the first KEY=VALUE token of msg (GS_LOG_JSON_KEYS); *n = 0 when none. */
static const char *lift(const char *msg, const char *key, size_t *n)
{
    size_t kl = strlen(key);
    *n = 0;
    for (const char *p = msg; (p = strstr(p, key)) != NULL; p++) {
        if ((p != msg && p[-1] != ' ' && p[-1] != '(') || p[kl] != '=')
            continue;
        const char *v = p + kl + 1;
        size_t len = strcspn(v, " ,;)");
        while (len > 0 && (v[len - 1] == ':' || v[len - 1] == '.'))
            len--;
        if (len == 0 || len > 127)
            continue;
        *n = len;
        return v;
    }
    return NULL;
}

int gs_log_json_format(char *buf, size_t cap, int64_t wall_ms, const char *level,
                       const char *component, const char *msg)
{
    static const char *const keys[] = GS_LOG_JSON_KEYS;
    if (buf == NULL || msg == NULL || cap == 0)
        return GS_EINVAL;
    struct jbuf b = {.p = buf, .cap = cap};
    time_t secs = (time_t)(wall_ms / 1000);
    struct tm tm;
    char when[48] = "1970-01-01T00:00:00";
    if (gmtime_r(&secs, &tm) != NULL)
        (void)strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    char ts[96];
    (void)snprintf(ts, sizeof ts, "{\"ts\":\"%s.%03dZ\",\"level\":", when, (int)(wall_ms % 1000));
    puts_(&b, ts);
    level = level != NULL ? level : "info";
    put_jstr(&b, level, strlen(level));
    if (component != NULL) {
        puts_(&b, ",\"component\":");
        put_jstr(&b, component, strlen(component));
    }
    puts_(&b, ",\"msg\":");
    put_jstr(&b, msg, strlen(msg));
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t n;
        const char *v = lift(msg, keys[k], &n);
        if (v == NULL)
            continue;
        put(&b, ",\"", 2);
        puts_(&b, keys[k]);
        put(&b, "\":", 2);
        put_jstr(&b, v, n);
    }
    put(&b, "}", 1);
    if (b.full) {
        buf[0] = '\0';
        return GS_ERANGE;
    }
    buf[b.len] = '\0';
    return GS_OK;
}

void gs_log_stderr_json(void *ctx, const char *line)
{
    const struct gs_log_json_sink *sink = ctx;
    struct timespec ts = {0, 0};
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    char out[GS_LOG_JSON_MAX];
    if (gs_log_json_format(out, sizeof out, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
                           sink != NULL ? sink->level : NULL, sink != NULL ? sink->component : NULL,
                           line) == GS_OK)
        (void)fprintf(stderr, "%s\n", out);
}
