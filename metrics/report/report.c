/*
 * tokentap report: offline analysis of record files.
 *
 *   tokentap report A.jsonl [more.jsonl ...] [options]
 *
 * reads the records as a stream into a bounded record set
 * (metrics/report/report_set.c), then prints an AIPerf-style console table
 * (per-metric avg/min/max/p1..p99/std/count, then throughput, goodput and
 * the good request fraction with its Wilson interval, errors by type,
 * token count sources) and, on request, writes AIPerf's
 * profile_export_aiperf.{json,csv} (--export), a mooncake_trace file
 * (--trace), plots (--plot, metrics/report/report_plot.c) and a side-by-side,
 * paired-when-possible comparison with a second set (--compare).
 * The statistics and their conventions are in metrics/stats.h;
 * docs/report.md is the user's guide.
 */
#include "metrics/report/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metrics/metric.h"
#include "metrics/report/report_plot.h"
#include "metrics/report/report_set.h"
#include "metrics/report/report_slice.h"
#include "metrics/stats.h"
#include "metrics/slo.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

/* the profile_export_aiperf.json schema written (AIPerf docs/reference/json-export-schema.md) */
#define AIPERF_SCHEMA "1.5"

#define ICL TT_M_ICL                    /* metric index of inter_chunk_latency */
#define NMETRIC TT_M_NAMED

/* names (AIPerf's display names as headers), short labels and the console
 * and export order: the metric rows of metrics/metric.h */
#define header_of tt_metric_header
#define abbr_of   tt_metric_abbr
#define order     tt_metric_order
#define tag_of(m)  tt_metric_tag[m]
#define unit_of(m) tt_metric_unit[m]

static const char *const pct_names[TT_RPT_NPCT] = {
    "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
};

/* ---- output: format and width ---- */

/*
 * How the console report is written (--format; the terminal's width).
 * Set once by tt_report_main before anything is printed.
 *   table     box tables fitted to <width> columns, prose folded to it
 *   markdown  GitHub tables and the prose as is (for pull requests)
 *   csv       the tables only, one block each, a blank line between;
 *             numbers without digit grouping; prose to standard error
 *   json      {"tables":[{"title","columns","rows"}],"notes":[...]}:
 *             cells that are plain numbers as numbers
 * csv and json are for scripts: a numeric cell holds a number or nothing
 * (json null): no "N/A", no "%", no markers.  The markers of the human
 * formats (a percentile on too few samples '*', one from a histogram '~')
 * become two more columns of the tables that carry them, "few_samples"
 * and "approximate", listing the flagged columns of the row (json: an
 * array of column names; csv: the names joined by ';').
 */
enum rfmt { F_TABLE, F_CSV, F_JSON, F_MARKDOWN };
static const char *const fmt_names[] = { "table", "csv", "json", "markdown" };

static struct {
    enum rfmt fmt;
    int       width;            /* columns, >= 40 */
    cJSON    *tables;           /* json: the tables so far */
} outx = { F_TABLE, 80, NULL };

/* csv or json: numbers only in numeric cells, markers in their own columns */
static int machine(void)
{
    return outx.fmt == F_CSV || outx.fmt == F_JSON;
}

/* a value that is not there: "N/A" for people, nothing for scripts */
static const char *na(void)
{
    return machine() ? "" : "N/A";
}

/* ioctl(TIOCGWINSZ) on stdout, else $COLUMNS, else 80 */
static int term_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (c != NULL && *c) {
        char *end;
        long v = strtol(c, &end, 10);
        if (*end == '\0' && v > 0 && v < 100000)
            return (int)v;
    }
    return 80;
}

/* ---- options ---- */

struct ropts {
    const char **files;
    int          nfiles;
    const char **cmp;
    int          ncmp;
    const char  *goodput, *export_dir, *trace, *plot;
    struct tt_rfilter f;
    size_t       max_exact;
    int          fmt;            /* enum rfmt */
    int64_t      slice_ns;       /* --slice-duration, 0 = none */
    const char  *slice_arg;
    /* --compare-upstreams A,B: both sets from the same files, by upstream */
    char         cmp_up[2][128];
    struct tt_rfilter fb;        /* set B's filter then */
};

int tt_report_usage(FILE *out)
{
    fprintf(out,
"usage: tokentap report RECORDS.jsonl [MORE.jsonl ...] [options]\n"
"\n"
"Offline analysis of tokentap records (schema tokentap.record/1; AIPerf\n"
"profile_export.jsonl lines are read too).  \"-\" reads standard input.\n"
"Prints per-metric statistics (avg, min, max, p1..p99, std, count), request\n"
"and output token throughput, goodput and the good request fraction (95%%\n"
"Wilson interval) over the records' span (first request_start_ns to last\n"
"request_end_ns), errors by type and the token count sources.\n"
"\n"
"Options:\n"
"  --goodput \"SPEC\"   re-judge every record against SPEC (AIPerf syntax,\n"
"                     e.g. \"time_to_first_token:500 inter_token_latency:50\";\n"
"                     aliases ttft ttfo itl tpot e2el).  Without it, each\n"
"                     record's metadata.slo.good verdict is used.\n"
"  --model M          only records whose metadata.model is M\n"
"  --api A            only records whose metadata.api is A (openai.chat, ...)\n"
"  --upstream U       only records whose metadata.upstream is U\n"
"  --status N         only records whose HTTP status is N\n"
"  --since T          only requests started at or after T\n"
"  --until T          only requests started at or before T\n"
"                     (T: unix seconds, e.g. 1767225600.5, or RFC 3339,\n"
"                     e.g. 2026-01-01T00:00:00Z)\n"
"  --export DIR       write DIR/profile_export_aiperf.json and\n"
"                     DIR/profile_export_aiperf.csv (AIPerf's layout)\n"
"  --compare-upstreams A,B\n"
"                     compare two upstreams of the same records (a shadow\n"
"                     and its primary: primary,candidate) as --compare\n"
"                     does, pairing the legs of each request by x_request_id;\n"
"                     a name no record carries is refused (exit 2) with\n"
"                     the upstreams the files have (so is --upstream's)\n"
"  --compare B.jsonl  compare with a second record set (repeatable: more\n"
"                     files of set B): both side by side with absolute and\n"
"                     relative differences; requests present in both (same\n"
"                     x_request_id) are also compared pair by pair (median\n"
"                     of per-request differences, 95%% order-statistic\n"
"                     interval)\n"
"  --trace OUT.jsonl  write the arrival pattern and request shapes as an\n"
"                     AIPerf mooncake_trace file (timestamp ms from the\n"
"                     first request, input_length, output_length)\n"
"  --plot OUT.html    self-contained plots (OUT.svg: bare SVG): CDFs of\n"
"                     TTFT, TTFO, ITL and request latency with SLO lines,\n"
"                     input vs output length, attainment over time\n"

"  --slice-duration D per-slice statistics over time: D is a duration\n"
"                     (30s, 5m, 1h, 1d; a bare number is seconds); slices\n"
"                     are aligned to the clock (UTC); with --export also\n"
"                     DIR/profile_export_aiperf_timeslices.{csv,json}; the\n"
"                     plots' attainment panel uses the same slices\n"
"  --format F         table (default: box tables fitted to the terminal\n"
"                     width: ioctl, else $COLUMNS, else 80), markdown, csv\n"
"                     (tables only; notes to stderr) or json; csv and json\n"
"                     cells are numbers (or empty/null), the * and ~\n"
"                     markers go to the columns few_samples, approximate\n"
"  --max-exact N      keep exact values for up to N records per set\n"
"                     (default %u, 64 bytes each; inter-chunk gaps up to\n"
"                     8*N, 4 bytes each); beyond, percentiles come from\n"
"                     log-linear histograms (<= 0.78%% error, marked ~)\n"
"  -h, --help         this text\n"
"\n"
"Percentiles interpolate linearly between closest ranks (numpy's default,\n"
"as AIPerf); std is the population standard deviation (numpy np.std, as\n"
"AIPerf).  A percentile marked * rests on too few samples: pXX needs at\n"
"least 100/min(XX, 100-XX) of them (p99: 100, p95: 20, p90: 10, p50: 2).\n"
"Malformed lines are counted and reported, never fatal.\n"
"Exit status: 0 ok, 1 no records (an empty file, or all filtered out), an\n"
"output could not be written or an input failed mid-read, 2 bad arguments\n"
"(an upstream name no record carries) or unreadable input.\n",
            TT_RPT_DEFAULT_MAX_EXACT);
    return ferror(out) ? -1 : 0;
}

static int bad(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "tokentap report: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see tokentap report --help)\n");
    return 2;
}

static int push(const char ***v, int *n, const char *s)
{
    const char **p = realloc(*v, (size_t)(*n + 1) * sizeof(*p));
    if (p == NULL)
        return -1;
    p[(*n)++] = s;
    *v = p;
    return 0;
}

/* returns 0 ok, 1 help printed, 2 bad arguments (message printed) */
static int parse_args(int argc, char **argv, struct ropts *o)
{
    memset(o, 0, sizeof(*o));
    o->f.status = -1;
    o->f.since_ns = INT64_MIN;
    o->f.until_ns = INT64_MAX;
    o->max_exact = TT_RPT_DEFAULT_MAX_EXACT;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[32];

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            tt_report_usage(stdout);
            return 1;
        }
        if (strcmp(a, "-") == 0 || a[0] != '-') {
            if (push(&o->files, &o->nfiles, a) < 0)
                return bad("%s%s", "out of memory", "");
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            return bad("unknown option '%s'%s", a, "");
        /* --name=value or --name value */
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof(name))
            return bad("unknown option '%s'%s", a, "");
        memcpy(name, a, nl);
        name[nl] = '\0';

        static const char *const known[] = {
            "--goodput", "--model", "--api", "--upstream", "--status",
            "--since", "--until", "--export", "--compare", "--trace",
            "--plot", "--max-exact", "--format", "--slice-duration",
            "--compare-upstreams",
        };
        int k = -1;
        for (size_t j = 0; j < sizeof(known) / sizeof(known[0]); j++)
            if (strcmp(name, known[j]) == 0)
                k = (int)j;
        if (k < 0)
            return bad("unknown option '%s'%s", name, "");
        if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return bad("%s needs a value%s", name, "");
            val = argv[++i];
        }
        if (val[0] == '\0' && k != 0)
            return bad("%s: empty value%s", name, "");

        switch (k) {
        case 0: o->goodput = val; break;
        case 1: o->f.model = val; break;
        case 2: o->f.api = val; break;
        case 3: o->f.upstream = val; break;
        case 4: {
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (errno || *end || v < 100 || v > 599)
                return bad("--status: '%s' is not an HTTP status (100..599)%s", val, "");
            o->f.status = (int)v;
            break;
        }
        case 5:
        case 6: {
            int64_t ns;
            if (tt_rpt_parse_time(val, &ns) < 0)
                return bad("%s: '%s' is neither unix seconds nor an RFC 3339 time",
                           name, val);
            if (k == 5)
                o->f.since_ns = ns;
            else
                o->f.until_ns = ns;
            break;
        }
        case 7: o->export_dir = val; break;
        case 8:
            if (push(&o->cmp, &o->ncmp, val) < 0)
                return bad("%s%s", "out of memory", "");
            break;
        case 9: o->trace = val; break;
        case 10: o->plot = val; break;
        case 11: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (errno || *end || v < 1 || v > (1ull << 32) || val[0] == '-')
                return bad("--max-exact: '%s' is not a count (1..4294967296)%s", val, "");
            o->max_exact = (size_t)v;
            break;
        }
        case 12: {
            int f = -1;
            for (int j = 0; j < 4; j++)
                if (strcmp(val, fmt_names[j]) == 0)
                    f = j;
            if (f < 0)
                return bad("--format: '%s' is not one of table, csv, json, markdown%s", val, "");
            o->fmt = f;
            break;
        }
        case 14: {
            const char *comma = strchr(val, ',');
            size_t la = comma ? (size_t)(comma - val) : 0;
            if (comma == NULL || la == 0 || comma[1] == '\0' || strchr(comma + 1, ',') ||
                la >= sizeof(o->cmp_up[0]) || strlen(comma + 1) >= sizeof(o->cmp_up[1]))
                return bad("--compare-upstreams: expected A,B (two upstream names, "
                           "e.g. primary,candidate), got '%s'%s", val, "");
            memcpy(o->cmp_up[0], val, la);
            o->cmp_up[0][la] = '\0';
            strcpy(o->cmp_up[1], comma + 1);
            break;
        }
        case 13:
            if (tt_rpt_parse_duration(val, &o->slice_ns) < 0)
                return bad("--slice-duration: '%s' is not a duration (e.g. 30s, 5m, 1h, 300; 1 ms to 366 d)%s",
                           val, "");
            o->slice_arg = val;
            break;
        }
    }
    if (o->nfiles == 0)
        return bad("%s%s", "no record files given", "");
    if (o->f.since_ns > o->f.until_ns)
        return bad("%s%s", "--since is after --until", "");
    if (o->cmp_up[0][0]) {
        if (o->ncmp)
            return bad("%s%s", "--compare-upstreams and --compare: one comparison at a time", "");
        if (o->f.upstream)
            return bad("%s%s", "--compare-upstreams and --upstream: the pair names the upstreams", "");
        for (int i = 0; i < o->nfiles; i++)
            if (strcmp(o->files[i], "-") == 0)
                return bad("%s%s", "--compare-upstreams reads its files twice: give files, not -", "");
        /* A and B: the same records, one upstream each (shadow legs and
         * their primary share x_request_id, so they pair) */
        o->fb = o->f;
        o->f.upstream = o->cmp_up[0];
        o->fb.upstream = o->cmp_up[1];
    }
    return 0;
}

