/*
 * WebSocket frames (proxy/decode/ws.c): the RFC 6455 section 5.7 and RFC 7692
 * section 7.2.3 examples byte for byte, both ways; streams of several
 * frames (masked, fragmented, pings between fragments, compressed with a
 * shared window) cut at every byte boundary and fed byte by byte; writer to
 * reader round trips for every window size, with and without context
 * takeover, up to 1 MiB; each protocol violation; messages over the bound
 * (and the next one still inflating from the shared window); the
 * Sec-WebSocket-Extensions parser and Sec-WebSocket-Accept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <zlib.h>

#include "proxy/decode/ws.h"
#include "tests/unit/rng.h"

/* ---- what a reader handed over, rendered as one string ------------------ */

struct got {
    char    *s;
    size_t   len, cap;
    int      n;
    const unsigned char *lo, *hi;   /* the fed bytes, to see direct data */
    int      direct;                /* messages handed over from them */
};

static void put(struct got *g, const void *p, size_t n)
{
    if (g->len + n + 1 > g->cap) {
        g->cap = (g->len + n + 1) * 2;
        g->s = realloc(g->s, g->cap);
        assert_non_null(g->s);
    }
    memcpy(g->s + g->len, p, n);
    g->len += n;
    g->s[g->len] = '\0';
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    while (n--)
        h = (h ^ *p++) * 1099511628211ull;
    return h;
}

static void on_msg(void *arg, const struct tt_ws_msg *m)
{
    struct got *g = arg;
    char b[128];
    int w;

    w = snprintf(b, sizeof(b), "%d/%zu/%u/%u/%u:", (int)m->op, m->len,
                 (unsigned)m->compressed, (unsigned)m->over, (unsigned)m->close_code);
    put(g, b, (size_t)w);
    if (m->over) {
        assert_null(m->data);
    } else {
        assert_non_null(m->data);
        if (m->len <= 64) {
            put(g, m->data, m->len);
        } else {
            w = snprintf(b, sizeof(b), "#%016llx", (unsigned long long)fnv(m->data, m->len));
            put(g, b, (size_t)w);
        }
        if (g->lo != NULL && m->data >= g->lo && m->data < g->hi)
            g->direct++;
    }
    put(g, "\n", 1);
    g->n++;
}

static void got_free(struct got *g)
{
    free(g->s);
    memset(g, 0, sizeof(*g));
}

/*
 * Feed <in> to a fresh reader: mode 0 whole, 1 byte by byte, 2 cut at
 * <cut>, >= 3 random pieces seeded by mode.  Returns the reader's why
 * (static text) and fills <g>; <frames> gets the frame count.
 */
static const char *run(const unsigned char *in, size_t len, int from_client,
                       const struct tt_ws_deflate *d, size_t max, int mode,
                       size_t cut, struct got *g, uint64_t *frames)
{
    struct tt_ws_reader r;
    uint64_t seed = (uint64_t)mode * 0x9e3779b97f4a7c15ull;
    size_t off = 0;
    const char *why;

    memset(g, 0, sizeof(*g));
    put(g, "", 0);
    g->lo = in;
    g->hi = in + len;
    tt_ws_reader_init(&r, from_client, d, max, on_msg, g);
    while (off < len) {
        size_t k = len - off;
        int rc;

        if (mode == 1)
            k = 1;
        else if (mode == 2)
            k = off < cut ? cut - off : len - off;
        else if (mode >= 3)
            k = 1 + test_xorshift(&seed) % 23;
        if (k > len - off)
            k = len - off;
        rc = tt_ws_reader_feed(&r, in + off, k);
        assert_int_equal(rc, r.why ? -1 : 0);
        off += k;
    }
    why = r.why;
    if (frames != NULL)
        *frames = r.frames;
    if (why == NULL) {
        assert_true(r.cap <= max || r.cap == 0);
    } else {
        /* stopped for good: nothing held, nothing more handed over */
        int n = g->n;
        assert_null(r.buf);
        assert_null(r.z);
        assert_int_equal(tt_ws_reader_feed(&r, "\x81\x00", 2), -1);
        assert_int_equal(g->n, n);
    }
    tt_ws_reader_free(&r);
    return why;
}

/* decode <in> whole, byte by byte and in random pieces: each gives <want> */
static void expect(const unsigned char *in, size_t len, int from_client,
                   const struct tt_ws_deflate *d, const char *want)
{
    int mode;

    for (mode = 0; mode < 8; mode++) {
        struct got g;
        const char *why = run(in, len, from_client, d, 1 << 20, mode, 0, &g, NULL);
        if (why != NULL)
            fail_msg("mode %d: stopped: %s", mode, why);
        if (strcmp(g.s, want) != 0)
            fail_msg("mode %d: got\n%s\nwant\n%s", mode, g.s, want);
        got_free(&g);
    }
}

