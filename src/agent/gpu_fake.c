/*
 * The fake GPU backend (contract in include/gpusched/gpu.h, format in deploy/fake-gpus.yaml;
 * the YAML reader is gpu_fake_yaml.c).
 *
 * The script is sorted by time (stably, so entries with equal t_ms keep file order) and
 * replayed lazily: each operation first applies every entry whose time has come. Applied
 * event entries between `delivered` and `applied` are the queue of undelivered events, so no
 * separate queue is needed.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/gpu.h"

#include "gpusched/err.h"
#include "gpusched/mig.h"
#include "gpusched/diag.h"
#include "util/file.h"

#include "gpu_fake_int.h"
#include "gpu_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the backend ---------------------------------------------------------------------- */

static struct fake *impl(struct gs_gpu_backend *b)
{
    return b->impl;
}

/* Milliseconds since open. */
static int64_t elapsed_ms(struct fake *f)
{
    return f->clock.now_ms(f->clock.ctx) - f->t0_ms;
}

static void apply(struct fake *f, const struct step *s)
{
    struct fake_gpu *g = &f->gpu[s->gpu];
    switch (s->kind) {
    case STEP_SET:
        if (s->set_mask & GS_GPU_HAVE_UTIL)
            g->cur.util_pct = s->set.util_pct;
        if (s->set_mask & GS_GPU_HAVE_TEMP)
            g->cur.temp_c = s->set.temp_c;
        if (s->set_mask & GS_GPU_HAVE_FB) {
            g->cur.fb_used_mib = s->set.fb_used_mib;
            g->cur.fb_free_mib = g->info.mem_total_mib - s->set.fb_used_mib;
        }
        if (s->set_mask & GS_GPU_HAVE_POWER)
            g->cur.power_mw = s->set.power_mw;
        if (s->set_mask & GS_GPU_HAVE_SM_CLOCK)
            g->cur.sm_clock_mhz = s->set.sm_clock_mhz;
        if (s->set_mask & GS_GPU_HAVE_MEM_CLOCK)
            g->cur.mem_clock_mhz = s->set.mem_clock_mhz;
        break;
    case STEP_XID:
        g->cur.xid_count++;
        g->cur.last_xid = s->n;
        break;
    case STEP_ECC:
        g->cur.ecc_dbe_vol_total += s->n;
        break;
    case STEP_LOST:
        if (g->lost && !s->lost)
            g->resets++; /* found again: what the NVML backend counts as a reset seen */
        g->lost = s->lost;
        break;
    case STEP_MIG: {
        const struct fake_layout *l = &f->layouts[s->layout];
        g->info.mig_enabled = l->info.mig_enabled;
        g->info.mig_count = l->info.mig_count;
        memset(g->info.mig, 0, sizeof g->info.mig);
        memcpy(g->info.mig, l->info.mig, l->info.mig_count * sizeof l->info.mig[0]);
        memcpy(g->mig_val, l->val, sizeof g->mig_val);
        break;
    }
    }
}

/* Applies every script entry that is due. */
static void advance(struct fake *f)
{
    int64_t now = elapsed_ms(f);
    while (f->applied < f->n_steps && f->steps[f->applied].t_ms <= now)
        apply(f, &f->steps[f->applied++]);
}

static bool is_event(const struct step *s)
{
    return s->kind == STEP_XID || s->kind == STEP_ECC;
}

static int fake_system(struct gs_gpu_backend *b, struct gs_gpu_system *out)
{
    *out = impl(b)->sys;
    return GS_OK;
}

static int fake_count(struct gs_gpu_backend *b, uint32_t *n_out)
{
    *n_out = impl(b)->n;
    return GS_OK;
}

/* GPU `index` of the fake node with the script brought up to now (a scripted MIG layout or
 * loss is seen from its t_ms on); NULL with *rc set (GS_ERANGE; with `live`, GS_EIO for a GPU
 * scripted lost) and the backend's error text when there is none to use. */
static struct fake_gpu *gpu_at(struct gs_gpu_backend *b, uint32_t index, bool live, int *rc)
{
    struct fake *f = impl(b);
    if (index >= f->n) {
        *rc = gs__gpu_fail(b, GS_ERANGE, "no GPU %" PRIu32 " (the fake node has %" PRIu32 ")",
                           index, f->n);
        return NULL;
    }
    advance(f);
    struct fake_gpu *g = &f->gpu[index];
    if (live && g->lost) {
        *rc = gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " is lost (scripted)", index);
        return NULL;
    }
    *rc = GS_OK;
    return g;
}

