/*
 * Report plots: hand-written SVG, no scripts, no fonts or data fetched
 * from anywhere, so the file renders offline.  Six panels on one page:
 *
 *   +----------------------+----------------------+
 *   | CDF TTFT             | CDF TTFO             |
 *   | CDF ITL              | CDF request latency  |
 *   | ISL vs OSL (scatter) | attainment over time |
 *   +----------------------+----------------------+
 *
 * CDFs are drawn from the exact sorted values (downsampled to at most
 * CDF_POINTS points evenly spaced in rank); the x axis ends at the larger
 * of 1.1 x p99.5 and 1.15 x the SLO limit (never beyond the maximum),
 * saying so when the tail is cut.  See metrics/report/report_plot.h.
 */
#include "metrics/report/report_plot.h"

#include "metrics/report/report_slice.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W           1200
#define H           1560
#define PW          510             /* panel plot area */
#define PH          360
#define CDF_POINTS  600
#define SCATTER_MAX 4000
#define TIME_BINS   60

static const char *const color[2] = { "#1f77b4", "#e4572e" };
static const char *const setname[2] = { "A", "B" };

struct panel {
    double x, y;                    /* top-left of the plot area, px */
    double x0, x1, y0, y1;          /* data range */
    int    id;
};

static double px(const struct panel *p, double v)
{
    return p->x + (v - p->x0) / (p->x1 - p->x0) * PW;
}

static double py(const struct panel *p, double v)
{
    return p->y + PH - (v - p->y0) / (p->y1 - p->y0) * PH;
}

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* a "nice" tick step (1, 2, 5 x 10^k) for about <n> ticks over <span> */
static double nice_step(double span, int n)
{
    double raw = span / n, mag, f;
    if (!(raw > 0))
        return 1;
    mag = pow(10, floor(log10(raw)));
    f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static void fmt_tick(char *buf, size_t len, double v)
{
    if (fabs(v) >= 1e6 || (fabs(v) < 1e-3 && v != 0))
        snprintf(buf, len, "%.3g", v);
    else
        snprintf(buf, len, "%.6g", nearbyint(v * 1e6) / 1e6);
}

static void axes(FILE *f, struct panel *p, const char *title, const char *xl,
                 const char *yl)
{
    char t[32];
    double st;

    fprintf(f, "<g class=\"panel\">\n");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"ttl\">", p->x, p->y - 14);
    esc(f, title);
    fprintf(f, "</text>\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n",
            p->x, p->y, PW, PH);
    st = nice_step(p->x1 - p->x0, 6);
    for (double v = ceil(p->x0 / st) * st; v <= p->x1 + st * 1e-9; v += st) {
        double x = px(p, v);
        fmt_tick(t, sizeof(t), v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%s</text>\n",
                x, p->y, x, p->y + PH, x, p->y + PH + 16, t);
    }
    st = nice_step(p->y1 - p->y0, 5);
    for (double v = ceil(p->y0 / st) * st; v <= p->y1 + st * 1e-9; v += st) {
        double y = py(p, v);
        fmt_tick(t, sizeof(t), v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>\n",
                p->x, y, p->x + PW, y, p->x - 6, y + 4, t);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"lbl\" text-anchor=\"middle\">",
            p->x + PW / 2.0, p->y + PH + 36);
    esc(f, xl);
    fprintf(f, "</text>\n<text transform=\"translate(%.1f,%.1f) rotate(-90)\" class=\"lbl\" text-anchor=\"middle\">",
            p->x - 48, p->y + PH / 2.0);
    esc(f, yl);
    fprintf(f, "</text>\n<clipPath id=\"c%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\"/></clipPath>\n",
            p->id, p->x, p->y, PW, PH);
}

static void note(FILE *f, const struct panel *p, int line, const char *fmt, double v)
{
    char buf[256];
    snprintf(buf, sizeof(buf), fmt, v);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">", p->x + 8, p->y + 18 + 16 * line);
    esc(f, buf);
    fprintf(f, "</text>\n");
}

static void legend(FILE *f, const struct panel *p, int nsets, int line)
{
    if (nsets < 2)
        return;
    for (int k = 0; k < nsets; k++)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"4\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">%s</text>\n",
                p->x + PW - 60, p->y + 12 + 16 * (line + k), color[k],
                p->x + PW - 42, p->y + 18 + 16 * (line + k), setname[k]);
}

/* the SLO limit on metric <m>, or NAN */
static double slo_limit(const struct tt_slo *slo, int m)
{
    if (slo == NULL)
        return NAN;
    for (unsigned i = 0; i < slo->n; i++)
        if (slo->c[i].metric == m)
            return slo->c[i].limit;
    return NAN;
}

