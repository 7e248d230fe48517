/*
 * Legs: one request's exchange with one upstream target.  A leg owns the
 * upstream connection while it is in use, the response parser, the stream
 * decoder and its request record; the primary and every shadow use the
 * same code.  A leg knows nothing of client connections: its response
 * goes to its sink (struct tt_leg_sink below, nginx's input filter and
 * finalize, h2o's on_head/on_body).  The client connection (proxy/http/conn.c)
 * is the primary's sink and owns it; a shadow's sink (leg.c) decodes,
 * times and drops its response, and the shadow leg owns itself.
 *
 *                       +--> primary leg --> upstream --> response --> sink: the client (conn.c)
 *   client request -----+
 *     (conn.c)          +--> shadow leg(s) --> candidate --> response --> sink: dropped (leg.c)
 *
 * A shadow leg is allocated per mirrored request and gets a bounded copy
 * of the request bytes.  It outlives the client's request when it is
 * slower: it stays on its worker's list until its response ends, then
 * writes its record (upstream = the shadow's name, role = shadow) and
 * frees itself.
 *
 * Upstream connections come from the pool (proxy/http/upstream.h), which
 * reports through the leg's callbacks (ready, pending, failed).
 */
#ifndef TT_LEG_H
#define TT_LEG_H

#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "metrics/request.h"
#include "proxy/decode/chunks.h"
#include "proxy/http/httphead.h"
#include "proxy/http/target.h"

struct tt_worker;
struct tt_upconn;
struct tt_stream;
struct tt_usagewire_out;
struct evbuffer;
struct event;

/*
 * The response's state; leg_set_state() (leg.c) is the only writer.
 *
 *   IDLE -> CONNECTING -> WAIT_HEAD -> BODY -> DONE
 *                                  \-> TUNNEL (101 Switching Protocols)
 */
enum tt_leg_state {
    LEG_IDLE,           /* no request: up NULL, timer idle */
    LEG_CONNECTING,     /* waiting for the pool: request bytes gather in out,
                         * timer = connect_timeout (up may be a pending connect) */
    LEG_WAIT_HEAD,      /* up is ours, the request is going out; the parser waits
                         * for the head, timer = response_timeout (1xx heads pass) */
    LEG_BODY,           /* the head went to the sink; body bytes move to it
                         * as it takes them; up has the idle deadline */
    LEG_DONE,           /* the response ended or failed: up NULL (pooled or closed) */
    LEG_TUNNEL          /* 101: bytes move both ways until either side closes */
};

/* its name, for logs */
const char *tt_leg_state_name(enum tt_leg_state s);

/* how the sink's head() wants the body handed over */
#define TT_SINK_DECHUNK 1   /* de-chunked (an HTTP/1.0 client): from the parser */
#define TT_SINK_MARKS   2   /* delivery measured: writes may end marks (mark()) */

struct tt_usagewire_out;

/*
 * Where a leg's response goes.  Every call gets the sink's <arg>; the
 * leg's stamp of the callback being handled is l->now.  The sink may
 * free the leg's owner (and so the primary leg) in end(), fail() and
 * tunnel_closed() only.
 */
struct tt_leg_sink {
    /* the response head: its version for the sink (the stage); returns
     * -1 when the request was failed, else TT_SINK_* bits; <*inj> may be
     * set to --inject-usage's body filter (the leg owns it then) */
    int  (*head)(void *arg, const struct tt_head *rsh, int status, int chunked,
                 int is_head, struct tt_usagewire_out **inj);
    /* room for a read of body bytes: -1 none (wait for resume), 0 nothing
     * queued, 1 some queued */
    int  (*room)(void *arg);
    /* <n> body bytes from a buffer the leg keeps, <room> what room() said:
     * 0 taken, -1 behind (nothing taken: use the stage) */
    int  (*body)(void *arg, const char *buf, size_t n, int room);
    /* backpressure: the leg reads no body while this says 1 */
    int  (*full)(void *arg);
    /* hand what the stage holds over */
    void (*flush)(void *arg);
    /* the next flush ends delivery marks <marks> (TT_DM_BIT) */
    void (*mark)(void *arg, unsigned marks);
    /* the response is complete / failed (<type> a static string) */
    void (*end)(void *arg);
    void (*fail)(void *arg, int status, const char *type, const char *msg);
    /* the upstream connection is ready / took what was queued */
    void (*ready)(void *arg);
    void (*drained)(void *arg);
    /* the response ends with the upstream connection (close-delimited) */
    void (*close_delimited)(void *arg);
    /* tunnels: the upstream's bytes (all of <in>), the upstream closed */
    void (*tunnel)(void *arg, struct evbuffer *in);
    void (*tunnel_closed)(void *arg);
};

