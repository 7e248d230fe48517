/*
 * Unit tests of proxy/decode/stream.c: API detection, every captured stream in
 * the shared fixtures (expected figures determined by hand from the files,
 * see the table), split invariance (whole, random pieces, one byte at a
 * time), exact stamps, think tags, errors, truncation, non-streaming bodies.
 *
 * Fixtures: $TT_FIXTURES, else ../shared/fixtures/streams (relative to the
 * repository root, where tests run).  Missing fixtures skip those tests.
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

#include "metrics/clock.h"
#include "metrics/request.h"
#include "proxy/http/httphead.h"
#include "proxy/decode/stream.h"

#define SSE     "text/event-stream"
#define NDJSON  "application/x-ndjson"
#define JSON    "application/json"

/* ------------------------------------------------------------------ */
/* API detection                                                       */

static enum tt_api det(const char *p)
{
    return tt_api_detect(p, strlen(p));
}

static void test_api_detect(void **state)
{
    (void)state;
    assert_int_equal(det("/v1/chat/completions"), TT_API_OPENAI_CHAT);
    assert_int_equal(det("/v1/chat/completions?x=1"), TT_API_OPENAI_CHAT);
    assert_int_equal(det("/openai/v1/chat/completions"), TT_API_OPENAI_CHAT);
    assert_int_equal(det("/openai/deployments/gpt4/chat/completions?api-version=2024"),
                     TT_API_OPENAI_CHAT);
    assert_int_equal(det("/v1/chat/completions/"), TT_API_OPENAI_CHAT);
    assert_int_equal(det("/v1/completions"), TT_API_OPENAI_COMPLETIONS);
    assert_int_equal(det("/v1/responses"), TT_API_OPENAI_RESPONSES);
    assert_int_equal(det("/v1/messages"), TT_API_ANTHROPIC);
    assert_int_equal(det("/anthropic/v1/messages?beta=true"), TT_API_ANTHROPIC);
    assert_int_equal(det("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
                     TT_API_GEMINI);
    assert_int_equal(det("/v1beta/models/gemini-2.5-pro:generateContent"), TT_API_GEMINI);
    assert_int_equal(det("/v1beta/models/gemini-2.5-pro:countTokens"), TT_API_OTHER);
    assert_int_equal(det("/api/chat"), TT_API_OLLAMA);
    assert_int_equal(det("/api/generate"), TT_API_OLLAMA);
    assert_int_equal(det("/generate"), TT_API_TGI);
    assert_int_equal(det("/generate_stream"), TT_API_TGI);
    assert_int_equal(det("/tgi/generate_stream?a=b"), TT_API_TGI);
    assert_int_equal(det("/v1/models"), TT_API_OTHER);
    assert_int_equal(det("/"), TT_API_OTHER);
    assert_int_equal(det(""), TT_API_OTHER);
    assert_int_equal(det("/v1/chat/completionsX"), TT_API_OTHER);
    assert_int_equal(det("/v1/threads/t/messages"), TT_API_OTHER);
    assert_int_equal(det("/completion"), TT_API_LLAMACPP);
    assert_int_equal(det("/infill"), TT_API_LLAMACPP);
    assert_int_equal(det("/completion/"), TT_API_LLAMACPP);
    assert_int_equal(det("/completion?x=1"), TT_API_LLAMACPP);
    /* whole paths: a mistyped OpenAI path is not llama.cpp's native API */
    assert_int_equal(det("/v1/chat/completion"), TT_API_OTHER);
    assert_int_equal(det("/v1/completion"), TT_API_OTHER);
    assert_int_equal(det("/x/infill"), TT_API_OTHER);
    assert_int_equal(det("/completions"), TT_API_OPENAI_COMPLETIONS);   /* until its events say */
    assert_string_equal(tt_api_name(TT_API_LLAMACPP), "llamacpp.completion");
    assert_int_equal(tt_api_detect("/v1/messagesXYZ", 12), TT_API_ANTHROPIC);
    assert_string_equal(tt_api_name(TT_API_OPENAI_CHAT), "openai.chat");
    assert_string_equal(tt_api_name(TT_API_OPENAI_COMPLETIONS), "openai.completions");
    assert_string_equal(tt_api_name(TT_API_OPENAI_RESPONSES), "openai.responses");
    assert_string_equal(tt_api_name(TT_API_ANTHROPIC), "anthropic.messages");
    assert_string_equal(tt_api_name(TT_API_GEMINI), "gemini");
    assert_string_equal(tt_api_name(TT_API_OLLAMA), "ollama");
    assert_string_equal(tt_api_name(TT_API_TGI), "tgi");
    assert_string_equal(tt_api_name(TT_API_OTHER), "other");
    assert_string_equal(tt_api_name((enum tt_api)99), "other");
}

/* ------------------------------------------------------------------ */
/* fixtures                                                            */

enum wrap {
    RAW = 0,
    WRAP_EVENT,     /* .jsonl -> "event: <type>\ndata: <line>\n\n" */
    WRAP_DONE,      /* .jsonl -> "data: <line>\n\n" ... "data: [DONE]\n\n" */
    DROP_FIRST,     /* raw minus its first event (a stream joined mid-thought) */
};

/*
 * Expected figures, determined by reading each file (grep and python
 * one-liners over the JSON, independent of the code under test).  d_*: the
 * byte offset, in the bytes as fed, whose arrival dispatches the event that
 * sets first_event / first_token / second_token / first_output_token /
 * last_token (the blank line's terminator; -1 = never set).
 */
struct fx {
    const char *file;
    enum tt_api api;
    const char *ctype;
    enum wrap   wrap;
    enum tt_think_mode think;
    uint32_t    events, reasoning, answer;
    uint64_t    rbytes, abytes;
    int64_t     in, out, rsn;
    const char *finish;
    int         error;
    const char *error_type;
    const char *error_msg;      /* prefix */
    int         terminal;
    const char *model;
    int         err_code;       /* request error at the end; 0 = none */
    const char *err_type;
    long        d_event, d_first, d_second, d_output, d_last;
};

static const struct fx fixtures[] = {
    { "openai-chat-tool_calls-include_usage.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      9, 0, 6, 0, 27, 53, 15, 0, "tool_calls", 0, "", "", 1,
      "gpt-4o-mini-2024-07-18", 0, NULL, 488, 488, 865, 488, 2373 },
    { "anthropic-messages-thinking-signature.sse", TT_API_ANTHROPIC, SSE, RAW, TT_THINK_AUTO,
      118, 13, 95, 202, 1021, 43, 282, -1, "end_turn", 0, "", "", 1,
      "claude-sonnet-4-20250514", 0, NULL, 471, 791, 963, 3716, 16239 },
    { "anthropic-messages-tool_use-input_json_delta.sse", TT_API_ANTHROPIC, SSE, RAW, TT_THINK_AUTO,
      21, 0, 9, 0, 96, 679, 111, -1, "tool_use", 0, "", "", 1,
      "claude-sonnet-4-5-20250929", 0, NULL, 444, 752, 874, 752, 2284 },
    { "deepseek-chat-reasoning_content.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      172, 158, 11, 693, 43, 6, 212, 198, "stop", 0, "", "", 1,
      "deepseek-reasoner", 0, NULL, 333, 649, 966, 51128, 54316 },
    { "gemini-streamGenerateContent-sse-thoughts.sse", TT_API_GEMINI, SSE, RAW, TT_THINK_AUTO,
      23, 4, 19, 1575, 1938, 34, 1256, 787, "STOP", 0, "", "", 1,
      "gemini-2.5-pro", 0, NULL, 692, 692, 1474, 9579, 17731 },
    { "groq-chat-gpt-oss-reasoning-error-event.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      95, 93, 0, 412, 0, -1, -1, -1, "", 1, "invalid_request_error",
      "Tool call validation failed: tool call validation failed: parameters for tool get_something_by_name",
      0, "openai/gpt-oss-120b", 400, "invalid_request_error", 350, 642, 937, -1, 27740 },
    { "ollama-api-chat.ndjson", TT_API_OLLAMA, NDJSON, RAW, TT_THINK_AUTO,
      22, 0, 21, 0, 33, 16, 22, -1, "stop", 0, "", "", 1,
      "gemma3:1b", 0, NULL, 125, 125, 248, 125, 2596 },
    { "openai-responses-failed.jsonl", TT_API_OPENAI_RESPONSES, SSE, WRAP_EVENT, TT_THINK_AUTO,
      4, 0, 0, 0, 0, -1, -1, -1, "failed", 1, "insufficient_quota",
      "You exceeded your current quota, please check your plan and billing details.", 1,
      "gpt-5-nano-2025-08-07", 500, "insufficient_quota", 799, -1, -1, -1, -1 },
    { "openai-responses-reasoning_summary-function_call.jsonl", TT_API_OPENAI_RESPONSES, SSE,
      WRAP_EVENT, TT_THINK_AUTO,
      56, 32, 13, 163, 25, 134, 28, 0, "completed", 0, "", "", 1,
      "gpt-5.1-codex-max", 0, NULL, 1281, 4185, 4451, 15342, 18361 },
    { "openrouter-chat-midstream-error.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      5, 2, 0, 42, 0, 43, 10, 11, "length", 1, "400", "Token limit reached", 1,
      "minimax/minimax-m2:free", 400, "stream_error", 827, 827, 1294, -1, 1294 },
    { "openrouter-chat-reasoning_details.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      15, 3, 2, 51, 9, 43, 36, 13, "stop", 0, "", "", 1,
      "anthropic/claude-sonnet-4.5", 0, NULL, 384, 1227, 1754, 4327, 4669 },
    { "sglang-style-chat-reasoning_content.jsonl", TT_API_OPENAI_CHAT, SSE, WRAP_DONE, TT_THINK_AUTO,
      152, 70, 78, 661, 578, 19, 1720, 0, "stop", 0, "", "", 1,
      "deepseek-v4-pro", 0, NULL, 307, 610, 919, 22342, 46106 },
    { "tgi-3.2.1-chat-stream.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      21, 0, 20, 0, 104, -1, -1, -1, "length", 0, "", "", 1,
      "meta-llama/Llama-3.1-8B-Instruct", 0, NULL, 269, 269, 544, 269, 5427 },
    { "tgi-generate_stream-details.sse", TT_API_TGI, SSE, RAW, TT_THINK_AUTO,
      1, 0, 1, 0, 1, -1, 1, -1, "length", 0, "", "", 1,
      "", 0, NULL, 172, 172, -1, 172, 172 },
    { "together-deepseek-r1-think-tags.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      104, 51, 50, 213, 243, 10, 955, -1, "stop", 0, "", "", 1,
      "deepseek-ai/DeepSeek-R1", 0, NULL, 305, 305, 598, 15505, 30476 },
    { "together-deepseek-r1-think-tags.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_ON,
      104, 51, 50, 213, 243, 10, 955, -1, "stop", 0, "", "", 1,
      "deepseek-ai/DeepSeek-R1", 0, NULL, 305, 305, 598, 15505, 30476 },
    { "together-deepseek-r1-think-tags.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_OFF,
      104, 0, 101, 0, 456, 10, 955, -1, "stop", 0, "", "", 1,
      "deepseek-ai/DeepSeek-R1", 0, NULL, 305, 305, 598, 305, 30476 },
    /* without its "<think>" event (306 bytes): auto sees the stream start
     * mid-thought, reclassifies at "</think>", first output moves there */
    { "together-deepseek-r1-think-tags.sse", TT_API_OPENAI_CHAT, SSE, DROP_FIRST, TT_THINK_AUTO,
      103, 50, 50, 206, 243, 10, 955, -1, "stop", 0, "", "", 1,
      "deepseek-ai/DeepSeek-R1", 0, NULL, 598 - 306, 598 - 306, 0, 15505 - 306, 30476 - 306 },
    { "together-deepseek-r1-think-tags.sse", TT_API_OPENAI_CHAT, SSE, DROP_FIRST, TT_THINK_ON,
      103, 0, 100, 0, 449, 10, 955, -1, "stop", 0, "", "", 1,
      "deepseek-ai/DeepSeek-R1", 0, NULL, 598 - 306, 598 - 306, 0, 598 - 306, 30476 - 306 },
    { "vllm-0.24-chat-include_usage.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      17, 0, 13, 0, 13, 46, 14, -1, "stop", 0, "", "", 1,
      "meta-llama/Llama-3.3-70B-Instruct", 0, NULL, 285, 527, 769, 527, 3431 },
    /* llama.cpp b10587.  Native API: 17 events, 16 with non-empty content
     * (89 content bytes: "mn"=2, " beim"=5, " manipulate"=11, " argument"=9,
     * " separator"=10, " ци"=5, "ret"=3, " eager"=6, "oint"=4,
     * " vessels"=8, "rà"=3, "bg"=2, "Stats"=5, " screens"=8, " я"=3,
     * "tools"=5), the 17th is the stop:true summary (content "",
     * tokens_predicted 16, tokens_evaluated 9, stop_type "limit"), no
     * [DONE].  Events end at bytes 118, 240, ... 1962 (16th), 3638.  Served
     * on /completions (detected as OpenAI Completions, switched by the
     * first event) and on /completion. */
    { "llamacpp-b10587-native-completions-stream.sse", TT_API_OPENAI_COMPLETIONS, SSE, RAW,
      TT_THINK_AUTO, 17, 0, 16, 0, 89, 9, 16, -1, "limit", 0, "", "", 1,
      "small-llama.gguf", 0, NULL, 118, 118, 240, 118, 1962 },
    { "llamacpp-b10587-native-completions-stream.sse", TT_API_LLAMACPP, SSE, RAW,
      TT_THINK_AUTO, 17, 0, 16, 0, 89, 9, 16, -1, "limit", 0, "", "", 1,
      "small-llama.gguf", 0, NULL, 118, 118, 240, 118, 1962 },
    /* n=2: 39 events (2 role chunks, 2 x 16 content deltas, 2 finish chunks,
     * 2 usage-only chunks of completion_tokens 16 / prompt_tokens 19 each,
     * [DONE]); 32 token events, 174 content bytes.  Output = 16 + 16 = 32,
     * input 19 (one prompt: the same 19 in both parts).  The first token
     * event is choice 1's "ɐ" (ends at byte 528), the second choice 0's
     * "ɐ" (1057): the stream as the client sees it.  Last token: choice 0's
     * " Karriere" at 9635. */
    { "llamacpp-b10587-chat-n2-include_usage.sse", TT_API_OPENAI_CHAT, SSE, RAW, TT_THINK_AUTO,
      39, 0, 32, 0, 174, 19, 32, -1, "length", 0, "", "", 1,
      "small-tools-llama.gguf", 0, NULL, 273, 528, 1057, 528, 9635 },
    /* role chunk, 16 content deltas (92 bytes), finish chunk, usage-only
     * chunk with timings (prompt 42, 12 cached, completion 16), [DONE] */
    { "llamacpp-b10587-chat-include_usage-timings.sse", TT_API_OPENAI_CHAT, SSE, RAW,
      TT_THINK_AUTO, 20, 0, 16, 0, 92, 42, 16, -1, "length", 0, "", "", 1,
      "small-llama.gguf", 0, NULL, 267, 521, 771, 521, 4311 },
};



/* the bytes as the decoder sees them (see enum wrap) */
static char *load(const struct fx *fx, size_t *len)
{
    size_t n, cap, o = 0;
    char *raw = read_fixture(fx->file, &n), *out, *line, *end;

    if (raw == NULL)
        return NULL;
    if (fx->wrap == RAW) {
        *len = n;
        return raw;
    }
    if (fx->wrap == DROP_FIRST) {
        char *p = strstr(raw, "\n\n");
        assert_non_null(p);
        o = (size_t)(p + 2 - raw);
        memmove(raw, raw + o, n - o);
        *len = n - o;
        return raw;
    }
    cap = n * 2 + 4096;
    out = malloc(cap);
    assert_non_null(out);
    for (line = raw; line < raw + n; line = end + 1) {
        size_t ll;
        end = memchr(line, '\n', (size_t)(raw + n - line));
        if (end == NULL)
            end = raw + n;
        ll = (size_t)(end - line);
        if (ll == 0)
            continue;
        if (fx->wrap == WRAP_EVENT) {
            /* every line starts {"type":"<type>" */
            const char *t = line + 9, *q;
            assert_memory_equal(line, "{\"type\":\"", 9);
            q = memchr(t, '"', ll - 9);
            assert_non_null(q);
            o += (size_t)sprintf(out + o, "event: %.*s\n", (int)(q - t), t);
        }
        o += (size_t)sprintf(out + o, "data: %.*s\n\n", (int)ll, line);
    }
    if (fx->wrap == WRAP_DONE)
        o += (size_t)sprintf(out + o, "data: [DONE]\n\n");
    free(raw);
    *len = o;
    return out;
}

static uint32_t rng(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

#define T0 1000000u
#define T_END 999999999u

/*
 * Feed <buf> split by <mode> (0 whole, 1 one byte at a time, >= 2 random
 * pieces of 1..2^(mode%12) bytes).  Each piece arrives at T0 + the offset
 * just past it; <ends> records, for every byte, that arrival time.
 */
static void run(const struct fx *fx, const char *buf, size_t len, int mode,
                struct tt_request *r, uint64_t *ends, int complete)
{
    struct tt_stream *st;
    size_t off = 0;
    uint32_t seed = (uint32_t)mode * 7919u;

    tt_request_init(r);
    st = tt_stream_new(r, fx->api, fx->ctype, fx->think);
    assert_non_null(st);
    while (off < len) {
        size_t n = len - off, i;
        if (mode == 1)
            n = 1;
        else if (mode >= 2)
            n = 1 + rng(&seed) % (1u << (mode % 12));
        if (n > len - off)
            n = len - off;
        tt_stream_feed(st, buf + off, n, T0 + off + n);
        if (ends != NULL)
            for (i = off; i < off + n; i++)
                ends[i] = T0 + off + n;
        off += n;
    }
    tt_stream_end(st, complete, T_END);
    tt_stream_free(st);
}

static void check_stamp(const struct tt_request *r, enum tt_ts ts, long d,
                        const uint64_t *ends, const char *file, int mode)
{
    uint64_t want = d < 0 ? 0 : ends[d];
    if (r->ts[ts] != want)
        fail_msg("%s mode %d: %s = %llu, want %llu (byte %ld)", file, mode,
                 tt_ts_names[ts], (unsigned long long)r->ts[ts],
                 (unsigned long long)want, d);
}

static void check_fixture(const struct fx *fx, const struct tt_request *r,
                          const uint64_t *ends, int mode)
{
    const struct tt_stream_stats *s = &r->s;
    uint32_t i;

    if (s->events != fx->events || s->reasoning_events != fx->reasoning ||
        s->answer_events != fx->answer)
        fail_msg("%s think %d mode %d: events %u reasoning %u answer %u, want %u %u %u",
                 fx->file, fx->think, mode, s->events, s->reasoning_events,
                 s->answer_events, fx->events, fx->reasoning, fx->answer);
    assert_int_equal(s->token_events, fx->reasoning + fx->answer);
    assert_int_equal(s->reasoning_bytes, fx->rbytes);
    assert_int_equal(s->answer_bytes, fx->abytes);
    assert_int_equal(s->usage_input, fx->in);
    assert_int_equal(s->usage_output, fx->out);
    assert_int_equal(s->usage_reasoning, fx->rsn);
    assert_string_equal(s->finish_reason, fx->finish);
    assert_int_equal(s->error, fx->error);
    assert_string_equal(s->error_type, fx->error_type);
    assert_memory_equal(s->error_message, fx->error_msg, strlen(fx->error_msg));
    assert_int_equal(s->terminal, fx->terminal);
    assert_int_equal(s->streaming, 1);
    assert_int_equal(s->parse_errors, 0);
    assert_string_equal(s->model, fx->model);
    if (fx->err_type == NULL) {
        assert_null(r->err_type);
    } else {
        assert_non_null(r->err_type);
        assert_string_equal(r->err_type, fx->err_type);
        assert_int_equal(r->err_code, fx->err_code);
    }

    /* the timeline */
    check_stamp(r, TT_TS_FIRST_EVENT, fx->d_event, ends, fx->file, mode);
    check_stamp(r, TT_TS_FIRST_TOKEN, fx->d_first, ends, fx->file, mode);
    if (fx->d_second != 0)
        check_stamp(r, TT_TS_SECOND_TOKEN, fx->d_second, ends, fx->file, mode);
    check_stamp(r, TT_TS_FIRST_OUTPUT_TOKEN, fx->d_output, ends, fx->file, mode);
    check_stamp(r, TT_TS_LAST_TOKEN, fx->d_last, ends, fx->file, mode);
    assert_int_equal(r->n_token_ts, s->token_events);
    for (i = 1; i < r->n_token_ts; i++)
        assert_true(r->token_ts[i - 1] <= r->token_ts[i]);
    if (r->n_token_ts > 0) {
        assert_int_equal(r->token_ts[0], r->ts[TT_TS_FIRST_TOKEN]);
        assert_int_equal(r->token_ts[r->n_token_ts - 1], r->ts[TT_TS_LAST_TOKEN]);
    }
    if (r->n_token_ts > 1)
        assert_int_equal(r->token_ts[1], r->ts[TT_TS_SECOND_TOKEN]);
}

static int fixtures_present(void)
{
    FILE *f;
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s", fixture_dir(), "SOURCES.md");
    f = fopen(path, "r");
    if (f == NULL) {
        printf("SKIP: fixtures not found at %s (set TT_FIXTURES)\n", fixture_dir());
        return 0;
    }
    fclose(f);
    return 1;
}

static void test_fixtures(void **state)
{
    size_t k;
    int mode;

    (void)state;
    if (!fixtures_present())
        skip();
    for (k = 0; k < sizeof(fixtures) / sizeof(fixtures[0]); k++) {
        const struct fx *fx = &fixtures[k];
        struct tt_request r, first;
        size_t len;
        char *buf = load(fx, &len);
        uint64_t *ends;

        if (buf == NULL)
            fail_msg("fixture %s missing from %s", fx->file, fixture_dir());
        ends = calloc(len, sizeof(*ends));
        assert_non_null(ends);
        /* modes: whole, one byte at a time, 30 random splits */
        for (mode = 0; mode < 32; mode++) {
            run(fx, buf, len, mode, &r, ends, 1);
            check_fixture(fx, &r, ends, mode);
            if (mode == 0) {
                first = r;
                first.token_ts = NULL;
            } else {
                /* identical facts, whatever the split */
                assert_memory_equal(&r.s, &first.s, sizeof(r.s));
                assert_int_equal(r.n_token_ts, first.n_token_ts);
            }
            tt_request_reset(&r);
        }
        free(ends);
        free(buf);
    }
}

/* a cut stream: no terminal marker, or an incomplete body */
static void test_fixtures_truncated(void **state)
{
    size_t k;

    (void)state;
    if (!fixtures_present())
        skip();
    for (k = 0; k < sizeof(fixtures) / sizeof(fixtures[0]); k++) {
        const struct fx *fx = &fixtures[k];
        struct tt_request r;
        size_t len;
        char *buf = load(fx, &len);

        assert_non_null(buf);
        /* the body ended early per HTTP framing: truncated (the error
         * events of these fixtures all sit in their second half) */
        run(fx, buf, len / 2, 3, &r, NULL, 0);
        assert_non_null(r.err_type);
        assert_string_equal(r.err_type, "truncated");
        assert_int_equal(r.err_code, 502);
        tt_request_reset(&r);
        /* cut at an event boundary before the marker, framing complete */
        if (fx->terminal && !fx->error &&
            (fx->api == TT_API_OPENAI_CHAT || fx->api == TT_API_ANTHROPIC ||
             fx->api == TT_API_OLLAMA || fx->api == TT_API_OPENAI_RESPONSES)) {
            size_t cut = len - 2;
            while (cut > 0 && !(buf[cut - 1] == '\n' && buf[cut - 2] == '\n') &&
                   !(fx->api == TT_API_OLLAMA && buf[cut - 1] == '\n'))
                cut--;
            run(fx, buf, cut, 0, &r, NULL, 1);
            assert_int_equal(r.s.terminal, 0);
            assert_non_null(r.err_type);
            assert_string_equal(r.err_type, "truncated");
            assert_int_equal(r.err_code, 502);
            tt_request_reset(&r);
        }
        free(buf);
    }
}

/* ------------------------------------------------------------------ */
/* synthetic streams                                                   */

/* feed <parts> one per read, read i at time 100 * (i + 1), into a request
 * already initialised (feed_parts() initialises it) */
static void feed_parts_into(struct tt_request *r, enum tt_api api, const char *ct,
                            enum tt_think_mode think, const char *const *parts,
                            int complete)
{
    struct tt_stream *st;
    int i;

    st = tt_stream_new(r, api, ct, think);
    assert_non_null(st);
    for (i = 0; parts[i] != NULL; i++)
        tt_stream_feed(st, parts[i], strlen(parts[i]), 100u * (unsigned)(i + 1));
    tt_stream_end(st, complete, 9999);
    tt_stream_free(st);
}

static void feed_parts(struct tt_request *r, enum tt_api api, const char *ct,
                       enum tt_think_mode think, const char *const *parts,
                       int complete)
{
    tt_request_init(r);
    feed_parts_into(r, api, ct, think, parts, complete);
}

#define CHUNK(text) "data: {\"choices\":[{\"delta\":{\"content\":\"" text "\"}}]}\n\n"
#define RCHUNK(text) "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"" text "\"}}]}\n\n"
#define DONE "data: [DONE]\n\n"

static void test_think_split_tags(void **state)
{
    static const char *const parts[] = {
        CHUNK("<th"), CHUNK("ink>"), CHUNK("hmm"), CHUNK("</thi"), CHUNK("nk>"),
        CHUNK("Hi"), DONE, NULL,
    };
    enum tt_think_mode m;
    struct tt_request r;

    (void)state;
    for (m = TT_THINK_AUTO; m <= TT_THINK_ON; m++) {
        feed_parts(&r, TT_API_OPENAI_CHAT, SSE, m, parts, 1);
        assert_int_equal(r.s.token_events, 6);
        assert_int_equal(r.s.reasoning_events, 5);
        assert_int_equal(r.s.answer_events, 1);
        assert_int_equal(r.s.reasoning_bytes, 3 + 4 + 3 + 5 + 3);
        assert_int_equal(r.s.answer_bytes, 2);
        assert_int_equal(r.ts[TT_TS_FIRST_TOKEN], 100);
        assert_int_equal(r.ts[TT_TS_SECOND_TOKEN], 200);
        assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 600);
        assert_int_equal(r.ts[TT_TS_LAST_TOKEN], 600);
        assert_int_equal(r.n_token_ts, 6);
        assert_int_equal(r.token_ts[3], 400);
        assert_null(r.err_type);
        tt_request_reset(&r);
    }
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_OFF, parts, 1);
    assert_int_equal(r.s.answer_events, 6);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 100);
    tt_request_reset(&r);
}

