/*
 * MIG geometry (include/gpusched/mig.h): the one table of GPU-instance profiles per model, the
 * lookup by model name, the layout check and the count of maximal layouts. The table is the
 * only place the geometry is written down; everything else reads it.
 */
#include "gpusched/mig.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"

/* Placements of the 7-compute, 8-memory-slice GPUs (A100, H100, H200, B200), in memory slices,
 * as `nvidia-smi mig -lgipp` lists them: 1g {0..6}:1, the two-slice 1g {0,2,4,6}:2, 2g {0,2,4}:2,
 * 3g {0,4}:4, 4g {0}:4, 7g {0}:8. */
#define P7_1G(name, mib)                                                                           \
    {                                                                                              \
        name, 1, 1, 7, 7, {0, 1, 2, 3, 4, 5, 6}, mib                                               \
    }
#define P7_1G_ME(name, mib)                                                                        \
    {                                                                                              \
        name, 1, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, mib                                               \
    }
#define P7_1G2(name, mib)                                                                          \
    {                                                                                              \
        name, 1, 2, 4, 4, {0, 2, 4, 6}, mib                                                        \
    }
#define P7_2G(name, mib)                                                                           \
    {                                                                                              \
        name, 2, 2, 3, 3, {0, 2, 4}, mib                                                           \
    }
#define P7_3G(name, mib)                                                                           \
    {                                                                                              \
        name, 3, 4, 2, 2, {0, 4}, mib                                                              \
    }
#define P7_4G(name, mib)                                                                           \
    {                                                                                              \
        name, 4, 4, 1, 1, {0}, mib                                                                 \
    }
#define P7_7G(name, mib)                                                                           \
    {                                                                                              \
        name, 7, 8, 1, 1, {0}, mib                                                                 \
    }

#define MODEL7(model, g1, g1me, g1x2, g2, g3, g4, g7)                                              \
    {                                                                                              \
        model, 7, 8, 7,                                                                            \
        {                                                                                          \
            P7_1G(g1, 0), P7_1G_ME(g1me, 0), P7_1G2(g1x2, 0), P7_2G(g2, 0), P7_3G(g3, 0),          \
                P7_4G(g4, 0), P7_7G(g7, 0)                                                         \
        }                                                                                          \
    }