/* ---- number formatting ---- */

/* "1,234.56" (decimals 2) or "1,234" (decimals 0); "N/A" for NaN;
 * csv and json: no digit grouping */
static void fmt_num(char *buf, size_t len, double v, int decimals)
{
    char tmp[64], *p;
    int neg, n;

    if (!isfinite(v)) {
        snprintf(buf, len, "%s", na());
        return;
    }
    neg = v < 0;
    snprintf(tmp, sizeof(tmp), "%.*f", decimals, fabs(v));
    p = strchr(tmp, '.');
    n = p ? (int)(p - tmp) : (int)strlen(tmp);
    int group = outx.fmt == F_TABLE || outx.fmt == F_MARKDOWN;
    /* the digits before the point, grouped by three */
    char out[96];
    int o = 0;
    if (neg && strspn(tmp, "0.") != strlen(tmp))
        out[o++] = '-';
    for (int i = 0; i < n; i++) {
        out[o++] = tmp[i];
        if (group && (n - i - 1) % 3 == 0 && i != n - 1)
            out[o++] = ',';
    }
    out[o] = '\0';
    snprintf(buf, len, "%s%s", out, p ? p : "");
}

static void fmt_count(char *buf, size_t len, uint64_t v)
{
    fmt_num(buf, len, (double)v, 0);
}

/* ---- tables ---- */

#define TMAXC 16
#define TCELL 200

/* a cell's markers (csv and json: columns of their own, see outx) */
enum { MARK_LOW = 1, MARK_APPROX = 2 };
static const char *const mark_cols[2] = { "few_samples", "approximate" };

struct table {
    const char *title;
    int         ncols, nrows, caprows;
    int         left[TMAXC];     /* left-aligned columns */
    /*
     * Fitting a narrow terminal: columns of prio 0 are keys, repeated in
     * every part; the others fill the first part in ascending prio until
     * one does not fit, the rest go to further parts (same rule), each part keeping
     * the columns' own order.  A shrink column is cut (..) to fit instead.
     */
    int         prio[TMAXC];
    int         shrink[TMAXC];
    char        hdr[TMAXC][48];
    char        (*cell)[TMAXC][TCELL];
    unsigned char (*mark)[TMAXC];   /* csv, json: MARK_* of a cell */
    int         marked;          /* csv, json: add the marker columns */
    int        *rule_after;
    const char **abbr;           /* per row: a shorter column-0 text, or NULL */
};

static struct table *table_new(const char *title, int ncols)
{
    struct table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->caprows = 16;
    t->cell = calloc((size_t)t->caprows, sizeof(*t->cell));
    t->mark = calloc((size_t)t->caprows, sizeof(*t->mark));
    t->rule_after = calloc((size_t)t->caprows, sizeof(*t->rule_after));
    t->abbr = calloc((size_t)t->caprows, sizeof(*t->abbr));
    if (t->cell == NULL || t->mark == NULL || t->rule_after == NULL || t->abbr == NULL) {
        free(t->cell);
        free(t->mark);
        free(t->rule_after);
        free(t->abbr);
        free(t);
        return NULL;
    }
    t->title = title;
    t->ncols = ncols;
    t->left[0] = 1;
    for (int c = 0; c < TMAXC; c++)
        t->prio[c] = c;
    return t;
}

static void table_free(struct table *t)
{
    if (t) {
        free(t->cell);
        free(t->mark);
        free(t->rule_after);
        free(t->abbr);
        free(t);
    }
}

/* a new (empty) row; when memory runs out the last row is reused */
static int table_row(struct table *t)
{
    if (t->nrows == t->caprows) {
        int cap = t->caprows * 2;
        void *c = realloc(t->cell, (size_t)cap * sizeof(*t->cell));
        if (c != NULL)
            t->cell = c;
        void *mk = c ? realloc(t->mark, (size_t)cap * sizeof(*t->mark)) : NULL;
        if (mk != NULL)
            t->mark = mk;
        void *r = mk ? realloc(t->rule_after, (size_t)cap * sizeof(*t->rule_after)) : NULL;
        if (r != NULL)
            t->rule_after = r;
        void *a = r ? realloc(t->abbr, (size_t)cap * sizeof(*t->abbr)) : NULL;
        if (a == NULL)
            return t->nrows - 1;
        t->abbr = a;
        t->caprows = cap;
    }
    int r = t->nrows++;
    memset(t->cell[r], 0, sizeof(t->cell[r]));
    memset(t->mark[r], 0, sizeof(t->mark[r]));
    t->rule_after[r] = 0;
    t->abbr[r] = NULL;
    return r;
}

static void put_rep(FILE *out, const char *s, int n)
{
    for (int i = 0; i < n; i++)
        fputs(s, out);
}

/* display columns of UTF-8 text (one per code point) */
static int dwidth(const char *s)
{
    int n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    return n;
}

/* <s> cut to <w> display columns, ".." marking the cut */
static void cut_to(char *dst, size_t cap, const char *s, int w)
{
    if (dwidth(s) <= w) {
        snprintf(dst, cap, "%s", s);
        return;
    }
    int keep = w > 2 ? w - 2 : 0, cols = 0;
    size_t o = 0;
    for (const char *p = s; *p && o + 4 < cap; p++) {
        if (((unsigned char)*p & 0xC0) != 0x80 && cols++ == keep)
            break;
        dst[o++] = *p;
    }
    snprintf(dst + o, cap - o, "%.*s", w < 2 ? w : 2, "..");
}

static const char *cell_text(const struct table *t, int r, int c, int useabbr)
{
    if (c == 0 && useabbr && t->abbr[r] != NULL)
        return t->abbr[r];
    return t->cell[r][c];
}

static void table_rule(FILE *out, const int *cols, int n, const int *w,
                       const char *l, const char *m, const char *r, const char *h)
{
    fputs(l, out);
    for (int i = 0; i < n; i++) {
        put_rep(out, h, w[cols[i]] + 2);
        fputs(i == n - 1 ? r : m, out);
    }
    fputc('\n', out);
}

/* one box table (rich's HEAVY_HEAD, as AIPerf's console) of columns <cols> */
static void box_part(FILE *out, const struct table *t, const int *cols, int n,
                     const int *w, int useabbr, const char *title)
{
    char buf[TCELL + 8];
    int total = 1;
    for (int i = 0; i < n; i++)
        total += w[cols[i]] + 3;
    if (title) {
        int tw = dwidth(title);
        if (tw > total) {
            /* wider than this part: whole, from the left (the prose
             * folding at the terminal's width wraps it if need be) */
            fprintf(out, "%s\n", title);
        } else {
            fprintf(out, "%*s%s\n", (total - tw) / 2, "", title);
        }
    }
    table_rule(out, cols, n, w, "\u250f", "\u2533", "\u2513", "\u2501");
    fputs("\u2503", out);
    for (int i = 0; i < n; i++) {
        int c = cols[i];
        cut_to(buf, sizeof(buf), t->hdr[c], w[c]);
        int pad = w[c] - dwidth(buf);
        if (t->left[c])
            fprintf(out, " %s%*s \u2503", buf, pad, "");
        else
            fprintf(out, " %*s%s \u2503", pad, "", buf);
    }
    fputc('\n', out);
    table_rule(out, cols, n, w, "\u2521", "\u2547", "\u2529", "\u2501");
    for (int r = 0; r < t->nrows; r++) {
        fputs("\u2502", out);
        for (int i = 0; i < n; i++) {
            int c = cols[i];
            cut_to(buf, sizeof(buf), cell_text(t, r, c, useabbr), w[c]);
            int pad = w[c] - dwidth(buf);
            if (t->left[c])
                fprintf(out, " %s%*s \u2502", buf, pad, "");
            else
                fprintf(out, " %*s%s \u2502", pad, "", buf);
        }
        fputc('\n', out);
        if (t->rule_after[r] && r != t->nrows - 1)
            table_rule(out, cols, n, w, "\u251c", "\u253c", "\u2524", "\u2500");
    }
    table_rule(out, cols, n, w, "\u2514", "\u2534", "\u2518", "\u2500");
}

static void col_widths(const struct table *t, int useabbr, int *w)
{
    for (int c = 0; c < t->ncols; c++) {
        w[c] = dwidth(t->hdr[c]);
        for (int r = 0; r < t->nrows; r++) {
            int x = dwidth(cell_text(t, r, c, useabbr));
            if (x > w[c])
                w[c] = x;
        }
    }
}

