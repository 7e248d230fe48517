/*
 * Unit tests of the incremental decoders: proxy/decode/sse.c (WHATWG event-stream
 * rules, bounded memory, split invariance), proxy/decode/ndjson.c, and the JSON
 * arena (proxy/base/jsonarena.c) they feed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proxy/base/jsonarena.h"
#include "proxy/decode/ndjson.h"
#include "proxy/decode/sse.h"

/* events rendered as "name|data\x1e" into one string, for comparisons */
struct out {
    char   buf[65536];
    size_t len;
    int    n;
};

static void on_ev(void *ctx, const struct tt_sse_event *ev)
{
    struct out *o = ctx;
    int w;

    assert_int_equal(strlen(ev->name), ev->name_len);
    w = snprintf(o->buf + o->len, sizeof(o->buf) - o->len, "%s|%.*s\x1e",
                 ev->name, (int)ev->data_len, ev->data);
    assert_true(w > 0 && (size_t)w < sizeof(o->buf) - o->len);
    o->len += (size_t)w;
    o->n++;
}

static void on_line(void *ctx, const char *line, size_t len)
{
    struct out *o = ctx;
    int w = snprintf(o->buf + o->len, sizeof(o->buf) - o->len, "%.*s\x1e",
                     (int)len, line);
    assert_true(w > 0 && (size_t)w < sizeof(o->buf) - o->len);
    o->len += (size_t)w;
    o->n++;
}

