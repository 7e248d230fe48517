/*
 * libFuzzer harness for proxy/decode/stream.c (framing, extractors, think filter,
 * JSON arena): the first input byte picks the API, Content-Type and think
 * mode, the second the split; the body is decoded whole and split, and the
 * harness aborts when the facts differ or an invariant breaks.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/request.h"
#include "proxy/decode/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const ctypes[] = {
    "text/event-stream", "application/x-ndjson", "application/json", NULL,
};

static void run(struct tt_request *r, enum tt_api api, const char *ct,
                enum tt_think_mode think, const uint8_t *p, size_t n,
                uint32_t seed, int complete)
{
    struct tt_stream *st;
    size_t off = 0;
    uint64_t now = 1;

    tt_request_init(r);
    st = tt_stream_new(r, api, ct, think);
    if (st == NULL)
        abort();
    while (off < n) {
        size_t k = n - off;
        if (seed != 0) {
            seed = seed * 1103515245u + 12345u;
            k = 1 + ((seed >> 8) % 13);
            if (k > n - off)
                k = n - off;
        }
        tt_stream_feed(st, (const char *)p + off, k, now++);
        off += k;
    }
    tt_stream_end(st, complete, now);
    tt_stream_free(st);
}

static void check(const struct tt_request *r)
{
    const struct tt_stream_stats *s = &r->s;
    uint32_t i;

    if (s->answer_events + s->reasoning_events != s->token_events ||
        s->token_events != r->n_token_ts || s->token_events > s->events)
        abort();
    for (i = 1; i < r->n_token_ts; i++)
        if (r->token_ts[i] < r->token_ts[i - 1])
            abort();
    if (s->token_events > 0 && (r->ts[TT_TS_FIRST_TOKEN] == 0 ||
                                r->ts[TT_TS_LAST_TOKEN] < r->ts[TT_TS_FIRST_TOKEN]))
        abort();
    if (s->answer_events > 0 && r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0)
        abort();
    if (s->answer_events == 0 && r->ts[TT_TS_FIRST_OUTPUT_TOKEN] != 0)
        abort();
    if (memchr(s->finish_reason, 0, sizeof(s->finish_reason)) == NULL ||
        memchr(s->error_type, 0, sizeof(s->error_type)) == NULL ||
        memchr(s->error_message, 0, sizeof(s->error_message)) == NULL ||
        memchr(s->model, 0, sizeof(s->model)) == NULL)
        abort();
    if (s->error && r->err_type == NULL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tt_request a, b;
    enum tt_api api;
    enum tt_think_mode think;
    const char *ct;
    uint32_t seed;
    int complete;

    if (size < 2)
        return 0;
    api = (enum tt_api)(data[0] % TT_API__COUNT);
    ct = ctypes[(data[0] >> 3) & 3];
    think = (enum tt_think_mode)((data[0] >> 5) % 3);
    complete = (data[0] >> 7) & 1;
    seed = (uint32_t)data[1] | 1u;
    data += 2;
    size -= 2;

    run(&a, api, ct, think, data, size, 0, complete);
    run(&b, api, ct, think, data, size, seed, complete);
    check(&a);
    check(&b);
    if (memcmp(&a.s, &b.s, sizeof(a.s)) != 0 || a.n_token_ts != b.n_token_ts ||
        (a.err_type == NULL) != (b.err_type == NULL))
        abort();    /* a split changed the facts */
    tt_request_reset(&a);
    tt_request_reset(&b);
    return 0;
}
