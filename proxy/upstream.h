/*
 * Upstream connections: connecting (TCP, later TLS), the per-worker pool of
 * idle keep-alive connections, and handing a connection to a client
 * connection (proxy/conn.c) and back.
 *
 *   client conn --get--> pool hit? --yes--> on_ready(reused=1)
 *                          \--no--> connect --> on_ready(reused=0) | on_fail
 *   response done, reusable --put--> pool (closed on EOF or when full)
 */
#ifndef TT_UPSTREAM_H
#define TT_UPSTREAM_H

#include <stdint.h>

struct bufferevent;
struct tt_worker;
struct tt_leg;
struct tt_target;

struct tt_upconn {
    struct tt_worker   *w;          /* borrowed */
    const struct tt_target *t;      /* borrowed: where it goes */
    struct bufferevent *bev;        /* owned, closes the socket */
    struct tt_leg      *owner;      /* borrowed while in use, NULL in the pool */
    struct tt_upconn   *next, *prev;/* pool links */
    uint64_t            connected;  /* monotonic ns the connect completed */
    uint64_t            tls_done;   /* monotonic ns the handshake completed */
    unsigned            requests;   /* requests served */
    unsigned            connecting:1;
};

/* the idle connections of one target on one worker (LIFO) */
struct tt_pool {
    struct tt_upconn *idle;
    unsigned          nidle;
};

/*
 * Get a connection to <t> for leg <l>: from the pool (tt_leg_upstream_ready()
 * is called before this returns, reused=1) or a new one (called later, or
 * tt_leg_upstream_failed()).  Returns 0, or -1 when nothing could be
 * started (tt_leg_upstream_failed() was called).
 */
int  tt_upstream_get(struct tt_worker *w, const struct tt_target *t,
                     struct tt_leg *l);
/* the same, always on a new connection (a retry after a stale one) */
int  tt_upstream_new(struct tt_worker *w, const struct tt_target *t,
                     struct tt_leg *l);
/* give a clean, idle connection back to the pool (or close it) */
void tt_upstream_put(struct tt_upconn *u);
/* close and free */
void tt_upstream_close(struct tt_upconn *u);
/* close every pooled connection of every target (drain, shutdown) */
void tt_upstream_close_idle(struct tt_worker *w);

#endif
