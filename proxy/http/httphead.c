/*
 * HTTP message heads (see httphead.h): span collection, smuggling checks,
 * hop-by-hop filtering and tokentap's own error responses.
 */
#include "proxy/http/httphead.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

int tt_head_init(struct tt_head *h, size_t limit, unsigned max_fields)
{
    memset(h, 0, sizeof(*h));
    h->limit = limit;
    h->max = max_fields;
    h->line_start = 0;
    return 0;
}

void tt_head_clear(struct tt_head *h)
{
    h->len = 0;
    h->n = 0;
    h->target = h->tlen = 0;
    h->in_value = 0;
    h->overflow = 0;
    h->obs_fold = 0;
    h->empty_name = 0;
    h->line_start = 0;
}

/*
 * The buffers of freed heads, kept for this thread's next heads: every
 * request takes a head buffer and a field table on each side, and gives
 * them back when it ends (an idle keep-alive connection holds none).  Only
 * the first size of each is kept (HEAD_BUF0 bytes; a table of the same
 * max, up to HEAD_SPARE_FIELDS), at most HEAD_SPARE of each a thread:
 * about 58 KiB a worker with max_headers 100, 96 KiB at most.  A
 * worker thread gives them back to malloc when it ends
 * (tt_head_thread_free).
 */
#define HEAD_BUF0   2048
#define HEAD_SPARE  16
#define HEAD_SPARE_FIELDS 255   /* tables of larger max_headers are not kept */

static _Thread_local struct {
    char             *buf[HEAD_SPARE];
    struct tt_hfield *f[HEAD_SPARE];
    unsigned          fmax[HEAD_SPARE];
    unsigned          nbuf, nf;
} spare;

void tt_head_thread_free(void)
{
    while (spare.nbuf > 0)
        free(spare.buf[--spare.nbuf]);
    while (spare.nf > 0)
        free(spare.f[--spare.nf]);
}

void tt_head_free(struct tt_head *h)
{
    if (h->buf != NULL && h->cap == HEAD_BUF0 && spare.nbuf < HEAD_SPARE)
        spare.buf[spare.nbuf++] = h->buf;
    else
        free(h->buf);
    if (h->f != NULL && h->max <= HEAD_SPARE_FIELDS && spare.nf < HEAD_SPARE) {
        spare.fmax[spare.nf] = h->max;
        spare.f[spare.nf++] = h->f;
    } else {
        free(h->f);
    }
    h->buf = NULL;
    h->f = NULL;
    h->cap = 0;
    tt_head_clear(h);       /* an empty head, ready to grow again */
}

/* a head without a buffer takes a spare one when <need> bytes fit it */
static int take_spare_buf(struct tt_head *h, size_t need)
{
    if (h->cap != 0 || spare.nbuf == 0 || need > HEAD_BUF0 || h->limit < HEAD_BUF0)
        return 0;
    h->buf = spare.buf[--spare.nbuf];
    h->cap = HEAD_BUF0;
    return 1;
}

static int append(struct tt_head *h, const char *at, size_t len)
{
    if (h->len + len > h->limit) {
        h->overflow = 1;
        return -1;
    }
    if (h->len + len > h->cap && !take_spare_buf(h, h->len + len)) {
        size_t cap = h->cap ? h->cap : HEAD_BUF0;
        char *p;
        while (cap < h->len + len)
            cap *= 2;
        if (cap > h->limit)
            cap = h->limit;
        p = realloc(h->buf, cap);
        if (p == NULL)
            return -1;
        h->buf = p;
        h->cap = cap;
    }
    if (len > 0)                    /* a zero-length span: buf may still be NULL */
        memcpy(h->buf + h->len, at, len);
    h->len += len;
    return 0;
}

int tt_head_target(struct tt_head *h, const char *at, size_t len)
{
    if (h->tlen == 0)
        h->target = (uint32_t)h->len;
    if (append(h, at, len) < 0)
        return -1;
    h->tlen += (uint32_t)len;
    return 0;
}

int tt_head_field(struct tt_head *h, const char *at, size_t len)
{
    if (h->f == NULL) {
        /* entries are written as fields come; none past h->n is read */
        if (spare.nf > 0 && spare.fmax[spare.nf - 1] == h->max)
            h->f = spare.f[--spare.nf];
        else if ((h->f = malloc((h->max + 1) * sizeof(*h->f))) == NULL)
            return -1;
    }
    if (h->in_value || h->n == 0) {
        /* a new field starts */
        if (h->n >= h->max) {
            h->overflow = 1;
            return -1;
        }
        h->f[h->n].name = (uint32_t)h->len;
        h->f[h->n].nlen = 0;
        h->f[h->n].val = 0;
        h->f[h->n].vlen = 0;
        h->n++;
        h->in_value = 0;
    }
    if (append(h, at, len) < 0)
        return -1;
    h->f[h->n - 1].nlen += (uint32_t)len;
    return 0;
}