/* the box table fitted to outx.width: split into parts, cut shrink columns */
static void table_box(FILE *out, const struct table *t)
{
    int w[TMAXC], keys[TMAXC], nk = 0, rest[TMAXC], nr = 0, keyw = 1, full = 1;
    int useabbr = 0;

    col_widths(t, 0, w);
    for (int c = 0; c < t->ncols; c++)
        full += w[c] + 3;
    if (full > outx.width) {
        useabbr = 1;            /* shorter labels before anything else */
        col_widths(t, 1, w);
    }
    for (int c = 0; c < t->ncols; c++) {
        if (t->prio[c] == 0) {
            keys[nk++] = c;
            keyw += w[c] + 3;
        } else {
            rest[nr++] = c;
        }
    }
    /* keys alone too wide: cut the widest left-aligned key */
    while (keyw > outx.width - 12) {
        int wi = -1;
        for (int i = 0; i < nk; i++)
            if (t->left[keys[i]] && w[keys[i]] > 8 && (wi < 0 || w[keys[i]] > w[keys[wi]]))
                wi = i;
        if (wi < 0)
            break;
        w[keys[wi]]--;
        keyw--;
    }
    /* the others by ascending prio */
    for (int i = 1; i < nr; i++)
        for (int j = i; j > 0 && t->prio[rest[j]] < t->prio[rest[j - 1]]; j--) {
            int x = rest[j];
            rest[j] = rest[j - 1];
            rest[j - 1] = x;
        }
    int placed[TMAXC] = { 0 }, left = nr, part = 0;
    while (left > 0 || part == 0) {
        int sel[TMAXC] = { 0 }, used = keyw, any = 0;
        for (int i = 0; i < nr; i++) {
            int c = rest[i];
            if (placed[c])
                continue;
            if (used + w[c] + 3 <= outx.width) {
                sel[c] = 1;
                used += w[c] + 3;
                any = 1;
            } else if ((t->shrink[c] || t->left[c]) && used + 3 + 8 <= outx.width) {
                w[c] = outx.width - used - 3;
                sel[c] = 1;
                used = outx.width;
                any = 1;
            } else {
                break;          /* keep the stated order: the rest go on */
            }
        }
        if (!any && left > 0) {          /* not even one fits: take it, cut */
            for (int i = 0; i < nr && !any; i++)
                if (!placed[rest[i]]) {
                    int c = rest[i];
                    sel[c] = 1;
                    if (used + w[c] + 3 > outx.width)
                        w[c] = outx.width - used - 3 > 1 ? outx.width - used - 3 : 1;
                    any = 1;
                }
        }
        int cols[TMAXC], n = 0;
        for (int c = 0; c < t->ncols; c++)
            if (t->prio[c] == 0 || sel[c]) {
                cols[n++] = c;
                if (sel[c]) {
                    placed[c] = 1;
                    left--;
                }
            }
        char title[160];
        const char *tt = t->title;
        if (part > 0 || left > 0) {
            snprintf(title, sizeof(title), "%s%s(part %d)", t->title ? t->title : "",
                     t->title ? " " : "", part + 1);
            tt = title;
        }
        box_part(out, t, cols, n, w, useabbr, tt);
        part++;
    }
}

static void md_cell(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void table_markdown(FILE *out, const struct table *t)
{
    if (t->title)
        fprintf(out, "\n**%s**\n\n", t->title);
    else
        fputc('\n', out);
    for (int pass = 0; pass < 2; pass++) {
        fputc('|', out);
        for (int c = 0; c < t->ncols; c++) {
            fputc(' ', out);
            if (pass == 0)
                md_cell(out, t->hdr[c]);
            else
                fputs(t->left[c] ? ":---" : "---:", out);
            fputs(" |", out);
        }
        fputc('\n', out);
    }
    for (int r = 0; r < t->nrows; r++) {
        fputc('|', out);
        for (int c = 0; c < t->ncols; c++) {
            fputc(' ', out);
            md_cell(out, t->cell[r][c]);
            fputs(" |", out);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
}

static void csv_field(FILE *out, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static int tables_written;

/* the headers of row <r>'s cells marked <bit>, joined by <sep> */
static void mark_list(char *buf, size_t len, const struct table *t, int r, int bit,
                      const char *sep)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int c = 0; c < t->ncols && o < len; c++)
        if (t->mark[r][c] & bit)
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? sep : "", t->hdr[c]);
}

static void table_csv(const struct table *t)
{
    FILE *out = stdout;
    char list[TMAXC * 50];
    if (tables_written++)
        fputc('\n', out);
    for (int r = -1; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            if (c)
                fputc(',', out);
            csv_field(out, r < 0 ? t->hdr[c] : t->cell[r][c]);
        }
        for (int k = 0; t->marked && k < 2; k++) {
            fputc(',', out);
            if (r < 0)
                fputs(mark_cols[k], out);
            else {
                mark_list(list, sizeof(list), t, r, 1 << k, ";");
                csv_field(out, list);
            }
        }
        fputc('\n', out);
    }
}

/* a cell as a JSON number when it is exactly one, null when empty, else
 * as a string */
static cJSON *json_cell(const char *s)
{
    char *end;
    if (*s == '\0')
        return cJSON_CreateNull();
    if (*s && strspn(s, "0123456789+-.eE") == strlen(s)) {
        double v = strtod(s, &end);
        if (*end == '\0' && isfinite(v))
            return cJSON_CreateNumber(v);
    }
    return cJSON_CreateString(s);
}

static void table_json(const struct table *t)
{
    if (outx.tables == NULL)
        outx.tables = cJSON_CreateArray();
    cJSON *o = cJSON_CreateObject(), *cols = cJSON_CreateArray(), *rows = cJSON_CreateArray();
    if (t->title)
        cJSON_AddStringToObject(o, "title", t->title);
    else
        cJSON_AddNullToObject(o, "title");
    for (int c = 0; c < t->ncols; c++)
        cJSON_AddItemToArray(cols, cJSON_CreateString(t->hdr[c]));
    for (int k = 0; t->marked && k < 2; k++)
        cJSON_AddItemToArray(cols, cJSON_CreateString(mark_cols[k]));
    for (int r = 0; r < t->nrows; r++) {
        cJSON *row = cJSON_CreateArray();
        for (int c = 0; c < t->ncols; c++)
            cJSON_AddItemToArray(row, json_cell(t->cell[r][c]));
        for (int k = 0; t->marked && k < 2; k++) {
            cJSON *l = cJSON_CreateArray();
            for (int c = 0; c < t->ncols; c++)
                if (t->mark[r][c] & (1 << k))
                    cJSON_AddItemToArray(l, cJSON_CreateString(t->hdr[c]));
            cJSON_AddItemToArray(row, l);
        }
        cJSON_AddItemToArray(rows, row);
    }
    cJSON_AddItemToObject(o, "columns", cols);
    cJSON_AddItemToObject(o, "rows", rows);
    cJSON_AddItemToArray(outx.tables, o);
}

static void table_print(FILE *out, const struct table *t)
{
    switch (outx.fmt) {
    case F_TABLE:    table_box(out, t); break;
    case F_MARKDOWN: table_markdown(out, t); break;
    case F_CSV:      table_csv(t); break;
    case F_JSON:     table_json(t); break;
    }
}

/*
 * The prose lines of <text> folded to <width> at spaces (a cut word
 * where there is none), continuation lines indented by two; box-table
 * lines are already fitted and pass unchanged.
 */
static void fold_out(FILE *dst, const char *text, size_t len, int width)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        int indent = 0;
        if (p == le)
            fputc('\n', dst);         /* an empty line */
        while (p < le) {
            /* how many bytes fit in width - indent columns */
            const char *q = p, *brk = NULL;
            int cols = indent;
            while (q < le && cols < width) {
                if (*q == ' ')
                    brk = q;
                if (((unsigned char)*q & 0xC0) != 0x80)
                    cols++;
                q++;
                while (q < le && ((unsigned char)*q & 0xC0) == 0x80)
                    q++;
            }
            if (q >= le) {
                fprintf(dst, "%*s%.*s\n", indent, "", (int)(le - p), p);
                p = le;
                break;
            }
            if (*q == ' ')
                brk = q;
            const char *stop = brk && brk > p ? brk : q;
            fprintf(dst, "%*s%.*s\n", indent, "", (int)(stop - p), p);
            p = stop;
            while (p < le && *p == ' ')
                p++;
            indent = 2;
        }
        p = nl ? nl + 1 : end;
    }
}

/* ---- summaries ---- */

struct msum {
    struct tt_rsummary s[NMETRIC];
};

static void summarize(struct tt_rset *set, struct msum *ms)
{
    for (int m = 0; m < NMETRIC; m++)
        tt_rset_summary(set, m, &ms->s[m]);
}

struct scalars {
    uint64_t records, valid, errors, good, judged;
    double   dur, req_tput, out_tput, goodput, frac, lo, hi;
    int      have_good;
};

static void compute_scalars(const struct tt_rset *s, struct scalars *c)
{
    memset(c, 0, sizeof(*c));
    c->records = s->records;
    c->valid = s->valid;
    c->errors = s->errors;      /* cancellations included, as AIPerf counts them */
    c->good = s->good;
    c->judged = s->judged;
    c->dur = tt_rset_duration_s(s);
    c->req_tput = c->dur > 0 ? (double)s->valid / c->dur : NAN;
    c->out_tput = c->dur > 0 ? s->mo[TT_M_OSL].sum / c->dur : NAN;
    c->have_good = s->judged > 0;
    c->goodput = c->have_good && c->dur > 0 ? (double)s->good / c->dur : NAN;
    c->frac = c->have_good && s->records > 0
                  ? (double)s->good / (double)s->records : NAN;
    tt_wilson(s->good, s->records, TT_Z95, &c->lo, &c->hi);
}

/* name column "Time to First Token (ms)" as AIPerf's CSV and console */
static void metric_label(char *buf, size_t len, int m)
{
    snprintf(buf, len, "%s (%s)", header_of[m], unit_of(m));
}

/*
 * A percentile cell <r>,<c> of <t>: the value with its markers, '~' from
 * a histogram and '*' on too few samples (table, markdown), or the bare
 * number with the markers set apart (csv, json).
 */
static void pct_cell(struct table *t, int r, int c, double v, int approx, int low)
{
    char num[64];
    fmt_num(num, sizeof(num), v, 2);
    if (machine()) {
        snprintf(t->cell[r][c], TCELL, "%s", num);
        t->mark[r][c] = (unsigned char)((low ? MARK_LOW : 0) | (approx ? MARK_APPROX : 0));
        t->marked = 1;
    } else {
        snprintf(t->cell[r][c], TCELL, "%s%s%s", approx ? "~" : "", num, low ? "*" : "");
    }
}

static void stat_cells(struct table *t, int r, int c, const struct tt_rsummary *s)
{
    /* avg min max p1..p99 std count, markers on percentiles */
    char (*row)[TCELL] = t->cell[r];
    fmt_num(row[c++], TCELL, s->avg, 2);
    fmt_num(row[c++], TCELL, s->min, 2);
    fmt_num(row[c++], TCELL, s->max, 2);
    for (int i = 0; i < TT_RPT_NPCT; i++)
        pct_cell(t, r, c++, s->pct[i], !s->exact,
                 tt_pct_low_sample(s->count, tt_rpt_pcts[i]));
    fmt_num(row[c++], TCELL, s->std, 2);
    fmt_count(row[c++], TCELL, s->count);
}

/*
 * The statistic columns.  On a narrow terminal they stay in the first
 * part in this order, the rest moving to further parts: avg, count, p50,
 * p90, p99, max, min, p95, p75, p25, std, p10, p5, p1.
 */
static void stat_headers(struct table *t, int first)
{
    /* avg min max p1 p5 p10 p25 p50 p75 p90 p95 p99 std count */
    static const int prio[14] = { 1, 7, 6, 14, 13, 12, 10, 3, 9, 4, 8, 5, 11, 2 };
    for (int i = 0; i < 14; i++)
        t->prio[first + i] = first + prio[i];
    int c = first;
    snprintf(t->hdr[c++], 48, "avg");
    snprintf(t->hdr[c++], 48, "min");
    snprintf(t->hdr[c++], 48, "max");
    for (int i = 0; i < TT_RPT_NPCT; i++)
        snprintf(t->hdr[c++], 48, "%s", pct_names[i]);
    snprintf(t->hdr[c++], 48, "std");
    snprintf(t->hdr[c++], 48, "count");
}

/* ---- warnings ---- */

static int known_schema(const char *s)
{
    return strcmp(s, "tokentap.record/1") == 0 || strcmp(s, "(none)") == 0;
}

static void table_list(char *buf, size_t len, const struct tt_rtable *t)
{
    size_t o = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < t->n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s %llu", i ? ", " : "",
                              t->e[i].name, (unsigned long long)t->e[i].count);
    if (t->overflow && o < len)
        snprintf(buf + o, len - o, ", others %llu", (unsigned long long)t->overflow);
}

