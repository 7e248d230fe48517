/*
 * Legs (see leg.h for the picture).
 *
 * The response side of every leg runs here, whoever reads it: llhttp over
 * the upstream connection's input in place, the head checked against the
 * framing rules, the de-chunked body kept aside for the stream decoder (in
 * place in the read buffer on a direct read, else copied).  Where the
 * bytes go is the sink's business (leg.h): the client connection for the
 * primary, drop_sink (below) for a shadow.
 *
 * Roles: what a shadow does differently, other than its sink, is decided
 * here and nowhere else (each place marked "role"):
 *   - the request copy: the primary takes the client's bytes, a shadow
 *     gets a bounded copy, abandoned when it overflows (tt_leg_send);
 *   - the upstream connection: a shadow's runs at a lower priority with
 *     small, rate-limited reads; the primary's is written at once
 *     (upstream_ready, tt_leg_push).  Both are read directly (a plain
 *     socket), the body parsed and decoded in the read buffer itself
 *     (leg_bytes): a shadow's bytes are never copied;
 *   - a shadow records itself (shadow_over) and frees itself (shadow_free).
 *
 * Every callback takes one CLOCK_MONOTONIC stamp first (l->now); all
 * timeline marks and decoded events of that read carry it.
 */
#include "proxy/http/leg.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "metrics/agg.h"
#include "metrics/pairs.h"
#include "proxy/http/delivery.h"
#include "proxy/http/io.h"
#include "proxy/base/log.h"
#include "proxy/decode/stream.h"
#include "proxy/http/upstream.h"
#include "proxy/http/trace.h"
#include "proxy/http/usagewire.h"
#include "proxy/http/worker.h"
#include "tls/tls.h"

static void leg_read(struct bufferevent *bev, void *arg);
static void leg_write(struct bufferevent *bev, void *arg);
static void leg_event(struct bufferevent *bev, short what, void *arg);
static void leg_fail(struct tt_leg *l, int status, const char *type, const char *msg);
static void shadow_over(struct tt_leg *l);
static void leg_set_state(struct tt_leg *l, enum tt_leg_state st, const char *why);
static const struct tt_leg_sink drop_sink;
static const struct tt_upstream_cbs leg_upstream_cbs;

#define CFG(l) ((l)->w->cfg)
#define SHADOW_READ_BYTES (16 * 1024)

/* ------------------------------------------------------------------ */
/* llhttp callbacks (response)                                         */

static int rs_on_status(llhttp_t *p, const char *at, size_t len)
{
    struct tt_leg *l = p->data;
    return tt_head_target(&l->rsh, at, len) < 0 ? -1 : 0;
}

static int rs_on_field(llhttp_t *p, const char *at, size_t len)
{
    struct tt_leg *l = p->data;
    return tt_head_field(&l->rsh, at, len) < 0 ? -1 : 0;
}

static int rs_on_value(llhttp_t *p, const char *at, size_t len)
{
    struct tt_leg *l = p->data;
    return tt_head_value(&l->rsh, at, len) < 0 ? -1 : 0;
}

static int rs_on_headers_complete(llhttp_t *p)
{
    struct tt_leg *l = p->data;
    int status = llhttp_get_status_code(p);

    if (status >= 100 && status < 200 && status != 101) {
        l->interim = 1;             /* 100 Continue and friends: no body */
        return 0;
    }
    l->head_done = 1;
    if (l->is_head)
        return 1;                   /* no body follows, whatever the headers say */
    return HPE_PAUSED;
}

static void decode_side(struct tt_leg *l);

static int rs_on_body(llhttp_t *p, const char *at, size_t len)
{
    struct tt_leg *l = p->data;

    if (l->inj != NULL)             /* sink: --inject-usage's filtered stream */
        tt_usagewire_feed(l->inj, at, len);     /* counts bytes_out */
    else
        l->req->bytes_out += len;
    if (l->dechunk)                 /* the sink gets it plain (TT_SINK_DECHUNK) */
        evbuffer_add(l->stage, at, len);
    if (l->stream != NULL) {
        /* decoded after the bytes are on their way to the client: from the
         * read buffer itself when it stays (a direct read), else a copy */
        if (l->in_place && l->side_len == 0 && l->nspan < TT_LEG_SPANS) {
            l->span[l->nspan].p = at;
            l->span[l->nspan].n = len;
            l->nspan++;
            return 0;
        }
        if (l->side_len + len > l->side_cap) {
            size_t cap = l->side_cap ? l->side_cap : 1024;
            char *q;
            while (cap < l->side_len + len)
                cap *= 2;
            q = realloc(l->side, cap);
            if (q == NULL) {
                decode_side(l);         /* out of memory: in order, before it */
                tt_stream_feed(l->stream, at, len, l->now);
                return 0;
            }
            l->side = q;
            l->side_cap = cap;
        }
        memcpy(l->side + l->side_len, at, len);
        l->side_len += len;
    }
    return 0;
}

static int rs_on_chunk_header(llhttp_t *p)
{
    struct tt_leg *l = p->data;
    return tt_chunks_on_header(&l->chunks, p);
}

static int rs_on_chunk_complete(llhttp_t *p)
{
    struct tt_leg *l = p->data;
    return tt_chunks_on_complete(&l->chunks);
}

static int rs_on_message_complete(llhttp_t *p)
{
    struct tt_leg *l = p->data;
    l->msg_done = 1;
    return HPE_PAUSED;
}

static llhttp_settings_t rs_settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

/* the parser callbacks, set once for all workers (legs start on any) */
static void settings_init(void)
{
    llhttp_settings_init(&rs_settings);
    rs_settings.on_status = rs_on_status;
    rs_settings.on_header_field = rs_on_field;
    rs_settings.on_header_value = rs_on_value;
    rs_settings.on_headers_complete = rs_on_headers_complete;
    rs_settings.on_body = rs_on_body;         /* returns 0 (proxy/decode/chunks.h) */
    rs_settings.on_chunk_header = rs_on_chunk_header;
    rs_settings.on_chunk_complete = rs_on_chunk_complete;
    rs_settings.on_message_complete = rs_on_message_complete;
}

