/*
 * Client connections (see conn.h for the picture).
 *
 * Each connection runs two state machines, one per direction, because a
 * response may start before its request body has finished:
 *
 *   request  (rq): IDLE -> HEAD -> WAIT_UP -> BODY -> DONE -> IDLE ...
 *                                          \-> TUNNEL (101 Switching Protocols)
 *   response (rs): NONE -> WAIT_HEAD -> BODY -> DONE -> NONE ...
 *
 * Bytes are never copied into our own buffers: head bytes are parsed and
 * drained (the head is rewritten), body bytes are parsed in place (llhttp
 * over evbuffer_peek() iovecs) and then moved with evbuffer_remove_buffer().
 * The de-chunked body that llhttp hands to on_body is the side read that
 * feeds the stream decoder and the request inspector.
 *
 * Backpressure: a side's input is only moved while the other side's output
 * holds less than buffer_bytes; each bufferevent's read high watermark is
 * buffer_bytes, so libevent stops reading a socket whose input is full, and
 * the write callback (fired when an output drains) resumes the mover.
 *
 * Every read callback takes one CLOCK_MONOTONIC stamp first (c->now); all
 * timeline marks and decoded events of that read carry it.
 */
#include "proxy/conn.h"

#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <llhttp.h>
#include <openssl/rand.h>

#include "metrics/record.h"
#include "metrics/request.h"
#include "proxy/httphead.h"
#include "proxy/inspect.h"
#include "proxy/log.h"
#include "proxy/stream.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"
#include "tls/tls.h"

enum rq_state { RQ_IDLE, RQ_HEAD, RQ_WAIT_UP, RQ_BODY, RQ_DONE, RQ_TUNNEL };
enum rs_state { RS_NONE, RS_WAIT_HEAD, RS_BODY, RS_DONE, RS_TUNNEL };

struct tt_conn {
    struct tt_worker   *w;          /* borrowed */
    struct tt_conn     *next, *prev;/* worker's list */
    struct bufferevent *cbev;       /* owned: the client socket */
    struct tt_upconn   *up;         /* owned while set */
    struct event       *ctimer;     /* owned: head deadline, idle keep-alive */
    struct event       *utimer;     /* owned: connect, response head deadline */
    struct evbuffer    *uphead;     /* owned: request head for the upstream */
    struct evbuffer    *stage;      /* owned: response bytes on their way to the client */
    char               *side;       /* owned: de-chunked body of the current read */
    size_t              side_len, side_cap;
    llhttp_t            rqp, rsp;
    struct tt_head      rqh, rsh;
    enum rq_state       rq;
    enum rs_state       rs;
    struct tt_request   req;
    struct tt_stream   *stream;     /* owned, per response */
    struct tt_inspect   insp;
    uint64_t            now;        /* stamp of the read being handled */
    uint64_t            last_cread; /* stamp of the latest client read */
    size_t              head_bytes;
    uint64_t            body_bytes;
    unsigned            nreq;

    unsigned active:1;          /* a request is in progress (record pending) */
    unsigned keepalive:1;       /* client connection may serve another request */
    unsigned http10:1;
    unsigned is_head:1;         /* HEAD request: response has no body */
    unsigned dechunk:1;         /* HTTP/1.0 client, chunked response */
    unsigned resp_started:1;    /* response head written to the client */
    unsigned closing:1;         /* close once the client output drains */
    unsigned rq_head_done:1, rq_msg_done:1;
    unsigned rs_head_done:1, rs_msg_done:1, rs_interim:1;
    unsigned body_too_big:1;
    unsigned dry:1;             /* parser callbacks have no side effects */
    unsigned insp_on:1;
    unsigned in_process:1;      /* inside client_process() */
    unsigned plain_client:1;    /* client on a plain socket: direct writes */
};

static void client_read(struct bufferevent *bev, void *arg);
static void client_write(struct bufferevent *bev, void *arg);
static void client_event(struct bufferevent *bev, short what, void *arg);
static void upstream_read(struct bufferevent *bev, void *arg);
static void upstream_write(struct bufferevent *bev, void *arg);
static void upstream_event(struct bufferevent *bev, short what, void *arg);
static void client_process(struct tt_conn *c);
static void upstream_process(struct tt_conn *c);
static void conn_free(struct tt_conn *c);
static void request_finish(struct tt_conn *c);
static void next_request(struct tt_conn *c);

#define CFG(c) ((c)->w->cfg)

/* ------------------------------------------------------------------ */
/* llhttp callbacks                                                    */

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

static int rs_on_status(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    return tt_head_target(&c->rsh, at, len) < 0 ? -1 : 0;
}

static int rs_on_field(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    return tt_head_field(&c->rsh, at, len) < 0 ? -1 : 0;
}

