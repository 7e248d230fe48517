/*
 * libFuzzer harness for the openai.chat fast path
 * (proxy/decode/dec_openai_fast.c) against the cJSON path: the same SSE
 * stream is decoded by two tt_stream decoders, one with tt_stream_fast = 1
 * and one with 0, and the harness aborts when the tt_request facts differ
 * (stream stats: token, answer and reasoning events and bytes, usage,
 * finish reason, model, response id, errors, parse errors; the token
 * timestamps, the first token and output token times, the answer digest,
 * the request error).
 *
 * Input: the first byte picks the read size (0: whole) and the think
 * mode; the rest is one event payload per line, each sent as
 * "data: <line>\n\n" (so mutations change the JSON, not the framing).
 * The same rest is then compared as a whole non-streaming body
 * (application/json: a chat.completion read by the fast scanner or by
 * cJSON), newlines and all.
 * Seeds: fuzz/corpus/fastpath (the chat fixtures' chunks, one per line,
 * and chat.completion bodies); dictionary: fuzz/fastpath.dict (JSON
 * tokens, the keys the fast path knows).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/request.h"
#include "proxy/decode/decode.h"
#include "proxy/decode/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the SSE body: each line of <p, n> as an event */
static char *as_sse(const uint8_t *p, size_t n, size_t *len)
{
    char *out = malloc(n * 5 + 16), *o;  /* a 1-byte line: 2 in, 9 out */
    const uint8_t *line = p, *end, *e = p + n;

    if (out == NULL)
        abort();
    o = out;
    for (; line < e; line = end + 1) {
        end = memchr(line, '\n', (size_t)(e - line));
        if (end == NULL)
            end = e;
        if (end == line)
            continue;
        memcpy(o, "data: ", 6);
        o += 6;
        memcpy(o, line, (size_t)(end - line));
        o += end - line;
        memcpy(o, "\n\n", 2);
        o += 2;
        if (end == e)
            break;
    }
    *len = (size_t)(o - out);
    return out;
}

/* <p, n> as a response of Content-Type <ct>, <step> bytes a read */
static void run(struct tt_request *r, int fast, enum tt_think_mode think,
                const char *ct, const char *p, size_t n, size_t step)
{
    struct tt_stream *st;
    size_t off = 0;
    uint64_t now = 1000;

    tt_stream_fast = fast;
    tt_request_init(r);
    r->has_digest = 1;
    st = tt_stream_new(r, TT_API_OPENAI_CHAT, ct, think);
    if (st == NULL)
        abort();
    for (; off < n; off += step, now += 7) {  /* <step> bytes a read */
        if (step > n - off)
            step = n - off;
        tt_stream_feed(st, p + off, step, now);
    }
    tt_stream_end(st, 1, now);
    tt_stream_free(st);
    tt_stream_fast = 1;
}

/* both paths on <p, n>; aborts when the facts differ */
static void both(enum tt_think_mode think, const char *ct, const char *p, size_t n,
                 size_t step)
{
    struct tt_request a, b;

    run(&a, 1, think, ct, p, n, step);
    run(&b, 0, think, ct, p, n, step);
    if (memcmp(&a.s, &b.s, sizeof(a.s)) != 0)
        abort();    /* the stream's facts differ */
    if (a.n_token_ts != b.n_token_ts ||
        (a.n_token_ts > 0 &&
         memcmp(a.token_ts, b.token_ts, a.n_token_ts * sizeof(a.token_ts[0])) != 0))
        abort();    /* the token times differ */
    if (memcmp(a.ts, b.ts, sizeof(a.ts)) != 0 || a.digest != b.digest ||
        a.err_code != b.err_code || (a.err_type == NULL) != (b.err_type == NULL) ||
        (a.err_type != NULL && strcmp(a.err_type, b.err_type) != 0))
        abort();
    tt_request_reset(&a);
    tt_request_reset(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum tt_think_mode think;
    size_t step;
    char *sse;
    size_t n;

    if (size < 1)
        return 0;
    think = (enum tt_think_mode)((data[0] >> 6) % 3);
    step = data[0] & 0x3f;     /* 0: the whole body in one read */
    sse = as_sse(data + 1, size - 1, &n);
    both(think, "text/event-stream", sse, n, step == 0 ? n + 1 : step);
    free(sse);
    /* the bytes as one non-streaming body */
    both(think, "application/json", (const char *)data + 1, size - 1,
         step == 0 ? size : step);
    return 0;
}
