/*
 * GPU Feature Discovery-style node labels (contract in include/gpusched/gfd_labels.h).
 *
 * Labels are collected unsorted into the caller's set, each value passed through one
 * sanitiser, and sorted by key at the end, so the output is the same whatever order the
 * rules run in.
 */
#include "gpusched/gfd_labels.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int gs_gfd_mig_strategy_parse(const char *text, enum gs_mig_strategy *out)
{
    if (text == NULL || out == NULL)
        return GS_EINVAL;
    if (strcmp(text, "none") == 0)
        *out = GS_MIG_STRATEGY_NONE;
    else if (strcmp(text, "single") == 0)
        *out = GS_MIG_STRATEGY_SINGLE;
    else if (strcmp(text, "mixed") == 0)
        *out = GS_MIG_STRATEGY_MIXED;
    else
        return GS_EINVAL;
    return GS_OK;
}

static bool alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Makes a valid label value: [A-Za-z0-9._-], at most 63 chars, alphanumeric at both ends. */
static void sanitise_value(const char *in, char *out)
{
    size_t n = 0;
    for (const char *p = in; *p != '\0' && n < GS_GFD_VALUE_LEN - 1; p++)
        out[n++] = alnum(*p) || *p == '.' || *p == '_' || *p == '-' ? *p : '-';
    out[n] = '\0';
    while (n > 0 && !alnum(out[n - 1]))
        out[--n] = '\0';
    size_t skip = 0;
    while (out[skip] != '\0' && !alnum(out[skip]))
        skip++;
    memmove(out, out + skip, n - skip + 1);
}

/* Appends a label with a printf-formatted value; records GS_ELIMIT once full. */
GS_PRINTF(4, 5)
static void add(struct gs_gfd_labels *l, int *err, const char *key, const char *fmt, ...)
{
    if (*err != GS_OK)
        return;
    if (l->n == GS_GFD_LABELS_MAX) {
        *err = GS_ELIMIT;
        return;
    }
    struct gs_gfd_label *lab = &l->v[l->n++];
    (void)snprintf(lab->key, sizeof lab->key, "%s", key);
    char raw[256];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    sanitise_value(raw, lab->value);
}

/* GFD's architecture family from the compute capability. */
static const char *family(int32_t major, int32_t minor)
{
    switch (major) {
    case 1:
        return "tesla";
    case 2:
        return "fermi";
    case 3:
        return "kepler";
    case 5:
        return "maxwell";
    case 6:
        return "pascal";
    case 7:
        return minor < 5 ? "volta" : "turing";
    case 8:
        return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
        return "hopper";
    case 10:
    case 12:
        return "blackwell";
    default:
        return "undefined";
    }
}

/* Slices of a profile "3g.71gb" -> 3; 0 when it does not start with "<n>g". */
static unsigned profile_slices(const char *profile)
{
    char *end;
    unsigned long n = strtoul(profile, &end, 10);
    return end != profile && *end == 'g' && n < 100 ? (unsigned)n : 0;
}

/* Label name part of a profile: '+' (not allowed in label names) becomes '.'. */
static void profile_key(const char *profile, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = profile; *p != '\0' && n + 1 < cap; p++)
        out[n++] = alnum(*p) || *p == '.' || *p == '-' || *p == '_' ? *p : '.';
    out[n] = '\0';
}