static int print_warnings(FILE *out, const struct tt_rset *s, const char *pfx,
                          int have_spec)
{
    char list[1024];
    int n = 0;

    if (s->malformed) {
        fprintf(out, "warning:%s %llu malformed line%s skipped (not JSON, no metadata object, or longer than %u MiB)\n",
                pfx, (unsigned long long)s->malformed, s->malformed == 1 ? "" : "s",
                TT_RPT_MAX_LINE >> 20);
        n++;
    }
    if (s->schemas.n > 1) {
        table_list(list, sizeof(list), &s->schemas);
        fprintf(out, "warning:%s records of %u schema versions are mixed: %s\n",
                pfx, s->schemas.n, list);
        n++;
    }
    for (unsigned i = 0; i < s->schemas.n; i++)
        if (!known_schema(s->schemas.e[i].name)) {
            fprintf(out, "warning:%s schema '%s' is not one this report knows (tokentap.record/1); read best-effort\n",
                    pfx, s->schemas.e[i].name);
            n++;
        }
    unsigned methods = 0;
    for (unsigned i = 0; i < s->sources.n; i++)
        if (strcmp(s->sources.e[i].name, "(none)") != 0)
            methods++;
    if (methods > 1) {
        table_list(list, sizeof(list), &s->sources);
        fprintf(out, "warning:%s token counts come from %u counting methods (token_count_source: %s); "
                     "lengths and token throughputs mix definitions, filter or compare them separately\n",
                pfx, methods, list);
        n++;
    }
    if (!have_spec && s->judged > 0 && s->unjudged > 0) {
        fprintf(out, "warning:%s %llu of %llu records carry no SLO verdict (metadata.slo); goodput counts them as not good; pass --goodput to judge all alike\n",
                pfx, (unsigned long long)s->unjudged, (unsigned long long)s->records);
        n++;
    }
    if (s->rows_dropped) {
        fprintf(out, "warning:%s %llu records beyond --max-exact %zu: percentiles marked ~ come from log-linear histograms (<= 0.78%% error); trace, plots and pairing use the first %zu records\n",
                pfx, (unsigned long long)s->rows_dropped, s->max_exact, s->max_exact);
        n++;
    }
    if (!s->icl.exact) {
        fprintf(out, "warning:%s more than %zu inter-chunk gaps: inter_chunk_latency percentiles (~) come from a log-linear histogram (<= 0.78%% error); count, avg, min, max and std stay exact\n",
                pfx, s->icl.limit);
        n++;
    }
    if (s->unit_mismatch) {
        fprintf(out, "warning:%s %llu metric values skipped: unit not convertible to the metric's unit\n",
                pfx, (unsigned long long)s->unit_mismatch);
        n++;
    }
    if (s->errtypes.overflow) {
        fprintf(out, "warning:%s %llu errors of further types not itemised (more than %d distinct)\n",
                pfx, (unsigned long long)s->errtypes.overflow, TT_RPT_TABLE);
        n++;
    }
    if (s->records > 0 && s->first_start_ns == INT64_MAX) {
        fprintf(out, "warning:%s no record has request_start_ns: no duration, throughput or trace\n", pfx);
        n++;
    }
    return n;
}

/* ---- the single-set report ---- */

static void print_header(FILE *out, const struct tt_rset *s, const char *files)
{
    /* errors as the Error Request Count: cancellations included (code
     * 499, as AIPerf records them), their number in parentheses */
    char canc[48] = "";
    if (s->cancelled)
        snprintf(canc, sizeof(canc), " incl. %llu cancelled", (unsigned long long)s->cancelled);
    fprintf(out, "%s: %llu records (%llu ok, %llu error%s%s) from %s; %llu lines, %llu malformed, %llu filtered out\n",
            s->label, (unsigned long long)s->records, (unsigned long long)s->valid,
            (unsigned long long)s->errors, s->errors == 1 ? "" : "s", canc, files,
            (unsigned long long)s->lines,
            (unsigned long long)s->malformed, (unsigned long long)s->filtered);
}

static void print_metrics(FILE *out, const struct msum *ms, const char *title)
{
    struct table *t = table_new(title, 15);
    int empty = 0;
    char none[512] = "";

    if (t == NULL)
        return;
    snprintf(t->hdr[0], 48, "Metric");
    stat_headers(t, 1);
    for (int k = 0; k < NMETRIC; k++) {
        int m = order[k];
        if (ms->s[m].count == 0) {
            size_t o = strlen(none);
            snprintf(none + o, sizeof(none) - o, "%s%s", empty++ ? ", " : "", tag_of(m));
            continue;
        }
        int r = table_row(t);
        metric_label(t->cell[r][0], TCELL, m);
        t->abbr[r] = abbr_of[m];
        stat_cells(t, r, 1, &ms->s[m]);
    }
    table_print(out, t);
    if (empty)
        fprintf(out, "no values: %s\n", none);
    table_free(t);
}

static void print_scalars(FILE *out, const struct scalars *c)
{
    struct table *t = table_new(NULL, 2);
    char a[32], b[32], d[32];
    int r;

    if (t == NULL)
        return;
    snprintf(t->hdr[0], 48, "Metric");
    snprintf(t->hdr[1], 48, "Value");

    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Request Count (requests)");
    fmt_count(t->cell[r][1], TCELL, c->valid);
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Error Request Count (requests)");
    fmt_count(t->cell[r][1], TCELL, c->errors);
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Benchmark Duration (sec)");
    fmt_num(t->cell[r][1], TCELL, c->dur, 3);
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Request Throughput (requests/sec)");
    fmt_num(t->cell[r][1], TCELL, c->req_tput, 2);
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Output Token Throughput (tokens/sec)");
    fmt_num(t->cell[r][1], TCELL, c->out_tput, 2);
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Goodput (requests/sec)");
    if (c->have_good)
        fmt_num(t->cell[r][1], TCELL, c->goodput, 2);
    else
        snprintf(t->cell[r][1], TCELL, "%s", machine() ? "" : "N/A (no SLO: pass --goodput)");
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Good Request Count (requests)");
    if (c->have_good)
        fmt_count(t->cell[r][1], TCELL, c->good);
    else
        snprintf(t->cell[r][1], TCELL, "%s", na());
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Good Request Fraction");
    if (c->have_good && c->records > 0) {
        fmt_num(a, sizeof(a), c->frac, 4);
        fmt_num(b, sizeof(b), c->lo, 4);
        fmt_num(d, sizeof(d), c->hi, 4);
        if (machine()) {        /* one number a cell */
            snprintf(t->cell[r][1], TCELL, "%s", a);
            r = table_row(t);
            snprintf(t->cell[r][0], TCELL, "Good Request Fraction 95%% CI Low (Wilson)");
            snprintf(t->cell[r][1], TCELL, "%s", b);
            r = table_row(t);
            snprintf(t->cell[r][0], TCELL, "Good Request Fraction 95%% CI High (Wilson)");
            snprintf(t->cell[r][1], TCELL, "%s", d);
        } else {
            snprintf(t->cell[r][1], TCELL, "%s (%llu/%llu)", a,
                     (unsigned long long)c->good, (unsigned long long)c->records);
            r = table_row(t);
            snprintf(t->cell[r][0], TCELL, "Good Request Fraction 95%% CI");
            snprintf(t->cell[r][1], TCELL, "[%s, %s]", b, d);
        }
    } else {
        snprintf(t->cell[r][1], TCELL, "%s", na());
    }
    table_print(out, t);
    table_free(t);
}

/* errors by kind (metrics/errkind.h), the grouping /metrics and /stats use */
static void print_errors(FILE *out, const struct tt_rset *s)
{
    if (s->errors == 0) {
        fprintf(out, "Errors: none\n");
        return;
    }
    struct table *t = table_new("Errors by type", 5);
    if (t == NULL)
        return;
    snprintf(t->hdr[0], 48, "Type");
    snprintf(t->hdr[1], 48, "Count");
    snprintf(t->hdr[2], 48, "Codes");
    snprintf(t->hdr[3], 48, "Upstream types");
    snprintf(t->hdr[4], 48, "First message");
    t->left[2] = t->left[3] = t->left[4] = 1;
    /* most frequent first, ties in the kinds' order */
    unsigned idx[TT_EK__COUNT], n = 0;
    for (unsigned k = 0; k < TT_EK__COUNT; k++)
        if (s->errkinds[k].count > 0)
            idx[n++] = k;
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = i; j > 0 && s->errkinds[idx[j]].count > s->errkinds[idx[j - 1]].count; j--) {
            unsigned x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    for (unsigned i = 0; i < n; i++) {
        const struct tt_rkind *e = &s->errkinds[idx[i]];
        int r = table_row(t);
        size_t o = 0;
        snprintf(t->cell[r][0], TCELL, "%s", tt_errkind_names[idx[i]]);
        fmt_count(t->cell[r][1], TCELL, e->count);
        for (unsigned c = 0; c < e->ncodes && o < TCELL; c++)
            o += (size_t)snprintf(t->cell[r][2] + o, TCELL - o, "%s%d", c ? ", " : "", e->codes[c]);
        snprintf(t->cell[r][3], TCELL, "%.60s", e->upstream_types);
        snprintf(t->cell[r][4], TCELL, "%.60s", e->detail);
    }
    table_print(out, t);
    table_free(t);
    if (s->cancelled > 0)
        fprintf(out, "Cancelled: %llu of the %llu errors (the client went away before the end; "
                     "code 499, counted as errors as AIPerf does)\n",
                (unsigned long long)s->cancelled, (unsigned long long)s->errors);
}

static void print_sources(FILE *out, const struct tt_rset *s)
{
    char list[1024];
    table_list(list, sizeof(list), &s->sources);
    fprintf(out, "Token count sources (ok records): %s\n", s->sources.n ? list : "none");
    table_list(list, sizeof(list), &s->schemas);
    fprintf(out, "Schemas: %s\n", s->schemas.n ? list : "none");
}

static void print_footnotes(FILE *out, const struct msum *ms, const struct msum *mb)
{
    int low = 0, approx = 0;
    for (int m = 0; m < NMETRIC; m++) {
        for (int k = 0; k < 2; k++) {
            const struct msum *x = k ? mb : ms;
            if (x == NULL || x->s[m].count == 0)
                continue;
            if (!x->s[m].exact)
                approx = 1;
            for (int i = 0; i < TT_RPT_NPCT; i++)
                if (tt_pct_low_sample(x->s[m].count, tt_rpt_pcts[i]))
                    low = 1;
        }
    }
    fprintf(out, "Percentiles: linear interpolation between closest ranks (numpy default, as AIPerf); "
                 "std: population (ddof=0, as AIPerf); metrics of error records excluded.\n");
    if (low)
        fprintf(out, "%s too few samples%s: pXX needs at least 100/min(XX,100-XX) "
                     "(p99/p1: 100, p95/p5: 20, p90/p10: 10, p75/p25: 4, p50: 2); the value is "
                     "interpolated towards the sample's extreme, not an observed tail.\n",
                machine() ? "few_samples (column): percentiles on" : "*",
                machine() ? "" : " for this percentile");
    if (approx)
        fprintf(out, "%s nearest rank from a log-linear histogram, <= 0.78%% relative error.\n",
                machine() ? "approximate (column): the percentiles taken as the" : "~ approximate:");
}

/* ---- comparison ---- */

static void rel_cell(char *buf, size_t len, double a, double b)
{
    char v[64];
    if (!isfinite(a) || !isfinite(b) || a == 0) {
        snprintf(buf, len, "%s", na());
        return;
    }
    fmt_num(v, sizeof(v), (b - a) / fabs(a) * 100, 2);
    /* csv, json: the number; the row or column name says "(%)" */
    snprintf(buf, len, "%s%s%s", (b - a) > 0 ? "+" : "", v, machine() ? "" : "%");
}

static void diff_cell(char *buf, size_t len, double a, double b)
{
    char v[64];
    fmt_num(v, sizeof(v), b - a, 2);
    snprintf(buf, len, "%s%s", isfinite(b - a) && b - a > 0 ? "+" : "", v);
}

