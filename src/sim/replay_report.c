/*
 * Result files and plots of a trace replay (see gs_report_write_replay() in src/sim/report.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "util/file.h"
#include "gpusched/replay.h"
#include "sim/report.h"

static void fmt(double v, char *buf, size_t cap)
{
    if (isnan(v))
        (void)snprintf(buf, cap, "%s", "");
    else
        (void)snprintf(buf, cap, "%.3f", v);
}

static int write_queues(const struct gs_replay *r, const char *path, char *err, size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    (void)fputs(
        "queue,pods,started,completed,pending_at_end,wait_p50_s,wait_p95_s,wait_p99_s,"
        "jct_mean_s,jct_p50_s,gpu_hours,share_while_waiting_pct,fair_share_while_waiting_pct,"
        "evictions_suffered,evictions_caused\n",
        f);
    const struct gs_replay_queue *q;
    uint32_t n = gs_replay_queues(r, &q);
    for (uint32_t i = 0; i < n; i++) {
        char w50[32], w95[32], w99[32], jm[32], j50[32];
        fmt(q[i].wait_p50_s, w50, sizeof(w50));
        fmt(q[i].wait_p95_s, w95, sizeof(w95));
        fmt(q[i].wait_p99_s, w99, sizeof(w99));
        fmt(q[i].jct_mean_s, jm, sizeof(jm));
        fmt(q[i].jct_p50_s, j50, sizeof(j50));
        char sh[32], fa[32];
        fmt(q[i].share_mean_pct, sh, sizeof(sh));
        fmt(q[i].fair_mean_pct, fa, sizeof(fa));
        (void)fprintf(f, "%s,%u,%u,%u,%u,%s,%s,%s,%s,%s,%.3f,%s,%s,%llu,%llu\n", q[i].name,
                      q[i].pods, q[i].started, q[i].completed, q[i].pending_end, w50, w95, w99, jm,
                      j50, q[i].gpu_hours, sh, fa, (unsigned long long)q[i].evictions_suffered,
                      (unsigned long long)q[i].evictions_caused);
    }
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

/* Names of the modes as the node list's gpu_mode column spells them, by enum gs_gpu_sharing:
 * the core's one table (gs_gpu_sharing_name(), also the agent inventory's). */
const char *gs_replay_mode_name(uint32_t mode)
{
    const char *n = mode < GS_REPLAY_MODES ? gs_gpu_sharing_name((enum gs_gpu_sharing)mode) : NULL;
    return n ? n : "";
}

