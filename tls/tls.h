/*
 * TLS for both directions: the bufferevent a connection runs on (plain or
 * OpenSSL), contexts, verification and reload.  Called by proxy/conn.c
 * (client side), proxy/upstream.c (upstream side) and proxy/server.c
 * (contexts at start and on SIGHUP).
 */
#ifndef TT_TLS_H
#define TT_TLS_H

#include <stddef.h>
#include <event2/util.h>

struct bufferevent;
struct tt_worker;

/* the bufferevent for an accepted client socket (TLS when configured);
 * NULL on failure, the socket is then still open */
struct bufferevent *tt_tls_server_bev(struct tt_worker *w, evutil_socket_t fd);

/* an unconnected bufferevent for an upstream connection; NULL on failure */
struct bufferevent *tt_tls_upstream_bev(struct tt_worker *w);

/* log pending OpenSSL errors of <bev> (if TLS) at info level; returns the
 * first reason or NULL */
const char *tt_tls_log_errors(struct bufferevent *bev, const char *side);

struct tt_server;
struct tt_tls_ctx;

/*
 * Build the TLS contexts the configuration asks for.  <*out> is NULL when
 * neither side uses TLS.  Returns 0, or -1 with <err> set.
 */
int  tt_tls_setup(struct tt_server *srv, struct tt_tls_ctx **out, char *err,
                  size_t errlen);
/* give worker <w> its contexts */
void tt_tls_worker_init(struct tt_tls_ctx *t, struct tt_worker *w);
/* SIGHUP: load certificates again; keeps the old ones on failure */
void tt_tls_reload(struct tt_tls_ctx *t);
void tt_tls_free(struct tt_tls_ctx *t);

#endif
