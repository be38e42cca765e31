/*
 * The backend-independent part of include/gpusched/gpu.h: argument checks in front of the
 * operations table, the last-error text, and the monotonic clock the agent runs on.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */

#include "gpusched/gpu.h"

#include "gpu_internal.h"
#include "gpusched/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t mono_now_ms(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mono_sleep_ms(void *ctx, int64_t ms)
{
    (void)ctx;
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

struct gs_clock gs_clock_monotonic(void)
{
    struct gs_clock c = {.now_ms = mono_now_ms, .sleep_ms = mono_sleep_ms, .ctx = NULL};
    return c;
}

int gs__gpu_fail(struct gs_gpu_backend *b, int err, const char *fmt, ...)
{
    if (b == NULL)
        return err;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    return err;
}

bool gs__strlcpy(char *dst, const char *src, size_t cap)
{
    if (cap == 0)
        return false;
    size_t n = strlen(src);
    bool fits = n < cap;
    if (!fits)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return fits;
}

int gs_gpu_system(struct gs_gpu_backend *b, struct gs_gpu_system *out)
{
    if (b == NULL || out == NULL)
        return GS_EINVAL;
    b->err[0] = '\0';
    return b->ops->system(b, out);
}

int gs_gpu_count(struct gs_gpu_backend *b, uint32_t *n_out)
{
    if (b == NULL || n_out == NULL)
        return GS_EINVAL;
    b->err[0] = '\0';
    return b->ops->count(b, n_out);
}

int gs_gpu_info(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_info *out)
{
    if (b == NULL || out == NULL)
        return GS_EINVAL;
    b->err[0] = '\0';
    return b->ops->info(b, index, out);
}

int gs_gpu_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_sample *out)
{
    if (b == NULL || out == NULL)
        return GS_EINVAL;
    b->err[0] = '\0';
    return b->ops->sample(b, index, out);
}

int gs_gpu_processes(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_proc *out,
                     uint32_t cap, uint32_t *n_out)
{
    if (n_out != NULL)
        *n_out = 0;
    if (b == NULL || out == NULL || n_out == NULL || cap == 0)
        return GS_EINVAL;
    b->err[0] = '\0';
    if (b->ops->processes == NULL)
        return gs__gpu_fail(b, GS_ENOENT, "the %s backend cannot read GPU processes", b->ops->name);
    int rc = b->ops->processes(b, index, out, cap, n_out);
    if (rc != GS_OK || *n_out > cap)
        *n_out = 0;
    return rc;
}

int gs_gpu_mig_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_mig_sample *out,
                      uint32_t cap, uint32_t *n_out)
{
    if (n_out != NULL)
        *n_out = 0;
    if (b == NULL || out == NULL || n_out == NULL || cap == 0)
        return GS_EINVAL;
    b->err[0] = '\0';
    if (b->ops->mig_sample == NULL)
        return gs__gpu_fail(b, GS_ENOENT, "the %s backend cannot read MIG devices' values",
                            b->ops->name);
    int rc = b->ops->mig_sample(b, index, out, cap, n_out);
    if (rc != GS_OK || *n_out > cap)
        *n_out = 0;
    return rc;
}

int gs_gpu_wait_event(struct gs_gpu_backend *b, int64_t timeout_ms, struct gs_gpu_event *out)
{
    if (b == NULL || out == NULL || timeout_ms < 0)
        return GS_EINVAL;
    b->err[0] = '\0';
    return b->ops->wait_event(b, timeout_ms, out);
}

int gs_gpu_mig_destroy(struct gs_gpu_backend *b, uint32_t index, uint32_t start)
{
    if (b == NULL)
        return GS_EINVAL;
    b->err[0] = '\0';
    if (b->ops->mig_destroy == NULL)
        return gs__gpu_fail(b, GS_ENOENT, "the %s backend cannot change MIG layouts", b->ops->name);
    return b->ops->mig_destroy(b, index, start);
}

int gs_gpu_mig_create(struct gs_gpu_backend *b, uint32_t index, const char *profile, uint32_t start)
{
    if (b == NULL || profile == NULL)
        return GS_EINVAL;
    b->err[0] = '\0';
    if (b->ops->mig_create == NULL)
        return gs__gpu_fail(b, GS_ENOENT, "the %s backend cannot change MIG layouts", b->ops->name);
    return b->ops->mig_create(b, index, profile, start);
}

const char *gs_gpu_last_error(const struct gs_gpu_backend *b)
{
    return b == NULL ? "" : b->err;
}

void gs_gpu_close(struct gs_gpu_backend *b)
{
    if (b != NULL)
        b->ops->close(b);
}
