/*
 * Unit tests of the request inspector (proxy/http/inspect.c): model, stream,
 * include_usage and max_tokens from each API's request body and path,
 * split feeding, and the bounds (huge, non-JSON, malformed bodies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/request.h"
#include "proxy/http/inspect.h"
#include "proxy/decode/stream.h"

/* inspect <body> for <path>, fed in pieces of <step> bytes (0 = whole) */
static void inspect(struct tt_request *r, const char *path, const char *body,
                    size_t step, size_t cap)
{
    struct tt_inspect in;
    size_t len = strlen(body), off = 0;

    tt_request_init(r);
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->api = tt_api_detect(path, strlen(path));
    tt_inspect_init(&in, cap);
    while (off < len) {
        size_t n = step == 0 || step > len - off ? len - off : step;
        tt_inspect_feed(&in, body + off, n);
        off += n;
    }
    tt_inspect_finish(&in, r);
    tt_inspect_free(&in);
}

static void test_openai_chat(void **state)
{
    static const char body[] =
        "  {\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":64}";
    struct tt_request r;
    size_t step;

    (void)state;
    for (step = 0; step < 9; step++) {
        inspect(&r, "/v1/chat/completions", body, step, 0);
        assert_string_equal(r.model, "gpt-4o-mini");
        assert_int_equal(r.stream, 1);
        assert_int_equal(r.include_usage, 1);
        assert_int_equal(r.max_tokens, 64);
    }
    /* defaults: stream false, include_usage false; max_completion_tokens wins */
    inspect(&r, "/v1/chat/completions",
            "{\"model\":\"o3\",\"max_tokens\":5,\"max_completion_tokens\":900}", 0, 0);
    assert_int_equal(r.stream, 0);
    assert_int_equal(r.include_usage, 0);
    assert_int_equal(r.max_tokens, 900);
    inspect(&r, "/v1/completions", "{\"model\":\"x\",\"stream\":false,\"prompt\":\"p\"}", 0, 0);
    assert_int_equal(r.stream, 0);
    assert_int_equal(r.max_tokens, -1);
}

/* llama.cpp's native body, and lists of prompts (each a prompt: strings or
 * token lists; a list of token ids is one prompt) */
static void test_llamacpp_and_prompts(void **state)
{
    struct tt_request r;

    (void)state;
    inspect(&r, "/completion", "{\"prompt\":\"p\",\"n_predict\":16,\"stream\":true}", 3, 0);
    assert_int_equal(r.api, TT_API_LLAMACPP);
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.max_tokens, 16);
    assert_int_equal(r.prompts, 0);
    inspect(&r, "/infill", "{\"input_prefix\":\"a\"}", 0, 0);
    assert_int_equal(r.stream, 0);
    inspect(&r, "/v1/completions", "{\"prompt\":[\"a\",\"b\",\"c\"],\"stream\":true}", 0, 0);
    assert_int_equal(r.prompts, 3);
    inspect(&r, "/v1/completions", "{\"prompt\":[[1,2],[3]]}", 0, 0);
    assert_int_equal(r.prompts, 2);
    inspect(&r, "/v1/completions", "{\"prompt\":[1,2,3]}", 0, 0);
    assert_int_equal(r.prompts, 0);
    inspect(&r, "/v1/completions", "{\"prompt\":[\"only\"]}", 0, 0);
    assert_int_equal(r.prompts, 0);
}

/* the members are found in one walk: the first of duplicates (as
 * cJSON_GetObjectItemCaseSensitive() finds it), keys by their decoded bytes,
 * keys of a wanted key's length that differ from it ignored, and the order
 * of precedence of the max_tokens fields whatever their order in the body */
