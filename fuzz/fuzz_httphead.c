/*
 * libFuzzer harness for proxy/http/httphead.c: message heads parsed by llhttp
 * (strict, as the proxy builds it) into a tt_head, fed in two pieces at a
 * point the first input byte picks; its low bit picks a request or a
 * response.  Properties checked beyond "no crash": a head that
 * tt_head_check() accepts is forwarded (tt_head_copy_fields) as a head
 * that llhttp parses again, that tt_head_check() accepts again, and whose
 * body framing (chunked, Content-Length and its value, or neither) is the
 * one of the head received.  A forwarded head that frames its body
 * differently is request smuggling.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <llhttp.h>

#include "proxy/http/httphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ctx {
    struct tt_head h;
    int done;
};

static int on_target(llhttp_t *p, const char *at, size_t len)
{
    return tt_head_target(&((struct ctx *)p->data)->h, at, len) < 0 ? -1 : 0;
}

static int on_field(llhttp_t *p, const char *at, size_t len)
{
    return tt_head_field(&((struct ctx *)p->data)->h, at, len) < 0 ? -1 : 0;
}

static int on_value(llhttp_t *p, const char *at, size_t len)
{
    return tt_head_value(&((struct ctx *)p->data)->h, at, len) < 0 ? -1 : 0;
}

static int on_headers_complete(llhttp_t *p)
{
    ((struct ctx *)p->data)->done = 1;
    return HPE_PAUSED;
}

/* parse <len> bytes of a head in up to two pieces; 1 when it completed */
static int parse(llhttp_t *p, llhttp_settings_t *s, struct ctx *x,
                 enum llhttp_type type, const char *buf, size_t len,
                 size_t cut)
{
    size_t part[2] = { cut < len ? cut : len, 0 };
    const char *at = buf;

    part[1] = len - part[0];
    llhttp_settings_init(s);
    s->on_url = on_target;
    s->on_status = on_target;
    s->on_header_field = on_field;
    s->on_header_value = on_value;
    s->on_headers_complete = on_headers_complete;
    llhttp_init(p, type, s);
    p->data = x;
    for (int i = 0; i < 2 && !x->done; i++) {
        enum llhttp_errno e = llhttp_execute(p, at, part[i]);
        const char *pos = llhttp_get_error_pos(p);
        size_t used = e == HPE_OK ? part[i] : pos && pos >= at ? (size_t)(pos - at) : 0;

        tt_head_scan(&x->h, at, used);
        if (e != HPE_OK && !(e == HPE_PAUSED && x->done))
            return 0;
        at += part[i];
    }
    return x->done;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llhttp_settings_t s1, s2;
    llhttp_t p1, p2;
    struct ctx x1, x2;
    enum tt_head_dir dir;
    enum llhttp_type type;
    struct evbuffer *out;
    char *fwd;
    size_t flen;

    if (size < 1)
        return 0;
    dir = (data[0] & 1) ? TT_HEAD_RESPONSE : TT_HEAD_REQUEST;
    type = dir == TT_HEAD_REQUEST ? HTTP_REQUEST : HTTP_RESPONSE;
    memset(&x1, 0, sizeof(x1));
    memset(&x2, 0, sizeof(x2));
    tt_head_init(&x1.h, 64 * 1024, 100);
    /* the forwarded head has one field more (Host: up) than the input may */
    tt_head_init(&x2.h, 64 * 1024 + 64, 101);
    if (!parse(&p1, &s1, &x1, type, (const char *)data + 1, size - 1, data[0] >> 1) ||
        tt_head_check(&x1.h, dir, p1.http_major, p1.http_minor) != NULL)
        goto out;

    /* the head as the proxy forwards it (no upgrade, framing kept) */
    out = evbuffer_new();
    if (out == NULL)
        goto out;
    if (dir == TT_HEAD_REQUEST)
        evbuffer_add_printf(out, "%s / HTTP/1.1\r\nHost: up\r\n",
                            llhttp_method_name(llhttp_get_method(&p1)));
    else
        evbuffer_add_printf(out, "HTTP/1.1 %d x\r\n", llhttp_get_status_code(&p1));
    if (tt_head_copy_fields(&x1.h, out, dir, 0, 0) < 0) {
        evbuffer_free(out);
        goto out;
    }
    evbuffer_add(out, "\r\n", 2);
    flen = evbuffer_get_length(out);
    fwd = (char *)evbuffer_pullup(out, -1);
    if (!parse(&p2, &s2, &x2, type, fwd, flen, flen)) {
        fprintf(stderr, "forwarded head does not parse: %s\n%.*s\n",
                llhttp_get_error_reason(&p2), (int)flen, fwd);
        abort();
    }
    if (tt_head_check(&x2.h, dir, p2.http_major, p2.http_minor) != NULL) {
        fprintf(stderr, "forwarded head refused: %s\n%.*s\n",
                tt_head_check(&x2.h, dir, p2.http_major, p2.http_minor),
                (int)flen, fwd);
        abort();
    }
    if ((p1.flags & F_CHUNKED) != (p2.flags & F_CHUNKED) ||
        (p1.flags & F_CONTENT_LENGTH) != (p2.flags & F_CONTENT_LENGTH) ||
        ((p1.flags & F_CONTENT_LENGTH) && p1.content_length != p2.content_length)) {
        fprintf(stderr, "forwarded head frames the body differently:\n%.*s\n",
                (int)flen, fwd);
        abort();
    }
    evbuffer_free(out);
out:
    tt_head_free(&x1.h);
    tt_head_free(&x2.h);
    return 0;
}
