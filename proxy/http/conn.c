/*
 * Client connections (see conn.h for the picture).
 *
 * Each connection runs the request state machine here; the response side
 * of each request runs in its legs (proxy/http/leg.c): the primary leg, whose
 * response comes back through this file's sink (client_sink: the head,
 * the body with backpressure, delivery marks, the end, a failure, the
 * tunnel), and any shadow legs the request is mirrored to.  A response
 * may start before its request body has finished.
 *
 *   request (rq): IDLE -> HEAD -> WAIT_UP -> BODY -> DONE -> IDLE ...
 *                             \              \-> TUNNEL (101 Switching Protocols)
 *                              \-> HOLD -> WAIT_UP ...  (--inject-usage: the body
 *                                  is held, then head and body go out at once)
 *
 * conn_set_state() is the one writer of the state (what holds in each:
 * enum rq_state); the client's side of the socket is c->peer (open,
 * half-closed, gone), and conn_closing() starts the close.
 *
 * Bytes are never copied into our own buffers on the primary path: head
 * bytes are parsed and drained (the head is rewritten), body bytes are
 * parsed in place (llhttp over evbuffer_peek() iovecs) and then moved with
 * evbuffer_remove_buffer().  Shadow legs get a copy of each run of body
 * bytes just before the primary's move (tt_leg_send), bounded per shadow:
 * the primary never waits for a shadow.
 *
 * Backpressure: a side's input is only moved while the other side's output
 * holds less than buffer_bytes; a socket whose input holds buffer_bytes is
 * not read (the client's: client_read_update(), or a TLS bufferevent's read
 * high watermark), and the write callback (fired when an output drains)
 * resumes the mover.  The client's socket is read and written without a
 * bufferevent when plain (see "client I/O").
 *
 * Deadlines, one timer per connection (ctimer) by state: the whole head
 * (head_timeout, 408), gaps in the request body while the client owes
 * bytes (body_idle_timeout, 408), an idle keep-alive connection
 * (client_idle_timeout), an idle tunnel (upstream_idle_timeout).  A client
 * that stops taking the response is cut after send_timeout (499; the
 * upstream request is closed, so the server stops generating).
 *
 * Delivery (proxy/http/delivery.h): the leg marks the writes that end the first
 * token, the first output token and the response (sink_mark); a
 * finished request whose response the client has not yet acknowledged
 * waits in c->acking (acking_done() records it); watch_cb() sees the
 * stamps, and a departed client's FIN or reset where the client is not
 * read.  A FIN mid-answer is a departure, before it a half-close
 * (streaming_to()).
 */
#include "proxy/http/conn.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <llhttp.h>
#include <openssl/rand.h>

#include "metrics/pairs.h"
#include "metrics/record.h"
#include "metrics/request.h"
#include "proxy/http/access.h"
#include "proxy/http/delivery.h"
#include "proxy/http/httphead.h"
#include "proxy/http/inspect.h"
#include "proxy/http/io.h"
#include "proxy/http/leg.h"
#include "proxy/http/linger.h"
#include "proxy/base/log.h"
#include "proxy/decode/stream.h"
#include "proxy/http/trace.h"
#include "proxy/http/usagewire.h"
#include "proxy/http/wsturn.h"
#include "proxy/http/worker.h"
#include "tls/tls.h"
#include "proxy/base/strcopy.h"

/*
 * The request side's state (c->rq); conn_set_state() is its one writer.
 * The response side's is the primary leg's (leg.h); RS(c) reads it.
 */
enum rq_state {
    RQ_IDLE,        /* between requests: !active, nothing buffered for a request;
                     * ctimer = client_idle_timeout (head_timeout until a TLS
                     * handshake is done) */
    RQ_HEAD,        /* active: the head is being read into rqh (nothing sent
                     * upstream); ctimer = head_timeout */
    RQ_HOLD,        /* --inject-usage: the head waits, the body gathers in held
                     * (up to the inspector's cap); ctimer = body_idle_timeout */
    RQ_WAIT_UP,     /* the head is in the primary leg's output, waiting for its
                     * upstream connection; body bytes wait in the client's input */
    RQ_BODY,        /* body bytes move to the legs as the primary's output takes
                     * them; ctimer = body_idle_timeout while the client owes bytes */
    RQ_DONE,        /* the whole request was read (or the upstream answered first
                     * and the rest is not read); ctimer off; the response runs */
    RQ_TUNNEL       /* 101: bytes both ways, ctimer = upstream_idle_timeout */
};

static const char *const rq_state_names[] = {
    [RQ_IDLE] = "idle", [RQ_HEAD] = "head", [RQ_HOLD] = "hold",
    [RQ_WAIT_UP] = "wait_up", [RQ_BODY] = "body", [RQ_DONE] = "done",
    [RQ_TUNNEL] = "tunnel",
};

/*
 * The client's side of the socket (c->peer): it only moves forward.
 * A half-closed client still gets its response; a gone one is cancelled
 * (conn_cancel) at once.
 */
enum peer_state {
    PEER_OPEN,
    PEER_EOF,       /* half-closed after its request: reading stopped, the
                     * watch (delivery.h) sees a departure */
    PEER_GONE       /* closed, reset or stopped reading (send_timeout) */
};

struct tt_conn {
    struct tt_worker   *w;          /* borrowed */
    struct tt_conn     *next, *prev;/* worker's list */
    /* the client's I/O (see "client I/O" below): a plain socket is read
     * and written here, through rev and wev, with in and out owned; a TLS
     * one through its bufferevent (OpenSSL filter), whose buffers in and
     * out are then (borrowed until it is freed) */
    struct bufferevent *cbev;       /* owned: a TLS client's bufferevent, else NULL */
    evutil_socket_t     cfd;        /* the client socket (for direct writes) */
    struct evbuffer    *in;         /* request bytes read, not yet moved on */
    struct evbuffer    *out;        /* response bytes the socket has not taken */
    struct event       *rev;        /* owned (plain): EV_READ, persistent */
    struct event       *wev;        /* owned (plain): EV_WRITE, persistent, with
                                     * send_timeout; pending while out holds bytes */
    struct event       *ctimer;     /* owned: deadlines, see the top */
    uint64_t            deadline;   /* CLOCK_MONOTONIC ns the state's deadline
                                     * passes, 0 none (ctimer_set) */
    uint64_t            ctimer_due; /* when ctimer fires, 0 not pending */
    struct evbuffer    *stage;      /* owned: response bytes on their way to the client */
    struct evbuffer    *held;       /* owned: RQ_HOLD's body bytes (proxy/http/usagewire.h),
                                     * made on the first hold, else NULL */
    llhttp_t            rqp;
    struct tt_head      rqh;
    enum rq_state       rq;         /* written by conn_set_state() only */
    /* req and pri are set up whole by their own init; a pooled object is
     * zeroed around them (conn_take) */
    struct tt_request   req;        /* the primary's record */
    struct tt_leg       pri;        /* the primary leg; its req is &req */
    struct tt_leg      *shadows;    /* shadow legs of this connection (cnext) */
    struct tt_inspect   insp;
    struct tt_delivery  dl;         /* what the client acknowledged (proxy/http/delivery.h) */
    struct tt_ws_sess  *ws;         /* owned: a WebSocket tunnel read turn by turn
                                     * (proxy/http/wsturn.h), or NULL */
    struct tt_request  *acking;     /* owned: a finished request whose record waits
                                     * for the client's acknowledgement, or NULL */
    unsigned            marking;    /* delivery marks the next write ends (TT_DM_BIT) */
    uint64_t            now;        /* stamp of the read being handled */
    uint64_t            last_cread; /* stamp of the latest client read */
    uint64_t            queued_since; /* read stamp of the oldest response bytes
                                     * waiting in the client's output, 0 none */
    size_t              head_bytes;
    uint64_t            body_bytes;
    unsigned            nreq;

    unsigned active:1;          /* a request is in progress (record pending) */
    unsigned keepalive:1;       /* client connection may serve another request */
    unsigned http10:1;
    unsigned resp_started:1;    /* response head written to the client */
    unsigned closing:1;         /* close once the client output drains */
    unsigned rq_head_done:1, rq_msg_done:1;
    unsigned body_too_big:1;
    unsigned dry:1;             /* parser callbacks have no side effects */
    unsigned insp_on:1;
    unsigned in_process:1;      /* inside client_process() */
    unsigned plain_client:1;    /* client on a plain socket: direct writes */
    unsigned writing:1;         /* plain: wev pending; TLS: EV_WRITE enabled */
    unsigned reading:1;         /* plain: rev pending */
    unsigned read_off:1;        /* reading stopped for good (closing, EOF, an early answer) */
    enum peer_state     peer;
    unsigned no_upgrade:1;      /* Upgrade: h2c, dropped: a plain HTTP/1.1 request */
};

/* conn_take() zeroes all but req and pri: nothing may sit between them */
_Static_assert(offsetof(struct tt_conn, pri) - offsetof(struct tt_conn, req) -
               sizeof(struct tt_request) < _Alignof(struct tt_leg) &&
               offsetof(struct tt_conn, shadows) - offsetof(struct tt_conn, pri) -
               sizeof(struct tt_leg) < _Alignof(struct tt_leg *),
               "req, pri and shadows must follow each other in struct tt_conn");

