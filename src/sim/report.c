/*
 * Result files: CSV in the layout of the FGD artefact's expected results (so ours and the
 * published numbers compare line by line), per-run and per-policy summaries, and a gnuplot
 * plot. See src/sim/report.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "sim/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpusched/err.h"
#include "util/file.h"
#include "gpusched/sched.h"

int gs_report_gnuplot(const char *gnuplot, const char *script, char *err, size_t cap)
{
    /* gnuplot's stderr comes back through a pipe: its warnings on a plot it draws ("empty y
     * range") are not ours to print, and when it fails its last line goes into err. */
    int fds[2];
    if (pipe(fds) != 0) {
        (void)snprintf(err, cap, "pipe: %s", strerror(errno));
        return GS_EIO;
    }
    pid_t pid = fork();
    if (pid < 0) {
        (void)snprintf(err, cap, "fork: %s", strerror(errno));
        (void)close(fds[0]);
        (void)close(fds[1]);
        return GS_EIO;
    }
    if (pid == 0) {
        (void)close(fds[0]);
        if (dup2(fds[1], STDERR_FILENO) < 0)
            _exit(126);
        execlp(gnuplot, gnuplot, script, (char *)NULL);
        _exit(127);
    }
    (void)close(fds[1]);
    /* An interrupt stops gnuplot before the stage it writes into is removed. */
    gs__stage_child(pid);
    char tail[1024]; /* the last bytes gnuplot wrote to stderr */
    size_t len = 0;
    for (;;) {
        char buf[512];
        ssize_t n = read(fds[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t k = (size_t)n; /* < sizeof(tail): buf is the smaller */
        if (len + k >= sizeof(tail)) {
            size_t drop = len + k - (sizeof(tail) - 1);
            memmove(tail, tail + drop, len - drop);
            len -= drop;
        }
        memcpy(tail + len, buf, k);
        len += k;
    }
    (void)close(fds[0]);
    tail[len] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    gs__stage_child(0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* The last non-empty line of what it said, control characters made spaces. */
        while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == ' '))
            tail[--len] = '\0';
        char *last = strrchr(tail, '\n');
        last = last ? last + 1 : tail;
        for (char *c = last; *c; c++)
            if ((unsigned char)*c < ' ')
                *c = ' ';
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            (void)snprintf(err, cap, "%s failed (not installed?); no plot written", gnuplot);
        else
            (void)snprintf(err, cap, "%s failed (%s); no plot written", gnuplot,
                           last[0] ? last : "no message");
        return GS_EIO;
    }
    return GS_OK;
}