/* body parts of one direct read decoded from the read buffer itself */
#define TT_LEG_SPANS 16

struct tt_leg {
    struct tt_worker       *w;      /* borrowed */
    const struct tt_target *t;      /* borrowed: where it goes */
    const struct tt_leg_sink *sink; /* where the response goes */
    void                   *sink_arg;
    struct evbuffer        *stage;  /* borrowed: the sink's buffer for response
                                     * bytes, NULL: they are dropped (shadows) */
    struct tt_leg         **chead;  /* shadows: the client connection's list, NULL
                                     * once the client is gone */
    struct tt_leg          *cnext, *cprev;  /* shadows: that list */
    struct tt_leg          *wnext, *wprev;  /* shadows: the worker's list */
    struct tt_upconn       *up;     /* owned while set */
    struct event           *timer;  /* owned: connect, then response head deadline */
    struct evbuffer        *out;    /* owned: request bytes until connected */
    struct evbuffer        *replay; /* owned: what was sent on a reused connection,
                                     * until its first response byte (retry) */
    struct tt_request      *req;    /* primary: the connection's; shadow: the one
                                     * allocated with it (leg.c, struct shadow_leg) */
    struct tt_stream       *stream; /* owned, per response */
    char                   *side;   /* owned: de-chunked body of the current read */
    struct tt_usagewire_out *inj;   /* primary, owned: --inject-usage's filtered
                                     * client stream (proxy/http/usagewire.h), or NULL */
    size_t                  side_len, side_cap;
    struct { const char *p; size_t n; } span[TT_LEG_SPANS];
    unsigned                nspan;  /* in-place body parts of this read, before side */
    llhttp_t                rsp;
    struct tt_chunks        chunks; /* rsp's chunk boundaries (proxy/decode/chunks.h) */
    struct tt_head          rsh;
    enum tt_leg_state       st;
    uint64_t                now;    /* stamp of the callback being handled */
    uint64_t                queued_since;   /* primary: client read stamp of the oldest
                                     * request bytes in the upstream output, 0 none */
    unsigned                seq;    /* the connection's request number */

    unsigned shadow:1;              /* the role: see "roles" in leg.c */
    unsigned in_place:1;            /* parsing the worker's read buffer (leg_bytes) */
    unsigned marks:1;               /* primary, delivery measured: this response's
                                     * writes may end delivery marks (read_marks) */
    unsigned marks_tok:1;           /* and its first (output) token is still to come */
    unsigned is_head:1;             /* HEAD request: the response has no body */
    unsigned dechunk:1;             /* primary: de-chunk for an HTTP/1.0 client */
    unsigned sent_all:1;            /* every request byte is queued for it */
    unsigned head_done:1, msg_done:1, interim:1;
    unsigned over:1;                /* shadow: response ended, failed or dropped */
    unsigned counted:1;             /* shadow: holds a slot of t->inflight */
    unsigned full:1;                /* shadow: that slot was over max_inflight */
    unsigned got_bytes:1;           /* a response byte arrived on this connection */
    unsigned up_eof:1;              /* the upstream closed with body bytes still in
                                     * its input (waiting for the client) */
    unsigned retried:1;             /* already resent once on a fresh connection */
};

/* set up the primary leg of a client connection, whose response goes to
 * <sink> (<arg>, bytes staged in <stage>); <l> is zeroed, or parked (its
 * timer and output buffer are kept); 0 or -1 */
int  tt_leg_init(struct tt_leg *l, struct tt_worker *w, const struct tt_target *t,
                 const struct tt_leg_sink *sink, void *arg, struct evbuffer *stage,
                 struct tt_request *req);
