/*
 * Lingering close (see linger.h).
 */
#include "proxy/http/linger.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "metrics/request.h"
#include "proxy/base/log.h"

#define LINGER_IDLE_MS  5000u
#define LINGER_TOTAL_MS 30000u
#define SINK_BYTES      16384
/* reads a wake-up at most (256 KiB): a fast sender cannot hold the loop */
#define READS_PER_WAKE  16

struct slot {
    struct tt_linger *lg;
    struct event     *ev;           /* owned, made on first use */
    evutil_socket_t   fd;           /* owned while in use, else -1 */
    uint64_t          until;        /* tt_now_mono() deadline of the whole */
};

struct tt_linger {
    struct event_base *base;        /* borrowed */
    int                id;          /* the worker's */
    unsigned           nfree;
    unsigned           free_idx[TT_LINGER_MAX];
    unsigned long      overflows;
    struct slot        s[TT_LINGER_MAX];
    char               sink[SINK_BYTES];
};

struct tt_linger *tt_linger_new(struct event_base *base, int id)
{
    struct tt_linger *lg = calloc(1, sizeof(*lg));

    if (lg == NULL)
        return NULL;
    lg->base = base;
    lg->id = id;
    for (unsigned i = 0; i < TT_LINGER_MAX; i++) {
        lg->s[i].lg = lg;
        lg->s[i].fd = -1;
        /* handed out lowest first */
        lg->free_idx[i] = TT_LINGER_MAX - 1 - i;
    }
    lg->nfree = TT_LINGER_MAX;
    return lg;
}

static void release(struct slot *s)
{
    struct tt_linger *lg = s->lg;

    event_del(s->ev);
    evutil_closesocket(s->fd);
    s->fd = -1;
    lg->free_idx[lg->nfree++] = (unsigned)(s - lg->s);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct slot *s = arg;

    if (what & EV_TIMEOUT) {
        release(s);                 /* the client sent nothing for a while */
        return;
    }
    for (int i = 0; i < READS_PER_WAKE; i++) {
        ssize_t n = recv(fd, s->lg->sink, sizeof(s->lg->sink), MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            break;
        release(s);                 /* closed (0) or reset: done */
        return;
    }
    if (tt_now_mono() >= s->until)
        release(s);
}

/* the best without holding <fd>: what already arrived goes, then FIN */
static void close_now(evutil_socket_t fd)
{
    char sink[4096];

    if (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) < 0) {
        /* nothing there */
    }
    evutil_closesocket(fd);
}

void tt_linger_close(struct tt_linger *lg, evutil_socket_t fd)
{
    static const struct timeval idle = {
        LINGER_IDLE_MS / 1000, (LINGER_IDLE_MS % 1000) * 1000
    };
    struct slot *s;

    if (shutdown(fd, SHUT_WR) < 0 || lg == NULL || lg->nfree == 0) {
        /* not connected any more, or no room */
        if (lg != NULL && lg->nfree == 0 && lg->overflows++ == 0)
            tt_log_warn("worker %d: %u sockets lingering: a client answered "
                        "while still sending is closed at once from here (its "
                        "late bytes meet a reset); counted, the total logged "
                        "at exit", lg->id, TT_LINGER_MAX);
        close_now(fd);
        return;
    }
    s = &lg->s[lg->free_idx[lg->nfree - 1]];
    if (s->ev == NULL)
        s->ev = event_new(lg->base, fd, EV_READ | EV_PERSIST, on_read, s);
    else if (event_assign(s->ev, lg->base, fd, EV_READ | EV_PERSIST, on_read, s) < 0) {
        close_now(fd);
        return;
    }
    if (s->ev == NULL || event_add(s->ev, &idle) < 0) {
        close_now(fd);
        return;
    }
    lg->nfree--;
    s->fd = fd;
    s->until = tt_now_mono() + (uint64_t)LINGER_TOTAL_MS * 1000000u;
}

unsigned long tt_linger_overflows(const struct tt_linger *lg)
{
    return lg ? lg->overflows : 0;
}

void tt_linger_free(struct tt_linger *lg)
{
    if (lg == NULL)
        return;
    for (unsigned i = 0; i < TT_LINGER_MAX; i++) {
        if (lg->s[i].fd >= 0)
            release(&lg->s[i]);
        if (lg->s[i].ev != NULL)
            event_free(lg->s[i].ev);
    }
    free(lg);
}