static int fake_info(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_info *out)
{
    int rc;
    const struct fake_gpu *g = gpu_at(b, index, false, &rc);
    if (g != NULL)
        *out = g->info;
    return rc;
}

static int fake_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_sample *out)
{
    int rc;
    const struct fake_gpu *g = gpu_at(b, index, true, &rc);
    if (g == NULL)
        return rc;
    memset(out, 0, sizeof *out);
    out->valid = g->cur.valid;
    out->resets = g->resets;
    if (g->cur.valid & GS_GPU_HAVE_UTIL)
        out->util_pct = g->cur.util_pct;
    if (g->cur.valid & GS_GPU_HAVE_FB) {
        out->fb_used_mib = g->cur.fb_used_mib;
        out->fb_free_mib = g->cur.fb_free_mib;
    }
    if (g->cur.valid & GS_GPU_HAVE_TEMP)
        out->temp_c = g->cur.temp_c;
    if (g->cur.valid & GS_GPU_HAVE_POWER)
        out->power_mw = g->cur.power_mw;
    if (g->cur.valid & GS_GPU_HAVE_SM_CLOCK)
        out->sm_clock_mhz = g->cur.sm_clock_mhz;
    if (g->cur.valid & GS_GPU_HAVE_MEM_CLOCK)
        out->mem_clock_mhz = g->cur.mem_clock_mhz;
    if (g->cur.valid & GS_GPU_HAVE_ECC_DBE)
        out->ecc_dbe_vol_total = g->cur.ecc_dbe_vol_total;
    if (g->cur.valid & GS_GPU_HAVE_XID) {
        out->xid_count = g->cur.xid_count;
        out->last_xid = g->cur.last_xid;
    }
    return GS_OK;
}

static int fake_processes(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_proc *out,
                          uint32_t cap, uint32_t *n_out)
{
    int rc;
    const struct fake_gpu *g = gpu_at(b, index, true, &rc);
    if (g == NULL)
        return rc;
    if (g->no_procs)
        return gs__gpu_fail(b, GS_ENOENT, "GPU %" PRIu32 " cannot list processes (scripted)",
                            index);
    uint32_t n = g->n_procs < cap ? g->n_procs : cap;
    memcpy(out, g->procs, n * sizeof *out);
    *n_out = n;
    return GS_OK;
}

static int fake_mig_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_mig_sample *out,
                           uint32_t cap, uint32_t *n_out)
{
    int rc;
    const struct fake_gpu *g = gpu_at(b, index, true, &rc);
    if (g == NULL)
        return rc;
    uint32_t n = 0;
    for (uint32_t k = 0; g->info.mig_enabled && k < g->info.mig_count && n < cap; k++) {
        if (!g->info.mig[k].has_gi_id)
            continue; /* values are told by GPU instance: one without an id has none */
        struct gs_gpu_mig_sample *m = &out[n++];
        memset(m, 0, sizeof *m);
        m->gi_id = g->info.mig[k].gi_id;
        if (g->mig_val[k].has_mem) {
            m->fb_used_mib = g->mig_val[k].mem_used_mib;
            m->valid |= GS_GPU_HAVE_FB;
        }
        if (g->mig_val[k].has_util) {
            m->util_pct = g->mig_val[k].util_pct;
            m->valid |= GS_GPU_HAVE_UTIL;
        }
    }
    *n_out = n;
    return GS_OK;
}

/* Returns the next undelivered, applied event step, or NULL. */
static const struct step *pending(struct fake *f)
{
    while (f->delivered < f->applied && !is_event(&f->steps[f->delivered]))
        f->delivered++;
    return f->delivered < f->applied ? &f->steps[f->delivered] : NULL;
}

/* Time (since open) of the next event step not applied yet; INT64_MAX when none is left. */
static int64_t next_event_ms(const struct fake *f)
{
    for (size_t i = f->applied; i < f->n_steps; i++)
        if (is_event(&f->steps[i]))
            return f->steps[i].t_ms;
    return INT64_MAX;
}

