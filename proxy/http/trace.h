/*
 * W3C Trace Context for requests (SPEC section 14): the incoming
 * traceparent/tracestate is continued, or a new trace starts; each leg
 * gets its own span id; with --trace-propagate the upstream request
 * carries a traceparent naming the leg's span as parent.
 *
 * Owned by proxy/http/trace.c; called by proxy/http/conn.c when a request head is
 * handled, proxy/http/leg.c (shadow legs, the forwarded head) and the tests.
 */
#ifndef TT_TRACE_H
#define TT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/request.h"

struct tt_head;

/* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TT_TRACEPARENT_LEN 55

/*
 * Parse a traceparent value of <len> bytes (W3C Trace Context level 1):
 * version 2 lowercase hex, not "ff"; for version 00 exactly 55 bytes; a
 * later version may carry more after a '-' at byte 55.  The trace id (32
 * hex) and parent id (16 hex) must not be all zero.  Returns 0 with the
 * ids and flags filled, or -1 (the value is to be ignored).
 */
int tt_traceparent_parse(const char *v, size_t len, uint8_t trace_id[16],
                         uint8_t parent_id[8], uint8_t *flags);

/* "00-TRACE-SPAN-FLAGS" of <t>'s own span into <out> (NUL-terminated) */
void tt_traceparent_format(const struct tt_trace *t, char out[TT_TRACEPARENT_LEN + 1]);

/*
 * Decide the trace of a request whose head is <h>: continue its valid
 * traceparent (parent, flags, tracestate kept) or start a new trace
 * (random id, sampled); a new random span id either way.
 */
void tt_trace_begin(struct tt_trace *t, const struct tt_head *h);

/* a shadow leg of the request traced by <primary>: same trace and parent,
 * its own span id, linked to the primary's span */
void tt_trace_child(struct tt_trace *t, const struct tt_trace *primary);

/* lowercase hex of <n> bytes into <out> (2n + 1 bytes) */
void tt_hex(const uint8_t *b, size_t n, char *out);

#endif
