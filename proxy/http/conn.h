/*
 * Client connections: the request state machine of one client connection,
 * and the sink its primary leg's response goes to (proxy/http/leg.h).
 *
 *   client --recv--> [in] --llhttp(request)--> head rewritten --+--> primary leg --> upstream
 *                               body bytes moved raw -----------+--> shadow legs (copies)
 *   client <--write at once, else [out]-- stage <--sink-- primary leg (response
 *                                                 parsed, decoded: leg.c)
 *
 * A plain client is read and written with plain events, a TLS one through
 * its bufferevent (OpenSSL filter); the request logic is the same.
 *
 * Above the legs (it calls them, they call it only through the sink) and
 * below proxy/server/server.c, which accepts, drains and aborts connections
 * through the functions here.  Owned by the worker's connection list;
 * on close it goes to the worker's pool of closed connections (conn.c).
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

/* free the closed connections <w> keeps for its next accepts (before its
 * loop is freed) */
void tt_conn_pool_free(struct tt_worker *w);

#endif