#define EXPECT(fc, d, want, ...) do {                                   \
        static const unsigned char in_[] = { __VA_ARGS__ };             \
        expect(in_, sizeof(in_), (fc), (d), (want));                    \
    } while (0)

static const struct tt_ws_deflate pmd = { 1, 0, 0, 15, 15 };

/* ---- RFC 6455 section 5.7 ------------------------------------------------ */

static void test_rfc6455_examples(void **state)
{
    unsigned char big[10 + 65536], head[14];
    struct evbuffer *eb;
    struct got g;
    size_t i;
    char want[64];
    static const unsigned char key[4] = { 0x37, 0xfa, 0x21, 0x3d };

    (void)state;
    /* a single-frame unmasked text message */
    EXPECT(0, NULL, "1/5/0/0/0:Hello\n", 0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f);
    /* a single-frame masked text message */
    EXPECT(1, NULL, "1/5/0/0/0:Hello\n",
           0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58);
    /* a fragmented unmasked text message */
    EXPECT(0, NULL, "1/5/0/0/0:Hello\n",
           0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f);
    /* unmasked ping, masked pong */
    EXPECT(0, NULL, "9/5/0/0/0:Hello\n", 0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f);
    EXPECT(1, NULL, "10/5/0/0/0:Hello\n",
           0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58);

    /* 256 bytes binary in a single unmasked frame: 16-bit length */
    big[0] = 0x82;
    big[1] = 0x7e;
    big[2] = 0x01;
    big[3] = 0x00;
    for (i = 0; i < 256; i++)
        big[4 + i] = (unsigned char)(i * 7);
    snprintf(want, sizeof(want), "2/256/0/0/0:#%016llx\n",
             (unsigned long long)fnv(big + 4, 256));
    expect(big, 4 + 256, 0, NULL, want);
    /* 64 KiB binary in a single unmasked frame: 64-bit length */
    memcpy(big, (const unsigned char[]){ 0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0, 0 }, 10);
    for (i = 0; i < 65536; i++)
        big[10 + i] = (unsigned char)(i * 13 + (i >> 8));
    snprintf(want, sizeof(want), "2/65536/0/0/0:#%016llx\n",
             (unsigned long long)fnv(big + 10, 65536));
    expect(big, sizeof(big), 0, NULL, want);

    /* a whole unmasked message in one feed is handed over without a copy */
    run(big, sizeof(big), 0, NULL, 1 << 20, 0, 0, &g, NULL);
    assert_int_equal(g.direct, 1);
    got_free(&g);

    /* the writer makes the same bytes */
    assert_int_equal(tt_ws_frame_head(head, 1, 0, TT_WS_TEXT, 5, NULL), 2);
    assert_memory_equal(head, "\x81\x05", 2);
    assert_int_equal(tt_ws_frame_head(head, 1, 0, TT_WS_TEXT, 5, key), 6);
    assert_memory_equal(head, "\x81\x85\x37\xfa\x21\x3d", 6);
    assert_int_equal(tt_ws_frame_head(head, 1, 0, TT_WS_BINARY, 256, NULL), 4);
    assert_memory_equal(head, "\x82\x7e\x01\x00", 4);
    assert_int_equal(tt_ws_frame_head(head, 1, 0, TT_WS_BINARY, 65536, NULL), 10);
    assert_memory_equal(head, big, 10);
    assert_int_equal(tt_ws_frame_head(head, 0, 0, TT_WS_TEXT, 3, NULL), 2);
    assert_memory_equal(head, "\x01\x03", 2);
    assert_int_equal(tt_ws_frame_head(head, 1, 0, TT_WS_CONT, 2, NULL), 2);
    assert_memory_equal(head, "\x80\x02", 2);
    eb = evbuffer_new();
    assert_non_null(eb);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "Hello", 5, NULL, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "Hello", 5, NULL, key), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_PONG, "Hello", 5, NULL, key), 0);
    assert_int_equal(evbuffer_get_length(eb), 7 + 11 + 11);
    assert_memory_equal(evbuffer_pullup(eb, -1),
                        "\x81\x05Hello"
                        "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"
                        "\x8a\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 29);
    /* a control frame is never longer than 125 bytes */
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_PING, big, 126, NULL, NULL), -1);
    evbuffer_free(eb);
}

static void test_close_codes(void **state)
{
    (void)state;
    EXPECT(0, NULL, "8/2/0/0/1000:\x03\xe8\n", 0x88, 0x02, 0x03, 0xe8);
    EXPECT(0, NULL, "8/0/0/0/0:\n", 0x88, 0x00);
    EXPECT(1, NULL, "8/4/0/0/1001:\x03\xe9ok\n",
           0x88, 0x84, 1, 2, 3, 4, 0x03 ^ 1, 0xe9 ^ 2, 'o' ^ 3, 'k' ^ 4);
    /* empty messages, and control frames between fragments */
    EXPECT(0, NULL, "1/0/0/0/0:\n2/0/0/0/0:\n", 0x81, 0x00, 0x02, 0x00, 0x80, 0x00);
    EXPECT(0, NULL, "9/1/0/0/0:p\n10/0/0/0/0:\n1/3/0/0/0:abc\n",
           0x01, 0x01, 'a', 0x89, 0x01, 'p', 0x00, 0x01, 'b', 0x8a, 0x00,
           0x80, 0x01, 'c');
}

