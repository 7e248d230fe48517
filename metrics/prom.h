/*
 * The small pieces of the Prometheus text format (0.0.4) that every family
 * needs: family heads, label values, sample values and bucket bounds.
 * Shared by the aggregator's families (metrics/agg.c) and the
 * OpenTelemetry GenAI ones (metrics/semconv.c), so that both print them
 * alike.
 */
#ifndef TT_PROM_H
#define TT_PROM_H

#include <stddef.h>

struct evbuffer;

/* "# HELP <name> <help>" and "# TYPE <name> <type>" */
void   tt_prom_family(struct evbuffer *out, const char *name, const char *type,
                      const char *help);

/*
 * Escape label value <in> into <out>: backslash, double quote and newline;
 * invalid UTF-8 bytes become U+FFFD (the format is UTF-8).  Writes no NUL;
 * returns the length.  With <out> NULL only the length is computed.
 */
size_t tt_prom_escape_label(char *out, const char *in);

/* a sample value: the shortest of 15..17 significant digits that reads back
 * as <v>; +Inf, -Inf, NaN */
void   tt_prom_fmt_double(char *buf, size_t len, double v);

/* a bucket bound (the le label): 15 significant digits */
void   tt_prom_fmt_bound(char *buf, size_t len, double v);

#endif
