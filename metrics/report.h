/*
 * tokentap report: offline analysis of record files (SPEC sections 6, 7;
 * docs/report.md).  Owned by metrics/report.c; called by proxy/main.c for
 * `tokentap report ...` with argv[0] == "report".  Statistics live in
 * metrics/stats.c (shared with the live comparison), reading and storing records in
 * metrics/report_set.c, plots in metrics/report_plot.c.
 */
#ifndef TT_REPORT_H
#define TT_REPORT_H

#include <stdio.h>

/* returns the process exit status: 0 ok, 1 I/O failure, 2 bad arguments */
int tt_report_main(int argc, char **argv);

/* `tokentap report --help` (also the report section of tokentap(1)) */
int tt_report_usage(FILE *out);

#endif