static void client_read(struct tt_conn *c);
static void client_write(struct tt_conn *c);
static void client_trouble(struct tt_conn *c, short what);
static void client_process(struct tt_conn *c);
static void conn_free(struct tt_conn *c);
static void conn_cancel(struct tt_conn *c, const char *why);
static void request_finish(struct tt_conn *c);
static void next_request(struct tt_conn *c);
static void forward_body(struct tt_conn *c, struct evbuffer *in, size_t n);
static void request_complete(struct tt_conn *c);
static void acking_done(struct tt_conn *c);
static int may_still_send(struct tt_conn *c);
static void sink_flush(void *arg);
static void ctimer_cb(evutil_socket_t fd, short what, void *arg);
static const struct tt_leg_sink client_sink;

#define CFG(c) ((c)->w->cfg)
#define RS(c) ((c)->pri.st)

/*
 * The state's deadline is c->deadline; ctimer only has to fire no later.
 * Deadlines move at each state change and each run of body bytes, but the
 * timer is re-added only when it would fire too late: one that fires
 * early finds the deadline further on and sleeps for the rest
 * (ctimer_cb).  Requests that follow each other on a kept-alive
 * connection then mostly leave the timer heap alone (each add or delete
 * is some 200 instructions, four of them a request).
 */
static void ctimer_set(struct tt_conn *c, unsigned ms)
{
    uint64_t d = tt_now_mono() + (uint64_t)ms * 1000000u;

    c->deadline = d;
    if (c->ctimer_due != 0 && c->ctimer_due <= d)
        return;
    c->ctimer_due = d;
    tt_timer_set(c->ctimer, ms);
}

/* the deadline is <ms> away, but the timer fires within <early> (when
 * that is sooner): the state that usually comes next, with the shorter
 * deadline, then need not re-add it */
static void ctimer_set_early(struct tt_conn *c, unsigned ms, unsigned early)
{
    ctimer_set(c, early < ms ? early : ms);
    if (early < ms)
        c->deadline += (uint64_t)(ms - early) * 1000000u;
}

/* no deadline (a timer still pending fires and finds none) */
static void ctimer_off(struct tt_conn *c)
{
    c->deadline = 0;
}

/* no deadline and no timer (the connection closes) */
static void ctimer_stop(struct tt_conn *c)
{
    c->deadline = 0;
    c->ctimer_due = 0;
    evtimer_del(c->ctimer);
}

/* a tunnel moved bytes: its idle deadline starts again */
static void tunnel_activity(struct tt_conn *c)
{
    ctimer_set(c, CFG(c)->upstream_idle_ms);
}

/* ------------------------------------------------------------------ */
/* llhttp callbacks (request)                                          */

/*
 * Chunk framing counts against max_body_bytes: a chunk whose announced
 * size would pass the limit is refused when its size line ends, before any
 * of its data is forwarded, and chunk-extension bytes count as body bytes.
 * In the dry run (no side effects) each is checked on its own, so a whole
 * request read at once is refused with nothing forwarded.
 */
static int rq_on_chunk_header(llhttp_t *p)
{
    struct tt_conn *c = p->data;
    uint64_t max = CFG(c)->max_body_bytes;

    if (p->content_length > max ||
        (!c->dry && p->content_length > max - c->body_bytes)) {
        /* set in the dry run too: request_head() answers 413 for it */
        c->body_too_big = 1;
        llhttp_set_error_reason(p, "chunk size exceeds max_body_bytes");
        return HPE_USER;
    }
    return 0;
}

static int rq_on_chunk_ext(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    uint64_t max = CFG(c)->max_body_bytes;

    (void)at;
    if (len > max || (!c->dry && (c->body_bytes += len) > max)) {
        if (!c->dry)
            c->body_too_big = 1;
        llhttp_set_error_reason(p, "chunk extension exceeds max_body_bytes");
        return HPE_USER;
    }
    return 0;
}

static int rq_on_url(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    return c->dry ? 0 : tt_head_target(&c->rqh, at, len) < 0 ? -1 : 0;
}

static int rq_on_field(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    return c->dry ? 0 : tt_head_field(&c->rqh, at, len) < 0 ? -1 : 0;
}

static int rq_on_value(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    return c->dry ? 0 : tt_head_value(&c->rqh, at, len) < 0 ? -1 : 0;
}

static int rq_on_headers_complete(llhttp_t *p)
{
    struct tt_conn *c = p->data;
    if (!c->dry)
        c->rq_head_done = 1;
    return HPE_PAUSED;
}

static int rq_on_body(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;

    if (c->dry)
        return 0;
    c->body_bytes += len;
    if (c->body_bytes > CFG(c)->max_body_bytes) {
        c->body_too_big = 1;
        return -1;
    }
    if (c->insp_on)
        tt_inspect_feed(&c->insp, at, len);
    return 0;
}

static int rq_on_message_complete(llhttp_t *p)
{
    struct tt_conn *c = p->data;
    if (!c->dry)
        c->rq_msg_done = 1;
    return HPE_PAUSED;
}

static llhttp_settings_t rq_settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

/* the parser callbacks, set once for all workers */
static void settings_init(void)
{
    llhttp_settings_init(&rq_settings);
    rq_settings.on_url = rq_on_url;
    rq_settings.on_header_field = rq_on_field;
    rq_settings.on_header_value = rq_on_value;
    rq_settings.on_headers_complete = rq_on_headers_complete;
    rq_settings.on_body = rq_on_body;
    rq_settings.on_message_complete = rq_on_message_complete;
    rq_settings.on_chunk_header = rq_on_chunk_header;
    rq_settings.on_chunk_extension_name = rq_on_chunk_ext;
    rq_settings.on_chunk_extension_value = rq_on_chunk_ext;
}

/* ------------------------------------------------------------------ */
/* client I/O                                                          */

/*
 * One request logic over two ways of moving the client's bytes.
 *
 * A plain socket has no bufferevent: rev's callback (client_readable)
 * reads once into the worker's buffer and appends the bytes to c->in,
 * where client_process() parses them in place and moves them on; the
 * response is written at once where nothing waits (sink_flush, sink_body),
 * and what the kernel does not take waits in c->out for wev
 * (client_writable).  Read-size ioctls, watermark callbacks and the
 * write event armed and disarmed around every response are gone.
 *
 * A TLS socket keeps its bufferevent (the OpenSSL filter): c->in and
 * c->out are its buffers, its callbacks (client_bev_*) call the same
 * handlers, client_read(), client_write() and client_trouble().
 *
 * Backpressure is the same both ways: nothing is read while c->in holds
 * buffer_bytes (plain: client_read_update(), after every client_process();
 * TLS: the bufferevent's read high watermark).  send_timeout is wev's
 * timeout (TLS: the bufferevent's write timeout): it runs while bytes
 * wait in c->out and starts again whenever the socket takes some.  Errors
 * of a write at once are left to the write event, so that no sink call
 * frees the connection under the leg.
 */

/* reading as the connection wants it (plain): on unless stopped for good
 * or c->in holds buffer_bytes */
static void client_read_update(struct tt_conn *c)
{
    unsigned want;

    if (c->cbev != NULL)
        return;
    want = !c->read_off && evbuffer_get_length(c->in) < CFG(c)->buffer_bytes;
    if (want == c->reading)
        return;
    c->reading = want;
    if (want)
        event_add(c->rev, NULL);
    else
        event_del(c->rev);
}

/* nothing more is read from the client (closing, its EOF, an early answer) */
static void client_read_stop(struct tt_conn *c)
{
    c->read_off = 1;
    if (c->cbev != NULL)
        bufferevent_disable(c->cbev, EV_READ);
    else
        client_read_update(c);
}

/*
 * Bytes were added to c->out: the write event takes them.  A TLS
 * client's writes stay enabled from the accept (its bufferevent arms the
 * event only while its output holds bytes); a plain client's wev is
 * pending exactly while c->out holds bytes.
 */
static void client_queued(struct tt_conn *c)
{
    struct timeval tv;

    if (c->writing)
        return;
    c->writing = 1;
    if (c->cbev != NULL) {
        bufferevent_enable(c->cbev, EV_WRITE);
        return;
    }
    tv = tt_ms_tv(CFG(c)->send_timeout_ms);
    event_add(c->wev, &tv);
}

/* a plain client's write event is done (c->out empty, or the socket failed) */
static void client_write_stop(struct tt_conn *c)
{
    if (c->cbev == NULL && c->writing) {
        c->writing = 0;
        event_del(c->wev);
    }
}

