/*
 * Unit tests of the request inspector (proxy/inspect.c): model, stream,
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
#include "proxy/inspect.h"
#include "proxy/stream.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_chat),
        cmocka_unit_test(test_other_apis),
        cmocka_unit_test(test_llamacpp_and_prompts),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
