/*
 * Chunked bodies without llhttp's per-chunk cost, see chunks.h.
 */
#include "proxy/decode/chunks.h"

/* a byte's value as a hex digit; 16 for any other byte */
static const unsigned char hexval[256] = {
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
     0, 1, 2, 3, 4, 5, 6, 7, 8, 9,16,16,16,16,16,16,
    16,10,11,12,13,14,15,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,10,11,12,13,14,15,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
    16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,16,
};

/* at most this many size digits are taken here (sizes under 4 GiB);
 * longer ones, leading zeros or not, are llhttp's to judge */
#define SIZE_DIGITS 8

static int no_body(llhttp_t *p, const char *at, size_t len)
{
    (void)p, (void)at, (void)len;
    return 0;
}

/* the settings' on_body (the fast path's only callback) */
static inline llhttp_data_cb body_cb(const llhttp_t *p)
{
    const llhttp_settings_t *s = p->settings;
    return s->on_body != NULL ? s->on_body : no_body;
}

int tt_chunks_on_header(struct tt_chunks *c, const llhttp_t *p)
{
    c->last = p->content_length == 0;
    return 0;
}

int tt_chunks_on_complete(struct tt_chunks *c)
{
    if (c->last)
        return 0;               /* the message ends next: llhttp's */
    c->paused = 1;
    return HPE_PAUSED;
}

/* the canonical complete chunks at the start of [q, end), each data part
 * given to <on_body>; where they end (a chunk boundary) */
static inline const unsigned char *
take(llhttp_t *p, llhttp_data_cb on_body, const unsigned char *q,
     const unsigned char *end)
{
    for (;;) {
        const unsigned char *d = q;
        const unsigned char *lim = end - q > SIZE_DIGITS ? q + SIZE_DIGITS : end;
        size_t size = 0;
        unsigned v;

        while (d < lim && (v = hexval[*d]) < 16) {
            size = size << 4 | v;
            d++;
        }
        /* a size, CRLF, the data and its CRLF, all here */
        if (size == 0 || end - d < 4 || d[0] != '\r' || d[1] != '\n')
            return q;
        d += 2;
        if ((size_t)(end - d) < size + 2 || d[size] != '\r' || d[size + 1] != '\n')
            return q;
        on_body(p, (const char *)d, size);
        q = d + size + 2;
    }
}

size_t tt_chunks_take(llhttp_t *p, const char *buf, size_t n)
{
    const unsigned char *q = (const unsigned char *)buf;

    return (size_t)(take(p, body_cb(p), q, q + n) - q);
}

enum llhttp_errno tt_chunks_execute(struct tt_chunks *c, llhttp_t *p,
                                    const char *buf, size_t n, size_t *used)
{
    const unsigned char *b = (const unsigned char *)buf;
    size_t off = 0;

    for (;;) {
        enum llhttp_errno e;
        const char *pos;

        if (c != NULL && c->edge) {
            off = (size_t)(take(p, body_cb(p), b + off, b + n) - b);
            if (off == n) {
                *used = n;
                return HPE_OK;
            }
            c->edge = 0;
        }
        e = llhttp_execute(p, buf + off, n - off);
        if (e == HPE_OK) {
            *used = n;
            return e;
        }
        pos = llhttp_get_error_pos(p);
        off = pos != NULL && pos >= buf + off && pos <= buf + n ? (size_t)(pos - buf) : off;
        if (e != HPE_PAUSED || c == NULL || !c->paused) {
            *used = off;
            return e;
        }
        /* paused at a chunk's end: between two chunks now */
        c->paused = 0;
        c->edge = 1;
        llhttp_resume(p);
    }
}
