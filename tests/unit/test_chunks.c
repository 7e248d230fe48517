/*
 * tt_chunks_execute() (proxy/decode/chunks.c), which takes canonical complete
 * chunks itself where llhttp stands between two chunks, against llhttp
 * alone: responses of random chunks (sizes of one to several hundred
 * bytes, hex in either case, leading zeros, extensions, sizes of more than
 * eight digits, trailers, a second response behind the first, and broken
 * framing: a missing CR or LF, data longer than its size, a bad digit),
 * cut into random pieces or fed whole, must give the same body bytes, the
 * same message ends, the same result and the same bytes parsed.  Also
 * checks that the fast path does take chunks (a shortcut that always fell
 * back would pass the comparison and save nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <llhttp.h>

#include "proxy/decode/chunks.h"
#include "tests/unit/rng.h"

#define BODY_MAX 65536

/* what a parser saw */
struct seen {
    struct tt_chunks chunks;
    char body[BODY_MAX];
    size_t body_len;
    unsigned bodies;            /* on_body calls */
    unsigned messages;          /* on_message_complete calls */
    unsigned headers;           /* on_chunk_header calls: chunks llhttp parsed */
    int fast;                   /* run through tt_chunks_execute() */
};

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct seen *s = p->data;

    assert_true(s->body_len + len <= BODY_MAX);
    memcpy(s->body + s->body_len, at, len);
    s->body_len += len;
    s->bodies++;
    return 0;
}

static int on_chunk_header(llhttp_t *p)
{
    struct seen *s = p->data;
    s->headers++;
    return s->fast ? tt_chunks_on_header(&s->chunks, p) : 0;
}

static int on_chunk_complete(llhttp_t *p)
{
    struct seen *s = p->data;
    return s->fast ? tt_chunks_on_complete(&s->chunks) : 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct seen *s = p->data;
    s->messages++;
    return 0;
}

static llhttp_settings_t settings;

static void setup_settings(void)
{
    llhttp_settings_init(&settings);
    settings.on_body = on_body;
    settings.on_chunk_header = on_chunk_header;
    settings.on_chunk_complete = on_chunk_complete;
    settings.on_message_complete = on_message_complete;
}

/* the outcome of one parse: result, bytes parsed, what was seen */
struct outcome {
    enum llhttp_errno e;
    size_t used;
};

/* parse <len> bytes of <msg> in pieces of at most <piece> (0: whole) */
static struct outcome parse(struct seen *s, int fast, const char *msg, size_t len,
                            uint64_t *seed, size_t piece)
{
    llhttp_t p;
    struct outcome o = { HPE_OK, 0 };

    memset(s, 0, sizeof(*s));
    s->fast = fast;
    tt_chunks_reset(&s->chunks);
    llhttp_init(&p, HTTP_RESPONSE, &settings);
    p.data = s;
    while (o.used < len) {
        size_t n = piece == 0 ? len - o.used : 1 + (size_t)(test_xorshift(seed) % piece);
        size_t used;

        if (n > len - o.used)
            n = len - o.used;
        if (fast) {
            o.e = tt_chunks_execute(&s->chunks, &p, msg + o.used, n, &used);
        } else {
            o.e = llhttp_execute(&p, msg + o.used, n);
            used = n;
            if (o.e != HPE_OK) {
                const char *pos = llhttp_get_error_pos(&p);
                used = (size_t)(pos - (msg + o.used));
            }
        }
        o.used += used;
        if (o.e != HPE_OK)
            break;
    }
    return o;
}

/* append a random chunk (or a broken one) to <m>; returns the new length */
static size_t add_chunk(char *m, size_t o, uint64_t *seed, unsigned *broken)
{
    static const char data[] = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
    uint64_t r = test_xorshift(seed);
    size_t size = 1 + (size_t)(test_xorshift(seed) % 400);
    const char *fmt = r & 1 ? "%zx" : "%zX";
    char num[32];
    int k;

    if (r % 7 == 0)
        o += (size_t)sprintf(m + o, "%.*s", (int)(r >> 8) % 4, "0000");
    if (r % 53 == 0)
        o += (size_t)sprintf(m + o, "000000000");     /* more than eight digits */
    k = snprintf(num, sizeof(num), fmt, size);
    memcpy(m + o, num, (size_t)k);
    o += (size_t)k;
    if (r % 11 == 0)
        o += (size_t)sprintf(m + o, ";ext=%u", (unsigned)(r >> 16) % 100);
    switch ((r >> 24) % 97) {
    case 0: m[o++] = '\n'; ++*broken; break;                    /* no CR */
    case 1: m[o++] = '\r'; ++*broken; break;                    /* no LF */
    case 2: m[o++] = 'g'; m[o++] = '\r'; m[o++] = '\n'; ++*broken; break;
    default: m[o++] = '\r'; m[o++] = '\n'; break;
    }
    for (size_t i = 0; i < size; i++)
        m[o++] = data[(i + (size_t)r) % (sizeof(data) - 1)];
    switch ((r >> 32) % 89) {
    case 0: m[o++] = 'x'; ++*broken; break;                     /* longer than its size */
    case 1: m[o++] = '\n'; ++*broken; break;
    case 2: m[o++] = '\r'; m[o++] = '\r'; ++*broken; break;
    default: m[o++] = '\r'; m[o++] = '\n'; break;
    }
    return o;
}

