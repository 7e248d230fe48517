/*
 * --inject-usage, the pure parts (SPEC section 11): for an OpenAI-style
 * streaming request without stream_options.include_usage, ask the upstream
 * for usage, and take the consequences back out of the response so the
 * client receives exactly the bytes it would have received without the
 * option.  Owns no connection state; the caller (the proxy's request and
 * response paths) decides when to apply it, forwards the rewritten request
 * body, and routes the de-chunked response body through the filter.
 *
 * What the upstream does differently when asked (OpenAI, vLLM, SGLang,
 * llama.cpp): it sends usage-only chunks ("choices": [] with a "usage"
 * object, one per choice for llama.cpp, with its "timings") before
 * [DONE], and OpenAI adds "usage": null to every other chunk.  The filter
 * drops the usage-only events whole and removes a top-level "usage": null
 * member (with its comma) from the others; every other byte passes
 * unchanged and in order.  The stream decoder must see the unfiltered bytes
 * (it wants the usage), the client the filtered ones.
 */
#ifndef TT_INJECT_H
#define TT_INJECT_H

#include <stddef.h>
#include <stdint.h>

/*
 * The request body <body>[0..len) with "stream_options":{"include_usage":
 * true} added: inserted as the first member of the top-level object, or as
 * the first member of an existing stream_options object.  Every other byte
 * is unchanged.  Returns 1 with a malloc'ed <*out> (owned by the caller) of
 * <*out_len> bytes, 0 when nothing is to be done (not a JSON object, not
 * "stream": true, include_usage already present), -1 on allocation failure.
 * The caller fixes Content-Length (or re-chunks) for the new length.
 */
int tt_inject_request(const char *body, size_t len, char **out, size_t *out_len);

/* where filtered bytes go, in order */
typedef void (*tt_inject_out)(void *ctx, const char *p, size_t n);

#define TT_INJECT_EVENT_MAX (1024u * 1024)

struct tt_inject_filter {
    char    *buf;           /* the current event's raw bytes; owned */
    size_t   len, cap;
    size_t   line_len;      /* bytes of the current line so far */
    uint8_t  cr;            /* the last byte was CR */
    uint8_t  end_cr;        /* the event ended with CR: an LF may follow */
    uint8_t  passthrough;   /* an oversize event: forwarded unfiltered */
    uint8_t  strip_null;    /* remove top-level "usage": null members */
    uint32_t dropped;       /* usage-only events removed */
    uint32_t stripped;      /* "usage": null members removed */
};

/* <strip_null>: also remove "usage": null from other chunks (servers that
 * add it only when usage was asked for: OpenAI's API; TGI sends it always) */
void tt_inject_filter_init(struct tt_inject_filter *f, int strip_null);
/* de-chunked response body bytes in; filtered bytes out through <out> (an
 * event is held until its blank line, never longer) */
void tt_inject_filter_feed(struct tt_inject_filter *f, const char *p, size_t n,
                           tt_inject_out out, void *ctx);
/* the body ended: whatever is held goes out as it is */
void tt_inject_filter_finish(struct tt_inject_filter *f, tt_inject_out out, void *ctx);
void tt_inject_filter_free(struct tt_inject_filter *f);

#endif
