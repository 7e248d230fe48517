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

/* take an accepted socket; returns NULL (socket closed) on failure */
struct tt_conn *tt_conn_accept(struct tt_worker *w, evutil_socket_t fd,
                               const struct sockaddr *sa, int salen);

/* the next connection in the worker's list (draining walks it) */
struct tt_conn *tt_conn_next(struct tt_conn *c);

/* draining: close now when idle, else after the current response */
void tt_conn_drain(struct tt_conn *c);
/* shutdown: close at once */
void tt_conn_abort(struct tt_conn *c);

#endif