/* ---- RFC 7692 section 7.2.3 ---------------------------------------------- */

static void test_rfc7692_examples(void **state)
{
    struct tt_ws_deflater *d;
    struct evbuffer *eb;

    (void)state;
    /* 7.2.3.1: "Hello" compressed, one frame and two fragments */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n",
           0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00);
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n",
           0x41, 0x03, 0xf2, 0x48, 0xcd, 0x80, 0x04, 0xc9, 0xc9, 0x07, 0x00);
    /* 7.2.3.2: the second "Hello" refers to the first */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n1/5/1/0/0:Hello\n",
           0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
           0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00);
    /* 7.2.3.3: a DEFLATE block with no compression */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n",
           0xc1, 0x0b, 0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00);
    /* 7.2.3.4: a block with BFINAL set; the next message still refers
     * back to it */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n1/5/1/0/0:Hello\n",
           0xc1, 0x08, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00,
           0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00);
    /* ... and a payload that ends right after the final block */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n1/5/1/0/0:Hello\n",
           0xc1, 0x07, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
           0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00);
    /* 7.2.3.5: two DEFLATE blocks in one message */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n",
           0xc1, 0x0d, 0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff,
           0xca, 0xc9, 0xc9, 0x07, 0x00);
    /* 7.2.3.6: an empty message; a message of no payload at all */
    EXPECT(0, &pmd, "1/0/1/0/0:\n1/0/1/0/0:\n1/5/1/0/0:Hello\n",
           0xc1, 0x01, 0x00, 0xc1, 0x00,
           0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00);
    /* uncompressed messages (no RSV1) on a permessage-deflate session */
    EXPECT(0, &pmd, "1/5/1/0/0:Hello\n1/2/0/0/0:hi\n1/5/1/0/0:Hello\n",
           0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
           0x81, 0x02, 'h', 'i',
           0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00);

    /* the deflater makes the RFC's bytes: context taken over, then not */
    eb = evbuffer_new();
    d = tt_ws_deflater_new(15, 0);
    assert_non_null(d);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "Hello", 5, d, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "Hello", 5, d, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "", 0, d, NULL), 0);
    assert_int_equal(evbuffer_get_length(eb), 9 + 7 + 3);
    assert_memory_equal(evbuffer_pullup(eb, -1),
                        "\xc1\x07\xf2\x48\xcd\xc9\xc9\x07\x00"
                        "\xc1\x05\xf2\x00\x11\x00\x00"
                        "\xc1\x01\x00", 19);
    tt_ws_deflater_free(d);
    evbuffer_drain(eb, 19);
    d = tt_ws_deflater_new(15, 1);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "Hello", 5, d, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "Hello", 5, d, NULL), 0);
    /* control frames are not compressed */
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_PING, "p", 1, d, NULL), 0);
    assert_memory_equal(evbuffer_pullup(eb, -1),
                        "\xc1\x07\xf2\x48\xcd\xc9\xc9\x07\x00"
                        "\xc1\x07\xf2\x48\xcd\xc9\xc9\x07\x00"
                        "\x89\x01p", 21);
    tt_ws_deflater_free(d);
    evbuffer_free(eb);
    assert_null(tt_ws_deflater_new(7, 0));
    assert_null(tt_ws_deflater_new(16, 0));
}

/* ---- every split ---------------------------------------------------------- */

/* append a frame with payload <p> (raw, as it goes on the wire before masking) */
static void frame(struct evbuffer *eb, int fin, int rsv1, enum tt_ws_op op,
                  const void *p, size_t n, const unsigned char *mask)
{
    unsigned char head[14], *q = malloc(n + 1);
    size_t hl = tt_ws_frame_head(head, fin, rsv1, op, n, mask);

    assert_non_null(q);
    memcpy(q, p, n);
    if (mask != NULL)
        tt_ws_mask(q, n, mask, 0);
    evbuffer_add(eb, head, hl);
    evbuffer_add(eb, q, n);
    free(q);
}

/* one compressed message by <d>, sent in two fragments with a pong and an
 * empty continuation between them */
