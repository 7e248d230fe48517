/*
 * tt_head_scan() (proxy/http/httphead.c), which finds obs-fold (a line that
 * starts with SP or HT) and empty field names (a line that starts with
 * ':') in the raw head bytes, line end to line end: against the byte-by-byte
 * scan it replaced, on heads of random lines cut into random pieces (the
 * scanner carries "at the start of a line" across pieces), and on the heads
 * the smuggling rules are about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <llhttp.h>

#include "proxy/http/httphead.h"
#include "tests/unit/rng.h"

/* the reference: every byte looked at */
struct ref {
    int line_start, obs_fold, empty_name;
};

static void ref_scan(struct ref *r, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (r->line_start && (p[i] == ' ' || p[i] == '\t'))
            r->obs_fold = 1;
        if (r->line_start && p[i] == ':')
            r->empty_name = 1;
        r->line_start = (p[i] == '\n');
    }
}

static void scan_in_pieces(struct tt_head *h, const char *p, size_t len,
                           uint64_t *seed)
{
    size_t off = 0;

    while (off < len) {
        size_t n = (size_t)(test_xorshift(seed) % 9);   /* 0 included */
        if (n > len - off)
            n = len - off;
        tt_head_scan(h, p + off, n);
        off += n;
    }
}

static void test_random_heads_match_reference(void **state)
{
    static const char alphabet[] = { 'a', ':', ' ', '\t', '\r', '\n', '\n', 'X' };
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    char buf[256];
    unsigned folds = 0, empties = 0, clean = 0;

    (void)state;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(test_xorshift(&seed) % sizeof(buf));
        struct tt_head h;
        struct ref r = { 0, 0, 0 };

        for (size_t i = 0; i < len; i++)
            buf[i] = alphabet[test_xorshift(&seed) % sizeof(alphabet)];
        tt_head_init(&h, 1024, 16);
        if (iter & 1)
            tt_head_scan(&h, buf, len);
        else
            scan_in_pieces(&h, buf, len, &seed);
        ref_scan(&r, buf, len);
        assert_int_equal(h.obs_fold, r.obs_fold);
        assert_int_equal(h.empty_name, r.empty_name);
        assert_int_equal(h.line_start, r.line_start);
        folds += r.obs_fold;
        empties += r.empty_name;
        clean += !r.obs_fold && !r.empty_name;
        tt_head_free(&h);
    }
    /* the inputs exercise every outcome */
    assert_true(folds > 100 && empties > 100 && clean > 100);
}

static void scan_str(struct tt_head *h, const char *s)
{
    tt_head_init(h, 1024, 16);
    tt_head_scan(h, s, strlen(s));
}

static void test_heads(void **state)
{
    struct tt_head h;

    (void)state;
    scan_str(&h, "POST /v1 HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n");
    assert_false(h.obs_fold);
    assert_false(h.empty_name);
    assert_true(h.line_start);

    scan_str(&h, "POST /v1 HTTP/1.1\r\nX: b\r\n c\r\n\r\n");
    assert_true(h.obs_fold);
    scan_str(&h, "POST /v1 HTTP/1.1\r\nX: b\r\n\tc\r\n\r\n");
    assert_true(h.obs_fold);
    scan_str(&h, "POST /v1 HTTP/1.1\r\n: b\r\n\r\n");
    assert_true(h.empty_name);
    assert_false(h.obs_fold);

    /* the request line is not a header line */
    scan_str(&h, " POST /v1 HTTP/1.1\r\n\r\n");
    assert_false(h.obs_fold);

    /* a line start carried from one piece to the next */
    tt_head_init(&h, 1024, 16);
    tt_head_scan(&h, "GET / HTTP/1.1\r\nA: b\r\n", 22);
    assert_true(h.line_start);
    tt_head_scan(&h, "", 0);
    assert_true(h.line_start);
    tt_head_scan(&h, " folded\r\n\r\n", 11);
    assert_true(h.obs_fold);
}

/* a head parsed by llhttp into a tt_head, as proxy/http/conn.c and leg.c do */
static int on_span_target(llhttp_t *p, const char *at, size_t len)
{
    return tt_head_target(p->data, at, len) < 0 ? -1 : 0;
}

static int on_span_field(llhttp_t *p, const char *at, size_t len)
{
    return tt_head_field(p->data, at, len) < 0 ? -1 : 0;
}

static int on_span_value(llhttp_t *p, const char *at, size_t len)
{
    return tt_head_value(p->data, at, len) < 0 ? -1 : 0;
}

static int on_done(llhttp_t *p)
{
    (void)p;
    return HPE_PAUSED;
}

/* parse the head <s> into <h> (max_headers 64) and scan what llhttp took;
 * its result: HPE_PAUSED when the head is complete */