static void driver_labels(struct gs_gfd_labels *l, int *err, const struct gs_gpu_system *sys)
{
    if (sys->driver_version[0] != '\0') {
        /* "550.54.15": major.minor.revision; the revision may be absent ("550.120"). */
        char major[GS_GPU_VERSION_LEN] = "", minor[GS_GPU_VERSION_LEN] = "",
             rev[GS_GPU_VERSION_LEN] = "";
        char *parts[3] = {major, minor, rev};
        int k = 0;
        size_t at = 0;
        for (const char *p = sys->driver_version; *p != '\0'; p++) {
            if (*p == '.' && k < 2) {
                k++;
                at = 0;
            } else if (at + 1 < GS_GPU_VERSION_LEN) {
                parts[k][at++] = *p;
                parts[k][at] = '\0';
            }
        }
        add(l, err, "nvidia.com/cuda.driver-version.full", "%s", sys->driver_version);
        add(l, err, "nvidia.com/cuda.driver-version.major", "%s", major);
        add(l, err, "nvidia.com/cuda.driver-version.minor", "%s", minor);
        add(l, err, "nvidia.com/cuda.driver-version.revision", "%s", rev);
        add(l, err, "nvidia.com/cuda.driver.major", "%s", major);
        add(l, err, "nvidia.com/cuda.driver.minor", "%s", minor);
        add(l, err, "nvidia.com/cuda.driver.rev", "%s", rev);
    }
    if (sys->cuda_driver_version > 0) {
        int maj = sys->cuda_driver_version / 1000;
        int min = sys->cuda_driver_version % 1000 / 10;
        add(l, err, "nvidia.com/cuda.runtime-version.full", "%d.%d", maj, min);
        add(l, err, "nvidia.com/cuda.runtime-version.major", "%d", maj);
        add(l, err, "nvidia.com/cuda.runtime-version.minor", "%d", min);
        add(l, err, "nvidia.com/cuda.runtime.major", "%d", maj);
        add(l, err, "nvidia.com/cuda.runtime.minor", "%d", min);
    }
}

/* Labels of strategy "single": returns GS_EINVAL unless every GPU runs MIG with one profile. */
static int single_labels(struct gs_gfd_labels *l, int *err, const struct gs_gpu_info *gpus,
                         uint32_t n, uint32_t replicas)
{
    const struct gs_gpu_mig *first = NULL;
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!gpus[i].mig_enabled || gpus[i].mig_count == 0)
            return GS_EINVAL;
        for (uint32_t k = 0; k < gpus[i].mig_count && k < GS_GPU_MIG_MAX; k++) {
            const struct gs_gpu_mig *m = &gpus[i].mig[k];
            if (first == NULL)
                first = m;
            else if (strcmp(first->profile, m->profile) != 0)
                return GS_EINVAL;
            count++;
        }
    }
    add(l, err, "nvidia.com/gpu.product", "%s-MIG-%s", gpus[0].model, first->profile);
    add(l, err, "nvidia.com/gpu.count", "%" PRIu32, count);
    add(l, err, "nvidia.com/gpu.memory", "%" PRIu64, first->mem_mib);
    add(l, err, "nvidia.com/gpu.replicas", "%" PRIu32, replicas);
    unsigned slices = profile_slices(first->profile);
    if (slices > 0)
        add(l, err, "nvidia.com/gpu.slices.gi", "%u", slices);
    return GS_OK;
}

static void mixed_labels(struct gs_gfd_labels *l, int *err, const struct gs_gpu_info *gpus,
                         uint32_t n)
{
    /* Distinct profiles in order of first appearance; a node has a handful at most. */
    const struct gs_gpu_mig *kinds[GS_GPU_MAX * GS_GPU_MIG_MAX];
    uint32_t counts[GS_GPU_MAX * GS_GPU_MIG_MAX];
    uint32_t nk = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!gpus[i].mig_enabled)
            continue;
        for (uint32_t k = 0; k < gpus[i].mig_count && k < GS_GPU_MIG_MAX; k++) {
            const struct gs_gpu_mig *m = &gpus[i].mig[k];
            uint32_t j = 0;
            while (j < nk && strcmp(kinds[j]->profile, m->profile) != 0)
                j++;
            if (j == nk) {
                kinds[nk] = m;
                counts[nk++] = 0;
            }
            counts[j]++;
        }
    }
    for (uint32_t j = 0; j < nk; j++) {
        if (kinds[j]->profile[0] == '\0')
            continue; /* a MIG device whose profile the driver did not name */
        char pk[GS_GPU_PROFILE_LEN];
        profile_key(kinds[j]->profile, pk, sizeof pk);
        char key[GS_GFD_KEY_LEN];
        (void)snprintf(key, sizeof key, "nvidia.com/mig-%s.count", pk);
        add(l, err, key, "%" PRIu32, counts[j]);
        (void)snprintf(key, sizeof key, "nvidia.com/mig-%s.memory", pk);
        add(l, err, key, "%" PRIu64, kinds[j]->mem_mib);
        unsigned slices = profile_slices(kinds[j]->profile);
        if (slices > 0) {
            (void)snprintf(key, sizeof key, "nvidia.com/mig-%s.slices.gi", pk);
            add(l, err, key, "%u", slices);
        }
    }
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const struct gs_gfd_label *)a)->key, ((const struct gs_gfd_label *)b)->key);
}

