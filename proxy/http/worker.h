/*
 * A worker: one thread, one event loop, its own listener (SO_REUSEPORT),
 * its client connections, shadow legs and upstream connection pools.
 * Shared, read-only after start: the configuration and the targets.
 * Shared, thread-safe: the aggregates and the record writers.  Owned and
 * set up by proxy/server/server.c (the top floor); conn.c, leg.c and upstream.c
 * reach their worker through the pointer each of them keeps, and report
 * to it through the bookkeeping below (proxy/http/worker.c), which calls
 * nothing of theirs: a finished request goes up through <report>.
 *
 *   server.c --> conn.c --> leg.c --> upstream.c
 *        \          \---------\----------\--> worker.c (this file's functions)
 */
#ifndef TT_WORKER_H
#define TT_WORKER_H

#include <stdint.h>
#include <pthread.h>

#include "metrics/delay.h"
#include "proxy/config/config.h"
#include "proxy/http/target.h"
#include "proxy/base/url.h"

struct event_base;
struct evdns_base;
struct evconnlistener;
struct event;
struct tt_conn;
struct tt_upconn;
struct tt_request;
struct tt_server;
struct tt_pairs;
struct tt_tls_ctx;
struct tt_listen_guard;
struct tt_linger;

/* the idle connections of one target on one worker (LIFO, proxy/http/upstream.c) */
struct tt_pool {
    struct tt_upconn *idle;
    unsigned          nidle;
};

/* event priorities of a worker's loop: shadows below everything else */
#define TT_PRIO_COUNT  3
#define TT_PRIO_SHADOW 2

/* the most one direct upstream read takes (proxy/http/upstream.c) */
#define TT_READ_BYTES (64 * 1024)

struct tt_worker {
    int                    id;
    struct tt_server      *srv;        /* borrowed: the process */
    const struct tt_config *cfg;       /* borrowed, read-only */
    const struct tt_url   *up;         /* borrowed: the primary upstream */
    struct tt_target      *targets;    /* borrowed: 0 primary, then shadows (their
                                        * inflight counts are shared, atomic) */
    unsigned               ntargets;
    struct tt_pairs       *pairs;      /* borrowed: shadow comparisons, or NULL */
    struct tt_tls_ctx     *tls;        /* borrowed: the TLS contexts (tls/tls.h), or NULL */
    /* what becomes of a finished request: metrics, SLO, aggregates,
     * records (set by proxy/server/server.c) */
    void                 (*report)(struct tt_worker *w, struct tt_request *r);
    struct event_base     *base;       /* owned */
    struct evdns_base     *dns;        /* owned */
    struct evconnlistener *listener;   /* owned */
    struct tt_listen_guard *lguard;    /* owned: EMFILE pause of <listener> */
    struct tt_linger      *linger;     /* owned: closes that wait for the client (linger.h) */
    pthread_t              thread;
    struct tt_agg         *agg;        /* borrowed: the process's aggregates */
    struct tt_delay        delay;      /* tokentap's own hand-off delay */
    unsigned               inflight;   /* requests in progress */

    /* client connections, for draining; owned */
    struct tt_conn        *conns;
    unsigned               nconns;
    /* closed connections kept for the next accepts (proxy/http/conn.c); owned */
    struct tt_conn        *conn_pool;
    unsigned               nconn_pool;
    /* idle pooled upstream connections, one pool per target; owned */
    struct tt_pool         pools[TT_MAX_TARGETS];
    /* shadow legs running (linked through tt_leg.wnext); owned */
    struct tt_leg         *legs;
    unsigned               nlegs;

    unsigned               draining:1;
    int                    wake_fd;    /* owned: eventfd, written to ask for a drain */
    struct event          *drain_ev;   /* reads <wake_fd> on the loop's thread */
    struct event          *grace_ev;   /* drain deadline */

    /* direct upstream reads land here before their bufferevent's input */
    unsigned char          rbuf[TT_READ_BYTES];
};

/* a request started (its first byte arrived) */
void tt_worker_request_start(struct tt_worker *w);
/* a request finished: no longer in flight, then reported (w->report) */
void tt_worker_request_done(struct tt_worker *w, struct tt_request *r);
/* a connection (or shadow leg) was closed; exits the loop when draining
 * and none is left */
void tt_worker_conn_gone(struct tt_worker *w);

#endif
