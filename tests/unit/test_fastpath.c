/*
 * The openai.chat fast path (proxy/decode/dec_openai_fast.c) against the cJSON
 * path: every shared fixture, read as an OpenAI chat stream, whole, one byte
 * at a time and in 30 random splits, with the fast path on and forced off
 * must give the same tt_request (stats, token timestamps, digest, request
 * error) and the same record, byte for byte; so must every event of the
 * chat fixtures after thousands of random mutations (bytes replaced,
 * inserted, removed), and a list of hand-written edge cases (duplicate
 * keys, escapes, odd numbers, usage variants, tool calls, trailing bytes).
 * The same for non-streaming bodies (a chat.completion read whole): the
 * common bodies, edge cases, bodies past the stack scratch, mutations.
 * Also checks the fast path does take the common chunks and bodies
 * (instruction counts mean nothing if it silently always falls back).
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
#include <dirent.h>
#include <cmocka.h>

#include "tests/unit/fixture.h"

#include "metrics/clock.h"
#include "metrics/record.h"
#include "metrics/request.h"
#include "proxy/decode/decode.h"
#include "proxy/decode/stream.h"



/* .jsonl: one SSE data payload per line (the recorder format) */
static char *as_sse(char *raw, size_t *len)
{
    char *out = malloc(*len * 2 + 64), *line = raw, *end;
    size_t o = 0;

    assert_non_null(out);
    for (; line < raw + *len; line = end + 1) {
        end = memchr(line, '\n', (size_t)(raw + *len - line));
        if (end == NULL)
            end = raw + *len;
        if (end > line)
            o += (size_t)sprintf(out + o, "data: %.*s\n\n", (int)(end - line), line);
    }
    free(raw);
    *len = o;
    return out;
}

static uint32_t rng(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

struct result {
    struct tt_request r;
    char *line;
};

/* feed <buf> split by <mode> (0 whole, 1 byte by byte, else random) */
static void run(const char *ct, const char *buf, size_t len, int mode, int fast,
                struct result *out)
{
    struct tt_request *r = &out->r;
    struct tt_metric_values m;
    struct tt_stream *st;
    const char *src;
    uint32_t seed = (uint32_t)mode * 7919u;
    size_t off = 0, n;

    tt_stream_fast = fast;
    tt_request_init(r);
    r->has_digest = 1;
    r->ts[TT_TS_REQUEST_COMPLETE] = 1000;
    st = tt_stream_new(r, TT_API_OPENAI_CHAT, ct, TT_THINK_AUTO);
    assert_non_null(st);
    while (off < len) {
        n = len - off;
        if (mode == 1)
            n = 1;
        else if (mode >= 2)
            n = 1 + rng(&seed) % (1u << (mode % 12));
        if (n > len - off)
            n = len - off;
        tt_stream_feed(st, buf + off, n, 2000 + off + n);
        off += n;
    }
    tt_stream_end(st, 1, 999999999u);
    tt_stream_free(st);
    r->ts[TT_TS_RESPONSE_COMPLETE] = 999999999u;
    tt_metrics_compute(r, &m, &src);
    out->line = tt_record_format(r, &m, src, NULL, &n);
    assert_non_null(out->line);
    tt_stream_fast = 1;
}

static void same(const struct result *a, const struct result *b, const char *what,
                 int mode)
{
    if (strcmp(a->line, b->line) != 0)
        fail_msg("%s mode %d: records differ\nfast: %scJSON: %s", what, mode,
                 a->line, b->line);
    if (memcmp(&a->r.s, &b->r.s, sizeof(a->r.s)) != 0)
        fail_msg("%s mode %d: stream stats differ", what, mode);
    assert_int_equal(a->r.n_token_ts, b->r.n_token_ts);
    if (a->r.n_token_ts)
        assert_memory_equal(a->r.token_ts, b->r.token_ts,
                            a->r.n_token_ts * sizeof(a->r.token_ts[0]));
    assert_memory_equal(a->r.ts, b->r.ts, sizeof(a->r.ts));
    assert_true(a->r.digest == b->r.digest);
    assert_int_equal(a->r.api, b->r.api);
    assert_int_equal(a->r.err_code, b->r.err_code);
    assert_true((a->r.err_type == NULL) == (b->r.err_type == NULL));
    if (a->r.err_type)
        assert_string_equal(a->r.err_type, b->r.err_type);
}

static void release(struct result *x)
{
    free(x->line);
    tt_request_reset(&x->r);
}

/* both paths on <buf>; returns the fast run's events */
static uint32_t compare(const char *ct, const char *buf, size_t len, int mode,
                        const char *what)
{
    struct result a, b;
    uint32_t ev;

    run(ct, buf, len, mode, 1, &a);
    run(ct, buf, len, mode, 0, &b);
    same(&a, &b, what, mode);
    ev = a.r.s.events;
    release(&a);
    release(&b);
    return ev;
}

static const char *ctype_of(const char *name)
{
    size_t n = strlen(name);

    if (n > 7 && strcmp(name + n - 7, ".ndjson") == 0)
        return "application/x-ndjson";
    if (n > 5 && strcmp(name + n - 5, ".json") == 0)
        return "application/json";
    return "text/event-stream";
}

static int fixtures_present(void)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/SOURCES.md", fixture_dir());
    f = fopen(path, "r");
    if (f == NULL) {
        printf("SKIP: fixtures not found at %s (set TT_FIXTURES)\n", fixture_dir());
        return 0;
    }
    fclose(f);
    return 1;
}

/* every fixture in the directory, every split */
static void test_fixtures_both_paths(void **state)
{
    DIR *d;
    struct dirent *e;
    unsigned files = 0;

    (void)state;
    if (!fixtures_present())
        skip();
    d = opendir(fixture_dir());
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t len, n = strlen(e->d_name);
        char *buf;
        int mode;

        if (e->d_name[0] == '.' || strcmp(e->d_name, "SOURCES.md") == 0)
            continue;
        buf = read_fixture(e->d_name, &len);
        assert_non_null(buf);
        if (n > 6 && strcmp(e->d_name + n - 6, ".jsonl") == 0)
            buf = as_sse(buf, &len);
        for (mode = 0; mode < 32; mode++)
            compare(ctype_of(e->d_name), buf, len, mode, e->d_name);
        free(buf);
        files++;
    }
    closedir(d);
    assert_true(files >= 10);
}

/* one event as a whole stream */
static void one_event(const char *json, size_t n, const char *what)
{
    char *buf = malloc(n + 64);
    size_t len;

    assert_non_null(buf);
    len = (size_t)sprintf(buf, "data: %.*s\n\ndata: [DONE]\n\n", (int)n, json);
    compare("text/event-stream", buf, len, 0, what);
    free(buf);
}

/* <first> then <second> in one stream: the second may resume after the
 * first's kept prefix (the memo), and must still read as cJSON reads it */
static void two_events(const char *first, size_t n1, const char *second, size_t n2,
                       const char *what)
{
    char *buf = malloc(n1 + n2 + 64);
    size_t len;

    assert_non_null(buf);
    len = (size_t)sprintf(buf, "data: %.*s\n\ndata: %.*s\n\ndata: [DONE]\n\n",
                          (int)n1, first, (int)n2, second);
    compare("text/event-stream", buf, len, 0, what);
    free(buf);
}