static void test_member_lookup(void **state)
{
    struct tt_request r;

    (void)state;
    inspect(&r, "/v1/chat/completions",
            "{\"model\":\"a\",\"model\":\"b\",\"stream\":true,\"stream\":false,"
            "\"max_tokens\":5,\"max_tokens\":7}", 0, 0);
    assert_string_equal(r.model, "a");
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.max_tokens, 5);

    inspect(&r, "/v1/chat/completions",
            "{\"mod\\u0065l\":\"esc\",\"streaM\":true,\"max_tokenz\":3,"
            "\"parameterz\":{\"max_new_tokens\":4},\"stream_optionz\":{\"include_usage\":true}}",
            0, 0);
    assert_string_equal(r.model, "esc");
    assert_int_equal(r.stream, 0);
    assert_int_equal(r.include_usage, 0);
    assert_int_equal(r.max_tokens, -1);

    /* n_predict before max_new_tokens, direct fields before both; a field
     * that is not a count passes to the next */
    inspect(&r, "/v1/completions",
            "{\"max_new_tokens\":9,\"options\":{\"num_predict\":8},\"n_predict\":7,"
            "\"max_output_tokens\":-1}", 0, 0);
    assert_int_equal(r.max_tokens, 7);
    inspect(&r, "/v1/completions",
            "{\"options\":{\"num_predict\":8},\"max_new_tokens\":9,"
            "\"generationConfig\":{\"maxOutputTokens\":\"x\"}}", 0, 0);
    assert_int_equal(r.max_tokens, 9);
    inspect(&r, "/v1/completions",
            "{\"n_predict\":7,\"max_completion_tokens\":null,\"max_tokens\":6}", 0, 0);
    assert_int_equal(r.max_tokens, 6);
}

static void test_other_apis(void **state)
{
    struct tt_request r;

    (void)state;
    inspect(&r, "/v1/responses",
            "{\"model\":\"gpt-5\",\"input\":\"x\",\"stream\":true,\"max_output_tokens\":1000}", 3, 0);
    assert_string_equal(r.model, "gpt-5");
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.include_usage, -1);
    assert_int_equal(r.max_tokens, 1000);

    inspect(&r, "/v1/messages",
            "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,\"stream\":true,\"messages\":[]}", 1, 0);
    assert_string_equal(r.model, "claude-sonnet-4-5");
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.max_tokens, 1024);

    /* Ollama streams unless told not to */
    inspect(&r, "/api/chat", "{\"model\":\"gemma3:1b\",\"messages\":[],\"options\":{\"num_predict\":128}}", 0, 0);
    assert_string_equal(r.model, "gemma3:1b");
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.max_tokens, 128);
    inspect(&r, "/api/generate", "{\"model\":\"q\",\"prompt\":\"p\",\"stream\":false,"
            "\"options\":{\"num_predict\":-1}}", 0, 0);
    assert_int_equal(r.stream, 0);
    assert_int_equal(r.max_tokens, -1);

    /* Gemini: model and streaming from the path */
    inspect(&r, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":2048}}", 0, 0);
    assert_string_equal(r.model, "gemini-2.5-pro");
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.max_tokens, 2048);
    inspect(&r, "/v1beta/models/gemini-2.0-flash:generateContent", "not json", 0, 0);
    assert_string_equal(r.model, "gemini-2.0-flash");
    assert_int_equal(r.stream, 0);
    assert_int_equal(r.max_tokens, -1);

    /* TGI */
    inspect(&r, "/generate_stream",
            "{\"inputs\":\"x\",\"parameters\":{\"max_new_tokens\":20,\"details\":true}}", 2, 0);
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.max_tokens, 20);
    assert_string_equal(r.model, "");
    inspect(&r, "/generate", "{\"inputs\":\"x\"}", 0, 0);
    assert_int_equal(r.stream, 0);
}

