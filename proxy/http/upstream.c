/*
 * Upstream connections (see upstream.h): connect, pool, hand over.  The
 * user of a connection is known only by its callbacks (u->cbs, u->owner):
 * this file includes nothing of the legs that use it.
 *
 * Pooled connections keep a read callback: any byte or EOF on an idle
 * keep-alive connection means the upstream closed or misbehaved, so it is
 * closed at once and never handed out stale.  The pool is LIFO (the most
 * recently used connection is the likeliest to be alive) and bounded by
 * upstream_pool.
 */
#include "proxy/http/upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "metrics/request.h"
#include "proxy/http/io.h"
#include "proxy/base/log.h"
#include "proxy/http/worker.h"
#include "tls/tls.h"

static struct tt_pool *pool_of(struct tt_upconn *u)
{
    return &u->w->pools[u->t->idx];
}

static void pool_unlink(struct tt_upconn *u)
{
    struct tt_pool *p = pool_of(u);

    if (u->prev)
        u->prev->next = u->next;
    else
        p->idle = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->next = u->prev = NULL;
    p->nidle--;
}

/* the read rate limit off: reads again as the watermark allows */
static void rate_off(struct tt_upconn *u)
{
    u->rate = 0;
    if (!u->throttled)
        return;
    event_del(u->rate_ev);
    u->throttled = 0;
    if (u->direct && !u->suspended)
        event_add(u->rev, NULL);
}

/* no more direct reads: after EOF, a socket error or the idle deadline */
static void direct_stop(struct tt_upconn *u)
{
    if (!u->direct)
        return;
    event_del(u->rev);
    if (u->idle_ev != NULL)
        event_del(u->idle_ev);
    if (u->rate_ev != NULL)
        event_del(u->rate_ev);
    u->direct = u->suspended = u->throttled = 0;
    u->idle_ms = 0;
    u->rate = 0;
}

void tt_upstream_close(struct tt_upconn *u)
{
    if (u == NULL)
        return;
    if (u->rev != NULL)
        event_free(u->rev);
    if (u->idle_ev != NULL)
        event_free(u->idle_ev);
    if (u->rate_ev != NULL)
        event_free(u->rate_ev);
    tt_tls_close(u->bev, 1);
    free(u);
}

static void pool_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_upconn *u = arg;
    (void)bev;
    (void)what;
    pool_unlink(u);
    tt_upstream_close(u);
}

static void pool_read(struct bufferevent *bev, void *arg)
{
    pool_event(bev, BEV_EVENT_EOF, arg);
}

void tt_upstream_put(struct tt_upconn *u)
{
    struct tt_worker *w = u->w;
    struct tt_pool *p = pool_of(u);

    u->owner = NULL;
    u->cbs = NULL;
    u->on_bytes = NULL;
    if (p->nidle >= u->t->pool || w->draining) {
        tt_upstream_close(u);
        return;
    }
    /* servers close idle keep-alive connections (uvicorn, under vLLM,
     * after 5 s); closing ours first keeps a request from being written
     * into a connection the server is closing at that very moment */
    bufferevent_setcb(u->bev, pool_read, NULL, pool_event, u);
    if (u->direct) {
        /* direct reads stay on: they see the server's close as well,
         * and the next request needs no re-registration */
        rate_off(u);
        tt_upstream_read_resume(u);
    } else {
        bufferevent_enable(u->bev, EV_READ);
    }
    tt_upstream_idle(u, u->t->pool_idle_ms);
    u->next = p->idle;
    u->prev = NULL;
    if (p->idle)
        p->idle->prev = u;
    p->idle = u;
    p->nidle++;
}

void tt_upstream_close_idle(struct tt_worker *w)
{
    for (unsigned i = 0; i < TT_MAX_TARGETS; i++)
        while (w->pools[i].idle != NULL) {
            struct tt_upconn *u = w->pools[i].idle;
            pool_unlink(u);
            tt_upstream_close(u);
        }
}