static void test_edge_cases(void **state)
{
    static const char *const cases[] = {
        "{\"model\":\"a\",\"model\":\"b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"x\",\"content\":\"y\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\\n\\\"b\\\\c\\/d\\te\\bf\\fg\\r\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"\\u00e9\\ud83d\\ude00\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"\\u0000cut\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"bad \\x escape\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"raw\ttab\"}}]}",
        "{\"choices\":[{\"index\":1.0,\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":-1,\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":1e0,\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":\"2\",\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":007,\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":3,\"delta\":{\"content\":\"x\"}},{\"delta\":{\"content\":\"y\"}}]}",
        "{\"choices\":[{\"index\":1234567890123456789,\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":0,\"delta\":null,\"message\":{\"content\":\"m\"}}]}",
        "{\"choices\":[{\"index\":0,\"text\":\"t\"}]}",
        "{\"choices\":{\"index\":0}}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":5.5,\"completion_tokens\":7}}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":null,\"completion_tokens\":\"7\"}}",
        "{\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,\"completion_tokens_details\":{\"reasoning_tokens\":3},\"prompt_tokens_details\":{\"cached_tokens\":2}}}",
        "{\"usage\":{\"completion_tokens_details\":null,\"reasoning_tokens\":4,\"prompt_tokens_details\":{},\"prompt_cache_hit_tokens\":1}}",
        "{\"usage\":{\"completion_tokens_details\":{\"reasoning_tokens\":null},\"reasoning_tokens\":4}}",
        "{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens\":2}}",
        "{\"usage\":null,\"choices\":[{\"delta\":{\"reasoning_content\":\"\",\"reasoning\":\"r\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning_content\":\"rc\",\"reasoning\":\"r\"}}]}",
        "{\"choices\":[{\"delta\":{\"refusal\":\"no\",\"content\":null}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[1,\"x\",{\"function\":null},{\"function\":{\"name\":7}}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":{\"function\":{\"name\":\"f\"}}}}]}",
        "{\"choices\":[{\"delta\":{\"function_call\":{\"name\":\"f\",\"arguments\":\"{}\"}}}]}",
        "{\"choices\":[{\"delta\":{\"function_call\":null,\"content\":\"c\"}}]}",
        "{\"error\":{\"message\":\"boom\",\"type\":\"x\"}}",
        "{\"error\":null,\"choices\":[{\"delta\":{\"content\":\"c\"}}]}",
        "{\"choices\":[],\"timings\":{\"prompt_n\":3}}",
        "{\"choices\":[{\"delta\":{\"content\":\"c\"},\"finish_reason\":\"stop\"}]} x",
        "{\"choices\":[{\"delta\":{\"content\":\"c\"},\"finish_reason\":\"stop\"}]}  \r\n",
        "  {\"choices\":[{\"delta\":{\"content\":\"c\"},\"finish_reason\":7}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"c\"}}],}",
        "{\"a\":[1,2,{\"b\":[true,false,null,-0.5e+3,\"s\"]}],\"choices\":[{\"delta\":{\"content\":\"c\"}}]}",
        "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
        "{\"a\":tru,\"choices\":[]}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":-}",
        "{\"con\\u0074ent\":1,\"choices\":[{\"delta\":{\"con\\u0074ent\":\"u\"}}]}",
        "{\"choices\":[{\"delta\":{\"cont\\nent\":\"u\"}}]}",
        "[1,2]",
        "\"just a string\"",
        "{}",
        "{\"choices\":[{\"delta\":{}}],\"model\":\"\"}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"<think>a</think>b\"}}]}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        one_event(cases[i], strlen(cases[i]), cases[i]);
}

/* <src> (<n> bytes) copied to <ev> (room for n + 3) with one to three
 * bytes replaced, inserted or removed at random; the new length */
static size_t mutate(char *ev, const char *src, size_t n, uint32_t *seed)
{
    static const char alphabet[] = "\"\\{}[],:0123456789-+.eEnultrfsa \t\n\x01\xc3\xa9u/";
    size_t m = n, pos, j, edits = 1 + rng(seed) % 3;

    memcpy(ev, src, n);
    for (j = 0; j < edits && m > 0; j++) {
        char c = alphabet[rng(seed) % (sizeof(alphabet) - 1)];
        pos = rng(seed) % m;
        switch (rng(seed) % 3) {
        case 0:
            ev[pos] = c;
            break;
        case 1:
            memmove(ev + pos + 1, ev + pos, m - pos);
            ev[pos] = c;
            m++;
            break;
        default:
            memmove(ev + pos, ev + pos + 1, m - pos - 1);
            m--;
            break;
        }
    }
    return m;
}

/* the data payloads of an SSE file, one by one */
static void mutate_events(const char *buf, size_t len, uint32_t *seed, unsigned per)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *d = memmem(p, (size_t)(end - p), "data: ", 6), *nl;
        char ev[8192];
        size_t n;
        unsigned k;

        if (d == NULL)
            break;
        d += 6;
        nl = memchr(d, '\n', (size_t)(end - d));
        if (nl == NULL)
            nl = end;
        n = (size_t)(nl - d);
        p = nl;
        if (n + 8 > sizeof(ev) || (n >= 6 && memcmp(d, "[DONE]", 6) == 0))
            continue;
        one_event(d, n, "unmutated");
        for (k = 0; k < per; k++) {
            size_t m = mutate(ev, d, n, seed), j;

            /* a newline would end the SSE line: keep the event one line */
            for (j = 0; j < m; j++)
                if (ev[j] == '\n' || ev[j] == '\r')
                    ev[j] = ' ';
            one_event(ev, m, "mutated event");
            two_events(d, n, ev, m, "mutated event after its original");
        }
    }
}

static void test_mutations(void **state)
{
    static const char *const files[] = {
        "vllm-0.24-chat-include_usage.sse",
        "openai-chat-tool_calls-include_usage.sse",
        "deepseek-chat-reasoning_content.sse",
        "llamacpp-b10587-chat-n2-include_usage.sse",
        "llamacpp-b10587-chat-include_usage-timings.sse",
        "together-deepseek-r1-think-tags.sse",
    };
    uint32_t seed = 12345;
    size_t i;

    (void)state;
    if (!fixtures_present())
        skip();
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        size_t len;
        char *buf = read_fixture(files[i], &len);

        if (buf == NULL)
            fail_msg("fixture %s missing from %s", files[i], fixture_dir());
        mutate_events(buf, len, &seed, 40);
        free(buf);
    }
}

/* <n> events as an SSE stream ending with [DONE]: owned, its length in *len */
static char *sse_stream(const char *const *ev, size_t n, size_t *len)
{
    size_t i, cap = 64;
    char *buf;

    for (i = 0; i < n; i++)
        cap += strlen(ev[i]) + 10;
    buf = malloc(cap);
    assert_non_null(buf);
    *len = 0;
    for (i = 0; i < n; i++)
        *len += (size_t)sprintf(buf + *len, "data: %s\n\n", ev[i]);
    *len += (size_t)sprintf(buf + *len, "data: [DONE]\n\n");
    return buf;
}

/* <n> events in one stream, both paths, whole and split */
static void events_stream(const char *const *ev, size_t n, const char *what)
{
    size_t len;
    char *buf = sse_stream(ev, n, &len);
    int mode;

    for (mode = 0; mode < 6; mode++)
        compare("text/event-stream", buf, len, mode, what);
    free(buf);
}

/*
 * The shape memo: a chunk that differs from the one before it only inside
 * string values reads them from the kept shape.  Every string a value can
 * hold (escapes, empty, quotes that end it early and change the structure,
 * \u and control bytes that give up) goes into each hole of the common
 * shapes, right after the shape was kept, and must read as cJSON reads it.
 */
