/*
 * Readers for the node and pod lists of Alibaba's cluster-trace-gpu-v2023 (contract in
 * include/gpusched/trace.h).
 *
 * libcsv does the RFC 4180 work (quotes, doubled quotes, quoted commas and line breaks). What
 * it does not give is a position, and it would grow its field buffer without bound on a huge
 * line, so the input is cut at every CR and LF before it reaches libcsv: each call feeds
 * either one line-end byte or a run of bytes that holds none. That tells the reader which
 * physical line it is on, lets it refuse an over-long line before libcsv buffers it, and shows
 * where each record starts: the first run of data bytes fed while no record is open. libcsv
 * agrees on that last point because its space trimming is turned off (spaces are data here),
 * so outside a record it skips only CR and LF.
 *
 * Fields of one record are copied into a fixed buffer (a record is at most GS_TRACE_LINE_MAX
 * bytes, so the buffer never grows) and checked when the record ends, column count first,
 * then each value, then the rules that tie values together.
 */
#define _POSIX_C_SOURCE 200809L /* fileno, fstat, strerror_r (XSI form) */

#include "gpusched/trace.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"

#include <csv.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/** Most columns a file may have: the layouts' (11 at most) and a pod list's own columns. */
#define MAX_COLS 64
/** Most GPUs on one node or in one request. */
#define MAX_GPUS 16
/** GS_TRACE_FILE_MAX, widened once for comparisons with sizes. */
#define FILE_MAX ((uint64_t)GS_TRACE_FILE_MAX)
/** Bytes read from a file per fread(). */
#define READ_CHUNK 65536

/** One column a layout knows. */
struct column {
    const char *name; /**< header name, matched exactly (case-sensitive, no trimming) */
    bool required;    /**< the header must name it */
};

enum node_col { NC_SN, NC_CPU, NC_MEM, NC_GPU, NC_MODEL, NC_GPU_MEM, NC_MODE, NC_COUNT };

static const struct column node_cols[NC_COUNT] = {
    [NC_SN] = {"sn", true},
    [NC_CPU] = {"cpu_milli", true},
    [NC_MEM] = {"memory_mib", true},
    [NC_GPU] = {"gpu", true},
    [NC_MODEL] = {"model", true},
    /* Optional: the GPUs' memory and sharing mode (docs/trace-format.md). */
    [NC_GPU_MEM] = {"gpu_mem_mib", false},
    [NC_MODE] = {"gpu_mode", false},
};

enum pod_col {
    PC_NAME,
    PC_CPU,
    PC_MEM,
    PC_NUM_GPU,
    PC_GPU_MILLI,
    PC_GPU_SPEC,
    PC_QOS,
    PC_PHASE,
    PC_CTIME,
    PC_DTIME,
    PC_STIME,
    PC_GPU_MEM,
    PC_MIG,
    PC_TS,
    PC_COUNT
};

static const struct column pod_cols[PC_COUNT] = {
    [PC_NAME] = {"name", true},
    [PC_CPU] = {"cpu_milli", true},
    [PC_MEM] = {"memory_mib", true},
    [PC_NUM_GPU] = {"num_gpu", true},
    [PC_GPU_MILLI] = {"gpu_milli", true},
    [PC_GPU_SPEC] = {"gpu_spec", false},
    [PC_QOS] = {"qos", false},
    [PC_PHASE] = {"pod_phase", false},
    [PC_CTIME] = {"creation_time", false},
    [PC_DTIME] = {"deletion_time", false},
    [PC_STIME] = {"scheduled_time", false},
    [PC_GPU_MEM] = {"gpu_mem_mib", false},
    [PC_MIG] = {"mig_profile", false},
    [PC_TS] = {"timeslice_slots", false},
};

_Static_assert(PC_COUNT <= MAX_COLS && NC_COUNT <= MAX_COLS, "MAX_COLS too small");

struct reader;

/** Node names seen so far, for the duplicate check: open addressing over indices. */
struct name_set {
    uint32_t *slot; /**< cap entries: node index + 1, 0 when free */
    uint32_t cap;   /**< power of two, or 0 before the first insert */
    uint32_t used;  /**< occupied slots */
};

/** State of one read: the libcsv parser, the position, the current record, the output. */
struct reader {
    struct csv_parser csv;
    struct gs_diag *diag; /**< where errors go (the caller's or scratch) */
    int err;              /**< first error; GS_OK while none */

    const struct column *cols;       /**< the layout's columns */
    int ncols;                       /**< entries in cols */
    int (*on_row)(struct reader *r); /**< checks and stores one data record */

    /* Header. */
    int nhdr;              /**< columns the header names */
    int col_of[MAX_COLS];  /**< layout column -> 0-based file column, -1 when absent */
    int role_of[MAX_COLS]; /**< file column -> layout column, -1 for an ignored column */
    bool ignore_unknown;   /**< unknown header names are ignored (pod lists), not errors */
    char ignored[GS_TRACE_IGNORED_MAX]; /**< their names, comma-separated, maybe truncated */

    /* Position in the input. */
    uint64_t total;      /**< bytes seen so far */
    uint64_t line;       /**< 1-based physical line being fed */
    size_t line_len;     /**< bytes of that line so far, line ends not counted */
    uint64_t blank_line; /**< first blank line since the last record, 0 when none */
    uint64_t rec_line;   /**< line on which the open or last record started */
    size_t rec_len;      /**< bytes of the open record so far */
    bool have_header;    /**< the header record has been read */
    bool line_has_data;  /**< the current line has a byte other than CR */
    bool prev_cr;        /**< the last byte fed was a CR (a CR LF pair ends one line) */
    bool in_rec;         /**< a record is open (libcsv has not ended it yet) */
    bool rec_has_nul;    /**< a NUL byte was fed since the record started */