static void test_bad_bodies(void **state)
{
    struct tt_request r;
    char *big;
    size_t n = 3000, i;

    (void)state;
    inspect(&r, "/v1/chat/completions", "{\"model\":\"m\",\"stream\":tru", 0, 0);
    assert_string_equal(r.model, "");
    assert_int_equal(r.stream, -1);
    assert_int_equal(r.include_usage, -1);
    assert_int_equal(r.max_tokens, -1);

    inspect(&r, "/v1/chat/completions", "[{\"model\":\"m\"}]", 0, 0);
    assert_string_equal(r.model, "");

    inspect(&r, "/v1/chat/completions", "", 0, 0);
    assert_int_equal(r.stream, -1);

    /* wrong types are ignored */
    inspect(&r, "/v1/chat/completions",
            "{\"model\":7,\"stream\":\"yes\",\"max_tokens\":\"9\",\"stream_options\":null}", 0, 0);
    assert_string_equal(r.model, "");
    assert_int_equal(r.stream, -1);
    assert_int_equal(r.max_tokens, -1);

    /* over the cap: nothing */
    big = malloc(n + 1);
    assert_non_null(big);
    i = (size_t)sprintf(big, "{\"model\":\"m\",\"stream\":true,\"pad\":\"");
    for (; i < n - 2; i++)
        big[i] = 'x';
    big[i++] = '"';
    big[i++] = '}';
    big[i] = '\0';
    inspect(&r, "/v1/chat/completions", big, 100, 1024);
    assert_string_equal(r.model, "");
    assert_int_equal(r.stream, -1);
    /* under it: parsed */
    inspect(&r, "/v1/chat/completions", big, 100, 4096);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.stream, 1);
    free(big);

    /* a long model name is cut to fit */
    {
        char body[512];
        size_t k = (size_t)sprintf(body, "{\"model\":\"");
        for (i = 0; i < 300; i++)
            body[k++] = 'a';
        sprintf(body + k, "\"}");
        inspect(&r, "/v1/messages", body, 0, 0);
        assert_int_equal(strlen(r.model), sizeof(r.model) - 1);
    }
}

/* the copy --inject-usage rewrites: the body byte for byte, leading
 * whitespace included, fed in any pieces; none once the inspector gave up */
static void test_body_copy(void **state)
{
    static const char body[] = " \r\n\t{\"stream\":true}";
    const char *p = NULL;
    size_t n = 0, step;

    (void)state;
    for (step = 1; step <= sizeof(body); step++) {
        struct tt_inspect in;
        size_t off;
        tt_inspect_init(&in, 0);
        for (off = 0; off < sizeof(body) - 1; off += step)
            tt_inspect_feed(&in, body + off,
                            step < sizeof(body) - 1 - off ? step : sizeof(body) - 1 - off);
        assert_int_equal(tt_inspect_body(&in, &p, &n), 0);
        assert_int_equal(n, sizeof(body) - 1);
        assert_memory_equal(p, body, n);
        tt_inspect_free(&in);
    }
    {
        struct tt_inspect in;
        tt_inspect_init(&in, 0);
        tt_inspect_feed(&in, "  [1]", 5);        /* not an object */
        assert_int_equal(tt_inspect_body(&in, &p, &n), -1);
        tt_inspect_free(&in);
        tt_inspect_init(&in, 8);
        tt_inspect_feed(&in, "{\"a\":123456}", 12);  /* over its cap */
        assert_int_equal(tt_inspect_body(&in, &p, &n), -1);
        tt_inspect_free(&in);
        tt_inspect_init(&in, 0);
        tt_inspect_feed(&in, "   ", 3);          /* nothing yet */
        assert_int_equal(tt_inspect_body(&in, &p, &n), -1);
        tt_inspect_free(&in);
    }
}

/* a declared length: the copy is one allocation of exactly that size,
 * held against the budget like any other, and the facts are the same */
static void test_declared_length(void **state)
{
    static const char head[] = "{\"model\":\"m\",\"stream\":true,\"x\":\"";
    size_t n = 40000, off, held0 = tt_inspect_held();
    char *body = malloc(n);
    const char *p;
    size_t got;
    (void)state;

    assert_non_null(body);
    memset(body, 'a', n);
    memcpy(body, head, sizeof(head) - 1);
    memcpy(body + n - 2, "\"}", 2);
    for (int declared = 0; declared < 2; declared++) {
        struct tt_inspect in;
        struct tt_request r;
        tt_inspect_init(&in, 0);
        if (declared)
            tt_inspect_expect(&in, n);
        for (off = 0; off < n; off += 4096)
            tt_inspect_feed(&in, body + off, n - off < 4096 ? n - off : 4096);
        /* doubling from 1 KiB ends at 64 KiB; the declared length is exact */
        assert_int_equal(in.alloc, declared ? n : 65536);
        if (declared) {             /* a byte does not buy the whole length */
            struct tt_inspect one;
            tt_inspect_init(&one, 0);
            tt_inspect_expect(&one, n);
            tt_inspect_feed(&one, body, 1);
            assert_int_equal(one.alloc, 1024);
            tt_inspect_feed(&one, body + 1, n / 4 - 1);
            assert_int_equal(one.alloc, n);         /* a quarter: all of it */
            tt_inspect_free(&one);
        }
        assert_int_equal(tt_inspect_held(), held0 + in.alloc);
        assert_int_equal(tt_inspect_body(&in, &p, &got), 0);
        assert_int_equal(got, n);
        assert_memory_equal(p, body, n);
        tt_request_init(&r);
        strcpy(r.path, "/v1/chat/completions");
        tt_inspect_finish(&in, &r);
        assert_string_equal(r.model, "m");
        assert_int_equal(r.stream, 1);
        tt_inspect_free(&in);
        assert_int_equal(tt_inspect_held(), held0);
    }
    {
        struct tt_inspect in;       /* over the cap: ignored, then too large */
        tt_inspect_init(&in, 1000);
        tt_inspect_expect(&in, n);
        assert_int_equal(in.expect, 0);
        tt_inspect_feed(&in, body, 4096);
        assert_int_equal(tt_inspect_body(&in, &p, &got), -1);
        assert_int_equal(in.alloc, 0);
        tt_inspect_free(&in);
    }
    free(body);
}

