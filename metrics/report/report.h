/*
 * tokentap report: offline analysis of record files (SPEC sections 6, 7;
 * docs/report.md).  Apart from the live metrics: nothing of the proxy
 * includes metrics/report/ but proxy/server/main.c, which calls it for
 * `tokentap report ...` with argv[0] == "report".  Owned by report.c;
 * statistics live in metrics/stats.c (shared with the live comparison),
 * reading and storing records in report_set.c, timeslices in
 * report_slice.c, plots in report_plot.c.
 */
#ifndef TT_REPORT_H
#define TT_REPORT_H

#include <stdio.h>

/* returns the process exit status: 0 ok, 1 I/O failure, 2 bad arguments */
int tt_report_main(int argc, char **argv);

/* `tokentap report --help` (also the report section of tokentap(1)) */
int tt_report_usage(FILE *out);

#endif