int tt_head_value(struct tt_head *h, const char *at, size_t len)
{
    struct tt_hfield *f;

    if (h->n == 0)
        return -1;
    f = &h->f[h->n - 1];
    if (!h->in_value) {
        f->val = (uint32_t)h->len;
        f->vlen = 0;
        h->in_value = 1;
    }
    if (append(h, at, len) < 0)
        return -1;
    f->vlen += (uint32_t)len;
    return 0;
}

/* the first byte of a line: SP or HT is obs-fold, ':' an empty name */
static void line_first(struct tt_head *h, char c)
{
    if (c == ' ' || c == '\t')
        h->obs_fold = 1;
    else if (c == ':')
        h->empty_name = 1;
}

/* only the byte after each LF matters: memchr from line end to line end,
 * not a test of every byte (a head's lines average some 30 bytes) */
void tt_head_scan(struct tt_head *h, const char *p, size_t len)
{
    const char *end = p + len, *q = p;

    if (len == 0)
        return;
    if (h->line_start)
        line_first(h, *p);
    while ((q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        if (++q == end) {
            h->line_start = 1;
            return;
        }
        line_first(h, *q);
    }
    h->line_start = 0;
}

static int name_is(const struct tt_head *h, const struct tt_hfield *f,
                   const char *name)
{
    size_t n = strlen(name);
    return f->nlen == n && strncasecmp(h->buf + f->name, name, n) == 0;
}

/* the fields the proxy treats specially, told apart by one comparison
 * after a switch on the name's length (case-insensitive) */
enum hkind {
    HK_OTHER, HK_CONTENT_LENGTH, HK_TRANSFER_ENCODING, HK_CONNECTION,
    HK_KEEP_ALIVE, HK_PROXY_CONNECTION, HK_TE, HK_TRAILER, HK_UPGRADE, HK_HOST,
    HK_HTTP2_SETTINGS
};

static enum hkind kind_of(const char *n, size_t len)
{
#define IS(s) (strncasecmp(n, s, sizeof(s) - 1) == 0)
    switch (len) {
    case 2:  return IS("te") ? HK_TE : HK_OTHER;
    case 4:  return IS("host") ? HK_HOST : HK_OTHER;
    case 7:  return IS("upgrade") ? HK_UPGRADE : IS("trailer") ? HK_TRAILER : HK_OTHER;
    case 10: return IS("connection") ? HK_CONNECTION :
                    IS("keep-alive") ? HK_KEEP_ALIVE : HK_OTHER;
    case 14: return IS("content-length") ? HK_CONTENT_LENGTH :
                    IS("http2-settings") ? HK_HTTP2_SETTINGS : HK_OTHER;
    case 16: return IS("proxy-connection") ? HK_PROXY_CONNECTION : HK_OTHER;
    case 17: return IS("transfer-encoding") ? HK_TRANSFER_ENCODING : HK_OTHER;
    default: return HK_OTHER;
    }
#undef IS
}

static enum hkind field_kind(const struct tt_head *h, const struct tt_hfield *f)
{
    return kind_of(h->buf + f->name, f->nlen);
}

const char *tt_head_get(const struct tt_head *h, const char *name,
                        size_t *vlen)
{
    unsigned i;

    for (i = 0; i < h->n; i++) {
        if (name_is(h, &h->f[i], name)) {
            if (vlen)
                *vlen = h->f[i].vlen;
            return h->buf + h->f[i].val;
        }
    }
    return NULL;
}

const char *tt_head_lookup(const void *h, const char *name, size_t *vlen)
{
    return tt_head_get(h, name, vlen);
}

/* does the comma-separated list <v,len> contain <token,tl>? */
static int list_has_n(const char *v, size_t len, const char *token, size_t tl)
{
    size_t i = 0;

    while (i < len) {
        size_t s, e;
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        s = i;
        while (i < len && v[i] != ',')
            i++;
        e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tl && strncasecmp(v + s, token, tl) == 0)
            return 1;
    }
    return 0;
}

static int list_has(const char *v, size_t len, const char *token)
{
    return list_has_n(v, len, token, strlen(token));
}

int tt_head_has_token(const struct tt_head *h, const char *name,
                      const char *token)
{
    unsigned i;

    for (i = 0; i < h->n; i++)
        if (name_is(h, &h->f[i], name) &&
            list_has(h->buf + h->f[i].val, h->f[i].vlen, token))
            return 1;
    return 0;
}

