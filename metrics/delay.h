/*
 * The proxy's own delay: tokentap_proxy_delay_seconds{direction}, the time
 * from reading bytes on one side to handing them to the other side's
 * socket (response: upstream read -> client socket; request: client read
 * -> upstream socket), so that a user can see in production what tokentap
 * adds.  One tt_delay per worker, written only by its thread without a
 * lock (relaxed atomics: a plain add on x86-64), read at scrape time by
 * the admin listener through metrics/agg.c.  Fed by proxy/http/conn.c and
 * proxy/http/leg.c.
 */
#ifndef TT_DELAY_H
#define TT_DELAY_H

#include <stdatomic.h>
#include <stdint.h>

struct evbuffer;

enum tt_delay_dir { TT_DELAY_RESPONSE = 0, TT_DELAY_REQUEST, TT_DELAY__COUNT };

#define TT_DELAY_NB 18      /* bounds, see delay.c */

struct tt_delay {
    _Atomic uint64_t b[TT_DELAY__COUNT][TT_DELAY_NB + 1];   /* last: +Inf */
    _Atomic uint64_t sum_ns[TT_DELAY__COUNT];
};

/* one hand-off of bytes read at <read_ns>, handed over at <now_ns> */
void tt_delay_observe(struct tt_delay *d, enum tt_delay_dir dir, uint64_t read_ns,
                      uint64_t now_ns);

/* the histogram family over <n> workers' delays, Prometheus text format */
void tt_delay_expose(struct tt_delay *const *d, unsigned n, struct evbuffer *out);

#endif