static uint32_t rng(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

/*
 * Feed <in> split by <mode>: 0 whole, 1 one byte at a time, >=2 random
 * pieces seeded by <mode>; then finish with <flush>.
 */
static void sse_run(const char *in, size_t len, int mode, size_t max,
                    int flush, struct out *o, uint32_t *oversize)
{
    struct tt_sse d;
    size_t off = 0;
    uint32_t seed = (uint32_t)mode;

    memset(o, 0, sizeof(*o));
    tt_sse_init(&d, max);
    while (off < len) {
        size_t n = len - off;
        if (mode == 1)
            n = 1;
        else if (mode >= 2)
            n = 1 + rng(&seed) % 17;
        if (n > len - off)
            n = len - off;
        tt_sse_feed(&d, in + off, n, on_ev, o);
        off += n;
    }
    tt_sse_finish(&d, flush, on_ev, o);
    if (oversize != NULL)
        *oversize = d.oversize;
    tt_sse_free(&d);
}

/* decode <in> every way and check each gives <want> */
static void sse_expect(const char *in, size_t len, const char *want, size_t max)
{
    int mode;

    for (mode = 0; mode < 8; mode++) {
        struct out o;
        sse_run(in, len, mode, max, 0, &o, NULL);
        if (strcmp(o.buf, want) != 0)
            fail_msg("split mode %d: got \"%s\" want \"%s\"", mode, o.buf, want);
    }
}

#define EXPECT(in, want) sse_expect((in), sizeof(in) - 1, (want), 0)

static void test_sse_line_ends(void **state)
{
    (void)state;
    EXPECT("data: a\n\n", "|a\x1e");
    EXPECT("data: a\r\n\r\n", "|a\x1e");
    EXPECT("data: a\r\r", "|a\x1e");
    EXPECT("data: a\r\n\r\ndata: b\r\rdata: c\n\n", "|a\x1e|b\x1e|c\x1e");
    /* CR then LF is one line end, even across feeds: "a\nb", not a then b */
    EXPECT("data: a\r\ndata: b\r\n\r\n", "|a\nb\x1e");
    EXPECT("data: a\rdata: b\r\r", "|a\nb\x1e");
    EXPECT("data: a\ndata: b\r\n\n", "|a\nb\x1e");
}

static void test_sse_cr_lf_across_feeds(void **state)
{
    struct tt_sse d;
    struct out o;

    (void)state;
    memset(&o, 0, sizeof(o));
    tt_sse_init(&d, 0);
    tt_sse_feed(&d, "data: a\r", 8, on_ev, &o);
    tt_sse_feed(&d, "\ndata: b\r", 9, on_ev, &o);
    tt_sse_feed(&d, "\n\r", 2, on_ev, &o);
    assert_int_equal(o.n, 1);       /* the CR ended the blank line */
    tt_sse_feed(&d, "\n", 1, on_ev, &o);
    assert_string_equal(o.buf, "|a\nb\x1e");
    tt_sse_finish(&d, 1, on_ev, &o);
    assert_int_equal(o.n, 1);
    tt_sse_free(&d);
}

static void test_sse_bom(void **state)
{
    (void)state;
    EXPECT("\xEF\xBB\xBF" "data: x\n\n", "|x\x1e");
    /* only the first BOM goes; a second one is part of the field name */
    EXPECT("\xEF\xBB\xBF\xEF\xBB\xBF" "data: x\n\ndata: y\n\n", "|y\x1e");
    /* a BOM later in the stream is content */
    EXPECT("data: \xEF\xBB\xBFy\n\n", "|\xEF\xBB\xBFy\x1e");
    /* a BOM prefix that is not a BOM is replayed as content */
    EXPECT("\xEF" "data: x\n\ndata: z\n\n", "|z\x1e");
    EXPECT("\xEF\xBB" "\n" "data: z\n\n", "|z\x1e");
}

static void test_sse_comments(void **state)
{
    (void)state;
    EXPECT(": hello\ndata: a\n: mid\ndata: b\n\n", "|a\nb\x1e");
    EXPECT(": OPENROUTER PROCESSING\n\n: x\n\n", "");
    EXPECT(":\n\ndata: q\n\n", "|q\x1e");
}

static void test_sse_multiline_data(void **state)
{
    (void)state;
    EXPECT("data: a\ndata:\ndata: b\n\n", "|a\n\nb\x1e");
    EXPECT("data:\n\n", "|\x1e");           /* one empty data line: dispatched */
    EXPECT("data\n\n", "|\x1e");            /* no colon: field "data", value "" */
    EXPECT("data: {\"a\":\ndata: 1}\n\n", "|{\"a\":\n1}\x1e");
}

static void test_sse_event_names(void **state)
{
    (void)state;
    EXPECT("event: foo\ndata: 1\n\ndata: 2\n\n", "foo|1\x1e|2\x1e");
    /* an event without data is not dispatched, and its name does not leak */
    EXPECT("event: bar\n\ndata: 3\n\n", "|3\x1e");
    EXPECT("event:baz\ndata:4\n\n", "baz|4\x1e");
    EXPECT("event\ndata: q\n\n", "|q\x1e");
    EXPECT("data: 5\nevent: late\n\n", "late|5\x1e");
}

static void test_sse_space_after_colon(void **state)
{
    (void)state;
    EXPECT("data:x\n\n", "|x\x1e");
    EXPECT("data:  x\n\n", "| x\x1e");      /* only one space is dropped */
    EXPECT("data: x \n\n", "|x \x1e");
    EXPECT("data::x\n\n", "|:x\x1e");
}

static void test_sse_other_fields(void **state)
{
    (void)state;
    EXPECT("id: 5\nretry: 10\ndata: z\nfoo: bar\n\n", "|z\x1e");
    EXPECT("Data: z\n\n", "");              /* field names are case-sensitive */
    EXPECT(" data: z\n\n", "");
}

static void test_sse_unterminated_end(void **state)
{
    struct out o;

    (void)state;
    /* WHATWG drops an unterminated event; a clean end flushes it */
    sse_run("data: a\n\ndata: b", 16, 0, 0, 0, &o, NULL);
    assert_string_equal(o.buf, "|a\x1e");
    sse_run("data: a\n\ndata: b", 16, 1, 0, 1, &o, NULL);
    assert_string_equal(o.buf, "|a\x1e|b\x1e");
    sse_run("data: a\n\ndata: b\n", 17, 3, 0, 1, &o, NULL);
    assert_string_equal(o.buf, "|a\x1e|b\x1e");
    sse_run("data: a\n\nevent: x\n", 18, 0, 0, 1, &o, NULL);
    assert_string_equal(o.buf, "|a\x1e");
}

static void test_sse_oversize(void **state)
{
    char in[4096];
    size_t n = 0;
    int mode, i;

    (void)state;
    n += (size_t)sprintf(in + n, "data: ok1\n\n");
    /* one 200-byte data line: over a 64-byte bound */
    n += (size_t)sprintf(in + n, "event: big\ndata: ");
    for (i = 0; i < 200; i++)
        in[n++] = 'x';
    n += (size_t)sprintf(in + n, "\ndata: more\n\n");
    n += (size_t)sprintf(in + n, "data: ok2\n\n");
    /* many short data lines adding up past the bound */
    for (i = 0; i < 20; i++)
        n += (size_t)sprintf(in + n, "data: 0123456789\n");
    n += (size_t)sprintf(in + n, "\n");
    /* a long comment is not an oversize event */
    in[n++] = ':';
    for (i = 0; i < 300; i++)
        in[n++] = 'c';
    n += (size_t)sprintf(in + n, "\ndata: ok3\n\n");
    in[n] = '\0';

    for (mode = 0; mode < 8; mode++) {
        struct out o;
        uint32_t over = 0;
        sse_run(in, n, mode, 64, 0, &o, &over);
        assert_string_equal(o.buf, "|ok1\x1e|ok2\x1e|ok3\x1e");
        assert_int_equal(over, 2);
    }
}

/* the bound is exact and the same whether a line arrives whole or cut */
static void test_sse_oversize_boundary(void **state)
{
    char in[1024], want[256];
    size_t n = 0;
    int mode, i;

    (void)state;
    /* 63 value bytes + LF = 64: fits a 64-byte bound */
    n += (size_t)sprintf(in + n, "data: ");
    for (i = 0; i < 63; i++)
        in[n++] = 'a';
    n += (size_t)sprintf(in + n, "\n\n");
    /* 64 value bytes: does not */
    n += (size_t)sprintf(in + n, "data:");
    for (i = 0; i < 64; i++)
        in[n++] = 'b';
    n += (size_t)sprintf(in + n, "\n\n");
    /* 30 + 1 + 32 + 1 = 64 over two lines: fits */
    n += (size_t)sprintf(in + n, "data: %030d\ndata:%032d\n\n", 0, 0);
    /* a long event name is truncated, never an oversize event */
    n += (size_t)sprintf(in + n, "event: ");
    for (i = 0; i < 300; i++)
        in[n++] = 'e';
    n += (size_t)sprintf(in + n, "\ndata: z\n\n");
    /* long unknown fields are ignored */
    n += (size_t)sprintf(in + n, "retryyyyy: ");
    for (i = 0; i < 300; i++)
        in[n++] = 'r';
    n += (size_t)sprintf(in + n, "\ndata: w\n\n");

    i = sprintf(want, "|");
    memset(want + i, 'a', 63);
    i += 63;
    i += sprintf(want + i, "\x1e|%030d\n%032d\x1e", 0, 0);
    memset(want + i, 'e', TT_SSE_EVENT_NAME_MAX);
    i += TT_SSE_EVENT_NAME_MAX;
    sprintf(want + i, "|z\x1e|w\x1e");
    for (mode = 0; mode < 40; mode++) {
        struct out o;
        uint32_t over = 0;
        sse_run(in, n, mode, 64, 0, &o, &over);
        assert_string_equal(o.buf, want);
        assert_int_equal(over, 1);
    }
}

static void test_sse_split_invariance(void **state)
{
    static const char in[] =
        "\xEF\xBB\xBF: comment\r\n"
        "event: message_start\r\n"
        "data: {\"type\":\"message_start\"}\r\n"
        "\r\n"
        "data:x\rdata: y\r\r"
        "id: 1\n"
        "data: multi\n"
        "data: line\n"
        "\n"
        "event: ping\ndata: {}\n\n"
        "data\n\n"
        ": trailing comment\n";
    const char *want =
        "message_start|{\"type\":\"message_start\"}\x1e"
        "|x\ny\x1e" "|multi\nline\x1e" "ping|{}\x1e" "|\x1e";
    int mode;

    (void)state;
    for (mode = 0; mode < 64; mode++) {
        struct out o;
        sse_run(in, sizeof(in) - 1, mode, 0, 1, &o, NULL);
        assert_string_equal(o.buf, want);
    }
}

/*
 * The whole-event path (one data line and its empty line, wholly in one
 * feed) must decode as the general path does: random streams mixing such
 * events with every other shape are decoded whole, where the path takes
 * them, and a byte at a time, where it never can, and the two compared.
 */
static void test_sse_whole_event_path(void **state)
{
    static const char *const tok[] = {
        "data:", "data: ", "data:  ", "event: e", "event:", "id: 1", ": c",
        "data", "dat", "a", "{}", " ", "x\ry", "0123456789abcdefghij",
        "\n", "\n", "\r\n", "\r", "\n\n", "\r\n\r\n",
    };
    static const char *const whole[] = {
        "data: {\"a\":1}\n\n", "data:{}\r\n\r\n", "data:\n\n", "data: \n\n",
        "data:  two spaces\n\n", "data: 0123456789abcdefghijklm\n\n",
        "data: 0123456789abcdefghijklmnop\r\n\r\n",
    };
    static const char *const near[] = {     /* shapes the path must refuse */
        "data: v\r\n\r", "data: v\n\r\n", "data: v\r\r", "data: v\n",
        "data: v\r\n", "data: v\rdata: w\n\n", "data: v\n\r", "data: v\r\n\n",
        "data: v", "data:v\ndata:w\n\n",
    };
    uint32_t seed = 7;
    int round, canonical = 0, events = 0, over_rounds = 0;
    static char in[4096];

    (void)state;
    for (round = 0; round < 3000; round++) {
        size_t len = 0;
        int k, at_edge = 1, n = 1 + (int)(rng(&seed) % 40);
        struct out a, b;
        uint32_t oa = 0, ob = 0;

        for (k = 0; k < n; k++) {
            const char *t;
            if (at_edge && rng(&seed) % 2 == 0) {
                t = whole[rng(&seed) % (sizeof(whole) / sizeof(whole[0]))];
                canonical++;
            } else if (at_edge && rng(&seed) % 2 == 0) {
                t = near[rng(&seed) % (sizeof(near) / sizeof(near[0]))];
            } else {
                t = tok[rng(&seed) % (sizeof(tok) / sizeof(tok[0]))];
            }
            assert_true(len + strlen(t) < sizeof(in));
            memcpy(in + len, t, strlen(t));
            len += strlen(t);
            at_edge = len >= 2 && in[len - 1] == '\n' &&
                      (in[len - 2] == '\n' || (len >= 4 && memcmp(in + len - 4, "\r\n\r\n", 4) == 0));
        }
        sse_run(in, len, 0, 24, round % 2, &a, &oa);
        sse_run(in, len, 1, 24, round % 2, &b, &ob);
        if (strcmp(a.buf, b.buf) != 0 || oa != ob)
            fail_msg("round %d: whole \"%s\" (%u oversize), bytes \"%s\" (%u)",
                     round, a.buf, oa, b.buf, ob);
        assert_int_equal(a.n, b.n);
        events += a.n;
        over_rounds += oa > 0;
    }
    /* the mix reached the path, the general path and the bound often */
    assert_true(canonical > 5000);
    assert_true(events > 7000);
    assert_true(over_rounds > 600);
}

/* no allocation per event once the buffers have grown */
static void test_sse_buffers_reused(void **state)
{
    struct tt_sse d;
    struct out o;
    char *data0 = NULL;
    size_t cap0 = 0;
    int i;

    (void)state;
    tt_sse_init(&d, 0);
    for (i = 0; i < 2000; i++) {
        static const char ev[] = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
        memset(&o, 0, sizeof(o));
        tt_sse_feed(&d, ev, 20, on_ev, &o);             /* a cut line */
        tt_sse_feed(&d, ev + 20, sizeof(ev) - 21, on_ev, &o);
        assert_int_equal(o.n, 1);
        if (i == 0) {
            data0 = d.data;
            cap0 = d.data_cap;
        }
    }
    assert_ptr_equal(d.data, data0);
    assert_int_equal(d.data_cap, cap0);
    assert_true(d.line_cap <= 256);
    tt_sse_free(&d);
}

/* where the last event's data was, for the in-place tests */
static const char *last_data;

static void on_ev_where(void *ctx, const struct tt_sse_event *ev)
{
    last_data = ev->data;
    on_ev(ctx, ev);
}

/*
 * An event of one data line that ends inside its feed is read from the
 * feed's bytes; one whose feed ends first is kept before the feed goes (the
 * caller's buffer is overwritten between feeds here), and so is the first
 * line of an event that a second data line joins.
 */
static void test_sse_data_in_place(void **state)
{
    static const char one[] = "data: {\"a\":1}\n\n";
    char buf[64];
    struct tt_sse d;
    struct out o;

    (void)state;
    tt_sse_init(&d, 0);
    memset(&o, 0, sizeof(o));
    memcpy(buf, one, sizeof(one) - 1);
    tt_sse_feed(&d, buf, sizeof(one) - 1, on_ev_where, &o);
    assert_string_equal(o.buf, "|{\"a\":1}\x1e");
    assert_ptr_equal(last_data, buf + 6);               /* no copy */

    /* the feed ends after the data line: its bytes are gone before the
     * blank line comes */
    memset(&o, 0, sizeof(o));
    memcpy(buf, "data: kept\n", 11);
    tt_sse_feed(&d, buf, 11, on_ev_where, &o);
    assert_int_equal(o.n, 0);
    memset(buf, 'X', sizeof(buf));
    tt_sse_feed(&d, "\n", 1, on_ev_where, &o);
    assert_string_equal(o.buf, "|kept\x1e");

    /* a second data line joins the first, which was in place */
    memset(&o, 0, sizeof(o));
    memcpy(buf, "data: a\ndata: b\n\ndata: c\n", 25);
    tt_sse_feed(&d, buf, 25, on_ev_where, &o);
    memset(buf, 'X', sizeof(buf));
    tt_sse_feed(&d, "data: d\r\n\r\n", 11, on_ev_where, &o);
    assert_string_equal(o.buf, "|a\nb\x1e|c\nd\x1e");
    assert_int_equal(o.n, 2);

    /* the bound still counts an in-place line: "data: 1234567\n" is 8 bytes
     * of the event with its LF, over a bound of 7, and a second line's
     * bytes count against the first's */
    tt_sse_free(&d);
    tt_sse_init(&d, 7);
    memset(&o, 0, sizeof(o));
    tt_sse_feed(&d, "data: 1234567\n\ndata: 123456\n\ndata: 12\ndata: 3456\n\n", 50,
                on_ev_where, &o);
    assert_string_equal(o.buf, "|123456\x1e");
    assert_int_equal(d.oversize, 2);
    tt_sse_free(&d);
}

/* ---------------------------------------------------------------- */

static void nd_run(const char *in, size_t len, int mode, size_t max, int flush,
                   struct out *o, uint32_t *oversize)
{
    struct tt_ndjson d;
    size_t off = 0;
    uint32_t seed = (uint32_t)mode;

    memset(o, 0, sizeof(*o));
    tt_ndjson_init(&d, max);
    while (off < len) {
        size_t n = len - off;
        if (mode == 1)
            n = 1;
        else if (mode >= 2)
            n = 1 + rng(&seed) % 13;
        if (n > len - off)
            n = len - off;
        tt_ndjson_feed(&d, in + off, n, on_line, o);
        off += n;
    }
    tt_ndjson_finish(&d, flush, on_line, o);
    if (oversize != NULL)
        *oversize = d.oversize;
    tt_ndjson_free(&d);
}

static void test_ndjson_lines(void **state)
{
    static const char in[] =
        "\xEF\xBB\xBF{\"a\":1}\n"
        "{\"b\":2}\r\n"
        "\n"
        "   \r\n"
        "{\"c\":3}\n"
        "{\"d\":4}";
    int mode;

    (void)state;
    for (mode = 0; mode < 32; mode++) {
        struct out o;
        nd_run(in, sizeof(in) - 1, mode, 0, 1, &o, NULL);
        assert_string_equal(o.buf, "{\"a\":1}\x1e{\"b\":2}\x1e{\"c\":3}\x1e{\"d\":4}\x1e");
        nd_run(in, sizeof(in) - 1, mode, 0, 0, &o, NULL);
        assert_string_equal(o.buf, "{\"a\":1}\x1e{\"b\":2}\x1e{\"c\":3}\x1e");
    }
}

static void test_ndjson_oversize(void **state)
{
    char in[2048];
    size_t n = 0;
    int mode, i;

    (void)state;
    n += (size_t)sprintf(in + n, "{\"a\":1}\n{\"big\":\"");
    for (i = 0; i < 500; i++)
        in[n++] = 'x';
    n += (size_t)sprintf(in + n, "\"}\n{\"b\":2}\n");
    for (mode = 0; mode < 16; mode++) {
        struct out o;
        uint32_t over = 0;
        nd_run(in, n, mode, 64, 1, &o, &over);
        assert_string_equal(o.buf, "{\"a\":1}\x1e{\"b\":2}\x1e");
        assert_int_equal(over, 1);
    }
}

/* ---------------------------------------------------------------- */

static void test_json_arena(void **state)
{
    cJSON *outside, *root;
    char *printed, *big;
    size_t i, n;

    (void)state;
    /* an object made with plain malloc before the hooks exist ... */
    outside = cJSON_CreateObject();
    cJSON_AddStringToObject(outside, "k", "v");
    tt_json_init();

    root = tt_json_parse("{\"a\":[1,2,{\"b\":\"c\"}]}  \n", 24);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(
        cJSON_GetObjectItem(root, "a"), 2), "b")->valuestring, "c");
    /* trailing garbage and truncation are parse errors */
    assert_null(tt_json_parse("{\"a\":1}x", 8));
    assert_null(tt_json_parse("{\"a\":", 5));
    assert_null(tt_json_parse("", 0));
    /* not NUL-terminated input */
    assert_non_null(tt_json_parse("[1]]]]", 3));

    /* ... is printed and freed through the hooks, outside the arena */
    printed = cJSON_PrintUnformatted(outside);
    assert_string_equal(printed, "{\"k\":\"v\"}");
    cJSON_free(printed);
    cJSON_Delete(outside);

    /* a parse larger than the arena spills over, then the arena grows */
    n = 400000;
    big = malloc(n + 16);
    assert_non_null(big);
    big[0] = '[';
    for (i = 1; i + 2 < n; i += 2) {
        big[i] = '1';
        big[i + 1] = ',';
    }
    big[i++] = '1';
    big[i++] = ']';
    for (int k = 0; k < 3; k++) {
        root = tt_json_parse(big, i);
        assert_non_null(root);
        assert_int_equal(cJSON_GetArraySize(root), (int)(i / 2));
    }
    free(big);
    root = tt_json_parse("{\"x\":true}", 10);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(root, "x")));
    tt_json_reset();

    /* normal cJSON use after the arena was used on this thread */
    outside = cJSON_Parse("{\"z\":[1,2,3]}");
    assert_non_null(outside);
    cJSON_Delete(outside);
    tt_json_thread_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_line_ends),
        cmocka_unit_test(test_sse_cr_lf_across_feeds),
        cmocka_unit_test(test_sse_bom),
        cmocka_unit_test(test_sse_comments),
        cmocka_unit_test(test_sse_multiline_data),
        cmocka_unit_test(test_sse_event_names),
        cmocka_unit_test(test_sse_space_after_colon),
        cmocka_unit_test(test_sse_other_fields),
        cmocka_unit_test(test_sse_unterminated_end),
        cmocka_unit_test(test_sse_oversize),
        cmocka_unit_test(test_sse_oversize_boundary),
        cmocka_unit_test(test_sse_split_invariance),
        cmocka_unit_test(test_sse_whole_event_path),
        cmocka_unit_test(test_sse_buffers_reused),
        cmocka_unit_test(test_sse_data_in_place),
        cmocka_unit_test(test_ndjson_lines),
        cmocka_unit_test(test_ndjson_oversize),
        cmocka_unit_test(test_json_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