static enum llhttp_errno parse_into(struct tt_head *h, enum llhttp_type type,
                                    const char *s)
{
    llhttp_settings_t set;
    llhttp_t p;
    enum llhttp_errno e;
    const char *pos;

    llhttp_settings_init(&set);
    set.on_url = on_span_target;
    set.on_status = on_span_target;
    set.on_header_field = on_span_field;
    set.on_header_value = on_span_value;
    set.on_headers_complete = on_done;
    llhttp_init(&p, type, &set);
    p.data = h;
    tt_head_init(h, 8192, 64);
    e = llhttp_execute(&p, s, strlen(s));
    pos = llhttp_get_error_pos(&p);
    tt_head_scan(h, s, e == HPE_OK || pos == NULL ? strlen(s) : (size_t)(pos - s));
    return e;
}

static void parse_head(struct tt_head *h, enum llhttp_type type, const char *s)
{
    assert_int_equal(parse_into(h, type, s), HPE_PAUSED);
}

/* the fields forwarded, as one string */
static char *copied(const char *head, enum llhttp_type type, int keep_upgrade,
                    int drop_te, const char *skip)
{
    static char got[8192];
    struct tt_head h;
    struct evbuffer *out = evbuffer_new();
    const char *names[1] = { skip };
    size_t lens[1] = { skip ? strlen(skip) : 0 }, n;

    assert_non_null(out);
    parse_head(&h, type, head);
    assert_null(tt_head_check(&h, type == HTTP_REQUEST ? TT_HEAD_REQUEST : TT_HEAD_RESPONSE,
                              1, 1));
    assert_int_equal(tt_head_copy_fields_skip(&h, out,
                                              type == HTTP_REQUEST ? TT_HEAD_REQUEST
                                                                   : TT_HEAD_RESPONSE,
                                              keep_upgrade, drop_te, names, lens,
                                              skip ? 1 : 0), 0);
    n = evbuffer_get_length(out);
    assert_true(n < sizeof(got));
    evbuffer_remove(out, got, n);
    got[n] = '\0';
    evbuffer_free(out);
    tt_head_free(&h);
    return got;
}

static void test_hop_by_hop(void **state)
{
    (void)state;
    /* the hop-by-hop fields, in any case, and Host of a request go */
    assert_string_equal(
        copied("POST /v1 HTTP/1.1\r\nHost: a\r\nCONNECTION: keep-alive\r\n"
               "Keep-Alive: timeout=5\r\nProxy-Connection: x\r\nte: trailers\r\n"
               "Trailer: X\r\nUpgrade: h2c\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n",
               HTTP_REQUEST, 0, 0, NULL),
        "X-A: 1\r\nContent-Length: 2\r\n");
    /* a response keeps Host; Upgrade stays when asked to */
    assert_string_equal(
        copied("HTTP/1.1 101 Switching\r\nHost: a\r\nUpgrade: websocket\r\n"
               "Connection: upgrade\r\n\r\n", HTTP_RESPONSE, 1, 0, NULL),
        "Host: a\r\nUpgrade: websocket\r\n");
    /* Transfer-Encoding dropped only when asked */
    assert_string_equal(
        copied("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n",
               HTTP_RESPONSE, 0, 1, NULL), "X: y\r\n");
    assert_string_equal(
        copied("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n",
               HTTP_RESPONSE, 0, 0, NULL), "Transfer-Encoding: chunked\r\nX: y\r\n");
    /* fields that Connection names, and the caller's own list */
    assert_string_equal(
        copied("GET / HTTP/1.1\r\nConnection: x-hop, close\r\nX-Hop: 1\r\n"
               "X-Keep: 2\r\nAuthorization: k\r\nx-keep2: 3\r\n\r\n",
               HTTP_REQUEST, 0, 0, "authorization"),
        "X-Keep: 2\r\nx-keep2: 3\r\n");
    /* names of a special field's length that are not it */
    assert_string_equal(
        copied("GET / HTTP/1.1\r\nTf: 1\r\nHoss: 2\r\nUpgradf: 3\r\nConnectioo: 4\r\n"
               "Content-Lengtx: 5\r\n\r\n", HTTP_REQUEST, 0, 0, NULL),
        "Tf: 1\r\nHoss: 2\r\nUpgradf: 3\r\nConnectioo: 4\r\nContent-Lengtx: 5\r\n");
}

/* fields staged across the stage buffer's end, and one larger than it */
static void test_copy_long_heads(void **state)
{
    char head[6000], want[6000], val[1501];
    size_t o = 0, w = 0;
    char *got;

    (void)state;
    memset(val, 'v', 1500);
    val[1500] = '\0';
    o += (size_t)sprintf(head + o, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < 40; i++) {
        o += (size_t)sprintf(head + o, "X-Field-%02d: value %d\r\n", i, i);
        w += (size_t)sprintf(want + w, "X-Field-%02d: value %d\r\n", i, i);
        if (i == 20) {
            o += (size_t)sprintf(head + o, "X-Long: %s\r\n", val);
            w += (size_t)sprintf(want + w, "X-Long: %s\r\n", val);
        }
    }
    o += (size_t)sprintf(head + o, "X-Empty:\r\n\r\n");
    w += (size_t)sprintf(want + w, "X-Empty: \r\n");
    got = copied(head, HTTP_REQUEST, 0, 0, NULL);
    assert_string_equal(got, want);
}

