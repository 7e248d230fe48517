/*
 * Man page writing, so that the pages are generated from the same tables
 * and texts as --help and the two cannot drift: tokentap(1) is composed by
 * proxy/server/main.c from the option table (proxy/config/config.c, tt_config_man) and
 * the report's --help (metrics/report/report.c), tokentap-sim(1) by sim/main.c
 * from the simulator's --help.  `tokentap --man` and `tokentap-sim --man`
 * print them; the Makefile writes them into the build directory for
 * install.
 */
#ifndef TT_MAN_H
#define TT_MAN_H

#include <stdio.h>

/* .TH and the NAME section */
void tt_man_header(FILE *out, const char *name, const char *version,
                   const char *summary);

/* <s> as roff text: backslashes, leading dots/quotes and dashes escaped */
void tt_man_text(FILE *out, const char *s);

/* one tagged paragraph: the flag in bold, <arg> in italics, then <help> */
void tt_man_option(FILE *out, const char *flag, const char *arg,
                   const char *help);

/*
 * A --help text as roff: lines "  --flag ARG   help" (or "  -h, --help")
 * become tagged paragraphs, more deeply indented lines continue the help,
 * other lines become running text (blank lines: paragraph breaks).  The
 * first "usage:" line is skipped (the caller writes a SYNOPSIS).
 */
void tt_man_from_help(FILE *out, const char *help);

#endif