    /* Current record. */
    uint32_t nfields;      /**< fields seen, extra ones included */
    size_t foff[MAX_COLS]; /**< file column -> offset of its text in fbuf */
    size_t flen[MAX_COLS]; /**< file column -> length of its text */
    char *fbuf;            /**< field texts, each NUL-terminated */
    size_t fbuf_used;
    size_t fbuf_cap;

    /* Output. */
    uint64_t nrows; /**< data records stored */
    struct gs_trace_nodes *nodes;
    struct name_set names; /**< node names, for the duplicate check */
    uint64_t *node_line;   /**< node index -> line it was read from */
    uint32_t node_cap;
    struct gs_trace_pods *pods;
    uint32_t pod_cap;
};

/* ---- diagnostics ------------------------------------------------------------------------ */

/* Records the first error of a read; later ones are dropped. column is 1-based, 0 for none. */
GS_PRINTF(6, 7)
static int fail(struct reader *r, int err, uint64_t line, uint32_t column, const char *field,
                const char *fmt, ...)
{
    va_list ap;

    if (r->err != GS_OK)
        return r->err;
    r->err = err;
    r->diag->line = line;
    r->diag->column = column;
    (void)snprintf(r->diag->field, sizeof r->diag->field, "%s", field ? field : "");
    va_start(ap, fmt);
    (void)vsnprintf(r->diag->msg, sizeof r->diag->msg, fmt, ap);
    va_end(ap);
    return err;
}

/* ---- field access ----------------------------------------------------------------------- */

/* Text of a layout column in the current record, or NULL when the file has no such column. */
static const char *field_text(const struct reader *r, int role, size_t *len)
{
    int c = r->col_of[role];
    if (c < 0)
        return NULL;
    *len = r->flen[c];
    return r->fbuf + r->foff[c];
}

/* Error about a value of the current record, at its line, column and header name. */
#define FIELD_FAIL(r, role, ...)                                                                   \
    fail((r), GS_EPARSE, (r)->rec_line, (uint32_t)(r)->col_of[(role)] + 1u,                        \
         (r)->cols[(role)].name, __VA_ARGS__)

/*
 * Reads a plain decimal integer: one or more ASCII digits and nothing else (no sign, no
 * spaces, no decimal point; leading zeros are fine). A column the file lacks gives -1; so does
 * an empty field when empty_ok, and otherwise it is an error.
 */
static int get_int(struct reader *r, int role, bool empty_ok, int64_t *out)
{
    size_t len = 0;
    const char *s = field_text(r, role, &len);
    int64_t v = 0;

    if (s == NULL || len == 0) {
        if (s == NULL || empty_ok) {
            *out = -1;
            return GS_OK;
        }
        return FIELD_FAIL(r, role, "empty value; a whole number is required");
    }
    if (s[0] == '-' && len > 1 && strspn(s + 1, "0123456789") == len - 1)
        return FIELD_FAIL(r, role, "negative value %.40s", s);
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return FIELD_FAIL(r, role, "not a whole number: '%.40s'", s);
        int d = s[i] - '0';
        /* Up to 18 digits cannot overflow; only longer values need the check. */
        if (i >= 18 && v > (INT64_MAX - d) / 10)
            return FIELD_FAIL(r, role, "value %.40s%s is out of range (over %" PRId64 ")", s,
                              len > 40 ? "..." : "", INT64_MAX);
        v = v * 10 + d;
    }
    *out = v;
    return GS_OK;
}

/* Copies a text column ("" when the file lacks it) into a new string. */
static int dup_text(struct reader *r, int role, char **out)
{
    size_t len = 0;
    const char *s = field_text(r, role, &len);
    if (s == NULL)
        len = 0;
    char *p = malloc(len + 1);
    if (p == NULL)
        return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
    if (len > 0)
        memcpy(p, s, len);
    p[len] = '\0';
    *out = p;
    return GS_OK;
}

/* ---- node lists ------------------------------------------------------------------------- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 14695981039346656037u; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211u;
    }
    return h;
}

/* Index of the node called `name`, or -1. */
static int64_t names_find(const struct reader *r, const char *name)
{
    const struct name_set *set = &r->names;
    if (set->cap == 0)
        return -1;
    for (uint64_t i = hash_name(name) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
        uint32_t s = set->slot[i];
        if (s == 0)
            return -1;
        if (strcmp(r->nodes->v[s - 1].name, name) == 0)
            return (int64_t)s - 1;
    }
}

/* Adds node `idx` (its name is not in the set yet); keeps the load at most one half. */
static int names_add(struct reader *r, uint32_t idx)
{
    struct name_set *set = &r->names;
    if ((uint64_t)(set->used + 1) * 2 > set->cap) {
        uint32_t cap = set->cap ? set->cap * 2 : 1024;
        uint32_t *slot = calloc(cap, sizeof *slot);
        if (slot == NULL)
            return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
        for (uint32_t j = 0; j < set->cap; j++) {
            uint32_t s = set->slot[j];
            if (s == 0)
                continue;
            uint64_t i = hash_name(r->nodes->v[s - 1].name) & (cap - 1);
            while (slot[i] != 0)
                i = (i + 1) & (cap - 1);
            slot[i] = s;
        }
        free(set->slot);
        set->slot = slot;
        set->cap = cap;
    }
    uint64_t i = hash_name(r->nodes->v[idx].name) & (set->cap - 1);
    while (set->slot[i] != 0)
        i = (i + 1) & (set->cap - 1);
    set->slot[i] = idx + 1;
    set->used++;
    return GS_OK;
}

