/*
 * The HTML usage report: one self-contained page (inline CSS and SVG, no script, no fonts or
 * images from elsewhere) with GPU-hours per group over time as stacked bars over the idle
 * capacity, each queue's mean share against its fair share, the summary table and the idle
 * allocations; with utilisation samples, GPU-hours charged against used per group.
 *
 * Geometry is fixed so that a test can probe pixels: the body has no margin and the charts are
 * one SVG at the page's top left, drawn at 1 CSS pixel per unit. Every bar carries data-key,
 * data-bucket and data-gpu-hours, and its fill is the group's colour.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/usage_report.h"

#define W 960
#define PLOT_X 60
#define PLOT_W 880
#define PLOT_Y 60
#define PLOT_H 240
#define SHARE_Y 350 /* top of the queue share chart */
#define SHARE_ROW 28
#define TOP_GROUPS 8

/* Tableau 10; "other" and idle after the first TOP_GROUPS. */
static const char *const palette[TOP_GROUPS] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
#define OTHER_COLOUR "#9c755f"
#define IDLE_COLOUR "#d9d9d9"
#define ALLOC_COLOUR "#4e79a7"
#define FAIR_COLOUR "#f28e2b"
#define USED_COLOUR "#59a14f"

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            (void)fputs("&lt;", f);
            break;
        case '>':
            (void)fputs("&gt;", f);
            break;
        case '&':
            (void)fputs("&amp;", f);
            break;
        case '"':
            (void)fputs("&quot;", f);
            break;
        default:
            (void)fputc(*s, f);
        }
    }
}

static const char *colour(uint32_t g)
{
    return g < TOP_GROUPS ? palette[g] : OTHER_COLOUR;
}

static void cell_num(FILE *f, double v, int decimals)
{
    (void)fputs("<td>", f);
    if (isnan(v))
        (void)fputs("-", f);
    else
        (void)fprintf(f, "%.*f", decimals, v);
    (void)fputs("</td>", f);
}

