/*
 * The access log (--access-log FILE): one line per finished request, in
 * the log's format (logfmt or JSON lines, proxy/base/log.h):
 *
 *   ts id client method path status upstream api model stream ttft_ms
 *   latency_ms input_tokens output_tokens error
 *
 * Absent values (no TTFT, no token count, no error) are left out.  The
 * path is redacted exactly as records redact it (tt_record_redact_path);
 * no header value other than the X-Request-Id is ever written.  Lines are
 * formatted on the worker that finished the request and written by a
 * record writer (metrics/record.c) on its own thread, so a slow disk never
 * blocks an event loop.  Called by proxy/server/server.c.
 */
#ifndef TT_ACCESS_H
#define TT_ACCESS_H

#include <stddef.h>

#include "metrics/metric.h"
#include "metrics/request.h"

/*
 * The access line of <r> with metrics <m>, in <format> (enum
 * tt_log_format).  Returns a malloc'd line ending in '\n' (length in
 * <*len>), owned by the caller (normally handed to tt_recorder_submit), or
 * NULL when out of memory.
 */
char *tt_access_format(const struct tt_request *r,
                       const struct tt_metric_values *m, int format,
                       size_t *len);

/*
 * The peer address <sa> (<salen> bytes, as accept gave it) as text
 * ("127.0.0.1", "::1") into <buf>; "" when unknown (NULL, a unix socket).
 * For struct tt_request's client field.
 */
struct sockaddr;
void tt_access_peer(const struct sockaddr *sa, int salen, char *buf, size_t len);

#endif