/* ------------------------------------------------------------------ */
/* set-up                                                              */

static void leg_timer_cb(evutil_socket_t fd, short what, void *arg);

static int leg_alloc(struct tt_leg *l, struct tt_worker *w,
                     const struct tt_target *t)
{
    const struct tt_config *cfg = w->cfg;

    pthread_once(&settings_once, settings_init);
    l->w = w;
    l->t = t;
    if (l->timer == NULL)
        l->timer = evtimer_new(w->base, leg_timer_cb, l);
    if (l->out == NULL)
        l->out = evbuffer_new();
    if (l->timer == NULL || l->out == NULL ||
        tt_head_init(&l->rsh, cfg->max_header_bytes, cfg->max_headers) < 0)
        return -1;
    return 0;
}

int tt_leg_init(struct tt_leg *l, struct tt_worker *w, const struct tt_target *t,
                const struct tt_leg_sink *sink, void *arg, struct evbuffer *stage,
                struct tt_request *req)
{
    struct event *timer = l->timer;         /* kept by tt_leg_park(), or NULL */
    struct evbuffer *out = l->out;

    memset(l, 0, sizeof(*l));
    l->timer = timer;
    l->out = out;
    l->sink = sink;
    l->sink_arg = arg;
    l->stage = stage;
    l->req = req;
    return leg_alloc(l, w, t);
}

void tt_leg_reset(struct tt_leg *l)
{
    tt_head_clear(&l->rsh);
    evbuffer_drain(l->out, evbuffer_get_length(l->out));
    l->head_done = l->msg_done = l->interim = 0;
    l->sent_all = 0;
    l->dechunk = 0;
    l->is_head = 0;
    tt_usagewire_free(&l->inj);
    leg_set_state(l, LEG_IDLE, "next request");
}

void tt_leg_idle(struct tt_leg *l)
{
    leg_set_state(l, LEG_IDLE, "keep-alive");
    /* an idle keep-alive connection keeps no head buffers (about 7 KiB);
     * 10,000 idle clients are common, a re-allocation per request cheap */
    tt_head_free(&l->rsh);
    free(l->side);
    l->side = NULL;
    l->side_cap = 0;
}

void tt_leg_cut(struct tt_leg *l)
{
    tt_leg_close(l);
    leg_set_state(l, LEG_DONE, "answered by tokentap");
}

void tt_leg_stream_done(struct tt_leg *l, uint64_t now)
{
    if (l->stream == NULL)
        return;
    if (l->req->ts[TT_TS_RESPONSE_COMPLETE] == 0)
        tt_stream_end(l->stream, 0, now);
    tt_stream_free(l->stream);
    l->stream = NULL;
}

/* what tt_leg_fini() and tt_leg_park() both free */
static void leg_release(struct tt_leg *l)
{
    tt_leg_close(l);
    if (l->stream != NULL)
        tt_stream_free(l->stream);
    l->stream = NULL;
    tt_head_free(&l->rsh);
    if (l->replay)
        evbuffer_free(l->replay);
    l->replay = NULL;
    free(l->side);
    l->side = NULL;
    tt_usagewire_free(&l->inj);
}

void tt_leg_fini(struct tt_leg *l)
{
    leg_release(l);
    if (l->timer)
        event_free(l->timer);
    if (l->out)
        evbuffer_free(l->out);
    l->timer = NULL;
    l->out = NULL;
}

void tt_leg_park(struct tt_leg *l)
{
    leg_release(l);                 /* the timer is stopped there */
    if (l->out)
        evbuffer_drain(l->out, evbuffer_get_length(l->out));
}

/* the fields of a request that the client's side knows */
static void copy_client_side(struct tt_request *d, const struct tt_request *s)
{
    d->t0 = s->t0;
    d->start_wall_ns = s->start_wall_ns;
    d->ts[TT_TS_REQUEST_COMPLETE] = s->ts[TT_TS_REQUEST_COMPLETE];
    memcpy(d->request_id, s->request_id, sizeof(d->request_id));
    tt_trace_child(&d->trace, &s->trace);   /* own span, same trace */
    memcpy(d->method, s->method, sizeof(d->method));
    memcpy(d->path, s->path, sizeof(d->path));
    memcpy(d->model, s->model, sizeof(d->model));
    d->api = s->api;
    d->stream = s->stream;
    d->include_usage = s->include_usage;
    d->usage_injected = s->usage_injected;  /* it got the same bytes */
    d->max_tokens = s->max_tokens;
    d->bytes_in = s->bytes_in;
}

/*
 * A shadow leg and the request it records, one allocation.  A primary leg
 * is part of its client connection and records the connection's request,
 * so the leg itself holds none (a request is 2.8 KiB: every held stream
 * carried an unused one).
 */
struct shadow_leg {
    struct tt_leg     leg;          /* first: a shadow's leg is its struct */
    struct tt_request own;
};

struct tt_leg *tt_leg_new_shadow(struct tt_leg **chead, struct tt_worker *w,
                                 struct tt_target *t, const struct tt_request *r,
                                 unsigned seq, struct tt_pair *pair)
{
    struct shadow_leg *sl = calloc(1, sizeof(*sl));
    struct tt_leg *l;
    struct tt_request *own;

    if (sl == NULL)
        return NULL;
    l = &sl->leg;
    own = &sl->own;
    if (leg_alloc(l, w, t) < 0) {
        tt_leg_fini(l);
        free(sl);
        return NULL;
    }
    l->shadow = 1;
    l->sink = &drop_sink;
    l->sink_arg = l;
    l->chead = chead;
    l->cnext = *chead;
    if (*chead)
        (*chead)->cprev = l;
    *chead = l;
    l->seq = seq;
    l->req = own;
    tt_request_init(own);
    copy_client_side(own, r);
    own->upstream_name = t->name;
    own->target_idx = t->idx;
    own->shadow = 1;
    own->pair = pair;
    l->full = atomic_fetch_add(&t->inflight, 1) >= t->sh->max_inflight;
    l->counted = 1;
    l->wnext = w->legs;
    if (w->legs)
        w->legs->wprev = l;
    w->legs = l;
    w->nlegs++;
    return l;
}