static void compressed_fragments(struct evbuffer *eb, struct tt_ws_deflater *d,
                                 const char *text, const unsigned char *m1,
                                 const unsigned char *m2)
{
    struct evbuffer *t = evbuffer_new();
    const unsigned char *p;
    size_t len, hl, cut;

    assert_int_equal(tt_ws_write_msg(t, TT_WS_TEXT, text, strlen(text), d, NULL), 0);
    len = evbuffer_get_length(t);
    p = evbuffer_pullup(t, -1);
    assert_true(len > 2 && len < 128);
    hl = 2;
    cut = (len - hl) / 2;
    frame(eb, 0, 1, TT_WS_TEXT, p + hl, cut, m1);
    frame(eb, 1, 0, TT_WS_PONG, "", 0, m2);
    frame(eb, 0, 0, TT_WS_CONT, "", 0, m2);
    frame(eb, 1, 0, TT_WS_CONT, p + hl + cut, len - hl - cut, m1);
    evbuffer_free(t);
}

/* a stream of several kinds of frames from one side, compressed with a shared window */
static struct evbuffer *mixed_stream(int client, int no_takeover)
{
    static const unsigned char k1[4] = { 0x11, 0x22, 0x33, 0x44 };
    static const unsigned char k2[4] = { 0xa5, 0x00, 0xff, 0x5a };
    struct evbuffer *eb = evbuffer_new();
    struct tt_ws_deflater *d = tt_ws_deflater_new(15, no_takeover);
    const unsigned char *m1 = client ? k1 : NULL, *m2 = client ? k2 : NULL;
    static const char text[] =
        "{\"choices\":[{\"delta\":{\"content\":\"the quick brown fox\"}}]}";
    unsigned char mid[300];
    size_t i;

    assert_non_null(d);
    for (i = 0; i < sizeof(mid); i++)
        mid[i] = (unsigned char)("abcab"[i % 5] + (i % 37 == 0));
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, text, sizeof(text) - 1, d, m1), 0);
    frame(eb, 0, 0, TT_WS_TEXT, "Hel", 3, m2);          /* fragmented, ping inside */
    frame(eb, 1, 0, TT_WS_PING, "ping", 4, m1);
    frame(eb, 1, 0, TT_WS_CONT, "lo", 2, m1);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, text, sizeof(text) - 1, d, m2), 0);
    compressed_fragments(eb, d, "Hello the quick brown fox", m1, m2);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, mid, sizeof(mid), d, m1), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, mid, 200, NULL, m2), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, "", 0, d, m2), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, mid, sizeof(mid), d, m1), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, text, sizeof(text) - 1, d, m2), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_CLOSE, "\x03\xe8" "bye", 5, d, m1), 0);
    tt_ws_deflater_free(d);
    return eb;
}

static void every_split(int client, int no_takeover)
{
    struct tt_ws_deflate t = { 1, 0, 0, 15, 15 };
    struct evbuffer *eb = mixed_stream(client, no_takeover);
    size_t len = evbuffer_get_length(eb), cut;
    const unsigned char *in = evbuffer_pullup(eb, -1);
    struct got whole, g;
    uint64_t frames;
    int mode;

    if (client)
        t.client_no_context_takeover = (unsigned)no_takeover;
    else
        t.server_no_context_takeover = (unsigned)no_takeover;
    assert_null(run(in, len, client, &t, 1 << 20, 0, 0, &whole, &frames));
    assert_int_equal(whole.n, 12);
    assert_int_equal(frames, 15);
    assert_non_null(strstr(whole.s, "9/4/0/0/0:ping\n1/5/0/0/0:Hello\n"));
    assert_non_null(strstr(whole.s, "10/0/0/0/0:\n1/25/1/0/0:Hello the quick brown fox\n"));
    assert_non_null(strstr(whole.s, "8/5/0/0/1000:\x03\xe8" "bye\n"));
    for (cut = 0; cut <= len; cut++) {
        assert_null(run(in, len, client, &t, 1 << 20, 2, cut, &g, NULL));
        if (strcmp(g.s, whole.s) != 0)
            fail_msg("cut at %zu: got\n%s\nwant\n%s", cut, g.s, whole.s);
        got_free(&g);
    }
    for (mode = 1; mode < 12; mode++) {
        assert_null(run(in, len, client, &t, 1 << 20, mode, 0, &g, NULL));
        assert_string_equal(g.s, whole.s);
        got_free(&g);
    }
    got_free(&whole);
    evbuffer_free(eb);
}

static void test_every_split(void **state)
{
    (void)state;
    every_split(1, 0);
    every_split(0, 0);
    every_split(1, 1);
    every_split(0, 1);
}

/* ---- round trips ----------------------------------------------------------- */

struct want {
    const unsigned char *p[16];
    size_t n[16];
    int i, k, compressed;
};

static void on_want(void *arg, const struct tt_ws_msg *m)
{
    struct want *w = arg;

    assert_true(w->i < w->k);
    assert_int_equal(m->op, TT_WS_BINARY);
    assert_int_equal(m->over, 0);
    assert_int_equal(m->compressed, w->compressed);
    assert_int_equal(m->len, w->n[w->i]);
    if (m->len > 0)
        assert_memory_equal(m->data, w->p[w->i], m->len);
    w->i++;
}

