/*
 * Formatting of log lines and the two stderr sinks (contract in include/gpusched/log.h).
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r, clock_gettime */

#include "gpusched/log.h"

#include <stdio.h>
#include <time.h>

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