int tt_head_upgrade_h2c(const struct tt_head *h)
{
    unsigned i;
    int h2c = 0;

    for (i = 0; i < h->n; i++) {
        const struct tt_hfield *f = &h->f[i];
        const char *v = h->buf + f->val;
        size_t len = f->vlen, j = 0;

        if (field_kind(h, f) != HK_UPGRADE)
            continue;
        while (j < len) {       /* every token of every Upgrade field */
            size_t s, e;
            while (j < len && (v[j] == ' ' || v[j] == '\t' || v[j] == ','))
                j++;
            s = j;
            while (j < len && v[j] != ',')
                j++;
            e = j;
            while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
                e--;
            if (e == s)
                continue;
            if (e - s != 3 || strncasecmp(v + s, "h2c", 3) != 0)
                return 0;       /* another protocol is asked for too */
            h2c = 1;
        }
    }
    return h2c;
}

/*
 * Framing headers a Connection header may not name: the body is forwarded,
 * so dropping its framing as a hop-by-hop field (RFC 9110 7.6.1) would let
 * the next hop frame it differently, and keeping it would not honour the
 * sender's Connection; the message is refused instead.
 */
static const char *const framing_names[] = {
    "content-length", "transfer-encoding", NULL
};

static const char *framing_error(const struct tt_head *h)
{
    unsigned i, k, ncl = 0, nte = 0;
    const struct tt_hfield *te = NULL;

    if (h->obs_fold)
        return "obsolete line folding in header";
    if (h->empty_name)
        return "empty header name";
    for (i = 0; i < h->n; i++) {
        const struct tt_hfield *f = &h->f[i];
        enum hkind kind;
        if (f->nlen == 0)
            return "empty header name";
        kind = field_kind(h, f);
        if (kind == HK_CONTENT_LENGTH) {
            const char *v = h->buf + f->val;
            if (++ncl > 1)
                return "duplicate Content-Length";
            if (f->vlen == 0 || f->vlen > 18)
                return "invalid Content-Length";
            for (k = 0; k < f->vlen; k++)
                if (!isdigit((unsigned char)v[k]))
                    return "invalid Content-Length";
            /* 1*DIGIT allows "0005", but readers that take a leading 0
             * as octal or stop at it would frame the body differently */
            if (f->vlen > 1 && v[0] == '0')
                return "Content-Length with leading zeros";
        } else if (kind == HK_TRANSFER_ENCODING) {
            if (++nte > 1)
                return "repeated Transfer-Encoding";
            te = f;
        } else if (kind == HK_CONNECTION) {
            for (k = 0; framing_names[k] != NULL; k++)
                if (list_has(h->buf + f->val, f->vlen, framing_names[k]))
                    return "Connection names a framing header";
        }
    }
    if (ncl && nte)
        return "Content-Length with Transfer-Encoding";
    if (te != NULL &&
        !(te->vlen == 7 && strncasecmp(h->buf + te->val, "chunked", 7) == 0))
        return "unsupported Transfer-Encoding";
    return NULL;
}

const char *tt_head_check(const struct tt_head *h, enum tt_head_dir dir,
                          int major, int minor)
{
    const char *why = framing_error(h);

    if (why != NULL)
        return why;
    /* HTTP/0.9 has no head to check and HTTP/2 is not a text protocol:
     * forwarding either as HTTP/1.1 would be a rewrite nobody asked for */
    if (major != 1 || (minor != 0 && minor != 1))
        return "unsupported HTTP version";
    /* a fragment is never sent (RFC 9112 3.2): a target that carries one
     * is read differently by servers that cut it and servers that do not */
    if (dir == TT_HEAD_REQUEST &&
        memchr(h->buf + h->target, '#', h->tlen) != NULL)
        return "fragment in request target";
    return NULL;
}

int tt_head_copy_fields(const struct tt_head *h, struct evbuffer *out,
                        enum tt_head_dir dir, int keep_upgrade, int drop_te)
{
    return tt_head_copy_fields_skip(h, out, dir, keep_upgrade, drop_te, NULL, NULL, 0);
}

/* the fields are gathered in <buf> and added to <out> a buffer at a time,
 * not four evbuffer_add calls a field */
struct stage {
    struct evbuffer *out;
    size_t           len;
    int              err;
    char             buf[1024];
};

static void stage_flush(struct stage *st)
{
    if (st->len > 0 && evbuffer_add(st->out, st->buf, st->len) < 0)
        st->err = 1;
    st->len = 0;
}

static void stage_add(struct stage *st, const char *p, size_t n);

