/*
 * Small helpers over libevent used by both sides of a proxied request
 * (proxy/http/conn.c, the client side; proxy/http/leg.c, the upstream side): llhttp
 * run in place over an evbuffer's iovecs, text and numbers added to an
 * evbuffer without printf, timers in milliseconds, and TCP_NODELAY.
 */
#ifndef TT_IO_H
#define TT_IO_H

#include <stddef.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#include <llhttp.h>

struct evbuffer;
struct event;
struct bufferevent;
struct tt_head;
struct tt_chunks;

/*
 * Run parser <p> over bytes [<off>, <off> + <max>) of <in>, in place.
 * Returns the number of bytes the parser consumed and sets <*err> to
 * llhttp's result (HPE_OK when all <max> bytes were consumed).  With
 * <scan>, consumed bytes are also checked for obs-fold.  An empty range
 * still runs the parser once, so that a bodyless message completes.
 * With <chunks>, complete chunks are taken without llhttp where the parser
 * stands between two of them (proxy/decode/chunks.h).
 */
size_t tt_parse_buf(llhttp_t *p, struct evbuffer *in, size_t off, size_t max,
                    enum llhttp_errno *err, struct tt_head *scan,
                    struct tt_chunks *chunks);

/* the reason llhttp gives for its last error */
const char *tt_parse_error(const llhttp_t *p, enum llhttp_errno e);

/* <s>, and <v> in decimal, added to <out> without printf (a head is built
 * once per request); 0, or -1 as evbuffer_add */
int tt_add_str(struct evbuffer *out, const char *s);
int tt_add_num(struct evbuffer *out, long long v);

/* <ms> milliseconds as a struct timeval, for libevent's timeouts */
static inline struct timeval tt_ms_tv(unsigned ms)
{
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    return tv;
}

/* (re)arm <ev> to fire in <ms> milliseconds */
void tt_timer_set(struct event *ev, unsigned ms);

/* TCP_NODELAY on the socket of <bev>, or on <fd> (SSE events are small
 * writes) */
void tt_nodelay(struct bufferevent *bev);
void tt_nodelay_fd(int fd);

/*
 * recv(2) and send(2) of the per-event path, as the system calls
 * themselves.  glibc's recv() and send() are cancellation points: once a
 * process has a second thread (the record writer, a second worker, the
 * systemd sender) each call pays two atomic updates of the thread's cancel
 * state around the system call, about 35 instructions, two calls an event.
 * tokentap never cancels a thread.  Same results and errno as recv/send.
 */
static inline ssize_t tt_recv(int fd, void *buf, size_t n, int flags)
{
    return (ssize_t)syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}

static inline ssize_t tt_send(int fd, const void *buf, size_t n, int flags)
{
    return (ssize_t)syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
}

#endif