static void test_shape_holes(void **state)
{
    static const char *const shapes[] = {
        "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":null}],\"obfuscation\":\"%s\"}",
        "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"%s\"},\"finish_reason\":null}],\"usage\":null,\"x\":[\"%s\"]}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"%s\",\"arguments\":\"%s\"}}]},\"finish_reason\":null}]}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":\"%s\"}],\"model\":\"n\"}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"%s\"}}],\"model\":\"%s\"}",
    };
    static const char *const strings[] = {
        "a", "", "tok en", "\\\"q\\\"", "\\\\n", "a\\/b\\tc\\r\\b\\f", "\\u00e9",
        "\\ud83d\\ude00", "x\",\"content\":\"y", "x\"},\"finish_reason\":\"stop",
        "x\"}]}", "\x01", "bad \\x", "<think>", "</think>tail", "\xc3\xa9\xe2\x82\xac",
        "0123456789012345678901234567890123456789012345678901234567890123456789",
        "\\", "\"",
    };
    size_t i, j, h;

    (void)state;
    for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (j = 0; j < sizeof(strings) / sizeof(strings[0]); j++)
            for (h = 0; h < 3; h++) {
                char a[1024], b[1024], c[1024];
                const char *ev[3] = { a, b, c };
                const char *s1 = h & 1 ? "k" : strings[j], *s2 = h & 2 ? "k" : strings[j];

                snprintf(a, sizeof(a), shapes[i], "first", "1");
                snprintf(b, sizeof(b), shapes[i], s1, s2);
                snprintf(c, sizeof(c), shapes[i], "last", "2");
                events_stream(ev, 3, b);
            }
}

/*
 * Stable holes: a skipped value (the id, object, created after "choices",
 * a flag, a nested member) that keeps its bytes is compared as fixed bytes
 * of the kept shape, and read again once it changes.  Each skipped value
 * keeps its bytes for three events, then takes each replacement (same
 * length, longer, shorter, another kind, invalid, one that ends the
 * object early or brings a fact), then changes in every event; the facts
 * after it (content, model, finish) must read as cJSON reads them.
 */
static void test_stable_holes(void **state)
{
    static const struct { const char *fmt; int fact_first; } shapes[] = {
        { "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}],\"id\":%s,\"object\":\"chat.completion.chunk\",\"created\":1786479604,\"model\":\"m\"}", 0 },
        { "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}],\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":%s,\"model\":\"m\"}", 0 },
        { "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}],\"meta\":{\"spans\":[1,{\"k\":\"s\"}],\"ok\":%s,\"x\":null}}", 0 },
        { "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"x\":%s,\"content\":\"%s\"},\"finish_reason\":null}]}", 1 },
        { "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"t\":%s,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}]}", 1 },
    };
    static const char *const first[] = { "\"chatcmpl-1\"", "1786479604", "true", "-1.5e3", "\"ab\"" };
    static const char *const values[] = {
        "\"chatcmpl-2\"", "\"chatcmpl-10\"", "\"x\"", "1786479605", "17864796041", "7",
        "false", "true", "null", "-0", "1.", "tru", "{}", "[1,\"a\"]", "\"\\u00e9\"",
        "\"\\u0000\"", "\"a\x01\"", "\"\\ud83d\"", "1,\"model\":\"n\"", "\"c\",\"usage\":{\"prompt_tokens\":3}",
        "\"c\"}]", "2}],\"x\":{\"content\":\"no\"", "01", "1e400",
    };
    const size_t nv = sizeof(values) / sizeof(values[0]);
    size_t iv, i, v, e;

    (void)state;
    for (iv = 0; iv < nv * (sizeof(shapes) / sizeof(shapes[0])); iv++) {
        char buf[8][1024];
        const char *ev[8];
        int fact_first;

        i = iv / nv;
        v = iv % nv;
        fact_first = shapes[i].fact_first;

        for (e = 0; e < 8; e++) {
            char tok[16], val[64];
            const char *x = e < 3 ? first[i] : e == 3 ? values[v] : val;

            snprintf(tok, sizeof(tok), "t%zu", e);
            snprintf(val, sizeof(val), "%zu", 100 + e * 37);
            if (fact_first)
                snprintf(buf[e], sizeof(buf[e]), shapes[i].fmt, x, tok);
            else
                snprintf(buf[e], sizeof(buf[e]), shapes[i].fmt, tok, x);
            ev[e] = buf[e];
        }
        events_stream(ev, 8, buf[3]);
    }
}

/*
 * Shapes that are not kept.  Past SHAPE_HOLES strings a fact would lie in
 * the kept bytes with nothing to refill it; a second choice is not in the
 * kept facts.  Each sequence here reads wrongly if such a shape were kept
 * (the third event would take a fact from an earlier event's scratch).
 */
static void test_shape_not_kept(void **state)
{
    static const char *const holes[] = {
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"first\",\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\",\"e\":\"5\",\"content\":\"same\"}}]}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"a longer reasoning\",\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\",\"e\":\"5\",\"content\":\"same\"}}]}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"last\",\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\",\"e\":\"5\",\"content\":\"same\"}}]}",
    };
    static const char *const choices[] = {
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}},{\"index\":1,\"delta\":{}}],\"o\":\"1\"}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"q\"}},{\"index\":7,\"delta\":{\"content\":\"z\"}}],\"bad\":tru}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}},{\"index\":1,\"delta\":{}}],\"o\":\"2\"}",
    };

    (void)state;
    events_stream(holes, 3, "a fact past the kept holes");
    events_stream(choices, 3, "a second choice");
}

/* a new prefix drops the shape kept under the old one: here the shape of
 * an event with a model in its prefix, under a prefix without one */
static void test_shape_belongs_to_its_prefix(void **state)
{
    static const char *const ev[] = {
        "{\"model\":\"\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
        "{\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":tru}",
        "{\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"c\"}}]}",
    };

    (void)state;
    events_stream(ev, 3, "prefix change");
}

/* "error": null is read by the fast path (no error); a later chunk whose
 * error is set must not be read by the shape kept from the null one */
static void test_error_null_then_set(void **state)
{
    static const char *const fmt[] = {
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}],\"error\":%s}",
        "{\"error\":%s,\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}",
    };
    static const char *const set[] = {
        "{\"message\":\"boom\"}", "true", "false", "\"text\"", "0", "nul", "[]",
    };
    size_t i, j;

    (void)state;
    for (i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++)
        for (j = 0; j < sizeof(set) / sizeof(set[0]); j++) {
            char ev[4][256];
            const char *p[4] = { ev[0], ev[1], ev[2], ev[3] };
            unsigned e;

            for (e = 0; e < 4; e++) {
                char tok[8];
                const char *err = e == 2 ? set[j] : e == 3 && j == 2 ? "true" : "null";

                snprintf(tok, sizeof(tok), "t%u", e);
                if (i == 0)
                    snprintf(ev[e], sizeof(ev[e]), fmt[i], tok, err);
                else
                    snprintf(ev[e], sizeof(ev[e]), fmt[i], err, tok);
            }
            events_stream(p, 4, ev[2]);
        }
}

/* a new OpenAI chat stream for <r>, fed <buf> whole */
static struct tt_stream *fed_stream(struct tt_request *r, const char *buf, size_t len)
{
    struct tt_stream *st;

