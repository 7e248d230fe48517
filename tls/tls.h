/*
 * TLS for both directions: the bufferevent a connection runs on (plain or
 * OpenSSL), contexts, verification and reload.  tls/ knows no connection,
 * worker or target: it is handed what it needs (an event base, the
 * context, a worker's number and an upstream's number).  Called by
 * proxy/http/conn.c (the client side), proxy/http/upstream.c (the upstream side:
 * connect, handshake, close), proxy/http/leg.c (naming a TLS error on a
 * response) and proxy/server/server.c (contexts at start and on SIGHUP; it has
 * proxy/http/target.c describe the targets to tls/).
 *
 * An https:// upstream connection is made in two steps so that the record
 * can tell the TCP connect from the TLS handshake:
 *
 *   tt_tls_connect_bev()   plain socket bufferevent, TCP connect (DNS too)
 *        | BEV_EVENT_CONNECTED: stamp "connected"
 *   tt_tls_connect_start() the same socket, now an OpenSSL bufferevent
 *        | BEV_EVENT_CONNECTED: stamp "tls done" (handshake verified)
 *
 * No bufferevent made here defers its callbacks (their owners, proxy/http/conn.c,
 * proxy/http/upstream.c and proxy/http/leg.c, stamp the time at the top of each
 * callback).
 */
#ifndef TT_TLS_H
#define TT_TLS_H

#include <stddef.h>
#include <event2/util.h>

struct bufferevent;
struct event_base;
struct tt_tls_ctx;

/* TLS to one upstream: what its context is made of.  The strings are
 * borrowed and must outlive the context (a reload reads the files again). */
struct tt_tls_upstream {
    const char *host;           /* NULL: plain http://, no context; else the
                                 * SNI and the name (or address) its
                                 * certificate must bear */
    const char *name;           /* for messages: "primary" or the shadow's */
    int         shadow;         /* its settings are [shadow.NAME] keys, not
                                 * --upstream-* flags (for messages) */
    const char *ca, *cert, *key;    /* "" when not set */
    int         insecure;       /* no verification */
};

/* what tt_tls_new() builds the contexts from; strings borrowed as above */
struct tt_tls_conf {
    const char *cert, *key;     /* the listener's; cert "": plain TCP */
    const char *client_ca;      /* "": no client certificates asked for */
    unsigned    workers;        /* worker threads (a session slot each) */
    const struct tt_tls_upstream *up;   /* [nup], by upstream number */
    unsigned    nup;
};

/*
 * Build the TLS contexts <conf> asks for.  <*out> is NULL when neither
 * side uses TLS.  Returns 0, or -1 with <err> set.
 */
int  tt_tls_new(const struct tt_tls_conf *conf, struct tt_tls_ctx **out,
                char *err, size_t errlen);
/* SIGHUP: load certificates again; keeps the old ones on failure */
void tt_tls_reload(struct tt_tls_ctx *t);
void tt_tls_free(struct tt_tls_ctx *t);

/* the bufferevent on <base> for an accepted client socket (TLS when <t>
 * has a listener context); NULL on failure, the socket is then still open */
struct bufferevent *tt_tls_accept_bev(struct tt_tls_ctx *t,
                                      struct event_base *base,
                                      evutil_socket_t fd);

/* does <t> (or NULL) have a listener context: is an accepted socket TLS? */
int tt_tls_listens(struct tt_tls_ctx *t);

/* an unconnected plain socket bufferevent on <base> for an upstream
 * connection (the TCP step, also for https://); NULL on failure */
struct bufferevent *tt_tls_connect_bev(struct event_base *base);

/*
 * The TCP connect of <tcp> (from tt_tls_connect_bev()) to upstream number
 * <up> completed: move its socket to a new OpenSSL bufferevent on the same
 * base that starts the client handshake (SNI, hostname check, session
 * resumption from worker <worker>'s slot, client certificate).  <tcp> is
 * freed in every case.  Returns the new bufferevent (no callbacks set yet;
 * BEV_EVENT_CONNECTED fires once the handshake is done), or NULL with
 * <why> set and the socket closed.
 */
struct bufferevent *tt_tls_connect_start(struct tt_tls_ctx *t, int worker,
                                         unsigned up, struct bufferevent *tcp,
                                         char *why, size_t whylen);

/*
 * Log pending OpenSSL errors of <bev> (if TLS) at info level; returns the
 * first reason (a certificate verification failure is named as such, e.g.
 * "certificate verify failed: certificate has expired"), or NULL when
 * there was no TLS error.  The string lives until the next call on the
 * same thread.
 */
const char *tt_tls_log_errors(struct bufferevent *bev, const char *side);

/*
 * Free <bev>.  With <clean> (what was sent is complete), a TLS connection
 * says close_notify first, so that the peer can tell a complete
 * close-delimited body from a cut one; without it the connection just
 * closes, which a TLS peer sees as a possible truncation.
 */
void tt_tls_close(struct bufferevent *bev, int clean);

#endif