/* all inspectors share one budget: over it a body is not read, and
 * everything taken is given back */
static void test_budget(void **state)
{
    struct tt_inspect a, b;
    struct tt_request r;
    char *body = malloc(40000);
    (void)state;

    memset(body, ' ', 40000);
    memcpy(body, "{\"model\":\"m1\",\"x\":\"", 19);
    memcpy(body + 39990, "\"}", 2);
    tt_inspect_set_budget(64 * 1024);
    assert_int_equal(tt_inspect_held(), 0);
    tt_inspect_init(&a, 0);
    tt_inspect_init(&b, 0);
    tt_inspect_feed(&a, body, 39992);
    assert_true(tt_inspect_held() >= 39992);
    tt_inspect_feed(&b, body, 39992);               /* would pass 64 KiB */
    tt_request_init(&r);
    snprintf(r.path, sizeof(r.path), "/v1/chat/completions");
    r.api = tt_api_detect(r.path, strlen(r.path));
    tt_inspect_finish(&b, &r);
    assert_string_equal(r.model, "");
    assert_string_equal(r.inspect_skipped, "budget");
    tt_request_init(&r);
    snprintf(r.path, sizeof(r.path), "/v1/chat/completions");
    r.api = tt_api_detect(r.path, strlen(r.path));
    tt_inspect_finish(&a, &r);
    assert_string_equal(r.model, "m1");
    assert_null(r.inspect_skipped);
    assert_int_equal(tt_inspect_held(), 0);
    tt_inspect_free(&a);
    tt_inspect_free(&b);
    assert_int_equal(tt_inspect_held(), 0);
    tt_inspect_set_budget(0);
    free(body);
}

/* <body> (<len> bytes) for <path> through the one-pass reading, or
 * (<whole>) through the whole-tree parse */
static void inspect_n(struct tt_request *r, const char *path, const char *body,
                      size_t len, int whole)
{
    struct tt_inspect in;

    tt_request_init(r);
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->api = tt_api_detect(path, strlen(path));
    tt_inspect_init(&in, 0);
    in.whole_tree = whole;
    tt_inspect_feed(&in, body, len);
    tt_inspect_finish(&in, r);
    tt_inspect_free(&in);
}

/* the facts of <body> both ways; returns 1 when it was read (not refused) */
static int same_both_ways(const char *path, const char *body, size_t len)
{
    struct tt_request a, b;

    inspect_n(&a, path, body, len, 0);
    inspect_n(&b, path, body, len, 1);
    if (strcmp(a.model, b.model) != 0 || a.stream != b.stream ||
        a.include_usage != b.include_usage || a.max_tokens != b.max_tokens ||
        a.prompts != b.prompts || (a.inspect_skipped == NULL) != (b.inspect_skipped == NULL) ||
        (a.inspect_skipped && strcmp(a.inspect_skipped, b.inspect_skipped) != 0)) {
        print_error("one pass and whole tree differ on %s [%.*s]: model %s/%s stream %d/%d "
                    "include_usage %d/%d max_tokens %lld/%lld prompts %d/%d skipped %s/%s\n",
                    path, (int)len, body, a.model, b.model, a.stream, b.stream,
                    a.include_usage, b.include_usage, (long long)a.max_tokens,
                    (long long)b.max_tokens, (int)a.prompts, (int)b.prompts,
                    a.inspect_skipped ? a.inspect_skipped : "-",
                    b.inspect_skipped ? b.inspect_skipped : "-");
        fail();
    }
    return b.inspect_skipped == NULL;
}

