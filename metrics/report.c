/*
 * tokentap report: offline analysis of records.  Not part of this build
 * yet; the subcommand says so instead of pretending.
 */
#include <stdio.h>

int tt_report_main(int argc, char **argv);

int tt_report_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tokentap: report is not available in this version\n");
    return 2;
}