void tt_leg_shadow_start(struct tt_leg *l, const struct tt_head *rqh,
                         const char *method, const char *add_id,
                         long long body_len, int draining)
{
    if (l->full || draining || tt_leg_head(l, rqh, method, 0, add_id, body_len) < 0) {
        tt_leg_drop(l, draining ? TT_DROP_DRAINING : TT_DROP_MAX_INFLIGHT);
        return;
    }
    tt_leg_start(l);                /* a failure there is the shadow's own */
}

/* unlink a shadow from its connection's list */
static void shadow_unlink_conn(struct tt_leg *l)
{
    if (l->chead == NULL)
        return;
    if (l->cprev)
        l->cprev->cnext = l->cnext;
    else
        *l->chead = l->cnext;
    if (l->cnext)
        l->cnext->cprev = l->cprev;
    l->cnext = l->cprev = NULL;
    l->chead = NULL;
}

/* a shadow's record is written and the leg freed */
static void shadow_free(struct tt_leg *l)
{
    struct tt_worker *w = l->w;
    struct shadow_leg *sl = (struct shadow_leg *)l;     /* its first member */
    struct tt_request *own = &sl->own;

    shadow_unlink_conn(l);
    if (l->wprev)
        l->wprev->wnext = l->wnext;
    else
        w->legs = l->wnext;
    if (l->wnext)
        l->wnext->wprev = l->wprev;
    w->nlegs--;
    if (l->counted)
        atomic_fetch_sub(&((struct tt_target *)l->t)->inflight, 1);
    if (own->pair != NULL) {
        /* not recorded (out of memory on the way): the pair still ends */
        tt_pair_leg_gone(own->pair, l->t->idx);
        own->pair = NULL;
    }
    tt_leg_fini(l);
    tt_request_reset(own);
    free(sl);
    tt_worker_conn_gone(w);
}

int tt_leg_head(struct tt_leg *l, const struct tt_head *rqh, const char *method,
                int upgrade, const char *add_id, long long body_len)
{
    const struct tt_url *up = &l->t->url;
    const struct tt_shadow_cfg *sh = l->t->sh;
    struct evbuffer *out = l->out;
    const char *skip[2 * TT_SHADOW_EDITS + 3];
    size_t lens[2 * TT_SHADOW_EDITS + 3];
    unsigned n = 0, i;
    /* --trace-propagate: the client's trace context is replaced by one
     * naming this leg's span as the parent (proxy/http/trace.c) */
    int trace = l->w->cfg->trace_propagate && l->req->trace.on;

    l->is_head = strcmp(method, "HEAD") == 0;
    if (sh != NULL) {
        for (i = 0; i < sh->n_remove; i++) {
            skip[n] = sh->remove_header[i];
            lens[n++] = strlen(sh->remove_header[i]);
        }
        for (i = 0; i < sh->n_set; i++) {
            skip[n] = sh->set_header[i];
            lens[n++] = strcspn(sh->set_header[i], ":");
        }
    }
    if (body_len >= 0) {            /* the body framed anew */
        skip[n] = "content-length";
        lens[n++] = 14;
    }
    if (trace) {
        skip[n] = "traceparent";
        lens[n++] = 11;
        skip[n] = "tracestate";
        lens[n++] = 10;
    }
    if (tt_add_str(out, method) < 0 || evbuffer_add(out, " ", 1) < 0 ||
        tt_add_str(out, up->base_path) < 0 ||
        evbuffer_add(out, rqh->buf + rqh->target, rqh->tlen) < 0 ||
        tt_add_str(out, " HTTP/1.1\r\nHost: ") < 0 || tt_add_str(out, up->authority) < 0 ||
        evbuffer_add(out, "\r\n", 2) < 0 ||
        tt_head_copy_fields_skip(rqh, out, TT_HEAD_REQUEST, upgrade, body_len >= 0,
                                 skip, lens, n) < 0 ||
        (body_len >= 0 &&
         (tt_add_str(out, "Content-Length: ") < 0 || tt_add_num(out, body_len) < 0 ||
          evbuffer_add(out, "\r\n", 2) < 0)))
        return -1;
    for (i = 0; sh != NULL && i < sh->n_set; i++) {
        const char *v = sh->set_header[i] + lens[sh->n_remove + i] + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        evbuffer_add_printf(out, "%.*s: %s\r\n", (int)lens[sh->n_remove + i],
                            sh->set_header[i], v);
    }
    if (add_id != NULL) {
        tt_add_str(out, "X-Request-Id: ");
        tt_add_str(out, add_id);
        evbuffer_add(out, "\r\n", 2);
    }
    if (trace) {
        char tp[TT_TRACEPARENT_LEN + 1];
        tt_traceparent_format(&l->req->trace, tp);
        tt_add_str(out, "traceparent: ");
        tt_add_str(out, tp);
        evbuffer_add(out, "\r\n", 2);
        if (l->req->trace.state[0]) {
            tt_add_str(out, "tracestate: ");
            tt_add_str(out, l->req->trace.state);
            evbuffer_add(out, "\r\n", 2);
        }
    }
    if (upgrade)
        tt_add_str(out, "Connection: upgrade\r\n");
    return evbuffer_add(out, "\r\n", 2);
}

int tt_leg_start(struct tt_leg *l)
{
    leg_set_state(l, LEG_CONNECTING, "request head ready");
    l->now = tt_now_mono();
    tt_timer_set(l->timer, l->t->connect_ms);
    return tt_upstream_get(l->w, l->t, &leg_upstream_cbs, l);
}

struct evbuffer *tt_leg_output(struct tt_leg *l)
{
    /* while connecting, l->up is set but its socket is not ours to write */
    return l->up != NULL && l->st != LEG_CONNECTING && l->st != LEG_IDLE
           ? bufferevent_get_output(l->up->bev) : l->out;
}

