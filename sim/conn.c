/*
 * One client connection of tokentap-sim.
 *
 * Owns: the bufferevent (plain or TLS), request parsing with llhttp (one
 * request at a time: the parser pauses at the end of each message and the
 * next pipelined request waits in the input buffer until the response
 * ends), routing to the plain endpoints or to sim/resp.c, the write pump,
 * and the end of each response.
 *
 *   input --llhttp--> sim_req --dispatch--> /health /stats /echo 404 101
 *                                      \--> sim_resp_start (sim/resp.c)
 *                                      \--> 101 WebSocket session (sim/ws.c):
 *                                           input --> sim_ws_feed from then on
 *   conn_write --> outq --pump(split)--> bufferevent output --> socket
 *   conn_end(how) --(every byte written)--> keep-alive | close | RST
 *
 * The floors below (sim/ws.c, sim/resp.c) never call this file by name:
 * each is handed c->out, a struct sim_out over conn_write(), conn_head(),
 * conn_reply_error_hdr(), conn_set_split() and conn_end().
 *
 * The pump is what makes "split" real: in random/byte mode it moves the next
 * piece into the bufferevent only when the previous one has been written to
 * the socket (write callback at low watermark 0), so every piece is its own
 * send().  A peer that closes (EOF or error) while a response is in progress
 * counts as "aborted" in /stats; EOF includes a half-close (shutdown(SHUT_WR)),
 * counted when it is read, and the connection is closed then (reading stays
 * enabled while busy, so the EOF is seen at once).  A WebSocket session's
 * peer that leaves while a turn runs (or waits) counts the same way.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <event2/bufferevent_ssl.h>
#include <llhttp.h>

#include "sim/sim.h"

#define SIM_MAX_HEAD   (64 * 1024)
#define SIM_MAX_HDRS   100
#define SIM_MAX_BODY   (64 * 1024 * 1024)

struct sim_conn {
    struct sim_conn *next, *prev;     /* sim_srv.conns */
    struct bufferevent *bev;          /* owned; closes the socket on free */
    int tls;
    llhttp_t parser;
    struct sim_req req;               /* the request being read or answered */
    char *hfield, *hvalue;            /* header being parsed */
    size_t hfield_len, hvalue_len;
    size_t head_bytes;
    size_t url_len;
    int req_ready;                    /* on_message_complete seen */
    int limit_status;                 /* 413/431 when a limit tripped */
    int busy;                         /* a request was dispatched, response not ended */
    int upgraded;                     /* 101 sent: raw echo from now on */
    struct sim_ws *ws;                /* owned: 101 sent to a WebSocket API */
    struct sim_out out;               /* our output, handed to resp and ws */
    int counted;                      /* this request counts in /stats */
    unsigned nreq;
    struct sim_resp *resp;            /* owned; the generated response */
    struct evbuffer *outq;            /* bytes not yet given to the bufferevent */
    enum sim_split split;
    uint64_t rng;
    int pausing;
    struct event *pause_ev;           /* split=random: short pause between pieces */
    struct event *kick;               /* deferred end-of-response check */
    enum sim_end end;
    int rst_tries;
};

static llhttp_settings_t parser_settings;

static void conn_free(struct sim_conn *c);
static void conn_parse(struct sim_conn *c);
static void conn_end(struct sim_conn *c, enum sim_end how);

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: plenty for picking split sizes */
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static int sappend(char **s, size_t *len, const char *p, size_t n)
{
    char *t = realloc(*s, *len + n + 1);
    if (!t)
        return -1;
    memcpy(t + *len, p, n);
    *len += n;
    t[*len] = '\0';
    *s = t;
    return 0;
}

static void req_reset(struct sim_conn *c)
{
    struct sim_req *q = &c->req;
    int i;

    for (i = 0; i < q->nhdrs; i++) {
        free(q->hdrs[i].name);
        free(q->hdrs[i].value);
    }
    free(q->hdrs);
    free(q->method);
    free(q->url);
    free(c->hfield);
    free(c->hvalue);
    c->hfield = c->hvalue = NULL;
    c->hfield_len = c->hvalue_len = 0;
    q->hdrs = NULL;
    q->nhdrs = 0;
    q->method = q->url = NULL;
    q->path_len = 0;
    c->url_len = 0;
    q->chunked = q->keep_alive = 0;
    if (q->body)
        evbuffer_drain(q->body, evbuffer_get_length(q->body));
    c->head_bytes = 0;
    c->req_ready = 0;
}

