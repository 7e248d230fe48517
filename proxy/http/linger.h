/*
 * Lingering close: how tokentap closes a client that may still be sending.
 *
 * A socket closed with bytes unread, or that receives bytes after its
 * close, answers them with a reset; a client still sending its request
 * (a large body refused with 413, any request refused with 503 at the
 * connection cap) then fails its write with "connection reset" and never
 * reads the answer that is already in its receive buffer, or loses it.
 * So such a socket is shut for writing (the answer, then FIN) and kept
 * open, its input read and discarded, until the client closes, sends
 * nothing for LINGER_IDLE_MS (5 s) or LINGER_TOTAL_MS (30 s) have passed
 * since it was handed over: nginx's lingering_timeout and lingering_time.
 *
 * Bounded: a worker lingers on at most TT_LINGER_MAX sockets; beyond, a
 * socket is closed at once after taking what already arrived (the best
 * that can be done without holding it); the first such close of a worker
 * is logged as a warning, and their count at the worker's exit.  A slot's
 * event is allocated on its first use and reused after; nothing is
 * allocated per close.
 * One set per worker, used on that worker's thread only.
 */
#ifndef TT_LINGER_H
#define TT_LINGER_H

#include <event2/util.h>

#define TT_LINGER_MAX 128

struct event_base;
struct tt_linger;

/* a set on <base> for worker <id> (named in its log lines); NULL when out
 * of memory */
struct tt_linger *tt_linger_new(struct event_base *base, int id);
/* closes every socket still lingering; NULL is a no-op */
void tt_linger_free(struct tt_linger *lg);

/*
 * Take <fd> (its answer written, or queued in the kernel), shut it for
 * writing and discard what the client sends until it closes or the limits
 * above; closed at once when the set is full (or <lg> is NULL).  The set
 * owns <fd> from here in every case.
 */
void tt_linger_close(struct tt_linger *lg, evutil_socket_t fd);

/* closed at once so far because the set was full */
unsigned long tt_linger_overflows(const struct tt_linger *lg);

#endif
