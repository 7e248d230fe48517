/*
 * Delivery: what the client's TCP acknowledged, and when (SPEC section 12).
 *
 * One per client connection (embedded in struct tt_conn, proxy/http/conn.c).
 * On Linux the client socket reports kernel TX timestamps
 * (SO_TIMESTAMPING: OPT_ID, OPT_TSONLY, software stamps); recording
 * (SOF_TIMESTAMPING_TX_ACK) is switched on only around the writes that
 * end a mark (the first token event, the first output token event, the
 * response), so a request costs a handful of system calls, not one per
 * event.  The kernel numbers stamps by the socket's byte count, so a mark
 * is the number of bytes written to the socket once its last byte is in:
 * for TLS the end of the record that carries it, read at the moment the
 * TLS layer has written everything handed to it (tt_delivery_drained).
 *
 * A second descriptor of the same socket is watched edge-triggered
 * (EV_READ | EV_CLOSED | EV_ET) for the error queue and for the peer's
 * close or reset while the connection is not reading; its callback is the
 * connection's (tt_delivery_init's <cb>).
 *
 * Elsewhere (not Linux) and with --delivery off every call is a no-op and
 * the request's delivery fields stay absent.
 */
#ifndef TT_DELIVERY_H
#define TT_DELIVERY_H

#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>
#include <event2/util.h>

struct event_base;
struct event;
struct tt_request;

enum tt_dmark {
    TT_DM_FIRST_TOKEN = 0,
    TT_DM_FIRST_OUTPUT_TOKEN,
    TT_DM_RESPONSE,
    TT_DM__COUNT
};
#define TT_DM_BIT(k) (1u << (k))

struct tt_delivery {
    evutil_socket_t fd;         /* the client socket: borrowed */
    evutil_socket_t wfd;        /* its duplicate for <watch>: owned, -1 none */
    struct event_base *evbase;  /* borrowed: the worker's loop */
    struct event   *watch;      /* owned, NULL none */
    struct event   *spare;      /* owned: a parked watch's event, for the next, or NULL */
    event_callback_fn cb;       /* the connection's watch callback */
    void           *arg;
    unsigned on:1;              /* stamps set up on this socket */
    unsigned tls:1;             /* bytes written are TLS records */
    unsigned armed:1;           /* TX_ACK recording is on */
    unsigned asked:1;           /* a write since the marks asked for its stamp */
    unsigned unmapped;          /* marks whose socket end awaits a drain (TT_DM_BIT) */
    uint64_t want[TT_DM__COUNT];    /* socket bytes that end the mark, 0 = none */
    uint64_t acked[TT_DM__COUNT];   /* CLOCK_MONOTONIC ns of the ack, 0 = none */
    /* the request's share of the socket's byte stream */
    uint64_t base;              /* socket bytes written before this response */
    uint64_t prev_end;          /* socket bytes at the end of the previous request */
    uint32_t prev_retrans;      /* connection's retransmits then */
    unsigned have_prev:1;
};

/* set up <d> for the socket <fd>; <on> = 0 leaves it off (a no-op).
 * <d> is zeroed, or parked (tt_delivery_park) */
void tt_delivery_init(struct tt_delivery *d, struct event_base *base,
                      evutil_socket_t fd, int tls, int on,
                      event_callback_fn cb, void *arg);
void tt_delivery_fini(struct tt_delivery *d);
/* the same, but the watch's event stays allocated for the next
 * tt_delivery_init() of <d> (a pooled connection's) */
void tt_delivery_park(struct tt_delivery *d);

/* is delivery measured on this connection? */
static inline int tt_delivery_on(const struct tt_delivery *d)
{
    return d->on;
}

/* a new request: forget the last one's marks, note where its bytes start */
void tt_delivery_begin(struct tt_delivery *d);

/*
 * A write ends marks.  On a plain socket written at once it asks for its
 * stamp itself: tt_delivery_sendv() (writev() with the request attached,
 * no option switched).  Otherwise (TLS, bytes queued behind others)
 * tt_delivery_arm() switches recording on for the socket's writes until
 * tt_delivery_drained().  After the write, tt_delivery_written() with the
 * bytes still held in user space and the response's bytes handed over so
 * far maps the marks to the socket's byte count.  tt_delivery_prepare()
 * first: 0 when marks can be measured.
 */
int     tt_delivery_prepare(struct tt_delivery *d);
struct iovec;
ssize_t tt_delivery_sendv(struct tt_delivery *d, const struct iovec *iov, int n);
void    tt_delivery_arm(struct tt_delivery *d);
void    tt_delivery_written(struct tt_delivery *d, unsigned marks, size_t pending,
                            uint64_t handed);
/* everything handed over is on the socket: map what waited, recording off */
void tt_delivery_drained(struct tt_delivery *d);

/* watch the socket (the error queue, a close or a reset): 0, or -1 */
int  tt_delivery_watch(struct tt_delivery *d);

/* read the stamps waiting on the error queue; the marks they complete get
 * their time.  Returns the marks (TT_DM_BIT) acknowledged so far. */
unsigned tt_delivery_poll(struct tt_delivery *d);

/* is the ack of every mark that has an end in? (nothing to wait for) */
int  tt_delivery_settled(const struct tt_delivery *d);

/*
 * The request is over: its acknowledged marks, TCP_INFO and the byte and
 * token-event counts go into <r> (r->delivery, r->ts[*_ACKED]).  <pending>
 * is what is still held in user space for the client.
 */
void tt_delivery_finish(struct tt_delivery *d, struct tt_request *r, size_t pending);

/* has the peer acknowledged any byte of this request's response?  1 yes,
 * 0 no, -1 unknown (delivery off) */
int  tt_delivery_response_acked(const struct tt_delivery *d);

/* the peer reset the connection (or it failed): 1, else 0 (alive,
 * half-closed or unknown) */
int  tt_delivery_peer_gone(const struct tt_delivery *d);

#endif
