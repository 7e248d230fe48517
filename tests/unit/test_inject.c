/*
 * Unit tests of proxy/http/inject.c (--inject-usage, the pure parts): the
 * request rewrite changes nothing but the inserted member, and the response
 * filter turns an injected stream into the bytes the client would have had
 * without the option, event for event, whatever the split (whole, one byte
 * at a time, random pieces).
 *
 * Fixtures: $TT_FIXTURES, else ../shared/fixtures/streams; missing ones skip.
 * The usage-only events of the llama.cpp captures, found by reading the
 * files (the blank line after each event is part of it):
 *   llamacpp-b10587-chat-include_usage-timings.sse (5123 B): one, bytes
 *     4551..5109 (choices [], usage 42/16/cached 12, timings)
 *   llamacpp-b10587-chat-n2-include_usage.sse (10468 B): two, bytes
 *     8801..9374 and 9881..10454 (one per choice)
 * so the uninjected streams are the files without those ranges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/fixture.h"

#include "proxy/http/inject.h"

/* ---- the request ------------------------------------------------------- */

static void expect_rewrite(const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;
    int rc = tt_inject_request(in, strlen(in), &out, &n);

    if (want == NULL) {
        assert_int_equal(rc, 0);
        return;
    }
    assert_int_equal(rc, 1);
    if (n != strlen(want) || memcmp(out, want, n) != 0)
        fail_msg("rewrite of %s\n got %.*s\nwant %s", in, (int)n, out, want);
    free(out);
}

static void test_request_rewrite(void **state)
{
    (void)state;
    expect_rewrite("{\"model\":\"m\",\"stream\":true,\"messages\":[]}",
                   "{\"stream_options\":{\"include_usage\":true},\"model\":\"m\","
                   "\"stream\":true,\"messages\":[]}");
    /* formatting kept exactly */
    expect_rewrite(" {\n  \"stream\": true,\n  \"n\": 2\n}\n",
                   " {\"stream_options\":{\"include_usage\":true},\n  \"stream\": true,\n"
                   "  \"n\": 2\n}\n");
    /* into an existing stream_options, empty or not */
    expect_rewrite("{\"stream\":true,\"stream_options\":{}}",
                   "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    expect_rewrite("{\"stream\":true,\"stream_options\":{\"continuous_usage_stats\":true}}",
                   "{\"stream\":true,\"stream_options\":{\"include_usage\":true,"
                   "\"continuous_usage_stats\":true}}");
    /* "stream_options" inside a message is text, not a member */
    expect_rewrite("{\"messages\":[{\"content\":\"\\\"stream_options\\\":{}\"}],\"stream\":true}",
                   "{\"stream_options\":{\"include_usage\":true},\"messages\":[{\"content\":"
                   "\"\\\"stream_options\\\":{}\"}],\"stream\":true}");
    /* nothing to do */
    expect_rewrite("{\"stream\":false}", NULL);
    expect_rewrite("{\"model\":\"m\"}", NULL);
    expect_rewrite("{\"stream\":true,\"stream_options\":{\"include_usage\":false}}", NULL);
    expect_rewrite("{\"stream\":true,\"stream_options\":{\"include_usage\":true}}", NULL);
    expect_rewrite("{\"stream\":true,\"stream_options\":7}", NULL);
    expect_rewrite("[{\"stream\":true}]", NULL);
    expect_rewrite("{\"stream\":true", NULL);
    expect_rewrite("", NULL);
    /* an escaped key is not found as written: left alone */
    expect_rewrite("{\"stream\":true,\"stream\\u005foptions\":{}}", NULL);
}

/* ---- the response filter ---------------------------------------------- */

struct sink {
    char  *p;
    size_t len, cap;
};

static void sink_out(void *ctx, const char *p, size_t n)
{
    struct sink *s = ctx;

    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2 + 64;
        s->p = realloc(s->p, s->cap);
        assert_non_null(s->p);
    }
    memcpy(s->p + s->len, p, n);
    s->len += n;
}