/* a held "<" that is not a tag is answer text of its own event */
static void test_think_carry_literal(void **state)
{
    static const char *const parts[] = {
        CHUNK("a <"), CHUNK("<b"), "data: {\"usage\":{\"prompt_tokens\":3}}\n\n",
        CHUNK("<thinking"), DONE, NULL,
    };
    static const char *const tail[] = { CHUNK("x"), CHUNK("<"), NULL };
    struct tt_request r;

    (void)state;
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_ON, parts, 1);
    assert_int_equal(r.s.answer_events, 3);
    assert_int_equal(r.s.reasoning_events, 0);
    assert_int_equal(r.s.answer_bytes, 3 + 2 + 9);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 100);
    assert_int_equal(r.token_ts[0], 100);
    assert_int_equal(r.token_ts[1], 200);
    assert_int_equal(r.token_ts[2], 400);
    assert_int_equal(r.s.usage_input, 3);
    tt_request_reset(&r);

    /* a "<" held at the very end is flushed by tt_stream_end() */
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_ON, tail, 1);
    assert_int_equal(r.s.answer_events, 2);
    assert_int_equal(r.token_ts[1], 200);
    assert_string_equal(r.err_type, "truncated");   /* no [DONE] */
    tt_request_reset(&r);

    /* a reasoning-only event resolves a pending carry first, in order */
    {
        static const char *const p3[] = {
            CHUNK("<"), RCHUNK("r"), CHUNK("x"), DONE, NULL,
        };
        feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_ON, p3, 1);
        assert_int_equal(r.s.answer_events, 2);
        assert_int_equal(r.s.reasoning_events, 1);
        assert_int_equal(r.token_ts[0], 100);
        assert_int_equal(r.token_ts[1], 200);
        assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 100);
        tt_request_reset(&r);
    }
}