static void test_framing_checks(void **state)
{
    static const struct { const char *head; const char *why; } cases[] = {
        { "POST / HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\n",
          "duplicate Content-Length" },
        { "POST / HTTP/1.1\r\nContent-Length: 01\r\n\r\n",
          "Content-Length with leading zeros" },
        { "POST / HTTP/1.1\r\nConnection: Content-Length\r\nContent-Length: 1\r\n\r\n",
          "Connection names a framing header" },
        { "POST / HTTP/1.1\r\nConnection: transfer-encoding\r\n\r\n",
          "Connection names a framing header" },
        { "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
          "unsupported Transfer-Encoding" },
        { "POST / HTTP/1.1\r\nContent-Length: 1\r\nX: 1\r\n\r\n", NULL },
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tt_head h;
        const char *why;

        /* what llhttp took of the head, refused by llhttp itself or not:
         * the checks stand on their own */
        parse_into(&h, HTTP_REQUEST, cases[i].head);
        why = tt_head_check(&h, TT_HEAD_REQUEST, 1, 1);
        if (cases[i].why == NULL)
            assert_null(why);
        else
            assert_string_equal(why, cases[i].why);
        tt_head_free(&h);
    }
}

/* heads freed and taken again (a thread keeps the first-size buffers and
 * field tables of freed heads): contents of each head its own, big heads,
 * other table sizes and small limits included */
static void test_buffers_reused(void **state)
{
    char big[6000];
    struct tt_head h, held[8];
    unsigned nheld = 0;
    size_t n;
    const char *v;
    const struct tt_hfield *small, *fields;
    const char *buf;

    (void)state;
    for (int round = 0; round < 40; round++) {
        parse_head(&h, HTTP_REQUEST, round & 1 ? "GET /a HTTP/1.1\r\nX-One: 1\r\n\r\n"
                                               : "GET /b HTTP/1.1\r\nX-Two: 22\r\nX-Three: 3\r\n\r\n");
        if (round & 1) {
            assert_int_equal(h.n, 1);
            v = tt_head_get(&h, "x-one", &n);
            assert_non_null(v);
            assert_int_equal(n, 1);
            assert_null(tt_head_get(&h, "x-two", NULL));
        } else {
            assert_int_equal(h.n, 2);
            v = tt_head_get(&h, "x-two", &n);
            assert_int_equal(n, 2);
            assert_memory_equal(v, "22", 2);
        }
        if (round % 5 == 0)
            held[nheld++] = h;          /* some heads are freed later */
        else
            tt_head_free(&h);
    }
    while (nheld > 0)
        tt_head_free(&held[--nheld]);
    /* a head larger than the first size grows past it */
    memset(big, 'v', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX-Big: ", 23);
    memcpy(big + sizeof(big) - 5, "\r\n\r\n", 5);
    parse_head(&h, HTTP_REQUEST, big);
    v = tt_head_get(&h, "x-big", &n);
    assert_int_equal(n, sizeof(big) - 5 - 23);
    tt_head_free(&h);
    /* a table of another size, and a limit under the first size */
    tt_head_init(&h, 100, 3);
    assert_int_equal(tt_head_field(&h, "A", 1), 0);
    assert_int_equal(tt_head_value(&h, "1", 1), 0);
    assert_int_equal(tt_head_field(&h, "B", 1), 0);
    assert_int_equal(tt_head_value(&h, "2", 1), 0);
    assert_int_equal(h.cap, 100);
    assert_int_equal(tt_head_field(&h, "C", 1), 0);
    assert_int_equal(tt_head_value(&h, "3", 1), 0);
    assert_int_equal(tt_head_field(&h, "D", 1), -1);        /* max 3 */
    assert_true(h.overflow);
    assert_memory_equal(h.buf + h.f[2].val, "3", 1);
    small = h.f;
    tt_head_free(&h);               /* its 4-entry table is kept as a spare */
    /* a head of max 64 does not take it: ten fields, each its own */
    parse_head(&h, HTTP_REQUEST, "GET / HTTP/1.1\r\nA0: 0\r\nA1: 1\r\nA2: 2\r\n"
               "A3: 3\r\nA4: 4\r\nA5: 5\r\nA6: 6\r\nA7: 7\r\nA8: 8\r\nA9: 9\r\n\r\n");
    assert_ptr_not_equal(h.f, small);
    assert_int_equal(h.n, 10);
    for (unsigned i = 0; i < 10; i++) {
        char name[3] = { 'a', (char)('0' + i), '\0' };
        v = tt_head_get(&h, name, &n);
        assert_non_null(v);
        assert_int_equal(n, 1);
        assert_int_equal(v[0], '0' + (int)i);
    }
    /* and the next head of its size takes the buffers this one leaves */
    buf = h.buf;
    fields = h.f;
    tt_head_free(&h);
    parse_head(&h, HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX: y\r\n\r\n");
    assert_ptr_equal(h.buf, buf);
    assert_ptr_equal(h.f, fields);
    tt_head_free(&h);
    tt_head_thread_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_heads_match_reference),
        cmocka_unit_test(test_heads),
        cmocka_unit_test(test_hop_by_hop),
        cmocka_unit_test(test_copy_long_heads),
        cmocka_unit_test(test_framing_checks),
        cmocka_unit_test(test_buffers_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