static uint32_t rng(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

/* filter <in> split by <mode> (0 whole, 1 one byte at a time, else random
 * pieces of 1..2^(mode%12) bytes) into <out> (reset first) */
static void filter(const char *in, size_t len, int mode, int strip_null,
                   struct sink *out, struct tt_inject_filter *f)
{
    size_t off = 0;
    uint32_t seed = (uint32_t)mode * 2654435761u;

    out->len = 0;
    tt_inject_filter_init(f, strip_null);
    while (off < len) {
        size_t n = mode == 0 ? len : mode == 1 ? 1 : 1 + rng(&seed) % (1u << (mode % 12));
        if (n > len - off)
            n = len - off;
        tt_inject_filter_feed(f, in + off, n, sink_out, out);
        off += n;
    }
    tt_inject_filter_finish(f, sink_out, out);
    tt_inject_filter_free(f);
}

/* <a> and <b> equal as bytes and as lists of events ("\n\n" ended) */
static void same_events(const char *a, size_t an, const char *b, size_t bn,
                        const char *what, int mode)
{
    size_t i = 0, j = 0, k = 0;

    while (i < an && j < bn) {
        const char *ea = memmem(a + i, an - i, "\n\n", 2);
        const char *eb = memmem(b + j, bn - j, "\n\n", 2);
        size_t la = ea ? (size_t)(ea + 2 - (a + i)) : an - i;
        size_t lb = eb ? (size_t)(eb + 2 - (b + j)) : bn - j;
        if (la != lb || memcmp(a + i, b + j, la) != 0)
            fail_msg("%s mode %d: event %zu differs:\n got %.*s\nwant %.*s", what, mode, k,
                     (int)la, a + i, (int)lb, b + j);
        i += la;
        j += lb;
        k++;
    }
    if (i != an || j != bn || an != bn || memcmp(a, b, an) != 0)
        fail_msg("%s mode %d: %zu bytes, want %zu", what, mode, an, bn);
}

static void check_filter(const char *in, size_t len, const char *want, size_t wlen,
                         int strip_null, uint32_t dropped, uint32_t stripped,
                         const char *what)
{
    struct sink out = { 0 };
    struct tt_inject_filter f;
    int mode;

    for (mode = 0; mode < 32; mode++) {
        filter(in, len, mode, strip_null, &out, &f);
        same_events(out.p, out.len, want, wlen, what, mode);
        assert_int_equal(f.dropped, dropped);
        assert_int_equal(f.stripped, stripped);
    }
    free(out.p);
}

/*
 * OpenAI with include_usage: every chunk carries "usage":null and a
 * usage-only chunk precedes [DONE]; without it neither is there.
 */
static void test_filter_openai_shape(void **state)
{
    static const char injected[] =
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}],\"usage\":null}\n\n"
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],"
        "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"total_tokens\":6}}\n\n"
        "data: [DONE]\n\n";
    static const char plain[] =
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    /* spaced JSON, CRLF line ends, "usage" first, an event: line, a comment */
    static const char injected_crlf[] =
        ": keep-alive\r\n\r\n"
        "event: message\r\ndata: {\"usage\": null, \"id\": \"x\", \"choices\": [{\"delta\": {\"content\": \"a\"}}]}\r\n\r\n"
        "data: {\"id\": \"x\", \"choices\": [ ], \"usage\": {\"prompt_tokens\": 1}}\r\n\r\n"
        "data: [DONE]\r\n\r\n";
    static const char plain_crlf[] =
        ": keep-alive\r\n\r\n"
        "event: message\r\ndata: {\"id\": \"x\", \"choices\": [{\"delta\": {\"content\": \"a\"}}]}\r\n\r\n"
        "data: [DONE]\r\n\r\n";
    /* CR-only line ends */
    static const char injected_cr[] =
        "data: {\"choices\":[{\"text\":\"a\"}]}\r\r"
        "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\r\r"
        "data: [DONE]\r\r";
    static const char plain_cr[] =
        "data: {\"choices\":[{\"text\":\"a\"}]}\r\r"
        "data: [DONE]\r\r";

    (void)state;
    check_filter(injected, strlen(injected), plain, strlen(plain), 1, 1, 2, "openai");
    check_filter(injected_crlf, strlen(injected_crlf), plain_crlf, strlen(plain_crlf), 1, 1, 1,
                 "openai crlf");
    check_filter(injected_cr, strlen(injected_cr), plain_cr, strlen(plain_cr), 1, 1, 0,
                 "openai cr");
    /* "usage": null kept when the server sends it regardless (TGI) */
    {
        static const char keep[] =
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n"
            "data: [DONE]\n\n";
        check_filter(keep, strlen(keep), keep, strlen(keep), 0, 0, 0, "strip_null off");
    }
    /* an unterminated last event goes out as it is */
    {
        static const char cut[] = "data: {\"choices\":[],\"usage\":{\"x\":1}}";
        check_filter(cut, strlen(cut), cut, strlen(cut), 1, 0, 0, "unterminated");
    }
}