static void connect_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_upconn *u = arg;
    const struct tt_upstream_cbs *cbs = u->cbs;
    void *owner = u->owner;
    const struct tt_url *url = &u->t->url;
    int tls = url->tls;
    (void)bev;

    if (what & BEV_EVENT_CONNECTED) {
        uint64_t now = tt_now_mono();

        if (tls && u->connected == 0) {
            /* TCP is up; the TLS handshake follows on the same socket */
            char why[256], msg[1024];

            u->connected = now;
            u->bev = tt_tls_connect_start(u->w->tls, u->w->id, u->t->idx, u->bev, why, sizeof(why));
            if (u->bev == NULL) {
                snprintf(msg, sizeof(msg), "TLS to upstream %s:%s: %s",
                         url->host, url->port, why);
                free(u);
                cbs->failed(owner, 502, "upstream_tls", msg);
                return;
            }
            bufferevent_setcb(u->bev, NULL, NULL, connect_event, u);
            return;
        }
        u->connecting = 0;
        if (tls)
            u->tls_done = now;
        else
            u->connected = now;
        cbs->ready(owner, u, 0);
        return;
    }
    {
        char msg[512];
        const char *why = NULL;
        int in_tls = tls && u->connected != 0;
        int dns_err = in_tls ? 0 : bufferevent_socket_get_dns_error(u->bev);

        if (dns_err)
            why = evutil_gai_strerror(dns_err);
        if (why == NULL && in_tls)
            why = tt_tls_log_errors(u->bev, "upstream");
        if (why == NULL && in_tls && (what & BEV_EVENT_EOF))
            why = "the upstream closed the connection during the handshake";
        if (why == NULL)
            why = evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
        snprintf(msg, sizeof(msg), "%s upstream %s:%s: %s",
                 in_tls ? "TLS handshake with" : "cannot connect to",
                 url->host, url->port, why);
        tt_upstream_close(u);
        cbs->failed(owner, 502, in_tls ? "upstream_tls" : "upstream_connect", msg);
    }
}

int tt_upstream_get(struct tt_worker *w, const struct tt_target *t,
                    const struct tt_upstream_cbs *cbs, void *arg)
{
    struct tt_upconn *u = w->pools[t->idx].idle;

    if (u != NULL) {
        pool_unlink(u);
        u->cbs = cbs;
        u->owner = arg;
        cbs->ready(arg, u, 1);
        return 0;
    }
    return tt_upstream_new(w, t, cbs, arg);
}