static void test_think_auto_mid_thought(void **state)
{
    static const char *const parts[] = {
        CHUNK("\\n"), CHUNK("so"), CHUNK(" the user"), CHUNK(".</think>\\n\\nAns"),
        CHUNK("wer"), CHUNK("</think>"), DONE, NULL,
    };
    static const char *const tool_first[] = {
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}}]}\n\n",
        CHUNK("plan"), CHUNK("</think>"), CHUNK("ok"), DONE, NULL,
    };
    struct tt_request r;

    (void)state;
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, parts, 1);
    /* events 1-3 were answer until the tag showed they were reasoning; the
     * event holding the tag has answer text after it; a second tag is text */
    assert_int_equal(r.s.reasoning_events, 3);
    assert_int_equal(r.s.answer_events, 3);
    assert_int_equal(r.s.reasoning_bytes, 1 + 2 + 9 + 9);
    assert_int_equal(r.s.answer_bytes, 5 + 3 + 8);
    assert_int_equal(r.ts[TT_TS_FIRST_TOKEN], 100);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 400);
    tt_request_reset(&r);

    /* ON: no opening tag, so everything is answer */
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_ON, parts, 1);
    assert_int_equal(r.s.reasoning_events, 0);
    assert_int_equal(r.s.answer_events, 6);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 100);
    tt_request_reset(&r);

    /* a definite answer event (tool call) keeps its first-output stamp */
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, tool_first, 1);
    assert_int_equal(r.s.answer_events, 2);
    assert_int_equal(r.s.reasoning_events, 2);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 100);
    tt_request_reset(&r);
}