int gs_gfd_labels(const struct gs_gpu_system *sys, const struct gs_gpu_info *gpus, uint32_t n,
                  const struct gs_gfd_options *opt, struct gs_gfd_labels *out)
{
    if (out == NULL)
        return GS_EINVAL;
    out->n = 0;
    if (sys == NULL || (n > 0 && gpus == NULL))
        return GS_EINVAL;
    if (n == 0)
        return GS_OK;
    struct gs_gfd_options o = {.replicas = 1, .mig_strategy = GS_MIG_STRATEGY_NONE};
    if (opt != NULL)
        o = *opt;
    if (o.replicas == 0)
        o.replicas = 1;

    int err = GS_OK;
    bool capable = false;
    for (uint32_t i = 0; i < n; i++)
        capable |= gpus[i].mig_capable;

    if (o.mig_strategy == GS_MIG_STRATEGY_SINGLE && capable) {
        int rc = single_labels(out, &err, gpus, n, o.replicas);
        if (rc != GS_OK) {
            out->n = 0;
            return rc;
        }
    } else {
        add(out, &err, "nvidia.com/gpu.product", "%s", gpus[0].model);
        add(out, &err, "nvidia.com/gpu.count", "%" PRIu32, n);
        add(out, &err, "nvidia.com/gpu.memory", "%" PRIu64, gpus[0].mem_total_mib);
        add(out, &err, "nvidia.com/gpu.replicas", "%" PRIu32, o.replicas);
    }
    if (gpus[0].cc_major >= 0 && gpus[0].cc_minor >= 0) {
        add(out, &err, "nvidia.com/gpu.compute.major", "%" PRId32, gpus[0].cc_major);
        add(out, &err, "nvidia.com/gpu.compute.minor", "%" PRId32, gpus[0].cc_minor);
        add(out, &err, "nvidia.com/gpu.family", "%s", family(gpus[0].cc_major, gpus[0].cc_minor));
    }
    driver_labels(out, &err, sys);
    add(out, &err, "nvidia.com/mig.capable", "%s", capable ? "true" : "false");
    if (capable) {
        static const char *const names[] = {"none", "single", "mixed"};
        add(out, &err, "nvidia.com/mig.strategy", "%s",
            (unsigned)o.mig_strategy < 3 ? names[o.mig_strategy] : "none");
        if (o.mig_strategy == GS_MIG_STRATEGY_MIXED)
            mixed_labels(out, &err, gpus, n);
    }
    if (o.timestamp_s > 0)
        add(out, &err, "nvidia.com/gfd.timestamp", "%" PRId64, o.timestamp_s);
    if (err != GS_OK) {
        out->n = 0;
        return err;
    }
    qsort(out->v, out->n, sizeof out->v[0], cmp_label);
    return GS_OK;
}

const char *gs_gfd_label_get(const struct gs_gfd_labels *l, const char *key)
{
    if (l == NULL || key == NULL)
        return NULL;
    for (uint32_t i = 0; i < l->n && i < GS_GFD_LABELS_MAX; i++)
        if (strcmp(l->v[i].key, key) == 0)
            return l->v[i].value;
    return NULL;
}

int gs_gfd_labels_write(const struct gs_gfd_labels *l, FILE *f)
{
    if (l == NULL || f == NULL)
        return GS_EINVAL;
    for (uint32_t i = 0; i < l->n && i < GS_GFD_LABELS_MAX; i++)
        if (fprintf(f, "%s=%s\n", l->v[i].key, l->v[i].value) < 0)
            return GS_EIO;
    return ferror(f) ? GS_EIO : GS_OK;
}