    tt_request_init(r);
    st = tt_stream_new(r, TT_API_OPENAI_CHAT, "text/event-stream", TT_THINK_AUTO);
    assert_non_null(st);
    tt_stream_feed(st, buf, len, 5);
    return st;
}

/* the fast path does take the common chunk shapes (the figures in
 * bench/README.md mean nothing if it silently always fell back) */
static void test_fast_path_taken(void **state)
{
    static const char *const common[] = {
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1786479604,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"1\"},\"logprobs\":null,\"finish_reason\":null,\"token_ids\":null}]}",
        "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],\"prompt_token_ids\":null}",
        "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"total_tokens\":20,\"completion_tokens\":10}}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"},\"finish_reason\":null}]}",
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"\"}}]},\"finish_reason\":\"tool_calls\"}]}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
        struct tt_request r;
        struct tt_stream *st;
        char buf[1024];
        size_t len = (size_t)snprintf(buf, sizeof(buf), "data: %s\n\ndata: [DONE]\n\n",
                                      common[i]);

        st = fed_stream(&r, buf, len);
        if (st->fast_events != 1)
            fail_msg("not read by the fast path: %s", common[i]);
        tt_stream_end(st, 1, 10);
        assert_int_equal(r.s.parse_errors, 0);
        tt_stream_free(st);
        tt_request_reset(&r);
    }
    /* the second chunk of a response resumes after the first's prefix */
    {
        static const char two[] =
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n"
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\n"
            "data: [DONE]\n\n";
        struct tt_request r;
        struct tt_stream *st = fed_stream(&r, two, sizeof(two) - 1);

        assert_int_equal(st->fast_events, 2);
        assert_int_equal(st->memo_hits, 1);
        assert_int_equal(st->shape_hits, 0);
        tt_stream_end(st, 1, 10);
        assert_string_equal(r.s.model, "m-1");
        assert_int_equal(r.s.answer_events, 2);
        tt_stream_free(st);
        tt_request_reset(&r);
    }
    /* chunks that differ only in string values are read by the kept shape */
    {
        static const char three[] =
            "data: {\"id\":\"c\",\"model\":\"m-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}],\"obfuscation\":\"x\"}\n\n"
            "data: {\"id\":\"c\",\"model\":\"m-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" longer\"},\"finish_reason\":null}],\"obfuscation\":\"yy\"}\n\n"
            "data: {\"id\":\"c\",\"model\":\"m-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\n\"},\"finish_reason\":null}],\"obfuscation\":\"\"}\n\n"
            "data: [DONE]\n\n";
        struct tt_request r;
        struct tt_stream *st = fed_stream(&r, three, sizeof(three) - 1);

        assert_int_equal(st->fast_events, 3);
        assert_int_equal(st->shape_hits, 2);
        tt_stream_end(st, 1, 10);
        assert_string_equal(r.s.model, "m-2");
        assert_int_equal(r.s.answer_events, 3);
        assert_int_equal(r.s.answer_bytes, 9);
        tt_stream_free(st);
        tt_request_reset(&r);
    }
}

/*
 * Chunk shapes real servers send besides the common one, each of which the
 * fast path must read itself (not hand to cJSON) and read as cJSON does:
 * unknown members anywhere (top level, choices[], delta) holding large and
 * negative integers, fractions and exponents, strings with every escape
 * (\u and surrogate pairs too), nested objects and arrays, literals; and
 * keys in any order.  Each event of a stream gets other values where a
 * server's would change (a nanosecond timestamp, a logprob, OpenAI's
 * obfuscation), as the memos meet them live.
 */
enum {
    F_INT19 = 1, F_NEG = 2, F_FLOAT = 4, F_OBF = 8, F_ESC = 16, F_NESTED = 32,
    F_REORDER = 64, F_DELTA = 128, F_CHOICE = 256, F_LITS = 512, F_ALL = 1023,
};

static const char *const esc_strings[] = {
    "\\n", "\\\"q\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00", "a\\/b\\tc\\r",
    "\\u20AC\\u0041", "\\uDBFF\\uDFFF", "x\\\\\\\"y", "\\b\\f",
};

/* <n> strings joined by commas in the order <perm> (or as given) */
static size_t join(char *out, size_t cap, char parts[][320], unsigned n,
                   const unsigned *perm)
{
    size_t o = 0;
    unsigned i;

    for (i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "",
                              parts[perm != NULL ? perm[i] : i]);
    return o;
}

static void shuffle(unsigned *perm, unsigned n, uint32_t *seed)
{
    unsigned i;

    for (i = 0; i < n; i++)
        perm[i] = i;
    for (i = n; i > 1; i--) {
        unsigned j = rng(seed) % i, t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

/* event <i> of a stream of shape <f>; <perm*> the stream's key orders */
static void shaped_event(char *out, size_t cap, unsigned f, unsigned i, uint32_t *seed,
                         const unsigned *ptop, const unsigned *pch)
{
    char top[12][320], ch[6][320], delta[200], content[96], body[300];
    unsigned nt = 0, nc = 0, j;

    /* the content: a token, with escapes for F_ESC */
    snprintf(content, sizeof(content), "%stok%u",
             f & F_ESC ? esc_strings[rng(seed) % 10] : "", i);
    snprintf(delta, sizeof(delta), "{%s\"content\":\"%s\"}",
             f & F_DELTA ? "\"x_note\":{\"k\":[1,-2.5e3,\"n\"]}," : "", content);
    snprintf(ch[nc++], 320, "\"index\":0");
    snprintf(ch[nc++], 320, "\"delta\":%s", delta);
    snprintf(ch[nc++], 320, "\"logprobs\":null");
    snprintf(ch[nc++], 320, "\"finish_reason\":null");
    if (f & F_CHOICE)
        snprintf(ch[nc++], 320, "\"stop_reason\":%u", rng(seed) % 3 ? 7 : 12345);
    if (f & F_LITS)
        snprintf(ch[nc++], 320, "\"matched_stop\":%s", rng(seed) % 2 ? "true" : "false");

    snprintf(top[nt++], 320, "\"id\":\"chatcmpl-%u\"", 7u);
    snprintf(top[nt++], 320, "\"object\":\"chat.completion.chunk\"");
    snprintf(top[nt++], 320, "\"created\":1786479604");
    snprintf(top[nt++], 320, "\"model\":\"org/model-%u\"", 3u);
    join(body, sizeof(body), ch, nc, f & F_REORDER ? pch : NULL);
    snprintf(top[nt++], 320, "\"choices\":[{%.290s}]", body);
    if (f & F_INT19)
        snprintf(top[nt++], 320, "\"t\":%llu",
                 1796513334704321662ULL + (unsigned long long)rng(seed) * 1000);
    if (f & F_NEG)
        snprintf(top[nt++], 320, "\"offset\":-%u", 1 + rng(seed) % 100000);
    if (f & F_FLOAT)
        snprintf(top[nt++], 320, "\"lp\":-%u.%03ue%s%u", rng(seed) % 10, rng(seed) % 1000,
                 rng(seed) % 2 ? "-" : "+", rng(seed) % 20);
    if (f & F_OBF) {
        char o[20];
        unsigned n = 1 + rng(seed) % 16;
        for (j = 0; j < n; j++)
            o[j] = (char)('A' + rng(seed) % 26);
        o[n] = '\0';
        snprintf(top[nt++], 320, "\"obfuscation\":\"%s\"", o);
    }
    if (f & F_NESTED)
        snprintf(top[nt++], 320, "\"meta\":{\"spans\":[%u,{\"k\":\"s%u\",\"e\":[]}],"
                 "\"ok\":true,\"x\":null,\"o\":{}}", rng(seed) % 1000, i);
    if (f & F_LITS)
        snprintf(top[nt++], 320, "\"usage\":null,\"cached\":false,\"flag\":true");
    out[0] = '{';
    join(out + 1, cap - 2, top, nt, f & F_REORDER ? ptop : NULL);
    strcat(out, "}");
}

/* a stream of <n> events of shape <f>: read by the fast path, every event,
 * as cJSON reads it (whole and split); the events after the second read
 * by the kept shape when <shaped> */
static void shape_stream(unsigned f, unsigned n, uint32_t *seed, int shaped,
                         const char *what)
{
    static char buf[16384];
    unsigned ptop[12], pch[6], i;
    size_t len = 0;
    struct tt_request r;
    struct tt_stream *st;
    int mode;

    shuffle(ptop, 5 + !!(f & F_INT19) + !!(f & F_NEG) + !!(f & F_FLOAT) + !!(f & F_OBF) +
            !!(f & F_NESTED) + !!(f & F_LITS), seed);
    shuffle(pch, 4 + !!(f & F_CHOICE) + !!(f & F_LITS), seed);
    for (i = 0; i < n; i++) {
        char ev[1024];
        shaped_event(ev, sizeof(ev), f, i, seed, ptop, pch);
        assert_true(strlen(ev) < sizeof(ev) - 1);
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "data: %s\n\n", ev);
        assert_true(len < sizeof(buf) - 64);
    }
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "data: [DONE]\n\n");
    st = fed_stream(&r, buf, len);
    if (st->fast_events != n)
        fail_msg("%s: %u of %u events read by the fast path\n%.*s", what,
                 st->fast_events, n, (int)len, buf);
    if (shaped && st->shape_hits < n - 2)
        fail_msg("%s: %u of %u events read by the kept shape\n%.*s", what,
                 st->shape_hits, n, (int)len, buf);
    tt_stream_end(st, 1, 10);
    assert_int_equal(r.s.parse_errors, 0);
    assert_int_equal(r.s.answer_events, n);
    tt_stream_free(st);
    tt_request_reset(&r);
    for (mode = 0; mode < 4; mode++)
        compare("text/event-stream", buf, len, mode, what);
}