/* a server with a reasoning field: a "</think>" in content is just text */
static void test_think_auto_reasoning_field(void **state)
{
    static const char *const parts[] = {
        RCHUNK("hmm"), CHUNK("use </think> tags"), CHUNK("ok"), DONE, NULL,
    };
    static const char *const lead_ws[] = {
        CHUNK("\\n"), CHUNK("<think>"), CHUNK("x"), CHUNK("</think>"), CHUNK("y"), DONE, NULL,
    };
    struct tt_request r;

    (void)state;
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, parts, 1);
    assert_int_equal(r.s.reasoning_events, 1);
    assert_int_equal(r.s.answer_events, 2);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 200);
    tt_request_reset(&r);

    /* whitespace before "<think>" belongs to the thought */
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, lead_ws, 1);
    assert_int_equal(r.s.reasoning_events, 4);
    assert_int_equal(r.s.answer_events, 1);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 500);
    tt_request_reset(&r);
}

static void test_event_kinds(void **state)
{
    static const char *const parts[] = {
        ": comment\n\n",
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"A\",\"reasoning_content\":\"R\"}}]}\n\n",
        "data: {not json\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,"
        "\"completion_tokens_details\":{\"reasoning_tokens\":1}}}\n\n",
        DONE, NULL,
    };
    struct tt_request r;

    (void)state;
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, parts, 1);
    assert_int_equal(r.s.events, 5);
    assert_int_equal(r.ts[TT_TS_FIRST_EVENT], 200);    /* not the comment */
    /* both texts in one event: an answer event */
    assert_int_equal(r.s.token_events, 1);
    assert_int_equal(r.s.answer_events, 1);
    assert_int_equal(r.s.reasoning_bytes, 1);
    assert_int_equal(r.ts[TT_TS_FIRST_TOKEN], 300);
    assert_int_equal(r.ts[TT_TS_FIRST_OUTPUT_TOKEN], 300);
    assert_int_equal(r.ts[TT_TS_SECOND_TOKEN], 0);
    assert_int_equal(r.s.parse_errors, 1);
    assert_int_equal(r.s.usage_output, 2);
    assert_int_equal(r.s.usage_reasoning, 1);
    assert_int_equal(r.s.terminal, 1);
    assert_null(r.err_type);
    tt_request_reset(&r);
}

