/*
 * --inject-usage on the wire, see usagewire.h.  Called by proxy/http/conn.c and
 * proxy/http/leg.c; owns the response filter (one per rewritten response).
 */
#include "proxy/http/usagewire.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "proxy/http/inspect.h"

int tt_usagewire_hold(int inject_usage, enum tt_api api, const struct tt_head *rqh,
                      int has_body)
{
    size_t len;
    const char *v;

    if (!inject_usage || !has_body ||
        (api != TT_API_OPENAI_CHAT && api != TT_API_OPENAI_COMPLETIONS))
        return 0;
    /* a client waiting for 100 Continue would wait for a head we hold */
    v = tt_head_get(rqh, "expect", &len);
    return v == NULL;
}

long long tt_usagewire_rewrite(const struct tt_inspect *insp, struct evbuffer *held)
{
    const char *body;
    size_t len, n, old;
    char *out;

    if (tt_inspect_body(insp, &body, &len) < 0 ||
        tt_inject_request(body, len, &out, &n) != 1)
        return -1;
    old = evbuffer_get_length(held);
    if (evbuffer_add(held, out, n) < 0) {
        free(out);
        return -1;                  /* the client's bytes go as they are */
    }
    free(out);
    evbuffer_drain(held, old);
    return (long long)n;
}

struct tt_usagewire_out *tt_usagewire_response(int status, const struct tt_head *rsh,
                                               struct evbuffer *out, int chunked,
                                               uint64_t *bytes)
{
    static const char sse[] = "text/event-stream";
    struct tt_usagewire_out *o;
    const char *ct;
    size_t len;

    if (status < 200 || status > 299)
        return NULL;
    ct = tt_head_get(rsh, "content-type", &len);
    if (ct == NULL || len < sizeof(sse) - 1 || strncasecmp(ct, sse, sizeof(sse) - 1) != 0 ||
        (len > sizeof(sse) - 1 && ct[sizeof(sse) - 1] != ';' && ct[sizeof(sse) - 1] != ' '))
        return NULL;
    if ((o = calloc(1, sizeof(*o))) == NULL)
        return NULL;
    /* "usage": null stays: TGI and SGLang send it whether asked or not */
    tt_inject_filter_init(&o->f, 0);
    o->out = out;
    o->chunked = chunked;
    o->bytes = bytes;
    return o;
}

int tt_usagewire_head(const struct tt_usagewire_out *o, const struct tt_head *rsh)
{
    static const char *const framing[] = { "content-length" };
    static const size_t lens[] = { 14 };

    if (tt_head_copy_fields_skip(rsh, o->out, TT_HEAD_RESPONSE, 0, 1, framing, lens, 1) < 0)
        return -1;
    return o->chunked ? evbuffer_add(o->out, "Transfer-Encoding: chunked\r\n", 28) : 0;
}

/* filtered bytes out: one chunk each */
static void emit(void *ctx, const char *p, size_t n)
{
    struct tt_usagewire_out *o = ctx;

    if (n == 0)
        return;
    *o->bytes += n;
    if (o->chunked)
        evbuffer_add_printf(o->out, "%zx\r\n", n);
    evbuffer_add(o->out, p, n);
    if (o->chunked)
        evbuffer_add(o->out, "\r\n", 2);
}

void tt_usagewire_feed(struct tt_usagewire_out *o, const char *p, size_t n)
{
    tt_inject_filter_feed(&o->f, p, n, emit, o);
}

void tt_usagewire_finish(struct tt_usagewire_out *o)
{
    tt_inject_filter_finish(&o->f, emit, o);
    if (o->chunked)
        evbuffer_add(o->out, "0\r\n\r\n", 5);
}

void tt_usagewire_free(struct tt_usagewire_out **o)
{
    if (*o == NULL)
        return;
    tt_inject_filter_free(&(*o)->f);
    free(*o);
    *o = NULL;
}
