/*
 * --inject-usage on the wire (SPEC section 11): the connection-side half
 * of proxy/http/inject.h.  Decides whether a request is held for the rewrite,
 * rewrites the held body, and carries the filtered response stream to the
 * client, re-framed.  Called by proxy/http/conn.c (request and response head)
 * and proxy/http/leg.c (the primary's body bytes); owns the response filter and
 * nothing of the connection.
 *
 * The request: when the option is on, an openai.chat or openai.completions
 * request with a body (and no Expect: 100-continue) is held until complete
 * or until it passes what the request inspector keeps (inspect_max_bytes,
 * counted as the client framed it) or the inspector gives it up (not JSON,
 * its shared budget taken), so held bytes are bounded per connection and,
 * with the inspector's copy charged, in total; then its head and body go out
 * once, to the primary and every shadow alike: rewritten with a new
 * Content-Length when tt_inject_request() applies, else the client's bytes
 * and framing unchanged.  A body over the bound is forwarded unchanged,
 * not injected.
 *
 * The response (primary only, rewritten requests only): a 2xx
 * text/event-stream body goes through the filter; the client gets it
 * chunked (HTTP/1.1) or close-delimited (HTTP/1.0), its head without
 * Content-Length / Transfer-Encoding of the upstream's.  The decoder still
 * sees the unfiltered body (proxy/http/leg.c's side copy).
 */
#ifndef TT_USAGEWIRE_H
#define TT_USAGEWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/request.h"
#include "proxy/http/httphead.h"
#include "proxy/http/inject.h"

struct evbuffer;
struct tt_inspect;

/* hold this request's body for the rewrite?  1 or 0 */
int  tt_usagewire_hold(int inject_usage, enum tt_api api, const struct tt_head *rqh,
                       int has_body);

/*
 * The held body is complete: when the inspector's copy of it is to be
 * rewritten, <held> (the client's framed bytes) is replaced by the
 * rewritten body and its length returned; else -1 and <held> is left as
 * it is.
 */
long long tt_usagewire_rewrite(const struct tt_inspect *insp, struct evbuffer *held);

/* the filtered response on its way to the client */
struct tt_usagewire_out {
    struct tt_inject_filter f;
    struct evbuffer *out;       /* borrowed: the connection's stage */
    uint64_t        *bytes;     /* borrowed: the record's bytes_out */
    int              chunked;
};

/*
 * A response with <status> and head <rsh> to a rewritten request: a new
 * filter writing to <out> (chunked or not), or NULL when the response is
 * forwarded untouched (not 2xx, not text/event-stream, out of memory).
 */
struct tt_usagewire_out *tt_usagewire_response(int status, const struct tt_head *rsh,
                                               struct evbuffer *out, int chunked,
                                               uint64_t *bytes);
/* the client's response head fields for it (framing replaced); 0 or -1 */
int  tt_usagewire_head(const struct tt_usagewire_out *o, const struct tt_head *rsh);
/* de-chunked body bytes in */
void tt_usagewire_feed(struct tt_usagewire_out *o, const char *p, size_t n);
/* the body ended: what is held, and the last chunk */
void tt_usagewire_finish(struct tt_usagewire_out *o);
/* free and clear <*o> (NULL is fine) */
void tt_usagewire_free(struct tt_usagewire_out **o);

#endif