static void test_error_events(void **state)
{
    static const char *const plain[] = {
        CHUNK("a"), "event: error\ndata: upstream overloaded\n\n", NULL,
    };
    static const char *const anth[] = {
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\","
        "\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":2}}}\n\n",
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
        "\"message\":\"Overloaded\"}}\n\n", NULL,
    };
    static const char *const ollama[] = {
        "{\"model\":\"m\",\"message\":{\"content\":\"x\"},\"done\":false}\n",
        "{\"error\":\"model runner crashed\"}\n", NULL,
    };
    static const char *const resp_flat[] = {
        "data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}\n\n",
        NULL,
    };
    struct tt_request r;

    (void)state;
    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, plain, 1);
    assert_int_equal(r.s.error, 1);
    assert_string_equal(r.s.error_message, "upstream overloaded");
    assert_string_equal(r.err_type, "stream_error");
    assert_int_equal(r.err_code, 500);
    assert_string_equal(r.err_msg, "upstream overloaded");
    tt_request_reset(&r);

    feed_parts(&r, TT_API_ANTHROPIC, SSE, TT_THINK_AUTO, anth, 1);
    assert_string_equal(r.s.error_type, "overloaded_error");
    assert_string_equal(r.s.error_message, "Overloaded");
    assert_int_equal(r.s.usage_input, 7);
    assert_string_equal(r.err_type, "overloaded_error");
    tt_request_reset(&r);

    feed_parts(&r, TT_API_OLLAMA, NDJSON, TT_THINK_AUTO, ollama, 1);
    assert_int_equal(r.s.error, 1);
    assert_string_equal(r.s.error_message, "model runner crashed");
    assert_int_equal(r.s.answer_events, 1);
    assert_string_equal(r.err_type, "stream_error");
    tt_request_reset(&r);

    feed_parts(&r, TT_API_OPENAI_RESPONSES, SSE, TT_THINK_AUTO, resp_flat, 1);
    assert_string_equal(r.s.error_type, "rate_limit_exceeded");
    assert_string_equal(r.s.error_message, "slow down");
    tt_request_reset(&r);
}

static void test_non_streaming(void **state)
{
    static const char *const chat[] = {
        "{\"model\":\"m1\",\"choices\":[{\"message\":{\"role\":\"assistant\","
        "\"content\":\"<think>abc</think>Hello\",\"reasoning_content\":null},",
        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}",
        NULL,
    };
    static const char *const anth_err[] = {
        "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}",
        NULL,
    };
    static const char *const gem_array[] = {
        "[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\",\"thought\":true}]}}]},\n",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ab\"}]},\"finishReason\":\"STOP\"}],"
        "\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":5},"
        "\"modelVersion\":\"g\"}]",
        NULL,
    };
    static const char *const ollama[] = {
        "{\"model\":\"q\",\"message\":{\"content\":\"hi\",\"thinking\":\"hmm\"},\"done\":true,"
        "\"done_reason\":\"stop\",\"prompt_eval_count\":4,\"eval_count\":6}", NULL,
    };
    static const char *const tgi[] = {
        "{\"generated_text\":\"xyz\",\"details\":{\"finish_reason\":\"eos_token\",\"generated_tokens\":3}}",
        NULL,
    };
    static const char *const resp[] = {
        "{\"id\":\"r\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"o\",\"output\":["
        "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"sum\"}]},"
        "{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"answer\"}]}],"
        "\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"output_tokens_details\":{\"reasoning_tokens\":1}}}",
        NULL,
    };
    struct tt_request r;

    (void)state;
    feed_parts(&r, TT_API_OPENAI_CHAT, "application/json; charset=utf-8", TT_THINK_AUTO, chat, 1);
    assert_int_equal(r.s.streaming, 0);
    assert_int_equal(r.s.token_events, 0);
    assert_int_equal(r.s.events, 0);
    assert_int_equal(r.ts[TT_TS_FIRST_TOKEN], 0);
    assert_int_equal(r.ts[TT_TS_FIRST_EVENT], 0);
    assert_int_equal(r.s.reasoning_bytes, 3 + 15);
    assert_int_equal(r.s.answer_bytes, 5);
    assert_int_equal(r.s.usage_input, 9);
    assert_string_equal(r.s.finish_reason, "stop");
    assert_string_equal(r.s.model, "m1");
    assert_int_equal(r.s.terminal, 1);
    assert_null(r.err_type);
    tt_request_reset(&r);

    /* incomplete body: not parsed, truncated */
    feed_parts(&r, TT_API_OPENAI_CHAT, JSON, TT_THINK_AUTO, chat, 0);
    assert_int_equal(r.s.usage_input, -1);
    assert_string_equal(r.err_type, "truncated");
    tt_request_reset(&r);

    tt_request_init(&r);
    r.status = 400;
    {
        struct tt_stream *st = tt_stream_new(&r, TT_API_ANTHROPIC, JSON, TT_THINK_AUTO);
        tt_stream_feed(st, anth_err[0], strlen(anth_err[0]), 5);
        tt_stream_end(st, 1, 6);
        tt_stream_free(st);
    }
    assert_int_equal(r.s.error, 1);
    assert_string_equal(r.s.error_type, "invalid_request_error");
    assert_string_equal(r.err_type, "invalid_request_error");
    assert_int_equal(r.err_code, 400);
    tt_request_reset(&r);

    feed_parts(&r, TT_API_GEMINI, JSON, TT_THINK_AUTO, gem_array, 1);
    assert_int_equal(r.s.reasoning_bytes, 1);
    assert_int_equal(r.s.answer_bytes, 2);
    assert_int_equal(r.s.usage_output, 7);
    assert_int_equal(r.s.usage_reasoning, 5);
    assert_string_equal(r.s.finish_reason, "STOP");
    assert_string_equal(r.s.model, "g");
    tt_request_reset(&r);

    feed_parts(&r, TT_API_OLLAMA, JSON, TT_THINK_AUTO, ollama, 1);
    assert_int_equal(r.s.reasoning_bytes, 3);
    assert_int_equal(r.s.answer_bytes, 2);
    assert_int_equal(r.s.usage_input, 4);
    assert_int_equal(r.s.usage_output, 6);
    assert_null(r.err_type);
    tt_request_reset(&r);

    feed_parts(&r, TT_API_TGI, JSON, TT_THINK_AUTO, tgi, 1);
    assert_int_equal(r.s.answer_bytes, 3);
    assert_int_equal(r.s.usage_output, 3);
    assert_string_equal(r.s.finish_reason, "eos_token");
    tt_request_reset(&r);

    feed_parts(&r, TT_API_OPENAI_RESPONSES, JSON, TT_THINK_AUTO, resp, 1);
    assert_int_equal(r.s.reasoning_bytes, 3);
    assert_int_equal(r.s.answer_bytes, 6);
    assert_int_equal(r.s.usage_reasoning, 1);
    assert_string_equal(r.s.finish_reason, "completed");
    assert_string_equal(r.s.model, "o");
    tt_request_reset(&r);
}

