/*
 * Unit tests for tokentap-sim's pure parts: dialect routing, the "sim"
 * options table, replay event cutting, token words and think tags.
 * Includes the .c files so static functions are reachable; sim/main.c
 * (the process) is left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim/base.c"
#include "sim/dialect.c"
#include "sim/resp.c"
#include "sim/ws.c"
#include "sim/conn.c"

static const char *route(const char *path, enum sim_stream_rule *rule)
{
    const struct sim_dialect *d = sim_dialect_route(path, strlen(path), rule);
    return d ? tt_api_name(d->api) : NULL;
}

static void test_routes(void **state)
{
    enum sim_stream_rule r;
    (void)state;

    assert_string_equal(route("/v1/chat/completions", &r), "openai.chat");
    assert_int_equal(r, SIM_STREAM_BODY);
    assert_string_equal(route("/v1/completions", &r), "openai.completions");
    assert_string_equal(route("/v1/responses", &r), "openai.responses");
    assert_string_equal(route("/v1/messages", &r), "anthropic.messages");
    assert_string_equal(route("/v1beta/models/gemini-2.5-pro:streamGenerateContent",
                              &r), "gemini");
    assert_int_equal(r, SIM_STREAM_ALWAYS);
    assert_string_equal(route("/v1beta/models/gemini-2.5-pro:generateContent", &r),
                        "gemini");
    assert_int_equal(r, SIM_STREAM_NEVER);
    assert_string_equal(route("/api/chat", &r), "ollama");
    assert_int_equal(r, SIM_STREAM_BODY_TRUE);
    assert_string_equal(route("/api/generate", &r), "ollama");
    assert_string_equal(route("/generate_stream", &r), "tgi");
    assert_int_equal(r, SIM_STREAM_ALWAYS);
    assert_string_equal(route("/generate", &r), "tgi");
    assert_int_equal(r, SIM_STREAM_NEVER);
    assert_null(route("/v1/chat/completions/x", &r));
    assert_null(route("/v1beta/models/a/b:generateContent", &r));
    assert_null(route("/v1beta/models/g:countTokens", &r));
    assert_null(route("/", &r));
    assert_string_equal(route("/completion", &r), "llamacpp.completion");
    /* WebSocket-only: found by its API, never by path */
    assert_null(route("/v1/realtime", &r));
    assert_non_null(sim_dialect_of(TT_API_OPENAI_REALTIME));
    assert_non_null(sim_dialect_of(TT_API_OPENAI_REALTIME)->audio);
    assert_int_equal(sim_dialect_of(TT_API_OPENAI_RESPONSES)->api,
                     TT_API_OPENAI_RESPONSES);
    assert_null(sim_dialect_of(TT_API_OTHER));
    assert_null(sim_dialect_of(TT_API__COUNT));
}

static int parse(const char *json, struct sim_opts *o, char *err, size_t elen)
{
    cJSON *j = cJSON_Parse(json);
    int rc;

    assert_non_null(j);
    opts_default(o);
    rc = opts_parse(o, cJSON_GetObjectItem(j, "sim"), err, elen);
    cJSON_Delete(j);
    return rc;
}