/* plain: the socket is readable (rev) */
static void client_readable(evutil_socket_t fd, short what, void *arg)
{
    struct tt_conn *c = arg;
    size_t len = evbuffer_get_length(c->in);
    size_t room = CFG(c)->buffer_bytes > len ? CFG(c)->buffer_bytes - len : 0;
    ssize_t n;
    int err;
    (void)what;

    if (room == 0) {
        client_read_update(c);          /* full: read again once moved on */
        return;
    }
    if (room > sizeof(c->w->rbuf))
        room = sizeof(c->w->rbuf);
    n = tt_recv(fd, c->w->rbuf, room, 0);
    if (n > 0) {
        if (evbuffer_add(c->in, c->w->rbuf, (size_t)n) == 0) {
            client_read(c);
            return;
        }
        n = -1;
        errno = ENOMEM;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
    }
    /* as a bufferevent does: no more reads after EOF or an error */
    err = errno;
    client_read_stop(c);
    errno = err;
    client_trouble(c, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR));
}

/* plain: the socket takes bytes again (wev), or send_timeout passed */
static void client_writable(evutil_socket_t fd, short what, void *arg)
{
    struct tt_conn *c = arg;
    int n;

    if (what & EV_TIMEOUT) {
        client_write_stop(c);
        client_trouble(c, BEV_EVENT_WRITING | BEV_EVENT_TIMEOUT);
        return;
    }
    if (evbuffer_get_length(c->out) == 0) {
        client_write_stop(c);
        return;
    }
    n = evbuffer_write(c->out, fd);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        client_write_stop(c);
        client_trouble(c, BEV_EVENT_WRITING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR));
        return;
    }
    if (evbuffer_get_length(c->out) == 0) {
        client_write_stop(c);
        client_write(c);
    }
}

/* TLS: the bufferevent's callbacks */
static void client_bev_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    client_read(arg);
}

static void client_bev_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    client_write(arg);
}

static void client_bev_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_conn *c = arg;
    (void)bev;

    if (what & BEV_EVENT_CONNECTED) {
        /* TLS handshake done: from now on the idle keep-alive limit */
        if (c->rq == RQ_IDLE)
            ctimer_set(c, CFG(c)->client_idle_ms);
        return;
    }
    client_trouble(c, what);
}

/* ------------------------------------------------------------------ */
/* the response's way to the client: the primary leg's sink (leg.h)    */

/*
 * Hand what is staged to the client.  On a plain socket with nothing
 * queued the bytes are written at once, in this read callback: no write
 * event is armed and no loop pass goes by before the client has them (the
 * common case for a stream).  What the socket does not take, and anything
 * on a TLS connection, goes to c->out (client_queued).
 */
/* the write that ended the marks of sink_mark() is done: they get the
 * socket's byte count (bytes still held here go out in order) */
static void marks_written(struct tt_conn *c)
{
    tt_delivery_written(&c->dl, c->marking, evbuffer_get_length(c->stage) +
                        evbuffer_get_length(c->out),
                        c->req.handed);
    c->marking = 0;
}

/* a marked write of what <b> holds, straight to the plain socket, asking
 * the kernel for its stamp (proxy/http/delivery.h); what it does not take stays */
static void write_marked(struct tt_conn *c, struct evbuffer *b)
{
    struct evbuffer_iovec v[16];
    struct iovec iov[16];
    int n = evbuffer_peek(b, -1, NULL, v, 16);
    ssize_t w;

    if (n > 16)
        n = 16;
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    w = tt_delivery_sendv(&c->dl, iov, n);
    if (w > 0)
        evbuffer_drain(b, (size_t)w);
}

static void sink_flush(void *arg)
{
    struct tt_conn *c = arg;
    struct evbuffer *out = c->out;
    size_t n = evbuffer_get_length(c->stage);

    if (n == 0)
        return;
    c->req.handed += n;
    if (c->plain_client && evbuffer_get_length(out) == 0) {
        if (c->marking)
            write_marked(c, c->stage);
        else
            evbuffer_write(c->stage, c->cfd);
        if (evbuffer_get_length(c->stage) == 0) {
            tt_delay_observe(&c->w->delay, TT_DELAY_RESPONSE, c->pri.now, tt_now_mono());
            if (c->marking)
                marks_written(c);
            return;
        }
    }
    if (c->queued_since == 0)
        c->queued_since = c->pri.now;       /* handed over in client_write() */
    evbuffer_add_buffer(out, c->stage);
    client_queued(c);
    if (c->marking)
        marks_written(c);
}

static void sink_mark(void *arg, unsigned marks)
{
    struct tt_conn *c = arg;

    if (marks == 0 || tt_delivery_prepare(&c->dl) != 0)
        return;
    /* a plain socket's write asks for the stamp itself (write_marked) */
    if (!c->plain_client)
        tt_delivery_arm(&c->dl);
    c->marking |= marks;
}

static int sink_room(void *arg)
{
    struct tt_conn *c = arg;
    size_t out;

    if (evbuffer_get_length(c->stage) != 0 || c->dl.unmapped)
        return -1;
    out = evbuffer_get_length(c->out);
    if (out >= CFG(c)->buffer_bytes)
        return -1;
    return out != 0;
}

static int sink_body(void *arg, const char *buf, size_t n, int room)
{
    struct tt_conn *c = arg;
    ssize_t w;

    if (!c->plain_client || room != 0)
        return -1;
    c->req.handed += n;
    if (c->marking) {
        struct iovec iov = { (void *)buf, n };
        w = tt_delivery_sendv(&c->dl, &iov, 1);
    } else {
        w = tt_send(c->cfd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w == (ssize_t)n) {
        tt_delay_observe(&c->w->delay, TT_DELAY_RESPONSE, c->pri.now, tt_now_mono());
        if (c->marking)
            marks_written(c);
        return 0;
    }
    if (w < 0)
        w = 0;      /* full, or failed: the write event reports it */
    evbuffer_add(c->out, buf + w, n - (size_t)w);
    client_queued(c);
    if (c->queued_since == 0)
        c->queued_since = c->pri.now;       /* handed over in client_write() */
    if (c->marking)
        marks_written(c);
    return 0;
}

/*
 * A TLS write that ends a delivery mark is mapped to the socket's count
 * once the TLS layer has written it (client_write); bytes added behind it
 * before then would move the mark to their records' end, later on a slow
 * link: the next read waits for that write (one loop pass, a few times a
 * request).
 */
static int sink_full(void *arg)
{
    struct tt_conn *c = arg;

    return c->dl.unmapped ||
           evbuffer_get_length(c->out) >= CFG(c)->buffer_bytes;
}

/* the one lifecycle function of the request side (invariants: rq_state) */
static void conn_set_state(struct tt_conn *c, enum rq_state st, const char *why)
{
    tt_log_debug("client request %s: %s -> %s (%s)", c->req.request_id[0] ?
                 c->req.request_id : "-", rq_state_names[c->rq], rq_state_names[st], why);
    c->rq = st;
}

/* the connection closes once the client output is written (and a record
 * waiting for its acknowledgement is out): nothing more is read */
static void conn_closing(struct tt_conn *c)
{
    c->closing = 1;
    c->keepalive = 0;
    client_read_stop(c);
    ctimer_stop(c);
}

/* close the client once what is queued for it has been written */
static void close_after_flush(struct tt_conn *c)
{
    conn_closing(c);
    if (evbuffer_get_length(c->out) == 0)
        conn_free(c);
}

/*
 * How shadow legs leave their connection: a copy that has not had the
 * whole request always stops; one that has runs on (SH_DETACH), stops
 * with the client's request (SH_CLIENT_GONE, when the shadow's
 * on_client_cancel says cancel), or stops in any case (SH_CANCEL).
 */
enum sh_release { SH_DETACH, SH_CLIENT_GONE, SH_CANCEL };

/* the shadow legs of the current request (or of every request: <all>) */
static void shadows_release(struct tt_conn *c, int all, enum sh_release how,
                            const char *why)
{
    struct tt_leg *l = c->shadows, *next;

    for (; l != NULL; l = next) {
        next = l->cnext;
        if (all || l->seq == c->nreq)
            tt_leg_release(l, how == SH_CANCEL ||
                              (how == SH_CLIENT_GONE &&
                               l->t->sh->on_client_cancel == TT_SHADOW_CANCEL), why);
    }
}

/*
 * Answer the current request with tokentap's own error and close the
 * connection afterwards.  When the response has already started, the
 * client can only be cut off.  The request is recorded with <type>.
 */
static void fail_request(struct tt_conn *c, int status, const char *type,
                         const char *msg)
{
    const char *kind = status == 408 ? "request_timeout"
                     : status == 502 ? "upstream_error"
                     : status == 504 ? "upstream_timeout"
                     : status >= 400 && status < 500 ? "invalid_request_error"
                     : "proxy_error";

    char path[TT_RECORD_PATH_MAX];

    /* the log gets the path as records show it: no secrets */
    tt_record_redact_path(c->req.path[0] ? c->req.path : "-", path, sizeof(path));
    tt_log_info("request %s %.256s: %d %s: %s", c->req.method[0] ? c->req.method : "-",
                path, status, type, msg);
    tt_leg_cut(&c->pri);
    if (c->active) {
        /* a request cut off inside its head: keep what is known of it */
        if (c->req.path[0] == '\0' && c->rqh.tlen > 0 && c->rqh.buf != NULL)
            tt_copy_mem(c->req.path, sizeof(c->req.path), c->rqh.buf + c->rqh.target,
                       c->rqh.tlen);
        tt_request_set_error(&c->req, status, type, msg);
        if (!c->resp_started)
            c->req.status = status;
        /* shadows that have not had the whole request cannot finish it */
        if (c->rq != RQ_DONE)
            shadows_release(c, 0, SH_CANCEL, "client request failed");
    }
    if (!c->resp_started) {
        tt_error_response(c->out, status, kind, type,
                          msg, 1);
        client_queued(c);
        c->resp_started = 1;
    }
    if (c->active)
        request_finish(c);
    if (c->w != NULL)
        close_after_flush(c);
}

/*
 * The upstream failed before the request body was read (a dead upstream:
 * the body waits in the client's input for a connection that never
 * comes): the parser runs over what the client sent, not forwarded, so
 * the inspector sees it and the record keeps what the request asked for.
 */
static void inspect_unread(struct tt_conn *c)
{
    enum llhttp_errno e;

    if (!c->insp_on || c->rq_msg_done ||
        (c->rq != RQ_WAIT_UP && c->rq != RQ_BODY && c->rq != RQ_HOLD))
        return;
    llhttp_resume(&c->rqp);
    (void)tt_parse_buf(&c->rqp, c->in, 0,
                       evbuffer_get_length(c->in), &e,
                       NULL, NULL);
}

static void sink_fail(void *arg, int status, const char *type, const char *msg)
{
    struct tt_conn *c = arg;

    c->now = c->pri.now;
    inspect_unread(c);
    fail_request(c, status, type, msg);
}

static void sink_close_delimited(void *arg)
{
    struct tt_conn *c = arg;

    c->keepalive = 0;
}

/* ------------------------------------------------------------------ */
/* request side                                                        */

/* a generated id, so that even a request rejected mid-head has one */
/*
 * Random bytes for request ids, drawn from OpenSSL a batch at a time: one
 * RAND_bytes call costs about as much as a whole request's head parse,
 * whatever its length.  Per thread, so no lock; workers never fork.
 */
static int request_random(unsigned char *out, size_t n)
{
    static _Thread_local unsigned char pool[512];
    static _Thread_local size_t left;

    if (left < n) {
        if (RAND_bytes(pool, sizeof(pool)) != 1)
            return -1;
        left = sizeof(pool);
    }
    left -= n;
    memcpy(out, pool + left, n);
    return 0;
}

static void generate_request_id(struct tt_conn *c)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[8];
    char *o = c->req.request_id;
    size_t i;

    if (request_random(rnd, sizeof(rnd)) != 0)
        memcpy(rnd, &c->now, sizeof(rnd));
    memcpy(o, "tt-", 3);
    o += 3;
    for (i = 0; i < sizeof(rnd); i++) {
        *o++ = hex[rnd[i] >> 4];
        *o++ = hex[rnd[i] & 15];
    }
    *o = '\0';
}

