/*
 * tokentap report: offline analysis of record files.
 *
 *   tokentap report A.jsonl [more.jsonl ...] [options]
 *
 * reads the records as a stream into a bounded record set
 * (metrics/report_set.c), then prints an AIPerf-style console table
 * (per-metric avg/min/max/p1..p99/std/count, then throughput, goodput and
 * the good request fraction with its Wilson interval, errors by type,
 * token count sources) and, on request, writes AIPerf's
 * profile_export_aiperf.{json,csv} (--export), a mooncake_trace file
 * (--trace), plots (--plot, metrics/report_plot.c) and a side-by-side,
 * paired-when-possible comparison with a second set (--compare).
 * The statistics and their conventions are in metrics/report_stats.h;
 * docs/report.md is the user's guide.
 */
#include "metrics/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metrics/metric.h"
#include "metrics/report_plot.h"
#include "metrics/report_set.h"
#include "metrics/report_stats.h"
#include "metrics/slo.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

#define ICL TT_M__COUNT                 /* metric index of inter_chunk_latency */
#define NMETRIC (TT_M__COUNT + 1)

/* AIPerf's display names (metric classes' `header`) */
static const char *const header_of[NMETRIC] = {
    [TT_M_TTFT]              = "Time to First Token",
    [TT_M_TTST]              = "Time to Second Token",
    [TT_M_TTFO]              = "Time to First Output Token",
    [TT_M_REQUEST_LATENCY]   = "Request Latency",
    [TT_M_ITL]               = "Inter Token Latency",
    [TT_M_OTPS_USER]         = "Output Token Throughput Per User",
    [TT_M_ISL]               = "Input Sequence Length",
    [TT_M_OSL]               = "Output Sequence Length",
    [TT_M_OUTPUT_TOKENS]     = "Output Token Count",
    [TT_M_REASONING_TOKENS]  = "Reasoning Token Count",
    [TT_M_REASONING_LATENCY] = "Reasoning Latency",
    [ICL]                    = "Inter Chunk Latency",
};

/* console and export order: the SPEC's table, ICL after ITL */
static const int order[NMETRIC] = {
    TT_M_TTFT, TT_M_TTST, TT_M_TTFO, TT_M_REQUEST_LATENCY, TT_M_ITL, ICL,
    TT_M_OTPS_USER, TT_M_ISL, TT_M_OSL, TT_M_OUTPUT_TOKENS,
    TT_M_REASONING_TOKENS, TT_M_REASONING_LATENCY,
};

static const char *tag_of(int m)
{
    return m == ICL ? "inter_chunk_latency" : tt_metric_tag[m];
}

static const char *unit_of(int m)
{
    return m == ICL ? "ms" : tt_metric_unit[m];
}

static const char *const pct_names[TT_RPT_NPCT] = {
    "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
};

/* ---- options ---- */

struct ropts {
    const char **files;
    int          nfiles;
    const char **cmp;
    int          ncmp;
    const char  *goodput, *export_dir, *trace, *plot;
    struct tt_rfilter f;
    size_t       max_exact;
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
"Exit status: 0 ok, 1 an output could not be written or an input failed\n"
"mid-read, 2 bad arguments or unreadable input.\n",
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
            "--plot", "--max-exact",
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
        }
    }
    if (o->nfiles == 0)
        return bad("%s%s", "no record files given", "");
    if (o->f.since_ns > o->f.until_ns)
        return bad("%s%s", "--since is after --until", "");
    return 0;
}

/* ---- number formatting ---- */