int gs__usage_report_html(const struct gs_usage_report *r, FILE *f)
{
    char from[40], to[40];
    gs_usage_report_format_time(r, r->from_ms, from, sizeof(from));
    gs_usage_report_format_time(r, r->to_ms, to, sizeof(to));
    const char *by = gs_usage_by_name(r->by);
    uint32_t ngroups = r->nrows < TOP_GROUPS ? r->nrows : TOP_GROUPS + (r->nrows > TOP_GROUPS);
    if (r->nrows == TOP_GROUPS + 1)
        ngroups = r->nrows; /* one more group is drawn as itself, not as "other" */
    uint32_t shown = ngroups > TOP_GROUPS && r->nrows > TOP_GROUPS + 1 ? TOP_GROUPS : ngroups;
    uint32_t used_y = SHARE_Y + 40 + (r->nqueues ? r->nqueues : 1) * SHARE_ROW + 20;
    uint32_t nused = 0; /* groups with utilisation samples: the allocated-versus-used chart */
    for (uint32_t i = 0; i < r->nrows; i++)
        nused += !isnan(r->rows[i].used_gpu_h);
    uint32_t height = nused ? used_y + 30 + nused * SHARE_ROW + 10 : used_y;

    (void)fprintf(f,
                  "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                  "<title>gpusched usage %s to %s</title>\n"
                  "<style>body{margin:0;font-family:sans-serif;background:#fff;color:#222}"
                  "svg{display:block}section{margin:16px 24px}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
                  "td:first-child,th:first-child{text-align:left}</style></head><body>\n",
                  from, to);
    (void)fprintf(f,
                  "<svg id=\"charts\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%u\" viewBox=\"0 0 %d %u\">\n",
                  W, height, W, height);
    (void)fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"#ffffff\"/>\n", W,
                  height);
    (void)fprintf(f,
                  "<text x=\"%d\" y=\"22\" font-size=\"16\">GPU-hours charged per %s, per %s "
                  "(grey: idle capacity)</text>\n",
                  PLOT_X, by,
                  r->bucket_ms >= INT64_C(86400000) * 365  ? "year"
                  : r->bucket_ms >= INT64_C(86400000) * 30 ? "30 days"
                  : r->bucket_ms >= INT64_C(86400000) * 7  ? "week"
                  : r->bucket_ms >= INT64_C(86400000)      ? "day"
                  : r->bucket_ms >= INT64_C(3600000) * 6   ? "6 hours"
                                                           : "hour");
    /* Legend. */
    for (uint32_t g = 0; g <= shown && g <= ngroups; g++) {
        bool other = g == shown && ngroups > shown;
        if (g == shown && !other)
            break;
        int x = PLOT_X + (int)g * 110;
        (void)fprintf(f, "<rect x=\"%d\" y=\"32\" width=\"10\" height=\"10\" fill=\"%s\"/>", x,
                      other ? OTHER_COLOUR : colour(g));
        (void)fprintf(f, "<text x=\"%d\" y=\"42\" font-size=\"11\">", x + 14);
        esc(f, other ? "other" : r->rows[g].key);
        (void)fputs("</text>\n", f);
    }
    double ymax = 0;
    for (uint32_t k = 0; k < r->nbuckets; k++)
        if (r->bucket_capacity[k] > ymax)
            ymax = r->bucket_capacity[k];
    for (uint32_t k = 0; k < r->nbuckets; k++) {
        double cum = 0;
        for (uint32_t i = 0; i < r->nrows; i++)
            cum += r->bucket_charged[(size_t)k * r->nrows + i];
        if (cum > ymax)
            ymax = cum;
    }
    if (ymax <= 0)
        ymax = 1;
    double bw = (double)PLOT_W / (r->nbuckets ? r->nbuckets : 1);
    (void)fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222\"/>\n", PLOT_X,
                  PLOT_Y + PLOT_H, PLOT_X + PLOT_W, PLOT_Y + PLOT_H);
    (void)fprintf(f,
                  "<text x=\"4\" y=\"%d\" font-size=\"11\">%.0f</text>"
                  "<text x=\"4\" y=\"%d\" font-size=\"11\">0</text>\n",
                  PLOT_Y + 10, ymax, PLOT_Y + PLOT_H);
    for (uint32_t k = 0; k < r->nbuckets; k++) {
        double x = PLOT_X + bw * k, y = PLOT_Y + PLOT_H, cum = 0, other = 0;
        for (uint32_t i = 0; i <= r->nrows; i++) {
            double v;
            const char *key, *fill;
            if (i < r->nrows && (i < shown || ngroups == r->nrows)) {
                v = r->bucket_charged[(size_t)k * r->nrows + i];
                key = r->rows[i].key;
                fill = colour(i);
            } else if (i < r->nrows) {
                other += r->bucket_charged[(size_t)k * r->nrows + i];
                continue;
            } else {
                v = other;
                key = "other";
                fill = OTHER_COLOUR;
            }
            if (v <= 0)
                continue;
            double h = v / ymax * PLOT_H;
            y -= h;
            cum += v;
            (void)fprintf(f,
                          "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                          "data-key=\"",
                          x, y, bw > 2 ? bw - 1 : bw, h, fill);
            esc(f, key);
            (void)fprintf(f, "\" data-bucket=\"%u\" data-gpu-hours=\"%.6f\"/>\n", k, v);
        }
        double idle = r->bucket_capacity[k] - cum;
        if (idle > 1e-9) {
            double h = idle / ymax * PLOT_H;
            (void)fprintf(f,
                          "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                          "data-key=\"(idle)\" data-bucket=\"%u\" data-gpu-hours=\"%.6f\"/>\n",
                          x, y - h, bw > 2 ? bw - 1 : bw, h, IDLE_COLOUR, k, idle);
        }
    }
    /* Queue shares. */
    (void)fprintf(f,
                  "<text x=\"%d\" y=\"%d\" font-size=\"16\">Mean GPU share per queue, %% of "
                  "capacity (blue: allocated, orange: fair share)</text>\n",
                  PLOT_X, SHARE_Y);
    double smax = 0;
    for (uint32_t q = 0; q < r->nqueues; q++) {
        if (r->queue_alloc_pct[q] > smax)
            smax = r->queue_alloc_pct[q];
        if (r->queue_fair_pct[q] > smax)
            smax = r->queue_fair_pct[q];
    }
    if (smax <= 0)
        smax = 1;
    if (r->nqueues == 0)
        (void)fprintf(f,
                      "<text x=\"%d\" y=\"%d\" font-size=\"12\">no quota snapshots in the "
                      "period</text>\n",
                      PLOT_X, SHARE_Y + 30);
    const int label_w = 140, bar_w = PLOT_W - label_w - 60;
    for (uint32_t q = 0; q < r->nqueues; q++) {
        int y = SHARE_Y + 20 + (int)q * SHARE_ROW;
        (void)fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">", PLOT_X, y + 14);
        esc(f, r->queue_names[q]);
        (void)fputs("</text>", f);
        double aw = r->queue_alloc_pct[q] / smax * bar_w, fw = r->queue_fair_pct[q] / smax * bar_w;
        (void)fprintf(f,
                      "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"12\" fill=\"%s\" "
                      "data-queue=\"",
                      PLOT_X + label_w, y, aw, ALLOC_COLOUR);
        esc(f, r->queue_names[q]);
        (void)fprintf(f, "\" data-alloc-pct=\"%.4f\"/>", r->queue_alloc_pct[q]);
        (void)fprintf(f,
                      "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"8\" fill=\"%s\" "
                      "data-queue=\"",
                      PLOT_X + label_w, y + 14, fw, FAIR_COLOUR);
        esc(f, r->queue_names[q]);
        (void)fprintf(f, "\" data-fair-pct=\"%.4f\"/>", r->queue_fair_pct[q]);
        (void)fprintf(f, "<text x=\"%.0f\" y=\"%d\" font-size=\"11\">%.1f / %.1f</text>\n",
                      PLOT_X + label_w + (aw > fw ? aw : fw) + 6, y + 14, r->queue_alloc_pct[q],
                      r->queue_fair_pct[q]);
    }
    /* Allocated (charged) versus used, for the groups with utilisation samples. */
    if (nused) {
        (void)fprintf(f,
                      "<text x=\"%d\" y=\"%u\" font-size=\"16\">GPU-hours charged (blue) "
                      "and used (green) per %s</text>\n",
                      PLOT_X, used_y, by);
        double umax = 0;
        for (uint32_t i = 0; i < r->nrows; i++)
            if (!isnan(r->rows[i].used_gpu_h) && r->rows[i].charged_gpu_h > umax)
                umax = r->rows[i].charged_gpu_h;
        if (umax <= 0)
            umax = 1;
        uint32_t k = 0;
        for (uint32_t i = 0; i < r->nrows; i++) {
            const struct gs_usage_row *w = &r->rows[i];
            if (isnan(w->used_gpu_h))
                continue;
            int y = (int)used_y + 20 + (int)k++ * SHARE_ROW;
            double cw = w->charged_gpu_h / umax * bar_w, uw = w->used_gpu_h / umax * bar_w;
            (void)fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">", PLOT_X, y + 14);
            esc(f, w->key);
            (void)fputs("</text>", f);
            (void)fprintf(f,
                          "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"12\" fill=\"%s\" "
                          "data-key=\"",
                          PLOT_X + label_w, y, cw, ALLOC_COLOUR);
            esc(f, w->key);
            (void)fprintf(f, "\" data-charged-gpu-hours=\"%.6f\"/>", w->charged_gpu_h);
            (void)fprintf(f,
                          "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"8\" fill=\"%s\" "
                          "data-key=\"",
                          PLOT_X + label_w, y + 14, uw, USED_COLOUR);
            esc(f, w->key);
            (void)fprintf(f, "\" data-used-gpu-hours=\"%.6f\"/>\n", w->used_gpu_h);
        }
    }
    (void)fputs("</svg>\n", f);

    /* The table. */
    double period_h = (double)(r->to_ms - r->from_ms) / 3600000.0;
    (void)fprintf(f,
                  "<section><h2>Usage %s to %s by %s</h2>\n<p id=\"capacity\">Capacity %.2f "
                  "GPU-hours (mean %.1f GPUs), charged %.2f, idle %.2f.</p>\n",
                  from, to, by, r->capacity_gpu_h, period_h > 0 ? r->capacity_gpu_h / period_h : 0,
                  r->charged_gpu_h, r->idle_gpu_h);
    (void)fprintf(f,
                  "<table id=\"usage\"><tr><th>%s</th><th>charged GPU-hours</th><th>used "
                  "GPU-hours</th><th>used %%</th><th>quota GPU-hours</th><th>attainment "
                  "%%</th><th>preempted</th>"
                  "<th>caused</th><th>wait mean s</th><th>wait p95 s</th><th>starts</th></tr>\n",
                  by);
    for (uint32_t i = 0; i < r->nrows; i++) {
        const struct gs_usage_row *w = &r->rows[i];
        (void)fputs("<tr><td>", f);
        esc(f, w->key);
        (void)fputs("</td>", f);
        cell_num(f, w->charged_gpu_h, 2);
        cell_num(f, w->used_gpu_h, 2);
        cell_num(f, w->used_pct, 1);
        cell_num(f, w->quota_gpu_h, 2);
        cell_num(f,
                 isnan(w->quota_gpu_h) || w->quota_gpu_h <= 0
                     ? NAN
                     : 100.0 * w->charged_gpu_h / w->quota_gpu_h,
                 1);
        (void)fprintf(f, "<td>%llu</td><td>%llu</td>", (unsigned long long)w->preemptions_suffered,
                      (unsigned long long)w->preemptions_caused);
        cell_num(f, w->wait_mean_s, 0);
        cell_num(f, w->wait_p95_s, 0);
        (void)fprintf(f, "<td>%u</td></tr>\n", w->starts);
    }
    (void)fprintf(f,
                  "<tr><td>(idle)</td><td>%.2f</td></tr>\n<tr><td>(capacity)</td><td>%.2f</td>"
                  "</tr>\n</table>\n",
                  r->idle_gpu_h, r->capacity_gpu_h);
    (void)fputs("<h2>Idle allocations</h2>\n", f);
    if (r->util_samples == 0) {
        (void)fputs(
            "<p id=\"idle\">no utilisation samples: GPU-hours used and idle allocations are "
            "not reported</p>\n",
            f);
    } else if (r->nidle == 0) {
        (void)fputs("<p id=\"idle\">none</p>\n", f);
    } else {
        (void)fputs("<table id=\"idle\"><tr><th>pod</th><th>name</th><th>group</th><th>held h</th>"
                    "<th>charged GPU-hours</th><th>used GPU-hours</th></tr>\n",
                    f);
        for (uint32_t i = 0; i < r->nidle; i++) {
            (void)fputs("<tr><td>", f);
            esc(f, r->idle[i].pod_uid);
            (void)fputs("</td><td>", f);
            esc(f, r->idle[i].name);
            (void)fputs("</td><td>", f);
            esc(f, r->idle[i].key);
            (void)fprintf(f, "</td><td>%.1f</td><td>%.2f</td><td>%.2f</td></tr>\n",
                          r->idle[i].held_h, r->idle[i].charged_gpu_h, r->idle[i].used_gpu_h);
        }
        (void)fputs("</table>\n", f);
    }
    (void)fputs("</section></body></html>\n", f);
    return ferror(f) ? GS_EIO : GS_OK;
}