/* the client's X-Request-Id, when it sent one, replaces the generated id */
static void client_request_id(struct tt_conn *c)
{
    size_t len;
    const char *v = tt_head_get(&c->rqh, "x-request-id", &len);

    if (v != NULL && len > 0)
        tt_copy_mem(c->req.request_id, sizeof(c->req.request_id), v, len);
}

static void request_begin(struct tt_conn *c)
{
    /* a keep-alive client's next request comes after its acknowledgement
     * of the last response: the waiting record has it now */
    if (c->acking != NULL)
        acking_done(c);
    tt_request_reset(&c->req);
    tt_delivery_begin(&c->dl);
    c->req.measure_delivery = tt_delivery_on(&c->dl);
    c->req.t0 = c->now;
    c->req.start_wall_ns = tt_now_wall();
    c->req.upstream_name = "primary";
    generate_request_id(c);
    tt_head_clear(&c->rqh);
    llhttp_init(&c->rqp, HTTP_REQUEST, &rq_settings);
    c->rqp.data = c;
    c->head_bytes = 0;
    c->body_bytes = 0;
    c->rq_head_done = c->rq_msg_done = 0;
    tt_leg_reset(&c->pri);
    if (c->held != NULL)
        evbuffer_drain(c->held, evbuffer_get_length(c->held));
    c->resp_started = 0;
    c->body_too_big = 0;
    c->active = 1;
    conn_set_state(c, RQ_HEAD, "first request byte");
    tt_worker_request_start(c->w);
    ctimer_set(c, CFG(c)->head_timeout_ms);
}

/*
 * Check buffered bytes beyond the head before anything is forwarded: a
 * copy of the parser runs over them without side effects.  Returns NULL
 * when acceptable, else the reason.
 */
static const char *dry_run(struct tt_conn *c, struct evbuffer *in)
{
    llhttp_t copy = c->rqp;
    enum llhttp_errno e;
    size_t avail = evbuffer_get_length(in), n;

    llhttp_resume(&copy);
    c->dry = 1;
    n = tt_parse_buf(&copy, in, 0, avail, &e, NULL, NULL);
    c->dry = 0;
    if (e == HPE_OK || e == HPE_PAUSED_UPGRADE)
        return NULL;
    if (e == HPE_PAUSED) {
        /* the message ended inside the buffered bytes */
        if (!c->keepalive && n < avail)
            return "data after Connection: close";
        return NULL;
    }
    return tt_parse_error(&copy, e);
}

/*
 * Mirror the request to every shadow that samples it: each gets its own
 * leg, its own head, and a connection of its own pool.  A shadow over its
 * max_inflight gets a leg that is dropped at once, so that the drop has a
 * record.  Nothing here can fail the client's request.
 */
static void start_shadows(struct tt_conn *c, const char *method, int upgrade,
                          long long body_len)
{
    struct tt_worker *w = c->w;
    struct tt_pair *pair = NULL;
    const char *add_id = CFG(c)->add_request_id &&
                         tt_head_get(&c->rqh, "x-request-id", NULL) == NULL
                         ? c->req.request_id : NULL;
    unsigned i, n = 0;
    int take[TT_MAX_TARGETS] = { 0 };

    if (upgrade || w->ntargets < 2 || c->req.api == TT_API_OTHER)
        return;
    for (i = 1; i < w->ntargets; i++) {
        const struct tt_target *t = &w->targets[i];
        size_t klen = 0;
        const char *key = t->sh->sample_key[0]
                        ? tt_head_get(&c->rqh, t->sh->sample_key, &klen) : NULL;
        take[i] = tt_target_samples(t, (int)c->req.api, key, klen);
        n += take[i] ? 1 : 0;
    }
    if (n == 0)
        return;
    pair = tt_pair_new(w->pairs, n + 1);
    c->req.pair = pair;
    for (i = 1; i < w->ntargets; i++) {
        struct tt_leg *l;

        if (!take[i])
            continue;
        l = tt_leg_new_shadow(&c->shadows, c->w, &w->targets[i], &c->req, c->nreq, pair);
        if (l == NULL) {
            tt_pair_leg_gone(pair, i);
            continue;
        }
        tt_leg_shadow_start(l, &c->rqh, method, add_id, body_len, c->w->draining);
    }
}

/*
 * The request head goes out, rewritten for the primary and each shadow
 * (its body framed for <body_len>, see tt_leg_head), and an upstream
 * connection is asked for.  Returns 0 to go on, -1 when the connection was
 * failed (and possibly freed).
 */
static int request_send(struct tt_conn *c, long long body_len)
{
    const struct tt_config *cfg = CFG(c);
    const char *method = llhttp_method_name(llhttp_get_method(&c->rqp));
    int upgrade = llhttp_get_upgrade(&c->rqp) && !c->no_upgrade;

    /* the head the primary gets (its output was emptied by tt_leg_reset) */
    if (tt_leg_head(&c->pri, &c->rqh, method, upgrade,
                    cfg->add_request_id && tt_head_get(&c->rqh, "x-request-id", NULL) == NULL
                    ? c->req.request_id : NULL, body_len) < 0) {
        fail_request(c, 502, "proxy_error", "out of memory");
        return -1;
    }
    start_shadows(c, method, upgrade, body_len);
    ctimer_off(c);
    /* everything needed from the head is copied out: its ~4 KiB of
     * buffers go back now rather than live as long as the stream */
    tt_head_free(&c->rqh);
    conn_set_state(c, RQ_WAIT_UP, "request head sent");
    /* on failure the request was answered and c->closing is set */
    return tt_leg_start(&c->pri) < 0 ? -1 : 0;
}

/*
 * The request head is complete: check it, and send it on (request_send),
 * or hold it with its body for --inject-usage (RQ_HOLD).  Returns 0 to go
 * on, -1 when the connection was failed (and possibly freed).
 */
