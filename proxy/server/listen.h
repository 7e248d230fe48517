/*
 * What every listener needs when the process runs short of resources:
 *
 *  - accept failing with EMFILE/ENFILE/ENOBUFS/ENOMEM would fire again at
 *    once (the socket stays readable) and spin a core: the guard pauses the
 *    listener with a timer instead (100 ms, doubling to 1 s while it keeps
 *    failing) and logs one warning a second at most, with the number of
 *    failures in between.  Clients wait in the kernel backlog meanwhile.
 *  - a client over a connection cap gets a fixed 503 (OpenAI error shape,
 *    Connection: close) written straight to the socket, and is closed
 *    lingering: no buffer, no parser; a slot of the worker's bounded
 *    lingering set (proxy/http/linger.h) until the client closes.
 *
 * Used by proxy/server/server.c (client listeners) and proxy/server/admin.c.
 */
#ifndef TT_LISTEN_H
#define TT_LISTEN_H

#include <event2/util.h>

struct event_base;
struct evconnlistener;
struct tt_listen_guard;
struct tt_linger;

/*
 * Guard <l> (borrowed; it must outlive the guard) on <base>; <name> (a static
 * string) names it in log lines.  Replaces the listener's error callback.
 * Returns NULL when out of memory.
 */
struct tt_listen_guard *tt_listen_guard_new(struct evconnlistener *l,
                                            struct event_base *base,
                                            const char *name);
/* times the guard paused its listener so far */
unsigned long tt_listen_guard_pauses(const struct tt_listen_guard *g);
/* NULL is a no-op; call before freeing the listener */
void tt_listen_guard_free(struct tt_listen_guard *g);

/*
 * Answer the freshly accepted <fd> with 503 and <msg> (a static string,
 * JSON-safe) when <plain> (TLS listeners cannot answer before a handshake:
 * they only close), and close it.  Never blocks.  The answer's socket is
 * closed lingering (proxy/http/linger.h, on <lg>, the worker's set): what the
 * client is still sending is read and discarded until it closes, so that
 * its request meets a FIN rather than a reset that could destroy the
 * answer.
 */
void tt_listen_refuse(struct tt_linger *lg, evutil_socket_t fd, int plain,
                      const char *msg);

/*
 * Does another socket already hold <sa> (a port > 0)?  A throwaway
 * socket binds it with SO_REUSEADDR but without SO_REUSEPORT: the kernel
 * refuses that with EADDRINUSE exactly when a socket is bound (listening)
 * there, while a connection in TIME_WAIT does not count.  It asks the
 * kernel the question the real bind would, so it sees IPv4 and IPv6,
 * wildcard and specific addresses alike, unlike a scan of
 * /proc/net/tcp{,6}.  The socket never listens and is closed at once.
 * Called before the first of tokentap's own SO_REUSEPORT listeners is
 * bound, so --workers N never sees itself.  Returns 1 taken, 0 free (or
 * port 0), -1 when the probe itself failed (errno set).
 */
struct sockaddr;
int tt_listen_addr_taken(const struct sockaddr *sa, unsigned salen);

#endif
