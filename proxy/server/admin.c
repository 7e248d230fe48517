/*
 * The admin listener: evhttp on the caller's event base, four read-only
 * endpoints over the aggregator (see proxy/server/admin.h).  Started by
 * proxy/server/server.c; the pages are produced by metrics/agg.c, except
 * /dashboard, the embedded proxy/server/dashboard.html.
 *
 * Connections are capped: evhttp (libevent 2.1) has no cap of its own, so
 * a connection takes one of admin_max_connections slots at its first
 * request and keeps it until its socket is gone; one that finds every slot
 * held by a live connection is answered 503 with Connection: close.  A
 * connection that sends nothing is cut by evhttp's 10 s timeout.  The
 * listener is guarded against EMFILE spins (proxy/server/listen.h).
 */
#include "proxy/server/admin.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "metrics/agg.h"
#include "proxy/server/ready.h"
#include "proxy/server/listen.h"
#include "proxy/base/log.h"

#define MAX_AGGS 256
#define DEFAULT_MAX_CONNS 64

/* a connection holding a slot, known by its socket: fd and inode, so a
 * slot whose socket evhttp closed (or whose fd now names another socket)
 * reads as free without a hook into evhttp's connection lifetime */
struct slot {
    int   fd;                       /* -1 = free */
    dev_t dev;
    ino_t ino;
};

struct tt_admin {
    struct evhttp              *http;   /* owned */
    struct evhttp_bound_socket *sock;   /* owned by http */
    struct tt_agg              *one;    /* borrowed */
    struct tt_agg *const       *aggs;   /* borrowed, or &one */
    unsigned                    naggs;
    _Atomic int                 draining;   /* set from any thread */
    struct tt_listen_guard     *guard;  /* owned */
    struct slot                *slots;  /* owned, <max_conns> of them */
    unsigned                    max_conns;
};

/* <n> free slots (before any connection is served) */
static int set_slots(struct tt_admin *ad, unsigned n)
{
    struct slot *sl = malloc(n * sizeof(*sl));
    if (sl == NULL)
        return -1;
    for (unsigned i = 0; i < n; i++)
        sl[i].fd = -1;
    free(ad->slots);
    ad->slots = sl;
    ad->max_conns = n;
    return 0;
}

static int slot_is(const struct slot *sl, int fd, const struct stat *st)
{
    return sl->fd == fd && sl->dev == st->st_dev && sl->ino == st->st_ino;
}

static int slot_live(const struct slot *sl)
{
    struct stat st;
    return sl->fd >= 0 && fstat(sl->fd, &st) == 0 && slot_is(sl, sl->fd, &st);
}

/*
 * Does the connection of <req> hold a slot, or can it take one?  Returns 0,
 * or -1 when every slot belongs to another live connection.
 */
static int take_slot(struct tt_admin *ad, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    struct stat st;
    struct slot *free_slot = NULL;

    if (fd < 0 || fstat(fd, &st) < 0)
        return 0;                   /* cannot tell: serve it */
    for (unsigned i = 0; i < ad->max_conns; i++) {
        struct slot *sl = &ad->slots[i];
        if (slot_is(sl, fd, &st))
            return 0;
        if (free_slot == NULL && !slot_live(sl))
            free_slot = sl;
    }
    if (free_slot == NULL)
        return -1;
    *free_slot = (struct slot){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino };
    return 0;
}

static void reply_text(struct evhttp_request *req, int code, const char *reason,
                       const char *ctype, const char *body)
{
    struct evbuffer *b = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    if (b != NULL)
        evbuffer_add(b, body, strlen(body));
    evhttp_send_reply(req, code, reason, b);
    if (b != NULL)
        evbuffer_free(b);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct tt_admin *ad = arg;
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;

    evhttp_add_header(oh, "Cache-Control", "no-store");
    if (take_slot(ad, req) < 0) {
        evhttp_add_header(oh, "Connection", "close");
        evhttp_add_header(oh, "Retry-After", "1");
        reply_text(req, 503, "Service Unavailable", "application/json",
                   "{\"error\":{\"message\":\"too many admin connections "
                   "(admin_max_connections)\",\"type\":\"proxy_error\","
                   "\"code\":\"over_capacity\"}}\n");
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(oh, "Allow", "GET, HEAD");
        reply_text(req, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                   "method not allowed\n");
        return;
    }
    if (path == NULL || path[0] == '\0')
        path = "/";

    if (strcmp(path, "/healthz") == 0) {
        reply_text(req, 200, "OK", "text/plain; charset=utf-8", "ok\n");
    } else if (strcmp(path, "/readyz") == 0) {
        if (ad->draining)
            reply_text(req, 503, "Service Unavailable", "text/plain; charset=utf-8",
                       "draining\n");
        else
            reply_text(req, 200, "OK", "text/plain; charset=utf-8", "ready\n");
    } else if (strcmp(path, "/dashboard") == 0) {
        struct evbuffer *b = evbuffer_new();
        /* the page may run its own inline script and talk to this listener,
         * nothing else */
        evhttp_add_header(oh, "Content-Type", "text/html; charset=utf-8");
        evhttp_add_header(oh, "Content-Security-Policy",
                          "default-src 'none'; script-src 'unsafe-inline'; "
                          "style-src 'unsafe-inline'; connect-src 'self'; "
                          "img-src data:; base-uri 'none'; form-action 'none'; "
                          "frame-ancestors 'none'");
        evhttp_add_header(oh, "X-Content-Type-Options", "nosniff");
        evhttp_add_header(oh, "Referrer-Policy", "no-referrer");
        if (b != NULL)
            evbuffer_add_reference(b, tt_dashboard_html, tt_dashboard_html_len,
                                   NULL, NULL);
        evhttp_send_reply(req, 200, "OK", b);
        if (b != NULL)
            evbuffer_free(b);
    } else if (strcmp(path, "/metrics") == 0 || strcmp(path, "/stats") == 0) {
        int json = path[1] == 's';
        struct evbuffer *b = evbuffer_new();
        int rc = b == NULL ? -1
               : json ? tt_agg_stats_json_many(ad->aggs, ad->naggs, b)
                      : tt_agg_prometheus_many(ad->aggs, ad->naggs, b);
        if (rc < 0) {
            if (b != NULL)
                evbuffer_free(b);
            reply_text(req, 500, "Internal Server Error", "text/plain; charset=utf-8",
                       "cannot produce the page\n");
            return;
        }
        evhttp_add_header(oh, "Content-Type",
                          json ? "application/json"
                               : "text/plain; version=0.0.4; charset=utf-8");
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
    } else {
        reply_text(req, 404, "Not Found", "text/plain; charset=utf-8", "not found\n");
    }
}

