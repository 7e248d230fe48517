/*
 * Client connections: the request and response state machines of one
 * client connection and the upstream connection it is using.
 *
 *   client --bytes--> [cbev in] --llhttp(request)--> head rewritten --+
 *                                   body bytes moved raw -------------+--> [ubev out] --> upstream
 *   client <--[cbev out]-- head rewritten <--llhttp(response)-- [ubev in] <-- upstream
 *                    ^--- body bytes moved raw; de-chunked copy --> tt_stream (side read)
 *
 * Owned by the worker's connection list; frees itself on close.
 */
#ifndef TT_CONN_H
#define TT_CONN_H

#include <event2/util.h>

struct tt_worker;
struct tt_conn;
struct tt_upconn;

/* take an accepted socket; returns NULL (socket closed) on failure */
struct tt_conn *tt_conn_accept(struct tt_worker *w, evutil_socket_t fd);

/* a new upstream connection <u> is connecting for <c> (NULL: no longer);
 * <c> closes it if the request ends first */
void tt_conn_upstream_pending(struct tt_conn *c, struct tt_upconn *u);
/* the upstream connection asked for with tt_upstream_get() is ready */
void tt_conn_upstream_ready(struct tt_conn *c, struct tt_upconn *u,
                            int reused);
/* ... or could not be had; <type> is a static string */
void tt_conn_upstream_failed(struct tt_conn *c, int status, const char *type,
                             const char *msg);

/* the next connection in the worker's list (draining walks it) */
struct tt_conn *tt_conn_next(struct tt_conn *c);

/* draining: close now when idle, else after the current response */
void tt_conn_drain(struct tt_conn *c);
/* shutdown: close at once */
void tt_conn_abort(struct tt_conn *c);

#endif