static int fake_wait_event(struct gs_gpu_backend *b, int64_t timeout_ms, struct gs_gpu_event *out)
{
    struct fake *f = impl(b);
    int64_t start = elapsed_ms(f);
    int64_t deadline = timeout_ms > INT64_MAX - start ? INT64_MAX : start + timeout_ms;
    for (;;) {
        advance(f);
        const struct step *s = pending(f);
        if (s != NULL) {
            out->gpu_index = s->gpu;
            out->kind = s->kind == STEP_XID ? GS_GPU_EVENT_XID : GS_GPU_EVENT_ECC_DBE;
            out->xid = s->kind == STEP_XID ? s->n : 0;
            out->t_ms = f->clock.now_ms(f->clock.ctx);
            f->delivered++;
            return GS_OK;
        }
        int64_t now = elapsed_ms(f);
        if (now >= deadline)
            return GS_ENOENT;
        int64_t until = next_event_ms(f);
        if (until > deadline)
            until = deadline;
        f->clock.sleep_ms(f->clock.ctx, until > now ? until - now : 1);
    }
}

static void fake_close(struct gs_gpu_backend *b)
{
    struct fake *f = impl(b);
    if (f != NULL) {
        free(f->steps);
        free(f->layouts);
    }
    free(f);
    free(b);
}

/* ---- MIG re-partition (dynamic MIG) ------------------------------------------------------ */

static int fake_mig_destroy(struct gs_gpu_backend *b, uint32_t index, uint32_t start)
{
    int rc;
    struct fake_gpu *fg = gpu_at(b, index, false, &rc);
    if (fg == NULL)
        return rc;
    struct gs_gpu_info *g = &fg->info;
    if (!g->mig_enabled)
        return gs__gpu_fail(b, GS_EINVAL, "GPU %" PRIu32 " is not in MIG mode", index);
    for (uint32_t i = 0; i < g->mig_count; i++) {
        if (!g->mig[i].has_start || g->mig[i].start_slot != start)
            continue;
        struct fake_mig_val *val = fg->mig_val; /* by position in g->mig */
        memmove(&g->mig[i], &g->mig[i + 1], (g->mig_count - i - 1) * sizeof g->mig[0]);
        memmove(&val[i], &val[i + 1], (g->mig_count - i - 1) * sizeof val[0]);
        g->mig_count--;
        memset(&g->mig[g->mig_count], 0, sizeof g->mig[0]);
        memset(&val[g->mig_count], 0, sizeof val[0]);
        return GS_OK;
    }
    return gs__gpu_fail(b, GS_ENOENT, "no GPU instance starts at slice %" PRIu32 " of GPU %" PRIu32,
                        start, index);
}

