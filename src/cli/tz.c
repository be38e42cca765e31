/*
 * `--tz` over the C library's tz database (src/cli/tz.h): a zone name is checked against its
 * TZif file, then set as the process's TZ so localtime_r(3) gives each time's offset
 * (tm_gmtoff) with the zone's DST rule of that date.
 */
#define _DEFAULT_SOURCE /* tm_gmtoff, setenv */
#include "cli/tz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/usage_report.h"

/* A zone name as the tz database spells them: letters, digits, '_', '-', '+' and '/', no empty
 * component, no "." component (so no way out of the database's directory). */
static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(((struct gs__cli_tz *)0)->name) || s[0] == '/' || s[n - 1] == '/')
        return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '+' || c == '/';
        if (!ok || (c == '/' && p[1] == '/'))
            return 0;
    }
    return 1;
}

int gs__cli_tz_parse(const char *s, struct gs__cli_tz *tz, char *msg, size_t cap)
{
    memset(tz, 0, sizeof(*tz));
    if (gs_usage_parse_tz(s, &tz->offset_min) == GS_OK)
        return GS_OK;
    if (s[0] == '+' || s[0] == '-' || !name_ok(s)) {
        (void)snprintf(msg, cap,
                       "expected UTC, an offset such as +01:00 or -05:00, or a time zone name "
                       "such as Europe/Berlin, got '%s'",
                       s);
        return GS_EPARSE;
    }
    const char *dir = getenv("TZDIR");
    if (!dir || !dir[0])
        dir = "/usr/share/zoneinfo";
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/%s", dir, s);
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    size_t got = f ? fread(magic, 1, sizeof(magic), f) : 0;
    if (f)
        (void)fclose(f);
    if (got != sizeof(magic) || memcmp(magic, "TZif", 4) != 0) {
        (void)snprintf(msg, cap,
                       "unknown time zone '%s' (%s %s; install tzdata, or give UTC or an offset "
                       "such as +01:00)",
                       s, f ? "not a tz database file:" : "no", path);
        return GS_EPARSE;
    }
    (void)snprintf(tz->name, sizeof(tz->name), "%s", s);
    /* glibc reads a TZ of ":NAME" as the file NAME under TZDIR, never as a POSIX rule. */
    char val[sizeof(tz->name) + 1];
    (void)snprintf(val, sizeof(val), ":%s", s);
    if (setenv("TZ", val, 1) != 0) {
        (void)snprintf(msg, cap, "cannot set TZ to %s", s);
        return GS_EPARSE;
    }
    tzset();
    return GS_OK;
}

int32_t gs__cli_tz_offset_at(int64_t ms, void *ctx)
{
    const struct gs__cli_tz *tz = ctx;
    if (!tz->name[0])
        return tz->offset_min;
    /* Floor to whole seconds, also for times before 1970. */
    int64_t sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    time_t t = (time_t)sec;
    struct tm tm;
    if (!localtime_r(&t, &tm))
        return 0;
    return (int32_t)(tm.tm_gmtoff / 60);
}
