/*
 * The proxy's own delay (see delay.h).
 */
#include "metrics/delay.h"

#include <stdio.h>

#include <event2/buffer.h>

/* 1 us .. 1 s: loopback hand-offs are microseconds; a stalled loop shows */
static const double bounds[TT_DELAY_NB] = {
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4,
    1e-3, 2e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1.0,
};
static const uint64_t bounds_ns[TT_DELAY_NB] = {
    1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000,
    1000000, 2000000, 5000000, 10000000, 25000000, 50000000, 100000000,
    250000000, 1000000000,
};
/* the first bucket a value of bit length L (2^(L-1) <= v < 2^L) can fall
 * in: neighbouring bounds are at most 2.5 apart, so one comparison more
 * at most finds its bucket (tests/unit/test_delay.c checks the table) */
static const unsigned char first_bucket[65] = {
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  1,  2,  2,  3,  4,
     5,  6,  7,  8,  9, 10, 11, 11, 12, 13, 14, 15, 16, 17, 17, 18,
    18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18,
    18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18,
    18,
};
static const char *const dir_names[TT_DELAY__COUNT] = { "response", "request" };

static void bump(_Atomic uint64_t *x, uint64_t v)
{
    /* one writer (the worker's thread): no read-modify-write needed */
    atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

void tt_delay_observe(struct tt_delay *d, enum tt_delay_dir dir, uint64_t read_ns,
                      uint64_t now_ns)
{
    uint64_t v = now_ns > read_ns ? now_ns - read_ns : 0;
    unsigned i;

    if (d == NULL || read_ns == 0)
        return;
    i = first_bucket[v == 0 ? 0 : 64 - __builtin_clzll(v)];
    while (i < TT_DELAY_NB && v > bounds_ns[i])
        i++;
    bump(&d->b[dir][i], 1);
    bump(&d->sum_ns[dir], v);
}

void tt_delay_expose(struct tt_delay *const *d, unsigned n, struct evbuffer *out)
{
    evbuffer_add_printf(out, "# HELP tokentap_proxy_delay_seconds Time from reading bytes "
                        "on one side to handing them to the other side's socket "
                        "(tokentap's own added delay).\n"
                        "# TYPE tokentap_proxy_delay_seconds histogram\n");
    for (int dir = 0; dir < TT_DELAY__COUNT; dir++) {
        uint64_t cum = 0, sum = 0;
        for (unsigned i = 0; i <= TT_DELAY_NB; i++) {
            for (unsigned k = 0; k < n; k++)
                cum += atomic_load_explicit(&d[k]->b[dir][i], memory_order_relaxed);
            if (i < TT_DELAY_NB)
                evbuffer_add_printf(out, "tokentap_proxy_delay_seconds_bucket{direction=\"%s\","
                                    "le=\"%g\"} %llu\n", dir_names[dir], bounds[i],
                                    (unsigned long long)cum);
            else
                evbuffer_add_printf(out, "tokentap_proxy_delay_seconds_bucket{direction=\"%s\","
                                    "le=\"+Inf\"} %llu\n", dir_names[dir],
                                    (unsigned long long)cum);
        }
        for (unsigned k = 0; k < n; k++)
            sum += atomic_load_explicit(&d[k]->sum_ns[dir], memory_order_relaxed);
        evbuffer_add_printf(out, "tokentap_proxy_delay_seconds_sum{direction=\"%s\"} %.9f\n",
                            dir_names[dir], (double)sum / 1e9);
        evbuffer_add_printf(out, "tokentap_proxy_delay_seconds_count{direction=\"%s\"} %llu\n",
                            dir_names[dir], (unsigned long long)cum);
    }
}