static void test_shapes_fast(void **state)
{
    static const struct { unsigned f; const char *name; } shapes[] = {
        { 0, "common" }, { F_INT19, "19-digit integer" }, { F_NEG, "negative integer" },
        { F_FLOAT, "exponent and fraction" }, { F_OBF, "obfuscation" },
        { F_ESC, "escapes in content" }, { F_NESTED, "nested object and array" },
        { F_REORDER, "keys reordered" }, { F_DELTA | F_CHOICE, "unknown in delta and choice" },
        { F_LITS, "null, true, false" }, { F_ALL, "all at once" },
    };
    uint32_t seed = 4242;
    size_t i;
    unsigned k;

    (void)state;
    for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (k = 0; k < 4; k++)
            shape_stream(shapes[i].f, 6, &seed, 1, shapes[i].name);
    /* random mixes, with random key orders */
    for (k = 0; k < 400; k++) {
        char what[64];
        unsigned f = rng(&seed) & F_ALL;
        snprintf(what, sizeof(what), "mix %#x", f);
        shape_stream(f, 2 + rng(&seed) % 6, &seed, 1, what);
    }
}

/*
 * What the fast path reads of \u escapes and long numbers, and what it
 * leaves to cJSON: each event alone and after a common one (the second
 * may be read by the kept shape), both paths the same.
 */
static void test_escapes_and_numbers(void **state)
{
    static const char *const fast[] = {
        "\\u00e9", "\\u20ac", "\\uFFFF", "\\ud83d\\ude00", "\\uD83D\\uDE00x", "\\u0001",
        "\\u007f\\u0080\\u07ff\\u0800", "\\udbff\\udfff", "\\ud800\\udc00",
    };
    static const char *const slow[] = {
        "\\u0000", "\\u00g0", "\\ude00", "\\ud83d", "\\ud83dx", "\\ud83d\\u0041",
        "\\ud83d\\ud83d", "\\u12", "\\u", "\\U00e9",
    };
    static const char *const nums[] = {
        "1796513334704321662", "-1796513334704321662", "123456789012345678901234567890",
        "-0", "0.5", "-1.5e-7", "1E+300", "1e400", "-0.0e0", "123456789012345",
        "1234567890123456",
    };
    static const char *const bad_nums[] = {
        "01", "1.", "-", "1e", "+1", ".5", "12345678901234567890123456789012345678901",
    };
    char ev[512];
    size_t i;
    const char *common = "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"t\":1}";

    (void)state;
    for (i = 0; i < sizeof(fast) / sizeof(fast[0]); i++) {
        struct tt_request r;
        struct tt_stream *st;
        char buf[640];

        snprintf(ev, sizeof(ev), "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}],\"t\":1,\"s\":\"%s\"}", fast[i], fast[i]);
        one_event(ev, strlen(ev), ev);
        two_events(common, strlen(common), ev, strlen(ev), ev);
        st = fed_stream(&r, buf, (size_t)snprintf(buf, sizeof(buf), "data: %s\n\n", ev));
        if (st->fast_events != 1)
            fail_msg("not read by the fast path: %s", ev);
        tt_stream_free(st);
        tt_request_reset(&r);
    }
    for (i = 0; i < sizeof(slow) / sizeof(slow[0]); i++) {
        snprintf(ev, sizeof(ev), "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}],\"t\":1}", slow[i]);
        one_event(ev, strlen(ev), ev);
        two_events(common, strlen(common), ev, strlen(ev), ev);
        snprintf(ev, sizeof(ev), "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"t\":1,\"s\":\"%s\"}", slow[i]);
        one_event(ev, strlen(ev), ev);
        two_events(common, strlen(common), ev, strlen(ev), ev);
        /* a key with \u might spell one of ours: cJSON's */
        snprintf(ev, sizeof(ev), "{\"id\":\"c\",\"choices\":[{\"delta\":{\"c%sntent\":\"u\"}}]}", slow[i]);
        one_event(ev, strlen(ev), ev);
    }
    for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        snprintf(ev, sizeof(ev), "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"t\":%s}", nums[i]);
        one_event(ev, strlen(ev), ev);
        two_events(common, strlen(common), ev, strlen(ev), ev);
        snprintf(ev, sizeof(ev), "{\"choices\":[{\"index\":%s,\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":%s,\"completion_tokens\":1}}", nums[i], nums[i]);
        one_event(ev, strlen(ev), ev);
    }
    for (i = 0; i < sizeof(bad_nums) / sizeof(bad_nums[0]); i++) {
        snprintf(ev, sizeof(ev), "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"t\":%s}", bad_nums[i]);
        one_event(ev, strlen(ev), ev);
        two_events(common, strlen(common), ev, strlen(ev), ev);
    }
}

/* <n> events as one stream: both paths give the same record, with
 * <in> / <out> usage tokens */