/* split "host:port" / "[v6]:port" / ":port" into <host> and <port> */
static int split_addr(const char *s, char *host, size_t hostlen, unsigned *port)
{
    const char *colon, *h = s, *he;
    char *end;

    if (s[0] == '[') {
        he = strchr(s, ']');
        if (he == NULL || he[1] != ':')
            return -1;
        h = s + 1;
        colon = he + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return -1;
        he = colon;
    }
    size_t n = (size_t)(he - h);
    if (n == 0) {
        h = "0.0.0.0";
        n = 7;
    }
    if (n >= hostlen)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p > 65535)
        return -1;
    *port = (unsigned)p;
    return 0;
}

struct tt_admin *tt_admin_start(struct event_base *base, const char *addr_port,
                                struct tt_agg *agg, char *err, size_t errlen)
{
    char host[256];
    unsigned port;
    struct tt_admin *ad;

    if (split_addr(addr_port, host, sizeof(host), &port) < 0) {
        snprintf(err, errlen, "'%s': expected ADDR:PORT", addr_port);
        return NULL;
    }
    ad = calloc(1, sizeof(*ad));
    if (ad == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ad->one = agg;
    ad->aggs = &ad->one;
    if (set_slots(ad, DEFAULT_MAX_CONNS) < 0) {
        snprintf(err, errlen, "out of memory");
        free(ad);
        return NULL;
    }
    ad->naggs = 1;
    ad->http = evhttp_new(base);
    if (ad->http == NULL) {
        snprintf(err, errlen, "cannot create the HTTP server");
        free(ad->slots);
        free(ad);
        return NULL;
    }
    evhttp_set_timeout(ad->http, 10);
    evhttp_set_max_headers_size(ad->http, 16384);
    evhttp_set_max_body_size(ad->http, 4096);
    evhttp_set_allowed_methods(ad->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD
                               | EVHTTP_REQ_POST | EVHTTP_REQ_PUT
                               | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS
                               | EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE);
    evhttp_set_gencb(ad->http, on_request, ad);
    errno = 0;
    ad->sock = evhttp_bind_socket_with_handle(ad->http, host, (ev_uint16_t)port);
    if (ad->sock == NULL) {
        int e = errno;          /* the bind's or listen's reason */
        snprintf(err, errlen, "cannot listen on '%s'%s%s", addr_port, e ? ": " : "",
                 e ? strerror(e) : "");
        evhttp_free(ad->http);
        free(ad->slots);
        free(ad);
        return NULL;
    }
    ad->guard = tt_listen_guard_new(evhttp_bound_socket_get_listener(ad->sock), base,
                                    "the admin listener");
    if (ad->guard == NULL) {
        snprintf(err, errlen, "out of memory");
        evhttp_free(ad->http);
        free(ad->slots);
        free(ad);
        return NULL;
    }
    return ad;
}

void tt_admin_set_aggs(struct tt_admin *ad, struct tt_agg *const *aggs,
                       unsigned n)
{
    if (n == 0 || n > MAX_AGGS)
        return;
    ad->aggs = aggs;
    ad->naggs = n;
}

int tt_admin_port(const struct tt_admin *ad)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd = evhttp_bound_socket_get_fd(ad->sock);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

int tt_admin_name(const struct tt_admin *ad, char *buf, size_t len)
{
    return tt_sock_name(evhttp_bound_socket_get_fd(ad->sock), buf, len);
}

void tt_admin_set_max_connections(struct tt_admin *ad, unsigned n)
{
    if (set_slots(ad, n > 0 ? n : DEFAULT_MAX_CONNS) < 0)
        tt_log_warn("admin: out of memory, keeping %u connection slots", ad->max_conns);
}

void tt_admin_set_draining(struct tt_admin *ad, int draining)
{
    ad->draining = draining != 0;
}

void tt_admin_free(struct tt_admin *ad)
{
    if (ad == NULL)
        return;
    tt_listen_guard_free(ad->guard);
    evhttp_free(ad->http);
    free(ad->slots);
    free(ad);
}
