/*
 * Upstream connections (see upstream.h): connect, pool, hand over.
 *
 * Pooled connections keep a read callback: any byte or EOF on an idle
 * keep-alive connection means the upstream closed or misbehaved, so it is
 * closed at once and never handed out stale.  The pool is LIFO (the most
 * recently used connection is the likeliest to be alive) and bounded by
 * upstream_pool.
 */
#include "proxy/upstream.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "metrics/request.h"
#include "proxy/conn.h"
#include "proxy/log.h"
#include "proxy/worker.h"
#include "tls/tls.h"

static void pool_unlink(struct tt_upconn *u)
{
    struct tt_worker *w = u->w;

    if (u->prev)
        u->prev->next = u->next;
    else
        w->idle = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->next = u->prev = NULL;
    w->nidle--;
}

void tt_upstream_close(struct tt_upconn *u)
{
    if (u == NULL)
        return;
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

    u->owner = NULL;
    if (w->nidle >= w->cfg->upstream_pool || w->draining) {
        tt_upstream_close(u);
        return;
    }
    /* servers close idle keep-alive connections (uvicorn, under vLLM,
     * after 5 s); closing ours first keeps a request from being written
     * into a connection the server is closing at that very moment */
    {
        struct timeval idle = { w->cfg->upstream_pool_idle_ms / 1000,
                                (w->cfg->upstream_pool_idle_ms % 1000) * 1000 };
        bufferevent_setcb(u->bev, pool_read, NULL, pool_event, u);
        bufferevent_set_timeouts(u->bev, &idle, NULL);
    }
    bufferevent_enable(u->bev, EV_READ);
    u->next = w->idle;
    u->prev = NULL;
    if (w->idle)
        w->idle->prev = u;
    w->idle = u;
    w->nidle++;
}

void tt_upstream_close_idle(struct tt_worker *w)
{
    while (w->idle != NULL) {
        struct tt_upconn *u = w->idle;
        pool_unlink(u);
        tt_upstream_close(u);
    }
}

static void connect_event(struct bufferevent *bev, short what, void *arg)
{
    struct tt_upconn *u = arg;
    struct tt_conn *c = u->owner;
    int tls = u->w->up->tls;
    (void)bev;

    if (what & BEV_EVENT_CONNECTED) {
        uint64_t now = tt_now_mono();

        if (tls && u->connected == 0) {
            /* TCP is up; the TLS handshake follows on the same socket */
            char why[256], msg[1024];

            u->connected = now;
            u->bev = tt_tls_upstream_start(u->w, u->bev, why, sizeof(why));
            if (u->bev == NULL) {
                snprintf(msg, sizeof(msg), "TLS to upstream %s:%s: %s",
                         u->w->up->host, u->w->up->port, why);
                free(u);
                tt_conn_upstream_failed(c, 502, "upstream_tls", msg);
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
        tt_conn_upstream_ready(c, u, 0);
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
                 u->w->up->host, u->w->up->port, why);
        tt_upstream_close(u);
        tt_conn_upstream_failed(c, 502, in_tls ? "upstream_tls" : "upstream_connect", msg);
    }
}

int tt_upstream_get(struct tt_worker *w, struct tt_conn *c)
{
    struct tt_upconn *u = w->idle;

    if (u != NULL) {
        pool_unlink(u);
        u->owner = c;
        tt_conn_upstream_ready(c, u, 1);
        return 0;
    }
    u = calloc(1, sizeof(*u));
    if (u == NULL) {
        tt_conn_upstream_failed(c, 502, "upstream_connect", "out of memory");
        return -1;
    }
    u->w = w;
    u->owner = c;
    u->connecting = 1;
    u->bev = tt_tls_upstream_bev(w);
    if (u->bev == NULL) {
        free(u);
        tt_conn_upstream_failed(c, 502, "upstream_connect", "cannot create a connection");
        return -1;
    }
    bufferevent_setcb(u->bev, NULL, NULL, connect_event, u);
    /* the owner learns of the connection only on success; until then a
     * failure is reported through connect_event */
    tt_conn_upstream_pending(c, u);
    if (bufferevent_socket_connect_hostname(u->bev, w->dns, AF_UNSPEC,
                                            w->up->host, atoi(w->up->port)) < 0) {
        tt_conn_upstream_pending(c, NULL);
        tt_upstream_close(u);
        tt_conn_upstream_failed(c, 502, "upstream_connect", "cannot start the upstream connect");
        return -1;
    }
    return 0;
}