static void usage_case(const char *const *ev, size_t n, int64_t in, int64_t out,
                       const char *what)
{
    size_t len;
    struct result a, b;
    char *buf = sse_stream(ev, n, &len);
    int mode;

    for (mode = 0; mode < 3; mode++) {
        run("text/event-stream", buf, len, mode, 1, &a);
        run("text/event-stream", buf, len, mode, 0, &b);
        same(&a, &b, what, mode);
        if (a.r.s.usage_input != in || a.r.s.usage_output != out)
            fail_msg("%s mode %d: usage in %lld out %lld, want %lld %lld", what, mode,
                     (long long)a.r.s.usage_input, (long long)a.r.s.usage_output,
                     (long long)in, (long long)out);
        release(&a);
        release(&b);
    }
    free(buf);
}

#define UC(i, content, fin, usage) "{\"id\":\"c\",\"object\":\"chat.completion.chunk\"," \
    "\"model\":\"m\",\"choices\":[{\"index\":" #i ",\"delta\":{\"content\":\"" content "\"}," \
    "\"finish_reason\":" fin "}]" usage "}"
#define USAGE(in, out) ",\"usage\":{\"prompt_tokens\":" #in ",\"completion_tokens\":" #out \
    ",\"total_tokens\":0}"
#define UONLY(in, out) "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\"," \
    "\"choices\":[]" USAGE(in, out) "}"

/*
 * Usage per choice is summed, a repeated or cumulative usage is not, and
 * the fast path and cJSON's agree on each (tt_dec_usage in proxy/decode/decode.c).
 */
static void test_usage_per_choice_vs_repeated(void **state)
{
    /* llama.cpp, n = 2: a usage-only chunk after each choice's finish */
    static const char *const llama_n2[] = {
        UC(1, "a", "null", ""), UC(0, "b", "null", ""), UC(1, "", "\"length\"", ""),
        UONLY(19, 16), UC(0, "c", "null", ""), UC(0, "", "\"length\"", ""), UONLY(19, 16),
    };
    /* the same when both finish before their usage chunks */
    static const char *const llama_n2_late[] = {
        UC(1, "a", "null", ""), UC(0, "b", "null", ""), UC(1, "", "\"length\"", ""),
        UC(0, "", "\"length\"", ""), UONLY(19, 16), UONLY(19, 16),
    };
    /* usage on each choice's finish chunk, one per index */
    static const char *const per_index[] = {
        UC(0, "a", "null", ""), UC(1, "b", "null", ""),
        UC(0, "", "\"stop\"", USAGE(19, 10)), UC(1, "", "\"stop\"", USAGE(19, 12)),
    };
    /* OpenAI, n = 2: both finish, then the total once */
    static const char *const openai_n2[] = {
        UC(0, "a", "null", ""), UC(1, "b", "null", ""), UC(0, "", "\"stop\"", ""),
        UC(1, "", "\"stop\"", ""), UONLY(19, 22),
    };
    /* usage on the finish chunk and again on a usage-only chunk */
    static const char *const repeated[] = {
        UC(0, "a", "null", ""), UC(0, "", "\"stop\"", USAGE(19, 16)), UONLY(19, 16),
    };
    /* vLLM continuous usage: a choice's running count on its chunks, the
     * total at the end */
    static const char *const vllm_cont[] = {
        UC(0, "a", "null", USAGE(19, 1)), UC(1, "b", "null", USAGE(19, 1)),
        UC(0, "c", "null", USAGE(19, 2)), UC(1, "d", "null", USAGE(19, 2)),
        UC(0, "", "\"stop\"", USAGE(19, 3)), UC(1, "e", "null", USAGE(19, 3)),
        UC(1, "", "\"stop\"", USAGE(19, 4)), UONLY(19, 7),
    };
    /* vLLM continuous usage, n = 1, without the final usage-only chunk */
    static const char *const vllm_cont1[] = {
        UC(0, "a", "null", USAGE(19, 1)), UC(0, "b", "null", USAGE(19, 2)),
        UC(0, "", "\"stop\"", USAGE(19, 2)),
    };
#define CASE(ev, in, out) usage_case(ev, sizeof(ev) / sizeof(ev[0]), in, out, #ev)
    (void)state;
    CASE(llama_n2, 19, 32);
    CASE(llama_n2_late, 19, 32);
    CASE(per_index, 19, 22);
    CASE(openai_n2, 19, 22);
    CASE(repeated, 19, 16);
    CASE(vllm_cont, 19, 7);
    CASE(vllm_cont1, 19, 2);
#undef CASE
}

/* ------------------------------------------------------------------ */
/* non-streaming bodies (a chat.completion read whole)                  */

/* <json> as a whole application/json body, both paths, whole and split */
static void one_body(const char *json, size_t n, const char *what)
{
    int mode;

    for (mode = 0; mode < 3; mode++)
        compare("application/json", json, n, mode, what);
}

/* the body read by the fast path (1) or left to cJSON (0) */
static int body_fast(const char *json, size_t n)
{
    struct tt_request r;
    struct tt_stream *st;
    unsigned fast;

    tt_request_init(&r);
    st = tt_stream_new(&r, TT_API_OPENAI_CHAT, "application/json", TT_THINK_AUTO);
    assert_non_null(st);
    tt_stream_feed(st, json, n, 5);
    tt_stream_end(st, 1, 10);
    fast = st->fast_events;
    tt_stream_free(st);
    tt_request_reset(&r);
    return fast == 1;
}

#define CC_HEAD "{\"id\":\"chatcmpl-9\",\"object\":\"chat.completion\",\"created\":1786479604," \
    "\"model\":\"org/m\",\"choices\":["
#define CC_TAIL "],\"usage\":{\"prompt_tokens\":19,\"total_tokens\":46,\"completion_tokens\":27}}"

/*
 * The bodies servers send (the sim's, OpenAI's, vLLM's, SGLang's,
 * DeepSeek's, llama.cpp's without timings) are read by the fast path, as
 * cJSON reads them: the figures in bench/README.md mean nothing if it
 * silently always fell back.
 */
