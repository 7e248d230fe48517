/*
 * Upstream connections: connecting (TCP, later TLS), the per-worker pool of
 * idle keep-alive connections, and handing a connection to its user (a
 * leg, proxy/http/leg.c) and back.  The pool knows its users only by the
 * callbacks they register (struct tt_upstream_cbs).
 *
 *   user --get--> pool hit? --yes--> ready(reused=1)
 *                   \--no--> connect (pending) --> ready(reused=0) | failed
 *   response done, reusable --put--> pool (closed on EOF or when full)
 */
#ifndef TT_UPSTREAM_H
#define TT_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

struct bufferevent;
struct event;
struct tt_worker;
struct tt_target;
struct tt_upconn;

/* how the pool reports to the user of a connection (its <arg>) */
struct tt_upstream_cbs {
    /* a new connection is on its way (<u>), or was given up (NULL): the
     * user may close it in the meantime with tt_upstream_close() */
    void (*pending)(void *arg, struct tt_upconn *u);
    /* <u> is the user's now (reused: from the pool) */
    void (*ready)(void *arg, struct tt_upconn *u, int reused);
    /* no connection: <type> is a static string */
    void (*failed)(void *arg, int status, const char *type, const char *msg);
};

struct tt_upconn {
    struct tt_worker   *w;          /* borrowed */
    const struct tt_target *t;      /* borrowed: where it goes */
    struct bufferevent *bev;        /* owned, closes the socket */
    const struct tt_upstream_cbs *cbs;  /* the user's, until ready() */
    void               *owner;      /* the user's arg while in use, NULL in the pool */
    struct tt_upconn   *next, *prev;/* pool links */
    uint64_t            connected;  /* monotonic ns the connect completed */
    uint64_t            tls_done;   /* monotonic ns the handshake completed */
    unsigned            requests;   /* requests served */
    unsigned            connecting:1;

    /* direct reads (tt_upstream_read_direct): plain TCP, every leg */
    struct event       *rev;        /* owned, or NULL: the socket's read event */
    struct event       *idle_ev;    /* owned, or NULL: the idle deadline */
    struct event       *rate_ev;    /* owned, or NULL: the end of a rate wait */
    uint64_t            last_read;  /* monotonic ns of the last read */
    uint64_t            tick;       /* the rate tick the bucket was filled in */
    size_t              high;       /* no reads while the input holds this much */
    size_t              rate;       /* bytes a rate tick, 0: no limit */
    size_t              bucket;     /* bytes that may be read now (rate) */
    unsigned            idle_ms;    /* 0: no idle deadline */
    /* given each read first while the input is empty; 1: it took all
     * the bytes (and may have closed <u>), 0: append them as usual */
    int               (*on_bytes)(void *arg, const char *buf, size_t n);
    void               *on_arg;
    unsigned            direct:1, suspended:1;
    unsigned            throttled:1;    /* no reads until rate_ev: bucket empty */
};

/*
 * Get a connection to <t> for the user <arg>: from the pool (cbs->ready()
 * is called before this returns, reused=1) or a new one (cbs->pending(),
 * then later ready() or failed()).  Returns 0, or -1 when nothing could
 * be started (cbs->failed() was called).
 */
int  tt_upstream_get(struct tt_worker *w, const struct tt_target *t,
                     const struct tt_upstream_cbs *cbs, void *arg);
/* the same, always on a new connection (a retry after a stale one) */
int  tt_upstream_new(struct tt_worker *w, const struct tt_target *t,
                     const struct tt_upstream_cbs *cbs, void *arg);
/* give a clean, idle connection back to the pool (or close it) */
void tt_upstream_put(struct tt_upconn *u);
/* close and free */
void tt_upstream_close(struct tt_upconn *u);
/* close every pooled connection of every target (drain, shutdown) */
void tt_upstream_close_idle(struct tt_worker *w);

/*
 * Direct reads.  libevent's bufferevent asks the kernel how much is
 * readable (ioctl FIONREAD) before every read and re-arms the read
 * timeout (a timer-heap update) after it: two costs per streamed event
 * that a plain TCP upstream does not need.  A connection switched to
 * direct reads is read by its own event: one recv() into the worker's
 * scratch buffer, appended to the bufferevent's input, then the
 * bufferevent's read callback, exactly as libevent would call it; EOF, a
 * socket error and the idle deadline reach its event callback as
 * BEV_EVENT_READING | EOF / ERROR / TIMEOUT.  The idle deadline is lazy:
 * a read only stores its stamp, and the timer, when it fires, re-arms
 * itself for what is left.  Writes stay with the bufferevent.
 *
 * tt_upstream_read_direct(): switch <u> (returns 0), or -1 for a TLS
 * connection, which keeps the bufferevent's reads; <high> is the read
 * watermark: no reads while the input holds that much, until
 * tt_upstream_read_resume() finds it drained below.  <rate> (0: none)
 * limits the reads to that many bytes a TT_RATE_TICK_NS tick, in bursts
 * of at most two ticks' worth, as libevent's token bucket does for a
 * rate-limited bufferevent (a shadow's, proxy/http/target.c): a read
 * takes at most what the bucket holds, and an empty bucket stops the
 * reads until the next tick; until the connection is pooled (no limit
 * there).  The events of direct reads run at the bufferevent's priority.
 * tt_upstream_idle(): the read idle deadline, either way (0 = none).
 */
#define TT_RATE_TICK_NS 10000000ull
#define TT_RATE_TICK_TV { 0, (suseconds_t)(TT_RATE_TICK_NS / 1000u) }
int  tt_upstream_read_direct(struct tt_upconn *u, size_t high, size_t rate);
void tt_upstream_read_resume(struct tt_upconn *u);
void tt_upstream_idle(struct tt_upconn *u, unsigned ms);

#endif