static int write_modes(const struct gs_replay_mode *m, const char *path, char *err, size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    (void)fputs("mode,gpus,pods_started,gpu_hours,alloc_pct,peak_gpu_fill_pct\n", f);
    uint32_t gpus = 0, started = 0;
    uint64_t milli_ms = 0;
    for (uint32_t k = 0; k < GS_REPLAY_MODES; k++) {
        char al[32];
        fmt(m[k].alloc_pct, al, sizeof(al));
        (void)fprintf(f, "%s,%u,%u,%.3f,%s,%.1f\n", gs_replay_mode_name(k), m[k].gpus,
                      m[k].pods_started, m[k].gpu_hours, al, m[k].peak_fill_pct);
        gpus += m[k].gpus;
        started += m[k].pods_started;
        milli_ms += m[k].gpu_milli_ms;
    }
    (void)fprintf(f, "all,%u,%u,%.3f,,\n", gpus, started, (double)milli_ms / 1000.0 / 3600000.0);
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

static int write_shares(const struct gs_replay *r, const char *path, char *err, size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    const struct gs_replay_queue *q;
    const struct gs_replay_sample *s;
    const double *alloc, *fair;
    uint32_t nq = gs_replay_queues(r, &q), ns = gs_replay_samples(r, &s);
    gs_replay_shares(r, &alloc, &fair);
    (void)fputs("t_h", f);
    for (uint32_t i = 0; i < nq; i++)
        (void)fprintf(f, ",%s_alloc_pct,%s_fair_pct", q[i].name, q[i].name);
    (void)fputc('\n', f);
    for (uint32_t k = 0; k < ns; k++) {
        (void)fprintf(f, "%.3f", (double)s[k].t_ms / 3600000.0);
        for (uint32_t i = 0; i < nq; i++)
            (void)fprintf(f, ",%.3f,%.3f", alloc[(size_t)k * nq + i], fair[(size_t)k * nq + i]);
        (void)fputc('\n', f);
    }
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

static int write_util(const struct gs_replay *r, const char *path, char *err, size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    const struct gs_replay_sample *s;
    uint32_t ns = gs_replay_samples(r, &s);
    (void)fputs("t_h,gpu_alloc_pct,pods_running,pods_pending\n", f);
    for (uint32_t k = 0; k < ns; k++)
        (void)fprintf(f, "%.3f,%.3f,%u,%u\n", (double)s[k].t_ms / 3600000.0, s[k].gpu_alloc_pct,
                      s[k].running, s[k].pending);
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

static int write_waits(const struct gs_replay *r, const char *path, char *err, size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    const struct gs_replay_queue *q;
    gs_replay_queues(r, &q);
    const uint32_t *wq;
    const double *ws;
    uint32_t n = gs_replay_waits(r, &wq, &ws);
    const char *const *pod = gs_replay_wait_pods(r);
    (void)fputs("queue,pod,wait_s\n", f);
    for (uint32_t i = 0; i < n; i++)
        (void)fprintf(f, "%s,%s,%.3f\n", q[wq[i]].name, pod[i], ws[i]);
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Writes a gnuplot script and its data, runs it, renames the PNG into place. The script body
 * names the data file @DATA@. Temporary files come from mkstemp (O_EXCL: a planted symbolic
 * link cannot redirect them) and every name reaches gnuplot quoted. */
static int plot(const char *dir, const char *name, const char *data, const char *script_body,
                char *err, size_t cap)
{
    int rc = GS_EIO;
    size_t len = strlen(dir) + strlen(name) + 32;
    char *png = calloc(len, 1), *png_tmp = calloc(len, 1), *dat = calloc(len, 1),
         *gp = calloc(len, 1), *q_png = NULL, *q_dat = NULL;
    int fd = -1;
    FILE *f = NULL;
    if (!png || !png_tmp || !dat || !gp)
        goto out;
    (void)snprintf(png, len, "%s/%s.png", dir, name);
    (void)snprintf(png_tmp, len, "%s/.%s.png.XXXXXX", dir, name);
    (void)snprintf(dat, len, "%s/.%s.dat.XXXXXX", dir, name);
    (void)snprintf(gp, len, "%s/.%s.gp.XXXXXX", dir, name);
    const char *failed = png;
    if ((fd = gs__mkstemp_shared(png_tmp)) < 0) {
        png_tmp[0] = '\0';
        goto io;
    }
    close(fd);
    failed = dat;
    if ((fd = gs__mkstemp_shared(dat)) < 0) {
        dat[0] = '\0';
        goto io;
    }
    f = fdopen(fd, "w");
    if (!f || fputs(data, f) < 0 || fclose(f) != 0) {
        f = NULL;
        goto io;
    }
    f = NULL;
    failed = gp;
    if ((fd = gs__mkstemp_shared(gp)) < 0) {
        gp[0] = '\0';
        goto io;
    }
    if (!(f = fdopen(fd, "w")))
        goto io;
    q_png = gs_report_gp_quote(png_tmp);
    q_dat = gs_report_gp_quote(dat);
    if (!q_png || !q_dat)
        goto io;
    (void)fprintf(
        f, "set terminal pngcairo size 1100,640 font 'sans,11' noenhanced\nset output '%s'\n",
        q_png);
    for (const char *c = script_body; *c;) {
        if (strncmp(c, "@DATA@", 6) == 0) {
            (void)fputs(q_dat, f);
            c += 6;
        } else {
            (void)fputc(*c++, f);
        }
    }
    int werr = ferror(f);
    if (fclose(f) != 0 || werr) {
        f = NULL;
        goto io;
    }
    f = NULL;
    if (gs_report_gnuplot("gnuplot", gp, err, cap) != GS_OK)
        goto out;
    if (rename(png_tmp, png) != 0) {
        (void)snprintf(err, cap, "%s: cannot rename: %s", png, strerror(errno));
        goto out;
    }
    rc = GS_OK;
    goto out;
io:
    snprintf(err, cap, "%s: cannot write: %s", failed, strerror(errno));
    if (fd >= 0 && !f)
        close(fd);
out:
    if (f)
        (void)fclose(f);
    if (dat && dat[0])
        (void)remove(dat);
    if (gp && gp[0])
        (void)remove(gp);
    if (png_tmp && png_tmp[0] && rc != GS_OK)
        (void)remove(png_tmp);
    free(q_png);
    free(q_dat);
    free(png);
    free(png_tmp);
    free(dat);
    free(gp);
    return rc;
}

/* A growable text buffer for plot data, bounded by the results' size. */
struct text {
    char *s;
    size_t len, cap;
};

static int text_add(struct text *t, const char *fmtstr, ...) GS_PRINTF(2, 3);
static int text_add(struct text *t, const char *fmtstr, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmtstr);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmtstr, ap);
        va_end(ap);
        if (n < 0)
            return GS_EIO;
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return GS_OK;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s)
            return GS_ENOMEM;
        t->s = s;
        t->cap = cap;
    }
}