static void test_body_fast_path_taken(void **state)
{
    static const char *const bodies[] = {
        /* tokentap-sim */
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1786479604,\"model\":\"sim\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"tok0 tok1\"},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,\"total_tokens\":10}}",
        /* OpenAI: refusal, annotations, details, service_tier */
        "{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion\",\"created\":1741569952,\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello! How can I assist you today?\",\"refusal\":null,\"annotations\":[]},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":10,\"total_tokens\":29,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}},\"service_tier\":\"default\",\"system_fingerprint\":null}",
        /* OpenAI: tool calls */
        "{\"id\":\"chatcmpl-2\",\"object\":\"chat.completion\",\"created\":1741569952,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"location\\\":\\\"Paris, France\\\"}\"}},{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}],\"refusal\":null,\"annotations\":[]},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":82,\"completion_tokens\":17,\"total_tokens\":99}}",
        /* OpenAI: a refusal */
        "{\"id\":\"chatcmpl-3\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"refusal\":\"I'm sorry, I can't help with that.\"},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9,\"total_tokens\":14}}",
        /* vLLM: reasoning_content, nulls, prompt_logprobs, kv_transfer_params */
        "{\"id\":\"chatcmpl-4\",\"object\":\"chat.completion\",\"created\":1786479604,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"reasoning_content\":\"Let me think.\\nOkay.\",\"content\":\"\\n\\nThe answer is 4.\",\"tool_calls\":[]},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":40,\"completion_tokens\":28,\"prompt_tokens_details\":null},\"prompt_logprobs\":null,\"kv_transfer_params\":null}",
        /* vLLM: reasoning (newer), function_call null */
        "{\"id\":\"chatcmpl-5\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"4\",\"refusal\":null,\"annotations\":null,\"audio\":null,\"function_call\":null,\"tool_calls\":[],\"reasoning\":\"2+2\"},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null,\"token_ids\":null}],\"service_tier\":null,\"system_fingerprint\":null,\"usage\":{\"prompt_tokens\":3,\"total_tokens\":6,\"completion_tokens\":3,\"prompt_tokens_details\":null},\"prompt_logprobs\":null,\"prompt_token_ids\":null,\"kv_transfer_params\":null}",
        /* SGLang: matched_stop, reasoning_tokens at the top of usage */
        "{\"id\":\"6\",\"object\":\"chat.completion\",\"created\":1786479604,\"model\":\"default\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":null,\"tool_calls\":null},\"logprobs\":null,\"finish_reason\":\"stop\",\"matched_stop\":151645}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":11,\"completion_tokens\":2,\"prompt_tokens_details\":null,\"reasoning_tokens\":0},\"metadata\":{\"weight_version\":\"default\"}}",
        /* DeepSeek: prompt_cache_hit_tokens */
        "{\"id\":\"7\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"deepseek-reasoner\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"9.11 < 9.8\",\"reasoning_content\":\"Compare.\"},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":14,\"completion_tokens\":300,\"total_tokens\":314,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":250},\"prompt_cache_hit_tokens\":0,\"prompt_cache_miss_tokens\":14},\"system_fingerprint\":\"fp_1\"}",
        /* llama.cpp without timings, keys in its order */
        "{\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"a b c\"}}],\"created\":1796110334,\"model\":\"x.gguf\",\"system_fingerprint\":\"b10587\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":3,\"prompt_tokens\":4,\"total_tokens\":7},\"id\":\"chatcmpl-8\"}\n",
        /* n = 2 */
        CC_HEAD "{\"index\":0,\"message\":{\"content\":\"a\"},\"finish_reason\":\"stop\"},{\"index\":1,\"message\":{\"content\":\"b\"},\"finish_reason\":\"length\"}" CC_TAIL,
        /* think tags inline */
        CC_HEAD "{\"index\":0,\"message\":{\"content\":\"<think>hm</think>yes\"},\"finish_reason\":\"stop\"}" CC_TAIL,
        /* "error": null */
        CC_HEAD "{\"index\":0,\"message\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}],\"error\":null,\"x\":[" CC_TAIL,
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        if (!body_fast(bodies[i], strlen(bodies[i])))
            fail_msg("not read by the fast path: %s", bodies[i]);
        one_body(bodies[i], strlen(bodies[i]), bodies[i]);
    }
}

/*
 * Bodies at the edges: text from the message or the delta (whichever the
 * tree code takes), duplicate keys, escapes and \u escapes cJSON cuts,
 * unknown members, numbers of every kind, more choices and tool calls
 * than the scanner keeps, errors, timings, trailing bytes; each read the
 * same by both paths.
 */
static void test_body_edge_cases(void **state)
{
    static const char *const choices[] = {
        "{\"index\":0,\"message\":{\"content\":\"a\",\"content\":\"b\"},\"finish_reason\":\"stop\"}",
        "{\"index\":0,\"message\":{\"content\":\"a\"},\"message\":{\"content\":\"b\"}}",
        "{\"index\":0,\"message\":{\"content\":\"m\"},\"delta\":{\"content\":\"d\"}}",
        "{\"index\":0,\"delta\":{\"content\":\"d\"},\"message\":{\"content\":\"m\"}}",
        "{\"index\":0,\"delta\":null,\"message\":{\"content\":\"m\"}}",
        "{\"index\":0,\"message\":{\"content\":\"m\"},\"delta\":\"x\"}",
        "{\"index\":0,\"message\":null,\"finish_reason\":\"stop\"}",
        "{\"index\":0,\"message\":\"text\",\"finish_reason\":\"stop\"}",
        "{\"index\":0,\"finish_reason\":\"stop\"}",
        "{\"index\":0,\"text\":\"completion text\",\"finish_reason\":\"stop\"}",
        "{\"index\":0,\"message\":{},\"finish_reason\":null}",
        "{\"index\":0,\"message\":{\"content\":\"\"},\"finish_reason\":\"\"}",
        "{\"index\":0,\"message\":{\"content\":\"a\\n\\\"b\\\\c\\/d\\te\\bf\\fg\\r\"},\"finish_reason\":\"stop\"}",
        "{\"index\":0,\"message\":{\"content\":\"\\u00e9\\u20ac\\ud83d\\ude00\\u0001\\uFFFF\"}}",
        "{\"index\":0,\"message\":{\"content\":\"cut\\u0000here\"}}",
        "{\"index\":0,\"message\":{\"content\":\"lone \\ud83d here\"}}",
        "{\"index\":0,\"message\":{\"content\":\"lone \\ude00 here\"}}",
        "{\"index\":0,\"message\":{\"content\":\"bad \\u00g0 hex\"}}",
        "{\"index\":0,\"message\":{\"content\":\"bad \\x escape\"}}",
        "{\"index\":0,\"message\":{\"content\":\"raw\ttab\"}}",
        "{\"index\":0,\"message\":{\"con\\u0074ent\":\"u\"}}",
        "{\"index\":0,\"message\":{\"cont\\nent\":\"u\",\"content\":\"c\"}}",
        "{\"index\":0,\"message\":{\"reasoning_content\":\"rc\",\"reasoning\":\"r\",\"content\":\"c\"}}",
        "{\"index\":0,\"message\":{\"reasoning_content\":\"\",\"reasoning\":\"r\",\"content\":\"c\"}}",
        "{\"index\":0,\"message\":{\"reasoning_content\":null,\"reasoning\":7}}",
        "{\"index\":0,\"message\":{\"refusal\":\"no\",\"content\":null}}",
        "{\"index\":0,\"message\":{\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}}",
        "{\"index\":0,\"message\":{\"tool_calls\":[1,\"x\",{\"function\":null},{\"function\":{\"name\":7}}]}}",
        "{\"index\":0,\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"a\"}},{\"function\":{\"name\":\"b\"}},{\"function\":{\"name\":\"c\"}},{\"function\":{\"name\":\"d\"}},{\"function\":{\"name\":\"e\"}}]}}",
        "{\"index\":0,\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"a\",\"name\":\"b\"}}]}}",
        "{\"index\":0,\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"a\"},\"function\":{\"name\":\"b\"}}]}}",
        "{\"index\":0,\"message\":{\"tool_calls\":{\"function\":{\"name\":\"f\"}}}}",
        "{\"index\":0,\"message\":{\"function_call\":{\"name\":\"f\",\"arguments\":\"{}\"}}}",
        "{\"index\":0,\"message\":{\"function_call\":null,\"content\":\"c\"}}",
        "{\"index\":1.0,\"message\":{\"content\":\"x\"}}",
        "{\"index\":-1,\"message\":{\"content\":\"x\"}}",
        "{\"index\":\"2\",\"message\":{\"content\":\"x\"}}",
        "{\"index\":1234567890123456789,\"message\":{\"content\":\"x\"}}",
        "{\"index\":3,\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"},{\"message\":{\"content\":\"y\"},\"finish_reason\":\"length\"}",
        "{\"index\":0,\"message\":{\"content\":\"a\"}},{\"index\":1,\"message\":{\"content\":\"b\"}},{\"index\":2,\"message\":{\"content\":\"c\"}},{\"index\":3,\"message\":{\"content\":\"d\"}},{\"index\":4,\"message\":{\"content\":\"e\"}}",
        "{\"index\":0,\"message\":{\"content\":\"a\"},\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-0.0012,\"bytes\":[97],\"top_logprobs\":[]}]}}",
        "{\"index\":0,\"message\":{\"content\":\"a\",\"x\":{\"k\":[1,-2.5e3,true,false,null,{},[]]}}}",
    };
    static const char *const bodies[] = {
        "{\"model\":\"a\",\"model\":\"b\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"}}],\"choices\":[]}",
        "{\"choices\":{\"index\":0}}",
        "{\"choices\":null,\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}",
        "{\"usage\":{\"prompt_tokens\":5.5,\"completion_tokens\":7}}",
        "{\"usage\":{\"prompt_tokens\":null,\"completion_tokens\":\"7\"}}",
        "{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens\":2}}",
        "{\"usage\":{\"completion_tokens_details\":null,\"reasoning_tokens\":4,\"prompt_tokens_details\":{},\"prompt_cache_hit_tokens\":1}}",
        "{\"usage\":{\"completion_tokens_details\":{\"reasoning_tokens\":null},\"reasoning_tokens\":4}}",
        "{\"usage\":null,\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"}}]}",
        "{\"error\":{\"message\":\"boom\",\"type\":\"invalid_request_error\",\"code\":400}}",
        "{\"error\":null,\"error\":{\"message\":\"boom\"},\"choices\":[]}",
        "{\"error\":false,\"choices\":[]}",
        "{\"error\":\"text\",\"choices\":[]}",
        "{\"choices\":[],\"timings\":{\"prompt_n\":3}}",
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"},\"finish_reason\":\"stop\"}]} x",
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"},\"finish_reason\":\"stop\"}]}  \r\n",
        "\xef\xbb\xbf{\"choices\":[{\"index\":0,\"message\":{\"content\":\"bom\"}}]}",
        " \n {\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"},\"finish_reason\":7}]}",
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"}}],}",
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"}}]",
        "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
        "{\"stop\":true,\"content\":\"llama native\"}",
        "[{\"choices\":[{\"index\":0,\"message\":{\"content\":\"c\"}}]}]",
        "\"just a string\"",
        "{}",
        "",
        "   ",
        "null",
    };
    static const char *const nums[] = {
        "0", "-0", "7", "1796513334704321662", "-1796513334704321662", "0.5", "-1.5e-7",
        "1E+300", "1e400", "-0.0e0", "123456789012345", "1234567890123456",
        "123456789012345678901234567890", "01", "1.", "-", "1e", "+1", ".5", "NaN",
        "12345678901234567890123456789012345678901",
    };
    char b[1024];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
        snprintf(b, sizeof(b), CC_HEAD "%s" CC_TAIL, choices[i]);
        one_body(b, strlen(b), b);
    }
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        one_body(bodies[i], strlen(bodies[i]), bodies[i]);
    for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        /* a skipped number, the index, every count */
        snprintf(b, sizeof(b), CC_HEAD "{\"index\":0,\"message\":{\"content\":\"a\"}}],\"t\":%s}",
                 nums[i]);
        one_body(b, strlen(b), b);
        snprintf(b, sizeof(b), "{\"choices\":[{\"index\":%s,\"message\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":%s,\"completion_tokens\":%s,\"reasoning_tokens\":%s,\"prompt_cache_hit_tokens\":%s}}",
                 nums[i], nums[i], nums[i], nums[i], nums[i]);
        one_body(b, strlen(b), b);
        snprintf(b, sizeof(b), "{\"choices\":[],\"usage\":{\"completion_tokens_details\":{\"reasoning_tokens\":%s},\"prompt_tokens_details\":{\"cached_tokens\":%s}}}",
                 nums[i], nums[i]);
        one_body(b, strlen(b), b);
    }
}