/* compressible but not trivial: words and some noise */
static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    static const char *words[] = { "token", " the", " of", "\"delta\":", " model",
                                   " latency", "{", "}", " 42", "\n" };
    size_t i = 0;

    while (i < n) {
        uint64_t r = test_xorshift(&seed);
        if (r % 5 == 0) {
            p[i++] = (unsigned char)(r >> 8);
        } else {
            const char *w = words[(r >> 8) % 10];
            while (*w && i < n)
                p[i++] = (unsigned char)*w++;
        }
    }
}

static void round_trip(int bits, int no_takeover, int client, int compress,
                       unsigned char *src)
{
    static const size_t sizes[] = { 0, 125, 126, 65535, 65536, 1 << 20, 3, 0, 126 };
    static const unsigned char key[4] = { 0xde, 0xad, 0xbe, 0xef };
    struct tt_ws_deflate t = { 1, 0, 0, 15, 15 };
    struct tt_ws_deflater *d = NULL;
    struct evbuffer *eb = evbuffer_new();
    struct tt_ws_reader r;
    struct want w;
    size_t i, off = 0, len;
    const unsigned char *in;
    uint64_t seed = (uint64_t)bits * 977 + (uint64_t)no_takeover * 3 + (uint64_t)client;

    memset(&w, 0, sizeof(w));
    w.compressed = compress;
    if (compress) {
        d = tt_ws_deflater_new(bits, no_takeover);
        assert_non_null(d);
    }
    if (client) {
        t.client_max_window_bits = (unsigned char)bits;
        t.client_no_context_takeover = (unsigned)no_takeover;
    } else {
        t.server_max_window_bits = (unsigned char)bits;
        t.server_no_context_takeover = (unsigned)no_takeover;
    }
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        /* messages that repeat parts of earlier ones, for the shared window */
        w.p[i] = src + (i * 4099) % 8192;
        w.n[i] = sizes[i];
        assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, w.p[i], w.n[i], d,
                                         client ? key : NULL), 0);
    }
    w.k = (int)i;
    len = evbuffer_get_length(eb);
    in = evbuffer_pullup(eb, -1);
    tt_ws_reader_init(&r, client, compress ? &t : NULL, 1 << 20, on_want, &w);
    while (off < len) {
        size_t k = 1 + test_xorshift(&seed) % 70000;
        if (k > len - off)
            k = len - off;
        if (tt_ws_reader_feed(&r, in + off, k) != 0)
            fail_msg("bits %d nct %d client %d: %s", bits, no_takeover, client, r.why);
        off += k;
    }
    assert_int_equal(w.i, w.k);
    assert_int_equal(r.messages, (uint64_t)w.k);
    assert_int_equal(r.overs, 0);
    tt_ws_reader_free(&r);
    tt_ws_deflater_free(d);
    evbuffer_free(eb);
}

static void test_round_trip(void **state)
{
    unsigned char *src = malloc((1 << 20) + 8192);
    int bits, nct, client;

    (void)state;
    assert_non_null(src);
    fill(src, (1 << 20) + 8192, 12345);
    for (bits = 8; bits <= 15; bits++)
        for (nct = 0; nct < 2; nct++)
            for (client = 0; client < 2; client++)
                round_trip(bits, nct, client, 1, src);
    round_trip(15, 0, 0, 0, src);
    round_trip(15, 0, 1, 0, src);
    free(src);
}

/* a deflater asked for 8 window bits makes what a 256-byte window inflates */
static void test_window_bits_8(void **state)
{
    unsigned char src[20000], out[20000];
    struct tt_ws_deflater *d = tt_ws_deflater_new(8, 0);
    struct evbuffer *eb = evbuffer_new();
    z_stream z;
    size_t i, hl, got = 0;
    unsigned char *p;
    size_t len;

    (void)state;
    assert_non_null(d);
    for (i = 0; i < sizeof(src); i++)        /* repeats 300 bytes apart */
        src[i] = (unsigned char)("0123456789abcdefghij"[i % 20] + (i / 300) % 3);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, src, 10000, d, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, src + 10000, 10000, d, NULL), 0);
    memset(&z, 0, sizeof(z));
    assert_int_equal(inflateInit2(&z, -8), Z_OK);
    while ((len = evbuffer_get_length(eb)) > 0) {
        uint64_t n;
        p = evbuffer_pullup(eb, -1);
        hl = (p[1] & 0x7f) == 126 ? 4 : (p[1] & 0x7f) == 127 ? 10 : 2;
        n = hl == 2 ? (uint64_t)(p[1] & 0x7f) : hl == 4 ? (uint64_t)(p[2] << 8 | p[3]) : 0;
        assert_true(hl + n <= len);
        z.next_in = p + hl;
        z.avail_in = (uInt)n;
        z.next_out = out + got;
        z.avail_out = (uInt)(sizeof(out) - got);
        assert_int_equal(inflate(&z, Z_SYNC_FLUSH), Z_OK);
        z.next_in = (unsigned char *)"\x00\x00\xff\xff";
        z.avail_in = 4;
        assert_true(inflate(&z, Z_SYNC_FLUSH) == Z_OK || z.avail_in == 0);
        got = sizeof(out) - z.avail_out;
        evbuffer_drain(eb, hl + (size_t)n);
    }
    assert_int_equal(got, sizeof(src));
    assert_memory_equal(out, src, sizeof(src));
    inflateEnd(&z);
    tt_ws_deflater_free(d);
    evbuffer_free(eb);
}