static void print_compare(FILE *out, const struct msum *ma, const struct msum *mb)
{
    struct table *t = table_new("Comparison (B vs A): absolute and relative differences", 16);
    if (t == NULL)
        return;
    snprintf(t->hdr[0], 48, "Metric");
    snprintf(t->hdr[1], 48, "set");
    t->left[1] = 1;
    t->prio[1] = 0;             /* a key: repeated in every part */
    stat_headers(t, 2);
    for (int k = 0; k < NMETRIC; k++) {
        int m = order[k];
        const struct tt_rsummary *a = &ma->s[m], *b = &mb->s[m];
        if (a->count == 0 && b->count == 0)
            continue;
        int r = table_row(t);
        metric_label(t->cell[r][0], TCELL, m);
        t->abbr[r] = abbr_of[m];
        snprintf(t->cell[r][1], TCELL, "A");
        stat_cells(t, r, 2, a);
        r = table_row(t);
        snprintf(t->cell[r][1], TCELL, "B");
        stat_cells(t, r, 2, b);

        double av[14], bv[14];
        av[0] = a->avg; bv[0] = b->avg;
        av[1] = a->min; bv[1] = b->min;
        av[2] = a->max; bv[2] = b->max;
        for (int i = 0; i < TT_RPT_NPCT; i++) {
            av[3 + i] = a->pct[i];
            bv[3 + i] = b->pct[i];
        }
        av[12] = a->std; bv[12] = b->std;
        av[13] = (double)a->count; bv[13] = (double)b->count;
        int rd = table_row(t), rr = table_row(t);
        snprintf(t->cell[rd][1], TCELL, "B-A");
        snprintf(t->cell[rr][1], TCELL, "%s", machine() ? "B/A-1 (%)" : "B/A-1");
        for (int i = 0; i < 14; i++) {
            if (i == 13) {
                char v[64];
                fmt_num(v, sizeof(v), bv[i] - av[i], 0);
                snprintf(t->cell[rd][2 + i], TCELL, "%s%s", bv[i] > av[i] ? "+" : "", v);
            } else {
                diff_cell(t->cell[rd][2 + i], TCELL, av[i], bv[i]);
            }
            rel_cell(t->cell[rr][2 + i], TCELL, av[i], bv[i]);
        }
        t->rule_after[rr] = 1;
    }
    table_print(out, t);
    table_free(t);
}

static void print_compare_scalars(FILE *out, const struct scalars *a, const struct scalars *b)
{
    struct table *t = table_new(NULL, 5);
    if (t == NULL)
        return;
    snprintf(t->hdr[0], 48, "Metric");
    snprintf(t->hdr[1], 48, "A");
    snprintf(t->hdr[2], 48, "B");
    snprintf(t->hdr[3], 48, "B-A");
    snprintf(t->hdr[4], 48, "%s", machine() ? "B/A-1 (%)" : "B/A-1");
    struct { const char *name; double x, y; int dec; } rows[] = {
        { "Request Count (requests)", (double)a->valid, (double)b->valid, 0 },
        { "Error Request Count (requests)", (double)a->errors, (double)b->errors, 0 },
        { "Benchmark Duration (sec)", a->dur, b->dur, 3 },
        { "Request Throughput (requests/sec)", a->req_tput, b->req_tput, 2 },
        { "Output Token Throughput (tokens/sec)", a->out_tput, b->out_tput, 2 },
        { "Goodput (requests/sec)", a->goodput, b->goodput, 2 },
        { "Good Request Fraction", a->frac, b->frac, 4 },
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int r = table_row(t);
        snprintf(t->cell[r][0], TCELL, "%s", rows[i].name);
        fmt_num(t->cell[r][1], TCELL, rows[i].x, rows[i].dec);
        fmt_num(t->cell[r][2], TCELL, rows[i].y, rows[i].dec);
        if (rows[i].dec == 0) {
            char v[64];
            fmt_num(v, sizeof(v), rows[i].y - rows[i].x, 0);
            snprintf(t->cell[r][3], TCELL, "%s%s", rows[i].y > rows[i].x ? "+" : "", v);
        } else {
            diff_cell(t->cell[r][3], TCELL, rows[i].x, rows[i].y);
        }
        rel_cell(t->cell[r][4], TCELL, rows[i].x, rows[i].y);
    }
    int r = table_row(t);
    if (machine()) {            /* one number a cell: low and high rows */
        snprintf(t->cell[r][0], TCELL, "Good Request Fraction 95%% CI Low (Wilson)");
        int rh = table_row(t);
        snprintf(t->cell[rh][0], TCELL, "Good Request Fraction 95%% CI High (Wilson)");
        if (a->have_good) {
            fmt_num(t->cell[r][1], TCELL, a->lo, 4);
            fmt_num(t->cell[rh][1], TCELL, a->hi, 4);
        }
        if (b->have_good) {
            fmt_num(t->cell[r][2], TCELL, b->lo, 4);
            fmt_num(t->cell[rh][2], TCELL, b->hi, 4);
        }
    } else {
        snprintf(t->cell[r][0], TCELL, "Good Request Fraction 95%% CI (Wilson)");
        if (a->have_good)
            snprintf(t->cell[r][1], TCELL, "[%.4f, %.4f]", a->lo, a->hi);
        else
            snprintf(t->cell[r][1], TCELL, "N/A");
        if (b->have_good)
            snprintf(t->cell[r][2], TCELL, "[%.4f, %.4f]", b->lo, b->hi);
        else
            snprintf(t->cell[r][2], TCELL, "N/A");
    }
    table_print(out, t);
    table_free(t);
}

struct idx {
    uint64_t id;
    size_t   i;
};

static int cmp_idx(const void *x, const void *y)
{
    const struct idx *a = x, *b = y;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* ids of <s> sorted; duplicates removed (counted in <*dups>) */
static struct idx *id_index(const struct tt_rset *s, size_t *n, uint64_t *dups)
{
    struct idx *v = malloc((s->nrows ? s->nrows : 1) * sizeof(*v));
    size_t k = 0, o = 0;
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < s->nrows; i++)
        if (s->rows[i].id != 0) {
            v[k].id = s->rows[i].id;
            v[k].i = i;
            k++;
        }
    qsort(v, k, sizeof(*v), cmp_idx);
    *dups = 0;
    for (size_t i = 0; i < k;) {
        size_t j = i + 1;
        while (j < k && v[j].id == v[i].id)
            j++;
        if (j - i == 1)
            v[o++] = v[i];
        else
            *dups += j - i;
        i = j;
    }
    *n = o;
    return v;
}

/* paired comparison; returns the number of matched requests */
static uint64_t print_paired(FILE *out, const struct tt_rset *a, const struct tt_rset *b)
{
    size_t na, nb, i = 0, j = 0, np = 0;
    uint64_t da, db;
    struct idx *ia = id_index(a, &na, &da), *ib = id_index(b, &nb, &db);
    size_t (*pairs)[2] = NULL;

    if (ia == NULL || ib == NULL)
        goto out;
    pairs = malloc(((na < nb ? na : nb) + 1) * sizeof(*pairs));
    if (pairs == NULL)
        goto out;
    while (i < na && j < nb) {
        if (ia[i].id < ib[j].id) {
            i++;
        } else if (ia[i].id > ib[j].id) {
            j++;
        } else {
            pairs[np][0] = ia[i].i;
            pairs[np][1] = ib[j].i;
            np++;
            i++;
            j++;
        }
    }
    if (np == 0) {
        fprintf(out, "Paired comparison: no request id (x_request_id) occurs in both sets; unpaired comparison only.\n");
        goto out;
    }
    if (da || db)
        fprintf(out, "warning: request ids occurring more than once in a set are left out of the pairing (A: %llu, B: %llu records)\n",
                (unsigned long long)da, (unsigned long long)db);

    double *d = malloc(np * sizeof(double)), *rel = malloc(np * sizeof(double));
    struct table *t = table_new(NULL, 7);
    if (d == NULL || rel == NULL || t == NULL) {
        free(d);
        free(rel);
        table_free(t);
        goto out;
    }
    fprintf(out, "\nPaired comparison: %zu requests in both sets (same x_request_id); per request d = B - A\n", np);
    snprintf(t->hdr[0], 48, "Metric");
    snprintf(t->hdr[1], 48, "pairs");
    snprintf(t->hdr[2], 48, "median d");
    snprintf(t->hdr[3], 48, "95%% CI low");
    snprintf(t->hdr[4], 48, "95%% CI high");
    snprintf(t->hdr[5], 48, "%s", machine() ? "coverage (%)" : "coverage");
    snprintf(t->hdr[6], 48, "%s", machine() ? "median d/A (%)" : "median d/A");
    for (int k = 0; k < NMETRIC; k++) {
        int m = order[k];
        size_t n = 0, nr = 0;
        if (m == ICL)
            continue;
        for (size_t p = 0; p < np; p++) {
            const struct tt_rrow *x = &a->rows[pairs[p][0]], *y = &b->rows[pairs[p][1]];
            if ((x->flags | y->flags) & TT_RROW_ERROR)
                continue;
            if (!(x->present & y->present & (1u << m)))
                continue;
            d[n++] = (double)y->v[m] - (double)x->v[m];
            if (x->v[m] != 0)
                rel[nr++] = ((double)y->v[m] - (double)x->v[m]) / fabs((double)x->v[m]);
        }
        if (n == 0)
            continue;
        tt_sort_doubles(d, n);
        tt_sort_doubles(rel, nr);
        int r = table_row(t);
        metric_label(t->cell[r][0], TCELL, m);
        fmt_count(t->cell[r][1], TCELL, n);
        diff_cell(t->cell[r][2], TCELL, 0, tt_pct_linear_d(d, n, 50));
        uint64_t lo, hi;
        double cov;
        if (tt_median_ci(n, 0.95, &lo, &hi, &cov) == 0) {
            diff_cell(t->cell[r][3], TCELL, 0, d[lo]);
            diff_cell(t->cell[r][4], TCELL, 0, d[hi]);
            snprintf(t->cell[r][5], TCELL, "%.1f%s", cov * 100, machine() ? "" : "%");
        } else {
            snprintf(t->cell[r][3], TCELL, "%s", machine() ? "" : "N/A (n<6)");
            snprintf(t->cell[r][4], TCELL, "%s", machine() ? "" : "N/A");
            snprintf(t->cell[r][5], TCELL, "%s", machine() ? "" : "-");
        }
        if (nr > 0) {
            char v[64];
            double x = tt_pct_linear_d(rel, nr, 50) * 100;
            fmt_num(v, sizeof(v), x, 2);
            snprintf(t->cell[r][6], TCELL, "%s%s%s", x > 0 ? "+" : "", v, machine() ? "" : "%");
        } else {
            snprintf(t->cell[r][6], TCELL, "%s", machine() ? "" : "N/A");
        }
    }
    table_print(out, t);
    fprintf(out, "Interval: distribution-free, order statistics d(r) and d(n-r+1) with the largest r such that "
                 "P(Binomial(n,1/2) <= r-1) <= 2.5%%; coverage is its exact confidence (>= 95%%). "
                 "Pairs where either request failed are left out.\n");
    free(d);
    free(rel);
    table_free(t);
out:
    free(ia);
    free(ib);
    free(pairs);
    return np;
}

/* ---- exports ---- */

static void iso_time(char *buf, size_t len, int64_t ns)
{
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t o = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + o, len - o, ".%06lldZ", (long long)((ns % 1000000000LL) / 1000));
}

/* a field only when it has a value: AIPerf writes with exclude_none=True */
static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
}

