/*
 * Legs: one request's exchange with one upstream target.  A leg owns the
 * upstream connection while it is in use, the response parser, the stream
 * decoder and its request record; the primary and every shadow use the
 * same code.  The client connection (proxy/conn.c) owns its legs: the
 * primary leg is part of it and its response goes to the client; a shadow
 * leg is allocated per mirrored request, gets a bounded copy of the
 * request bytes, and its response is decoded, timed and dropped.
 *
 *                       +--> primary leg --> upstream --> response --> client (stage)
 *   client request -----+
 *     (conn.c)          +--> shadow leg(s) --> candidate --> response --> decoder only
 *
 * A shadow leg outlives the client's request when it is slower: it stays
 * on its worker's list until its response ends, then writes its record
 * (upstream = the shadow's name, role = shadow) and frees itself.
 *
 * Response state: CONNECTING -> WAIT_HEAD -> BODY -> DONE, or -> TUNNEL
 * (primary only: 101 Switching Protocols).
 */
#ifndef TT_LEG_H
#define TT_LEG_H

#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "metrics/request.h"
#include "proxy/chunks.h"
#include "proxy/httphead.h"
#include "proxy/target.h"

struct tt_worker;
struct tt_conn;
struct tt_upconn;
struct tt_stream;
struct tt_usagewire_out;
struct evbuffer;
struct event;

enum tt_leg_state { LEG_IDLE, LEG_CONNECTING, LEG_WAIT_HEAD, LEG_BODY,
                    LEG_DONE, LEG_TUNNEL };

/* body parts of one direct read decoded from the read buffer itself */
#define TT_LEG_SPANS 16

struct tt_leg {
    struct tt_worker       *w;      /* borrowed */
    const struct tt_target *t;      /* borrowed: where it goes */
    struct tt_conn         *c;      /* borrowed: the client connection; a shadow's
                                     * is NULL once the client is gone */
    struct tt_leg          *cnext, *cprev;  /* shadows: the connection's list */
    struct tt_leg          *wnext, *wprev;  /* shadows: the worker's list */
    struct tt_upconn       *up;     /* owned while set */
    struct event           *timer;  /* owned: connect, then response head deadline */
    struct evbuffer        *out;    /* owned: request bytes until connected */
    struct evbuffer        *replay; /* owned: what was sent on a reused connection,
                                     * until its first response byte (retry) */
    struct tt_request      *req;    /* primary: the connection's; shadow: &own */
    struct tt_request       own;
    struct tt_stream       *stream; /* owned, per response */
    char                   *side;   /* owned: de-chunked body of the current read */
    struct tt_usagewire_out *inj;   /* primary, owned: --inject-usage's filtered
                                     * client stream (proxy/usagewire.h), or NULL */
    size_t                  side_len, side_cap;
    struct { const char *p; size_t n; } span[TT_LEG_SPANS];
    unsigned                nspan;  /* in-place body parts of this read, before side */
    llhttp_t                rsp;
    struct tt_chunks        chunks; /* rsp's chunk boundaries (proxy/chunks.h) */
    struct tt_head          rsh;
    enum tt_leg_state       st;
    uint64_t                now;    /* stamp of the callback being handled */
    uint64_t                queued_since;   /* primary: client read stamp of the oldest
                                     * request bytes in the upstream output, 0 none */
    unsigned                seq;    /* the connection's request number */

    unsigned shadow:1;
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
    unsigned got_bytes:1;           /* a response byte arrived on this connection */
    unsigned up_eof:1;              /* the upstream closed with body bytes still in
                                     * its input (waiting for the client) */
    unsigned retried:1;             /* already resent once on a fresh connection */
};

/* set up the primary leg of a client connection; 0 or -1 */
int  tt_leg_init(struct tt_leg *l, struct tt_worker *w, const struct tt_target *t,
                 struct tt_conn *c, struct tt_request *req);
/* free what tt_leg_init() set up (the primary leg) */
void tt_leg_fini(struct tt_leg *l);
/* a new shadow leg to <t> for the request <c> is starting (its request
 * fields so far copied from <r>), on the connection's and worker's lists */
struct tt_leg *tt_leg_new_shadow(struct tt_conn *c, struct tt_worker *w,
                                 const struct tt_target *t,
                                 const struct tt_request *r, unsigned seq);

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
 * output.  Called after request bytes were added (proxy/conn.c).
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

/* called by proxy/upstream.c */
void tt_leg_upstream_pending(struct tt_leg *l, struct tt_upconn *u);
void tt_leg_upstream_ready(struct tt_leg *l, struct tt_upconn *u, int reused);
void tt_leg_upstream_failed(struct tt_leg *l, int status, const char *type,
                            const char *msg);

#endif