/* ---- llhttp callbacks ----------------------------------------------------- */

static int head_limit(struct sim_conn *c, size_t n)
{
    c->head_bytes += n;
    if (c->head_bytes > SIM_MAX_HEAD) {
        c->limit_status = 431;
        return -1;
    }
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    req_reset(p->data);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct sim_conn *c = p->data;
    if (head_limit(c, n) || sappend(&c->req.url, &c->url_len, at, n))
        return -1;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct sim_conn *c = p->data;
    if (head_limit(c, n) || sappend(&c->hfield, &c->hfield_len, at, n))
        return -1;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct sim_conn *c = p->data;
    if (head_limit(c, n) || sappend(&c->hvalue, &c->hvalue_len, at, n))
        return -1;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct sim_conn *c = p->data;
    struct sim_req *q = &c->req;
    struct sim_hdr *h;

    if (q->nhdrs >= SIM_MAX_HDRS) {
        c->limit_status = 431;
        return -1;
    }
    h = realloc(q->hdrs, sizeof(*h) * (size_t)(q->nhdrs + 1));
    if (!h)
        return -1;
    q->hdrs = h;
    h[q->nhdrs].name = c->hfield ? c->hfield : strdup("");
    h[q->nhdrs].value = c->hvalue ? c->hvalue : strdup("");
    q->nhdrs++;
    c->hfield = c->hvalue = NULL;
    c->hfield_len = c->hvalue_len = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct sim_conn *c = p->data;
    struct sim_req *q = &c->req;
    const char *expect;

    q->method = strdup(llhttp_method_name(llhttp_get_method(p)));
    if (!q->url)
        q->url = strdup("/");
    if (!q->method || !q->url)
        return -1;
    q->path_len = strcspn(q->url, "?#");
    q->http_minor = llhttp_get_http_minor(p);
    q->chunked = (p->flags & F_CHUNKED) != 0;
    expect = sim_req_header(q, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && q->http_minor >= 1)
        bufferevent_write(c->bev, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct sim_conn *c = p->data;
    if (evbuffer_get_length(c->req.body) + n > SIM_MAX_BODY) {
        c->limit_status = 413;
        return -1;
    }
    return evbuffer_add(c->req.body, at, n);
}

static int on_message_complete(llhttp_t *p)
{
    struct sim_conn *c = p->data;
    c->req.keep_alive = llhttp_should_keep_alive(p);
    c->req_ready = 1;
    return HPE_PAUSED;   /* one request at a time */
}

/* ---- response writing ------------------------------------------------------ */

static void pump(struct sim_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    size_t q = evbuffer_get_length(c->outq), n;

    if (q == 0)
        return;
    if (c->split == SIM_SPLIT_NONE) {
        evbuffer_add_buffer(out, c->outq);
        return;
    }
    if (c->pausing || evbuffer_get_length(out) > 0)
        return;   /* the write callback brings us back once it is on the wire */
    n = c->split == SIM_SPLIT_BYTE ? 1 : 1 + (size_t)(rng_next(&c->rng) % 48);
    if (n > q)
        n = q;
    evbuffer_remove_buffer(c->outq, out, n);
}

static void conn_write(struct sim_conn *c, const void *p, size_t n)
{
    evbuffer_add(c->outq, p, n);
    pump(c);
}

static void conn_write_buffer(struct sim_conn *c, struct evbuffer *b)
{
    evbuffer_add_buffer(c->outq, b);
    pump(c);
}

static void conn_set_split(struct sim_conn *c, enum sim_split split, uint64_t seed)
{
    c->split = split;
    c->rng = seed * 0x9e3779b97f4a7c15ull + 1;
}

static void on_pause_done(evutil_socket_t fd, short what, void *arg)
{
    struct sim_conn *c = arg;
    (void)fd; (void)what;
    c->pausing = 0;
    pump(c);
}

static void conn_head(struct sim_conn *c, int status, const char *ctype,
                   long long clen, int keep_alive, const char *extra)
{
    const char *reason;
    struct evbuffer *b;

    switch (status) {
    case 100: reason = "Continue"; break;
    case 101: reason = "Switching Protocols"; break;
    case 200: reason = "OK"; break;
    case 201: reason = "Created"; break;
    case 204: reason = "No Content"; break;
    case 400: reason = "Bad Request"; break;
    case 401: reason = "Unauthorized"; break;
    case 403: reason = "Forbidden"; break;
    case 404: reason = "Not Found"; break;
    case 408: reason = "Request Timeout"; break;
    case 413: reason = "Payload Too Large"; break;
    case 422: reason = "Unprocessable Entity"; break;
    case 429: reason = "Too Many Requests"; break;
    case 431: reason = "Request Header Fields Too Large"; break;
    case 500: reason = "Internal Server Error"; break;
    case 502: reason = "Bad Gateway"; break;
    case 503: reason = "Service Unavailable"; break;
    case 504: reason = "Gateway Timeout"; break;
    case 529: reason = "Overloaded"; break;
    default:  reason = "Status"; break;
    }
    b = c->outq;   /* printf straight into the queue: no length limit on ctype */
    evbuffer_add_printf(b, "HTTP/1.1 %d %s\r\nServer: tokentap-sim\r\n",
                        status, reason);
    if (ctype)
        evbuffer_add_printf(b, "Content-Type: %s\r\n", ctype);
    if (clen >= 0)
        evbuffer_add_printf(b, "Content-Length: %lld\r\n", clen);
    else if (clen == -1)
        evbuffer_add_printf(b, "Transfer-Encoding: chunked\r\n");
    if (clen < 0)
        evbuffer_add_printf(b, "Cache-Control: no-cache\r\n");
    evbuffer_add_printf(b, "Connection: %s\r\nX-Sim-Conn-Requests: %u\r\n",
                        keep_alive ? "keep-alive" : "close", c->nreq);
    if (extra && *extra)
        evbuffer_add(b, extra, strlen(extra));
    conn_write(c, "\r\n", 2);
}

static void conn_reply(struct sim_conn *c, int status, const char *ctype,
                    const char *body, size_t len, int keep_alive)
{
    conn_head(c, status, ctype, (long long)len, keep_alive, "");
    conn_write(c, body, len);
    conn_end(c, keep_alive ? SIM_END_KEEPALIVE : SIM_END_CLOSE);
}

static void conn_reply_error_hdr(struct sim_conn *c, int status, const char *msg,
                              int keep_alive, const char *extra)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *s;
    size_t n;

    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", sim_error_type(status));
    cJSON_AddNumberToObject(e, "code", status);
    s = cJSON_PrintUnformatted(o);
    n = s ? strlen(s) : 2;
    conn_head(c, status, "application/json", (long long)n, keep_alive, extra);
    conn_write(c, s ? s : "{}", n);
    conn_end(c, keep_alive ? SIM_END_KEEPALIVE : SIM_END_CLOSE);
    free(s);
    cJSON_Delete(o);
}