int tt_upstream_new(struct tt_worker *w, const struct tt_target *t,
                    const struct tt_upstream_cbs *cbs, void *arg)
{
    struct tt_upconn *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        cbs->failed(arg, 502, "upstream_connect", "out of memory");
        return -1;
    }
    u->w = w;
    u->t = t;
    u->cbs = cbs;
    u->owner = arg;
    u->connecting = 1;
    u->bev = tt_tls_connect_bev(w->base);
    if (u->bev == NULL) {
        free(u);
        cbs->failed(arg, 502, "upstream_connect", "cannot create a connection");
        return -1;
    }
    bufferevent_setcb(u->bev, NULL, NULL, connect_event, u);
    /* the owner learns of the connection only on success; until then a
     * failure is reported through connect_event */
    cbs->pending(arg, u);
    if (bufferevent_socket_connect_hostname(u->bev, w->dns, AF_UNSPEC,
                                            t->url.host, atoi(t->url.port)) < 0) {
        cbs->pending(arg, NULL);
        tt_upstream_close(u);
        cbs->failed(arg, 502, "upstream_connect", "cannot start the upstream connect");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* direct reads (see upstream.h)                                       */

static void direct_event(struct tt_upconn *u, short what)
{
    bufferevent_event_cb eventcb;
    void *arg;

    bufferevent_getcb(u->bev, NULL, NULL, &eventcb, &arg);
    if (eventcb != NULL)
        eventcb(u->bev, (short)(BEV_EVENT_READING | what), arg);
}

static void direct_suspend(struct tt_upconn *u)
{
    event_del(u->rev);
    u->suspended = 1;
}

/* the bucket filled for the ticks since it last was, up to two ticks' worth */
static void rate_fill(struct tt_upconn *u, uint64_t now)
{
    uint64_t tick = now / TT_RATE_TICK_NS;

    if (tick <= u->tick)            /* <now> may be an older stamp */
        return;
    u->bucket = tick - u->tick >= 2 || u->bucket >= u->rate ? 2 * u->rate
                                                            : u->bucket + u->rate;
    u->tick = tick;
}

/* the rate wait is over: reads again once the bucket has bytes */
static void rate_refilled(evutil_socket_t fd, short what, void *arg)
{
    struct tt_upconn *u = arg;
    struct timeval tick = TT_RATE_TICK_TV;
    (void)fd;
    (void)what;

    rate_fill(u, tt_now_mono());
    if (u->bucket == 0) {
        evtimer_add(u->rate_ev, &tick);
        return;
    }
    u->throttled = 0;
    if (!u->suspended)
        event_add(u->rev, NULL);
}

/* <n> bytes were read: taken from the bucket; when it is empty, no reads
 * for a tick (libevent's wait: a whole tick from now) */
static void rate_take(struct tt_upconn *u, size_t n, uint64_t now)
{
    struct timeval tick = TT_RATE_TICK_TV;

    u->bucket -= n < u->bucket ? n : u->bucket;
    if (u->bucket > 0)
        return;
    rate_fill(u, now);
    if (u->bucket > 0)
        return;
    event_del(u->rev);
    u->throttled = 1;
    evtimer_add(u->rate_ev, &tick);
}

static void direct_read(evutil_socket_t fd, short what, void *arg)
{
    struct tt_upconn *u = arg;
    struct evbuffer *in = bufferevent_get_input(u->bev);
    size_t len = evbuffer_get_length(in);
    size_t room = u->high > len ? u->high - len : 0;
    bufferevent_data_cb readcb;
    void *cbarg;
    ssize_t n;
    (void)what;

    if (room == 0) {
        direct_suspend(u);
        return;
    }
    if (room > sizeof(u->w->rbuf))
        room = sizeof(u->w->rbuf);
    if (u->rate != 0) {
        /* filled as of the last read's stamp: never more than the rate
         * allows; never empty here (rate_take waits for a refill) */
        rate_fill(u, u->last_read);
        if (room > u->bucket)
            room = u->bucket;
        if (room == 0) {
            rate_take(u, 0, tt_now_mono());
            return;
        }
    }
    n = tt_recv(fd, u->w->rbuf, room, 0);
    u->last_read = tt_now_mono();
    if (n > 0) {
        if (u->rate != 0)
            rate_take(u, (size_t)n, u->last_read);
        if (len == 0 && u->on_bytes != NULL &&
            u->on_bytes(u->on_arg, (const char *)u->w->rbuf, (size_t)n))
            return;                     /* taken whole; <u> may be gone */
        if (evbuffer_add(in, u->w->rbuf, (size_t)n) < 0) {
            direct_stop(u);
            errno = ENOMEM;
            direct_event(u, BEV_EVENT_ERROR);
            return;
        }
        if (len + (size_t)n >= u->high)
            direct_suspend(u);
        bufferevent_getcb(u->bev, &readcb, NULL, NULL, &cbarg);
        if (readcb != NULL)
            readcb(u->bev, cbarg);      /* may close <u> */
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    /* as the bufferevent does: no more reads after EOF or an error */
    direct_stop(u);
    direct_event(u, n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR);
}

static void direct_idle(evutil_socket_t fd, short what, void *arg)
{
    struct tt_upconn *u = arg;
    uint64_t now = tt_now_mono();
    uint64_t limit = (uint64_t)u->idle_ms * 1000000u;
    uint64_t quiet;
    (void)fd;
    (void)what;

    if (u->suspended || u->throttled)   /* waiting for the client or for
                                         * the rate limit is not idleness */
        u->last_read = now;
    quiet = now - u->last_read;
    if (quiet < limit) {
        uint64_t left = limit - quiet;
        struct timeval tv = { (time_t)(left / 1000000000u),
                              (suseconds_t)(left % 1000000000u / 1000u) };
        if (tv.tv_sec == 0 && tv.tv_usec == 0)
            tv.tv_usec = 1;
        evtimer_add(u->idle_ev, &tv);
        return;
    }
    direct_stop(u);
    direct_event(u, BEV_EVENT_TIMEOUT);
}

int tt_upstream_read_direct(struct tt_upconn *u, size_t high, size_t rate)
{
    evutil_socket_t fd = bufferevent_getfd(u->bev);
    int prio = bufferevent_get_priority(u->bev);

    if (bufferevent_openssl_get_ssl(u->bev) != NULL || fd < 0)
        return -1;
    /* once per connection (its pool is its target's: the same priority) */
    if (u->rev == NULL &&
        ((u->rev = event_new(u->w->base, fd, EV_READ | EV_PERSIST, direct_read, u)) == NULL ||
         event_priority_set(u->rev, prio) < 0))
        return -1;
    if (rate != 0 && u->rate_ev == NULL &&
        ((u->rate_ev = evtimer_new(u->w->base, rate_refilled, u)) == NULL ||
         event_priority_set(u->rate_ev, prio) < 0))
        return -1;
    if (evbuffer_get_length(bufferevent_get_input(u->bev)) != 0)
        return -1;              /* never: a handed-out connection has no input */
    if (u->idle_ev != NULL)
        event_del(u->idle_ev);  /* the pool's deadline */
    bufferevent_disable(u->bev, EV_READ);
    bufferevent_setwatermark(u->bev, EV_READ, 0, 0);
    bufferevent_set_timeouts(u->bev, NULL, NULL);
    u->high = high > 0 ? high : TT_READ_BYTES;
    u->direct = 1;
    u->suspended = u->throttled = 0;
    u->idle_ms = 0;
    u->last_read = tt_now_mono();
    u->rate = rate;
    u->bucket = rate;           /* one tick's worth to begin with */
    u->tick = u->last_read / TT_RATE_TICK_NS;
    if (u->rate_ev != NULL)
        event_del(u->rate_ev);
    if (event_add(u->rev, NULL) < 0) {
        u->direct = 0;
        return -1;
    }
    return 0;
}

void tt_upstream_read_resume(struct tt_upconn *u)
{
    if (!u->suspended ||
        evbuffer_get_length(bufferevent_get_input(u->bev)) >= u->high)
        return;
    u->suspended = 0;
    u->last_read = tt_now_mono();
    if (!u->throttled)
        event_add(u->rev, NULL);
}

void tt_upstream_idle(struct tt_upconn *u, unsigned ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

    if (!u->direct) {
        bufferevent_set_timeouts(u->bev, ms ? &tv : NULL, NULL);
        return;
    }
    u->idle_ms = ms;
    if (ms == 0) {
        if (u->idle_ev != NULL)
            event_del(u->idle_ev);
        return;
    }
    if (u->idle_ev == NULL &&
        ((u->idle_ev = evtimer_new(u->w->base, direct_idle, u)) == NULL ||
         event_priority_set(u->idle_ev, bufferevent_get_priority(u->bev)) < 0)) {
        /* no timer: fall back to the bufferevent's reads and timeout
         * (out of memory only; a shadow's reads are then not limited) */
        direct_stop(u);
        bufferevent_setwatermark(u->bev, EV_READ, 0, u->high);
        bufferevent_set_timeouts(u->bev, &tv, NULL);
        bufferevent_enable(u->bev, EV_READ);
        return;
    }
    u->last_read = tt_now_mono();
    evtimer_add(u->idle_ev, &tv);
}