static int fake_mig_create(struct gs_gpu_backend *b, uint32_t index, const char *profile,
                           uint32_t start)
{
    int rc;
    struct fake_gpu *fg = gpu_at(b, index, false, &rc);
    if (fg == NULL)
        return rc;
    struct gs_gpu_info *g = &fg->info;
    if (!g->mig_enabled)
        return gs__gpu_fail(b, GS_EINVAL, "GPU %" PRIu32 " is not in MIG mode", index);
    const struct gs_mig_model *m = gs_mig_model_find(g->model);
    if (m == NULL)
        return gs__gpu_fail(b, GS_EINVAL, "GPU %" PRIu32 ": model %s is not in the MIG table",
                            index, g->model);
    int p = gs_mig_profile_find(m, profile);
    if (p < 0)
        return gs__gpu_fail(b, GS_EINVAL, "GPU %" PRIu32 " (%s) has no MIG profile %s", index,
                            m->name, profile);
    struct gs_mig_instance in = {(uint8_t)p, (uint8_t)(start > 255 ? 255 : start)};
    uint32_t mask = gs_mig_mem_mask(m, in);
    if (mask == 0)
        return gs__gpu_fail(b, GS_EINVAL, "MIG profile %s cannot start at slice %" PRIu32, profile,
                            start);
    uint32_t next_gi = 1;
    for (uint32_t i = 0; i < g->mig_count; i++) {
        const struct gs_gpu_mig *x = &g->mig[i];
        int xp = gs_mig_profile_find(m, x->profile);
        if (x->has_start && xp >= 0 &&
            (gs_mig_mem_mask(m, (struct gs_mig_instance){(uint8_t)xp, (uint8_t)x->start_slot}) &
             mask) != 0)
            return gs__gpu_fail(b, GS_ECONFLICT,
                                "MIG %s at slice %" PRIu32 " overlaps the %s at slice %" PRIu32,
                                profile, start, x->profile, x->start_slot);
        if (x->has_gi_id && x->gi_id >= next_gi)
            next_gi = x->gi_id + 1;
    }
    if (g->mig_count >= GS_GPU_MIG_MAX)
        return gs__gpu_fail(b, GS_ECONFLICT, "GPU %" PRIu32 " holds %d MIG devices already", index,
                            GS_GPU_MIG_MAX);
    struct gs_gpu_mig *n = &g->mig[g->mig_count];
    memset(n, 0, sizeof *n);
    (void)gs__strlcpy(n->profile, profile, sizeof n->profile);
    const char *tail = strncmp(g->uuid, "GPU-", 4) == 0 ? g->uuid + 4 : g->uuid;
    (void)snprintf(n->uuid, sizeof n->uuid, "MIG-%.60s-gi%" PRIu32, tail, next_gi);
    int64_t mem = gs_mig_profile_mem_mib(m, (uint32_t)p, (int64_t)g->mem_total_mib);
    n->mem_mib = mem > 0 ? (uint64_t)mem : 0;
    n->has_start = true;
    n->start_slot = start;
    n->has_gi_id = true;
    n->gi_id = next_gi;
    n->has_ci_id = true; /* one compute instance over the whole GPU instance, as created */
    n->ci_id = 0;
    memset(&fg->mig_val[g->mig_count], 0, sizeof fg->mig_val[0]);
    g->mig_count++;
    return GS_OK;
}

static const struct gs_gpu_ops fake_ops = {
    .name = "fake",
    .system = fake_system,
    .count = fake_count,
    .info = fake_info,
    .sample = fake_sample,
    .processes = fake_processes,
    .mig_sample = fake_mig_sample,
    .wait_event = fake_wait_event,
    .mig_destroy = fake_mig_destroy,
    .mig_create = fake_mig_create,
    .close = fake_close,
};

int gs_gpu_parse_fake(const char *buf, size_t len, const char *name, const struct gs_clock *clock,
                      struct gs_gpu_backend **out, struct gs_diag *diag)
{
    struct fake *f = NULL;
    struct gs_gpu_backend *b = NULL;
    int rc = GS_OK;

    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", name != NULL ? name : "");
    }
    if (out != NULL)
        *out = NULL;
    if (buf == NULL || out == NULL || clock == NULL || clock->now_ms == NULL ||
        clock->sleep_ms == NULL) {
        rc = GS_EINVAL;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "invalid argument");
        goto out;
    }
    if (len > FAKE_FILE_MAX) {
        rc = GS_EIO;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "file larger than %zu bytes",
                           FAKE_FILE_MAX);
        goto out;
    }
    f = calloc(1, sizeof *f);
    b = calloc(1, sizeof *b);
    if (f == NULL || b == NULL) {
        rc = GS_ENOMEM;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "out of memory");
        goto out;
    }
    rc = gs__fake_load(f, buf, len, diag);
    if (rc != GS_OK)
        goto out;
    f->clock = *clock;
    f->t0_ms = clock->now_ms(clock->ctx);
    b->ops = &fake_ops;
    b->impl = f;
    *out = b;
    f = NULL;
    b = NULL;
out:
    if (f != NULL) {
        free(f->steps);
        free(f->layouts);
    }
    free(f);
    free(b);
    return rc;
}

int gs_gpu_open_fake(const char *path, const struct gs_clock *clock, struct gs_gpu_backend **out,
                     struct gs_diag *diag)
{
    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", path != NULL ? path : "");
    }
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL) {
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "invalid argument");
        return GS_EINVAL;
    }
    char *buf;
    size_t len;
    int rc = gs__read_file(path, FAKE_FILE_MAX, &buf, &len, diag);
    if (rc != GS_OK)
        return rc;
    rc = gs_gpu_parse_fake(buf, len, path, clock, out, diag);
    free(buf);
    return rc;
}