static void cdf_panel(FILE *f, struct panel *p, struct tt_rset **sets, int nsets,
                      int m, const struct tt_slo *slo, const char *title)
{
    float *v[2] = { NULL, NULL };
    size_t n[2] = { 0, 0 };
    double hi = 0, mx = 0, lim = slo_limit(slo, m);
    char xl[96];
    int any = 0;

    for (int k = 0; k < nsets; k++) {
        v[k] = tt_rset_sorted(sets[k], m, &n[k]);
        if (v[k] == NULL || n[k] == 0)
            continue;
        any = 1;
        double q = tt_pct_linear_f(v[k], n[k], 99.5) * 1.1;
        if (q > hi)
            hi = q;
        if (v[k][n[k] - 1] > mx)
            mx = v[k][n[k] - 1];
    }
    if (isfinite(lim) && lim * 1.15 > hi)
        hi = lim * 1.15;
    if (hi > mx && mx > 0 && !(isfinite(lim) && lim * 1.15 > mx))
        hi = mx;
    if (!(hi > 0))
        hi = 1;
    p->x0 = 0;
    p->x1 = hi;
    p->y0 = 0;
    p->y1 = 1;
    snprintf(xl, sizeof(xl), "%s (%s)", tt_metric_tag[m], tt_metric_unit[m]);
    axes(f, p, title, xl, "fraction of requests");
    if (!any) {
        note(f, p, 0, "no values in the records%.0s", 0);
        fprintf(f, "</g>\n");
        return;
    }
    fprintf(f, "<g clip-path=\"url(#c%d)\">\n", p->id);
    for (int k = 0; k < nsets; k++) {
        if (v[k] == NULL || n[k] == 0)
            continue;
        size_t step = n[k] > CDF_POINTS ? n[k] / CDF_POINTS : 1;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color[k]);
        fprintf(f, "%.1f,%.1f ", px(p, v[k][0]), py(p, 0));
        for (size_t i = 0; i < n[k]; i += step) {
            /* a step: up at each value */
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", px(p, v[k][i]), py(p, (double)i / n[k]),
                    px(p, v[k][i]), py(p, (double)(i + 1) / n[k]));
        }
        fprintf(f, "%.1f,%.1f\"/>\n", px(p, v[k][n[k] - 1]), py(p, 1));
    }
    fprintf(f, "</g>\n");
    int line = 0;
    if (isfinite(lim)) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"slo\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"slot\">SLO %g %s</text>\n",
                px(p, lim), p->y, px(p, lim), p->y + PH, px(p, lim) + 4, p->y + PH - 8,
                lim, tt_metric_unit[m]);
        for (int k = 0; k < nsets; k++) {
            if (v[k] == NULL || n[k] == 0)
                continue;
            size_t ok = 0;
            int ge = 0;
            for (unsigned i = 0; i < slo->n; i++)
                if (slo->c[i].metric == m)
                    ge = slo->c[i].ge;
            for (size_t i = 0; i < n[k]; i++)
                if (ge ? v[k][i] >= lim : v[k][i] <= lim)
                    ok++;
            char fmt[96];
            snprintf(fmt, sizeof(fmt), "%s%%.1f%%%% of values meet the SLO",
                     nsets > 1 ? (k ? "B: " : "A: ") : "");
            note(f, p, line++, fmt, 100.0 * (double)ok / (double)n[k]);
        }
    }
    for (int k = 0; k < nsets; k++) {
        if (v[k] == NULL || n[k] == 0)
            continue;
        char fmt[96];
        snprintf(fmt, sizeof(fmt), "%sn = %%.0f", nsets > 1 ? (k ? "B: " : "A: ") : "");
        note(f, p, line++, fmt, (double)n[k]);
    }
    if (mx > hi)
        note(f, p, line++, "tail cut: max = %g", mx);
    legend(f, p, nsets, line);
    fprintf(f, "</g>\n");
    free(v[0]);
    free(v[1]);
}