static int plot_share(const struct gs_replay *r, const char *dir, char *err, size_t cap)
{
    const struct gs_replay_queue *q;
    const struct gs_replay_sample *s;
    const double *alloc, *fair;
    uint32_t nq = gs_replay_queues(r, &q), ns = gs_replay_samples(r, &s);
    gs_replay_shares(r, &alloc, &fair);
    struct text data = {0}, script = {0};
    int rc = GS_ENOMEM;
    /* Show the busy part: up to a quarter past the last sample with waiting pods (the trace's
     * long tail of single long-running pods would squeeze it into one pixel column). */
    int64_t t_end = ns ? s[ns - 1].t_ms : 0, t_last = t_end;
    for (uint32_t k = ns; k-- > 0;) {
        if (s[k].pending > 0) {
            t_last = s[k].t_ms;
            break;
        }
    }
    /* Never past the replay's end (when nothing waited, the whole replay). */
    double end_ms = (double)t_last * 1.25 < (double)t_end ? (double)t_last * 1.25 : (double)t_end;
    bool cut = end_ms < (double)t_end;
    double end_h = end_ms / 3600000.0;
    bool days = end_h > 72;
    double unit = days ? 86400000.0 : 3600000.0;
    for (uint32_t k = 0; k < ns; k++) {
        if (text_add(&data, "%.4f", (double)s[k].t_ms / unit))
            goto out;
        for (uint32_t i = 0; i < nq; i++)
            if (text_add(&data, " %.3f %.3f", alloc[(size_t)k * nq + i], fair[(size_t)k * nq + i]))
                goto out;
        if (text_add(&data, "\n"))
            goto out;
    }
    if (text_add(
            &script,
            "set title 'GPU share per queue over time (solid: allocated, dashed: fair share)%s'\n"
            "set xlabel 'replay time, %s'\nset ylabel '%% of cluster GPUs'\n"
            "set xrange [0:%.4f]\nset key outside right\nset grid\nplot ",
            cut ? "; shown: to a quarter past the last wait" : "", days ? "days" : "hours",
            end_h > 0 ? (days ? end_h / 24 : end_h) : 1.0))
        goto out;
    for (uint32_t i = 0; i < nq; i++) {
        char *qn = gs_report_gp_quote(q[i].name);
        int bad = !qn || text_add(&script,
                                  "%s'@DATA@' using 1:%u with lines lw 2 lc %u title '%s', "
                                  "'@DATA@' using 1:%u with lines dt 2 lc %u notitle",
                                  i ? ", " : "", 2 + 2 * i, i + 1, qn, 3 + 2 * i, i + 1);
        free(qn);
        if (bad)
            goto out;
    }
    /* A key entry for the dashed lines, which carry no title of their own. */
    if (text_add(&script, ", 1/0 with lines dt 2 lc rgb 'black' title 'dashed: fair share'\n"))
        goto out;
    rc = plot(dir, "share", data.s ? data.s : "", script.s, err, cap);
out:
    free(data.s);
    free(script.s);
    return rc;
}