static void conn_reply_error(struct sim_conn *c, int status, const char *msg,
                          int keep_alive)
{
    conn_reply_error_hdr(c, status, msg, keep_alive, "");
}

static void conn_end(struct sim_conn *c, enum sim_end how)
{
    c->end = how;
    /* never end inside the caller's stack: the response may still be in use */
    event_active(c->kick, EV_TIMEOUT, 0);
}

/* ---- our output, as the floors below see it (struct sim_out) --------------- */

static void out_write(void *arg, const void *p, size_t n)
{
    conn_write(arg, p, n);
}

static void out_write_buffer(void *arg, struct evbuffer *b)
{
    conn_write_buffer(arg, b);
}

static void out_head(void *arg, int status, const char *ctype, long long clen,
                     int keep_alive, const char *extra)
{
    conn_head(arg, status, ctype, clen, keep_alive, extra);
}

static void out_reply_error(void *arg, int status, const char *msg,
                            int keep_alive, const char *extra)
{
    conn_reply_error_hdr(arg, status, msg, keep_alive, extra);
}

static void out_set_split(void *arg, enum sim_split split, uint64_t seed)
{
    conn_set_split(arg, split, seed);
}

static void out_end(void *arg, enum sim_end how)
{
    conn_end(arg, how);
}

static void end_now(struct sim_conn *c)
{
    enum sim_end how = c->end;
    int fd;

    if (c->counted)
        sim_srv.completed++;
    c->counted = 0;
    switch (how) {
    case SIM_END_KEEPALIVE:
        sim_resp_free(c->resp);
        c->resp = NULL;
        c->busy = 0;
        c->end = SIM_END_NONE;
        c->split = SIM_SPLIT_NONE;
        req_reset(c);
        conn_parse(c);
        return;
    case SIM_END_CLOSE:
        if (c->tls) {
            SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
            if (ssl)
                SSL_shutdown(ssl);   /* close_notify: an orderly TLS end */
        }
        conn_free(c);
        return;
    case SIM_END_RESET: {
        struct linger lg = { 1, 0 };
        fd = (int)bufferevent_getfd(c->bev);
        if (fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        conn_free(c);
        return;
    }
    case SIM_END_TRUNCATE:
    case SIM_END_NONE:
    default:
        conn_free(c);
        return;
    }
}

static void on_kick(evutil_socket_t fd0, short what, void *arg)
{
    struct sim_conn *c = arg;
    (void)fd0; (void)what;

    if (c->end == SIM_END_NONE)
        return;
    if (evbuffer_get_length(c->outq) ||
        evbuffer_get_length(bufferevent_get_output(c->bev)))
        return;   /* on_write kicks again once drained */
    if (c->end == SIM_END_RESET) {
        /* SO_LINGER 0 discards unsent kernel data: wait until the peer has
         * it all, so the RST lands exactly after the last event */
        int fd = (int)bufferevent_getfd(c->bev), pending = 0;
        if (fd >= 0 && ioctl(fd, SIOCOUTQ, &pending) == 0 && pending > 0 &&
            c->rst_tries++ < 1000) {
            struct timeval tv = { 0, 1000 };
            evtimer_add(c->kick, &tv);
            return;
        }
    }
    end_now(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct sim_conn *c = arg;
    (void)bev;

    if (evbuffer_get_length(c->outq)) {
        if (c->split == SIM_SPLIT_RANDOM && (rng_next(&c->rng) & 3) == 0) {
            struct timeval tv = { 0, (suseconds_t)(100 + rng_next(&c->rng) % 900) };
            c->pausing = 1;
            evtimer_add(c->pause_ev, &tv);
        } else {
            pump(c);
        }
        return;
    }
    if (c->end != SIM_END_NONE)
        event_active(c->kick, EV_TIMEOUT, 0);
}

/* ---- plain endpoints -------------------------------------------------------- */

static void reply_stats(struct sim_conn *c)
{
    cJSON *o = cJSON_CreateObject(), *p;
    char *s;
    int i;

    cJSON_AddNumberToObject(o, "requests", (double)sim_srv.requests);
    cJSON_AddNumberToObject(o, "connections", (double)sim_srv.connections);
    cJSON_AddNumberToObject(o, "aborted", (double)sim_srv.aborted);
    cJSON_AddNumberToObject(o, "open", (double)sim_srv.open);
    cJSON_AddNumberToObject(o, "completed", (double)sim_srv.completed);
    cJSON_AddNumberToObject(o, "ws_sessions", (double)sim_srv.ws_sessions);
    cJSON_AddNumberToObject(o, "ws_turns", (double)sim_srv.ws_turns);
    p = cJSON_AddObjectToObject(o, "paths");
    for (i = 0; i < sim_srv.npaths; i++)
        cJSON_AddNumberToObject(p, sim_srv.paths[i].path,
                                (double)sim_srv.paths[i].n);
    s = cJSON_PrintUnformatted(o);
    conn_reply(c, 200, "application/json", s, strlen(s), c->req.keep_alive);
    free(s);
    cJSON_Delete(o);
}

static void add_echo_header(struct evbuffer *b, const char *name, const char *v)
{
    if (v)
        evbuffer_add_printf(b, "%s: %s\r\n", name, v);
}

/* POST /echo: the body back, framed as it came, and what we received */
static void reply_echo(struct sim_conn *c)
{
    struct sim_req *q = &c->req;
    struct evbuffer *x = evbuffer_new();
    size_t blen = evbuffer_get_length(q->body), xl;
    const char *ctype = sim_req_header(q, "content-type");
    char *extra;

    evbuffer_add_printf(x, "X-Echo-Method: %s\r\n", q->method);
    add_echo_header(x, "X-Echo-URL", q->url);
    add_echo_header(x, "X-Echo-Host", sim_req_header(q, "host"));
    add_echo_header(x, "X-Echo-Connection", sim_req_header(q, "connection"));
    add_echo_header(x, "X-Echo-TE", sim_req_header(q, "transfer-encoding"));
    add_echo_header(x, "X-Echo-TE-Header", sim_req_header(q, "te"));
    add_echo_header(x, "X-Echo-Content-Length", sim_req_header(q, "content-length"));
    add_echo_header(x, "X-Echo-Request-Id", sim_req_header(q, "x-request-id"));
    evbuffer_add_printf(x, "X-Echo-Body-Bytes: %zu\r\nX-Echo-Conn-Requests: %u\r\n",
                        blen, c->nreq);
    xl = evbuffer_get_length(x);
    extra = malloc(xl + 1);
    evbuffer_remove(x, extra, xl);
    extra[xl] = '\0';
    evbuffer_free(x);

    if (!ctype)
        ctype = "application/octet-stream";
    if (q->chunked && q->http_minor >= 1) {
        char hex[32];
        int n;
        conn_head(c, 200, ctype, -1, q->keep_alive, extra);
        if (blen) {
            n = snprintf(hex, sizeof(hex), "%zx\r\n", blen);
            conn_write(c, hex, (size_t)n);
            evbuffer_add_buffer(c->outq, q->body);
            conn_write(c, "\r\n", 2);
        }
        conn_write(c, "0\r\n\r\n", 5);
    } else {
        conn_head(c, 200, ctype, (long long)blen, q->keep_alive, extra);
        evbuffer_add_buffer(c->outq, q->body);
        pump(c);
    }
    free(extra);
    conn_end(c, q->keep_alive ? SIM_END_KEEPALIVE : SIM_END_CLOSE);
}

/* /echo/headers: every received header as a JSON array of [name, value] */
static void reply_echo_headers(struct sim_conn *c)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "headers");
    char *s;
    int i;

    cJSON_AddStringToObject(o, "method", c->req.method);
    cJSON_AddStringToObject(o, "url", c->req.url);
    cJSON_AddNumberToObject(o, "body_bytes",
                            (double)evbuffer_get_length(c->req.body));
    for (i = 0; i < c->req.nhdrs; i++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(c->req.hdrs[i].name));
        cJSON_AddItemToArray(pair, cJSON_CreateString(c->req.hdrs[i].value));
        cJSON_AddItemToArray(a, pair);
    }
    s = cJSON_PrintUnformatted(o);
    conn_reply(c, 200, "application/json", s, strlen(s), c->req.keep_alive);
    free(s);
    cJSON_Delete(o);
}