static void scatter_panel(FILE *f, struct panel *p, struct tt_rset **sets, int nsets)
{
    double mx = 0, my = 0;
    size_t cnt[2] = { 0, 0 };

    for (int k = 0; k < nsets; k++)
        for (size_t i = 0; i < sets[k]->nrows; i++) {
            const struct tt_rrow *r = &sets[k]->rows[i];
            uint16_t need = (uint16_t)((1u << TT_M_ISL) | (1u << TT_M_OSL));
            if ((r->flags & TT_RROW_ERROR) || (r->present & need) != need)
                continue;
            cnt[k]++;
            if (r->v[TT_M_ISL] > mx)
                mx = r->v[TT_M_ISL];
            if (r->v[TT_M_OSL] > my)
                my = r->v[TT_M_OSL];
        }
    p->x0 = 0;
    p->x1 = mx > 0 ? mx * 1.05 : 1;
    p->y0 = 0;
    p->y1 = my > 0 ? my * 1.05 : 1;
    axes(f, p, "Workload map: input vs output length", "input_sequence_length (tokens)",
         "output_sequence_length (tokens)");
    if (cnt[0] + cnt[1] == 0) {
        note(f, p, 0, "no records with both input and output lengths%.0s", 0);
        fprintf(f, "</g>\n");
        return;
    }
    fprintf(f, "<g clip-path=\"url(#c%d)\">\n", p->id);
    for (int k = 0; k < nsets; k++) {
        size_t step = cnt[k] > SCATTER_MAX ? cnt[k] / SCATTER_MAX : 1, seen = 0;
        fprintf(f, "<g fill=\"%s\" fill-opacity=\"0.45\">", color[k]);
        for (size_t i = 0; i < sets[k]->nrows; i++) {
            const struct tt_rrow *r = &sets[k]->rows[i];
            uint16_t need = (uint16_t)((1u << TT_M_ISL) | (1u << TT_M_OSL));
            if ((r->flags & TT_RROW_ERROR) || (r->present & need) != need)
                continue;
            if (seen++ % step)
                continue;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>",
                    px(p, r->v[TT_M_ISL]), py(p, r->v[TT_M_OSL]));
        }
        fprintf(f, "</g>\n");
    }
    fprintf(f, "</g>\n");
    int line = 0;
    for (int k = 0; k < nsets; k++) {
        char fmt[96];
        snprintf(fmt, sizeof(fmt), "%s%%.0f requests%s", nsets > 1 ? (k ? "B: " : "A: ") : "",
                 cnt[k] > SCATTER_MAX ? " (every n-th drawn)" : "");
        note(f, p, line++, fmt, (double)cnt[k]);
    }
    legend(f, p, nsets, line);
    fprintf(f, "</g>\n");
}

/*
 * Attainment over time: the slices of metrics/report/report_slice.c, the same
 * the report's over-time table prints: --slice-duration when given
 * (clock-aligned), else about 25 requests per slice (5 to TIME_BINS)
 * from the first request.
 */
static void attain_panel(FILE *f, struct panel *p, struct tt_rset **sets, int nsets,
                         int64_t slice_ns)
{
    double span = 0;
    int judged = 0;
    int64_t t0 = INT64_MAX;

    for (int k = 0; k < nsets; k++) {
        double d = tt_rset_duration_s(sets[k]);
        if (d > span)
            span = d;
        if (sets[k]->judged > 0)
            judged = 1;
        if (sets[k]->first_start_ns < t0)
            t0 = sets[k]->first_start_ns;
    }
    p->x0 = 0;
    p->x1 = span > 0 ? span : 1;
    p->y0 = 0;
    p->y1 = 1.05;
    axes(f, p, "SLO attainment over time (bars: requests per slice)",
         "seconds since the first request", "good / all requests");
    if (!judged) {
        note(f, p, 0, "no SLO verdicts: pass --goodput%.0s", 0);
        fprintf(f, "</g>\n");
        return;
    }
    int64_t width = slice_ns, origin = 0;
    if (width <= 0) {
        uint64_t most = 0;
        for (int k = 0; k < nsets; k++)
            if (sets[k]->nrows > most)
                most = sets[k]->nrows;
        int nb = (int)(most / 25);
        nb = nb < 5 ? 5 : nb > TIME_BINS ? TIME_BINS : nb;
        width = (int64_t)ceil(p->x1 * 1e9 / nb);
        width = width > 0 ? width : 1;
        origin = t0;
    }
    for (int k = 0; k < nsets; k++) {
        struct tt_rslices sl;
        char err[256];
        uint64_t mxc = 0;
        if (tt_rslices_build(sets[k], width, origin, &sl, err, sizeof(err)) < 0) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">", p->x + 8,
                    p->y + 34 + 16 * k);
            esc(f, err);
            fprintf(f, "</text>\n");
            continue;
        }
        for (size_t b = 0; b < sl.n; b++)
            if (sl.s[b].records > mxc)
                mxc = sl.s[b].records;
        /* request counts as faint bars in the lower third */
        for (size_t b = 0; b < sl.n && mxc; b++) {
            double xs = (double)(sl.s[b].start_ns - t0) / 1e9;
            double xe = (double)(sl.s[b].end_ns - t0) / 1e9;
            xs = xs < 0 ? 0 : xs;
            xe = xe > p->x1 ? p->x1 : xe;
            double hgt = (double)sl.s[b].records / (double)mxc * PH * 0.3;
            double bw = (px(p, xe) - px(p, xs)) / nsets;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.18\"/>",
                    px(p, xs) + k * bw, p->y + PH - hgt, bw > 0.2 ? bw : 0.2, hgt, color[k]);
        }
        fprintf(f, "\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color[k]);
        for (size_t b = 0; b < sl.n; b++)
            if (sl.s[b].records) {
                double xm = ((double)(sl.s[b].start_ns - t0) / 1e9 + (double)width / 2e9);
                xm = xm < 0 ? 0 : xm > p->x1 ? p->x1 : xm;
                fprintf(f, "%.1f,%.1f ", px(p, xm),
                        py(p, (double)sl.s[b].good / (double)sl.s[b].records));
            }
        fprintf(f, "\"/>\n");
        tt_rslices_free(&sl);
    }
    note(f, p, 0, "slice width %.6g s; errors and requests without a verdict count as not good",
         (double)width / 1e9);
    legend(f, p, nsets, 1);
    fprintf(f, "</g>\n");
}