void gs_report_format_py(double v, char *buf, size_t cap)
{
    if (isnan(v)) {
        (void)snprintf(buf, cap, "%s", "");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        (void)snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* Python writes integral floats with ".0" and never uses an exponent below 1e16. */
    if (strchr(buf, 'e')) {
        (void)snprintf(buf, cap, "%.17g", v);
        return;
    }
    if (!strchr(buf, '.') && !strchr(buf, 'n') && !strchr(buf, 'i')) {
        size_t len = strlen(buf);
        if (len + 3 <= cap)
            memcpy(buf + len, ".0", 3);
    }
}

FILE *gs_report_tmp_open(const char *path, char **tmp, char *err, size_t cap)
{
    /* mkstemp creates the file with O_EXCL: a symbolic link planted under a guessed name can
     * never redirect the write. */
    size_t len = strlen(path) + 16;
    *tmp = malloc(len);
    if (!*tmp) {
        (void)snprintf(err, cap, "out of memory");
        return NULL;
    }
    (void)snprintf(*tmp, len, "%s.tmpXXXXXX", path);
    int fd = gs__mkstemp_shared(*tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        (void)snprintf(err, cap, "%s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            (void)remove(*tmp);
        }
        free(*tmp);
        *tmp = NULL;
    }
    return f;
}

char *gs_report_gp_quote(const char *in)
{
    size_t n = strlen(in);
    char *out = malloc(2 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const char *c = in; *c; c++) {
        if (*c == '\'')
            *o++ = '\'';
        *o++ = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c;
    }
    *o = '\0';
    return out;
}

int gs_report_tmp_commit(FILE *f, char *tmp, const char *path, char *err, size_t cap)
{
    int bad = ferror(f);
    if (fclose(f) != 0)
        bad = 1;
    if (!bad && rename(tmp, path) != 0)
        bad = 1;
    if (bad) {
        (void)snprintf(err, cap, "%s: %s", path, errno ? strerror(errno) : "write failed");
        if (remove(tmp) != 0) {
            /* Nothing more to do: the temporary name is reported above. */
        }
    }
    free(tmp);
    return bad ? GS_EIO : GS_OK;
}

static const double *metric_row(const struct gs_sim_result *r, enum gs_report_metric m)
{
    switch (m) {
    case GS_REPORT_FRAG:
        return r->frag_pct;
    case GS_REPORT_FRAG_RATIO:
        return r->frag_ratio_pct;
    case GS_REPORT_ALLOC:
    default:
        return r->alloc_pct;
    }
}

int gs_report_write_columns(const char *path, const struct gs_report_run *runs, size_t n,
                            enum gs_report_metric metric, char *err, size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    (void)fputs("workload,sc_policy,tune,seed,total_gpus", f);
    for (int k = 0; k < GS_SIM_COLUMNS; k++)
        (void)fprintf(f, ",%d", k);
    (void)fputc('\n', f);
    char num[64];
    for (size_t i = 0; i < n; i++) {
        const struct gs_sim_result *r = runs[i].res;
        gs_report_format_py(r->tune, num, sizeof(num));
        (void)fprintf(f, "%s,%s,%s,%llu,%u", runs[i].workload, gs_policy_label(r->policy), num,
                      (unsigned long long)r->seed, r->total_gpus);
        const double *row = metric_row(r, metric);
        for (int k = 0; k < GS_SIM_COLUMNS; k++) {
            gs_report_format_py(row[k], num, sizeof(num));
            (void)fprintf(f, ",%s", num);
        }
        (void)fputc('\n', f);
    }
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

static double unalloc_at_100(const struct gs_sim_result *r)
{
    return 100.0 - r->alloc_pct[100];
}

int gs_report_write_runs(const char *path, const struct gs_report_run *runs, size_t n, char *err,
                         size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    (void)fputs("workload,policy,seed,tune,pods,pods_failed,arrived_gpu_milli,used_gpu_milli,"
                "unallocated_gpu_pct_at_100,fragmented_gpu_pct_at_80\n",
                f);
    char tune[64], un[64], fr[64];
    for (size_t i = 0; i < n; i++) {
        const struct gs_sim_result *r = runs[i].res;
        gs_report_format_py(r->tune, tune, sizeof(tune));
        gs_report_format_py(gs_round_half_even(unalloc_at_100(r), 2), un, sizeof(un));
        gs_report_format_py(r->frag_pct[80], fr, sizeof(fr));
        (void)fprintf(f, "%s,%s,%llu,%s,%u,%u,%lld,%lld,%s,%s\n", runs[i].workload,
                      gs_policy_name(r->policy), (unsigned long long)r->seed, tune, r->pods,
                      r->pods_failed, (long long)r->arrived_gpu_milli, (long long)r->used_gpu_milli,
                      un, fr);
    }
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

size_t gs_report_aggregate(const struct gs_report_run *runs, size_t n, struct gs_report_agg *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < m && !(out[j].policy == runs[i].res->policy &&
                          strcmp(out[j].workload, runs[i].workload) == 0))
            j++;
        if (j < m)
            continue;
        struct gs_report_agg *a = &out[m++];
        memset(a, 0, sizeof(*a));
        a->workload = runs[i].workload;
        a->policy = runs[i].res->policy;
        double su = 0, sf = 0, sfail = 0;
        for (size_t k = i; k < n; k++) {
            if (runs[k].res->policy != a->policy || strcmp(runs[k].workload, a->workload) != 0)
                continue;
            a->seeds++;
            su += unalloc_at_100(runs[k].res);
            sf += runs[k].res->frag_pct[80];
            sfail += runs[k].res->pods_failed;
        }
        a->unalloc_mean = su / a->seeds;
        a->frag_mean = sf / a->seeds;
        a->failed_mean = sfail / a->seeds;
        double vu = 0, vf = 0;
        for (size_t k = i; k < n; k++) {
            if (runs[k].res->policy != a->policy || strcmp(runs[k].workload, a->workload) != 0)
                continue;
            double du = unalloc_at_100(runs[k].res) - a->unalloc_mean;
            double df = runs[k].res->frag_pct[80] - a->frag_mean;
            vu += du * du;
            vf += df * df;
        }
        a->unalloc_std = a->seeds > 1 ? sqrt(vu / (a->seeds - 1)) : 0;
        a->frag_std = a->seeds > 1 ? sqrt(vf / (a->seeds - 1)) : 0;
    }
    return m;
}

int gs_report_write_summary(const char *path, const struct gs_report_agg *agg, size_t n, char *err,
                            size_t cap)
{
    char *tmp;
    FILE *f = gs_report_tmp_open(path, &tmp, err, cap);
    if (!f)
        return GS_EIO;
    (void)fputs(
        "workload,policy,seeds,unallocated_gpu_pct_at_100_mean,unallocated_gpu_pct_at_100_std,"
        "fragmented_gpu_pct_at_80_mean,fragmented_gpu_pct_at_80_std,failed_pods_mean\n",
        f);
    for (size_t i = 0; i < n; i++)
        (void)fprintf(f, "%s,%s,%u,%.3f,%.3f,%.3f,%.3f,%.1f\n", agg[i].workload,
                      gs_policy_name(agg[i].policy), agg[i].seeds, agg[i].unalloc_mean,
                      agg[i].unalloc_std, agg[i].frag_mean, agg[i].frag_std, agg[i].failed_mean);
    return gs_report_tmp_commit(f, tmp, path, err, cap);
}

/* The value of one run's metric at arrived-workload column k. */
static double metric_at(const struct gs_sim_result *r, enum gs_report_metric metric, int k)
{
    switch (metric) {
    case GS_REPORT_FRAG:
        return r->frag_pct[k];
    case GS_REPORT_FRAG_RATIO:
        return r->frag_ratio_pct[k];
    case GS_REPORT_ALLOC:
    default:
        return r->alloc_pct[k];
    }
}

int gs_report_plot_metric(const char *png_path, const char *workload,
                          const struct gs_report_run *runs, size_t n, enum gs_report_metric metric,
                          const char *gnuplot, char *err, size_t cap)
{
    /* Mean of the metric per (policy, column) over this workload's seeds. */
    double sum[GS_POLICY_COUNT][GS_SIM_COLUMNS] = {{0}};
    unsigned cnt[GS_POLICY_COUNT][GS_SIM_COLUMNS] = {{0}};
    bool present[GS_POLICY_COUNT] = {false};
    for (size_t i = 0; i < n; i++) {
        if (strcmp(runs[i].workload, workload) != 0)
            continue;
        const struct gs_sim_result *r = runs[i].res;
        present[r->policy] = true;
        for (int k = 0; k < GS_SIM_COLUMNS; k++) {
            double v = metric_at(r, metric, k);
            if (isnan(v))
                continue;
            sum[r->policy][k] += v;
            cnt[r->policy][k]++;
        }
    }
    /* The zoomed panel of the allocation plot: columns 80..130, where the policies part, with
     * the y range of what is drawn there (all lines lie within a few points of each other). */
    double zlo = 100, zhi = 0;
    for (uint32_t p = 0; p < GS_POLICY_COUNT; p++)
        for (int k = 80; k < GS_SIM_COLUMNS; k++)
            if (present[p] && cnt[p][k]) {
                double v = sum[p][k] / cnt[p][k];
                zlo = v < zlo ? v : zlo;
                zhi = v > zhi ? v : zhi;
            }
    bool zoom = metric == GS_REPORT_ALLOC && zhi >= zlo;
    if (zoom) {
        double pad = (zhi - zlo) * 0.08 + 0.2;
        zlo = floor(zlo - pad);
        zhi = ceil(zhi + pad) > 100 ? 100 : ceil(zhi + pad);
    }
    char *data_tmp = NULL, *script_tmp = NULL, *png_tmp = NULL;
    char *q_png = NULL, *q_work = NULL, *q_data = NULL;
    int rc = GS_EIO;
    size_t plen = strlen(png_path) + 32;
    char *data_path = malloc(plen), *script_path = malloc(plen);
    if (!data_path || !script_path) {
        (void)snprintf(err, cap, "out of memory");
        goto out;
    }
    (void)snprintf(data_path, plen, "%s.dat", png_path);
    (void)snprintf(script_path, plen, "%s.gp", png_path);
    FILE *d = gs_report_tmp_open(data_path, &data_tmp, err, cap);
    if (!d)
        goto out;
    for (int k = 0; k < GS_SIM_COLUMNS; k++) {
        (void)fprintf(d, "%d", k);
        for (uint32_t p = 0; p < GS_POLICY_COUNT; p++) {
            if (!present[p])
                continue;
            if (cnt[p][k])
                (void)fprintf(d, " %.4f", sum[p][k] / cnt[p][k]);
            else
                (void)fputs(" NaN", d);
        }
        (void)fputc('\n', d);
    }
    int derr = ferror(d);
    if (fclose(d) != 0 || derr) {
        (void)snprintf(err, cap, "%s: write failed", data_tmp);
        goto out;
    }
    FILE *s = gs_report_tmp_open(script_path, &script_tmp, err, cap);
    if (!s)
        goto out;
    png_tmp = malloc(plen + 16);
    if (!png_tmp) {
        (void)fclose(s);
        goto out;
    }
    (void)snprintf(png_tmp, plen + 16, "%s.tmpXXXXXX", png_path);
    int png_fd = gs__mkstemp_shared(png_tmp);
    if (png_fd < 0) {
        (void)snprintf(err, cap, "%s: %s", png_path, strerror(errno));
        png_tmp[0] = '\0';
        (void)fclose(s);
        goto out;
    }
    close(png_fd);
    q_png = gs_report_gp_quote(png_tmp);
    q_work = gs_report_gp_quote(workload);
    q_data = gs_report_gp_quote(data_tmp);
    if (!q_png || !q_work || !q_data) {
        (void)snprintf(err, cap, "out of memory");
        (void)fclose(s);
        goto out;
    }
    static const char *const titles[] = {[GS_REPORT_ALLOC] = "GPU allocation rate",
                                         [GS_REPORT_FRAG] = "Fragmented GPU",
                                         [GS_REPORT_FRAG_RATIO] = "Fragmented share of idle GPU"};
    static const char *const ylabels[] = {[GS_REPORT_ALLOC] = "allocated GPU, %% of capacity",
                                          [GS_REPORT_FRAG] = "fragmented GPU, %% of capacity",
                                          [GS_REPORT_FRAG_RATIO] = "fragmented / idle GPU, %%"};
    int mi = metric >= GS_REPORT_ALLOC && metric <= GS_REPORT_FRAG_RATIO ? (int)metric : 0;
    (void)fprintf(s,
                  "set terminal pngcairo size %d,640 font 'sans,11' noenhanced\n"
                  "set output '%s'\n"
                  "set datafile missing 'NaN'\nset grid\n",
                  zoom ? 1400 : 1000, q_png);
    if (zoom)
        (void)fputs("set multiplot layout 1,2\n", s);
    /* Panels: the whole range, then (allocation only) the top band of columns 80..130. Lines
     * differ by dash type and point shape too, so they stay apart in grey; each policy marks a
     * different set of columns (pointinterval a distinct prime: two policies mark the same
     * column only at 0 and multiples of the product, 77 at the least), so a line that lies on
     * another, as clustering on packing within 0.1 point, still shows its own marks. */
    static const int mark_every[] = {7, 11, 13, 17, 19, 23, 29, 31};
    for (int panel = 0; panel < (zoom ? 2 : 1); panel++) {
        if (panel == 0)
            (void)fprintf(s,
                          "set title '%s vs arrived workload (%s, mean over seeds)'\n"
                          "set key %s opaque\nset xrange [0:130]\n",
                          titles[mi], q_work,
                          metric == GS_REPORT_ALLOC ? "left top" : "left bottom");
        else
            (void)fprintf(s,
                          "set title 'zoom: arrived 80-130%%'\nset key right bottom opaque\n"
                          "set xrange [80:130]\nset yrange [%.0f:%.0f]\n",
                          zlo, zhi);
        (void)fputs("set xlabel 'arrived GPU request, % of cluster GPU capacity'\n", s);
        (void)fprintf(s, "set ylabel '%s'\n", ylabels[mi]);
        if (panel == 0)
            (void)fputs(metric == GS_REPORT_ALLOC ? "set yrange [0:100]\n" : "set yrange [0:*]\n",
                        s);
        (void)fputs("plot ", s);
        int col = 2;
        bool first = true;
        for (uint32_t p = 0; p < GS_POLICY_COUNT; p++) {
            if (!present[p])
                continue;
            (void)fprintf(s,
                          "%s'%s' using 1:%d with linespoints lw 2 dt %d pt %d pointinterval %d "
                          "title '%s'",
                          first ? "" : ", ", q_data, col, col - 1, col - 1,
                          mark_every[(col - 2) % 8], gs_policy_name(p));
            col++;
            first = false;
        }
        (void)fputc('\n', s);
    }
    if (zoom)
        (void)fputs("unset multiplot\n", s);
    int serr = ferror(s);
    if (fclose(s) != 0 || serr) {
        (void)snprintf(err, cap, "%s: write failed", script_tmp);
        goto out;
    }
    if (gs_report_gnuplot(gnuplot, script_tmp, err, cap) != GS_OK)
        goto out;
    if (rename(png_tmp, png_path) != 0) {
        (void)snprintf(err, cap, "%s: %s", png_path, strerror(errno));
        goto out;
    }
    rc = GS_OK;
out:
    if (data_tmp)
        (void)remove(data_tmp);
    if (script_tmp)
        (void)remove(script_tmp);
    if (png_tmp && png_tmp[0] && rc != GS_OK)
        (void)remove(png_tmp);
    free(q_png);
    free(q_work);
    free(q_data);
    free(data_tmp);
    free(script_tmp);
    free(png_tmp);
    free(data_path);
    free(script_path);
    return rc;
}
