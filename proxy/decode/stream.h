/*
 * Stream decoding: turns a response body (after chunked framing is removed)
 * into events, and events into the request clock's facts: token events,
 * reasoning vs answer, usage, finish reason, mid-stream errors, terminal
 * marker.  A side read: it never alters or delays the bytes the client gets.
 *
 * Called by the proxy's response path (proxy/http/conn.c) on every body read.
 * The per-API decoders live in proxy/decode/dec_*.c (see proxy/decode/decode.h).
 * Writes into the tt_request it was given: r->s (struct tt_stream_stats),
 * r->ts[TT_TS_FIRST_EVENT .. TT_TS_LAST_TOKEN] and r->token_ts.
 */
#ifndef TT_STREAM_H
#define TT_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include "metrics/request.h"
#include "proxy/decode/think.h"        /* enum tt_think_mode */


/* detect the API from the request path (query string allowed) */
enum tt_api tt_api_detect(const char *path, size_t len);

struct tt_stream;   /* opaque; see proxy/decode/stream.c */

/*
 * Create a decoder for one response.  <content_type> is the response's
 * Content-Type (may be NULL).  <r> is borrowed until tt_stream_free().
 * Returns NULL on allocation failure.
 */
struct tt_stream *tt_stream_new(struct tt_request *r, enum tt_api api,
                                const char *content_type,
                                enum tt_think_mode think);

/*
 * The response headers: the server's own figures it sends there (TGI's
 * x-queue-time, x-inference-time, x-time-per-token, x-validation-time,
 * x-prompt-tokens, x-generated-tokens; OpenAI's openai-processing-ms) go to
 * r->s.server.  Called once, right after tt_stream_new(), with the upstream
 * response head.  <st> may be NULL.
 */
/* the value of header <name> (lower case) of <head>, or NULL; its length in *len */
typedef const char *tt_header_fn(const void *head, const char *name, size_t *len);
void tt_stream_head(struct tt_stream *st, tt_header_fn *get, const void *head);

/*
 * A decoder for the events of a message transport (a WebSocket turn, SPEC
 * section 13): each tt_stream_message() is one whole event, no framing.
 */
struct tt_stream *tt_stream_new_messages(struct tt_request *r, enum tt_api api,
                                         enum tt_think_mode think);
void tt_stream_message(struct tt_stream *st, const char *data, size_t len,
                       uint64_t now);

/* feed body bytes that arrived at monotonic time <now> */
void tt_stream_feed(struct tt_stream *st, const char *buf, size_t len,
                    uint64_t now);

/* the body ended; <complete> is 1 when HTTP framing says it ended properly.
 * Sets r->s.terminal/error and, for a stream without its terminal marker,
 * the request error "truncated". */
void tt_stream_end(struct tt_stream *st, int complete, uint64_t now);

void tt_stream_free(struct tt_stream *st);

/* 1 (default): decoders with a fast path read the events they recognise
 * without a cJSON tree; 0 sends every event to cJSON (tests compare the two) */
extern int tt_stream_fast;

/* the longest event decoded (max_event_bytes; set once at start, before
 * the workers run): an SSE event, an NDJSON line */
extern size_t tt_stream_event_max;

#endif
