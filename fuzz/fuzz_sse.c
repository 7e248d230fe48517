/*
 * libFuzzer harness for proxy/decode/sse.c and proxy/decode/ndjson.c: decodes the input
 * whole and in pieces chosen by its first bytes, and aborts when the two
 * disagree (split invariance) or a bound is broken.  Build: make fuzz.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/decode/ndjson.h"
#include "proxy/decode/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENT 512

struct digest {
    uint64_t h;
    uint64_t n;
};

static void mix(struct digest *d, const char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        d->h = (d->h ^ (uint8_t)p[i]) * 1099511628211ull;
    d->h = (d->h ^ 0xff) * 1099511628211ull;
}

static void on_ev(void *ctx, const struct tt_sse_event *ev)
{
    struct digest *d = ctx;
    if (ev->data_len > MAX_EVENT || memchr(ev->data, '\r', ev->data_len) != NULL ||
        ev->name[ev->name_len] != '\0' || ev->name_len > TT_SSE_EVENT_NAME_MAX)
        abort();
    mix(d, ev->name, ev->name_len);
    mix(d, ev->data, ev->data_len);
    d->n++;
}

static void on_line(void *ctx, const char *line, size_t len)
{
    struct digest *d = ctx;
    if (len > MAX_EVENT || memchr(line, '\n', len) != NULL)
        abort();
    mix(d, line, len);
    d->n++;
}

static void run(const uint8_t *p, size_t n, uint32_t seed, int flush,
                struct digest *sd, struct digest *nd, uint32_t *over)
{
    struct tt_sse s;
    struct tt_ndjson j;
    size_t off = 0;

    tt_sse_init(&s, MAX_EVENT);
    tt_ndjson_init(&j, MAX_EVENT);
    while (off < n) {
        size_t k = n - off;
        if (seed != 0) {
            seed = seed * 1103515245u + 12345u;
            k = 1 + ((seed >> 8) % 9);
            if (k > n - off)
                k = n - off;
        }
        tt_sse_feed(&s, (const char *)p + off, k, on_ev, sd);
        tt_ndjson_feed(&j, (const char *)p + off, k, on_line, nd);
        off += k;
    }
    tt_sse_finish(&s, flush, on_ev, sd);
    tt_ndjson_finish(&j, flush, on_line, nd);
    over[0] = s.oversize;
    over[1] = j.oversize;
    if (s.line_cap > 2 * MAX_EVENT + 256 || s.data_cap > 2 * MAX_EVENT + 256 ||
        j.line_cap > 2 * MAX_EVENT + 256)
        abort();    /* memory bound */
    tt_sse_free(&s);
    tt_ndjson_free(&j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct digest a[2], b[2];
    uint32_t oa[2], ob[2], seed;
    int flush;

    if (size < 2)
        return 0;
    seed = (uint32_t)data[0] | 1u;
    flush = data[1] & 1;
    data += 2;
    size -= 2;
    memset(a, 0, sizeof(a));
    memset(b, 0, sizeof(b));
    run(data, size, 0, flush, &a[0], &a[1], oa);
    run(data, size, seed, flush, &b[0], &b[1], ob);
    if (memcmp(a, b, sizeof(a)) != 0 || memcmp(oa, ob, sizeof(oa)) != 0)
        abort();    /* a split changed the events */
    return 0;
}
