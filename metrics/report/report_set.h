/*
 * A record set for the offline report: reads tokentap records (JSONL,
 * schema "tokentap.record/1"; AIPerf profile_export.jsonl lines are read
 * too) as a stream, applies the filters, judges goodput, and keeps what
 * the report needs in bounded memory.  Owned by
 * metrics/report/report_set.c; used by report.c (tables, exports, trace,
 * comparison), report_slice.c and report_plot.c.
 *
 * Memory (per set; the comparison holds two):
 *   rows   64 bytes per record for the first <max_exact> records (one
 *          struct tt_rrow: start time, id hash, the 11 per-request
 *          metrics as float32, flags).  Beyond the cap rows are dropped,
 *          percentiles come from the histograms below (marked '~'), and
 *          the trace, plots and paired comparison see the first
 *          <max_exact> records only; the report says so.
 *   icl    4 bytes per inter-chunk gap for the first 8 * <max_exact>
 *          gaps, then the log-linear histogram only.
 *   fixed  12 log-linear histograms (14 KB each), tables of error types,
 *          schemas and token count sources (bounded, overflow counted).
 * count/sum/avg/min/max/std are always exact (running, double).
 */
#ifndef TT_REPORT_SET_H
#define TT_REPORT_SET_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/errkind.h"
#include "metrics/hist.h"
#include "metrics/metric.h"
#include "metrics/stats.h"
#include "metrics/slo.h"

#define TT_RPT_DEFAULT_MAX_EXACT 2000000u
#define TT_RPT_MAX_LINE          (64u << 20)   /* longer lines: malformed */
#define TT_RPT_TABLE             64            /* distinct names kept */

/* one record, compact */
enum {
    TT_RROW_ERROR  = 1,         /* error or cancelled */
    TT_RROW_GOOD   = 2,         /* met the SLO (judged) */
    TT_RROW_JUDGED = 4,         /* has a goodput verdict */
    TT_RROW_DUPID  = 8,         /* request id seen before in this set */
};

struct tt_rrow {
    int64_t  start_ns;          /* unix ns */
    uint64_t id;                /* FNV-1a of x_request_id, 0 = none */
    float    v[TT_M__COUNT];
    uint32_t present;           /* bit per metric (TT_M__COUNT <= 32: metric.h) */
    uint8_t  flags;
};

/* a small name -> count table (error types, schemas, sources) */
struct tt_rcount {
    char     name[96];
    char     detail[160];        /* first message seen (errors) */
    int      code;
    uint64_t count;
};

struct tt_rtable {
    unsigned         n;
    uint64_t         overflow;   /* entries that found no slot */
    struct tt_rcount e[TT_RPT_TABLE];
};

/* the errors of one kind (metrics/errkind.h), the report's grouping */
#define TT_RKIND_CODES 4
struct tt_rkind {
    uint64_t count;
    int      codes[TT_RKIND_CODES];  /* distinct codes, first seen first */
    unsigned ncodes;
    char     upstream_types[96];     /* distinct error.upstream_type, ", " */
    char     detail[160];            /* first message seen */
};

struct tt_rfilter {
    const char *model, *api, *upstream;
    int         status;          /* -1: any */
    int64_t     since_ns, until_ns;   /* INT64_MIN / INT64_MAX: open */
};

/* goodput judging: --goodput, else each record's metadata.slo */
struct tt_rjudge {
    int            have_spec;
    struct tt_slo  slo;
};

/* the pooled inter-chunk latencies */
struct tt_ricl {
    struct tt_moments mo;
    struct tt_hist    h;         /* microseconds */
    float            *v;         /* exact values while <n> <= cap */
    size_t            n, cap, limit;
    int               exact;     /* 0 once the cap was passed */
    uint64_t          requests;  /* records that contributed gaps */
};

struct tt_rset {
    const char *label;           /* "A", "B", or the file name */
    uint64_t lines, blank, malformed, filtered;
    uint64_t records;            /* accepted after filters */
    uint64_t valid;
    uint64_t errors;             /* error records, cancelled ones included */
    uint64_t cancelled;          /* of those, cancelled (was_cancelled, 499) */
    uint64_t judged, good, unjudged;
    uint64_t unit_mismatch;      /* metric values skipped: unknown unit */
    int64_t  first_start_ns, last_end_ns;
    uint64_t dup_ids;

    struct tt_moments mo[TT_M__COUNT];   /* valid records only */
    struct tt_hist    h[TT_M__COUNT];    /* same, histogram units below */
    struct tt_ricl    icl;

    struct tt_rrow *rows;
    size_t          nrows, caprows, max_exact;
    uint64_t        rows_dropped;

    struct tt_rtable errtypes;   /* name = type, code = HTTP code (the AIPerf export) */
    struct tt_rkind  errkinds[TT_EK__COUNT];   /* by error.kind (the console table) */
    struct tt_rtable schemas;
    struct tt_rtable sources;    /* valid records by token_count_source */
    struct tt_rtable upstreams;  /* every record by metadata.upstream, before filters */

    const struct tt_rfilter *filter;     /* borrowed */
    const struct tt_rjudge  *judge;      /* borrowed */
};

/* histogram unit scale per metric: value * scale, rounded (us, tokens, mtok/s) */
double tt_rset_hist_scale(int metric);

void tt_rset_init(struct tt_rset *s, const char *label, size_t max_exact,
                  const struct tt_rfilter *f, const struct tt_rjudge *j);
void tt_rset_free(struct tt_rset *s);

/*
 * Read every line of <path> ("-" = stdin) into <s>.  Malformed lines are
 * counted, never fatal.  Returns 0, or -1 with <err> set when the file
 * cannot be opened or read.
 */
int tt_rset_read_file(struct tt_rset *s, const char *path, char *err,
                      size_t errlen);

/* add one line (no trailing newline needed); for tests and the reader */
void tt_rset_add_line(struct tt_rset *s, const char *line, size_t len);

/* the per-metric summary the tables and exports print */
#define TT_RPT_NPCT 9
extern const double tt_rpt_pcts[TT_RPT_NPCT];   /* 1 5 10 25 50 75 90 95 99 */

struct tt_rsummary {
    uint64_t count;
    double   avg, min, max, sum, std;
    double   pct[TT_RPT_NPCT];
    int      exact;             /* 1: linear interpolation on the values */
};

/* summary of metric <m> (0..TT_M__COUNT-1), or TT_M__COUNT for the ICL */
void tt_rset_summary(struct tt_rset *s, int m, struct tt_rsummary *out);

/*
 * The ascending values of metric <m> over valid records that have it
 * (malloc'd, count in <*n>), for CDFs; NULL when rows were not kept or
 * none have it.  m == TT_M__COUNT: the pooled ICL (exact values only).
 */
float *tt_rset_sorted(struct tt_rset *s, int m, size_t *n);

/* span of the set in seconds (first start to last end), 0 when empty */
double tt_rset_duration_s(const struct tt_rset *s);

/* FNV-1a 64 of a request id; never 0 */
uint64_t tt_rpt_id_hash(const char *s);

/* "1700000000", "1700000000.5" or RFC 3339; 0 or -1 */
int tt_rpt_parse_time(const char *s, int64_t *ns);

#endif