/* "name: value\r\n": two copies and four bytes when it fits */
static void stage_field(struct stage *st, const char *name, size_t nlen,
                        const char *val, size_t vlen)
{
    char *o;

    if (nlen + vlen + 4 > sizeof(st->buf) - st->len) {
        stage_add(st, name, nlen);
        stage_add(st, ": ", 2);
        stage_add(st, val, vlen);
        stage_add(st, "\r\n", 2);
        return;
    }
    o = st->buf + st->len;
    if (nlen > 0)
        memcpy(o, name, nlen);
    o += nlen;
    *o++ = ':';
    *o++ = ' ';
    if (vlen > 0)
        memcpy(o, val, vlen);
    o += vlen;
    *o++ = '\r';
    *o++ = '\n';
    st->len = (size_t)(o - st->buf);
}

static void stage_add(struct stage *st, const char *p, size_t n)
{
    if (st->len + n > sizeof(st->buf)) {
        stage_flush(st);
        if (n > sizeof(st->buf)) {
            if (evbuffer_add(st->out, p, n) < 0)
                st->err = 1;
            return;
        }
    }
    memcpy(st->buf + st->len, p, n);
    st->len += n;
}

int tt_head_copy_fields_skip(const struct tt_head *h, struct evbuffer *out,
                             enum tt_head_dir dir, int keep_upgrade, int drop_te,
                             const char *const *names, const size_t *lens,
                             unsigned nnames)
{
    /* the kinds of the first fields, found once (a head has rarely more);
     * the rest are found when met */
    uint8_t kinds[64];
    unsigned i, k, nconn = 0, conn[16];     /* the Connection fields */
    struct stage st;

    st.out = out;
    st.len = 0;
    st.err = 0;
    for (i = 0; i < h->n; i++) {
        enum hkind kind = field_kind(h, &h->f[i]);
        if (i < sizeof(kinds))
            kinds[i] = (uint8_t)kind;
        if (kind == HK_CONNECTION && nconn++ < 16)
            conn[nconn - 1] = i;
    }
    for (i = 0; i < h->n; i++) {
        const struct tt_hfield *f = &h->f[i];
        const char *fname = h->buf + f->name;
        enum hkind kind = i < sizeof(kinds) ? (enum hkind)kinds[i] : field_kind(h, f);
        int skip;

        switch (kind) {
        case HK_CONNECTION: case HK_KEEP_ALIVE: case HK_PROXY_CONNECTION:
        case HK_TE: case HK_TRAILER: case HK_HTTP2_SETTINGS:
            skip = 1;
            break;
        case HK_UPGRADE:
            skip = !keep_upgrade;
            break;
        case HK_HOST:
            skip = dir != TT_HEAD_RESPONSE;
            break;
        case HK_TRANSFER_ENCODING:
            skip = drop_te;
            break;
        default:
            skip = 0;
            break;
        }
        for (k = 0; !skip && k < nnames; k++)
            if (f->nlen == lens[k] &&
                strncasecmp(h->buf + f->name, names[k], lens[k]) == 0)
                skip = 1;
        /* fields named by Connection are hop-by-hop too (names under 128
         * bytes: a longer one names no field we know) */
        if (!skip && nconn > 0 && f->nlen < 128) {
            int few = nconn <= 16, named = 0;   /* else: look at every field */
            for (k = 0; !named && k < (few ? nconn : h->n); k++) {
                unsigned j = few ? conn[k] : k;
                if (few || field_kind(h, &h->f[j]) == HK_CONNECTION)
                    named = list_has_n(h->buf + h->f[j].val, h->f[j].vlen, fname, f->nlen);
            }
            if (named && !(keep_upgrade && kind == HK_UPGRADE))
                skip = 1;
        }
        if (skip)
            continue;
        stage_field(&st, h->buf + f->name, f->nlen, h->buf + f->val, f->vlen);
        if (st.err)
            return -1;
    }
    stage_flush(&st);
    return st.err ? -1 : 0;
}

const char *tt_status_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default:  return "Unknown";
    }
}

/* append <s> as the inside of a JSON string */
static void json_escape(struct evbuffer *out, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            evbuffer_add_printf(out, "\\%c", c);
        else if (c < 0x20)
            evbuffer_add_printf(out, "\\u%04x", c);
        else
            evbuffer_add(out, s, 1);
    }
}

void tt_error_response(struct evbuffer *out, int status, const char *type,
                       const char *code, const char *message, int close)
{
    struct evbuffer *body = evbuffer_new();

    if (body == NULL)
        return;
    evbuffer_add_printf(body, "{\"error\":{\"message\":\"");
    json_escape(body, message);
    evbuffer_add_printf(body, "\",\"type\":\"%s\",\"code\":\"%s\"}}\n",
                        type, code);
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\n"
                        "Content-Type: application/json\r\n"
                        "Content-Length: %zu\r\n"
                        "%s"
                        "\r\n",
                        status, tt_status_reason(status),
                        evbuffer_get_length(body),
                        close ? "Connection: close\r\n" : "");
    evbuffer_add_buffer(out, body);
    evbuffer_free(body);
}