static int rs_on_value(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;
    return tt_head_value(&c->rsh, at, len) < 0 ? -1 : 0;
}

static int rs_on_headers_complete(llhttp_t *p)
{
    struct tt_conn *c = p->data;
    int status = llhttp_get_status_code(p);

    if (status >= 100 && status < 200 && status != 101) {
        c->rs_interim = 1;          /* 100 Continue and friends: no body */
        return 0;
    }
    c->rs_head_done = 1;
    if (c->is_head)
        return 1;                   /* no body follows, whatever the headers say */
    return HPE_PAUSED;
}

static int rs_on_body(llhttp_t *p, const char *at, size_t len)
{
    struct tt_conn *c = p->data;

    c->req.bytes_out += len;
    if (c->dechunk)
        bufferevent_write(c->cbev, at, len);
    if (c->stream != NULL) {
        /* decoded after the bytes are on their way to the client */
        if (c->side_len + len > c->side_cap) {
            size_t cap = c->side_cap ? c->side_cap : 1024;
            char *q;
            while (cap < c->side_len + len)
                cap *= 2;
            q = realloc(c->side, cap);
            if (q == NULL) {
                tt_stream_feed(c->stream, at, len, c->now);
                return 0;
            }
            c->side = q;
            c->side_cap = cap;
        }
        memcpy(c->side + c->side_len, at, len);
        c->side_len += len;
    }
    return 0;
}

static int rs_on_message_complete(llhttp_t *p)
{
    struct tt_conn *c = p->data;
    c->rs_msg_done = 1;
    return HPE_PAUSED;
}

static llhttp_settings_t rq_settings, rs_settings;
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
    llhttp_settings_init(&rs_settings);
    rs_settings.on_status = rs_on_status;
    rs_settings.on_header_field = rs_on_field;
    rs_settings.on_header_value = rs_on_value;
    rs_settings.on_headers_complete = rs_on_headers_complete;
    rs_settings.on_body = rs_on_body;
    rs_settings.on_message_complete = rs_on_message_complete;
}

/*
 * Run parser <p> over the first <max> bytes of <in>, in place.  Returns the
 * number of bytes the parser consumed and sets <*err> to llhttp's result
 * (HPE_OK when all <max> bytes were consumed).  With <scan>, consumed bytes
 * are also checked for obs-fold.  An empty <in> still runs the parser once,
 * so that a bodyless message completes.
 */
static size_t parse_buf(llhttp_t *p, struct evbuffer *in, size_t max,
                        enum llhttp_errno *err, struct tt_head *scan)
{
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr ptr;
    size_t done = 0;
    int i, n;

    *err = HPE_OK;
    if (max == 0) {
        *err = llhttp_execute(p, "", 0);
        return 0;
    }
    while (done < max) {
        if (evbuffer_ptr_set(in, &ptr, done, EVBUFFER_PTR_SET) < 0)
            break;
        n = evbuffer_peek(in, (ev_ssize_t)(max - done), &ptr, v, 8);
        if (n <= 0)
            break;
        if (n > 8)
            n = 8;
        for (i = 0; i < n && done < max; i++) {
            const char *base = v[i].iov_base;
            size_t len = v[i].iov_len;
            enum llhttp_errno e;

            if (len > max - done)
                len = max - done;
            e = llhttp_execute(p, base, len);
            if (e != HPE_OK) {
                const char *pos = llhttp_get_error_pos(p);
                size_t used = pos != NULL && pos >= base ? (size_t)(pos - base) : 0;
                if (used > len)
                    used = len;
                if (scan != NULL)
                    tt_head_scan(scan, base, used);
                *err = e;
                return done + used;
            }
            if (scan != NULL)
                tt_head_scan(scan, base, len);
            done += len;
        }
    }
    return done;
}

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static void set_timer(struct event *ev, unsigned ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    evtimer_add(ev, &tv);
}

static void set_nodelay(struct bufferevent *bev)
{
    int one = 1;
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * Hand what is staged to the client.  On a plain socket with nothing
 * queued the bytes are written at once, in this read callback: no write
 * event is armed and no loop pass goes by before the client has them (the
 * common case for a stream).  What the socket does not take, and anything
 * on a TLS connection, goes to the bufferevent's output as usual.
 */
static void flush_stage(struct tt_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->cbev);

    if (evbuffer_get_length(c->stage) == 0)
        return;
    if (c->plain_client && evbuffer_get_length(out) == 0)
        evbuffer_write(c->stage, bufferevent_getfd(c->cbev));
    if (evbuffer_get_length(c->stage) > 0)
        evbuffer_add_buffer(out, c->stage);
}