static int plot_wait(const struct gs_replay *r, const char *dir, char *err, size_t cap)
{
    const struct gs_replay_queue *q;
    uint32_t nq = gs_replay_queues(r, &q);
    const uint32_t *wq;
    const double *ws;
    uint32_t n = gs_replay_waits(r, &wq, &ws);
    struct text data = {0}, script = {0};
    int rc = GS_ENOMEM;
    double *v = malloc((n + 1) * sizeof(*v));
    if (!v)
        return GS_ENOMEM;
    /* One data block per queue: sorted waits and their cumulative fraction. */
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t k = 0;
        for (uint32_t j = 0; j < n; j++)
            if (wq[j] == i)
                v[k++] = ws[j] < 1.0 ? 1.0 : ws[j];
        qsort(v, k, sizeof(*v), cmp_double);
        for (uint32_t j = 0; j < k; j++)
            if (text_add(&data, "%.3f %.5f\n", v[j], (double)(j + 1) / k))
                goto out;
        if (k == 0 && text_add(&data, "1 0\n"))
            goto out;
        if (text_add(&data, "\n\n"))
            goto out;
    }
    double wmax = 10;
    uint32_t waited = 0; /* pods that waited 1 s or more */
    for (uint32_t j = 0; j < n; j++) {
        wmax = ws[j] * 1.2 > wmax ? ws[j] * 1.2 : wmax;
        waited += ws[j] >= 1.0;
    }
    /* Nothing to draw: say so in the frame rather than leave it empty. */
    if (waited == 0 &&
        text_add(&script, "set label 1 '%s' at graph 0.5, graph 0.5 center font 'sans,14'\n",
                 n ? "no pod waited 1 s or more: every pod started within a second of creation"
                   : "no pod started in this replay"))
        goto out;
    if (text_add(&script, "set xrange [1:%.1f]\n", wmax))
        goto out;
    if (text_add(&script, "set title 'Wait time from creation to start (CDF per queue)'\n"
                          "set xlabel 'wait, seconds (log scale; under 1 s shown as 1 s)'\n"
                          "set ylabel 'fraction of started pods'\nset logscale x\n"
                          "set key bottom right\nset grid\nset yrange [0:1]\nplot "))
        goto out;
    for (uint32_t i = 0; i < nq; i++) {
        char *qn = gs_report_gp_quote(q[i].name);
        int bad =
            !qn || text_add(&script, "%s'@DATA@' index %u using 1:2 with steps lw 2 title '%s'",
                            i ? ", " : "", i, qn);
        free(qn);
        if (bad)
            goto out;
    }
    if (text_add(&script, "\n"))
        goto out;
    rc = plot(dir, "wait", data.s ? data.s : "", script.s, err, cap);
out:
    free(v);
    free(data.s);
    free(script.s);
    return rc;
}

int gs_report_write_replay(const struct gs_replay *r, const char *dir, int with_plot, char *err,
                           size_t cap, int *plot_failed)
{
    *plot_failed = 0;
    size_t len = strlen(dir) + 32;
    char *path = malloc(len);
    if (!path)
        return GS_ENOMEM;
    int rc;
    (void)snprintf(path, len, "%s/queues.csv", dir);
    if ((rc = write_queues(r, path, err, cap)) != GS_OK)
        goto out;
    (void)snprintf(path, len, "%s/share.csv", dir);
    if ((rc = write_shares(r, path, err, cap)) != GS_OK)
        goto out;
    (void)snprintf(path, len, "%s/utilisation.csv", dir);
    if ((rc = write_util(r, path, err, cap)) != GS_OK)
        goto out;
    (void)snprintf(path, len, "%s/waits.csv", dir);
    if ((rc = write_waits(r, path, err, cap)) != GS_OK)
        goto out;
    struct gs_replay_mode modes[GS_REPLAY_MODES];
    if (gs_replay_modes(r, modes)) {
        (void)snprintf(path, len, "%s/modes.csv", dir);
        if ((rc = write_modes(modes, path, err, cap)) != GS_OK)
            goto out;
    }
    if (with_plot) {
        /* The CSV files are the results; a plot that cannot be drawn (no gnuplot) is reported
         * and left out, never a reason to throw them away. */
        if (plot_share(r, dir, err, cap) != GS_OK || plot_wait(r, dir, err, cap) != GS_OK)
            *plot_failed = 1;
    }
out:
    free(path);
    return rc;
}