static const struct gs_mig_model models[] = {
    /* A30-24GB: 4 compute and 4 memory slices; 1g {0,1,2,3}:1, 2g {0,2}:2, 4g {0}:4. */
    {"A30-24GB",
     4,
     4,
     5,
     {{"1g.6gb", 1, 1, 4, 4, {0, 1, 2, 3}, 0},
      {"1g.6gb+me", 1, 1, 1, 4, {0, 1, 2, 3}, 0},
      {"2g.12gb", 2, 2, 2, 2, {0, 2}, 0},
      {"2g.12gb+me", 2, 2, 1, 2, {0, 2}, 0},
      {"4g.24gb", 4, 4, 1, 1, {0}, 0}}},
    MODEL7("A100-40GB", "1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
           "7g.40gb"),
    MODEL7("A100-80GB", "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
           "7g.80gb"),
    /* H100-80GB with the memory `nvidia-smi mig -lgip` lists (GiB x 1024). */
    {"H100-80GB",
     7,
     8,
     7,
     {P7_1G("1g.10gb", 9984), P7_1G_ME("1g.10gb+me", 9984), P7_1G2("1g.20gb", 20096),
      P7_2G("2g.20gb", 20096), P7_3G("3g.40gb", 40448), P7_4G("4g.40gb", 40448),
      P7_7G("7g.80gb", 81152)}},
    MODEL7("H100-94GB", "1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb",
           "7g.94gb"),
    MODEL7("H200-141GB", "1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb",
           "7g.141gb"),
    MODEL7("B200", "1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
};

#define N_MODELS (sizeof(models) / sizeof(models[0]))

uint32_t gs_mig_model_count(void)
{
    return (uint32_t)N_MODELS;
}

const struct gs_mig_model *gs_mig_model_at(uint32_t i)
{
    return i < N_MODELS ? &models[i] : NULL;
}

static const struct gs_mig_model *by_name(const char *canonical)
{
    for (size_t i = 0; i < N_MODELS; i++)
        if (strcmp(models[i].name, canonical) == 0)
            return &models[i];
    return NULL;
}

#define TOKENS_MAX 8
#define TOKEN_LEN 16

/*
 * Splits an upper-cased copy of `name` into words at '-', '_' and ' '. Returns the word count,
 * or -1 when a word or the count is too long for a GPU product name.
 */
static int split_words(const char *name, char words[TOKENS_MAX][TOKEN_LEN])
{
    int n = 0;
    size_t len = 0;
    for (const char *p = name;; p++) {
        bool sep = *p == '-' || *p == '_' || *p == ' ' || *p == '\0';
        if (!sep) {
            if (len + 1 >= TOKEN_LEN || n >= TOKENS_MAX)
                return -1;
            words[n][len++] = (char)toupper((unsigned char)*p);
        } else if (len > 0) {
            words[n++][len] = '\0';
            len = 0;
        }
        if (*p == '\0')
            break;
    }
    return n;
}

/* The memory size of a word like "80GB", or 0 when the word is not one. */
static long word_gb(const char *w)
{
    size_t len = strlen(w);
    if (len < 3 || strcmp(w + len - 2, "GB") != 0)
        return 0;
    long v = 0;
    for (size_t i = 0; i + 2 < len; i++) {
        if (!isdigit((unsigned char)w[i]) || v > 100000)
            return 0;
        v = v * 10 + (w[i] - '0');
    }
    return v;
}

const struct gs_mig_model *gs_mig_model_find(const char *name)
{
    char words[TOKENS_MAX][TOKEN_LEN];
    if (!name)
        return NULL;
    int n = split_words(name, words);
    int first = 0;
    if (n > 0 && strcmp(words[0], "NVIDIA") == 0)
        first = 1;
    if (n <= first)
        return NULL;
    long gb = 0;
    bool nvl = false;
    for (int i = first + 1; i < n; i++) {
        long v = word_gb(words[i]);
        if (v) {
            if (gb && gb != v)
                return NULL; /* two sizes: not a name we know */
            gb = v;
        }
        nvl |= strcmp(words[i], "NVL") == 0;
    }
    const char *fam = words[first];
    if (strcmp(fam, "A30") == 0)
        return gb == 0 || gb == 24 ? by_name("A30-24GB") : NULL;
    if (strcmp(fam, "A100") == 0)
        return gb == 40 ? by_name("A100-40GB") : gb == 80 ? by_name("A100-80GB") : NULL;
    if (strcmp(fam, "H100") == 0) {
        if (gb == 94 || (gb == 0 && nvl))
            return by_name("H100-94GB");
        return gb == 80 || gb == 0 ? by_name("H100-80GB") : NULL; /* PCIe and SXM5: 80 GB */
    }
    if (strcmp(fam, "H200") == 0)
        return gb == 0 || gb == 141 ? by_name("H200-141GB") : NULL;
    if (strcmp(fam, "B200") == 0)
        return gb == 0 || gb == 180 || gb == 192 ? by_name("B200") : NULL;
    return NULL;
}

int gs_mig_profile_find(const struct gs_mig_model *m, const char *name)
{
    if (!m || !name)
        return -1;
    if (strncmp(name, "MIG ", 4) == 0 || strncmp(name, "mig-", 4) == 0)
        name += 4;
    for (uint32_t p = 0; p < m->n_profiles; p++)
        if (strcmp(m->profiles[p].name, name) == 0)
            return (int)p;
    return -1;
}

int64_t gs_mig_profile_mem_mib(const struct gs_mig_model *m, uint32_t p, int64_t gpu_mem_mib)
{
    if (!m || p >= m->n_profiles || gpu_mem_mib < 0)
        return 0;
    const struct gs_mig_profile *pr = &m->profiles[p];
    if (pr->mem_mib > 0)
        return pr->mem_mib;
    return gpu_mem_mib * pr->mem_slices / m->mem_slices;
}

static bool start_allowed(const struct gs_mig_profile *pr, uint8_t start)
{
    for (uint32_t k = 0; k < pr->n_starts; k++)
        if (pr->starts[k] == start)
            return true;
    return false;
}

static uint32_t run_mask(uint32_t start, uint32_t len)
{
    return ((UINT32_C(1) << len) - 1) << start;
}

uint32_t gs_mig_mem_mask(const struct gs_mig_model *m, struct gs_mig_instance in)
{
    if (!m || in.profile >= m->n_profiles ||
        in.start + m->profiles[in.profile].mem_slices > m->mem_slices)
        return 0;
    return run_mask(in.start, m->profiles[in.profile].mem_slices);
}

uint32_t gs_mig_compute_mask(const struct gs_mig_model *m, struct gs_mig_instance in)
{
    if (!m || in.profile >= m->n_profiles ||
        in.start + m->profiles[in.profile].compute_slices > m->compute_slices)
        return 0;
    return run_mask(in.start, m->profiles[in.profile].compute_slices);
}

/* "slices 2-3" or "slice 2" of the lowest run of set bits in mask. */
static void describe_run(uint32_t mask, char *buf, size_t cap)
{
    uint32_t lo = (uint32_t)__builtin_ctz(mask), hi = lo;
    while (hi + 1 < 32 && (mask >> (hi + 1) & 1))
        hi++;
    if (lo == hi)
        (void)snprintf(buf, cap, "slice %u", lo);
    else
        (void)snprintf(buf, cap, "slices %u-%u", lo, hi);
}

static void starts_list(const struct gs_mig_profile *pr, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < pr->n_starts && used < cap; k++) {
        int w = snprintf(buf + used, cap - used, k ? ",%u" : "%u", pr->starts[k]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

GS_PRINTF(3, 4) static int fail(char *reason, size_t cap, const char *fmt, ...)
{
    if (reason && cap) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(reason, cap, fmt, ap);
        va_end(ap);
    }
    return GS_EINVAL;
}

int gs_mig_layout_check(const struct gs_mig_model *m, const struct gs_mig_instance *in, uint32_t n,
                        char *reason, size_t cap)
{
    if (reason && cap)
        reason[0] = '\0';
    if (!m)
        return fail(reason, cap, "no MIG model");
    if (n > GS_MIG_INSTANCES_MAX)
        return fail(reason, cap, "%u instances: a GPU holds at most %u", n, GS_MIG_INSTANCES_MAX);
    uint8_t count[GS_MIG_PROFILES_MAX] = {0};
    uint32_t mem_used = 0, compute_used = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (in[i].profile >= m->n_profiles)
            return fail(reason, cap, "instance %u: unknown profile %u of %s", i, in[i].profile,
                        m->name);
        const struct gs_mig_profile *pr = &m->profiles[in[i].profile];
        if (!start_allowed(pr, in[i].start)) {
            char list[64];
            starts_list(pr, list, sizeof(list));
            return fail(reason, cap,
                        "instance %u (%s at %u): start slot %u is not a placement of %s on %s "
                        "(allowed %s)",
                        i, pr->name, in[i].start, in[i].start, pr->name, m->name, list);
        }
        if (++count[in[i].profile] > pr->max_count)
            return fail(reason, cap, "instance %u (%s at %u): more than %u instance(s) of %s", i,
                        pr->name, in[i].start, pr->max_count, pr->name);
        mem_used += pr->mem_slices;
        if (mem_used > m->mem_slices)
            return fail(reason, cap,
                        "instance %u (%s at %u): memory slices exceeded: %u of the GPU's %u", i,
                        pr->name, in[i].start, mem_used, m->mem_slices);
        compute_used += pr->compute_slices;
        if (compute_used > m->compute_slices)
            return fail(reason, cap,
                        "instance %u (%s at %u): compute slices exceeded: %u of the GPU's %u", i,
                        pr->name, in[i].start, compute_used, m->compute_slices);
        uint32_t mine = gs_mig_mem_mask(m, in[i]);
        for (uint32_t j = 0; j < i; j++) {
            uint32_t both = mine & gs_mig_mem_mask(m, in[j]);
            if (both) {
                char run[32];
                describe_run(both, run, sizeof(run));
                return fail(reason, cap,
                            "instance %u (%s at %u) overlaps instance %u (%s at %u) in memory %s",
                            i, pr->name, in[i].start, j, m->profiles[in[j].profile].name,
                            in[j].start, run);
            }
        }
    }
    return GS_OK;
}

/* ---- enumeration of maximal layouts ------------------------------------------------------ */

struct candidate {
    uint8_t profile;
    uint8_t compute;
    uint32_t mem_mask;
};

struct search {
    const struct gs_mig_model *m;
    struct candidate cand[GS_MIG_PROFILES_MAX * GS_MIG_STARTS_MAX];
    uint32_t n_cand;
    uint64_t count;
};

static bool compatible(const struct search *s, const struct candidate *c, uint32_t mem,
                       uint32_t compute, const uint8_t *count)
{
    return (c->mem_mask & mem) == 0 && compute + c->compute <= s->m->compute_slices &&
           count[c->profile] < s->m->profiles[c->profile].max_count;
}

/* Visits every valid set once, as the increasing sequence of its candidate indices. */
static void visit(struct search *s, uint32_t from, uint32_t mem, uint32_t compute, uint8_t *count)
{
    bool can_grow = false;
    for (uint32_t k = 0; k < s->n_cand && !can_grow; k++)
        can_grow = compatible(s, &s->cand[k], mem, compute, count);
    if (!can_grow) {
        s->count++;
        return;
    }
    for (uint32_t k = from; k < s->n_cand; k++) {
        const struct candidate *c = &s->cand[k];
        if (!compatible(s, c, mem, compute, count))
            continue;
        count[c->profile]++;
        visit(s, k + 1, mem | c->mem_mask, compute + c->compute, count);
        count[c->profile]--;
    }
}

int gs_mig_count_maximal_layouts(const struct gs_mig_model *m, uint32_t profile_mask,
                                 uint64_t *count)
{
    if (!m)
        return GS_EINVAL;
    struct search s = {.m = m};
    for (uint32_t p = 0; p < m->n_profiles; p++) {
        if (!(profile_mask >> p & 1))
            continue;
        for (uint32_t k = 0; k < m->profiles[p].n_starts; k++) {
            struct gs_mig_instance in = {(uint8_t)p, m->profiles[p].starts[k]};
            s.cand[s.n_cand++] = (struct candidate){(uint8_t)p, m->profiles[p].compute_slices,
                                                    gs_mig_mem_mask(m, in)};
        }
    }
    uint8_t used[GS_MIG_PROFILES_MAX] = {0};
    visit(&s, 0, 0, 0, used);
    *count = s.count;
    return GS_OK;
}