static size_t add_response(char *m, size_t o, uint64_t *seed, unsigned *broken)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    unsigned n = (unsigned)(test_xorshift(seed) % 24);

    memcpy(m + o, head, sizeof(head) - 1);
    o += sizeof(head) - 1;
    for (unsigned i = 0; i < n && o < BODY_MAX / 2; i++)
        o = add_chunk(m, o, seed, broken);
    if (test_xorshift(seed) % 5 == 0)
        o += (size_t)sprintf(m + o, "0\r\nX-Trailer: 1\r\n\r\n");
    else
        o += (size_t)sprintf(m + o, "0\r\n\r\n");
    return o;
}

static void test_random_responses_match_llhttp(void **state)
{
    static char msg[BODY_MAX];
    static struct seen ref, fast;
    uint64_t seed = 0x2545f4914f6cdd1dull;
    unsigned broken = 0, errors = 0, ends = 0, taken = 0;

    (void)state;
    setup_settings();
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = add_response(msg, 0, &seed, &broken);
        size_t piece = iter % 3 == 0 ? 0 : 1 + (size_t)(test_xorshift(&seed) % 700);
        uint64_t s1, s2;
        struct outcome a, b;

        if (iter % 4 == 0)
            len = add_response(msg, len, &seed, &broken);  /* keep-alive: a second */
        if (iter % 9 == 0)
            len -= (size_t)(test_xorshift(&seed) % 40);    /* cut short */
        s1 = s2 = seed;
        a = parse(&ref, 0, msg, len, &s1, piece);
        b = parse(&fast, 1, msg, len, &s2, piece);
        seed = s1;
        assert_int_equal(a.e, b.e);
        assert_int_equal(a.used, b.used);
        assert_int_equal(ref.messages, fast.messages);
        assert_int_equal(ref.body_len, fast.body_len);
        assert_memory_equal(ref.body, fast.body, ref.body_len);
        errors += a.e != HPE_OK;
        ends += ref.messages;
        taken += ref.headers - fast.headers;
    }
    /* the cases were exercised: broken framing, errors, completed messages */
    assert_true(broken > 100);
    assert_true(errors > 100);
    assert_true(ends > 2000);
    assert_true(taken > 10000);         /* chunks the fast path took */
}

/* a stream of whole chunks in one read: after the first chunk (llhttp's,
 * which pauses at its end), every chunk is taken without llhttp */
static void test_fast_path_taken(void **state)
{
    static char msg[BODY_MAX];
    static struct seen s;
    static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t o = sizeof(head) - 1, used;
    llhttp_t p;
    enum llhttp_errno e;

    (void)state;
    setup_settings();
    memcpy(msg, head, o);
    for (int i = 0; i < 50; i++)
        o += (size_t)sprintf(msg + o, "c\r\nhello world!\r\n");
    memset(&s, 0, sizeof(s));
    s.fast = 1;
    tt_chunks_reset(&s.chunks);
    llhttp_init(&p, HTTP_RESPONSE, &settings);
    p.data = &s;
    e = tt_chunks_execute(&s.chunks, &p, msg, o, &used);
    assert_int_equal(e, HPE_OK);
    assert_int_equal(used, o);
    assert_int_equal(s.body_len, 50 * 12);
    assert_int_equal(s.bodies, 50);
    assert_int_equal(s.headers, 1);     /* llhttp parsed the first only */
    assert_true(s.chunks.edge);         /* between two chunks, known */
    assert_int_equal(tt_chunks_take(&p, "5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n", 25), 18);
    assert_int_equal(s.body_len, 50 * 12 + 8);
    /* the end is llhttp's */
    e = tt_chunks_execute(&s.chunks, &p, "0\r\n\r\n", 5, &used);
    assert_int_equal(e, HPE_OK);
    assert_int_equal(s.messages, 1);
    assert_false(s.chunks.edge);
    /* what the fast path leaves to llhttp: an extension, more than eight
     * digits, a cut chunk, the last chunk, a missing CRLF */
    assert_int_equal(tt_chunks_take(&p, "5;a=b\r\nhello\r\n", 14), 0);
    assert_int_equal(tt_chunks_take(&p, "000000005\r\nhello\r\n", 18), 0);
    assert_int_equal(tt_chunks_take(&p, "5\r\nhell", 7), 0);
    assert_int_equal(tt_chunks_take(&p, "0\r\n\r\n", 5), 0);
    assert_int_equal(tt_chunks_take(&p, "5\r\nhelloX\r\n", 11), 0);
    assert_int_equal(tt_chunks_take(&p, "5\nhello\r\n", 9), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_responses_match_llhttp),
        cmocka_unit_test(test_fast_path_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