/* a record metric's block: unit, avg, min, max, p1..p99, std, count, sum */
static cJSON *metric_block(const struct tt_rsummary *s, const char *unit)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", unit);
    add_num(o, "avg", s->avg);
    add_num(o, "min", s->min);
    add_num(o, "max", s->max);
    for (int i = 0; i < TT_RPT_NPCT; i++)
        add_num(o, pct_names[i], s->pct[i]);
    add_num(o, "std", s->std);
    cJSON_AddNumberToObject(o, "count", (double)s->count);
    add_num(o, "sum", s->sum);
    return o;
}

/* a derived or aggregate metric's block: unit and avg only (no count, no sum) */
static cJSON *scalar_block(double v, const char *unit)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", unit);
    if (isfinite(v))
        cJSON_AddNumberToObject(o, "avg", v);
    else
        cJSON_AddNullToObject(o, "avg");
    return o;
}

static int write_file(const char *path, const char *data, size_t len, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* AIPerf's CSV number format: integers plain, reals with two decimals */
static void csv_num(char *buf, size_t len, double v, int integer)
{
    if (!isfinite(v))
        buf[0] = '\0';
    else if (integer)
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, "%.2f", v);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int export_aiperf(const char *dir, struct tt_rset *s, const struct msum *ms,
                         const struct scalars *c, const char *files,
                         const char *goodput, const char *cli, char *err,
                         size_t errlen)
{
    char path[4096], tbuf[64];
    cJSON *root = cJSON_CreateObject();
    int rc = 0;

    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        cJSON_Delete(root);
        return -1;
    }

    /*
     * --- JSON: AIPerf's profile_export_aiperf.json, schema 1.5 (docs/report.md):
     * record metrics carry the full stats block, derived and aggregate
     * metrics unit + avg only; provenance at the top and in run_info.
     */
    char bid[40];
    uint64_t h = tt_rpt_id_hash(files);
    h = (h ^ (uint64_t)s->first_start_ns) * 1099511628211ull;
    h = (h ^ (uint64_t)s->last_end_ns) * 1099511628211ull;
    h = (h ^ tt_rpt_id_hash(goodput ? goodput : "")) * 1099511628211ull;
    snprintf(bid, sizeof(bid), "tokentap-report-%016llx", (unsigned long long)h);
    cJSON_AddStringToObject(root, "schema_version", AIPERF_SCHEMA);
    cJSON_AddStringToObject(root, "benchmark_id", bid);
    if (s->first_start_ns != INT64_MAX) {
        iso_time(tbuf, sizeof(tbuf), s->first_start_ns);
        cJSON_AddStringToObject(root, "start_time", tbuf);
        iso_time(tbuf, sizeof(tbuf), s->last_end_ns);
        cJSON_AddStringToObject(root, "end_time", tbuf);
    }
    cJSON_AddBoolToObject(root, "was_cancelled", 0);
    cJSON *ri = cJSON_AddObjectToObject(root, "run_info");
    cJSON_AddStringToObject(ri, "benchmark_id", bid);
    cJSON_AddNullToObject(ri, "sweep_id");
    cJSON_AddNullToObject(ri, "random_seed");
    cJSON_AddNumberToObject(ri, "trial", 0);
    cJSON_AddStringToObject(ri, "run_label", "tokentap_report");
    cJSON_AddStringToObject(ri, "variation_label", "base");
    cJSON_AddNumberToObject(ri, "variation_index", 0);
    cJSON_AddObjectToObject(ri, "variation_values");
    cJSON_AddStringToObject(ri, "cli_command", cli);
    cJSON_AddArrayToObject(root, "runtime_submission_invalid_reasons");
    cJSON *es = cJSON_AddArrayToObject(root, "error_summary");
    for (unsigned i = 0; i < s->errtypes.n; i++) {
        const struct tt_rcount *e = &s->errtypes.e[i];
        cJSON *x = cJSON_CreateObject(), *d = cJSON_CreateObject();
        if (e->code)
            cJSON_AddNumberToObject(d, "code", e->code);
        else
            cJSON_AddNullToObject(d, "code");
        cJSON_AddStringToObject(d, "type", e->name);
        cJSON_AddStringToObject(d, "message", e->detail);
        cJSON_AddItemToObject(x, "error_details", d);
        cJSON_AddNumberToObject(x, "count", (double)e->count);
        cJSON_AddItemToArray(es, x);
    }
    for (int k = 0; k < NMETRIC; k++) {
        int m = order[k];
        if (ms->s[m].count > 0)
            cJSON_AddItemToObject(root, tag_of(m), metric_block(&ms->s[m], unit_of(m)));
    }
    cJSON_AddItemToObject(root, "request_throughput", scalar_block(c->req_tput, "requests/sec"));
    cJSON_AddItemToObject(root, "output_token_throughput", scalar_block(c->out_tput, "tokens/sec"));
    cJSON_AddItemToObject(root, "request_count", scalar_block((double)c->valid, "requests"));
    cJSON_AddItemToObject(root, "error_request_count", scalar_block((double)c->errors, "requests"));
    cJSON_AddItemToObject(root, "benchmark_duration", scalar_block(c->dur, "sec"));
    if (c->have_good) {
        cJSON_AddItemToObject(root, "goodput", scalar_block(c->goodput, "requests/sec"));
        cJSON_AddItemToObject(root, "good_request_count", scalar_block((double)c->good, "requests"));
        cJSON_AddItemToObject(root, "good_request_fraction", scalar_block(c->frac, "ratio"));
    }

    /* what AIPerf has no field for, under one key of our own */
    cJSON *tk = cJSON_AddObjectToObject(root, "tokentap_report");
    cJSON_AddStringToObject(tk, "tokentap_version", TT_VERSION);
    cJSON_AddStringToObject(tk, "inputs", files);
    cJSON_AddNumberToObject(tk, "lines", (double)s->lines);
    cJSON_AddNumberToObject(tk, "malformed_lines", (double)s->malformed);
    cJSON_AddNumberToObject(tk, "filtered_out", (double)s->filtered);
    cJSON_AddNumberToObject(tk, "records", (double)s->records);
    cJSON_AddStringToObject(tk, "percentile_method", "linear (numpy default)");
    cJSON_AddStringToObject(tk, "std", "population (ddof=0)");
    cJSON_AddStringToObject(tk, "duration", "first request_start_ns to last request_end_ns");
    if (goodput)
        cJSON_AddStringToObject(tk, "goodput_spec", goodput);
    else
        cJSON_AddStringToObject(tk, "goodput_source", c->have_good ? "metadata.slo.good" : "none");
    if (c->have_good) {
        cJSON *ci = cJSON_AddArrayToObject(tk, "good_request_fraction_ci95_wilson");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(c->lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(c->hi));
    }
    cJSON *src = cJSON_AddObjectToObject(tk, "token_count_sources");
    for (unsigned i = 0; i < s->sources.n; i++)
        cJSON_AddNumberToObject(src, s->sources.e[i].name, (double)s->sources.e[i].count);
    cJSON *sch = cJSON_AddObjectToObject(tk, "schemas");
    for (unsigned i = 0; i < s->schemas.n; i++)
        cJSON_AddNumberToObject(sch, s->schemas.e[i].name, (double)s->schemas.e[i].count);
    cJSON *low = cJSON_AddObjectToObject(tk, "low_sample_percentiles");
    cJSON *apx = cJSON_AddArrayToObject(tk, "histogram_percentiles");
    for (int k = 0; k < NMETRIC; k++) {
        int m = order[k];
        if (ms->s[m].count == 0)
            continue;
        cJSON *l = NULL;
        for (int i = 0; i < TT_RPT_NPCT; i++)
            if (tt_pct_low_sample(ms->s[m].count, tt_rpt_pcts[i])) {
                if (l == NULL)
                    l = cJSON_AddArrayToObject(low, tag_of(m));
                cJSON_AddItemToArray(l, cJSON_CreateString(pct_names[i]));
            }
        if (!ms->s[m].exact)
            cJSON_AddItemToArray(apx, cJSON_CreateString(tag_of(m)));
    }

    char *json = cJSON_Print(root);
    cJSON_Delete(root);
    if (json == NULL) {
        snprintf(err, errlen, "export: out of memory");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/profile_export_aiperf.json", dir);
    size_t jl = strlen(json);
    json[jl] = '\n';            /* replace the NUL: one trailing newline */
    rc = write_file(path, json, jl + 1, err, errlen);
    free(json);
    if (rc < 0)
        return -1;

    /* --- CSV: AIPerf's MetricsCsvExporter: stats rows, blank line, scalars --- */
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (f == NULL) {
        snprintf(err, errlen, "export: out of memory");
        return -1;
    }
    fprintf(f, "Metric,avg,min,max,sum");
    for (int i = 0; i < TT_RPT_NPCT; i++)
        fprintf(f, ",%s", pct_names[i]);
    fprintf(f, ",std\r\n");
    /* rows sorted by tag, as AIPerf sorts records.items() */
    const char *tags[NMETRIC];
    int nt = 0;
    for (int m = 0; m < NMETRIC; m++)
        if (ms->s[m].count > 0)
            tags[nt++] = tag_of(m);
    qsort(tags, (size_t)nt, sizeof(tags[0]), cmp_str_ptr);
    for (int k = 0; k < nt; k++) {
        int m = strcmp(tags[k], "inter_chunk_latency") == 0 ? ICL : tt_metric_by_tag(tags[k]);
        const struct tt_rsummary *x = &ms->s[m];
        char v[64];
        fprintf(f, "%s (%s)", header_of[m], unit_of(m));
        double vals[4] = { x->avg, x->min, x->max, x->sum };
        for (int i = 0; i < 4; i++) {
            csv_num(v, sizeof(v), vals[i], 0);
            fprintf(f, ",%s", v);
        }
        for (int i = 0; i < TT_RPT_NPCT; i++) {
            csv_num(v, sizeof(v), x->pct[i], 0);
            fprintf(f, ",%s", v);
        }
        csv_num(v, sizeof(v), x->std, 0);
        fprintf(f, ",%s\r\n", v);
    }
    fprintf(f, "\r\nMetric,Value\r\n");
    /* sorted by tag: benchmark_duration, error_request_count, good_request_count,
     * good_request_fraction, goodput, output_token_throughput, request_count,
     * request_throughput */
    char v[64];
    csv_num(v, sizeof(v), c->dur, 0);
    fprintf(f, "Benchmark Duration (sec),%s\r\n", v);
    fprintf(f, "Error Request Count,%llu\r\n", (unsigned long long)c->errors);
    if (c->have_good) {
        fprintf(f, "Good Request Count,%llu\r\n", (unsigned long long)c->good);
        csv_num(v, sizeof(v), c->frac, 0);
        fprintf(f, "GoodRequestFraction (ratio),%s\r\n", v);
        csv_num(v, sizeof(v), c->goodput, 0);
        fprintf(f, "Goodput (requests/sec),%s\r\n", v);
    }
    csv_num(v, sizeof(v), c->out_tput, 0);
    fprintf(f, "Output Token Throughput (tokens/sec),%s\r\n", v);
    fprintf(f, "Request Count,%llu\r\n", (unsigned long long)c->valid);
    csv_num(v, sizeof(v), c->req_tput, 0);
    fprintf(f, "Request Throughput (requests/sec),%s\r\n", v);
    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        snprintf(err, errlen, "export: out of memory");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/profile_export_aiperf.csv", dir);
    rc = write_file(path, buf, blen, err, errlen);
    free(buf);
    return rc;
}

/* ---- timeslices ---- */

static void slice_label(char *buf, size_t len, int64_t ns, int64_t width_ns, int multiday)
{
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&t, &tm);
    const char *f = width_ns < 60000000000LL ? (multiday ? "%m-%d %H:%M:%S" : "%H:%M:%S")
                                             : (multiday ? "%m-%d %H:%M" : "%H:%M");
    strftime(buf, len, f, &tm);
}