static void node_free(struct gs_trace_node *n)
{
    free(n->name);
    free(n->model);
}

static int node_row(struct reader *r)
{
    struct gs_trace_nodes *out = r->nodes;
    struct gs_trace_node n = {0};
    size_t len = 0;
    int64_t gpu = 0;
    int rc;

    if (field_text(r, NC_SN, &len) != NULL && len == 0)
        return FIELD_FAIL(r, NC_SN, "empty node name");
    if ((rc = get_int(r, NC_CPU, false, &n.cpu_milli)) != GS_OK ||
        (rc = get_int(r, NC_MEM, false, &n.mem_mib)) != GS_OK ||
        (rc = get_int(r, NC_GPU, false, &gpu)) != GS_OK)
        return rc;
    if (gpu > MAX_GPUS)
        return FIELD_FAIL(r, NC_GPU, "%" PRId64 " GPUs on one node; at most %d are supported", gpu,
                          MAX_GPUS);
    n.gpu_count = (uint32_t)gpu;
    const char *model = field_text(r, NC_MODEL, &len);
    if (gpu > 0 && len == 0)
        return FIELD_FAIL(r, NC_MODEL, "a node with %" PRId64 " GPUs needs a GPU model", gpu);
    if (gpu == 0 && len > 0)
        return FIELD_FAIL(r, NC_MODEL, "model '%.40s' given for a node without GPUs", model);
    if ((rc = get_int(r, NC_GPU_MEM, true, &n.gpu_mem_mib)) != GS_OK)
        return rc;
    if (n.gpu_mem_mib < 0)
        n.gpu_mem_mib = 0;
    if (gpu == 0 && n.gpu_mem_mib > 0)
        return FIELD_FAIL(r, NC_GPU_MEM, "GPU memory given for a node without GPUs");
    {
        size_t mlen = 0;
        const char *mode = field_text(r, NC_MODE, &mlen);
        char why[200];
        char model_z[128];
        (void)snprintf(model_z, sizeof(model_z), "%.*s", (int)(len < 127 ? len : 127),
                       model ? model : "");
        if (mode && mlen > 0 && gpu == 0)
            return FIELD_FAIL(r, NC_MODE, "a GPU mode given for a node without GPUs");
        if (gs_trace_parse_gpu_mode(mode ? mode : "", mode ? mlen : 0, model_z, &n.gpu_mode, why,
                                    sizeof(why)) != GS_OK)
            return FIELD_FAIL(r, NC_MODE, "%s", why);
    }
    if (out->n == UINT32_MAX)
        return fail(r, GS_EPARSE, r->rec_line, 0, NULL, "too many rows");

    if (out->n == r->node_cap) {
        uint32_t cap =
            r->node_cap ? (r->node_cap > UINT32_MAX / 2 ? UINT32_MAX : r->node_cap * 2) : 256;
        struct gs_trace_node *v = realloc(out->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
        out->v = v;
        uint64_t *lines = realloc(r->node_line, (size_t)cap * sizeof *lines);
        if (lines == NULL)
            return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
        r->node_line = lines;
        r->node_cap = cap;
    }
    if ((rc = dup_text(r, NC_SN, &n.name)) != GS_OK ||
        (rc = dup_text(r, NC_MODEL, &n.model)) != GS_OK) {
        node_free(&n);
        return rc;
    }
    int64_t first = names_find(r, n.name);
    if (first >= 0) {
        FIELD_FAIL(r, NC_SN, "duplicate node name '%.40s' (first on line %" PRIu64 ")", n.name,
                   r->node_line[first]);
        node_free(&n);
        return r->err;
    }
    out->v[out->n] = n;
    r->node_line[out->n] = r->rec_line;
    if ((rc = names_add(r, out->n)) != GS_OK) {
        node_free(&n);
        return rc;
    }
    out->n++;
    return GS_OK;
}

/* ---- pod lists -------------------------------------------------------------------------- */

static void pod_free(struct gs_trace_pod *p)
{
    free(p->name);
    free(p->gpu_spec);
    free(p->qos);
    free(p->phase);
}

static int pod_row(struct reader *r)
{
    struct gs_trace_pods *out = r->pods;
    struct gs_trace_pod p = {0};
    size_t len = 0;
    int64_t num_gpu = 0, milli = 0;
    int rc;

    if (field_text(r, PC_NAME, &len) != NULL && len == 0)
        return FIELD_FAIL(r, PC_NAME, "empty pod name");
    if ((rc = get_int(r, PC_CPU, false, &p.cpu_milli)) != GS_OK ||
        (rc = get_int(r, PC_MEM, false, &p.mem_mib)) != GS_OK ||
        (rc = get_int(r, PC_NUM_GPU, false, &num_gpu)) != GS_OK)
        return rc;
    if (num_gpu > MAX_GPUS)
        return FIELD_FAIL(r, PC_NUM_GPU,
                          "%" PRId64 " GPUs in one request; at most %d are supported", num_gpu,
                          MAX_GPUS);
    if ((rc = get_int(r, PC_GPU_MILLI, false, &milli)) != GS_OK)
        return rc;
    if (milli > 1000)
        return FIELD_FAIL(r, PC_GPU_MILLI, "%" PRId64 " milli-GPU per GPU is over 1000", milli);
    /* The sharing columns: at most one per row, each with its own reading of num_gpu and
     * gpu_milli (docs/trace-format.md); the request is then checked by the core's rule. */
    int64_t gmem = -1, slots = -1;
    size_t miglen = 0;
    const char *mig = field_text(r, PC_MIG, &miglen);
    if (mig == NULL)
        miglen = 0;
    if ((rc = get_int(r, PC_GPU_MEM, true, &gmem)) != GS_OK ||
        (rc = get_int(r, PC_TS, true, &slots)) != GS_OK)
        return rc;
    if (gmem == 0)
        return FIELD_FAIL(r, PC_GPU_MEM, "0 MiB; leave it empty for no memory request");
    if (slots == 0)
        return FIELD_FAIL(r, PC_TS, "0 slots; leave it empty for no time-sliced request");
    if ((gmem > 0) + (slots > 0) + (miglen > 0) > 1)
        return fail(r, GS_EPARSE, r->rec_line, 0, "gpu_mem_mib",
                    "a row sets more than one of gpu_mem_mib, mig_profile, timeslice_slots");
    if (miglen >= GS_MIG_NAME_MAX)
        return FIELD_FAIL(r, PC_MIG, "profile name of %zu bytes; at most %d", miglen,
                          GS_MIG_NAME_MAX - 1);
    if (slots > MAX_GPUS)
        return FIELD_FAIL(r, PC_TS, "%" PRId64 " slots; at most %d", slots, MAX_GPUS);
    if (gmem > 0 || miglen > 0 || slots > 0) {
        struct gs_trace_pod q = {.cpu_milli = p.cpu_milli,
                                 .mem_mib = p.mem_mib,
                                 .num_gpu = (uint32_t)num_gpu,
                                 .gpu_milli = (int32_t)milli,
                                 .gpu_mem_mib = gmem > 0 ? gmem : 0,
                                 .timeslice_slots = (uint8_t)(slots > 0 ? slots : 0)};
        memcpy(q.mig_profile, mig ? mig : "", miglen);
        struct gs_pod_req req;
        char why[GS_REQ_REASON_MAX];
        (void)gs_trace_pod_req(&q, GS_MODEL_ANY, &req);
        if (gs_pod_req_validate(&req, why, sizeof(why)) != GS_OK)
            return fail(r, GS_EPARSE, r->rec_line,
                        (uint32_t)r->col_of[gmem > 0    ? PC_GPU_MEM
                                            : slots > 0 ? PC_TS
                                                        : PC_MIG] +
                            1u,
                        r->cols[gmem > 0    ? PC_GPU_MEM
                                : slots > 0 ? PC_TS
                                            : PC_MIG]
                            .name,
                        "not a valid request (num_gpu %" PRId64 ", gpu_milli %" PRId64 "): %s",
                        num_gpu, milli, why);
        p.gpu_mem_mib = q.gpu_mem_mib;
        p.timeslice_slots = q.timeslice_slots;
        memcpy(p.mig_profile, q.mig_profile, sizeof(p.mig_profile));
    } else {
        if (num_gpu > 0 && milli == 0)
            return FIELD_FAIL(r, PC_GPU_MILLI,
                              "0 milli-GPU per GPU for a request of %" PRId64 " GPUs", num_gpu);
        if (num_gpu == 0 && milli > 0)
            return FIELD_FAIL(r, PC_GPU_MILLI, "%" PRId64 " milli-GPU but num_gpu is 0", milli);
        if (milli < 1000 && num_gpu > 1)
            return FIELD_FAIL(r, PC_GPU_MILLI,
                              "a shared GPU (%" PRId64 " milli) with num_gpu %" PRId64
                              "; sharing is for one GPU only",
                              milli, num_gpu);
    }
    {
        /* A cluster has at most 64 GPU models, so a longer list only costs time downstream. */
        size_t slen = 0, parts = 1;
        const char *spec = field_text(r, PC_GPU_SPEC, &slen);
        for (size_t k = 0; spec && k < slen; k++)
            parts += spec[k] == '|';
        if (spec && slen > 0 && parts > 64)
            return FIELD_FAIL(r, PC_GPU_SPEC, "%zu GPU models listed; at most 64 are supported",
                              parts);
    }
    p.num_gpu = (uint32_t)num_gpu;
    p.gpu_milli = (int32_t)milli;
    if ((rc = get_int(r, PC_CTIME, true, &p.creation_time_s)) != GS_OK ||
        (rc = get_int(r, PC_DTIME, true, &p.deletion_time_s)) != GS_OK ||
        (rc = get_int(r, PC_STIME, true, &p.scheduled_time_s)) != GS_OK)
        return rc;
    if (out->n == UINT32_MAX)
        return fail(r, GS_EPARSE, r->rec_line, 0, NULL, "too many rows");

    if (out->n == r->pod_cap) {
        uint32_t cap =
            r->pod_cap ? (r->pod_cap > UINT32_MAX / 2 ? UINT32_MAX : r->pod_cap * 2) : 1024;
        struct gs_trace_pod *v = realloc(out->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
        out->v = v;
        r->pod_cap = cap;
    }
    if ((rc = dup_text(r, PC_NAME, &p.name)) != GS_OK ||
        (rc = dup_text(r, PC_GPU_SPEC, &p.gpu_spec)) != GS_OK ||
        (rc = dup_text(r, PC_QOS, &p.qos)) != GS_OK ||
        (rc = dup_text(r, PC_PHASE, &p.phase)) != GS_OK) {
        pod_free(&p);
        return rc;
    }
    out->v[out->n++] = p;
    return GS_OK;
}

/* ---- records ---------------------------------------------------------------------------- */

/* The layout name of file column `col` (< nhdr), or "" for an ignored column. */
static const char *col_name(const struct reader *r, uint32_t col)
{
    int role = r->role_of[col];
    return role >= 0 ? r->cols[role].name : "";
}

/*
 * Checks one header name as it arrives; `col` is its 0-based file column and `s` is
 * NUL-terminated. A known name may not repeat; an unknown one is an error, or, in a pod list,
 * ignored and remembered for the caller's note.
 */
static void header_field(struct reader *r, uint32_t col, const char *s, size_t len)
{
    int role = -1;

    if (col >= MAX_COLS) {
        fail(r, GS_EPARSE, r->rec_line, col + 1, s, "too many columns: at most %d", MAX_COLS);
        return;
    }

    for (int i = 0; i < r->ncols; i++) {
        if (strlen(r->cols[i].name) == len && memcmp(r->cols[i].name, s, len) == 0) {
            role = i;
            break;
        }
    }
    if (role < 0 && r->ignore_unknown) {
        /* A user's own column: kept out of the pod, named once in a note. */
        size_t used = strlen(r->ignored), room = sizeof(r->ignored) - used;
        int n = snprintf(r->ignored + used, room, "%s%.*s", used ? ", " : "",
                         (int)(len > 64 ? 64 : len), s);
        if (n < 0 || (size_t)n >= room)
            (void)snprintf(r->ignored + sizeof(r->ignored) - 5, 5, "...");
        r->role_of[col] = -1;
        r->nhdr = (int)col + 1;
        return;
    }
    if (role < 0) {
        fail(r, GS_EPARSE, r->rec_line, col + 1, s, "unknown column '%.64s'", s);
        return;
    }
    if (r->col_of[role] >= 0) {
        fail(r, GS_EPARSE, r->rec_line, col + 1, s, "duplicate column '%s' (also column %d)", s,
             r->col_of[role] + 1);
        return;
    }
    r->col_of[role] = (int)col;
    r->role_of[col] = role;
    r->nhdr = (int)col + 1;
}

/* libcsv callback: end of one field. */
static void on_field(void *data, size_t len, void *arg)
{
    struct reader *r = arg;
    uint32_t col = r->nfields++;
    const char *s = data ? data : "";

    if (r->err != GS_OK)
        return;
    if (r->rec_has_nul && len > 0 && memchr(s, '\0', len) != NULL) {
        const char *name = "";
        if (r->have_header && col < (uint32_t)r->nhdr)
            name = col_name(r, col);
        fail(r, GS_EPARSE, r->rec_line, col + 1, name, "NUL byte in the field");
        return;
    }
    if (!r->have_header) {
        header_field(r, col, s, len);
        if (r->err != GS_OK)
            return;
    } else if (col >= (uint32_t)r->nhdr) {
        return; /* an extra column; reported when the record ends */
    }
    if (col >= MAX_COLS || r->fbuf_cap - r->fbuf_used < len + 1) {
        /* Cannot happen with the record limit, but the buffer's bound is checked here. */
        fail(r, GS_EPARSE, r->rec_line, col + 1, NULL, "record too long");
        return;
    }
    char *dst = r->fbuf + r->fbuf_used;
    if (len > 0)
        memcpy(dst, s, len);
    dst[len] = '\0';
    r->foff[col] = r->fbuf_used;
    r->flen[col] = len;
    r->fbuf_used += len + 1;
}

/* libcsv callback: end of one record. */
static void on_record(int term, void *arg)
{
    struct reader *r = arg;
    uint32_t nfields = r->nfields;

    (void)term;
    r->in_rec = false;
    r->nfields = 0;
    r->fbuf_used = 0;
    if (r->err != GS_OK)
        return;
    if (!r->have_header) {
        for (int i = 0; i < r->ncols; i++) {
            if (r->cols[i].required && r->col_of[i] < 0) {
                fail(r, GS_EPARSE, r->rec_line, 0, r->cols[i].name,
                     "missing required column '%s' in the header", r->cols[i].name);
                return;
            }
        }
        r->have_header = true;
        return;
    }
    if (nfields < (uint32_t)r->nhdr) {
        fail(r, GS_EPARSE, r->rec_line, nfields + 1, col_name(r, nfields),
             "missing column: the row has %" PRIu32 " fields, the header %d", nfields, r->nhdr);
        return;
    }
    if (nfields > (uint32_t)r->nhdr) {
        fail(r, GS_EPARSE, r->rec_line, (uint32_t)r->nhdr + 1, NULL,
             "extra column: the row has %" PRIu32 " fields, the header %d", nfields, r->nhdr);
        return;
    }
    if (r->on_row(r) == GS_OK)
        r->nrows++;
}

/* ---- input ------------------------------------------------------------------------------ */

/* Hands bytes to libcsv and turns its failure into a diagnostic. */
static void csv_feed(struct reader *r, const char *p, size_t n)
{
    if (csv_parse(&r->csv, p, n, on_field, on_record, r) == n || r->err != GS_OK)
        return;
    if (csv_error(&r->csv) == CSV_ENOMEM) {
        fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
        return;
    }
    const char *name = "";
    if (r->have_header && r->nfields < (uint32_t)r->nhdr)
        name = col_name(r, r->nfields);
    fail(r, GS_EPARSE, r->line, r->nfields + 1, name,
         "bad quoting: a '\"' inside an unquoted field or text after a closing quote");
}

/* Feeds the next n bytes of the input (see the file comment for why it is cut up). */
static void feed(struct reader *r, const char *p, size_t n)
{
    if (r->total == 0 && n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
        p += 3;
        n -= 3;
        r->total += 3;
    }
    while (n > 0 && r->err == GS_OK) {
        if (p[0] == '\r' || p[0] == '\n') {
            bool was_in_rec = r->in_rec;
            csv_feed(r, p, 1);
            /* A line end that leaves the record open is inside quotes: it is field data. */
            if (r->in_rec && ++r->rec_len > GS_TRACE_LINE_MAX) {
                fail(r, GS_EPARSE, r->rec_line, 0, NULL,
                     "record longer than %d bytes (an unclosed quote?)", GS_TRACE_LINE_MAX);
                return;
            }
            /* A line ends at LF, at CR, and once at CR LF: old Mac files number right too. */
            if (p[0] == '\r' || !r->prev_cr) {
                if (!r->line_has_data && !was_in_rec && r->blank_line == 0)
                    r->blank_line = r->line;
                r->line++;
                r->line_len = 0;
                r->line_has_data = false;
            }
            r->prev_cr = p[0] == '\r';
            p++;
            n--;
            r->total++;
            continue;
        }
        /* A run of data bytes; look no further than the longest line allows. */
        size_t room = GS_TRACE_LINE_MAX - r->line_len;
        size_t scan = n < room + 1 ? n : room + 1;
        size_t k = 0;
        bool nul = false;
        for (; k < scan; k++) {
            char c = p[k];
            if (c == '\r' || c == '\n')
                break;
            nul |= c == '\0';
        }
        if (k > room) {
            fail(r, GS_EPARSE, r->line, 0, NULL, "line longer than %d bytes", GS_TRACE_LINE_MAX);
            return;
        }
        if (!r->in_rec) {
            if (r->blank_line != 0) {
                fail(r, GS_EPARSE, r->blank_line, 0, NULL, "blank line before the end of the file");
                return;
            }
            r->in_rec = true;
            r->rec_line = r->line;
            r->rec_len = 0;
            r->rec_has_nul = false;
        }
        r->rec_has_nul |= nul;
        if (k > GS_TRACE_LINE_MAX - r->rec_len) {
            fail(r, GS_EPARSE, r->rec_line, 0, NULL,
                 "record longer than %d bytes (an unclosed quote?)", GS_TRACE_LINE_MAX);
            return;
        }
        r->rec_len += k;
        r->line_len += k;
        r->line_has_data = true;
        r->prev_cr = false;
        csv_feed(r, p, k);
        p += k;
        n -= k;
        r->total += k;
    }
}

/* Ends the input: flushes a last record without a line end and checks the whole file. */
static void finish(struct reader *r)
{
    if (r->err != GS_OK)
        return;
    if (csv_fini(&r->csv, on_field, on_record, r) != 0 && r->err == GS_OK) {
        if (csv_error(&r->csv) == CSV_ENOMEM) {
            fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
            return;
        }
        const char *name = "";
        if (r->have_header && r->nfields < (uint32_t)r->nhdr)
            name = col_name(r, r->nfields);
        fail(r, GS_EPARSE, r->rec_line, r->nfields + 1, name,
             "quoted field not closed at the end of the file");
        return;
    }
    if (r->err != GS_OK)
        return;
    if (!r->have_header)
        fail(r, GS_EPARSE, 1, 1, NULL, "empty file: no header");
    else if (r->nrows == 0)
        fail(r, GS_EPARSE, 2, 1, NULL, "no rows after the header");
}

static int space_never(unsigned char c)
{
    (void)c;
    return 0;
}

/* Sets up a reader for one layout; on failure nothing is left to free. */
static int reader_init(struct reader *r, const struct column *cols, int ncols,
                       int (*on_row)(struct reader *), const char *name, struct gs_diag *diag,
                       struct gs_diag *scratch)
{
    memset(r, 0, sizeof *r);
    r->diag = diag ? diag : scratch;
    memset(r->diag, 0, sizeof *r->diag);
    (void)snprintf(r->diag->file, sizeof r->diag->file, "%s", name ? name : "");
    r->cols = cols;
    r->ncols = ncols;
    r->on_row = on_row;
    r->line = 1;
    for (int i = 0; i < MAX_COLS; i++)
        r->col_of[i] = -1;
    r->fbuf_cap = GS_TRACE_LINE_MAX + MAX_COLS + 1;
    r->fbuf = malloc(r->fbuf_cap);
    if (r->fbuf == NULL)
        return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
    if (csv_init(&r->csv, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        free(r->fbuf);
        r->fbuf = NULL;
        return fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
    }
    csv_set_space_func(&r->csv, space_never);
    return GS_OK;
}

static void reader_free(struct reader *r)
{
    csv_free(&r->csv);
    free(r->fbuf);
    free(r->names.slot);
    free(r->node_line);
    r->fbuf = NULL;
    r->names.slot = NULL;
    r->node_line = NULL;
}

/* Feeds a whole buffer, or refuses it when it is over the file limit. */
static void feed_buffer(struct reader *r, const char *buf, size_t len)
{
    if ((uint64_t)len > FILE_MAX) {
        fail(r, GS_EIO, 0, 0, NULL, "input is %zu bytes, over the limit of %u", len,
             GS_TRACE_FILE_MAX);
        return;
    }
    feed(r, buf, len);
    finish(r);
}

/* Feeds a file in chunks, so memory use does not follow its size. */
static void feed_file(struct reader *r, const char *path)
{
    char msg[128];
    struct stat st;
    char *chunk = NULL;
    FILE *f = fopen(path, "rb");

    if (f == NULL) {
        int e = errno;
        if (strerror_r(e, msg, sizeof msg) != 0)
            (void)snprintf(msg, sizeof msg, "error %d", e);
        fail(r, GS_EIO, 0, 0, NULL, "cannot open: %s", msg);
        return;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > FILE_MAX) {
        fail(r, GS_EIO, 0, 0, NULL, "file is %" PRIu64 " bytes, over the limit of %u",
             (uint64_t)st.st_size, GS_TRACE_FILE_MAX);
        goto out;
    }
    chunk = malloc(READ_CHUNK);
    if (chunk == NULL) {
        fail(r, GS_ENOMEM, 0, 0, NULL, "out of memory");
        goto out;
    }
    for (;;) {
        size_t k = fread(chunk, 1, READ_CHUNK, f);
        if (k > 0) {
            if (r->total + k > FILE_MAX) {
                fail(r, GS_EIO, 0, 0, NULL, "file is over the limit of %u bytes",
                     GS_TRACE_FILE_MAX);
                goto out;
            }
            feed(r, chunk, k);
            if (r->err != GS_OK)
                goto out;
        }
        if (k < READ_CHUNK) {
            if (ferror(f)) {
                int e = errno;
                if (strerror_r(e, msg, sizeof msg) != 0)
                    (void)snprintf(msg, sizeof msg, "error %d", e);
                fail(r, GS_EIO, 0, 0, NULL, "cannot read: %s", msg);
                goto out;
            }
            break;
        }
    }
    finish(r);
out:
    free(chunk);
    (void)fclose(f); /* read-only: nothing to flush */
}

/* ---- public ----------------------------------------------------------------------------- */

/* ---- ordering --------------------------------------------------------------------------- */

struct named {
    const char *name;
    uint32_t idx;
};

static int cmp_named(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

int gs_trace_nodes_order_by_name(const struct gs_trace_node *nodes, uint32_t n, uint32_t *order)
{
    struct named *v = malloc(((size_t)n + 1) * sizeof(*v));
    if (!v)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        v[i] = (struct named){nodes[i].name, i};
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_named);
    for (uint32_t i = 0; i < n; i++)
        order[i] = v[i].idx;
    free(v);
    return GS_OK;
}

void gs_trace_nodes_fini(struct gs_trace_nodes *nodes)
{
    if (nodes == NULL)
        return;
    for (uint32_t i = 0; i < nodes->n; i++)
        node_free(&nodes->v[i]);
    free(nodes->v);
    nodes->v = NULL;
    nodes->n = 0;
    nodes->has_modes = 0;
}

void gs_trace_pods_fini(struct gs_trace_pods *pods)
{
    if (pods == NULL)
        return;
    for (uint32_t i = 0; i < pods->n; i++)
        pod_free(&pods->v[i]);
    free(pods->v);
    pods->v = NULL;
    pods->n = 0;
    pods->has_times = 0;
    pods->has_sharing = 0;
}

/* Feeds a file (path != NULL) or a buffer through a set-up reader, frees the reader and returns
 * its outcome; r->nodes or r->pods keep what was read. */
static int run_reader(struct reader *r, const char *path, const char *buf, size_t len)
{
    if (path != NULL)
        feed_file(r, path);
    else
        feed_buffer(r, buf, len);
    int rc = r->err;
    reader_free(r);
    return rc;
}

/* Reads nodes from a file (path != NULL) or a buffer. */
static int read_nodes(const char *path, const char *buf, size_t len, const char *name,
                      struct gs_trace_nodes *out, struct gs_diag *diag)
{
    struct reader r;
    struct gs_diag scratch;
    int rc;

    memset(out, 0, sizeof *out);
    rc = reader_init(&r, node_cols, NC_COUNT, node_row, name, diag, &scratch);
    if (rc != GS_OK)
        return rc;
    r.nodes = out;
    rc = run_reader(&r, path, buf, len);
    out->has_modes = r.col_of[NC_MODE] >= 0;
    if (rc != GS_OK)
        gs_trace_nodes_fini(out);
    else if (out->n < r.node_cap && out->n > 0) {
        struct gs_trace_node *v = realloc(out->v, (size_t)out->n * sizeof *v);
        if (v != NULL)
            out->v = v;
    }
    return rc;
}

/* Reads pods from a file (path != NULL) or a buffer. */
static int read_pods(const char *path, const char *buf, size_t len, const char *name,
                     struct gs_trace_pods *out, struct gs_diag *diag)
{
    struct reader r;
    struct gs_diag scratch;
    int rc;

    memset(out, 0, sizeof *out);
    rc = reader_init(&r, pod_cols, PC_COUNT, pod_row, name, diag, &scratch);
    if (rc != GS_OK)
        return rc;
    r.pods = out;
    r.ignore_unknown = true;
    rc = run_reader(&r, path, buf, len);
    if (rc != GS_OK) {
        gs_trace_pods_fini(out);
        return rc;
    }
    out->has_times = r.col_of[PC_CTIME] >= 0 && r.col_of[PC_DTIME] >= 0 && r.col_of[PC_STIME] >= 0;
    out->has_sharing = r.col_of[PC_GPU_MEM] >= 0 || r.col_of[PC_MIG] >= 0 || r.col_of[PC_TS] >= 0;
    (void)snprintf(out->ignored_columns, sizeof(out->ignored_columns), "%s", r.ignored);
    if (out->n < r.pod_cap && out->n > 0) {
        struct gs_trace_pod *v = realloc(out->v, (size_t)out->n * sizeof *v);
        if (v != NULL)
            out->v = v;
    }
    return GS_OK;
}

int gs_trace_read_nodes(const char *path, struct gs_trace_nodes *out, struct gs_diag *diag)
{
    return read_nodes(path, NULL, 0, path, out, diag);
}

int gs_trace_parse_nodes(const char *buf, size_t len, const char *name, struct gs_trace_nodes *out,
                         struct gs_diag *diag)
{
    return read_nodes(NULL, buf ? buf : "", buf ? len : 0, name, out, diag);
}

int gs_trace_read_pods(const char *path, struct gs_trace_pods *out, struct gs_diag *diag)
{
    return read_pods(path, NULL, 0, path, out, diag);
}

int gs_trace_parse_pods(const char *buf, size_t len, const char *name, struct gs_trace_pods *out,
                        struct gs_diag *diag)
{
    return read_pods(NULL, buf ? buf : "", buf ? len : 0, name, out, diag);
}

/* A distinct node shape: what decides whether a pod can ever fit. */
struct shape {
    const char *model;
    int64_t cpu_milli, mem_mib;
    uint32_t gpu_count;
};

/* Does `name` (len bytes) occur as a part of the '|'-list spec? With `fold`, ignoring case. */
static bool spec_has(const char *spec, const char *name, bool fold)
{
    size_t n = strlen(name);
    for (const char *p = spec; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && (fold ? strncasecmp(p, name, n) == 0 : strncmp(p, name, n) == 0))
            return true;
        p += len + (bar ? 1 : 0);
    }
    return false;
}

int gs_trace_unfit(const struct gs_trace_nodes *nodes, const struct gs_trace_pods *pods,
                   struct gs_trace_unfit *out)
{
    memset(out, 0, sizeof(*out));
    struct shape *sh = malloc(((size_t)nodes->n + 1) * sizeof(*sh));
    if (!sh)
        return GS_ENOMEM;
    size_t ns = 0;
    for (uint32_t i = 0; i < nodes->n; i++) {
        const struct gs_trace_node *nd = &nodes->v[i];
        size_t k = 0;
        while (k < ns && !(sh[k].cpu_milli == nd->cpu_milli && sh[k].mem_mib == nd->mem_mib &&
                           sh[k].gpu_count == nd->gpu_count && strcmp(sh[k].model, nd->model) == 0))
            k++;
        if (k == ns)
            sh[ns++] = (struct shape){nd->model, nd->cpu_milli, nd->mem_mib, nd->gpu_count};
    }
    for (uint32_t i = 0; i < pods->n; i++) {
        const struct gs_trace_pod *p = &pods->v[i];
        /* A MIG pod needs one GPU at least (instances may share a card), a time-sliced one a
         * GPU per slot. */
        uint32_t need_gpus = p->mig_profile[0]    ? 1
                             : p->timeslice_slots ? p->timeslice_slots
                                                  : p->num_gpu;
        bool gpu = need_gpus > 0;
        bool any_model = !gpu || !p->gpu_spec[0], model_ok = any_model, folded = false;
        bool fits = false;
        uint32_t max_gpus = 0;
        int64_t max_cpu = 0, max_mem = 0;
        for (size_t k = 0; k < ns; k++) {
            bool allowed =
                any_model || (sh[k].model[0] && spec_has(p->gpu_spec, sh[k].model, false));
            if (!allowed) {
                folded |= sh[k].model[0] && spec_has(p->gpu_spec, sh[k].model, true);
                continue;
            }
            model_ok = true;
            if (sh[k].gpu_count > max_gpus)
                max_gpus = sh[k].gpu_count;
            if (sh[k].cpu_milli > max_cpu)
                max_cpu = sh[k].cpu_milli;
            if (sh[k].mem_mib > max_mem)
                max_mem = sh[k].mem_mib;
            fits |= need_gpus <= sh[k].gpu_count && p->cpu_milli <= sh[k].cpu_milli &&
                    p->mem_mib <= sh[k].mem_mib;
        }
        if (!model_ok && folded) {
            if (out->model_case++ == 0)
                out->case_spec = p->gpu_spec;
        } else if (!model_ok) {
            if (out->unknown_model++ == 0) {
                out->unknown_pod = p->name;
                out->unknown_spec = p->gpu_spec;
            }
        } else if (!fits) {
            if (out->too_big++ == 0) {
                out->big_pod = p->name;
                out->big_num_gpu = p->num_gpu;
                out->big_cpu_milli = p->cpu_milli;
                out->big_mem_mib = p->mem_mib;
                out->max_gpus = max_gpus;
                out->max_cpu_milli = max_cpu;
                out->max_mem_mib = max_mem;
            }
        }
    }
    free(sh);
    return GS_OK;
}
