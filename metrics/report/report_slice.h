/*
 * Timeslices for the offline report (--slice-duration): the records of a
 * set cut into consecutive windows of one width, each with its own
 * per-metric statistics, throughput, goodput and good fraction.  Owned by
 * metrics/report/report_slice.c; used by report.c (the over-time table
 * and AIPerf's profile_export_aiperf_timeslices.{csv,json}) and by
 * report_plot.c (the attainment-over-time panel), so both read the same
 * slices.
 *
 * A record belongs to the slice holding its request_start_ns.  Slices
 * start at origin + k * width (origin 0: aligned to the clock, so 5m
 * slices start at :00, :05, ...); the first and last slice are usually
 * cut by the records' span, and rates divide by the part of the slice the
 * span covers (first request_start_ns to last request_end_ns).  Slices
 * with no request are kept (zero counts, no metric values), so the table
 * reads as a time line.  Built from the set's rows: the first
 * --max-exact records (the report warns when there were more); pooled
 * inter-chunk gaps are not kept per record, so slices carry no
 * inter_chunk_latency.
 */
#ifndef TT_REPORT_SLICE_H
#define TT_REPORT_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/report/report_set.h"

#define TT_RSLICE_MAX 100000          /* slices per set */

struct tt_rslice {
    int64_t  start_ns, end_ns;        /* [start, end) */
    double   covered_s;               /* part of the slice within the span */
    uint64_t records, valid, errors, judged, good;
    double   osl_sum;                 /* output tokens of valid records */
    struct tt_rsummary m[TT_M__COUNT];/* valid records only; count 0 = none */
};

struct tt_rslices {
    int64_t           width_ns, origin_ns;
    size_t            n;
    uint64_t          unplaced;       /* rows without a start time */
    int               have_good;      /* any verdict in the set */
    struct tt_rslice *s;
};

/*
 * Cut <set> into slices of <width_ns> starting at <origin_ns> + k*width.
 * Returns 0; -1 with <err> set when the set would need more than
 * TT_RSLICE_MAX slices or memory runs out.  An empty set gives n == 0.
 */
int tt_rslices_build(const struct tt_rset *set, int64_t width_ns,
                     int64_t origin_ns, struct tt_rslices *out, char *err,
                     size_t errlen);
void tt_rslices_free(struct tt_rslices *sl);

/* per-slice figures (NaN when the slice covers no time / has no verdicts) */
double tt_rslice_req_tput(const struct tt_rslice *s);
double tt_rslice_out_tput(const struct tt_rslice *s);
double tt_rslice_goodput(const struct tt_rslice *s, int have_good);
double tt_rslice_good_frac(const struct tt_rslice *s, int have_good);

/*
 * A duration: a number with an optional unit, "ms", "s" (default), "m",
 * "h" or "d": "300", "2.5s", "5m", "1h", "1d".  Returns 0 with <*ns> > 0,
 * or -1 (not a duration, zero, negative, or over 366 days).
 */
int tt_rpt_parse_duration(const char *s, int64_t *ns);

#endif