/* decode the body bytes of this read, now that they are forwarded */
static void decode_side(struct tt_conn *c)
{
    if (c->side_len > 0 && c->stream != NULL)
        tt_stream_feed(c->stream, c->side, c->side_len, c->now);
    c->side_len = 0;
}

static void close_upstream(struct tt_conn *c)
{
    if (c->up != NULL) {
        tt_upstream_close(c->up);
        c->up = NULL;
    }
    evtimer_del(c->utimer);
}

/* copy a header value into a fixed field, truncated, without secrets */
static void copy_field(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* close the client once what is queued for it has been written */
static void close_after_flush(struct tt_conn *c)
{
    c->closing = 1;
    c->keepalive = 0;
    bufferevent_disable(c->cbev, EV_READ);
    evtimer_del(c->ctimer);
    if (evbuffer_get_length(bufferevent_get_output(c->cbev)) == 0)
        conn_free(c);
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

    char shown[TT_REDACT_MAX];

    tt_redact_path(c->req.path[0] ? c->req.path : "-", shown, sizeof(shown));
    tt_log_info("request %s %.256s: %d %s: %s", c->req.method[0] ? c->req.method : "-",
                shown, status, type, msg);
    close_upstream(c);
    if (c->active) {
        /* a request cut off inside its head: keep what is known of it */
        if (c->req.path[0] == '\0' && c->rqh.tlen > 0 && c->rqh.buf != NULL)
            copy_field(c->req.path, sizeof(c->req.path), c->rqh.buf + c->rqh.target,
                       c->rqh.tlen);
        tt_request_set_error(&c->req, status, type, msg);
        if (!c->resp_started)
            c->req.status = status;
    }
    if (!c->resp_started) {
        tt_error_response(bufferevent_get_output(c->cbev), status, kind, type,
                          msg, 1);
        c->resp_started = 1;
    }
    c->rs = RS_DONE;
    if (c->active)
        request_finish(c);
    if (c->w != NULL)
        close_after_flush(c);
}

/* ------------------------------------------------------------------ */
/* request side                                                        */

/* a generated id, so that even a request rejected mid-head has one */
static void generate_request_id(struct tt_conn *c)
{
    unsigned char rnd[8];
    size_t i;

    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        memcpy(rnd, &c->now, sizeof(rnd));
    memcpy(c->req.request_id, "tt-", 3);
    for (i = 0; i < sizeof(rnd); i++)
        snprintf(c->req.request_id + 3 + 2 * i, 3, "%02x", rnd[i]);
}

/* the client's X-Request-Id, when it sent one, replaces the generated id */
static void client_request_id(struct tt_conn *c)
{
    size_t len;
    const char *v = tt_head_get(&c->rqh, "x-request-id", &len);

    if (v != NULL && len > 0)
        copy_field(c->req.request_id, sizeof(c->req.request_id), v, len);
}

static void request_begin(struct tt_conn *c)
{
    tt_request_reset(&c->req);
    c->req.t0 = c->now;
    c->req.start_wall_ns = tt_now_wall();
    c->req.upstream_name = "primary";
    generate_request_id(c);
    tt_head_clear(&c->rqh);
    tt_head_clear(&c->rsh);
    llhttp_init(&c->rqp, HTTP_REQUEST, &rq_settings);
    c->rqp.data = c;
    c->head_bytes = 0;
    c->body_bytes = 0;
    c->rq_head_done = c->rq_msg_done = 0;
    c->rs_head_done = c->rs_msg_done = c->rs_interim = 0;
    c->resp_started = 0;
    c->body_too_big = 0;
    c->dechunk = 0;
    c->is_head = 0;
    c->active = 1;
    c->rq = RQ_HEAD;
    c->rs = RS_NONE;
    tt_worker_request_start(c->w);
    set_timer(c->ctimer, CFG(c)->head_timeout_ms);
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
    n = parse_buf(&copy, in, avail, &e, NULL);
    c->dry = 0;
    if (e == HPE_OK || e == HPE_PAUSED_UPGRADE)
        return NULL;
    if (e == HPE_PAUSED) {
        /* the message ended inside the buffered bytes */
        if (!c->keepalive && n < avail)
            return "data after Connection: close";
        return NULL;
    }
    return llhttp_get_error_reason(&copy) ? llhttp_get_error_reason(&copy)
                                          : llhttp_errno_name(e);
}

/*
 * The request head is complete: check it, rewrite it for the upstream and
 * ask for an upstream connection.  Returns 0 to go on, -1 when the
 * connection was failed (and possibly freed).
 */
static int request_head(struct tt_conn *c, struct evbuffer *in)
{
    const struct tt_config *cfg = CFG(c);
    const struct tt_url *up = c->w->up;
    const char *why, *method;
    char target[512];
    int upgrade;

    if (c->rqh.overflow || c->head_bytes > cfg->max_header_bytes) {
        fail_request(c, 431, "header_too_large", "request header block too large");
        return -1;
    }
    method = llhttp_method_name(llhttp_get_method(&c->rqp));
    copy_field(c->req.method, sizeof(c->req.method), method, strlen(method));
    copy_field(target, sizeof(target), c->rqh.buf + c->rqh.target, c->rqh.tlen);
    copy_field(c->req.path, sizeof(c->req.path), target, strlen(target));
    c->req.api = tt_api_detect(c->rqh.buf + c->rqh.target, c->rqh.tlen);
    client_request_id(c);

    if ((why = tt_head_framing_error(&c->rqh)) != NULL) {
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
    c->is_head = llhttp_get_method(&c->rqp) == HTTP_HEAD;
    upgrade = llhttp_get_upgrade(&c->rqp);
    if ((c->rqp.flags & F_CONTENT_LENGTH) &&
        c->rqp.content_length > cfg->max_body_bytes) {
        fail_request(c, 413, "payload_too_large", "request body exceeds max_body_bytes");
        return -1;
    }
    if ((why = dry_run(c, in)) != NULL) {
        fail_request(c, 400, "bad_request", why);
        return -1;
    }

    /* the head the upstream gets */
    evbuffer_drain(c->uphead, evbuffer_get_length(c->uphead));
    evbuffer_add_printf(c->uphead, "%s %s", method, up->base_path);
    evbuffer_add(c->uphead, c->rqh.buf + c->rqh.target, c->rqh.tlen);
    evbuffer_add_printf(c->uphead, " HTTP/1.1\r\nHost: %s\r\n", up->authority);
    tt_head_copy_fields(&c->rqh, c->uphead, TT_HEAD_REQUEST, upgrade, 0);
    if (cfg->add_request_id && tt_head_get(&c->rqh, "x-request-id", NULL) == NULL)
        evbuffer_add_printf(c->uphead, "X-Request-Id: %s\r\n", c->req.request_id);
    if (upgrade)
        evbuffer_add_printf(c->uphead, "Connection: upgrade\r\n");
    evbuffer_add(c->uphead, "\r\n", 2);

    if (c->req.api != TT_API_OTHER) {
        tt_inspect_init(&c->insp, cfg->inspect_max_bytes);
        c->insp_on = 1;
    }
    evtimer_del(c->ctimer);
    /* everything needed from the head is copied out: its ~4 KiB of
     * buffers go back now rather than live as long as the stream */
    tt_head_free(&c->rqh);
    c->rq = RQ_WAIT_UP;
    set_timer(c->utimer, cfg->connect_timeout_ms);
    /* on failure the request was answered and c->closing is set */
    return tt_upstream_get(c->w, c) < 0 ? -1 : 0;
}

static void request_complete(struct tt_conn *c)
{
    c->rq = RQ_DONE;
    /* the last request byte arrived with the latest client read, even when
     * it waited in the buffer for the upstream connection */
    c->req.ts[TT_TS_REQUEST_COMPLETE] = c->last_cread;
    c->req.bytes_in = c->body_bytes;
    if (c->insp_on) {
        tt_inspect_finish(&c->insp, &c->req);
        tt_inspect_free(&c->insp);
        c->insp_on = 0;
    }
    if (c->up != NULL &&
        evbuffer_get_length(bufferevent_get_output(c->up->bev)) == 0)
        c->req.ts[TT_TS_REQUEST_SENT] = c->now;
}

/* move what the client sent as far as the state allows */
static void client_process(struct tt_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->cbev);
    enum llhttp_errno e;
    size_t n, avail;

    c->in_process = 1;
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
            n = parse_buf(&c->rqp, in, avail, &e, &c->rqh);
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
                else
                    fail_request(c, 400, "bad_request",
                                 llhttp_get_error_reason(&c->rqp) ? llhttp_get_error_reason(&c->rqp)
                                                                  : llhttp_errno_name(e));
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
        case RQ_BODY: {
            struct evbuffer *uout = bufferevent_get_output(c->up->bev);
            if (evbuffer_get_length(uout) >= CFG(c)->buffer_bytes)
                goto out;           /* resumed by upstream_write() */
            n = parse_buf(&c->rqp, in, avail, &e, NULL);
            evbuffer_remove_buffer(in, uout, n);
            if (e == HPE_PAUSED && c->rq_msg_done) {
                request_complete(c);
                continue;
            }
            if (e == HPE_OK)
                goto out;
            if (c->body_too_big)
                fail_request(c, 413, "payload_too_large", "request body exceeds max_body_bytes");
            else
                fail_request(c, 400, "bad_request",
                             llhttp_get_error_reason(&c->rqp) ? llhttp_get_error_reason(&c->rqp)
                                                              : llhttp_errno_name(e));
            return;
        }
        case RQ_TUNNEL:
            if (c->up != NULL && avail > 0)
                evbuffer_add_buffer(bufferevent_get_output(c->up->bev), in);
            goto out;
        }
    }