/* "1,234.56" (decimals 2) or "1,234" (decimals 0); "N/A" for NaN */
static void fmt_num(char *buf, size_t len, double v, int decimals)
{
    char tmp[64], *p;
    int neg, n;

    if (!isfinite(v)) {
        snprintf(buf, len, "N/A");
        return;
    }
    neg = v < 0;
    snprintf(tmp, sizeof(tmp), "%.*f", decimals, fabs(v));
    p = strchr(tmp, '.');
    n = p ? (int)(p - tmp) : (int)strlen(tmp);
    /* the digits before the point, grouped by three */
    char out[96];
    int o = 0;
    if (neg && strspn(tmp, "0.") != strlen(tmp))
        out[o++] = '-';
    for (int i = 0; i < n; i++) {
        out[o++] = tmp[i];
        if ((n - i - 1) % 3 == 0 && i != n - 1)
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
#define TMAXR 160
#define TCELL 200

struct table {
    const char *title;
    int         ncols, nrows;
    int         left[TMAXC];     /* left-aligned columns */
    char        hdr[TMAXC][48];
    char        (*cell)[TMAXC][TCELL];
    int         rule_after[TMAXR];
};

static struct table *table_new(const char *title, int ncols)
{
    struct table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->cell = calloc(TMAXR, sizeof(*t->cell));
    if (t->cell == NULL) {
        free(t);
        return NULL;
    }
    t->title = title;
    t->ncols = ncols;
    t->left[0] = 1;
    return t;
}

static void table_free(struct table *t)
{
    if (t) {
        free(t->cell);
        free(t);
    }
}

static int table_row(struct table *t)
{
    if (t->nrows == TMAXR)
        return TMAXR - 1;           /* overwrite the last: never overflow */
    return t->nrows++;
}

static void put_rep(FILE *out, const char *s, int n)
{
    for (int i = 0; i < n; i++)
        fputs(s, out);
}

static void table_rule(FILE *out, const struct table *t, const int *w,
                       const char *l, const char *m, const char *r, const char *h)
{
    fputs(l, out);
    for (int c = 0; c < t->ncols; c++) {
        put_rep(out, h, w[c] + 2);
        fputs(c == t->ncols - 1 ? r : m, out);
    }
    fputc('\n', out);
}

/* rich's HEAVY_HEAD box, as AIPerf's console tables */
static void table_print(FILE *out, const struct table *t)
{
    int w[TMAXC] = { 0 }, total = 0;

    for (int c = 0; c < t->ncols; c++) {
        w[c] = (int)strlen(t->hdr[c]);
        for (int r = 0; r < t->nrows; r++)
            if ((int)strlen(t->cell[r][c]) > w[c])
                w[c] = (int)strlen(t->cell[r][c]);
        total += w[c] + 3;
    }
    if (t->title) {
        int pad = (total + 1 - (int)strlen(t->title)) / 2;
        fprintf(out, "%*s%s\n", pad > 0 ? pad : 0, "", t->title);
    }
    table_rule(out, t, w, "\u250f", "\u2533", "\u2513", "\u2501");
    fputs("\u2503", out);
    for (int c = 0; c < t->ncols; c++)
        fprintf(out, t->left[c] ? " %-*s \u2503" : " %*s \u2503", w[c], t->hdr[c]);
    fputc('\n', out);
    table_rule(out, t, w, "\u2521", "\u2547", "\u2529", "\u2501");
    for (int r = 0; r < t->nrows; r++) {
        fputs("\u2502", out);
        for (int c = 0; c < t->ncols; c++)
            fprintf(out, t->left[c] ? " %-*s \u2502" : " %*s \u2502", w[c], t->cell[r][c]);
        fputc('\n', out);
        if (t->rule_after[r] && r != t->nrows - 1)
            table_rule(out, t, w, "\u251c", "\u253c", "\u2524", "\u2500");
    }
    table_rule(out, t, w, "\u2514", "\u2534", "\u2518", "\u2500");
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
    c->errors = s->errors;
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

static void stat_cells(char (*row)[TCELL], const struct tt_rsummary *s)
{
    /* avg min max p1..p99 std count, markers on percentiles */
    int c = 0;
    fmt_num(row[c++], TCELL, s->avg, 2);
    fmt_num(row[c++], TCELL, s->min, 2);
    fmt_num(row[c++], TCELL, s->max, 2);
    for (int i = 0; i < TT_RPT_NPCT; i++) {
        char v[64];
        fmt_num(v, sizeof(v), s->pct[i], 2);
        snprintf(row[c++], TCELL, "%s%s%s", s->exact ? "" : "~", v,
                 tt_pct_low_sample(s->count, tt_rpt_pcts[i]) ? "*" : "");
    }
    fmt_num(row[c++], TCELL, s->std, 2);
    fmt_count(row[c++], TCELL, s->count);
}

static void stat_headers(struct table *t, int first)
{
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
    fprintf(out, "%s: %llu records (%llu ok, %llu errors) from %s; %llu lines, %llu malformed, %llu filtered out\n",
            s->label, (unsigned long long)s->records, (unsigned long long)s->valid,
            (unsigned long long)s->errors, files, (unsigned long long)s->lines,
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
        stat_cells(&t->cell[r][1], &ms->s[m]);
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
        snprintf(t->cell[r][1], TCELL, "N/A (no SLO: pass --goodput)");
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Good Request Count (requests)");
    if (c->have_good)
        fmt_count(t->cell[r][1], TCELL, c->good);
    else
        snprintf(t->cell[r][1], TCELL, "N/A");
    r = table_row(t);
    snprintf(t->cell[r][0], TCELL, "Good Request Fraction");
    if (c->have_good && c->records > 0) {
        fmt_num(a, sizeof(a), c->frac, 4);
        fmt_num(b, sizeof(b), c->lo, 4);
        fmt_num(d, sizeof(d), c->hi, 4);
        snprintf(t->cell[r][1], TCELL, "%s [95%% CI %s, %s] (%llu/%llu)", a, b, d,
                 (unsigned long long)c->good, (unsigned long long)c->records);
    } else {
        snprintf(t->cell[r][1], TCELL, "N/A");
    }
    table_print(out, t);
    table_free(t);
}

static void print_errors(FILE *out, const struct tt_rset *s)
{
    if (s->errors == 0) {
        fprintf(out, "Errors: none\n");
        return;
    }
    struct table *t = table_new("Errors by type", 4);
    if (t == NULL)
        return;
    snprintf(t->hdr[0], 48, "Type");
    snprintf(t->hdr[1], 48, "Code");
    snprintf(t->hdr[2], 48, "Count");
    snprintf(t->hdr[3], 48, "First message");
    t->left[3] = 1;
    /* most frequent first */
    unsigned idx[TT_RPT_TABLE];
    for (unsigned i = 0; i < s->errtypes.n; i++)
        idx[i] = i;
    for (unsigned i = 1; i < s->errtypes.n; i++)
        for (unsigned j = i; j > 0 && s->errtypes.e[idx[j]].count > s->errtypes.e[idx[j - 1]].count; j--) {
            unsigned x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    for (unsigned i = 0; i < s->errtypes.n; i++) {
        const struct tt_rcount *e = &s->errtypes.e[idx[i]];
        int r = table_row(t);
        snprintf(t->cell[r][0], TCELL, "%s", e->name);
        if (e->code)
            snprintf(t->cell[r][1], TCELL, "%d", e->code);
        fmt_count(t->cell[r][2], TCELL, e->count);
        snprintf(t->cell[r][3], TCELL, "%.60s", e->detail);
    }
    table_print(out, t);
    table_free(t);
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
        fprintf(out, "* too few samples for this percentile: pXX needs at least 100/min(XX,100-XX) "
                     "(p99/p1: 100, p95/p5: 20, p90/p10: 10, p75/p25: 4, p50: 2); the value is "
                     "interpolated towards the sample's extreme, not an observed tail.\n");
    if (approx)
        fprintf(out, "~ approximate: nearest rank from a log-linear histogram, <= 0.78%% relative error.\n");
}

/* ---- comparison ---- */

static void rel_cell(char *buf, size_t len, double a, double b)
{
    char v[64];
    if (!isfinite(a) || !isfinite(b) || a == 0) {
        snprintf(buf, len, "N/A");
        return;
    }
    fmt_num(v, sizeof(v), (b - a) / fabs(a) * 100, 2);
    snprintf(buf, len, "%s%s%%", (b - a) > 0 ? "+" : "", v);
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
    stat_headers(t, 2);
    for (int k = 0; k < NMETRIC; k++) {
        int m = order[k];
        const struct tt_rsummary *a = &ma->s[m], *b = &mb->s[m];
        if (a->count == 0 && b->count == 0)
            continue;
        int r = table_row(t);
        metric_label(t->cell[r][0], TCELL, m);
        snprintf(t->cell[r][1], TCELL, "A");
        stat_cells(&t->cell[r][2], a);
        r = table_row(t);
        snprintf(t->cell[r][1], TCELL, "B");
        stat_cells(&t->cell[r][2], b);

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
        snprintf(t->cell[rr][1], TCELL, "B/A-1");
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
    snprintf(t->hdr[4], 48, "B/A-1");
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
    snprintf(t->cell[r][0], TCELL, "Good Request Fraction 95%% CI (Wilson)");
    if (a->have_good)
        snprintf(t->cell[r][1], TCELL, "[%.4f, %.4f]", a->lo, a->hi);
    else
        snprintf(t->cell[r][1], TCELL, "N/A");
    if (b->have_good)
        snprintf(t->cell[r][2], TCELL, "[%.4f, %.4f]", b->lo, b->hi);
    else
        snprintf(t->cell[r][2], TCELL, "N/A");
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
    snprintf(t->hdr[5], 48, "coverage");
    snprintf(t->hdr[6], 48, "median d/A");
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
            snprintf(t->cell[r][5], TCELL, "%.1f%%", cov * 100);
        } else {
            snprintf(t->cell[r][3], TCELL, "N/A (n<6)");
            snprintf(t->cell[r][4], TCELL, "N/A");
            snprintf(t->cell[r][5], TCELL, "-");
        }
        if (nr > 0) {
            char v[64];
            double x = tt_pct_linear_d(rel, nr, 50) * 100;
            fmt_num(v, sizeof(v), x, 2);
            snprintf(t->cell[r][6], TCELL, "%s%s%%", x > 0 ? "+" : "", v);
        } else {
            snprintf(t->cell[r][6], TCELL, "N/A");
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

static cJSON *num_or_null(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static cJSON *metric_block(const struct tt_rsummary *s, const char *unit)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", unit);
    cJSON_AddItemToObject(o, "avg", num_or_null(s->avg));
    cJSON_AddItemToObject(o, "min", num_or_null(s->min));
    cJSON_AddItemToObject(o, "max", num_or_null(s->max));
    for (int i = 0; i < TT_RPT_NPCT; i++)
        cJSON_AddItemToObject(o, pct_names[i], num_or_null(s->pct[i]));
    cJSON_AddItemToObject(o, "std", num_or_null(s->std));
    cJSON_AddNumberToObject(o, "count", (double)s->count);
    cJSON_AddItemToObject(o, "sum", num_or_null(s->sum));
    return o;
}

static cJSON *scalar_block(double v, const char *unit)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", unit);
    cJSON_AddItemToObject(o, "avg", num_or_null(v));
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
                         const char *goodput, char *err, size_t errlen)
{
    char path[4096], tbuf[64];
    cJSON *root = cJSON_CreateObject();
    int rc = 0;

    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        cJSON_Delete(root);
        return -1;
    }

    /* --- JSON: AIPerf's JsonExportData shape (schema 1.1 metric blocks) --- */
    cJSON_AddStringToObject(root, "schema_version", "1.1");
    cJSON_AddStringToObject(root, "tokentap_version", TT_VERSION);
    if (s->first_start_ns != INT64_MAX) {
        iso_time(tbuf, sizeof(tbuf), s->first_start_ns);
        cJSON_AddStringToObject(root, "start_time", tbuf);
        iso_time(tbuf, sizeof(tbuf), s->last_end_ns);
        cJSON_AddStringToObject(root, "end_time", tbuf);
    }
    cJSON_AddBoolToObject(root, "was_cancelled", 0);
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

static void join(char *buf, size_t len, const char **v, int n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", v[i]);
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

    a = malloc(sizeof(*a));
    ma = malloc(sizeof(*ma));
    if (o.ncmp) {
        b = malloc(sizeof(*b));
        mb = malloc(sizeof(*mb));
    }
    if (a == NULL || ma == NULL || (o.ncmp && (b == NULL || mb == NULL))) {
        fprintf(stderr, "tokentap report: out of memory\n");
        free(a);
        free(b);
        a = b = NULL;
        rc = 1;
        goto out;
    }
    tt_rset_init(a, o.ncmp ? "A" : "Records", o.max_exact, &o.f, &judge);
    if (b)
        tt_rset_init(b, "B", o.max_exact, &o.f, &judge);
    join(fa, sizeof(fa), o.files, o.nfiles);
    join(fb, sizeof(fb), o.cmp, o.ncmp);

    if ((rc = read_set(a, o.files, o.nfiles)) != 0)
        goto out;
    if (b && (rc = read_set(b, o.cmp, o.ncmp)) != 0)
        goto out;

    summarize(a, ma);
    compute_scalars(a, &ca);
    if (b) {
        summarize(b, mb);
        compute_scalars(b, &cb);
    }

    FILE *out = stdout;
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
    print_footnotes(out, ma, mb);

    rc = 0;
    if (o.export_dir) {
        if (export_aiperf(o.export_dir, a, ma, &ca, fa, o.goodput, err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: --export: %s\n", err);
            rc = 1;
        } else {
            fprintf(out, "Exported %s/profile_export_aiperf.json and %s/profile_export_aiperf.csv%s\n",
                    o.export_dir, o.export_dir, b ? " (set A)" : "");
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
        if (tt_report_plot(o.plot, a, b, judge.have_spec ? &judge.slo : NULL,
                           b ? "tokentap report: A vs B" : "tokentap report",
                           err, sizeof(err)) < 0) {
            fprintf(stderr, "tokentap report: --plot: %s\n", err);
            rc = 1;
        } else {
            fprintf(out, "Plots written to %s\n", o.plot);
        }
    }
    fflush(out);
    if (ferror(out))
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