static void test_framing_choice(void **state)
{
    static const char *const nd[] = {
        "{\"response\":\"a\",\"done\":false}\n{\"response\":\"b\",\"done\":true,\"eval_count\":2}\n",
        NULL,
    };
    static const char *const other[] = { "data: x\n\ndata: y\n\n", NULL };
    static const char *const html[] = { "<html>bad gateway</html>", NULL };
    struct tt_request r;

    (void)state;
    /* Ollama without a Content-Type: NDJSON */
    feed_parts(&r, TT_API_OLLAMA, NULL, TT_THINK_AUTO, nd, 1);
    assert_int_equal(r.s.streaming, 1);
    assert_int_equal(r.s.answer_events, 2);
    assert_int_equal(r.s.terminal, 1);
    assert_null(r.err_type);
    tt_request_reset(&r);

    /* api "other" with an event stream: events counted, nothing else */
    feed_parts(&r, TT_API_OTHER, "Text/Event-Stream; charset=utf-8", TT_THINK_AUTO, other, 1);
    assert_int_equal(r.s.events, 2);
    assert_int_equal(r.s.token_events, 0);
    assert_int_equal(r.ts[TT_TS_FIRST_EVENT], 100);
    assert_null(r.err_type);
    tt_request_reset(&r);

    /* an HTML error page is not decoded */
    feed_parts(&r, TT_API_OPENAI_CHAT, "text/html", TT_THINK_AUTO, html, 1);
    assert_int_equal(r.s.parse_errors, 0);
    assert_int_equal(r.s.streaming, 0);
    assert_null(r.err_type);
    tt_request_reset(&r);
}

static void test_oversize_event_counted(void **state)
{
    struct tt_request r;
    struct tt_stream *st;
    size_t n = 2 * 1024 * 1024, i;
    char *big = malloc(n);

    (void)state;
    assert_non_null(big);
    memcpy(big, "data: \"", 7);
    for (i = 7; i < n - 3; i++)
        big[i] = 'x';
    memcpy(big + n - 3, "\"\n\n", 3);
    tt_request_init(&r);
    st = tt_stream_new(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO);
    for (i = 0; i < n; i += 65536)
        tt_stream_feed(st, big + i, n - i < 65536 ? n - i : 65536, 10);
    tt_stream_feed(st, CHUNK("ok") DONE, strlen(CHUNK("ok") DONE), 20);
    tt_stream_end(st, 1, 30);
    tt_stream_free(st);
    assert_int_equal(r.s.parse_errors, 1);
    assert_int_equal(r.s.answer_events, 1);
    assert_int_equal(r.s.terminal, 1);
    assert_null(r.err_type);
    tt_request_reset(&r);
    free(big);
}


/* ------------------------------------------------------------------ */
/* what the server says about itself (SPEC section 11)                 */

static void srv_eq(const struct tt_request *r, enum tt_srv k, double want)
{
    double got = tt_request_server_get(r, k);
    if (got < want - 1e-9 || got > want + 1e-9)
        fail_msg("server %s = %g, want %g", tt_srv_names[k], got, want);
}

/*
 * Expected figures by hand from the files (see the fixture table):
 *   native stream   timings {cache_n 3, prompt_n 6, prompt_ms 29.724,
 *                   predicted_n 16, predicted_ms 344.613}; cached = cache_n 3;
 *                   one choice (index 0); the response is llama.cpp's
 *   n=2 stream      two usage-only chunks, cached_tokens 2 each; two timings:
 *                   prompt_n 17 / 17, cache_n 2 / 2 (one prompt: largest),
 *                   prompt_ms 57.806 / 58.284 (largest: 58.284),
 *                   predicted_n 16 + 16 = 32, predicted_ms 356.307 / 356.512
 *                   (largest); choices 2 (index 0 and 1)
 *   timings stream  prompt_n 30, cache_n 12, prompt_ms 95.582, predicted_n
 *                   16, predicted_ms 356.733; cached_tokens 12
 * Every split gives the same (32 modes as in test_fixtures).
 */
static void test_server_truth_fixtures(void **state)
{
    static const struct {
        const char *file;
        enum tt_api api, final_api;
        double prompt_n, cache_n, prompt_ms, predicted_n, predicted_ms;
        int64_t cached;
        uint32_t choices;
    } want[] = {
        { "llamacpp-b10587-native-completions-stream.sse", TT_API_OPENAI_COMPLETIONS,
          TT_API_LLAMACPP, 6, 3, 29.724, 16, 344.613, 3, 1 },
        { "llamacpp-b10587-native-completions-stream.sse", TT_API_LLAMACPP,
          TT_API_LLAMACPP, 6, 3, 29.724, 16, 344.613, 3, 1 },
        { "llamacpp-b10587-chat-n2-include_usage.sse", TT_API_OPENAI_CHAT,
          TT_API_OPENAI_CHAT, 17, 2, 58.284, 32, 356.512, 2, 2 },
        { "llamacpp-b10587-chat-include_usage-timings.sse", TT_API_OPENAI_CHAT,
          TT_API_OPENAI_CHAT, 30, 12, 95.582, 16, 356.733, 12, 1 },
    };
    size_t k;
    int mode;

    (void)state;
    if (!fixtures_present())
        skip();
    for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        struct fx fx = { .file = want[k].file, .api = want[k].api, .ctype = SSE };
        struct tt_request r;
        size_t len;
        char *buf = load(&fx, &len);

        if (buf == NULL)
            fail_msg("fixture %s missing from %s", fx.file, fixture_dir());
        for (mode = 0; mode < 32; mode++) {
            run(&fx, buf, len, mode, &r, NULL, 1);
            /* the decoder corrects r->api only when the events tell another
             * API than the path (run() leaves it unset otherwise) */
            if (want[k].final_api != want[k].api)
                assert_int_equal(r.api, want[k].final_api);
            assert_null(r.err_type);
            srv_eq(&r, TT_SRV_PROMPT_N, want[k].prompt_n);
            srv_eq(&r, TT_SRV_CACHE_N, want[k].cache_n);
            srv_eq(&r, TT_SRV_PROMPT_MS, want[k].prompt_ms);
            srv_eq(&r, TT_SRV_PREDICTED_N, want[k].predicted_n);
            srv_eq(&r, TT_SRV_PREDICTED_MS, want[k].predicted_ms);
            assert_int_equal(r.s.usage_cached, want[k].cached);
            assert_int_equal(r.s.choices, want[k].choices);
            tt_request_reset(&r);
        }
        free(buf);
    }
}

/*
 * The non-streaming chat body with reasoning_content: reasoning
 * "contribufoundving seizo indentving mate" (39 bytes), answer
 * "impliesstav gridbritbolulas estilo soupu" (40 bytes); usage 19 in / 27
 * out, no reasoning count, cached_tokens 6; timings prompt_ms 66.752,
 * prompt_n 13, cache_n 6, predicted_n 27, predicted_ms 684.412.  The split
 * is the text share: 27 * 39 / 79 = 13.33 -> 13 reasoning, 14 answer
 * tokens ("usage+estimate").  No stream: no TTFT, so no
 * ttft_outside_server_ms, but server_prefill_ms 66.752.
 */
static void test_server_truth_nonstream_reasoning(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *source = NULL;
    size_t len = 0;
    char *buf;
    int mode;

    (void)state;
    if (!fixtures_present())
        skip();
    buf = read_fixture("llamacpp-b10587-chat-nonstream-reasoning_content.json", &len);
    if (buf == NULL)
        fail_msg("fixture llamacpp-b10587-chat-nonstream-reasoning_content.json missing");
    for (mode = 0; mode < 8; mode++) {
        struct fx fx = { .file = "", .api = TT_API_OPENAI_CHAT, .ctype = JSON };
        run(&fx, buf, len, mode, &r, NULL, 1);
        r.status = 200;
        r.t0 = T0;
        r.ts[TT_TS_RESPONSE_COMPLETE] = T_END;
        assert_int_equal(r.s.streaming, 0);
        assert_int_equal(r.s.reasoning_bytes, 39);
        assert_int_equal(r.s.answer_bytes, 40);
        assert_int_equal(r.s.usage_input, 19);
        assert_int_equal(r.s.usage_output, 27);
        assert_int_equal(r.s.usage_reasoning, -1);
        assert_int_equal(r.s.usage_cached, 6);
        assert_null(r.err_type);
        tt_metrics_compute(&r, &m, &source);
        assert_string_equal(source, "usage+estimate");
        assert_true(tt_metric_has(&m, TT_M_REASONING_TOKENS));
        assert_int_equal((int)m.v[TT_M_REASONING_TOKENS], 13);
        assert_int_equal((int)m.v[TT_M_OUTPUT_TOKENS], 14);
        assert_int_equal((int)m.v[TT_M_CACHED_INPUT], 6);
        assert_true(tt_metric_has(&m, TT_M_SERVER_PREFILL));
        assert_true(m.v[TT_M_SERVER_PREFILL] == 66.752);
        assert_false(tt_metric_has(&m, TT_M_TTFT_OUTSIDE));
        assert_false(tt_metric_has(&m, TT_M_TTFT));
        srv_eq(&r, TT_SRV_PREDICTED_N, 27);
        srv_eq(&r, TT_SRV_PREDICTED_MS, 684.412);
        tt_request_reset(&r);
    }
    free(buf);
}

