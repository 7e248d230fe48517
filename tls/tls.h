/*
 * TLS for both directions: the bufferevent a connection runs on (plain or
 * OpenSSL), contexts, verification and reload.  Called by proxy/conn.c
 * (client side), proxy/upstream.c (upstream side) and proxy/server.c
 * (contexts at start and on SIGHUP).
 *
 * An https:// upstream connection is made in two steps so that the record
 * can tell the TCP connect from the TLS handshake:
 *
 *   tt_tls_upstream_bev()  plain socket bufferevent, TCP connect (DNS too)
 *        | BEV_EVENT_CONNECTED: stamp "connected"
 *   tt_tls_upstream_start() the same socket, now an OpenSSL bufferevent
 *        | BEV_EVENT_CONNECTED: stamp "tls done" (handshake verified)
 *
 * No bufferevent made here defers its callbacks (proxy/conn.c stamps the
 * time at the top of each callback).
 */
#ifndef TT_TLS_H
#define TT_TLS_H

#include <stddef.h>
#include <event2/util.h>

struct bufferevent;
struct tt_worker;
struct tt_target;

/* the bufferevent for an accepted client socket (TLS when configured);
 * NULL on failure, the socket is then still open */
struct bufferevent *tt_tls_server_bev(struct tt_worker *w, evutil_socket_t fd);

/* an unconnected plain socket bufferevent for an upstream connection (the
 * TCP step, also for https://); NULL on failure */
struct bufferevent *tt_tls_upstream_bev(struct tt_worker *w);

/*
 * The TCP connect of <tcp> (from tt_tls_upstream_bev()) completed: move its
 * socket to a new OpenSSL bufferevent that starts the client handshake
 * (SNI, hostname check, session resumption, client certificate).  <tcp> is
 * freed in every case.  Returns the new bufferevent (no callbacks set yet;
 * BEV_EVENT_CONNECTED fires once the handshake is done), or NULL with
 * <why> set and the socket closed.
 */
struct bufferevent *tt_tls_upstream_start(struct tt_worker *w,
                                          const struct tt_target *tg,
                                          struct bufferevent *tcp,
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

struct tt_server;
struct tt_tls_ctx;

/*
 * Build the TLS contexts the configuration asks for.  <*out> is NULL when
 * neither side uses TLS.  Returns 0, or -1 with <err> set.
 */
int  tt_tls_setup(struct tt_server *srv, struct tt_tls_ctx **out, char *err,
                  size_t errlen);
/* SIGHUP: load certificates again; keeps the old ones on failure */
void tt_tls_reload(struct tt_tls_ctx *t);
void tt_tls_free(struct tt_tls_ctx *t);

#endif