static int path_is(const struct sim_req *q, const char *p)
{
    return q->path_len == strlen(p) && memcmp(q->url, p, q->path_len) == 0;
}

static void dispatch(struct sim_conn *c)
{
    struct sim_req *q = &c->req;
    const struct sim_dialect *d;
    enum sim_stream_rule rule = SIM_STREAM_NEVER;
    int ka = q->keep_alive;

    c->busy = 1;
    c->nreq++;
    q->conn_requests = c->nreq;
    if (sim_srv.log)
        fprintf(stderr, "tokentap-sim: %s %s (%zu body bytes, request %u on "
                "this connection)\n", q->method, q->url,
                evbuffer_get_length(q->body), c->nreq);

    if (path_is(q, "/stats") && !strcmp(q->method, "GET")) {
        reply_stats(c);
        return;
    }
    sim_srv.requests++;
    c->counted = 1;
    sim_count_path(q->url, q->path_len);

    if (sim_ws_wanted(q)) {
        /* the Responses API's WebSocket mode, or the Realtime API: the
         * session's turns count as completed, not the 101 */
        c->counted = 0;
        c->ws = sim_ws_accept(&c->out, q);
        if (!c->ws)
            c->counted = 1;   /* the 400 is an answer like any other */
        else
            conn_parse(c);    /* frames that came with the request head */
        return;
    }
    if (llhttp_get_upgrade(&c->parser)) {
        /* WebSocket and friends: say yes, then echo raw bytes both ways */
        const char *up = sim_req_header(q, "upgrade");
        char extra[256];
        snprintf(extra, sizeof(extra), "Upgrade: %.200s\r\n", up ? up : "");
        c->upgraded = 1;
        static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\n"
                                 "Connection: Upgrade\r\n";
        conn_write(c, sw, sizeof(sw) - 1);
        conn_write(c, extra, strlen(extra));
        conn_write(c, "\r\n", 2);
        conn_parse(c);   /* bytes that came with the request head */
        return;
    }
    if (path_is(q, "/health")) {
        conn_reply(c, 200, "text/plain", "ok", 2, ka);
        return;
    }
    if (path_is(q, "/stats/reset") && !strcmp(q->method, "POST")) {
        sim_srv.requests = sim_srv.connections = sim_srv.aborted = 0;
        sim_srv.completed = sim_srv.ws_sessions = sim_srv.ws_turns = 0;
        sim_srv.npaths = 0;
        c->counted = 0;
        conn_reply(c, 200, "application/json", "{}", 2, ka);
        return;
    }
    if (path_is(q, "/v1/models") && !strcmp(q->method, "GET")) {
        static const char models[] = "{\"object\":\"list\",\"data\":[{\"id\":"
            "\"sim-model\",\"object\":\"model\",\"owned_by\":\"tokentap-sim\"}]}";
        conn_reply(c, 200, "application/json", models, sizeof(models) - 1, ka);
        return;
    }
    if (path_is(q, "/echo")) {
        reply_echo(c);
        return;
    }
    if (path_is(q, "/echo/headers")) {
        reply_echo_headers(c);
        return;
    }
    d = sim_dialect_route(q->url, q->path_len, &rule);
    if (d || (!strcmp(q->method, "POST") && evbuffer_get_length(q->body))) {
        /* a dialect, or maybe a "replay" on any path: resp.c decides */
        c->resp = sim_resp_start(&c->out, q, d, (int)rule);
        return;
    }
    conn_reply_error(c, 404, "no such endpoint on tokentap-sim", ka);
}