/* ---- violations --------------------------------------------------------------- */

static void violation(const unsigned char *in, size_t len, int client,
                      const struct tt_ws_deflate *d, int before, const char *why_part)
{
    int mode;

    for (mode = 0; mode < 3; mode++) {
        struct got g;
        const char *why = run(in, len, client, d, 1 << 20, mode, 0, &g, NULL);
        if (why == NULL)
            fail_msg("mode %d: no stop, want \"%s\"", mode, why_part);
        if (strstr(why, why_part) == NULL)
            fail_msg("mode %d: \"%s\", want \"%s\"", mode, why, why_part);
        assert_int_equal(g.n, before);
        got_free(&g);
    }
}

#define BAD(client, d, before, why, ...) do {                           \
        static const unsigned char in_[] = { __VA_ARGS__ };             \
        violation(in_, sizeof(in_), (client), (d), (before), (why));     \
    } while (0)

static void test_violations(void **state)
{
    (void)state;
    BAD(1, NULL, 0, "unmasked client frame", 0x81, 0x05, 'H', 'e', 'l', 'l', 'o');
    BAD(0, NULL, 1, "masked server frame", 0x81, 0x00,
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58);
    BAD(0, NULL, 0, "longer than 125", 0x89, 0x7e, 0x00, 0x7e);
    BAD(0, NULL, 0, "fragmented control", 0x09, 0x00);
    BAD(0, NULL, 0, "fragmented control", 0x01, 0x01, 'a', 0x0a, 0x00);
    BAD(0, NULL, 0, "continuation frame outside", 0x80, 0x00);
    BAD(0, NULL, 1, "continuation frame outside", 0x81, 0x01, 'a', 0x00, 0x00);
    BAD(0, NULL, 0, "data frame inside", 0x01, 0x01, 'a', 0x81, 0x01, 'b');
    BAD(0, NULL, 0, "data frame inside", 0x01, 0x01, 'a', 0x02, 0x01, 'b');
    BAD(0, NULL, 0, "RSV2 or RSV3", 0xa1, 0x00);
    BAD(0, &pmd, 0, "RSV2 or RSV3", 0x91, 0x00);
    BAD(0, NULL, 0, "RSV1 set without permessage-deflate",
        0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00);
    BAD(0, &pmd, 0, "RSV1 on a continuation",
        0x41, 0x03, 0xf2, 0x48, 0xcd, 0xc0, 0x04, 0xc9, 0xc9, 0x07, 0x00);
    BAD(0, &pmd, 0, "RSV1 on a control", 0xc9, 0x00);
    BAD(0, NULL, 0, "reserved data opcode", 0x83, 0x00);
    BAD(0, NULL, 0, "reserved data opcode", 0x87, 0x00);
    BAD(0, NULL, 0, "reserved control opcode", 0x8b, 0x00);
    BAD(0, NULL, 0, "reserved control opcode", 0x8f, 0x00);
    BAD(0, &pmd, 1, "bad compressed data",
        0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
        0xc1, 0x01, 0xff);                   /* BTYPE 11 */
    BAD(0, &pmd, 0, "bad compressed data",   /* a stored block's NLEN wrong */
        0xc1, 0x06, 0x00, 0x05, 0x00, 0xfa, 0xfe, 'H');
    BAD(0, &pmd, 0, "block boundary",        /* a stored block cut short */
        0xc1, 0x07, 0x00, 0x0a, 0x00, 0xf5, 0xff, 'H', 'e');
    BAD(0, NULL, 0, "top bit", 0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0);
    BAD(0, NULL, 0, "shortest form", 0x82, 0x7e, 0x00, 0x05, 1, 2, 3, 4, 5);
    BAD(0, NULL, 0, "shortest form", 0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff);
    BAD(0, NULL, 0, "close frame of 1 byte", 0x88, 0x01, 0x03);
    BAD(0, NULL, 1, "after the close frame", 0x88, 0x00, 0x81, 0x00);
    BAD(0, NULL, 1, "after the close frame", 0x88, 0x00, 0x89, 0x00);
}

/* ---- over the bound ----------------------------------------------------------- */