static int request_head(struct tt_conn *c, struct evbuffer *in)
{
    const struct tt_config *cfg = CFG(c);
    const char *why, *method;
    char target[512];
    int upgrade;

    /* the span ids, decided now so that they can go upstream */
    if (cfg->otlp_url[0] || cfg->trace_propagate)
        tt_trace_begin(&c->req.trace, &c->rqh);
    if (c->rqh.overflow || c->head_bytes > cfg->max_header_bytes) {
        fail_request(c, 431, "header_too_large", "request header block too large");
        return -1;
    }
    method = llhttp_method_name(llhttp_get_method(&c->rqp));
    tt_copy_mem(c->req.method, sizeof(c->req.method), method, strlen(method));
    tt_copy_mem(target, sizeof(target), c->rqh.buf + c->rqh.target, c->rqh.tlen);
    tt_copy_mem(c->req.path, sizeof(c->req.path), target, strlen(target));
    c->req.api = tt_api_detect(c->rqh.buf + c->rqh.target, c->rqh.tlen);
    client_request_id(c);

    if ((why = tt_head_check(&c->rqh, TT_HEAD_REQUEST, c->rqp.http_major,
                              c->rqp.http_minor)) != NULL) {
        fail_request(c, 400, "bad_request", why);
        return -1;
    }
    if (llhttp_get_method(&c->rqp) == HTTP_CONNECT) {
        fail_request(c, 400, "bad_request", "CONNECT is not supported");
        return -1;
    }
    if (c->rqh.tlen == 0 || c->rqh.buf[c->rqh.target] != '/') {
        fail_request(c, 400, "bad_request", "request target must be an absolute path");
        return -1;
    }
    c->http10 = c->rqp.http_major == 1 && c->rqp.http_minor == 0;
    c->keepalive = llhttp_should_keep_alive(&c->rqp) && !c->w->draining;
    upgrade = llhttp_get_upgrade(&c->rqp);
    /* h2c cannot be followed: the request goes on in HTTP/1.1 */
    c->no_upgrade = upgrade && tt_head_upgrade_h2c(&c->rqh);
    upgrade = upgrade && !c->no_upgrade;
    if ((c->rqp.flags & F_CONTENT_LENGTH) &&
        c->rqp.content_length > cfg->max_body_bytes) {
        fail_request(c, 413, "payload_too_large", "request body exceeds max_body_bytes");
        return -1;
    }
    if ((why = dry_run(c, in)) != NULL) {
        if (c->body_too_big)
            fail_request(c, 413, "payload_too_large", why);
        else
            fail_request(c, 400, "bad_request", why);
        return -1;
    }

    if (c->req.api != TT_API_OTHER) {
        tt_inspect_init(&c->insp, cfg->inspect_max_bytes);
        if (c->rqp.flags & F_CONTENT_LENGTH)
            tt_inspect_expect(&c->insp, (size_t)c->rqp.content_length);
        c->insp_on = 1;
    }
    if (c->insp_on && !upgrade &&
        tt_usagewire_hold(cfg->inject_usage, c->req.api, &c->rqh,
                          (c->rqp.flags & F_CHUNKED) ||
                          ((c->rqp.flags & F_CONTENT_LENGTH) && c->rqp.content_length > 0)) &&
        (c->held != NULL || (c->held = evbuffer_new()) != NULL)) {
        /* the buffer exists only on connections that ever hold a body */
        conn_set_state(c, RQ_HOLD, "--inject-usage holds the body");  /* hold_release() */
        llhttp_resume(&c->rqp);
        ctimer_set(c, cfg->body_idle_ms);
        return 0;
    }
    return request_send(c, -1);
}

/* RQ_HOLD holds no more than the inspector keeps */
static int hold_full(const struct tt_conn *c)
{
    return c->insp.gave_up || evbuffer_get_length(c->held) > c->insp.cap;
}

/*
 * RQ_HOLD ends (the body is complete, or more than is held): the head and
 * the held body go out, rewritten when tt_inject_request() applies to a
 * complete body, else as the client sent them.  Returns as request_send().
 */
static int hold_release(struct tt_conn *c)
{
    long long len = c->rq_msg_done ? tt_usagewire_rewrite(&c->insp, c->held) : -1;

    c->req.usage_injected = len >= 0;
    if (request_send(c, len) < 0)
        return -1;
    forward_body(c, c->held, evbuffer_get_length(c->held));
    if (c->rq_msg_done)
        request_complete(c);
    return 0;
}

static void request_complete(struct tt_conn *c)
{
    struct tt_leg *l, *next;

    conn_set_state(c, RQ_DONE, "request complete");
    ctimer_off(c);
    /* the last request byte arrived with the latest client read, even when
     * it waited in the buffer for the upstream connection */
    c->req.ts[TT_TS_REQUEST_COMPLETE] = c->last_cread;
    c->req.bytes_in = c->body_bytes;
    /* the primary's last request bytes leave before the body is inspected:
     * what the inspector finds only goes into the records */
    c->pri.now = c->now;
    tt_leg_request_done(&c->pri, &c->req);
    tt_leg_push(&c->pri);
    if (c->insp_on) {
        tt_inspect_finish(&c->insp, &c->req);
        tt_inspect_free(&c->insp);
        c->insp_on = 0;
    }
    for (l = c->shadows; l != NULL; l = next) {
        next = l->cnext;
        if (l->seq == c->nreq && !l->sent_all) {
            l->now = c->now;
            tt_leg_request_done(l, &c->req);  /* may record and free it */
        }
    }
}

/* body bytes [0, n) of <in> go to the shadows (a copy), then to the primary */
static void forward_body(struct tt_conn *c, struct evbuffer *in, size_t n)
{
    struct tt_leg *l, *next;

    for (l = c->shadows; l != NULL; l = next) {
        next = l->cnext;
        if (l->seq == c->nreq && !l->sent_all)
            tt_leg_send(l, in, n);
    }
    c->pri.now = c->now;            /* the read these bytes came with */
    tt_leg_send(&c->pri, in, n);
}

/* move what the client sent as far as the state allows */
static void client_process(struct tt_conn *c)
{
    struct evbuffer *in = c->in;
    enum llhttp_errno e;
    size_t n, avail;

    c->in_process = 1;
again:
    for (;;) {
        if (c->closing)
            break;
        avail = evbuffer_get_length(in);
        switch (c->rq) {
        case RQ_IDLE:
            if (avail == 0)
                goto out;
            request_begin(c);
            /* fall through */
        case RQ_HEAD:
            n = tt_parse_buf(&c->rqp, in, 0, avail, &e, &c->rqh, NULL);
            evbuffer_drain(in, n);
            c->head_bytes += n;
            if (e == HPE_PAUSED && c->rq_head_done) {
                if (request_head(c, in) < 0)
                    return;
                continue;
            }
            if (e != HPE_OK) {
                if (c->rqh.overflow)
                    fail_request(c, 431, "header_too_large",
                                 c->rqh.n >= c->rqh.max ? "too many request headers"
                                                        : "request header block too large");
                else if (e == HPE_PAUSED_H2_UPGRADE)
                    /* the HTTP/2 preface (--http2-prior-knowledge) */
                    fail_request(c, 400, "bad_request", "HTTP/2 is not spoken here; "
                                 "use HTTP/1.1, or TLS with ALPN (it negotiates HTTP/1.1)");
                else
                    fail_request(c, 400, "bad_request", tt_parse_error(&c->rqp, e));
                return;
            }
            if (c->head_bytes > CFG(c)->max_header_bytes) {
                fail_request(c, 431, "header_too_large", "request header block too large");
                return;
            }
            goto out;
        case RQ_WAIT_UP:
        case RQ_DONE:
            goto out;
        case RQ_HOLD:
        case RQ_BODY: {
            struct evbuffer *uout = tt_leg_output(&c->pri);
            if (evbuffer_get_length(uout) >= CFG(c)->buffer_bytes)
                goto out;           /* resumed by sink_drained() */
            n = tt_parse_buf(&c->rqp, in, 0, avail, &e, NULL, NULL);
            if (c->rq == RQ_HOLD) {
                evbuffer_remove_buffer(in, c->held, n);
                if ((e == HPE_PAUSED && c->rq_msg_done) || (e == HPE_OK && hold_full(c))) {
                    if (hold_release(c) < 0)
                        return;
                    continue;
                }
            } else {
                forward_body(c, in, n);
            }
            if (e == HPE_PAUSED && c->rq_msg_done) {
                request_complete(c);
                continue;
            }
            if (e == HPE_OK) {
                if (c->peer == PEER_EOF && evbuffer_get_length(in) == 0) {
                    conn_cancel(c, "client closed the connection mid-request");
                    return;
                }
                /* the client owes more body: it has body_idle_timeout */
                ctimer_set(c, CFG(c)->body_idle_ms);
                goto out;
            }
            if (c->body_too_big)
                fail_request(c, 413, "payload_too_large", "request body exceeds max_body_bytes");
            else
                fail_request(c, 400, "bad_request", tt_parse_error(&c->rqp, e));
            return;
        }
        case RQ_TUNNEL:
            if (c->pri.up != NULL && avail > 0) {
                c->req.bytes_in += avail;       /* through the tunnel */
                if (c->ws != NULL)
                    tt_ws_sess_feed(c->ws, 1, in, avail, c->now);
                evbuffer_add_buffer(tt_leg_output(&c->pri), in);
                tunnel_activity(c);
            }
            goto out;
        }
    }
out:
    /* the request bytes of this read go to the upstream now; when that
     * emptied an output that had stopped the body, read on */
    if (tt_leg_push(&c->pri) && !c->closing &&
        (c->rq == RQ_BODY || c->rq == RQ_HOLD || c->rq == RQ_TUNNEL) &&
        evbuffer_get_length(in) > 0)
        goto again;
    c->in_process = 0;
    /* c->in full stops reading; moved on, it reads again */
    client_read_update(c);
}