/* ---- connection lifecycle ------------------------------------------------- */

static void conn_parse(struct sim_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    if (c->ws) {
        sim_ws_feed(c->ws, in);
        return;
    }
    if (c->upgraded) {
        evbuffer_add_buffer(c->outq, in);
        pump(c);
        return;
    }
    while (!c->busy) {
        struct evbuffer_iovec v;
        enum llhttp_errno e;
        size_t used;

        if (evbuffer_get_length(in) == 0 || evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            return;
        e = llhttp_execute(&c->parser, v.iov_base, v.iov_len);
        if (e == HPE_OK) {
            used = v.iov_len;
        } else if (e == HPE_PAUSED) {
            used = (size_t)(llhttp_get_error_pos(&c->parser) -
                            (const char *)v.iov_base);
            llhttp_resume(&c->parser);
        } else if (e == HPE_PAUSED_UPGRADE) {
            used = (size_t)(llhttp_get_error_pos(&c->parser) -
                            (const char *)v.iov_base);
        } else {
            int st = c->limit_status ? c->limit_status : 400;
            char msg[160];
            snprintf(msg, sizeof(msg), "bad request: %s",
                     llhttp_get_error_reason(&c->parser) ?
                     llhttp_get_error_reason(&c->parser) : llhttp_errno_name(e));
            evbuffer_drain(in, evbuffer_get_length(in));
            c->busy = 1;
            c->nreq++;
            conn_reply_error(c, st, st == 400 ? msg :
                                 st == 413 ? "request body too large" :
                                 "request head too large", 0);
            return;
        }
        evbuffer_drain(in, used);
        if (c->req_ready) {
            c->req_ready = 0;
            dispatch(c);
        }
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_parse(arg);   /* no-op while busy: the input waits for its turn */
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct sim_conn *c = arg;
    (void)bev;

    if (what & BEV_EVENT_CONNECTED)
        return;   /* TLS handshake done */
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (c->busy && c->end == SIM_END_NONE &&
            (c->ws ? sim_ws_busy(c->ws) : !c->upgraded)) {
            sim_srv.aborted++;
            if (sim_srv.log)
                fprintf(stderr, "tokentap-sim: peer closed mid-response "
                        "(request %u on its connection)\n", c->nreq);
        }
        conn_free(c);
    }
}

void sim_conn_accept(evutil_socket_t fd)
{
    struct sim_conn *c = calloc(1, sizeof(*c));
    int one = 1;

    if (!c) {
        evutil_closesocket(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    evutil_make_socket_nonblocking(fd);
    if (sim_srv.ssl) {
        SSL *ssl = SSL_new(sim_srv.ssl);
        c->tls = 1;
        c->bev = ssl ? bufferevent_openssl_socket_new(sim_srv.base, fd, ssl,
                                                      BUFFEREVENT_SSL_ACCEPTING,
                                                      BEV_OPT_CLOSE_ON_FREE) : NULL;
        if (c->bev)
            bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
        else if (ssl)
            SSL_free(ssl);
    } else {
        c->bev = bufferevent_socket_new(sim_srv.base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    c->outq = evbuffer_new();
    c->req.body = evbuffer_new();
    c->kick = evtimer_new(sim_srv.base, on_kick, c);
    c->pause_ev = evtimer_new(sim_srv.base, on_pause_done, c);
    if (!c->bev || !c->outq || !c->req.body || !c->kick || !c->pause_ev) {
        if (!c->bev)
            evutil_closesocket(fd);
        c->next = c->prev = NULL;
        if (c->bev)
            bufferevent_free(c->bev);
        if (c->outq)
            evbuffer_free(c->outq);
        if (c->req.body)
            evbuffer_free(c->req.body);
        if (c->kick)
            event_free(c->kick);
        if (c->pause_ev)
            event_free(c->pause_ev);
        free(c);
        return;
    }
    parser_settings.on_message_begin = on_message_begin;
    parser_settings.on_url = on_url;
    parser_settings.on_header_field = on_header_field;
    parser_settings.on_header_value = on_header_value;
    parser_settings.on_header_value_complete = on_header_value_complete;
    parser_settings.on_headers_complete = on_headers_complete;
    parser_settings.on_body = on_body;
    parser_settings.on_message_complete = on_message_complete;
    llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
    c->parser.data = c;
    c->out.arg = c;
    c->out.messages = 0;
    c->out.write = out_write;
    c->out.write_buffer = out_write_buffer;
    c->out.head = out_head;
    c->out.reply_error = out_reply_error;
    c->out.set_split = out_set_split;
    c->out.end = out_end;

    c->next = sim_srv.conns;
    if (sim_srv.conns)
        sim_srv.conns->prev = c;
    sim_srv.conns = c;
    sim_srv.connections++;
    sim_srv.open++;

    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void conn_free(struct sim_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        sim_srv.conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sim_srv.open--;

    sim_ws_free(c->ws);   /* first: its turns use the connection */
    sim_resp_free(c->resp);
    req_reset(c);
    evbuffer_free(c->req.body);
    evbuffer_free(c->outq);
    event_free(c->kick);
    event_free(c->pause_ev);
    bufferevent_free(c->bev);
    free(c);
}

void sim_conn_free_all(void)
{
    while (sim_srv.conns)
        conn_free(sim_srv.conns);
}