static void write_svg(FILE *f, struct tt_rset **sets, int nsets, const struct tt_slo *slo,
                      int64_t slice_ns, const char *title)
{
    struct panel p[6];
    static const double colx[2] = { 80, 655 };
    static const double rowy[3] = { 110, 600, 1090 };

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            W, H, W, H);
    fprintf(f, "<style>"
               ".frame{fill:#fff;stroke:#444;stroke-width:1}"
               ".grid{stroke:#e3e3e3;stroke-width:1}"
               ".tick{font-size:11px;fill:#333}"
               ".lbl{font-size:13px;fill:#222}"
               ".ttl{font-size:15px;font-weight:bold;fill:#111}"
               ".note{font-size:12px;fill:#333}"
               ".slo{stroke:#c00;stroke-width:1.5;stroke-dasharray:6 4}"
               ".slot{font-size:12px;fill:#c00}"
               "</style>\n");
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", W, H);
    fprintf(f, "<text x=\"30\" y=\"40\" font-size=\"22\" font-weight=\"bold\">");
    esc(f, title);
    fprintf(f, "</text>\n<text x=\"30\" y=\"64\" font-size=\"13\" fill=\"#444\">");
    for (int k = 0; k < nsets; k++) {
        char buf[160];
        snprintf(buf, sizeof(buf), "%s%s: %llu records (%llu ok, %llu errors)", k ? "; " : "",
                 nsets > 1 ? setname[k] : "records", (unsigned long long)sets[k]->records,
                 (unsigned long long)sets[k]->valid, (unsigned long long)sets[k]->errors);
        esc(f, buf);
    }
    if (slo != NULL && slo->n > 0) {
        char spec[512];
        tt_slo_format(slo, spec, sizeof(spec));
        fputs("; SLO: ", f);
        esc(f, spec);
    }
    fprintf(f, "</text>\n");

    for (int i = 0; i < 6; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        p[i].x = colx[i % 2];
        p[i].y = rowy[i / 2];
        p[i].id = i;
    }
    cdf_panel(f, &p[0], sets, nsets, TT_M_TTFT, slo, "CDF: time to first token");
    cdf_panel(f, &p[1], sets, nsets, TT_M_TTFO, slo, "CDF: time to first output token");
    cdf_panel(f, &p[2], sets, nsets, TT_M_ITL, slo, "CDF: inter token latency");
    cdf_panel(f, &p[3], sets, nsets, TT_M_REQUEST_LATENCY, slo, "CDF: request latency");
    scatter_panel(f, &p[4], sets, nsets);
    attain_panel(f, &p[5], sets, nsets, slice_ns);
    fprintf(f, "</svg>\n");
}

int tt_report_plot(const char *path, struct tt_rset *a, struct tt_rset *b,
                   const struct tt_slo *slo, int64_t slice_ns, const char *title,
                   char *err, size_t errlen)
{
    struct tt_rset *sets[2] = { a, b };
    size_t pl = strlen(path);
    int svg = pl >= 4 && strcmp(path + pl - 4, ".svg") == 0;
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (svg) {
        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    } else {
        fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<title>");
        esc(f, title);
        fprintf(f, "</title><style>body{margin:0;background:#fafafa}</style></head><body>\n");
    }
    write_svg(f, sets, b ? 2 : 1, slo, slice_ns, title);
    if (!svg)
        fprintf(f, "</body></html>\n");
    if (ferror(f) | (fclose(f) != 0)) {
        snprintf(err, errlen, "%s: write failed", path);
        return -1;
    }
    return 0;
}