/*
 * TTFT decomposed, on the native fixture fed as one byte per read: byte i
 * arrives at T0 + i + 1 ns; shifted by 199 ms with t0 = 0, the first token
 * (dispatched by byte 118) is at 1 ms + 199 ms + 119 ns = 200.000119 ms; prompt_ms 29.724 -> outside the server
 * 200.000119 - 29.724 = 170.276119 ms.  Ollama: load_duration is the queue.
 */
static void test_ttft_decomposition(void **state)
{
    static const char *const ollama[] = {
        "{\"model\":\"m\",\"message\":{\"content\":\"hi\"},\"done\":false}\n",
        "{\"model\":\"m\",\"message\":{\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\","
        "\"total_duration\":90000000,\"load_duration\":2000000,\"prompt_eval_count\":5,"
        "\"prompt_eval_duration\":3500000,\"eval_count\":1,\"eval_duration\":1000000}\n",
        NULL,
    };
    struct tt_request r;
    struct tt_metric_values m;
    size_t len = 0;
    char *buf;
    uint32_t i;

    (void)state;
    feed_parts(&r, TT_API_OLLAMA, NDJSON, TT_THINK_AUTO, ollama, 1);
    r.status = 200;
    r.t0 = 1;       /* first token at 100 ns: TTFT 99 ns */
    tt_metrics_compute(&r, &m, NULL);
    srv_eq(&r, TT_SRV_LOAD_NS, 2000000);
    srv_eq(&r, TT_SRV_TOTAL_NS, 90000000);
    assert_true(m.v[TT_M_SERVER_PREFILL] == 3.5);
    assert_true(m.v[TT_M_SERVER_QUEUE] == 2.0);
    /* TTFT 99 ns = 0.000099 ms; outside = 0.000099 - 3.5 - 2 (negative:
     * reported as measured) */
    assert_true(tt_metric_has(&m, TT_M_TTFT_OUTSIDE));
    assert_true(m.v[TT_M_TTFT_OUTSIDE] < -5.49 && m.v[TT_M_TTFT_OUTSIDE] > -5.5);
    tt_request_reset(&r);

    if (!fixtures_present())
        skip();
    buf = read_fixture("llamacpp-b10587-native-completions-stream.sse", &len);
    assert_non_null(buf);
    {
        struct fx fx = { .file = "", .api = TT_API_LLAMACPP, .ctype = SSE };
        run(&fx, buf, len, 1, &r, NULL, 1);
    }
    r.status = 200;
    /* the bytes arrived 199 ms later than fed (T0 is 1 ms): t0 = 0 */
    r.t0 = 0;
    for (i = 0; i < TT_TS__COUNT; i++)
        if (r.ts[i] != 0)
            r.ts[i] += 199000000u;
    for (i = 0; i < r.n_token_ts; i++)
        r.token_ts[i] += 199000000u;
    tt_metrics_compute(&r, &m, NULL);
    if (!(m.v[TT_M_TTFT] > 200.0001189 && m.v[TT_M_TTFT] < 200.0001191))
        fail_msg("TTFT %.9f", m.v[TT_M_TTFT]);
    assert_true(m.v[TT_M_SERVER_PREFILL] == 29.724);
    assert_false(tt_metric_has(&m, TT_M_SERVER_QUEUE));
    assert_true(m.v[TT_M_TTFT_OUTSIDE] > 170.276118 && m.v[TT_M_TTFT_OUTSIDE] < 170.27612);
    assert_int_equal((int)m.v[TT_M_ISL], 9);
    assert_int_equal((int)m.v[TT_M_OSL], 16);
    assert_int_equal((int)m.v[TT_M_CACHED_INPUT], 3);
    tt_request_reset(&r);
    free(buf);
}

/* a list of prompts: each part's input counts; one prompt with n choices:
 * the prompt once */
static void test_usage_parts(void **state)
{
    static const char *const two[] = {
        "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n",
        "data: {\"choices\":[{\"index\":1,\"text\":\"b\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":4}}\n\n",
        "data: [DONE]\n\n", NULL,
    };
    static const char *const cumulative[] = {
        /* vLLM continuous usage: usage on chunks with choices is cumulative */
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],"
        "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}],"
        "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
        "data: [DONE]\n\n", NULL,
    };
    struct tt_request r;

    (void)state;
    /* two prompts (the inspector says so): inputs add up */
    tt_request_init(&r);
    r.prompts = 2;
    feed_parts_into(&r, TT_API_OPENAI_COMPLETIONS, SSE, TT_THINK_AUTO, two, 1);
    assert_int_equal(r.s.usage_input, 12);
    assert_int_equal(r.s.usage_output, 7);
    assert_int_equal(r.s.choices, 2);
    assert_null(r.err_type);
    tt_request_reset(&r);

    /* one prompt, n = 2: the largest input, outputs summed */
    feed_parts(&r, TT_API_OPENAI_COMPLETIONS, SSE, TT_THINK_AUTO, two, 1);
    assert_int_equal(r.s.usage_input, 7);
    assert_int_equal(r.s.usage_output, 7);
    tt_request_reset(&r);

    feed_parts(&r, TT_API_OPENAI_CHAT, SSE, TT_THINK_AUTO, cumulative, 1);
    assert_int_equal(r.s.usage_input, 5);
    assert_int_equal(r.s.usage_output, 2);
    assert_int_equal(r.s.choices, 1);
    tt_request_reset(&r);
}

/*
 * llama.cpp's /v1/completions with a list of prompts: each prompt's last
 * chunk (its index, finish_reason) carries that prompt's own usage.  The
 * parts are summed as AIPerf counts them: 16 + 16 tokens out, 5 + 7 in.
 */
static void test_usage_per_prompt_on_choice_chunks(void **state)
{
#define LC(i, text, fin, usage) "data: {\"choices\":[{\"text\":\"" text "\",\"index\":" #i \
    ",\"logprobs\":null,\"finish_reason\":" fin "}],\"created\":1,\"model\":\"m\"," \
    "\"object\":\"text_completion\"" usage "}\n\n"
    static const char *const prompts[] = {
        LC(0, "a", "null", ""), LC(1, "b", "null", ""), LC(1, "c", "null", ""),
        LC(1, "", "\"length\"", ",\"usage\":{\"completion_tokens\":16,"
           "\"prompt_tokens\":7,\"total_tokens\":23}"),
        LC(0, "d", "null", ""),
        LC(0, "", "\"length\"", ",\"usage\":{\"completion_tokens\":16,"
           "\"prompt_tokens\":5,\"total_tokens\":21}"),
        "data: [DONE]\n\n", NULL,
    };
#undef LC
    struct tt_request r;

    (void)state;
    tt_request_init(&r);
    r.prompts = 2;
    feed_parts_into(&r, TT_API_OPENAI_COMPLETIONS, SSE, TT_THINK_AUTO, prompts, 1);
    assert_int_equal(r.s.usage_output, 32);
    assert_int_equal(r.s.usage_input, 12);
    assert_int_equal(r.s.choices, 2);
    assert_int_equal(r.s.token_events, 4);
    tt_request_reset(&r);
}

