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
struct tt_leg;
struct tt_head;
struct evbuffer;

/* take an accepted socket; returns NULL (socket closed) on failure */
struct tt_conn *tt_conn_accept(struct tt_worker *w, evutil_socket_t fd,
                               const struct sockaddr *sa, int salen);

/* the next connection in the worker's list (draining walks it) */
struct tt_conn *tt_conn_next(struct tt_conn *c);

/* draining: close now when idle, else after the current response */
void tt_conn_drain(struct tt_conn *c);
/* shutdown: close at once */
void tt_conn_abort(struct tt_conn *c);

/*
 * What the primary leg (proxy/leg.c) asks of its client connection: the
 * response's way to the client.
 */
/* the buffer response bytes are staged in, and handing them over */
struct evbuffer *tt_conn_stage(struct tt_conn *c);
void tt_conn_flush(struct tt_conn *c);
/* room for a read of body bytes: -1 none (bytes staged, or buffer_bytes
 * or more unsent), 0 nothing queued for the client, 1 some queued */
int  tt_conn_room(struct tt_conn *c);
/* <n> body bytes for the client, from a buffer the caller keeps, <room>
 * what tt_conn_room() said before this read: sent at once when nothing is
 * queued (a plain socket), the rest queued; returns 0, or -1 when the
 * client is behind (nothing taken: use the stage) */
int  tt_conn_body(struct tt_conn *c, const char *buf, size_t n, int room);
/* does the client hold buffer_bytes or more unsent, or a TLS write wait
 * for its delivery mark (backpressure) */
int  tt_conn_full(struct tt_conn *c);
/* write the client's version of the response head; 0, or -1 when the
 * request was failed */
int  tt_conn_response_head(struct tt_conn *c, const struct tt_head *rsh,
                           int status, int chunked);
/* the response is complete */
void tt_conn_response_done(struct tt_conn *c);
/* delivery (proxy/delivery.h): is it measured; the next write to the
 * client ends <marks> (TT_DM_BIT), so it asks for the kernel's stamp */
int  tt_conn_delivery_on(const struct tt_conn *c);
void tt_conn_mark(struct tt_conn *c, unsigned marks);
/* the upstream failed the request; <type> is a static string */
void tt_conn_leg_failed(struct tt_conn *c, int status, const char *type,
                        const char *msg);
/* the upstream connection is ready / has taken what was queued */
void tt_conn_upstream_ready(struct tt_conn *c);
void tt_conn_upstream_drained(struct tt_conn *c);
/* the response ends with the connection (close-delimited) */
void tt_conn_no_keepalive(struct tt_conn *c);
/* tunnels (101): bytes moved, or the upstream side closed */
void tt_conn_tunnel_activity(struct tt_conn *c);
/* the upstream's bytes of a tunnel (all of <in>), read at the primary's
 * stamp: to the client, and to the WebSocket session's decoding */
void tt_conn_tunnel_out(struct tt_conn *c, struct evbuffer *in);
void tt_conn_tunnel_closed(struct tt_conn *c);
/* a shadow leg leaves the connection's list */
void tt_conn_shadow_unlink(struct tt_conn *c, struct tt_leg *l);

#endif