/* ------------------------------------------------------------------ */
/* response side (the primary leg's calls)                             */

/* a WebSocket session's turns (proxy/http/wsturn.h) are requests of their own */
static void ws_turn_begin(void *arg, struct tt_request *turn)
{
    struct tt_conn *c = arg;

    (void)turn;
    tt_worker_request_start(c->w);
}

static void ws_turn_done(void *arg, struct tt_request *turn)
{
    struct tt_conn *c = arg;

    tt_worker_request_done(c->w, turn);
}

static const struct tt_ws_sess_ops ws_ops = { ws_turn_begin, ws_turn_done };

static int sink_head(void *arg, const struct tt_head *rsh, int status, int chunked,
                     int is_head, struct tt_usagewire_out **inj)
{
    struct tt_conn *c = arg;
    struct evbuffer *out = c->stage;
    int dechunk = c->http10 && chunked && !is_head;

    if (c->req.usage_injected && !is_head &&
        (*inj = tt_usagewire_response(status, rsh, out, !c->http10,
                                      &c->req.bytes_out)) != NULL)
        dechunk = 0;                /* the filter frames the body itself */
    if (c->http10 || c->w->draining || c->peer != PEER_OPEN ||
        (c->rq != RQ_DONE && status != 101))
        c->keepalive = 0;

    tt_add_str(out, "HTTP/1.1 ");
    tt_add_num(out, status);
    evbuffer_add(out, " ", 1);
    evbuffer_add(out, rsh->buf + rsh->target, rsh->tlen);
    evbuffer_add(out, "\r\n", 2);
    if (*inj != NULL)
        tt_usagewire_head(*inj, rsh);
    else
        tt_head_copy_fields(rsh, out, TT_HEAD_RESPONSE, status == 101, dechunk);
    if (status == 101)
        tt_add_str(out, "Connection: upgrade\r\n");
    else if (!c->keepalive)
        tt_add_str(out, "Connection: close\r\n");
    evbuffer_add(out, "\r\n", 2);
    c->resp_started = 1;
    if (status == 101) {
        enum tt_api api = tt_ws_session_api(c->req.api, rsh);
        conn_set_state(c, RQ_TUNNEL, "101 Switching Protocols");
        c->keepalive = 0;
        if (api != TT_API_OTHER)
            c->ws = tt_ws_sess_new(&c->req, api, rsh, CFG(c)->max_event_bytes,
                                   (enum tt_think_mode)CFG(c)->think_tags, &ws_ops, c);
        tunnel_activity(c);
    }
    return (dechunk ? TT_SINK_DECHUNK : 0) | (tt_delivery_on(&c->dl) ? TT_SINK_MARKS : 0);
}

static void sink_end(void *arg)
{
    struct tt_conn *c = arg;

    c->now = c->pri.now;
    if (c->rq != RQ_DONE) {
        /* the upstream answered before the request body ended: the rest
         * of the body goes nowhere and the connection closes after this */
        c->keepalive = 0;
        conn_set_state(c, RQ_DONE, "answered before the request ended");
        ctimer_off(c);
        client_read_stop(c);
        shadows_release(c, 0, SH_CANCEL, "primary answered before the request ended");
    }
    if (evbuffer_get_length(c->out) == 0)
        next_request(c);            /* no write callback is coming (may free c) */
    /* else client_write() finishes it once the last byte is handed over */
}

static void sink_ready(void *arg)
{
    struct tt_conn *c = arg;

    c->now = c->pri.now;
    if (c->rq == RQ_DONE)
        return;                     /* sent whole before (RQ_HOLD, a retry) */
    conn_set_state(c, RQ_BODY, "upstream ready");
    llhttp_resume(&c->rqp);
    if (!c->in_process)
        client_process(c);
}

static void sink_drained(void *arg)
{
    struct tt_conn *c = arg;

    c->now = c->pri.now;
    if (c->rq == RQ_BODY || c->rq == RQ_TUNNEL)
        client_process(c);
}

static void sink_tunnel(void *arg, struct evbuffer *in)
{
    struct tt_conn *c = arg;
    size_t n = evbuffer_get_length(in);

    c->req.bytes_out += n;
    if (c->ws != NULL)
        tt_ws_sess_feed(c->ws, 0, in, n, c->pri.now);
    evbuffer_add_buffer(c->stage, in);
    sink_flush(c);
    tunnel_activity(c);
}

static void sink_tunnel_closed(void *arg)
{
    struct tt_conn *c = arg;

    c->now = c->pri.now;
    if (c->ws != NULL)
        tt_ws_sess_end(c->ws, 0, c->now);
    request_finish(c);
    close_after_flush(c);
}

static const struct tt_leg_sink client_sink = {
    .head = sink_head, .room = sink_room, .body = sink_body, .full = sink_full,
    .flush = sink_flush, .mark = sink_mark, .end = sink_end, .fail = sink_fail,
    .ready = sink_ready, .drained = sink_drained,
    .close_delimited = sink_close_delimited,
    .tunnel = sink_tunnel, .tunnel_closed = sink_tunnel_closed,
};

/* ------------------------------------------------------------------ */
/* finishing                                                           */

/*
 * The request is over (delivered, failed or cancelled): record it.  With
 * <may_wait>, a delivered response whose last bytes the client has not yet
 * acknowledged moves to c->acking and is recorded when the acknowledgement
 * comes (acking_done); returns 1 then, else 0.
 */
static int request_end(struct tt_conn *c, int may_wait)
{
    struct tt_request *r = &c->req;

    if (!c->active)
        return 0;
    c->active = 0;
    if (r->ts[TT_TS_DELIVERED] == 0 && !r->cancelled && c->resp_started &&
        evbuffer_get_length(c->out) == 0)
        r->ts[TT_TS_DELIVERED] = c->now;
    tt_leg_stream_done(&c->pri, c->now);
    if (r->err_type == NULL && r->status >= 400)
        tt_request_set_error(r, r->status, "upstream_status",
                             "upstream answered with an error status");
    if (c->insp_on) {
        tt_inspect_finish(&c->insp, r);
        tt_inspect_free(&c->insp);
        c->insp_on = 0;
    }
    /* no response told whether it streams: the request did */
    if (r->ts[TT_TS_RESPONSE_HEADERS] == 0 && r->stream == 1)
        r->s.streaming = 1;
    c->nreq++;
    if (r->ended == 0)
        r->ended = c->now;
    if (may_wait && !r->cancelled && c->acking == NULL &&
        (tt_delivery_poll(&c->dl), !tt_delivery_settled(&c->dl)) &&
        (c->acking = malloc(sizeof(*c->acking))) != NULL) {
        struct timeval tv = tt_ms_tv(CFG(c)->send_timeout_ms);
        tt_request_move(c->acking, r);
        /* a client that never acknowledges: recorded without, after send_timeout */
        event_add(c->dl.watch, &tv);
        return 1;
    }
    tt_delivery_finish(&c->dl, r, evbuffer_get_length(c->stage) +
                       evbuffer_get_length(c->out));
    tt_worker_request_done(c->w, r);
    return 0;
}

static void request_finish(struct tt_conn *c)
{
    (void)request_end(c, 0);
}

/* the record that waited for the client's acknowledgement goes out (with
 * it, or without: the client left, the next request came, send_timeout) */
static void acking_done(struct tt_conn *c)
{
    struct tt_request *r = c->acking;

    c->acking = NULL;
    if (c->dl.watch != NULL)
        event_add(c->dl.watch, NULL);       /* the deadline is gone */
    tt_delivery_finish(&c->dl, r, 0);
    tt_worker_request_done(c->w, r);
    tt_request_reset(r);
    free(r);
}

/* response delivered: next request on this connection, or close */
static void next_request(struct tt_conn *c)
{
    /* a client still uploading is closed lingering at once (an early
     * answer): its record does not wait for an acknowledgement */
    int waits = request_end(c, !may_still_send(c));

    if (!c->keepalive || c->w->draining || c->peer != PEER_OPEN) {
        if (waits) {
            conn_closing(c);        /* closed once the acknowledgement is in (watch_cb) */
            return;
        }
        close_after_flush(c);
        return;
    }
    conn_set_state(c, RQ_IDLE, "response delivered, keep-alive");
    /* an idle keep-alive connection keeps no head buffers (about 7 KiB) */
    tt_head_free(&c->rqh);
    tt_leg_idle(&c->pri);
    tt_request_reset(&c->req);
    ctimer_set(c, CFG(c)->client_idle_ms);
    client_process(c);
}