static void test_opts(void **state)
{
    struct sim_opts o;
    char err[256];
    (void)state;

    assert_int_equal(parse("{}", &o, err, sizeof(err)), 0);
    assert_int_equal(o.ttft_ms, 50);
    assert_int_equal(o.tokens, 16);
    assert_int_equal(o.gap_ms, 10);
    assert_int_equal(o.tokens_per_event, 1);
    assert_int_equal(o.usage, -1);
    assert_int_equal(o.role_chunk, 1);
    assert_int_equal(o.chunked, 1);
    assert_int_equal(o.error_after, -1);

    assert_int_equal(parse("{\"sim\":{\"ttft_ms\":7,\"usage\":false,\"split\":\"byte\","
                           "\"reasoning_field\":\"reasoning\",\"reset_after\":0,"
                           "\"replay\":\"x.sse\"}}", &o, err, sizeof(err)), 0);
    assert_int_equal(o.ttft_ms, 7);
    assert_int_equal(o.usage, 0);
    assert_int_equal(o.split, SIM_SPLIT_BYTE);
    assert_int_equal(o.rfield, SIM_RF_REASONING);
    assert_int_equal(o.reset_after, 0);
    assert_string_equal(o.replay, "x.sse");
    free(o.replay);

    assert_int_equal(parse("{\"sim\":{\"tokns\":1}}", &o, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "tokns"));
    assert_int_equal(parse("{\"sim\":{\"ttft_ms\":-1}}", &o, err, sizeof(err)), -1);
    assert_int_equal(parse("{\"sim\":{\"ttft_ms\":1.5}}", &o, err, sizeof(err)), -1);
    assert_int_equal(parse("{\"sim\":{\"hang\":1}}", &o, err, sizeof(err)), -1);
    assert_int_equal(parse("{\"sim\":{\"split\":\"bytes\"}}", &o, err, sizeof(err)), -1);
    assert_int_equal(parse("{\"sim\":{\"tokens_per_event\":0}}", &o, err, sizeof(err)), -1);
    assert_int_equal(parse("{\"sim\":[]}", &o, err, sizeof(err)), -1);
}

/* cut <content> saved as <name>; the events joined must equal <want> */
static int cut(const char *name, const char *content, const char *want)
{
    char path[256], err[256];
    struct sim_resp r;
    FILE *f;
    int i, n;
    size_t len = 0;

    snprintf(path, sizeof(path), "/tmp/test_sim_%d_%s", (int)getpid(), name);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
    memset(&r, 0, sizeof(r));
    assert_int_equal(replay_load(&r, path, err, sizeof(err)), 0);
    unlink(path);
    for (i = 0; i < r.rn; i++) {
        assert_true(r.roff[i] < r.roff[i + 1]);
        len = r.roff[i + 1];
    }
    assert_int_equal(len, strlen(want));
    assert_memory_equal(r.rbuf, want, len);
    n = r.rn;
    free(r.rbuf);
    free(r.roff);
    return n;
}

static void test_replay_cut(void **state)
{
    (void)state;
    assert_int_equal(cut("a.sse", "data: 1\n\ndata: 2\n\n", "data: 1\n\ndata: 2\n\n"), 2);
    assert_int_equal(cut("b.sse", "data: 1\r\n\r\ndata: 2\r\n\r\n\n",
                         "data: 1\r\n\r\ndata: 2\r\n\r\n\n"), 3);
    assert_int_equal(cut("c.sse", "event: x\ndata: 1\n\ntail", "event: x\ndata: 1\n\ntail"), 2);
    assert_int_equal(cut("d.ndjson", "{\"a\":1}\n{\"b\":2}\n", "{\"a\":1}\n{\"b\":2}\n"), 2);
    assert_int_equal(cut("e.jsonl", "{\"a\":1}\r\n\n{\"b\":2}",
                         "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n"), 2);
}

static void test_words_and_think(void **state)
{
    struct sim_opts o;
    struct sim_gen g;
    char *s;
    (void)state;

    s = sim_words_str(0, 3, 2);
    assert_string_equal(s, "tok3 tok4 ");
    free(s);
    s = sim_words_str(1, 0, 1);
    assert_string_equal(s, "think0 ");
    free(s);

    opts_default(&o);
    o.reasoning_tokens = 3;
    memset(&g, 0, sizeof(g));
    g.o = &o;
    g.r_done = 1;
    s = think_wrap(&g, "think0 ", 1);
    assert_string_equal(s, "<think>think0 ");
    free(s);
    g.r_done = 3;
    s = think_wrap(&g, "think1 think2 ", 2);
    assert_string_equal(s, "think1 think2 </think>");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_opts),
        cmocka_unit_test(test_replay_cut),
        cmocka_unit_test(test_words_and_think),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