/* percentile <pi> of a slice's metric, '*' when the sample is too small */
static void slice_pct(struct table *t, int r, int c, const struct tt_rsummary *s, int pi)
{
    if (s->count == 0) {
        snprintf(t->cell[r][c], TCELL, "%s", machine() ? "" : "-");
        return;
    }
    pct_cell(t, r, c, s->pct[pi], 0, tt_pct_low_sample(s->count, tt_rpt_pcts[pi]));
}

/*
 * The over-time table: one row per slice.  On a narrow terminal the
 * columns stay in this order, the rest moving to further parts: Req,
 * Good %, TTFT p99, ITL p99, Req/s, TTFT p50, ITL p50, Err, Out tok/s,
 * Goodput/s, Latency p99.
 */
static void print_slices(FILE *out, const struct tt_rslices *sl, const char *arg,
                         const char *setname)
{
    static const char *const hdr[] = {
        "Slice (UTC)", "Req", "Err", "Req/s", "Out tok/s", "Goodput/s", "Good %",
        "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "Latency p99",
    };
    static const int prio[] = { 0, 1, 8, 5, 9, 10, 2, 6, 3, 7, 4, 11 };
    char title[160], day[32];

    if (sl->n == 0) {
        fprintf(out, "Timeslices (%s): no records with a start time\n", arg);
        return;
    }
    int multiday = sl->s[0].start_ns / 86400000000000LL
                   != (sl->s[sl->n - 1].end_ns - 1) / 86400000000000LL;
    iso_time(day, sizeof(day), sl->s[0].start_ns);
    day[10] = '\0';
    snprintf(title, sizeof(title), "Timeslices of %s%s%s from %s (UTC); times in ms",
             arg, setname ? ", set " : "", setname ? setname : "", day);
    struct table *t = table_new(title, 12);
    if (t == NULL)
        return;
    for (int c = 0; c < 12; c++) {
        snprintf(t->hdr[c], 48, "%s", hdr[c]);
        t->prio[c] = prio[c];
    }
    for (size_t k = 0; k < sl->n; k++) {
        const struct tt_rslice *x = &sl->s[k];
        int r = table_row(t);
        slice_label(t->cell[r][0], TCELL, x->start_ns, sl->width_ns, multiday);
        fmt_count(t->cell[r][1], TCELL, x->records);
        fmt_count(t->cell[r][2], TCELL, x->errors);
        fmt_num(t->cell[r][3], TCELL, tt_rslice_req_tput(x), 2);
        fmt_num(t->cell[r][4], TCELL, tt_rslice_out_tput(x), 1);
        fmt_num(t->cell[r][5], TCELL, tt_rslice_goodput(x, sl->have_good), 2);
        double gf = tt_rslice_good_frac(x, sl->have_good);
        if (isfinite(gf))
            fmt_num(t->cell[r][6], TCELL, 100.0 * gf, 1);
        else
            snprintf(t->cell[r][6], TCELL, "%s", machine() ? "" : "-");
        slice_pct(t, r, 7, &x->m[TT_M_TTFT], 4);
        slice_pct(t, r, 8, &x->m[TT_M_TTFT], 8);
        slice_pct(t, r, 9, &x->m[TT_M_ITL], 4);
        slice_pct(t, r, 10, &x->m[TT_M_ITL], 8);
        slice_pct(t, r, 11, &x->m[TT_M_REQUEST_LATENCY], 8);
    }
    table_print(out, t);
    table_free(t);
    fprintf(out, "Slices: %zu of %s starting on multiples of %s since 1970-01-01T00:00:00Z; "
                 "a request counts in the slice of its start; rates per second of the slice "
                 "the records' span covers; Good %% = good / all requests (errors included)%s.\n",
            sl->n, arg, arg, sl->have_good ? "" : "; no SLO verdicts: pass --goodput");
    if (sl->unplaced)
        fprintf(out, "Slices: %llu records without request_start_ns left out\n",
                (unsigned long long)sl->unplaced);
}

/* the derived figures of one slice: (tag, header, unit, value) */
struct slice_scalar {
    const char *tag, *header, *unit;
    double      v;
    int         integer;
};

static int slice_scalars(const struct tt_rslice *x, int have_good, struct slice_scalar *o)
{
    int n = 0;
    o[n++] = (struct slice_scalar){ "request_throughput", "Request Throughput", "requests/sec",
                                    tt_rslice_req_tput(x), 0 };
    o[n++] = (struct slice_scalar){ "output_token_throughput", "Output Token Throughput",
                                    "tokens/sec", tt_rslice_out_tput(x), 0 };
    o[n++] = (struct slice_scalar){ "request_count", "Request Count", "requests",
                                    (double)x->valid, 1 };
    o[n++] = (struct slice_scalar){ "error_request_count", "Error Request Count", "requests",
                                    (double)x->errors, 1 };
    o[n++] = (struct slice_scalar){ "benchmark_duration", "Benchmark Duration", "sec",
                                    x->covered_s, 0 };
    if (have_good) {
        o[n++] = (struct slice_scalar){ "goodput", "Goodput", "requests/sec",
                                        tt_rslice_goodput(x, 1), 0 };
        o[n++] = (struct slice_scalar){ "good_request_count", "Good Request Count", "requests",
                                        (double)x->good, 1 };
        o[n++] = (struct slice_scalar){ "good_request_fraction", "GoodRequestFraction", "ratio",
                                        tt_rslice_good_frac(x, 1), 0 };
    }
    return n;
}

/*
 * AIPerf's timeslice exports (docs/tutorials/timeslices.md): JSON
 * {"timeslices":[{"timeslice_index":i, <tag>:{unit, stats}}]} and the
 * tidy CSV Timeslice,Metric,Unit,Stat,Value.  Slice times and widths,
 * which AIPerf's files do not carry, are under "tokentap_report".
 */
static int export_timeslices(const char *dir, const struct tt_rslices *sl, const char *arg,
                             char *err, size_t errlen)
{
    char path[4096], tb[64], v[64];
    struct slice_scalar sc[8];
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "timeslices");
    cJSON *tk = cJSON_AddObjectToObject(root, "tokentap_report");
    cJSON_AddStringToObject(tk, "slice_duration", arg);
    cJSON_AddNumberToObject(tk, "slice_duration_s", (double)sl->width_ns / 1e9);
    cJSON_AddStringToObject(tk, "slice_alignment", "multiples of the duration since the unix epoch (UTC)");
    cJSON_AddStringToObject(tk, "membership", "request_start_ns");
    cJSON *meta = cJSON_AddArrayToObject(tk, "slices");

    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (f == NULL) {
        cJSON_Delete(root);
        snprintf(err, errlen, "export: out of memory");
        return -1;
    }
    fprintf(f, "Timeslice,Metric,Unit,Stat,Value\r\n");
    for (size_t k = 0; k < sl->n; k++) {
        const struct tt_rslice *x = &sl->s[k];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "timeslice_index", (double)k);
        for (int i = 0; i < NMETRIC; i++) {
            int m = order[i];
            if (m == ICL || x->m[m].count == 0)
                continue;
            const struct tt_rsummary *ms = &x->m[m];
            cJSON_AddItemToObject(o, tag_of(m), metric_block(ms, unit_of(m)));
            double st[4] = { ms->avg, ms->min, ms->max, ms->sum };
            static const char *const sn[4] = { "avg", "min", "max", "sum" };
            for (int j = 0; j < 4; j++) {
                csv_num(v, sizeof(v), st[j], 0);
                fprintf(f, "%zu,%s,%s,%s,%s\r\n", k, header_of[m], unit_of(m), sn[j], v);
            }
            for (int j = 0; j < TT_RPT_NPCT; j++) {
                csv_num(v, sizeof(v), ms->pct[j], 0);
                fprintf(f, "%zu,%s,%s,%s,%s\r\n", k, header_of[m], unit_of(m), pct_names[j], v);
            }
            csv_num(v, sizeof(v), ms->std, 0);
            fprintf(f, "%zu,%s,%s,std,%s\r\n", k, header_of[m], unit_of(m), v);
        }
        int ns = slice_scalars(x, sl->have_good, sc);
        for (int j = 0; j < ns; j++) {
            cJSON_AddItemToObject(o, sc[j].tag, scalar_block(sc[j].v, sc[j].unit));
            csv_num(v, sizeof(v), sc[j].v, sc[j].integer);
            fprintf(f, "%zu,%s,%s,avg,%s\r\n", k, sc[j].header, sc[j].unit, v);
        }
        cJSON_AddItemToArray(arr, o);
        cJSON *mo = cJSON_CreateObject();
        cJSON_AddNumberToObject(mo, "timeslice_index", (double)k);
        iso_time(tb, sizeof(tb), x->start_ns);
        cJSON_AddStringToObject(mo, "start_time", tb);
        iso_time(tb, sizeof(tb), x->end_ns);
        cJSON_AddStringToObject(mo, "end_time", tb);
        cJSON_AddNumberToObject(mo, "covered_s", x->covered_s);
        cJSON_AddNumberToObject(mo, "records", (double)x->records);
        cJSON_AddItemToArray(meta, mo);
    }
    int rc = 0;
    if (fclose(f) != 0 || buf == NULL) {
        snprintf(err, errlen, "export: out of memory");
        rc = -1;
    }
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/profile_export_aiperf_timeslices.csv", dir);
        rc = write_file(path, buf, blen, err, errlen);
    }
    free(buf);
    char *json = rc == 0 ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (rc == 0 && json == NULL) {
        snprintf(err, errlen, "export: out of memory");
        rc = -1;
    }
    if (rc == 0) {
        size_t jl = strlen(json);
        json[jl] = '\n';
        snprintf(path, sizeof(path), "%s/profile_export_aiperf_timeslices.json", dir);
        rc = write_file(path, json, jl + 1, err, errlen);
    }
    free(json);
    return rc;
}

/* ---- mooncake trace ---- */

static int cmp_start(const void *x, const void *y)
{
    const struct tt_rrow *a = *(const struct tt_rrow *const *)x;
    const struct tt_rrow *b = *(const struct tt_rrow *const *)y;
    return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

static int write_trace(const char *path, const struct tt_rset *s, uint64_t *written,
                       uint64_t *skipped, char *err, size_t errlen)
{
    const struct tt_rrow **v = malloc((s->nrows ? s->nrows : 1) * sizeof(*v));
    size_t n = 0;
    FILE *f;

    *written = *skipped = 0;
    if (v == NULL) {
        snprintf(err, errlen, "trace: out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->nrows; i++) {
        if (s->rows[i].start_ns == 0)
            (*skipped)++;
        else
            v[n++] = &s->rows[i];
    }
    qsort(v, n, sizeof(*v), cmp_start);
    f = fopen(path, "w");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(v);
        return -1;
    }
    int64_t first = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tt_rrow *r = v[i];
        if (!(r->present & (1u << TT_M_ISL))) {
            (*skipped)++;       /* mooncake needs input_length */
            continue;
        }
        if (*written == 0)
            first = r->start_ns;
        long long ts = llround((double)(r->start_ns - first) / 1e6);
        fprintf(f, "{\"timestamp\": %lld, \"input_length\": %lld", ts,
                llround(r->v[TT_M_ISL]));
        if (r->present & (1u << TT_M_OSL))
            fprintf(f, ", \"output_length\": %lld", llround(r->v[TT_M_OSL]));
        fputs("}\n", f);
        (*written)++;
    }
    free(v);
    if (ferror(f) | (fclose(f) != 0)) {
        snprintf(err, errlen, "%s: write failed", path);
        return -1;
    }
    return 0;
}

/* ---- main ---- */

/* the command line, for run_info.cli_command (arguments with spaces quoted) */
static void cli_line(char *buf, size_t len, int argc, char **argv)
{
    size_t o = (size_t)snprintf(buf, len, "tokentap");
    for (int i = 0; i < argc && o < len; i++) {
        const char *q = strpbrk(argv[i], " \t\"'") ? "'" : "";
        o += (size_t)snprintf(buf + o, len - o, " %s%s%s", q, argv[i], q);
    }
}