out:
    c->in_process = 0;
}

/* ------------------------------------------------------------------ */
/* response side                                                       */

/*
 * The response head is complete: write the client's version of it and set
 * up decoding.  Returns 0, or -1 when the request was failed.
 */
static int response_head(struct tt_conn *c)
{
    struct evbuffer *out = c->stage;
    int status = llhttp_get_status_code(&c->rsp);
    const char *why, *ct;
    char ctype[128] = "";
    size_t len;
    int chunked = (c->rsp.flags & F_CHUNKED) != 0;

    c->req.ts[TT_TS_RESPONSE_HEADERS] = c->now;
    evtimer_del(c->utimer);
    if ((why = tt_head_framing_error(&c->rsh)) != NULL) {
        fail_request(c, 502, "upstream_bad_response", why);
        return -1;
    }
    c->req.status = status;
    c->dechunk = c->http10 && chunked && !c->is_head;
    if (c->http10 || c->w->draining || (c->rq != RQ_DONE && status != 101))
        c->keepalive = 0;

    evbuffer_add_printf(out, "HTTP/1.1 %d ", status);
    evbuffer_add(out, c->rsh.buf + c->rsh.target, c->rsh.tlen);
    evbuffer_add(out, "\r\n", 2);
    tt_head_copy_fields(&c->rsh, out, TT_HEAD_RESPONSE, status == 101, c->dechunk);
    if (status == 101)
        evbuffer_add_printf(out, "Connection: upgrade\r\n");
    else if (!c->keepalive)
        evbuffer_add_printf(out, "Connection: close\r\n");
    evbuffer_add(out, "\r\n", 2);
    c->resp_started = 1;

    if ((ct = tt_head_get(&c->rsh, "content-type", &len)) != NULL)
        copy_field(ctype, sizeof(ctype), ct, len);
    if (c->req.api != TT_API_OTHER && status != 101)
        c->stream = tt_stream_new(&c->req, c->req.api, ctype,
                                  (enum tt_think_mode)CFG(c)->think_tags);
    if (status == 101) {
        c->req.upgraded = 1;
        c->rs = RS_TUNNEL;
        c->rq = RQ_TUNNEL;
        c->keepalive = 0;
        bufferevent_set_timeouts(c->up->bev, NULL, NULL);
        return 0;
    }
    c->rs = RS_BODY;
    tt_head_free(&c->rsh);          /* copied out, as for the request head */
    {
        struct timeval idle = { CFG(c)->upstream_idle_ms / 1000,
                                (CFG(c)->upstream_idle_ms % 1000) * 1000 };
        bufferevent_set_timeouts(c->up->bev, &idle, NULL);
    }
    return 0;
}