/* the upstream's own error type, per API shape */
static void test_upstream_error_types(void **state)
{
    static const struct {
        enum tt_api api;
        const char *body, *type, *msg;
        int code;
    } cases[] = {
        { TT_API_OPENAI_CHAT,
          "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available context size\","
          "\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":5000,\"n_ctx\":4096}}",
          "exceed_context_size_error", "the request exceeds the available context size", 400 },
        { TT_API_LLAMACPP,
          "{\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":\"unavailable_error\"}}",
          "unavailable_error", "Loading model", 503 },
        { TT_API_GEMINI,
          "{\"error\":{\"code\":429,\"message\":\"Resource exhausted\",\"status\":\"RESOURCE_EXHAUSTED\"}}",
          "RESOURCE_EXHAUSTED", "Resource exhausted", 429 },
        { TT_API_ANTHROPIC,
          "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
          "overloaded_error", "Overloaded", 529 },
        { TT_API_TGI,
          "{\"error\":\"Input validation error: inputs too long\",\"error_type\":\"validation\"}",
          "validation", "Input validation error: inputs too long", 422 },
        { TT_API_OLLAMA, "{\"error\":\"model 'x' not found\"}",
          "upstream_error", "model 'x' not found", 404 },
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct tt_request r;
        struct tt_stream *st;

        tt_request_init(&r);
        r.status = cases[k].code;
        st = tt_stream_new(&r, cases[k].api, JSON, TT_THINK_AUTO);
        tt_stream_feed(st, cases[k].body, strlen(cases[k].body), 5);
        tt_stream_end(st, 1, 6);
        tt_stream_free(st);
        assert_non_null(r.err_type);
        assert_string_equal(r.err_type, cases[k].type);
        assert_string_equal(r.err_msg, cases[k].msg);
        assert_int_equal(r.err_code, cases[k].code);
        tt_request_reset(&r);
    }
}

/* TGI's and OpenAI's timing headers, read from the response head */
static void test_server_headers(void **state)
{
    static const char *const fields[][2] = {
        { "Content-Type", "application/json" },
        { "x-queue-time", "12" },
        { "X-Inference-Time", "340" },
        { "x-time-per-token", "21" },
        { "x-validation-time", "0.5" },
        { "x-prompt-tokens", "7" },
        { "x-generated-tokens", "16" },
        { "openai-processing-ms", "abc" },      /* not a number: ignored */
    };
    static const char body[] = "{\"generated_text\":\"hello\",\"details\":"
                               "{\"finish_reason\":\"length\",\"generated_tokens\":16}}";
    struct tt_request r;
    struct tt_stream *st;
    struct tt_metric_values m;
    struct tt_head h;
    size_t i;

    (void)state;
    assert_int_equal(tt_head_init(&h, 8192, 32), 0);
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        assert_int_equal(tt_head_field(&h, fields[i][0], strlen(fields[i][0])), 0);
        assert_int_equal(tt_head_value(&h, fields[i][1], strlen(fields[i][1])), 0);
    }
    tt_request_init(&r);
    r.status = 200;
    st = tt_stream_new(&r, TT_API_TGI, JSON, TT_THINK_AUTO);
    tt_stream_head(st, tt_head_lookup, &h);
    tt_stream_feed(st, body, strlen(body), 5);
    tt_stream_end(st, 1, 6);
    tt_stream_free(st);
    tt_head_free(&h);
    srv_eq(&r, TT_SRV_QUEUE_MS, 12);
    srv_eq(&r, TT_SRV_INFERENCE_MS, 340);
    srv_eq(&r, TT_SRV_PER_TOKEN_MS, 21);
    srv_eq(&r, TT_SRV_VALIDATION_MS, 0.5);
    srv_eq(&r, TT_SRV_PROMPT_TOKENS, 7);
    srv_eq(&r, TT_SRV_GENERATED_TOKENS, 16);
    assert_true(tt_request_server_get(&r, TT_SRV_PROCESSING_MS) < 0);
    tt_metrics_compute(&r, &m, NULL);
    assert_true(m.v[TT_M_SERVER_QUEUE] == 12);
    assert_false(tt_metric_has(&m, TT_M_SERVER_PREFILL));
    tt_request_reset(&r);
}

/*
 * Non-streaming bodies of every API with reasoning: the reasoning count
 * appears in the metrics as for a stream.  Without a usage reasoning count
 * the split is the text share ("usage+estimate"):
 *   openai chat   reasoning_content "abcdef" (6) / content "ab" (2), 8 out:
 *                 8 * 6/8 = 6 reasoning
 *   think tags    "<think>abcd</think>xyzw": reasoning 4 + 15 tag bytes = 19,
 *                 answer 4; 23 out: 23 * 19/23 = 19
 *   anthropic     thinking "aaaa" (4) / text "bbbb" (4), 10 out: 5
 *   ollama        thinking "hmm" (3) / content "hi" (2), 5 out: 3
 *   gemini        thoughtsTokenCount 5 reported: 5 ("usage")
 *   responses     reasoning_tokens 1 reported: 1 ("usage")
 */
static void test_non_streaming_reasoning_every_api(void **state)
{
    static const struct {
        enum tt_api api;
        const char *body, *source;
        int reasoning, output;
    } cases[] = {
        { TT_API_OPENAI_CHAT,
          "{\"choices\":[{\"message\":{\"content\":\"ab\",\"reasoning_content\":\"abcdef\"}}],"
          "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":8}}", "usage+estimate", 6, 2 },
        { TT_API_OPENAI_CHAT,
          "{\"choices\":[{\"message\":{\"content\":\"<think>abcd</think>xyzw\"}}],"
          "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":23}}", "usage+estimate", 19, 4 },
        { TT_API_ANTHROPIC,
          "{\"type\":\"message\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"aaaa\"},"
          "{\"type\":\"text\",\"text\":\"bbbb\"}],\"usage\":{\"input_tokens\":2,\"output_tokens\":10}}",
          "usage+estimate", 5, 5 },
        { TT_API_OLLAMA,
          "{\"message\":{\"content\":\"hi\",\"thinking\":\"hmm\"},\"done\":true,"
          "\"prompt_eval_count\":4,\"eval_count\":5}", "usage+estimate", 3, 2 },
        { TT_API_GEMINI,
          "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\",\"thought\":true},{\"text\":\"ab\"}]}}],"
          "\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":5}}",
          "usage", 5, 2 },
        { TT_API_OPENAI_RESPONSES,
          "{\"object\":\"response\",\"status\":\"completed\",\"output\":["
          "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"sum\"}]},"
          "{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"answer\"}]}],"
          "\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"output_tokens_details\":{\"reasoning_tokens\":1}}}",
          "usage", 1, 1 },
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *parts[] = { cases[k].body, NULL };
        struct tt_request r;
        struct tt_metric_values m;
        const char *source = NULL;

        feed_parts(&r, cases[k].api, JSON, TT_THINK_AUTO, parts, 1);
        r.status = 200;
        r.t0 = 1;
        r.ts[TT_TS_RESPONSE_COMPLETE] = 9999;
        assert_int_equal(r.s.streaming, 0);
        assert_null(r.err_type);
        tt_metrics_compute(&r, &m, &source);
        if (source == NULL || strcmp(source, cases[k].source) != 0 ||
            !tt_metric_has(&m, TT_M_REASONING_TOKENS) ||
            (int)m.v[TT_M_REASONING_TOKENS] != cases[k].reasoning ||
            (int)m.v[TT_M_OUTPUT_TOKENS] != cases[k].output)
            fail_msg("case %zu (%s): source %s reasoning %g output %g, want %s %d %d", k,
                     tt_api_name(cases[k].api), source ? source : "null",
                     m.v[TT_M_REASONING_TOKENS], m.v[TT_M_OUTPUT_TOKENS],
                     cases[k].source, cases[k].reasoning, cases[k].output);
        tt_request_reset(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_detect),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_fixtures_truncated),
        cmocka_unit_test(test_think_split_tags),
        cmocka_unit_test(test_think_carry_literal),
        cmocka_unit_test(test_think_auto_mid_thought),
        cmocka_unit_test(test_think_auto_reasoning_field),
        cmocka_unit_test(test_event_kinds),
        cmocka_unit_test(test_error_events),
        cmocka_unit_test(test_non_streaming),
        cmocka_unit_test(test_framing_choice),
        cmocka_unit_test(test_oversize_event_counted),
        cmocka_unit_test(test_server_truth_fixtures),
        cmocka_unit_test(test_server_truth_nonstream_reasoning),
        cmocka_unit_test(test_non_streaming_reasoning_every_api),
        cmocka_unit_test(test_ttft_decomposition),
        cmocka_unit_test(test_usage_parts),
        cmocka_unit_test(test_usage_per_prompt_on_choice_chunks),
        cmocka_unit_test(test_upstream_error_types),
        cmocka_unit_test(test_server_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