/* close the capture <out> and write it to standard output by format */
static int emit(FILE *out, char **cap, size_t *caplen)
{
    int rc = 0;
    if (fclose(out) != 0 || *cap == NULL)
        rc = -1;
    switch (outx.fmt) {
    case F_TABLE:
        fold_out(stdout, *cap ? *cap : "", *caplen, outx.width);
        break;
    case F_MARKDOWN:
        fwrite(*cap ? *cap : "", 1, *caplen, stdout);
        break;
    case F_CSV:
        fwrite(*cap ? *cap : "", 1, *caplen, stderr);
        break;
    case F_JSON: {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "schema", "tokentap.report/1");
        cJSON_AddItemToObject(root, "tables", outx.tables ? outx.tables : cJSON_CreateArray());
        outx.tables = NULL;
        cJSON *notes = cJSON_AddArrayToObject(root, "notes");
        for (char *p = *cap, *e = *cap ? *cap + *caplen : NULL; p && p < e;) {
            char *nl = memchr(p, '\n', (size_t)(e - p));
            size_t l = nl ? (size_t)(nl - p) : (size_t)(e - p);
            if (l) {
                char *line = strndup(p, l);
                if (line)
                    cJSON_AddItemToArray(notes, cJSON_CreateString(line));
                free(line);
            }
            p += l + 1;
        }
        char *j = cJSON_Print(root);
        cJSON_Delete(root);
        if (j == NULL)
            rc = -1;
        else
            printf("%s\n", j);
        free(j);
        break;
    }
    }
    free(*cap);
    *cap = NULL;
    fflush(stdout);
    if (ferror(stdout))
        rc = -1;
    return rc;
}

static void join(char *buf, size_t len, const char **v, int n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", v[i]);
}

/*
 * An --upstream or --compare-upstreams name no record of the files
 * carries: refused (2) with the names they do carry.  Unsure (more names
 * than the table keeps): accepted.
 */
static int check_upstream(const struct tt_rset *s, const char *opt, const char *name,
                          const char *files)
{
    char list[1024];
    if (name == NULL || s->upstreams.overflow)
        return 0;
    for (unsigned i = 0; i < s->upstreams.n; i++)
        if (strcmp(s->upstreams.e[i].name, name) == 0)
            return 0;
    table_list(list, sizeof(list), &s->upstreams);
    fprintf(stderr, "tokentap report: %s: no record of upstream '%s' in %s; its upstreams "
                    "(records): %s\n", opt, name, files, s->upstreams.n ? list : "none");
    return 2;
}

/* a set without a record: nothing to report (1), said on stderr */
static int check_nonempty(const struct tt_rset *s, const char *set, const char *files)
{
    if (s->records > 0)
        return 0;
    fprintf(stderr, "tokentap report: %s%s%sno records in %s (%llu lines, %llu malformed, "
                    "%llu filtered out)\n", set ? "set " : "", set ? set : "", set ? ": " : "",
            files, (unsigned long long)s->lines, (unsigned long long)s->malformed,
            (unsigned long long)s->filtered);
    return 1;
}

static int read_set(struct tt_rset *s, const char **files, int n)
{
    char err[512];
    for (int i = 0; i < n; i++) {
        if (strcmp(files[i], "-") != 0) {
            struct stat st;
            if (stat(files[i], &st) < 0 || access(files[i], R_OK) < 0) {
                fprintf(stderr, "tokentap report: %s: %s\n", files[i], strerror(errno));
                return 2;
            }
            if (S_ISDIR(st.st_mode)) {
                fprintf(stderr, "tokentap report: %s: is a directory\n", files[i]);
                return 2;
            }
        }
        if (tt_rset_read_file(s, files[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: %s\n", err);
            return 1;
        }
    }
    return 0;
}

int tt_report_main(int argc, char **argv)
{
    struct ropts o;
    struct tt_rjudge judge;
    struct tt_rset *a = NULL, *b = NULL;
    struct msum *ma = NULL, *mb = NULL;
    struct scalars ca, cb;
    char err[512], fa[2048], fb[2048];
    int rc;

    rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        free(o.files);
        free(o.cmp);
        return rc == 1 ? 0 : 2;
    }
    memset(&judge, 0, sizeof(judge));
    if (o.goodput != NULL) {
        if (tt_slo_parse(o.goodput, &judge.slo, err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: --goodput: %s\n", err);
            rc = 2;
            goto out;
        }
        judge.have_spec = 1;
    }

    int by_upstream = o.cmp_up[0][0] != '\0';
    a = malloc(sizeof(*a));
    ma = malloc(sizeof(*ma));
    if (o.ncmp || by_upstream) {
        b = malloc(sizeof(*b));
        mb = malloc(sizeof(*mb));
    }
    if (a == NULL || ma == NULL || ((o.ncmp || by_upstream) && (b == NULL || mb == NULL))) {
        fprintf(stderr, "tokentap report: out of memory\n");
        free(a);
        free(b);
        a = b = NULL;
        rc = 1;
        goto out;
    }
    tt_rset_init(a, b ? "A" : "Records", o.max_exact, &o.f, &judge);
    if (b)
        tt_rset_init(b, "B", o.max_exact, by_upstream ? &o.fb : &o.f, &judge);
    join(fa, sizeof(fa), o.files, o.nfiles);
    join(fb, sizeof(fb), o.cmp, o.ncmp);
    if (by_upstream) {
        char files[1024];
        snprintf(files, sizeof(files), "%.1000s", fa);
        snprintf(fa, sizeof(fa), "%s, upstream %s", files, o.cmp_up[0]);
        snprintf(fb, sizeof(fb), "%s, upstream %s", files, o.cmp_up[1]);
    }

    if ((rc = read_set(a, o.files, o.nfiles)) != 0)
        goto out;
    if (b && (rc = read_set(b, by_upstream ? o.files : o.cmp,
                            by_upstream ? o.nfiles : o.ncmp)) != 0)
        goto out;

    {
        char fl[2048], fl2[2048];
        join(fl, sizeof(fl), o.files, o.nfiles);
        join(fl2, sizeof(fl2), o.cmp, o.ncmp);
        if (by_upstream) {
            if ((rc = check_upstream(a, "--compare-upstreams", o.cmp_up[0], fl)) != 0
                || (rc = check_upstream(a, "--compare-upstreams", o.cmp_up[1], fl)) != 0)
                goto out;
        } else if ((rc = check_upstream(a, "--upstream", o.f.upstream, fl)) != 0
                   || (b && (rc = check_upstream(b, "--upstream", o.f.upstream, fl2)) != 0)) {
            goto out;
        }
        if ((rc = check_nonempty(a, b ? (by_upstream ? o.cmp_up[0] : "A") : NULL, fl)) != 0
            || (b && (rc = check_nonempty(b, by_upstream ? o.cmp_up[1] : "B",
                                          by_upstream ? fl : fl2)) != 0))
            goto out;
    }

    summarize(a, ma);
    compute_scalars(a, &ca);
    if (b) {
        summarize(b, mb);
        compute_scalars(b, &cb);
    }

    /* the console report goes to a buffer first: folded, or sorted out by format */
    char *cap = NULL, cli[4096];
    size_t caplen = 0;
    outx.fmt = (enum rfmt)o.fmt;
    outx.width = term_width();
    if (outx.width < 40)
        outx.width = 40;
    cli_line(cli, sizeof(cli), argc, argv);
    FILE *out = open_memstream(&cap, &caplen);
    if (out == NULL) {
        fprintf(stderr, "tokentap report: out of memory\n");
        rc = 1;
        goto out;
    }
    struct tt_rslices sl = { 0 };
    if (o.slice_ns > 0
        && tt_rslices_build(a, o.slice_ns, 0, &sl, err, sizeof(err)) < 0) {
        fprintf(stderr, "tokentap report: --slice-duration: %s\n", err);
        fclose(out);
        free(cap);
        rc = 2;
        goto out;
    }
    print_header(out, a, fa);
    if (b)
        print_header(out, b, fb);
    if (o.goodput)
        fprintf(out, "Goodput: re-judged with --goodput \"%s\"\n", o.goodput);
    print_warnings(out, a, b ? " A:" : "", judge.have_spec);
    if (b)
        print_warnings(out, b, " B:", judge.have_spec);
    if (b) {
        int mixed_src = 0;
        for (unsigned i = 0; i < a->sources.n; i++) {
            int found = 0;
            for (unsigned j = 0; j < b->sources.n; j++)
                if (strcmp(a->sources.e[i].name, b->sources.e[j].name) == 0)
                    found = 1;
            if (!found)
                mixed_src = 1;
        }
        if (mixed_src || a->sources.n != b->sources.n)
            fprintf(out, "warning: A and B count tokens differently (token_count_source); length and token-rate differences may be definitional\n");
    }
    fputc('\n', out);

    if (!b) {
        print_metrics(out, ma, "tokentap report | LLM Metrics");
        print_scalars(out, &ca);
        print_errors(out, a);
        print_sources(out, a);
    } else {
        print_compare(out, ma, mb);
        print_compare_scalars(out, &ca, &cb);
        print_paired(out, a, b);
        fprintf(out, "\nA: ");
        print_errors(out, a);
        fprintf(out, "B: ");
        print_errors(out, b);
        fprintf(out, "A: ");
        print_sources(out, a);
        fprintf(out, "B: ");
        print_sources(out, b);
    }
    if (o.slice_ns > 0)
        print_slices(out, &sl, o.slice_arg, b ? "A" : NULL);
    print_footnotes(out, ma, mb);

    rc = 0;
    if (o.export_dir) {
        if (export_aiperf(o.export_dir, a, ma, &ca, fa, o.goodput, cli, err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: --export: %s\n", err);
            rc = 1;
        } else {
            fprintf(out, "Exported %s/profile_export_aiperf.json and %s/profile_export_aiperf.csv%s\n",
                    o.export_dir, o.export_dir, b ? " (set A)" : "");
            if (o.slice_ns > 0) {
                if (export_timeslices(o.export_dir, &sl, o.slice_arg, err, sizeof(err)) < 0) {
                    fprintf(stderr, "tokentap report: --export: %s\n", err);
                    rc = 1;
                } else {
                    fprintf(out, "Exported %s/profile_export_aiperf_timeslices.json and .csv (%zu slices)\n",
                            o.export_dir, sl.n);
                }
            }
        }
    }
    if (o.trace) {
        uint64_t w, sk;
        if (write_trace(o.trace, a, &w, &sk, err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: --trace: %s\n", err);
            rc = 1;
        } else {
            fprintf(out, "Trace: %llu requests written to %s (mooncake_trace)%s",
                    (unsigned long long)w, o.trace, b ? ", set A" : "");
            if (sk)
                fprintf(out, "; %llu left out (no input_sequence_length or no start time)",
                        (unsigned long long)sk);
            if (a->rows_dropped)
                fprintf(out, "; only the first %zu records kept (--max-exact)", a->max_exact);
            fputc('\n', out);
        }
    }
    if (o.plot) {
        if (tt_report_plot(o.plot, a, b, judge.have_spec ? &judge.slo : NULL, o.slice_ns,
                           b ? "tokentap report: A vs B" : "tokentap report",
                           err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: --plot: %s\n", err);
            rc = 1;
        } else {
            fprintf(out, "Plots written to %s\n", o.plot);
        }
    }
    tt_rslices_free(&sl);
    if (emit(out, &cap, &caplen) < 0)
        rc = 1;
out:
    if (a)
        tt_rset_free(a);
    if (b)
        tt_rset_free(b);
    free(a);
    free(b);
    free(ma);
    free(mb);
    free(o.files);
    free(o.cmp);
    return rc;
}