static void test_over(void **state)
{
    unsigned char big[5000], zero[65536];
    struct tt_ws_deflater *d = tt_ws_deflater_new(15, 0);
    struct evbuffer *eb = evbuffer_new();
    struct tt_ws_reader r;
    struct got g;
    char want[256];
    size_t i, len;
    const unsigned char *in;

    (void)state;
    fill(big, sizeof(big), 99);
    /* a big message, then one that is mostly back references into it */
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, big, sizeof(big), d, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_TEXT, big + 2000, 900, d, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, big, 1001, NULL, NULL), 0);
    assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, big, 1000, NULL, NULL), 0);
    len = evbuffer_get_length(eb);
    in = evbuffer_pullup(eb, -1);
    snprintf(want, sizeof(want),
             "1/5000/1/1/0:\n1/900/1/0/0:#%016llx\n2/1001/0/1/0:\n2/1000/0/0/0:#%016llx\n",
             (unsigned long long)fnv(big + 2000, 900), (unsigned long long)fnv(big, 1000));
    for (i = 0; i < 6; i++) {
        assert_null(run(in, len, 0, &pmd, 1000, (int)i, 0, &g, NULL));
        assert_string_equal(g.s, want);
        got_free(&g);
    }
    tt_ws_reader_init(&r, 0, &pmd, 1000, on_msg, &g);
    memset(&g, 0, sizeof(g));
    assert_int_equal(tt_ws_reader_feed(&r, in, len), 0);
    assert_int_equal(r.messages, 4);
    assert_int_equal(r.overs, 2);
    assert_int_equal(r.frames, 4);
    assert_true(r.cap <= 1000);
    tt_ws_reader_free(&r);
    got_free(&g);
    evbuffer_drain(eb, len);

    /* a bomb: 1 MiB of zeros in about 1 KiB; memory stays at max */
    memset(zero, 0, sizeof(zero));
    tt_ws_deflater_free(d);
    d = tt_ws_deflater_new(15, 0);
    {
        /* one message of 16 x 64 KiB, by hand: compress in pieces */
        struct evbuffer *pl = evbuffer_new();
        for (i = 0; i < 16; i++)
            assert_int_equal(tt_ws_write_msg(pl, TT_WS_BINARY, zero, sizeof(zero), d, NULL), 0);
        /* each is its own message: 16 overs of 64 KiB */
        len = evbuffer_get_length(pl);
        assert_true(len < 16 * 200);
        in = evbuffer_pullup(pl, -1);
        memset(&g, 0, sizeof(g));
        tt_ws_reader_init(&r, 0, &pmd, 4096, on_msg, &g);
        assert_int_equal(tt_ws_reader_feed(&r, in, len), 0);
        assert_int_equal(r.overs, 16);
        assert_true(r.cap <= 4096);
        assert_non_null(strstr(g.s, "2/65536/1/1/0:\n"));
        tt_ws_reader_free(&r);
        got_free(&g);
        evbuffer_free(pl);
    }

    /* a big message's buffer is not kept afterwards */
    {
        unsigned char *m = malloc(200000);
        assert_non_null(m);
        fill(m, 200000, 7);
        assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, m, 200000, NULL, NULL), 0);
        assert_int_equal(tt_ws_write_msg(eb, TT_WS_BINARY, m, 200000, d, NULL), 0);
        len = evbuffer_get_length(eb);
        in = evbuffer_pullup(eb, -1);
        memset(&g, 0, sizeof(g));
        tt_ws_reader_init(&r, 0, &pmd, 1 << 20, on_msg, &g);
        for (i = 0; i < len; i += 1000)
            assert_int_equal(tt_ws_reader_feed(&r, in + i, len - i < 1000 ? len - i : 1000), 0);
        assert_int_equal(r.messages, 2);
        assert_int_equal(r.overs, 0);
        assert_null(r.buf);
        assert_int_equal(r.cap, 0);
        tt_ws_reader_free(&r);
        got_free(&g);
        free(m);
    }
    /* a frame's length is a promise: memory follows the bytes that came */
    {
        static const unsigned char head[10] = { 0x82, 0x7f, 0, 0, 0, 0, 0, 0x10, 0, 0 };
        unsigned char some[1000];

        memset(some, 'x', sizeof(some));
        memset(&g, 0, sizeof(g));
        tt_ws_reader_init(&r, 0, NULL, 2 << 20, on_msg, &g);
        assert_int_equal(tt_ws_reader_feed(&r, head, sizeof(head)), 0);
        assert_int_equal(tt_ws_reader_feed(&r, some, sizeof(some)), 0);
        assert_true(r.cap <= 64 * 1024);
        for (i = 0; i < 100; i++)
            assert_int_equal(tt_ws_reader_feed(&r, some, sizeof(some)), 0);
        assert_true(r.cap <= 2 * 101 * 1000);
        assert_int_equal(g.n, 0);
        tt_ws_reader_free(&r);
        got_free(&g);
    }
    tt_ws_deflater_free(d);
    evbuffer_free(eb);
}

