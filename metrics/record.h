/*
 * Records (SPEC section 7): one "tokentap.record/1" JSON line per finished
 * request, and the asynchronous line writer behind --record.  Owned by
 * metrics/record.c.  The proxy formats a line when a request finishes
 * (tt_record_format) and hands it to the writer (tt_recorder_submit);
 * main opens/closes the writer and calls tt_recorder_reopen on SIGHUP; the
 * aggregator reads tt_recorder_dropped for tokentap_records_dropped_total.
 *
 * Record shape (AIPerf profile_export.jsonl superset; absent values are
 * omitted, never zero):
 *   {"schema":"tokentap.record/1",
 *    "metadata":{x_request_id, request_start_ns, request_ack_ns (null when
 *      no response headers), request_end_ns, was_cancelled, upstream,
 *      upstream_reused, api, model (request's, else response's),
 *      response_model (when it differs), stream, method, path (secret query
 *      parameters redacted), status, finish_reason, token_count_source,
 *      timeline_ns{seen boundaries, ns since t0}, usage{input_tokens,
 *      output_tokens, reasoning_tokens: those reported}, events,
 *      token_events, reasoning_events, answer_events, parse_errors,
 *      bytes_in, bytes_out, slo{good, violations:[tags]} (SLOs only)},
 *    "metrics":{tag:{"value":x,"unit":u}, ...,
 *               "inter_chunk_latency":{"value":[ms,...],"unit":"ms"}},
 *    "error":null | {"code":n,"type":"...","message":"..."}}
 * No header other than the X-Request-Id value is ever recorded, so
 * authorization, x-api-key, api-key, cookie and set-cookie cannot appear.
 */
#ifndef TT_RECORD_H
#define TT_RECORD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/metric.h"
#include "metrics/request.h"
#include "metrics/slo.h"

#define TT_RECORD_SCHEMA "tokentap.record/1"

/*
 * Format the record of <r> with metrics <m> (from tt_metrics_compute) and
 * token count <source> (may be NULL).  <slo> is NULL when no SLO is
 * configured.  Returns a malloc'd line ending in '\n' (length in <*len>,
 * NUL-terminated after that),
 * owned by the caller (normally passed on to tt_recorder_submit), or NULL
 * when out of memory.  Strings are escaped; invalid UTF-8 becomes U+FFFD.
 */
char *tt_record_format(const struct tt_request *r,
                       const struct tt_metric_values *m, const char *source,
                       const struct tt_slo_result *slo, size_t *len);

/*
 * <path> with the values of credential query parameters (key, api_key,
 * access_token, token, sig, ...: metrics/record.c lists them; names
 * compared case-insensitively after percent-decoding, so %6Bey= is key=)
 * replaced by REDACTED, as records show it; the access log, every log line
 * that shows a path and the recent-request ring (metrics/recent.c) use the
 * same.  Writes at most <bufsize> - 1 bytes and
 * a NUL into <buf>; returns the length.
 */
#define TT_RECORD_PATH_MAX (sizeof(((struct tt_request *)0)->path) + 64)
size_t tt_record_redact_path(const char *path, char *buf, size_t bufsize);

/* <v> in decimal ending at <end> (20 bytes at most); returns where it
 * starts.  The one integer formatter of records, /stats and heads. */
char *tt_fmt_u64(char *end, uint64_t v);

/* printf's "%.15g" of <v> into <buf> (33 bytes), mostly without printf;
 * returns the length.  What records and /metrics print numbers with. */
size_t tt_fmt_g15(char *buf, double v);

/* request_end_ns (monotonic ns): the response's completion, else the
 * instant the request was over (failed or cancelled), else its last mark */
uint64_t tt_record_end_mono(const struct tt_request *r);

struct tt_recorder;

/*
 * Open the writer on <path> ("-" = stdout) with room for <queue_cap> lines
 * waiting, and start its thread.  Files are opened O_APPEND, mode 0640.
 * Returns NULL with <err> set.
 */
struct tt_recorder *tt_recorder_open(const char *path, unsigned queue_cap,
                                     char *err, size_t errlen);

/*
 * Queue <line> (owned from now on, <len> bytes ending in '\n') for writing.
 * Never blocks on I/O: when the queue is full the line is freed and counted
 * as dropped.  Thread-safe.  A NULL <line> counts as dropped (the caller's
 * formatting failed).
 */
void tt_recorder_submit(struct tt_recorder *rec, char *line, size_t len);

/* records dropped so far: queue full, out of memory or write errors */
uint64_t tt_recorder_dropped(struct tt_recorder *rec);
/* records written so far */
uint64_t tt_recorder_written(struct tt_recorder *rec);
/* lines waiting in the queue now */
unsigned tt_recorder_queued(struct tt_recorder *rec);

/*
 * Ask the writer thread to reopen the path (log rotation); returns at once.
 * Lines still queued go to the new file.  No-op for stdout.  Call from
 * normal context (a libevent signal event), not a raw signal handler.
 */
void tt_recorder_reopen(struct tt_recorder *rec);

/* block until every line queued before the call is written (or dropped) */
void tt_recorder_flush(struct tt_recorder *rec);

/*
 * The same, for at most <ms> milliseconds, or until *<stop> (may be NULL)
 * is set, say by a signal handler.  On timeout the writer gives up: what it
 * holds and what is queued is dropped, counted and logged, and the sink is
 * not written again.  Returns 0 when everything was written, -1 otherwise.
 */
int tt_recorder_flush_for(struct tt_recorder *rec, unsigned ms,
                          const volatile sig_atomic_t *stop);

/* write everything queued, stop the thread, close, free; NULL is a no-op */
void tt_recorder_close(struct tt_recorder *rec);

#endif