/* free what tt_leg_init() set up (the primary leg) */
void tt_leg_fini(struct tt_leg *l);
/* the same, but the timer (stopped) and the output buffer (emptied) stay
 * for the next tt_leg_init() of <l>: a pooled connection's (conn.c) */
void tt_leg_park(struct tt_leg *l);
/* the primary's next request: the response side back to LEG_IDLE */
void tt_leg_reset(struct tt_leg *l);
/* an idle keep-alive connection: the response buffers go back */
void tt_leg_idle(struct tt_leg *l);
/* the request was answered by tokentap: the upstream is closed, LEG_DONE */
void tt_leg_cut(struct tt_leg *l);
/* the request is recorded: its stream decoder ends (cut short when the
 * response did not complete) and is freed */
void tt_leg_stream_done(struct tt_leg *l, uint64_t now);

/*
 * A new shadow leg to <t> for the request (its request fields so far
 * copied from <r>), number <seq> of its connection, on the connection's
 * list <*chead> and the worker's; it joins <pair> and takes a slot of
 * t->inflight.  tt_leg_shadow_start() sends it, or drops it at once (over
 * max_inflight, <draining>, out of memory) so that the drop has a record.
 */
struct tt_leg *tt_leg_new_shadow(struct tt_leg **chead, struct tt_worker *w,
                                 struct tt_target *t, const struct tt_request *r,
                                 unsigned seq, struct tt_pair *pair);
void tt_leg_shadow_start(struct tt_leg *l, const struct tt_head *rqh,
                         const char *method, const char *add_id,
                         long long body_len, int draining);

/*
 * Write the head the leg's upstream gets into l->out: the request line
 * with the target's base path, Host = its authority, the client's fields
 * less hop-by-hop ones (and, for a shadow, its removed and replaced
 * headers), X-Request-Id when <add_id>.  With <body_len> >= 0 the body
 * is framed anew: the client's Content-Length / Transfer-Encoding are
 * replaced by Content-Length: <body_len> (--inject-usage's rewrite).
 * Returns 0 or -1.
 */
int  tt_leg_head(struct tt_leg *l, const struct tt_head *rqh, const char *method,
                 int upgrade, const char *add_id, long long body_len);

/* connect (or take a pooled connection) and send what is in l->out;
 * returns 0, or -1 when the leg failed at once (a shadow is then over) */
int  tt_leg_start(struct tt_leg *l);

/*
 * Send the first <n> bytes of <in> (request body bytes) to the leg's
 * upstream.  The primary takes them (moved out of <in>); a shadow gets a
 * copy, and when it holds more than its buffer_bytes the copy is
 * abandoned (counted as buffer_full).  Shadows are sent to first, so the
 * bytes are still in <in> for them.
 */
void tt_leg_send(struct tt_leg *l, struct evbuffer *in, size_t n);

/* the client's request is complete: copy what it told of itself (model,
 * stream ...) from <r> into a shadow's record; stamp "request sent" */
void tt_leg_request_done(struct tt_leg *l, const struct tt_request *r);

/* where the primary's request bytes go (the upstream connection's output) */
struct evbuffer *tt_leg_output(struct tt_leg *l);

/*
 * The primary on a plain connection: write what its output holds to the
 * socket now, rather than after the loop reports the socket writable
 * (two epoll_ctl and a wake-up per request saved); what the socket does
 * not take is left to the bufferevent.  Returns 1 when this emptied the
 * output.  Called after request bytes were added (proxy/http/conn.c).
 */
int  tt_leg_push(struct tt_leg *l);

/* run the response side again (the client made room) */
void tt_leg_process(struct tt_leg *l);

/* close the upstream connection and the leg's timer */
void tt_leg_close(struct tt_leg *l);

/*
 * Shadows, when their client connection goes: with <cancel> the shadow's
 * request is cancelled (recorded as such), else it runs to its end alone.
 * A shadow that has not had the whole request is always cancelled.
 */
void tt_leg_release(struct tt_leg *l, int cancel, const char *why);

/* shadows: abandon it now (shutdown), recording it as dropped */
void tt_leg_abort(struct tt_leg *l);
/* shadows: abandon its copy for <why> (counted, recorded as shadow_dropped) */
void tt_leg_drop(struct tt_leg *l, enum tt_drop why);

#endif