/* ---- masking ---------------------------------------------------------------- */

static void test_mask(void **state)
{
    static const unsigned char key[4] = { 1, 2, 4, 8 };
    unsigned char a[100], b[100];
    size_t off, n, i;

    (void)state;
    for (off = 0; off < 9; off++) {
        for (n = 0; n < 40; n++) {
            for (i = 0; i < n; i++)
                a[off + i] = b[i] = (unsigned char)(i * 31 + off);
            tt_ws_mask(a + off, n, key, off);
            for (i = 0; i < n; i++)
                assert_int_equal(a[off + i], b[i] ^ key[(off + i) & 3]);
        }
    }
}

/* ---- the handshake ------------------------------------------------------------ */

static int ext(const char *v, struct tt_ws_deflate *d)
{
    return tt_ws_extensions(v, strlen(v), d);
}

static void test_extensions(void **state)
{
    struct tt_ws_deflate d;
    static const char *bad[] = {
        "permessage-deflate; foo",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_max_window_bits=10; client_max_window_bits=11",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; server_max_window_bits=1a",
        "permessage-deflate; server_max_window_bits=\"\"",
        "permessage-deflate; client_max_window_bits=\"9",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=\"x\"",
        "permessage-deflate; server_max_window_bits=\"1 0\"",
        "permessage-deflate, permessage-deflate",
        "permessage-deflate;",
        "permessage-deflate; =9",
        "permessage-deflate x",
        "permessage-deflate; server_max_window_bits=10 11",
        "; permessage-deflate",
        "foo; bar=\"a b\"",
        "foo; bar=\"q\\\"uoted\"",         /* unescaped, not a token */
        "foo; =1",
        "\"permessage-deflate\"",
    };
    size_t i;

    (void)state;
    assert_int_equal(ext("permessage-deflate", &d), 0);
    assert_int_equal(d.on, 1);
    assert_int_equal(d.server_no_context_takeover + d.client_no_context_takeover, 0);
    assert_int_equal(d.server_max_window_bits, 15);
    assert_int_equal(d.client_max_window_bits, 15);

    assert_int_equal(ext(" permessage-deflate ;server_no_context_takeover ; "
                         "client_no_context_takeover;server_max_window_bits=9;"
                         "\tclient_max_window_bits = 8 ", &d), 0);
    assert_int_equal(d.on, 1);
    assert_int_equal(d.server_no_context_takeover, 1);
    assert_int_equal(d.client_no_context_takeover, 1);
    assert_int_equal(d.server_max_window_bits, 9);
    assert_int_equal(d.client_max_window_bits, 8);

    /* quoted values; a valueless client_max_window_bits; case */
    assert_int_equal(ext("Permessage-Deflate; server_max_window_bits=\"12\"; "
                         "client_max_window_bits=\"1\\3\"", &d), 0);
    assert_int_equal(d.server_max_window_bits, 12);
    assert_int_equal(d.client_max_window_bits, 13);
    assert_int_equal(ext("permessage-deflate; client_max_window_bits", &d), 0);
    assert_int_equal(d.on, 1);
    assert_int_equal(d.client_max_window_bits, 15);

    /* other extensions around it, with their own parameters: ignored */
    assert_int_equal(ext("x-webkit-deflate-frame; no_context_takeover, "
                         "permessage-deflate; server_max_window_bits=10, "
                         "foo; bar=\"q\\uoted\"; baz", &d), 0);
    assert_int_equal(d.on, 1);
    assert_int_equal(d.server_max_window_bits, 10);
    assert_int_equal(ext("foo, bar; baz=1", &d), 0);
    assert_int_equal(d.on, 0);
    assert_int_equal(ext("", &d), 0);
    assert_int_equal(d.on, 0);
    assert_int_equal(ext(" , ,permessage-deflate,, ", &d), 0);
    assert_int_equal(d.on, 1);
    /* a prefix of the value: only <len> bytes are read */
    assert_int_equal(tt_ws_extensions("permessage-deflate; server_max_window_bits=1",
                                      sizeof("permessage-deflate") - 1, &d), 0);
    assert_int_equal(d.on, 1);
    assert_int_equal(d.server_max_window_bits, 15);

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (ext(bad[i], &d) != -1)
            fail_msg("accepted: %s", bad[i]);
        assert_int_equal(d.on, 0);
    }
}

static void test_accept(void **state)
{
    char out[29];

    (void)state;
    tt_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, out);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc6455_examples),
        cmocka_unit_test(test_close_codes),
        cmocka_unit_test(test_rfc7692_examples),
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_window_bits_8),
        cmocka_unit_test(test_violations),
        cmocka_unit_test(test_over),
        cmocka_unit_test(test_mask),
        cmocka_unit_test(test_extensions),
        cmocka_unit_test(test_accept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
