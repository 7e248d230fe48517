/*
 * Plots for the offline report (--plot): one self-contained SVG (inline,
 * no scripts, no network) with CDFs of TTFT, TTFO, ITL and request
 * latency (SLO limits drawn as vertical lines), the workload map (input
 * vs output length) and SLO attainment over time; an .html path wraps the
 * same SVG in a page.  Owned by metrics/report/report_plot.c, called by
 * report.c.
 */
#ifndef TT_REPORT_PLOT_H
#define TT_REPORT_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/report/report_set.h"
#include "metrics/slo.h"

/*
 * Write the plots of <a> (and <b> overlaid when not NULL) to <path>
 * (".svg": bare SVG, anything else: HTML).  <slo> (may be NULL) gives the
 * SLO lines; <slice_ns> > 0 the attainment panel's slices (--slice-duration,
 * the same as the report's over-time table), 0 automatic.  Returns 0, or -1 with <err> set.
 */
int tt_report_plot(const char *path, struct tt_rset *a, struct tt_rset *b,
                   const struct tt_slo *slo, int64_t slice_ns, const char *title,
                   char *err, size_t errlen);

#endif