/*
 * The one-pass reading of the body's top level (proxy/http/inspect.c) gives the
 * facts the whole cJSON tree gives, and refuses the bodies cJSON refuses,
 * including cJSON's own leniencies: every body here, and every prefix of
 * each (truncated bodies), both ways.
 */
static void test_one_pass_equals_whole_tree(void **state)
{
    static const char *const bodies[] = {
        "{\"model\":\"gpt\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"max_completion_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a \\\"quoted\\\" \\\\ \\n line \\u00e9 \\ud83d\\ude00\"}],"
        "\"model\":\"m\",\"max_tokens\":7}",
        "{\"model\":\"m\\u0031\",\"stream\":false}",               /* escape in a value */
        "{\"mod\\u0065l\":\"x\",\"model\":\"y\"}",                 /* escaped key first */
        "{\"model\":\"y\",\"mod\\u0065l\":\"x\"}",
        "{\"model\":\"a\",\"model\":\"b\",\"stream\":true,\"stream\":false}",   /* duplicates */
        "{\"prompt\":[\"a\",\"b\",\"c\"],\"max_tokens\":3}",
        "{\"prompt\":[[1,2],[3]],\"n\":2}",
        "{\"prompt\":[1,2,3]}",
        "{\"prompt\":[-1,2]}",
        "{\"prompt\":[]}",
        "{\"prompt\":[\"only\"]}",
        "{\"prompt\":\"one\"}",
        "{\"prompt\":7}",
        "{\"prompt\":[{},true,null,\"x\"]}",
        "{\"pro\\u006dpt\":[\"a\",\"b\"],\"prompt\":[1,2]}",
        "{\"prompt\":[1,2],\"prompt\":[\"a\",\"b\"]}",
        "{\"generationConfig\":{\"maxOutputTokens\":9},\"contents\":[]}",
        "{\"inputs\":\"x\",\"parameters\":{\"max_new_tokens\":5}}",
        "{\"model\":\"l\",\"options\":{\"num_predict\":4},\"stream\":null}",
        "{\"n_predict\":-1,\"max_new_tokens\":12}",
        "{\"max_tokens\":1e3,\"max_output_tokens\":2}",
        "{\"max_tokens\":1.5e1}",
        "{\"max_tokens\":01}", "{\"max_tokens\":1.}", "{\"max_tokens\":-}",
        "{\"max_tokens\":1e}", "{\"max_tokens\":1e+}", "{\"max_tokens\":.5}",
        "{\"max_tokens\":+1}", "{\"max_tokens\":1.2.3}", "{\"max_tokens\":0x10}",
        "{\"max_tokens\":123456789012345678901234567890123456789012345678901234567890123456789}",
        "{\"x\":123456789012345678901234567890123456789012345678901234567890123456789,\"model\":\"m\"}",
        "{\"x\":1E400,\"model\":\"m\"}", "{\"x\":-0,\"model\":\"m\"}",
        "{\"x\":\"\\q\",\"model\":\"m\"}",                         /* bad escape */
        "{\"x\":\"\\uZZZZ\",\"model\":\"m\"}",                     /* cJSON: \\u0000 */
        "{\"x\":\"\\ude00\",\"model\":\"m\"}",                     /* lone low surrogate */
        "{\"x\":\"\\ud83d\",\"model\":\"m\"}",                     /* high, nothing after */
        "{\"x\":\"\\ud83dxx\\ude00\",\"model\":\"m\"}",
        "{\"x\":\"\\ud83d\\u0041\",\"model\":\"m\"}",
        "{\"x\":\"\\u12\",\"model\":\"m\"}",
        "{\"x\":\"\\u000\\\"\",\"model\":\"m\"}",      /* \\u's 4th byte escapes the quote */
        "{\"x\":\"\\u00\\q\",\"model\":\"m\"}",
        "{\"x\":\"a\\\\\",\"model\":\"m\"}",
        "{\"x\":\"\\\\\\\"\",\"model\":\"m\"}",
        "{\"a\":{}", "{\"a\":{} ",                                 /* truncated */
        "{\"a\":{\"b\":{}", "{\"model\":\"m\",\"a\":{}", "{\"a\":[1]", "{\"a\":[[]",
        "{\"a\":1", "{\"a\":\"x\"", "{\"a\":", "{\"a\"", "{\"a", "{", "{ ",
        "{}", " \t\r\n{} \n", "{} x", "{}}", "{},", "{\"a\":1,}", "{\"a\":1 \"b\":2}",
        "{\"a\" 1}", "{,}", "{\"a\":[1,]}", "{\"a\":[,1]}", "{\"a\":nul}", "{\"a\":nullx}",
        "{\"a\":true,\"b\":false,\"c\":null,\"model\":\"m\"}", "{\"a\":tru}", "{\"a\":fals}",
        "{1:2}", "{\"a\":'x'}", "{\"stream\":true}\n\n", "{\"stream\":true}\t\r",
    };
    static const char *const paths[] = {
        "/v1/chat/completions", "/v1/completions", "/api/generate",
        "/v1beta/models/g:streamGenerateContent", "/generate_stream", "/x",
    };
    static char buf[16384];
    size_t i, j, k, read = 0;

    (void)state;
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        for (j = 0; j < sizeof(paths) / sizeof(paths[0]); j++) {
            size_t n = strlen(bodies[i]);
            read += (size_t)same_both_ways(paths[j], bodies[i], n);
            for (k = 1; k < n; k++)
                same_both_ways(paths[j], bodies[i], k);
        }
    assert_true(read > 100);            /* most of them are read, not refused */

    /* bytes cJSON counts as whitespace (any up to ' ', NUL included), and
     * NUL and control bytes inside strings */
    {
        static const char w[] = "{\x01\"model\"\x1f:\0\"m\\n\x02\0\x7f\"\x19,\"stream\":true}";
        assert_int_equal(same_both_ways("/v1/chat/completions", w, sizeof(w) - 1), 1);
    }
    /* a NUL ends cJSON's key: "parameters\0x" is "parameters" to it */
    {
        static const char nk[] = "{\"inputs\":\"x\",\"parameters\0V6\":{\"max_new_tokens\":5},"
                                 "\"prompt\0\":[\"a\",\"b\"]}";
        assert_int_equal(same_both_ways("/generate", nk, sizeof(nk) - 1), 1);
        assert_int_equal(same_both_ways("/v1/completions", nk, sizeof(nk) - 1), 1);
    }
    /* nesting: cJSON stops at 1000 levels */
    for (k = 998; k <= 1001; k++) {
        size_t n = 0, d;
        char *b = malloc(2 * k + 64);
        assert_non_null(b);
        n += (size_t)sprintf(b, "{\"model\":\"m\",\"x\":");
        for (d = 1; d < k; d++)
            b[n++] = '[';
        for (d = 1; d < k; d++)
            b[n++] = ']';
        b[n++] = '}';
        same_both_ways("/v1/chat/completions", b, n);
        free(b);
    }
    /* a long body of many small strings and numbers, and one huge string */
    {
        size_t n = (size_t)sprintf(buf, "{\"messages\":[");
        for (i = 0; i < 150; i++)
            n += (size_t)sprintf(buf + n, "%s{\"role\":\"user\",\"content\":\"w%zu \\\"q\\\"\",\"n\":%zu.5e-1}",
                                 i ? "," : "", i, i);
        n += (size_t)sprintf(buf + n, "],\"model\":\"long\",\"stream\":true}");
        assert_true(n < sizeof(buf));
        assert_int_equal(same_both_ways("/v1/chat/completions", buf, n), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_chat),
        cmocka_unit_test(test_other_apis),
        cmocka_unit_test(test_member_lookup),
        cmocka_unit_test(test_llamacpp_and_prompts),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_body_copy),
        cmocka_unit_test(test_declared_length),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_one_pass_equals_whole_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
