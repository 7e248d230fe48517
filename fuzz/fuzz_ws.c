/*
 * libFuzzer harness for proxy/decode/ws.c.  The first bytes choose the case:
 *
 *   0  bit 0 the client's direction (masked), bit 1 permessage-deflate,
 *      bit 2 no context takeover, bits 3..5 window bits 8..15,
 *      bit 6 round trip instead of raw frames
 *   1  the seed of the split pattern
 *   2  max_msg (a few sizes)
 *
 * Raw frames: the rest is read whole and in pieces; the messages, the
 * counters and the reason to stop must agree, and the bounds hold.  Round
 * trip: the rest is cut into messages, written (compressed or not, masked
 * or not) and read back in pieces; each must come back as it went.  The
 * rest is also given to tt_ws_extensions.  Build: make fuzz.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "proxy/decode/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t maxes[8] = { 0, 1, 16, 125, 300, 1024, 4096, 1 << 20 };

struct digest {
    uint64_t h, n;
    size_t   max;
};

static void mix(struct digest *d, const void *p, size_t n)
{
    const uint8_t *q = p;
    size_t i;

    for (i = 0; i < n; i++)
        d->h = (d->h ^ q[i]) * 1099511628211ull;
    d->h = (d->h ^ 0xff) * 1099511628211ull;
}

static void on_msg(void *arg, const struct tt_ws_msg *m)
{
    struct digest *d = arg;
    uint64_t v[5];

    if (m->over ? m->data != NULL || m->len <= d->max
                : m->data == NULL || (m->len > d->max && m->op < TT_WS_CLOSE))
        abort();
    if (m->op >= TT_WS_CLOSE && (m->len > 125 || m->compressed || m->over))
        abort();
    v[0] = (uint64_t)m->op;
    v[1] = m->len;
    v[2] = m->compressed;
    v[3] = m->over;
    v[4] = m->close_code;
    mix(d, v, sizeof(v));
    if (!m->over)
        mix(d, m->data, m->len);
    d->n++;
}

static uint32_t next(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* feed <p> in pieces (seed 0: whole) */
static void feed(struct tt_ws_reader *r, const uint8_t *p, size_t n, uint32_t seed)
{
    size_t off = 0;

    while (off < n) {
        size_t k = n - off;
        int rc;

        if (seed != 0) {
            k = 1 + next(&seed) % (seed & 0x100 ? 3 : 64);
            if (k > n - off)
                k = n - off;
        }
        rc = tt_ws_reader_feed(r, p + off, k);
        if (rc != (r->why ? -1 : 0))
            abort();
        off += k;
    }
}

static void raw(const uint8_t *p, size_t n, int client, const struct tt_ws_deflate *d,
                size_t max, uint32_t seed)
{
    struct tt_ws_reader a, b;
    struct digest da = { 0, 0, max }, db = { 0, 0, max };

    tt_ws_reader_init(&a, client, d, max, on_msg, &da);
    tt_ws_reader_init(&b, client, d, max, on_msg, &db);
    feed(&a, p, n, 0);
    feed(&b, p, n, seed | 1);
    if (a.why != b.why || da.h != db.h || da.n != db.n || a.frames != b.frames ||
        a.messages != b.messages || a.overs != b.overs || a.closed != b.closed)
        abort();    /* a split changed what was read */
    if (a.cap > max || b.cap > max)
        abort();    /* memory bound */
    if (a.why != NULL && (a.buf != NULL || a.z != NULL || tt_ws_reader_feed(&a, "", 1) != -1))
        abort();    /* a stopped reader holds nothing and stays stopped */
    tt_ws_reader_free(&a);
    tt_ws_reader_free(&b);
}

#define RT_MAX 64

struct want {
    const uint8_t *p[RT_MAX];
    size_t         n[RT_MAX];
    int            op[RT_MAX];
    int            i, k, comp;
};

static void on_want(void *arg, const struct tt_ws_msg *m)
{
    struct want *w = arg;
    int i = w->i++;

    if (i >= w->k || m->over || (int)m->op != w->op[i] || m->len != w->n[i] ||
        (m->len > 0 && memcmp(m->data, w->p[i], m->len) != 0))
        abort();
    if (m->op < TT_WS_CLOSE && m->compressed != (unsigned)w->comp)
        abort();
}

static void round_trip(const uint8_t *p, size_t n, int client,
                       const struct tt_ws_deflate *t, uint32_t seed)
{
    static const int ops[4] = { TT_WS_TEXT, TT_WS_BINARY, TT_WS_PING, TT_WS_PONG };
    unsigned bits = client ? t->client_max_window_bits : t->server_max_window_bits;
    unsigned nct = client ? t->client_no_context_takeover : t->server_no_context_takeover;
    struct tt_ws_deflater *d = NULL;
    struct evbuffer *eb = evbuffer_new();
    struct tt_ws_reader r;
    struct want w;
    unsigned char key[4];
    size_t off = 0;

    if (eb == NULL)
        abort();
    memset(&w, 0, sizeof(w));
    w.comp = t->on;
    if (t->on && (d = tt_ws_deflater_new((int)bits, (int)nct)) == NULL)
        abort();
    /* each message: a byte for its length and op, then its bytes */
    while (off < n && w.k < RT_MAX) {
        uint8_t c = p[off++];
        size_t len = (size_t)(c & 0x1f) * (c & 0x20 ? 37 : 1);
        int op = ops[c >> 6];

        if (len > n - off)
            len = n - off;
        if (op >= TT_WS_CLOSE && len > 125)
            len = 125;
        memcpy(key, &seed, 4);
        key[0] = (unsigned char)(key[0] ^ (unsigned char)w.k);
        w.p[w.k] = p + off;
        w.n[w.k] = len;
        w.op[w.k] = op;
        if (tt_ws_write_msg(eb, (enum tt_ws_op)op, p + off, len, d,
                            client ? key : NULL) != 0)
            abort();
        w.k++;
        off += len;
    }
    tt_ws_reader_init(&r, client, t, 1 << 20, on_want, &w);
    feed(&r, evbuffer_pullup(eb, -1), evbuffer_get_length(eb), seed | 1);
    if (r.why != NULL || w.i != w.k)
        abort();    /* what was written did not come back */
    tt_ws_reader_free(&r);
    tt_ws_deflater_free(d);
    evbuffer_free(eb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tt_ws_deflate t, e;
    int client;
    uint32_t seed;
    size_t max;

    if (size < 3)
        return 0;
    client = data[0] & 1;
    memset(&t, 0, sizeof(t));
    t.on = (data[0] >> 1) & 1;
    t.server_max_window_bits = t.client_max_window_bits = 15;
    if (client) {
        t.client_no_context_takeover = (data[0] >> 2) & 1;
        t.client_max_window_bits = (unsigned char)(8 + ((data[0] >> 3) & 7));
    } else {
        t.server_no_context_takeover = (data[0] >> 2) & 1;
        t.server_max_window_bits = (unsigned char)(8 + ((data[0] >> 3) & 7));
    }
    seed = (uint32_t)data[1] * 2654435761u;
    max = maxes[data[2] & 7];
    if (data[0] & 0x40)
        round_trip(data + 3, size - 3, client, &t, seed);
    else
        raw(data + 3, size - 3, client, &t, max, seed);
    if (tt_ws_extensions((const char *)data + 3, size - 3, &e) == 0 && e.on &&
        (e.server_max_window_bits < 8 || e.server_max_window_bits > 15 ||
         e.client_max_window_bits < 8 || e.client_max_window_bits > 15))
        abort();
    return 0;
}