int tt_leg_push(struct tt_leg *l)
{
    struct evbuffer *out;

    /* role: only the primary writes at once (a shadow's bufferevent
     * writes, upstream_ready) */
    if (l->shadow || l->up == NULL || !l->up->direct ||
        l->st == LEG_CONNECTING || l->st == LEG_IDLE)
        return 0;
    out = bufferevent_get_output(l->up->bev);
    if (evbuffer_get_length(out) == 0 ||
        (bufferevent_get_enabled(l->up->bev) & EV_WRITE))
        return 0;                   /* nothing, or the bufferevent has it */
    evbuffer_write(out, bufferevent_getfd(l->up->bev));
    if (evbuffer_get_length(out) != 0) {
        /* the socket is full (or failed): the bufferevent writes the
         * rest, and reports an error through leg_event() */
        bufferevent_enable(l->up->bev, EV_WRITE);
        return 0;
    }
    {
        uint64_t now = tt_now_mono();
        if (l->queued_since != 0) {
            tt_delay_observe(&l->w->delay, TT_DELAY_REQUEST, l->queued_since, now);
            l->queued_since = 0;
        }
        if (l->sent_all && l->req->ts[TT_TS_REQUEST_SENT] == 0)
            l->req->ts[TT_TS_REQUEST_SENT] = now;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* shadows: the request copy                                           */

/* abandon a shadow's copy: closed, counted, recorded as dropped */
void tt_leg_drop(struct tt_leg *l, enum tt_drop why)
{
    char msg[128];

    if (l->over)
        return;
    snprintf(msg, sizeof(msg), "shadow copy abandoned: %s", tt_drop_names[why]);
    tt_log_debug("shadow %s: request %s: %s", l->t->name, l->req->request_id, msg);
    tt_agg_shadow_dropped(l->w->agg, l->t->name, why);
    tt_request_set_error(l->req, 0, "shadow_dropped", msg);
    tt_leg_close(l);
    if (l->stream != NULL)
        tt_stream_end(l->stream, 0, l->now);
    shadow_over(l);
}

/* append a copy of the first <n> bytes of <in> to <dst> */
static void copy_front(struct evbuffer *dst, struct evbuffer *in, size_t n)
{
    struct evbuffer_iovec v[16];
    struct evbuffer_ptr ptr;
    size_t done = 0;

    while (done < n) {
        int k, i;
        if (evbuffer_ptr_set(in, &ptr, done, EVBUFFER_PTR_SET) < 0)
            break;
        k = evbuffer_peek(in, (ev_ssize_t)(n - done), &ptr, v, 16);
        if (k <= 0)
            break;
        if (k > 16)
            k = 16;
        for (i = 0; i < k && done < n; i++) {
            size_t len = v[i].iov_len < n - done ? v[i].iov_len : n - done;
            evbuffer_add(dst, v[i].iov_base, len);
            done += len;
        }
    }
}

/* keep what goes out on a reused connection, for a retry, up to this */
#define REPLAY_MAX (64 * 1024)

void tt_leg_send(struct tt_leg *l, struct evbuffer *in, size_t n)
{
    struct evbuffer *dst;

    if (l->over || n == 0)
        return;
    dst = tt_leg_output(l);
    if (l->replay != NULL) {
        if (evbuffer_get_length(l->replay) + n > REPLAY_MAX) {
            evbuffer_free(l->replay);       /* too much to resend: no retry */
            l->replay = NULL;
        } else {
            copy_front(l->replay, in, n);
        }
    }
    if (!l->shadow) {               /* role: the primary takes the bytes */
        if (l->queued_since == 0 && l->st != LEG_CONNECTING)
            l->queued_since = l->now;       /* handed over in leg_write() */
        evbuffer_remove_buffer(in, dst, n);
        return;
    }
    if (evbuffer_get_length(dst) + n > l->t->sh->buffer_bytes) {
        tt_leg_drop(l, TT_DROP_BUFFER_FULL);
        return;
    }
    copy_front(dst, in, n);
}

/*
 * A reused connection that the server had closed (EOF or reset before any
 * response byte) never took the request: send it again, once, on a new
 * connection.  Returns 1 when a retry started.
 */
static int leg_retry(struct tt_leg *l)
{
    if (l->replay == NULL || l->got_bytes || l->retried || l->st != LEG_WAIT_HEAD)
        return 0;
    tt_log_debug("upstream %s: pooled connection closed under request %s, "
                 "sending it again on a new connection", l->t->name, l->req->request_id);
    tt_upstream_close(l->up);
    l->up = NULL;
    evbuffer_add_buffer(l->out, l->replay);
    evbuffer_free(l->replay);
    l->replay = NULL;
    l->retried = 1;
    l->req->ts[TT_TS_UPSTREAM_CONNECTED] = 0;
    l->req->ts[TT_TS_UPSTREAM_TLS] = 0;
    l->req->ts[TT_TS_REQUEST_SENT] = 0;
    leg_set_state(l, LEG_CONNECTING, "retry on a new connection");
    tt_timer_set(l->timer, l->t->connect_ms);
    tt_upstream_new(l->w, l->t, &leg_upstream_cbs, l);  /* a failure there fails the leg */
    return 1;
}

void tt_leg_request_done(struct tt_leg *l, const struct tt_request *r)
{
    if (l->shadow)
        copy_client_side(l->req, r);
    l->sent_all = 1;
    if (l->up != NULL && l->req->ts[TT_TS_REQUEST_SENT] == 0 &&
        evbuffer_get_length(bufferevent_get_output(l->up->bev)) == 0)
        l->req->ts[TT_TS_REQUEST_SENT] = l->now ? l->now : tt_now_mono();
    if (l->shadow && l->over)
        shadow_over(l);
}

/* ------------------------------------------------------------------ */
/* the response                                                        */

/* decode the body bytes of this read, now that they are forwarded: the
 * in-place parts first, then the copied ones (which follow them) */
static void decode_side(struct tt_leg *l)
{
    unsigned i;

    if (l->stream != NULL) {
        for (i = 0; i < l->nspan; i++)
            tt_stream_feed(l->stream, l->span[i].p, l->span[i].n, l->now);
        if (l->side_len > 0)
            tt_stream_feed(l->stream, l->side, l->side_len, l->now);
    }
    l->nspan = 0;
    l->side_len = 0;
}

void tt_leg_close(struct tt_leg *l)
{
    if (l->up != NULL) {
        tt_upstream_close(l->up);
        l->up = NULL;
    }
    if (l->replay != NULL) {
        evbuffer_free(l->replay);
        l->replay = NULL;
    }
    l->queued_since = 0;
    if (l->timer)
        evtimer_del(l->timer);
}

/*
 * The response head is complete: check it and set up decoding.  Returns
 * 0, or -1 when the leg failed.
 */
static int response_head(struct tt_leg *l)
{
    int status = llhttp_get_status_code(&l->rsp);
    const char *why, *ct;
    char ctype[128] = "";
    size_t len;
    int how;

    l->req->ts[TT_TS_RESPONSE_HEADERS] = l->now;
    evtimer_del(l->timer);
    if ((why = tt_head_check(&l->rsh, TT_HEAD_RESPONSE, l->rsp.http_major,
                             l->rsp.http_minor)) != NULL) {
        leg_fail(l, 502, "upstream_bad_response", why);
        return -1;
    }
    l->req->status = status;
    if ((how = l->sink->head(l->sink_arg, &l->rsh, status, (l->rsp.flags & F_CHUNKED) != 0,
                             l->is_head, &l->inj)) < 0)
        return -1;
    l->dechunk = (how & TT_SINK_DECHUNK) != 0;
    l->marks = (how & TT_SINK_MARKS) != 0;
    l->marks_tok = 1;               /* cleared by read_marks() (no stream: never read) */
    if ((ct = tt_head_get(&l->rsh, "content-type", &len)) != NULL) {
        if (len >= sizeof(ctype))
            len = sizeof(ctype) - 1;
        memcpy(ctype, ct, len);
        ctype[len] = '\0';
    }
    if (l->req->api != TT_API_OTHER && status != 101) {
        if (CFG(l)->compare_output) {
            l->req->has_digest = 1;
            l->req->digest = 0xcbf29ce484222325ULL;     /* FNV-1a 64 offset basis */
        }
        l->stream = tt_stream_new(l->req, l->req->api, ctype,
                                  (enum tt_think_mode)CFG(l)->think_tags);
        /* server timing headers (TGI x-*, openai-processing-ms) */
        tt_stream_head(l->stream, tt_head_lookup, &l->rsh);
    }
    if (status == 101) {
        l->req->upgraded = 1;
        leg_set_state(l, LEG_TUNNEL, "101 Switching Protocols");
        tt_upstream_idle(l->up, 0);
        return 0;
    }
    leg_set_state(l, LEG_BODY, "response head");
    tt_head_free(&l->rsh);          /* copied out: its buffers go back now */
    tt_upstream_idle(l->up, l->t->idle_ms);
    return 0;
}

static void response_complete(struct tt_leg *l)
{
    struct tt_upconn *u = l->up;

    leg_set_state(l, LEG_DONE, "response complete");
    l->req->ts[TT_TS_RESPONSE_COMPLETE] = l->now;
    evtimer_del(l->timer);
    if (l->stream != NULL)
        tt_stream_end(l->stream, 1, l->now);
    if (u != NULL) {
        l->up = NULL;
        u->requests++;
        if (l->sent_all && !l->up_eof && llhttp_should_keep_alive(&l->rsp) &&
            evbuffer_get_length(bufferevent_get_input(u->bev)) == 0 &&
            evbuffer_get_length(bufferevent_get_output(u->bev)) == 0 &&
            !l->w->draining)
            tt_upstream_put(u);
        else
            tt_upstream_close(u);
    }
    if (l->inj != NULL) {
        tt_usagewire_finish(l->inj);    /* what the filter held, the last chunk */
        l->sink->flush(l->sink_arg);
        tt_usagewire_free(&l->inj);
    }
    l->sink->end(l->sink_arg);
}

/* the leg's request failed on the upstream side: <type> a static string */
static void leg_fail(struct tt_leg *l, int status, const char *type, const char *msg)
{
    l->sink->fail(l->sink_arg, status, type, msg);
}

/* ------------------------------------------------------------------ */
/* a shadow's sink: the response is decoded (by the leg) and dropped     */

static int drop_head(void *arg, const struct tt_head *rsh, int status, int chunked,
                     int is_head, struct tt_usagewire_out **inj)
{
    (void)arg, (void)rsh, (void)status, (void)chunked, (void)is_head, (void)inj;
    return 0;                       /* nothing written, nothing measured */
}

/* a direct read (leg_bytes): always room, nothing ever queued */
static int drop_room(void *arg)
{
    (void)arg;
    return 0;
}

static int drop_body(void *arg, const char *buf, size_t n, int room)
{
    (void)arg, (void)buf, (void)n, (void)room;
    return 0;                       /* taken: dropped (the leg decodes it) */
}

static int drop_full(void *arg)
{
    (void)arg;
    return 0;                       /* it drains as the bytes come */
}

static void drop_nothing(void *arg)
{
    (void)arg;
}

static void drop_mark(void *arg, unsigned marks)
{
    (void)arg, (void)marks;
}

static void drop_tunnel(void *arg, struct evbuffer *in)
{
    (void)arg, (void)in;            /* shadows are sent no upgrades */
}

static void drop_end(void *arg)
{
    shadow_over(arg);
}

static void drop_fail(void *arg, int status, const char *type, const char *msg)
{
    struct tt_leg *l = arg;

    if (l->over)
        return;
    tt_log_debug("shadow %s: request %s: %d %s: %s", l->t->name,
                 l->req->request_id, status, type, msg);
    if (l->req->err_type == NULL)
        tt_request_set_error(l->req, status, type, msg);
    if (l->req->status == 0)
        l->req->status = status;
    if (l->stream != NULL && l->req->ts[TT_TS_RESPONSE_COMPLETE] == 0)
        tt_stream_end(l->stream, 0, l->now);
    tt_leg_close(l);
    shadow_over(l);
}

static const struct tt_leg_sink drop_sink = {
    .head = drop_head, .room = drop_room, .body = drop_body, .full = drop_full,
    .flush = drop_nothing, .mark = drop_mark, .end = drop_end, .fail = drop_fail,
    .ready = drop_nothing, .drained = drop_nothing, .close_delimited = drop_nothing,
    .tunnel = drop_tunnel, .tunnel_closed = drop_end,
};

/*
 * A 1xx head is complete: the primary's client gets it rewritten from the
 * parsed fields, the same way as the final head, so that a head split
 * over reads (or many in one read) arrives whole.
 */
static void interim_head(struct tt_leg *l)
{
    if (l->stage != NULL) {             /* a shadow's is dropped */
        struct evbuffer *out = l->stage;
        int status = llhttp_get_status_code(&l->rsp);
        tt_add_str(out, "HTTP/1.1 ");
        tt_add_num(out, status);
        evbuffer_add(out, " ", 1);
        evbuffer_add(out, l->rsh.buf + l->rsh.target, l->rsh.tlen);
        evbuffer_add(out, "\r\n", 2);
        tt_head_copy_fields(&l->rsh, out, TT_HEAD_RESPONSE, 0, 0);
        evbuffer_add(out, "\r\n", 2);
        l->sink->flush(l->sink_arg);
    }
    tt_head_clear(&l->rsh);
    l->interim = l->msg_done = 0;
    llhttp_resume(&l->rsp);
}

/*
 * The delivery marks (proxy/http/delivery.h) the client's next write of this
 * read ends, asked of the connection before the write: <ahead> bytes of
 * the response are about to be handed over, <e> is the parser's outcome.
 * Until the first token and the first output token are seen, the read is
 * decoded before it is written (a few microseconds, a few reads a
 * request), so that the write that carries one asks for its stamp; the
 * response's end is known from the parser.  A token event's place is the
 * end of its read.
 */
static void read_marks(struct tt_leg *l, enum llhttp_errno e, size_t ahead)
{
    struct tt_request *r = l->req;
    unsigned marks = 0;

    if (l->marks_tok && l->stream == NULL) {
        l->marks_tok = 0;           /* not decoded: no token marks */
    } else if (l->marks_tok) {
        int ft = r->ts[TT_TS_FIRST_TOKEN] == 0, fo = r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0;

        r->handed += ahead;
        decode_side(l);
        r->handed -= ahead;
        if (ft && r->ts[TT_TS_FIRST_TOKEN] != 0)
            marks |= TT_DM_BIT(TT_DM_FIRST_TOKEN);
        if (fo && r->ts[TT_TS_FIRST_OUTPUT_TOKEN] != 0)
            marks |= TT_DM_BIT(TT_DM_FIRST_OUTPUT_TOKEN);
        l->marks_tok = r->ts[TT_TS_FIRST_TOKEN] == 0 || r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0;
    }
    if (e == HPE_PAUSED && l->msg_done)
        marks |= TT_DM_BIT(TT_DM_RESPONSE);
    if (marks != 0)
        l->sink->mark(l->sink_arg, marks);
}

/* the per-read test, inline: past the first output token only the
 * response's end is marked */
#define READ_MARKS(l, e, ahead) \
    do { if ((l)->marks && ((l)->marks_tok || ((e) == HPE_PAUSED && (l)->msg_done))) \
             read_marks((l), (e), (ahead)); } while (0)

/*
 * The body bytes of a read are on their way to the client: decode them,
 * then the parser's outcome <e>: the message's end, or a framing error
 * (the cause; the cut stream its effect).  <l> may be gone after.
 */
static void body_read_done(struct tt_leg *l, enum llhttp_errno e)
{
    decode_side(l);
    if (e == HPE_PAUSED && l->msg_done) {
        response_complete(l);
        return;
    }
    if (e != HPE_OK) {
        const char *why = tt_parse_error(&l->rsp, e);
        tt_request_set_error(l->req, 502, "upstream_bad_response", why);
        if (l->stream != NULL)
            tt_stream_end(l->stream, 0, l->now);
        leg_fail(l, 502, "upstream_bad_response", why);
    }
}

/* move what the upstream sent as far as the state allows */
void tt_leg_process(struct tt_leg *l)
{
    struct evbuffer *in;
    enum llhttp_errno e;
    size_t n, avail;

    for (;;) {
        if (l->up == NULL)
            return;
        in = bufferevent_get_input(l->up->bev);
        avail = evbuffer_get_length(in);
        switch (l->st) {
        case LEG_WAIT_HEAD:
            if (avail == 0)
                return;
            n = tt_parse_buf(&l->rsp, in, 0, avail, &e, &l->rsh, &l->chunks);
            evbuffer_drain(in, n);
            if (l->interim && e == HPE_PAUSED && l->msg_done) {
                interim_head(l);
                continue;
            }
            if (e == HPE_PAUSED && l->head_done) {
                if (response_head(l) < 0)
                    return;
                if (l->msg_done) {
                    l->sink->mark(l->sink_arg, TT_DM_BIT(TT_DM_RESPONSE));
                    l->sink->flush(l->sink_arg);
                    response_complete(l);
                    return;
                }
                llhttp_resume(&l->rsp);
                continue;
            }
            if (e != HPE_OK || l->rsh.overflow) {
                leg_fail(l, 502, "upstream_bad_response",
                         l->rsh.overflow ? "upstream response head too large"
                                         : tt_parse_error(&l->rsp, e));
                return;
            }
            return;
        case LEG_BODY:
            /* backpressure from the sink (a head still staged goes out
             * with this read's body, in one write) */
            if (l->sink->full(l->sink_arg))
                return;                     /* resumed by tt_leg_process() */
            n = tt_parse_buf(&l->rsp, in, 0, avail, &e, NULL, &l->chunks);
            if (l->stage == NULL || l->dechunk || l->inj != NULL)
                evbuffer_drain(in, n);      /* dropped, or staged by rs_on_body */
            else
                evbuffer_remove_buffer(in, l->stage, n);
            READ_MARKS(l, e, evbuffer_get_length(l->stage));
            l->sink->flush(l->sink_arg);
            if (l->up->suspended)
                tt_upstream_read_resume(l->up);     /* direct reads: room again */
            if (l->up_eof && e == HPE_OK && evbuffer_get_length(in) == 0) {
                /* the bytes the server sent before closing have all gone:
                 * now its close is judged (a close-delimited end, or a
                 * truncated body) */
                leg_event(l->up->bev, BEV_EVENT_READING | BEV_EVENT_EOF, l);
                return;
            }
            body_read_done(l, e);
            return;
        case LEG_TUNNEL:
            l->sink->tunnel(l->sink_arg, in);
            if (l->up != NULL && l->up->suspended)
                tt_upstream_read_resume(l->up);
            return;
        case LEG_IDLE:
        case LEG_CONNECTING:
        case LEG_DONE:
            return;
        }
    }
}

/*
 * A direct read of the primary's body, straight from the worker's read
 * buffer (proxy/http/upstream.h on_bytes): llhttp over it in place, the bytes
 * sent to the client from it, no evbuffer in between.  Only in the plain
 * case (a body the client gets as it comes, nothing queued for it);
 * otherwise 0, and the bytes take the evbuffer path of tt_leg_process().
 * The parser's outcome is handled here exactly as there.
 */
static int leg_bytes(void *arg, const char *buf, size_t n)
{
    struct tt_leg *l = arg;
    struct tt_upconn *u = l->up;
    enum llhttp_errno e;
    size_t used = n;
    int room;

    if (l->st != LEG_BODY || l->dechunk || l->inj != NULL ||
        u == NULL || (room = l->sink->room(l->sink_arg)) < 0)
        return 0;
    l->now = u->last_read;
    l->in_place = 1;                /* <buf> stays until body_read_done() */
    e = tt_chunks_execute(&l->chunks, &l->rsp, buf, n, &used);
    l->in_place = 0;
    READ_MARKS(l, e, used);
    if (used > 0 && l->sink->body(l->sink_arg, buf, used, room) < 0) {
        evbuffer_add(l->stage, buf, used);      /* the sink is behind */
        l->sink->flush(l->sink_arg);
    }
    if (used < n)           /* after the message's end: as if left unread */
        evbuffer_add(bufferevent_get_input(u->bev), buf + used, n - used);
    body_read_done(l, e);
    return 1;
}

/* ------------------------------------------------------------------ */
/* shadows: the end                                                    */

/*
 * A shadow's response is over (ended, failed or dropped).  Its record is
 * written once the client's request is complete too (so that it carries
 * the model and the other fields read from the request body), or at once
 * when the client is gone.
 */
static void shadow_over(struct tt_leg *l)
{
    l->over = 1;
    tt_leg_close(l);
    if (!l->sent_all && l->chead != NULL)
        return;                     /* tt_leg_request_done() or tt_leg_release() */
    if (l->stream != NULL && l->req->ts[TT_TS_RESPONSE_COMPLETE] == 0)
        tt_stream_end(l->stream, 0, l->now);
    if (l->req->err_type == NULL && l->req->status >= 400)
        tt_request_set_error(l->req, l->req->status, "upstream_status",
                             "upstream answered with an error status");
    tt_worker_request_done(l->w, l->req);
    shadow_free(l);
}

void tt_leg_release(struct tt_leg *l, int cancel, const char *why)
{
    l->now = tt_now_mono();
    if (!l->sent_all || cancel) {
        if (!l->over) {
            l->req->cancelled = 1;
            tt_request_set_error(l->req, 499, "cancelled", why);
        }
        shadow_unlink_conn(l);
        if (l->over)
            shadow_over(l);
        else
            leg_fail(l, 499, "cancelled", why);
        return;
    }
    shadow_unlink_conn(l);
    if (l->over)
        shadow_over(l);
}

void tt_leg_abort(struct tt_leg *l)
{
    l->now = tt_now_mono();
    shadow_unlink_conn(l);
    if (l->over)
        shadow_over(l);
    else
        tt_leg_drop(l, TT_DROP_DRAINING);
}

/* ------------------------------------------------------------------ */
/* libevent callbacks                                                  */

static void leg_read(struct bufferevent *bev, void *arg)
{
    struct tt_leg *l = arg;
    (void)bev;
    /* a direct read stamped itself right after recv() */
    l->now = l->up != NULL && l->up->direct ? l->up->last_read : tt_now_mono();
    if (!l->got_bytes) {
        l->got_bytes = 1;           /* the server took the request */
        if (l->replay != NULL) {
            evbuffer_free(l->replay);
            l->replay = NULL;
        }
    }
    tt_leg_process(l);
}

static void leg_write(struct bufferevent *bev, void *arg)
{
    struct tt_leg *l = arg;

    l->now = tt_now_mono();
    if (l->queued_since != 0) {
        tt_delay_observe(&l->w->delay, TT_DELAY_REQUEST, l->queued_since, l->now);
        l->queued_since = 0;
    }
    if (l->sent_all && l->req->ts[TT_TS_REQUEST_SENT] == 0 &&
        evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        l->req->ts[TT_TS_REQUEST_SENT] = l->now;
    l->sink->drained(l->sink_arg);
}

static void leg_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_leg *l = arg;
    const char *tls_why;

    l->now = tt_now_mono();
    if (what & BEV_EVENT_TIMEOUT) {
        static const char why[] = "no bytes from the upstream within upstream_idle";
        tt_request_set_error(l->req, 504, "upstream_idle_timeout", why);
        if (l->stream != NULL)
            tt_stream_end(l->stream, 0, l->now);
        leg_fail(l, 504, "upstream_idle_timeout", why);
        return;
    }
    if (l->st == LEG_TUNNEL) {
        /* a tunnel is recorded with its latency only: open to close */
        l->req->ts[TT_TS_RESPONSE_COMPLETE] = l->now;
        tt_leg_close(l);
        l->sink->tunnel_closed(l->sink_arg);
        return;
    }
    if ((what & BEV_EVENT_EOF) && l->st == LEG_BODY && l->up != NULL &&
        evbuffer_get_length(bufferevent_get_input(l->up->bev)) > 0) {
        /* the server closed after bytes that still wait for the sink
         * (backpressure): they go first, and tt_leg_process(), resumed by
         * the sink, judges the close (drop_sink never waits: a shadow's
         * input is empty after every read) */
        l->up_eof = 1;
        return;
    }
    if ((what & BEV_EVENT_EOF) && l->st == LEG_BODY &&
        llhttp_message_needs_eof(&l->rsp)) {
        /* close-delimited body: EOF is its proper end */
        if (llhttp_finish(&l->rsp) == HPE_OK || l->msg_done) {
            l->sink->close_delimited(l->sink_arg);
            tt_leg_close(l);
            l->msg_done = 1;
            response_complete(l);
            return;
        }
    }
    tls_why = tt_tls_log_errors(bev, "upstream");
    if (leg_retry(l))
        return;
    if (l->st == LEG_BODY) {
        if (l->stream != NULL)
            tt_stream_end(l->stream, 0, l->now);
        leg_fail(l, 502, "truncated", "upstream closed the connection mid-response");
    } else if (tls_why != NULL) {
        /* e.g. a TLS 1.3 upstream refusing our (missing) client certificate */
        char msg[512];
        snprintf(msg, sizeof(msg), "upstream TLS error: %.400s", tls_why);
        leg_fail(l, 502, "upstream_tls", msg);
    } else {
        leg_fail(l, 502, "upstream_reset",
                 "upstream closed the connection before the response head");
    }
}

static void leg_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tt_leg *l = arg;
    (void)fd;
    (void)what;

    l->now = tt_now_mono();
    if (l->st == LEG_CONNECTING)
        leg_fail(l, 504, "upstream_connect_timeout",
                 "upstream connect not complete within connect_timeout");
    else
        leg_fail(l, 504, "upstream_timeout",
                 "no response head from the upstream within response_timeout");
}

/* ------------------------------------------------------------------ */
/* the pool's callbacks (proxy/http/upstream.h)                             */

static void upstream_ready(void *arg, struct tt_upconn *u, int reused)
{
    struct tt_leg *l = arg;

    l->up = u;
    l->now = tt_now_mono();
    l->req->upstream_reused = reused ? 1 : 0;
    l->req->ts[TT_TS_UPSTREAM_CONNECTED] = reused ? l->now : u->connected;
    if (u->tls_done)
        l->req->ts[TT_TS_UPSTREAM_TLS] = reused ? l->now : u->tls_done;
    if (!reused)
        tt_nodelay(u->bev);         /* once per connection */
    bufferevent_setcb(u->bev, leg_read, leg_write, leg_event, l);
    if (l->shadow)                  /* role: the upstream connection */
        /* a shadow never competes with the primary: lower priority, and
         * small reads so that a huge response is drained in short turns */
        bufferevent_priority_set(u->bev, TT_PRIO_SHADOW);
    bufferevent_set_timeouts(u->bev, NULL, NULL);
    /* a plain upstream is read directly (proxy/http/upstream.h), its body
     * parsed and decoded in the read buffer (leg_bytes); the primary
     * writes to it at once (tt_leg_push), a shadow through the
     * bufferevent.  TLS keeps the bufferevent's reads and writes (SSL) */
    if (tt_upstream_read_direct(u, l->shadow ? SHADOW_READ_BYTES : CFG(l)->buffer_bytes,
                                l->shadow ? l->t->rate_tick : 0) == 0) {
        if (l->shadow)
            bufferevent_enable(u->bev, EV_WRITE);
        else
            bufferevent_disable(u->bev, EV_WRITE);
        u->on_bytes = leg_bytes;
        u->on_arg = l;
    } else {
        if (l->shadow) {
            bufferevent_setwatermark(u->bev, EV_READ, 0, SHADOW_READ_BYTES);
            bufferevent_set_rate_limit(u->bev, l->t->rate);
        } else {
            bufferevent_setwatermark(u->bev, EV_READ, 0, CFG(l)->buffer_bytes);
        }
        bufferevent_enable(u->bev, EV_READ | EV_WRITE);
    }
    l->got_bytes = 0;
    l->up_eof = 0;
    if (reused && !l->retried && l->replay == NULL &&
        evbuffer_get_length(l->out) <= REPLAY_MAX &&
        (l->replay = evbuffer_new()) != NULL)
        copy_front(l->replay, l->out, evbuffer_get_length(l->out));
    evbuffer_add_buffer(bufferevent_get_output(u->bev), l->out);
    llhttp_init(&l->rsp, HTTP_RESPONSE, &rs_settings);
    l->rsp.data = l;
    tt_chunks_reset(&l->chunks);
    l->head_done = l->msg_done = l->interim = 0;
    leg_set_state(l, LEG_WAIT_HEAD, reused ? "pooled connection" : "connected");
    tt_timer_set(l->timer, l->t->response_ms);
    if (l->sent_all && evbuffer_get_length(bufferevent_get_output(u->bev)) == 0)
        l->req->ts[TT_TS_REQUEST_SENT] = l->now;
    l->sink->ready(l->sink_arg);
    /* a pooled connection is handed out inside the client's read, which
     * pushes once it has added the body; a new one comes on its own */
    if (!reused)
        tt_leg_push(l);
}

static void upstream_pending(void *arg, struct tt_upconn *u)
{
    struct tt_leg *l = arg;

    l->up = u;
}

static void upstream_failed(void *arg, int status, const char *type, const char *msg)
{
    struct tt_leg *l = arg;

    l->now = tt_now_mono();
    l->up = NULL;
    leg_fail(l, status, type, msg);
}

static const struct tt_upstream_cbs leg_upstream_cbs = {
    upstream_pending, upstream_ready, upstream_failed
};

/* ------------------------------------------------------------------ */
/* the state                                                           */

static const char *const leg_state_names[] = {
    [LEG_IDLE] = "idle", [LEG_CONNECTING] = "connecting",
    [LEG_WAIT_HEAD] = "wait_head", [LEG_BODY] = "body",
    [LEG_DONE] = "done", [LEG_TUNNEL] = "tunnel",
};

const char *tt_leg_state_name(enum tt_leg_state s)
{
    return (unsigned)s < sizeof(leg_state_names) / sizeof(leg_state_names[0])
           ? leg_state_names[s] : "?";
}

/* the one writer of l->st (invariants: leg.h) */
static void leg_set_state(struct tt_leg *l, enum tt_leg_state st, const char *why)
{
    tt_log_debug("%s %s: request %s: leg %s -> %s (%s)", l->shadow ? "shadow" : "upstream",
                 l->t->name, l->req->request_id, tt_leg_state_name(l->st),
                 tt_leg_state_name(st), why);
    l->st = st;
}