/* the client went away, or the connection must go: cancel what runs */
static void conn_cancel(struct tt_conn *c, const char *why)
{
    if (c->active && RS(c) == LEG_TUNNEL) {
        /* a tunnel ends when either side closes: not a cancellation (a
         * WebSocket turn still open is: the client left mid-turn) */
        c->req.ts[TT_TS_RESPONSE_COMPLETE] = c->now;
        if (c->ws != NULL)
            tt_ws_sess_end(c->ws, 1, c->now);
    } else if (c->active && RS(c) != LEG_DONE) {
        c->req.cancelled = 1;
        tt_request_set_error(&c->req, 499, "cancelled", why);
        /* the current request's shadows follow on_client_cancel */
        shadows_release(c, 0, SH_CLIENT_GONE, why);
    }
    tt_leg_close(&c->pri);
    request_finish(c);
    conn_free(c);
}

/*
 * tokentap closes while the client may still be sending: its request not
 * all read (an early answer: 413, 400, 408, an upstream that answered
 * before the body ended) or bytes unread.  Closed plainly, the socket
 * would answer them with a reset, which can fail the client's write or
 * discard the answer before it is read: the socket lingers instead.
 */
static int may_still_send(struct tt_conn *c)
{
    if (c->peer != PEER_OPEN)
        return 0;
    if (evbuffer_get_length(c->in) > 0)
        return 1;
    switch (c->rq) {
    case RQ_HEAD:
        return 1;
    case RQ_HOLD:
    case RQ_WAIT_UP:
    case RQ_BODY:
    case RQ_DONE:               /* also when the upstream answered first */
        return !c->rq_msg_done;
    case RQ_IDLE:
    case RQ_TUNNEL:
        break;
    }
    return 0;
}

/*
 * Connection objects.  A closed connection's object goes back to its
 * worker's pool (up to CONN_POOL_MAX, none while draining) with what it
 * allocated once: its timer, its stage and, for a plain client, its
 * events and both buffers, which the next accepted socket takes over
 * (event_assign()).  An accept then allocates nothing, and a close frees
 * nothing (bench/README.md).  At most CONN_POOL_MAX objects (about 4.5 KiB
 * each) outlive their connections.
 */
#define CONN_POOL_MAX 64

static void conn_destroy(struct tt_conn *c)
{
    tt_leg_fini(&c->pri);
    tt_delivery_fini(&c->dl);
    if (c->cbev != NULL) {
        bufferevent_free(c->cbev);      /* and its buffers, c->in and c->out */
    } else {
        if (c->in != NULL)
            evbuffer_free(c->in);
        if (c->out != NULL)
            evbuffer_free(c->out);
    }
    if (c->rev != NULL)
        event_free(c->rev);
    if (c->wev != NULL)
        event_free(c->wev);
    if (c->ctimer != NULL)
        event_free(c->ctimer);
    if (c->stage != NULL)
        evbuffer_free(c->stage);
    if (c->held != NULL)
        evbuffer_free(c->held);
    free(c);
}

/* an object for a new connection: zeroed but for the timer, the stage
 * and a plain client's events and buffers; NULL when out of memory */
static struct tt_conn *conn_take(struct tt_worker *w)
{
    struct tt_conn *c = w->conn_pool;

    if (c != NULL) {
        struct event *ctimer = c->ctimer, *rev = c->rev, *wev = c->wev;
        struct evbuffer *stage = c->stage, *in = c->in, *out = c->out;
        struct event *watch = c->dl.spare;

        w->conn_pool = c->next;
        w->nconn_pool--;
        /* req and pri are set up whole by their own init */
        memset(c, 0, offsetof(struct tt_conn, req));
        memset(&c->shadows, 0, sizeof(*c) - offsetof(struct tt_conn, shadows));
        c->ctimer = ctimer;
        c->stage = stage;
        c->in = in;
        c->out = out;
        c->rev = rev;
        c->wev = wev;
        c->dl.spare = watch;
        c->dl.wfd = -1;                 /* tt_delivery_init() comes later */
        return c;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->dl.wfd = -1;
    c->ctimer = evtimer_new(w->base, ctimer_cb, c);
    c->stage = evbuffer_new();
    if (c->ctimer == NULL || c->stage == NULL) {
        conn_destroy(c);
        return NULL;
    }
    return c;
}

/*
 * The client's I/O on the accepted socket <fd>: a TLS bufferevent, or a
 * plain socket's events and buffers (kept from a pooled object, else
 * made).  0, or -1 when out of memory (<fd> is not closed then).
 */
static int client_io_open(struct tt_conn *c, evutil_socket_t fd)
{
    struct tt_worker *w = c->w;

    if (tt_tls_listens(w->tls)) {
        /* the bufferevent brings its own buffers (a pooled object has
         * plain ones only if the listener was plain when it was used) */
        if (c->in != NULL)
            evbuffer_free(c->in);
        if (c->out != NULL)
            evbuffer_free(c->out);
        c->in = c->out = NULL;
        c->cbev = tt_tls_accept_bev(w->tls, w->base, fd);
        if (c->cbev == NULL)
            return -1;
        c->in = bufferevent_get_input(c->cbev);
        c->out = bufferevent_get_output(c->cbev);
        return 0;
    }
    if ((c->in == NULL && (c->in = evbuffer_new()) == NULL) ||
        (c->out == NULL && (c->out = evbuffer_new()) == NULL))
        return -1;
    if (c->rev == NULL) {
        c->rev = event_new(w->base, fd, EV_READ | EV_PERSIST, client_readable, c);
        c->wev = event_new(w->base, fd, EV_WRITE | EV_PERSIST, client_writable, c);
        if (c->rev == NULL || c->wev == NULL)
            return -1;
    } else if (event_get_fd(c->rev) != fd) {
        /* neither is pending (client_socket_close): a new socket number */
        event_assign(c->rev, w->base, fd, EV_READ | EV_PERSIST, client_readable, c);
        event_assign(c->wev, w->base, fd, EV_WRITE | EV_PERSIST, client_writable, c);
    }
    return 0;
}

/*
 * The client's socket goes (to the linger set when the client may still
 * be sending).  A plain client's events and buffers stay, idle and
 * empty, for the pool or conn_destroy(); a TLS client's bufferevent is
 * freed.
 */
static void client_socket_close(struct tt_conn *c, int linger)
{
    struct bufferevent *bev = c->cbev;
    evutil_socket_t keep;

    if (bev == NULL) {
        if (c->reading)
            event_del(c->rev);
        if (c->writing)
            event_del(c->wev);
        c->reading = c->writing = 0;
        c->read_off = 1;
        evbuffer_drain(c->in, evbuffer_get_length(c->in));
        evbuffer_drain(c->out, evbuffer_get_length(c->out));
        if (linger)
            tt_linger_close(c->w->linger, c->cfd);
        else
            evutil_closesocket(c->cfd);
        return;
    }
    /* the socket outlives the bufferevent as a duplicate (for TLS too:
     * the close_notify is sent, the raw bytes that follow discarded) */
    keep = linger ? fcntl(c->cfd, F_DUPFD_CLOEXEC, 0) : -1;
    /* close_notify only when nothing was cut (TLS: a close-delimited body) */
    tt_tls_close(bev, c->pri.msg_done || c->rq == RQ_IDLE);
    c->cbev = NULL;
    c->in = c->out = NULL;              /* they were the bufferevent's */
    if (keep >= 0)
        tt_linger_close(c->w->linger, keep);
}

static void conn_free(struct tt_conn *c)
{
    struct tt_worker *w = c->w;
    int linger = c->closing && may_still_send(c);
    int pool = !w->draining && w->nconn_pool < CONN_POOL_MAX;

    if (c->acking != NULL)
        acking_done(c);
    if (c->ws != NULL)
        tt_ws_sess_end(c->ws, 1, c->now);   /* a turn still open: cancelled */
    request_finish(c);
    tt_ws_sess_free(c->ws);
    c->ws = NULL;
    /* shadows of earlier requests run on alone; unfinished copies stop */
    shadows_release(c, 1, SH_DETACH, "client closed the connection");
    tt_leg_park(&c->pri);           /* conn_destroy() frees the rest */
    if (c->insp_on)
        tt_inspect_free(&c->insp);
    if (c->req.pair != NULL) {
        tt_pair_leg_gone(c->req.pair, 0);
        c->req.pair = NULL;
    }
    tt_request_fini(&c->req);       /* set up again on the next accept */
    tt_delivery_park(&c->dl);       /* conn_destroy() frees the rest */
    tt_head_free(&c->rqh);
    ctimer_stop(c);
    client_socket_close(c, linger);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->nconns--;
    c->w = NULL;
    if (pool) {
        evbuffer_drain(c->stage, evbuffer_get_length(c->stage));
        if (c->held != NULL) {
            evbuffer_free(c->held);
            c->held = NULL;
        }
        c->next = w->conn_pool;
        w->conn_pool = c;
        w->nconn_pool++;
    } else {
        conn_destroy(c);
    }
    tt_worker_conn_gone(w);
}

/* ------------------------------------------------------------------ */
/* the client's events (both kinds of socket, see "client I/O")        */

/* request bytes were added to c->in */
static void client_read(struct tt_conn *c)
{
    c->now = c->last_cread = tt_now_mono();
    client_process(c);
}

/* everything in c->out is on the socket */
static void client_write(struct tt_conn *c)
{
    c->now = tt_now_mono();
    if (c->queued_since != 0) {
        tt_delay_observe(&c->w->delay, TT_DELAY_RESPONSE, c->queued_since, c->now);
        c->queued_since = 0;
    }
    if (c->dl.armed || c->dl.unmapped)
        tt_delivery_drained(&c->dl);    /* every marked byte is on the socket */
    if (c->closing && c->acking != NULL)
        return;                         /* closed by watch_cb() */
    if (c->closing) {
        conn_free(c);
        return;
    }
    if (RS(c) == LEG_BODY || RS(c) == LEG_TUNNEL) {
        c->pri.now = c->now;
        tt_leg_process(&c->pri);
    } else if (RS(c) == LEG_DONE && c->active) {
        c->req.ts[TT_TS_DELIVERED] = c->now;
        next_request(c);
    }
}

/*
 * A client's FIN while its response is on the way: has it left?  When its
 * TCP had already acknowledged response bytes, yes: it was reading the
 * answer and closed (a client still reading does not shut its sending side
 * in the middle of an answer).  Before that, the FIN may be an HTTP/1.1
 * half-close right after the request, which gets its answer (a client
 * that did leave then resets at the next bytes, seen by the watch).
 * Without delivery measurement the kernel is not asked: bytes handed over
 * stand in for bytes acknowledged.
 */
static int streaming_to(const struct tt_conn *c)
{
    int acked;

    if (c->rq != RQ_DONE || c->req.handed == 0 || RS(c) == LEG_DONE)
        return 0;
    acked = tt_delivery_response_acked(&c->dl);
    return acked != 0;
}

/*
 * The watch on the client socket (proxy/http/delivery.h): acknowledgement
 * stamps, the deadline of a record waiting for one, and the peer's close
 * or reset where the client is not read (half-closed, or its input
 * full).
 */
static void watch_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tt_conn *c = arg;
    (void)fd;