/* bodies longer than the stack scratch: the strings go to one as large as
 * the body, escapes and all */
static void test_body_large(void **state)
{
    static const char *const pieces[] = {
        "word ", "\\n", "\\\"q\\\" ", "\\u00e9", "\\ud83d\\ude00", "\\\\", "\xc3\xa9",
    };
    size_t sizes[] = { 4000, 4095, 4096, 5000, 70000, 300000 };
    size_t i, k;

    (void)state;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
            size_t cap = sizes[i] + 512, o, pl = strlen(pieces[k]);
            char *b = malloc(cap);

            assert_non_null(b);
            o = (size_t)sprintf(b, CC_HEAD "{\"index\":0,\"message\":{\"reasoning_content\":\"");
            while (o + pl + 256 < sizes[i]) {
                memcpy(b + o, pieces[k], pl);
                o += pl;
            }
            o += (size_t)sprintf(b + o, "\",\"content\":\"%s end\"},\"finish_reason\":\"stop\"}" CC_TAIL,
                                 pieces[k]);
            if (!body_fast(b, o))
                fail_msg("a body of %zu bytes not read by the fast path", o);
            compare("application/json", b, o, 0, "a large body");
            compare("application/json", b, o, 7, "a large body");
            free(b);
        }
}

/* a body mutated at random (bytes replaced, inserted, removed) */
static void mutate_body(const char *body, size_t n, uint32_t *seed, unsigned per)
{
    char *ev = malloc(n + 8);
    unsigned k;

    assert_non_null(ev);
    for (k = 0; k < per; k++) {
        size_t m = mutate(ev, body, n, seed);

        compare("application/json", ev, m, 0, "mutated body");
    }
    free(ev);
}

static void test_body_mutations(void **state)
{
    static const char *const bodies[] = {
        CC_HEAD "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"tok\\n0\",\"reasoning_content\":\"r\\u00e9\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":\"stop\"}" CC_TAIL,
        CC_HEAD "{\"index\":0,\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"},{\"index\":1,\"message\":{\"refusal\":\"no\"},\"finish_reason\":\"stop\"}" CC_TAIL,
        "{\"id\":\"x\",\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"reasoning\":\"r\",\"content\":\"c\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"completion_tokens_details\":{\"reasoning_tokens\":1},\"prompt_tokens_details\":{\"cached_tokens\":2},\"prompt_cache_hit_tokens\":5},\"error\":null}",
    };
    static const char *const files[] = {
        "llamacpp-b10587-chat-nonstream-reasoning_content.json",
    };
    uint32_t seed = 777;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        if (!body_fast(bodies[i], strlen(bodies[i])))
            fail_msg("not read by the fast path: %s", bodies[i]);
        mutate_body(bodies[i], strlen(bodies[i]), &seed, 3000);
    }
    if (!fixtures_present())
        return;
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        size_t len;
        char *buf = read_fixture(files[i], &len);

        if (buf == NULL)
            fail_msg("fixture %s missing from %s", files[i], fixture_dir());
        mutate_body(buf, len, &seed, 1000);
        free(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_path_taken),
        cmocka_unit_test(test_shapes_fast),
        cmocka_unit_test(test_escapes_and_numbers),
        cmocka_unit_test(test_usage_per_choice_vs_repeated),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_shape_holes),
        cmocka_unit_test(test_shape_belongs_to_its_prefix),
        cmocka_unit_test(test_shape_not_kept),
        cmocka_unit_test(test_stable_holes),
        cmocka_unit_test(test_error_null_then_set),
        cmocka_unit_test(test_fixtures_both_paths),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_body_fast_path_taken),
        cmocka_unit_test(test_body_edge_cases),
        cmocka_unit_test(test_body_large),
        cmocka_unit_test(test_body_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