/* the file without the byte ranges <cut> (pairs, ascending, 0-ended) */
static char *without(const char *in, size_t len, const size_t *cut, size_t *out_len)
{
    char *out = malloc(len);
    size_t o = 0, from = 0;

    assert_non_null(out);
    for (; cut[0] != 0; cut += 2) {
        memcpy(out + o, in + from, cut[0] - from);
        o += cut[0] - from;
        from = cut[1];
    }
    memcpy(out + o, in + from, len - from);
    *out_len = o + len - from;
    return out;
}

static void test_filter_llamacpp_fixtures(void **state)
{
    static const struct {
        const char *file;
        size_t len;
        size_t cut[6];
        uint32_t dropped;
    } fx[] = {
        { "llamacpp-b10587-chat-include_usage-timings.sse", 5123, { 4551, 5109, 0 }, 1 },
        { "llamacpp-b10587-chat-n2-include_usage.sse", 10468,
          { 8801, 9374, 9881, 10454, 0 }, 2 },
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(fx) / sizeof(fx[0]); k++) {
        size_t len, wlen;
        char *in = read_fixture(fx[k].file, &len), *want;

        if (in == NULL) {
            printf("SKIP: %s not found in %s\n", fx[k].file, fixture_dir());
            skip();
        }
        assert_int_equal(len, fx[k].len);
        /* the cut ranges are the usage-only events, nothing else */
        for (size_t c = 0; fx[k].cut[c] != 0; c += 2) {
            assert_memory_equal(in + fx[k].cut[c], "data: {\"choices\":[],", 20);
            assert_memory_equal(in + fx[k].cut[c + 1] - 2, "\n\n", 2);
        }
        want = without(in, len, fx[k].cut, &wlen);
        check_filter(in, len, want, wlen, 1, fx[k].dropped, 0, fx[k].file);
        free(want);
        free(in);
    }
}

/* a stream without usage-only chunks passes byte for byte (TGI's chat
 * stream, "usage":null on every chunk, kept with strip_null off) */
static void test_filter_passes_others(void **state)
{
    size_t len;
    char *in = read_fixture("tgi-3.2.1-chat-stream.sse", &len);

    (void)state;
    if (in == NULL) {
        printf("SKIP: tgi-3.2.1-chat-stream.sse not found in %s\n", fixture_dir());
        skip();
    }
    check_filter(in, len, in, len, 0, 0, 0, "tgi-3.2.1-chat-stream.sse");
    free(in);
}

/* an event over the bound is forwarded as it arrives, unfiltered */
static void test_filter_oversize(void **state)
{
    size_t n = TT_INJECT_EVENT_MAX + 100, len;
    char *in = malloc(n + 64);
    struct sink out = { 0 };
    struct tt_inject_filter f;

    (void)state;
    assert_non_null(in);
    memcpy(in, "data: {\"choices\":[],\"usage\":{\"x\":\"", 35);
    memset(in + 35, 'a', n - 35);
    len = n;
    memcpy(in + len, "\"}}\n\ndata: [DONE]\n\n", 19);
    len += 19;
    filter(in, len, 5, 1, &out, &f);
    assert_int_equal(out.len, len);
    assert_memory_equal(out.p, in, len);
    assert_int_equal(f.dropped, 0);
    free(out.p);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_rewrite),
        cmocka_unit_test(test_filter_openai_shape),
        cmocka_unit_test(test_filter_llamacpp_fixtures),
        cmocka_unit_test(test_filter_passes_others),
        cmocka_unit_test(test_filter_oversize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