    c->now = tt_now_mono();
    if (c->acking != NULL &&
        ((what & EV_TIMEOUT) || (tt_delivery_poll(&c->dl), tt_delivery_settled(&c->dl)))) {
        acking_done(c);
        if (c->closing) {
            if (evbuffer_get_length(c->out) == 0)
                conn_free(c);
            return;
        }
    } else if (!(what & EV_TIMEOUT)) {
        tt_delivery_poll(&c->dl);
    }
    if (!(what & (EV_READ | EV_CLOSED)) || c->closing)
        return;
    if ((c->peer == PEER_EOF && tt_delivery_peer_gone(&c->dl)) ||
        ((what & EV_CLOSED) && c->peer == PEER_OPEN && streaming_to(c))) {
        c->peer = PEER_GONE;
        conn_cancel(c, "client closed the connection");
    }
}

/* the client's EOF, a socket error or send_timeout (BEV_EVENT_* bits in
 * <what>, as a bufferevent reports them) */
static void client_trouble(struct tt_conn *c, short what)
{
    c->now = tt_now_mono();
    if (what & BEV_EVENT_TIMEOUT) {
        /* send_timeout: the client stopped taking the response */
        c->peer = PEER_GONE;
        conn_cancel(c, "client stopped reading (send_timeout)");
        return;
    }
    if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) && c->active &&
        !c->closing && RS(c) != LEG_TUNNEL && !streaming_to(c) &&
        (c->rq == RQ_DONE ||
         ((c->rq == RQ_WAIT_UP || c->rq == RQ_HOLD || c->rq == RQ_BODY) &&
          evbuffer_get_length(c->in) > 0))) {
        /* a half-close after the request (or with its rest still
         * buffered): it still gets its response; a client that is really
         * gone fails the next write, and a body that ends short is
         * cancelled in client_process() */
        c->peer = PEER_EOF;
        c->keepalive = 0;
        client_read_stop(c);
        /* a client that did leave resets at the next bytes: seen at once */
        (void)tt_delivery_watch(&c->dl);
        return;
    }
    c->peer = PEER_GONE;
    if (what & BEV_EVENT_ERROR)
        tt_log_debug("client connection error: %s",
                     evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    if (c->cbev != NULL)
        tt_tls_log_errors(c->cbev, "client");
    conn_cancel(c, "client closed the connection");
}

static void ctimer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tt_conn *c = arg;
    (void)fd;
    (void)what;

    c->ctimer_due = 0;
    if (c->deadline == 0)
        return;                     /* the deadline went since it was set */
    c->now = tt_now_mono();
    if (c->deadline > c->now + 1000000u) {
        /* early (the deadline moved on): sleep for the rest */
        uint64_t left = c->deadline - c->now;
        struct timeval tv = { (time_t)(left / 1000000000u),
                              (suseconds_t)(left % 1000000000u / 1000u) };

        c->ctimer_due = c->deadline;
        evtimer_add(c->ctimer, &tv);
        return;
    }
    c->deadline = 0;
    switch (c->rq) {
    case RQ_HEAD:
        fail_request(c, 408, "request_timeout", "request head not complete within head_timeout");
        break;
    case RQ_IDLE:
        conn_free(c);
        break;
    case RQ_HOLD:
    case RQ_BODY:
        if (evbuffer_get_length(c->in) > 0) {
            /* bytes wait for the upstream: not the client's delay */
            ctimer_set(c, CFG(c)->body_idle_ms);
            break;
        }
        fail_request(c, 408, "request_timeout",
                     "no request body bytes within body_idle_timeout");
        break;
    case RQ_TUNNEL: {
        char shown[TT_RECORD_PATH_MAX];
        tt_record_redact_path(c->req.path, shown, sizeof(shown));
        c->req.ts[TT_TS_RESPONSE_COMPLETE] = c->now;
        tt_log_info("tunnel %.256s idle for upstream_idle_timeout: closed", shown);
        tt_leg_close(&c->pri);
        request_finish(c);
        close_after_flush(c);
        break;
    }
    case RQ_WAIT_UP:
    case RQ_DONE:
        break;
    }
}

/* ------------------------------------------------------------------ */
/* public                                                              */

struct tt_conn *tt_conn_accept(struct tt_worker *w, evutil_socket_t fd,
                               const struct sockaddr *sa, int salen)
{
    const struct tt_config *cfg = w->cfg;
    struct tt_conn *c;

    pthread_once(&settings_once, settings_init);
    c = conn_take(w);
    if (c == NULL) {
        evutil_closesocket(fd);
        return NULL;
    }
    c->w = w;
    c->cfd = fd;
    tt_head_init(&c->rqh, cfg->max_header_bytes, cfg->max_headers);
    tt_request_init(&c->req);
    tt_access_peer(sa, salen, c->req.client, sizeof(c->req.client));
    if (client_io_open(c, fd) < 0 ||
        tt_leg_init(&c->pri, w, &w->targets[0], &client_sink, c, c->stage,
                    &c->req) < 0) {
        if (c->cbev == NULL)
            evutil_closesocket(fd);     /* else the bufferevent closes it */
        tt_head_free(&c->rqh);
        conn_destroy(c);
        return NULL;
    }
    tt_nodelay_fd(fd);
    c->plain_client = c->cbev == NULL;
    tt_delivery_init(&c->dl, w->base, fd, !c->plain_client, cfg->delivery,
                     watch_cb, c);
    if (c->plain_client) {
        /* writes: wev once bytes wait (client_queued) */
        client_read_update(c);
    } else {
        struct timeval send = tt_ms_tv(cfg->send_timeout_ms);

        bufferevent_setcb(c->cbev, client_bev_read, client_bev_write, client_bev_event, c);
        bufferevent_setwatermark(c->cbev, EV_READ, 0, cfg->buffer_bytes);
        bufferevent_set_timeouts(c->cbev, NULL, &send);
        c->writing = 1;
        bufferevent_enable(c->cbev, EV_READ | EV_WRITE);
    }
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    c->rq = RQ_IDLE;                /* the first state (the object's zero) */
    /* a TLS handshake must finish within the head deadline: a client that
     * sends a partial or bogus record is cut then, not after client_idle */
    /* a new connection's request usually follows at once, with its
     * head_timeout: the timer fires within it already */
    if (c->plain_client)
        ctimer_set_early(c, cfg->client_idle_ms, cfg->head_timeout_ms);
    else
        ctimer_set(c, cfg->head_timeout_ms);
    return c;
}

struct tt_conn *tt_conn_next(struct tt_conn *c)
{
    return c->next;
}

void tt_conn_drain(struct tt_conn *c)
{
    c->keepalive = 0;
    if (!c->active)
        conn_free(c);           /* a record waiting for an ack goes without */
}

void tt_conn_abort(struct tt_conn *c)
{
    c->now = tt_now_mono();
    conn_cancel(c, "proxy shutting down");
}

void tt_conn_pool_free(struct tt_worker *w)
{
    struct tt_conn *c;

    while ((c = w->conn_pool) != NULL) {
        w->conn_pool = c->next;
        conn_destroy(c);
    }
    w->nconn_pool = 0;
}