static void response_complete(struct tt_conn *c)
{
    struct tt_upconn *u = c->up;

    c->rs = RS_DONE;
    c->req.ts[TT_TS_RESPONSE_COMPLETE] = c->now;
    if (c->stream != NULL)
        tt_stream_end(c->stream, 1, c->now);
    if (u != NULL) {
        c->up = NULL;
        u->requests++;
        if (c->rq == RQ_DONE && llhttp_should_keep_alive(&c->rsp) &&
            evbuffer_get_length(bufferevent_get_input(u->bev)) == 0 &&
            evbuffer_get_length(bufferevent_get_output(u->bev)) == 0 &&
            !c->w->draining)
            tt_upstream_put(u);
        else
            tt_upstream_close(u);
    }
    if (c->rq != RQ_DONE) {
        /* the upstream answered before the request body ended: the rest
         * of the body goes nowhere and the connection closes after this */
        c->keepalive = 0;
        c->rq = RQ_DONE;
        bufferevent_disable(c->cbev, EV_READ);
    }
    if (evbuffer_get_length(bufferevent_get_output(c->cbev)) == 0)
        next_request(c);            /* no write callback is coming (may free c) */
    /* else client_write() finishes it once the last byte is handed over */
}

/* move what the upstream sent as far as the state allows */
static void upstream_process(struct tt_conn *c)
{
    struct evbuffer *in, *out;
    enum llhttp_errno e;
    size_t n, avail;

    for (;;) {
        if (c->up == NULL)
            return;
        in = bufferevent_get_input(c->up->bev);
        out = bufferevent_get_output(c->cbev);
        avail = evbuffer_get_length(in);
        switch (c->rs) {
        case RS_WAIT_HEAD:
            if (avail == 0)
                return;
            n = parse_buf(&c->rsp, in, avail, &e, &c->rsh);
            if (c->rs_interim && e == HPE_PAUSED && c->rs_msg_done) {
                /* forward a 1xx head as is; the real response follows */
                evbuffer_remove_buffer(in, out, n);
                tt_head_clear(&c->rsh);
                c->rs_interim = c->rs_msg_done = 0;
                llhttp_resume(&c->rsp);
                continue;
            }
            evbuffer_drain(in, n);
            if (e == HPE_PAUSED && c->rs_head_done) {
                if (response_head(c) < 0)
                    return;
                if (c->rs_msg_done) {
                    flush_stage(c);
                    response_complete(c);
                    return;
                }
                llhttp_resume(&c->rsp);
                continue;
            }
            if (e != HPE_OK || c->rsh.overflow) {
                fail_request(c, 502, "upstream_bad_response",
                             c->rsh.overflow ? "upstream response head too large"
                             : llhttp_get_error_reason(&c->rsp) ? llhttp_get_error_reason(&c->rsp)
                                                                : llhttp_errno_name(e));
                return;
            }
            return;
        case RS_BODY:
            flush_stage(c);         /* the head, when it came with this read */
            if (evbuffer_get_length(out) >= CFG(c)->buffer_bytes)
                return;             /* resumed by client_write() */
            n = parse_buf(&c->rsp, in, avail, &e, NULL);
            if (c->dechunk) {
                evbuffer_drain(in, n);
            } else {
                evbuffer_remove_buffer(in, c->stage, n);
                flush_stage(c);
            }
            decode_side(c);
            if (e == HPE_PAUSED && c->rs_msg_done) {
                response_complete(c);
                return;
            }
            if (e != HPE_OK) {
                const char *why = llhttp_get_error_reason(&c->rsp)
                                ? llhttp_get_error_reason(&c->rsp) : llhttp_errno_name(e);
                /* the framing error is the cause; the cut stream its effect */
                tt_request_set_error(&c->req, 502, "upstream_bad_response", why);
                if (c->stream != NULL)
                    tt_stream_end(c->stream, 0, c->now);
                fail_request(c, 502, "upstream_bad_response", why);
            }
            return;
        case RS_TUNNEL:
            evbuffer_add_buffer(c->stage, in);
            flush_stage(c);
            return;
        case RS_NONE:
        case RS_DONE:
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* finishing                                                           */

/* the request is over (delivered, failed or cancelled): record it */
static void request_finish(struct tt_conn *c)
{
    struct tt_request *r = &c->req;

    if (!c->active)
        return;
    c->active = 0;
    if (r->ts[TT_TS_DELIVERED] == 0 && !r->cancelled && c->resp_started &&
        evbuffer_get_length(bufferevent_get_output(c->cbev)) == 0)
        r->ts[TT_TS_DELIVERED] = c->now;
    if (c->stream != NULL && r->ts[TT_TS_RESPONSE_COMPLETE] == 0)
        tt_stream_end(c->stream, 0, c->now);
    if (r->err_type == NULL && r->status >= 400)
        tt_request_set_error(r, r->status, "upstream_status",
                             "upstream answered with an error status");
    if (c->insp_on) {
        tt_inspect_finish(&c->insp, r);
        tt_inspect_free(&c->insp);
        c->insp_on = 0;
    }
    tt_worker_request_done(c->w, r);
    if (c->stream != NULL) {
        tt_stream_free(c->stream);
        c->stream = NULL;
    }
    c->nreq++;
}

/* response delivered: next request on this connection, or close */
static void next_request(struct tt_conn *c)
{
    request_finish(c);
    if (!c->keepalive || c->w->draining) {
        close_after_flush(c);
        return;
    }
    c->rq = RQ_IDLE;
    c->rs = RS_NONE;
    /* an idle keep-alive connection keeps no head buffers (about 7 KiB);
     * 10,000 idle clients are common, a re-allocation per request cheap */
    tt_head_free(&c->rqh);
    tt_head_free(&c->rsh);
    free(c->side);
    c->side = NULL;
    c->side_cap = 0;
    tt_request_reset(&c->req);
    set_timer(c->ctimer, CFG(c)->client_idle_ms);
    client_process(c);
}

/* the client went away, or the connection must go: cancel what runs */
static void conn_cancel(struct tt_conn *c, const char *why)
{
    if (c->active && c->rs == RS_TUNNEL) {
        /* a tunnel ends when either side closes: not a cancellation */
        c->req.ts[TT_TS_RESPONSE_COMPLETE] = c->now;
    } else if (c->active && c->rs != RS_DONE) {
        c->req.cancelled = 1;
        tt_request_set_error(&c->req, 499, "cancelled", why);
    }
    close_upstream(c);
    request_finish(c);
    conn_free(c);
}

static void conn_free(struct tt_conn *c)
{
    struct tt_worker *w = c->w;

    request_finish(c);
    close_upstream(c);
    if (c->stream != NULL)
        tt_stream_free(c->stream);
    if (c->insp_on)
        tt_inspect_free(&c->insp);
    tt_request_reset(&c->req);
    free(c->req.token_ts);
    tt_head_free(&c->rqh);
    tt_head_free(&c->rsh);
    event_free(c->ctimer);
    event_free(c->utimer);
    evbuffer_free(c->uphead);
    evbuffer_free(c->stage);
    free(c->side);
    /* close_notify only when nothing was cut (TLS: a close-delimited body) */
    tt_tls_close(c->cbev, c->rs_msg_done || c->rq == RQ_IDLE);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->nconns--;
    c->w = NULL;
    free(c);
    tt_worker_conn_gone(w);
}

/* ------------------------------------------------------------------ */
/* libevent callbacks                                                  */

static void client_read(struct bufferevent *bev, void *arg)
{
    struct tt_conn *c = arg;
    (void)bev;
    c->now = c->last_cread = tt_now_mono();
    client_process(c);
}

static void client_write(struct bufferevent *bev, void *arg)
{
    struct tt_conn *c = arg;
    (void)bev;

    c->now = tt_now_mono();
    if (c->closing) {
        conn_free(c);
        return;
    }
    if (c->rs == RS_BODY || c->rs == RS_TUNNEL)
        upstream_process(c);
    else if (c->rs == RS_DONE && c->active) {
        c->req.ts[TT_TS_DELIVERED] = c->now;
        next_request(c);
    }
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_conn *c = arg;
    (void)bev;

    if (what & BEV_EVENT_CONNECTED) {
        /* TLS handshake done: from now on the idle keep-alive limit */
        if (c->rq == RQ_IDLE)
            set_timer(c->ctimer, CFG(c)->client_idle_ms);
        return;
    }
    c->now = tt_now_mono();
    if (what & BEV_EVENT_ERROR)
        tt_log_debug("client connection error: %s",
                     evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    tt_tls_log_errors(c->cbev, "client");
    conn_cancel(c, "client closed the connection");
}

static void upstream_read(struct bufferevent *bev, void *arg)
{
    struct tt_conn *c = arg;
    (void)bev;
    c->now = tt_now_mono();
    upstream_process(c);
}

static void upstream_write(struct bufferevent *bev, void *arg)
{
    struct tt_conn *c = arg;

    c->now = tt_now_mono();
    if (c->rq == RQ_DONE && c->req.ts[TT_TS_REQUEST_SENT] == 0 &&
        evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        c->req.ts[TT_TS_REQUEST_SENT] = c->now;
    if (c->rq == RQ_BODY || c->rq == RQ_TUNNEL)
        client_process(c);
}

static void upstream_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_conn *c = arg;
    const char *tls_why;
    (void)bev;

    c->now = tt_now_mono();
    if (what & BEV_EVENT_TIMEOUT) {
        static const char why[] = "no bytes from the upstream within upstream_idle";
        tt_request_set_error(&c->req, 504, "upstream_idle_timeout", why);
        if (c->stream != NULL)
            tt_stream_end(c->stream, 0, c->now);
        fail_request(c, 504, "upstream_idle_timeout", why);
        return;
    }
    if (c->rs == RS_TUNNEL) {
        /* a tunnel is recorded with its latency only: open to close */
        c->req.ts[TT_TS_RESPONSE_COMPLETE] = c->now;
        close_upstream(c);
        request_finish(c);
        close_after_flush(c);
        return;
    }
    if ((what & BEV_EVENT_EOF) && c->rs == RS_BODY &&
        llhttp_message_needs_eof(&c->rsp)) {
        /* close-delimited body: EOF is its proper end */
        if (llhttp_finish(&c->rsp) == HPE_OK || c->rs_msg_done) {
            c->keepalive = 0;
            close_upstream(c);
            c->rs_msg_done = 1;
            response_complete(c);
            return;
        }
    }
    tls_why = tt_tls_log_errors(bev, "upstream");
    if (c->rs == RS_BODY) {
        if (c->stream != NULL)
            tt_stream_end(c->stream, 0, c->now);
        fail_request(c, 502, "truncated", "upstream closed the connection mid-response");
    } else if (tls_why != NULL) {
        /* e.g. a TLS 1.3 upstream refusing our (missing) client certificate */
        char msg[512];
        snprintf(msg, sizeof(msg), "upstream TLS error: %.400s", tls_why);
        fail_request(c, 502, "upstream_tls", msg);
    } else {
        fail_request(c, 502, "upstream_reset",
                     "upstream closed the connection before the response head");
    }
}

static void ctimer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tt_conn *c = arg;
    (void)fd;
    (void)what;

    c->now = tt_now_mono();
    if (c->rq == RQ_HEAD)
        fail_request(c, 408, "request_timeout", "request head not complete within head_timeout");
    else if (c->rq == RQ_IDLE)
        conn_free(c);
}

static void utimer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tt_conn *c = arg;
    (void)fd;
    (void)what;

    c->now = tt_now_mono();
    if (c->rq == RQ_WAIT_UP)
        fail_request(c, 504, "upstream_connect_timeout",
                     "upstream connect not complete within connect_timeout");
    else
        fail_request(c, 504, "upstream_timeout",
                     "no response head from the upstream within response_timeout");
}

/* ------------------------------------------------------------------ */
/* public                                                              */

struct tt_conn *tt_conn_accept(struct tt_worker *w, evutil_socket_t fd)
{
    const struct tt_config *cfg = w->cfg;
    struct tt_conn *c;

    pthread_once(&settings_once, settings_init);
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return NULL;
    }
    c->w = w;
    c->cbev = tt_tls_server_bev(w, fd);
    c->ctimer = evtimer_new(w->base, ctimer_cb, c);
    c->utimer = evtimer_new(w->base, utimer_cb, c);
    c->uphead = evbuffer_new();
    c->stage = evbuffer_new();
    tt_head_init(&c->rqh, cfg->max_header_bytes, cfg->max_headers);
    tt_head_init(&c->rsh, cfg->max_header_bytes, cfg->max_headers);
    tt_request_init(&c->req);
    if (c->cbev == NULL || c->ctimer == NULL || c->utimer == NULL || c->uphead == NULL ||
        c->stage == NULL) {
        if (c->cbev)
            bufferevent_free(c->cbev);
        else
            evutil_closesocket(fd);
        if (c->ctimer)
            event_free(c->ctimer);
        if (c->utimer)
            event_free(c->utimer);
        if (c->uphead)
            evbuffer_free(c->uphead);
        if (c->stage)
            evbuffer_free(c->stage);
        free(c);
        return NULL;
    }
    set_nodelay(c->cbev);
    c->plain_client = bufferevent_openssl_get_ssl(c->cbev) == NULL;
    bufferevent_setcb(c->cbev, client_read, client_write, client_event, c);
    bufferevent_setwatermark(c->cbev, EV_READ, 0, cfg->buffer_bytes);
    bufferevent_enable(c->cbev, EV_READ | EV_WRITE);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    c->rq = RQ_IDLE;
    /* a TLS handshake must finish within the head deadline: a client that
     * sends a partial or bogus record is cut then, not after client_idle */
    set_timer(c->ctimer, c->plain_client ? cfg->client_idle_ms : cfg->head_timeout_ms);
    return c;
}

void tt_conn_upstream_ready(struct tt_conn *c, struct tt_upconn *u, int reused)
{
    c->up = u;
    u->owner = c;
    c->now = tt_now_mono();
    c->req.upstream_reused = reused ? 1 : 0;
    c->req.ts[TT_TS_UPSTREAM_CONNECTED] = reused ? c->now : u->connected;
    if (u->tls_done)
        c->req.ts[TT_TS_UPSTREAM_TLS] = reused ? c->now : u->tls_done;
    set_nodelay(u->bev);
    bufferevent_setcb(u->bev, upstream_read, upstream_write, upstream_event, c);
    bufferevent_setwatermark(u->bev, EV_READ, 0, CFG(c)->buffer_bytes);
    bufferevent_set_timeouts(u->bev, NULL, NULL);
    bufferevent_enable(u->bev, EV_READ | EV_WRITE);
    evbuffer_add_buffer(bufferevent_get_output(u->bev), c->uphead);
    llhttp_init(&c->rsp, HTTP_RESPONSE, &rs_settings);
    c->rsp.data = c;
    c->rs = RS_WAIT_HEAD;
    c->rq = RQ_BODY;
    llhttp_resume(&c->rqp);
    set_timer(c->utimer, CFG(c)->response_timeout_ms);
    if (!c->in_process)
        client_process(c);
}

void tt_conn_upstream_pending(struct tt_conn *c, struct tt_upconn *u)
{
    c->up = u;
}

void tt_conn_upstream_failed(struct tt_conn *c, int status, const char *type,
                             const char *msg)
{
    c->now = tt_now_mono();
    c->up = NULL;
    fail_request(c, status, type, msg);
}

struct tt_conn *tt_conn_next(struct tt_conn *c)
{
    return c->next;
}

void tt_conn_drain(struct tt_conn *c)
{
    c->keepalive = 0;
    if (!c->active)
        conn_free(c);
}

void tt_conn_abort(struct tt_conn *c)
{
    c->now = tt_now_mono();
    conn_cancel(c, "proxy shutting down");
}
