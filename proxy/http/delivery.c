/*
 * Delivery (see delivery.h for the picture).
 *
 * The kernel side, Linux only:
 *  - SO_TIMESTAMPING = SOFTWARE | OPT_ID | OPT_TSONLY at set-up: stamps are
 *    reported, numbered by the socket's byte count (a stamp's key is the
 *    index of the last byte of the send that asked for it, counted from the
 *    set-up, which comes before the first byte written: tokentap sets it up
 *    on accept), and carry no copy of the bytes; nothing is recorded yet.
 *  - "| TX_ACK" while armed: every send asks for a stamp when the peer's
 *    TCP acknowledges its last byte.  Acknowledgements are cumulative, so
 *    the first stamp whose key reaches a mark's last byte is the mark's.
 *  - the socket's byte count: tcpi_bytes_acked (TCP_INFO) + SIOCOUTQ
 *    (taken, not yet acknowledged) = every byte the socket took.
 * Stamps are CLOCK_REALTIME; they are moved to CLOCK_MONOTONIC with the
 * two clocks' offset when they are read.
 *
 * A stamp read while a mark still waits for its socket end (a TLS write
 * not yet drained) could belong to it: the queue is read only once every
 * mark has its end, so nothing is matched against a mark too early.
 */
#include "proxy/http/delivery.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "metrics/request.h"

/* the state every platform keeps; delivery itself stays off */
static void init_fields(struct tt_delivery *d, struct event_base *base,
                        evutil_socket_t fd, int tls, event_callback_fn cb, void *arg)
{
    struct event *spare = d->spare;

    memset(d, 0, sizeof(*d));
    d->spare = spare;
    d->fd = fd;
    d->wfd = -1;
    d->evbase = base;
    d->tls = tls != 0;
    d->cb = cb;
    d->arg = arg;
}

#ifdef __linux__
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* tcpi_state of a socket the peer reset (the kernel's TCP_CLOSE, named by
 * <netinet/tcp.h>, which cannot be included beside <linux/tcp.h>) */
#define TT_TCP_CLOSE 7

#define TS_REPORT (SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | \
                   SOF_TIMESTAMPING_OPT_TSONLY)

static void set_recording(struct tt_delivery *d, int on)
{
    int v = TS_REPORT | (on ? SOF_TIMESTAMPING_TX_ACK : 0);

    if (setsockopt(d->fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)) == 0)
        d->armed = on != 0;
}

/* every byte the socket took so far (0 when unknown); <ti> filled */
static uint64_t socket_written(const struct tt_delivery *d, struct tcp_info *ti,
                               int *outq)
{
    socklen_t len = sizeof(*ti);

    memset(ti, 0, sizeof(*ti));
    *outq = 0;
    if (getsockopt(d->fd, IPPROTO_TCP, TCP_INFO, ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti->tcpi_bytes_acked) ||
        ioctl(d->fd, SIOCOUTQ, outq) != 0 || *outq < 0) {
        *outq = 0;
        return 0;
    }
    return ti->tcpi_bytes_acked + (uint64_t)*outq;
}

static uint64_t written_now(const struct tt_delivery *d)
{
    struct tcp_info ti;
    int outq;
    return socket_written(d, &ti, &outq);
}

void tt_delivery_init(struct tt_delivery *d, struct event_base *base,
                      evutil_socket_t fd, int tls, int on,
                      event_callback_fn cb, void *arg)
{
    int v = TS_REPORT;

    init_fields(d, base, fd, tls, cb, arg);
    /* on an AF_UNIX socket or an old kernel this fails: delivery stays off */
    if (on && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &v, sizeof(v)) == 0)
        d->on = 1;
}

void tt_delivery_park(struct tt_delivery *d)
{
    if (d->watch != NULL) {
        event_del(d->watch);
        if (d->spare == NULL)
            d->spare = d->watch;
        else
            event_free(d->watch);
        d->watch = NULL;
    }
    if (d->wfd >= 0) {
        close(d->wfd);
        d->wfd = -1;
    }
    d->on = 0;
}

void tt_delivery_fini(struct tt_delivery *d)
{
    tt_delivery_park(d);
    if (d->spare != NULL) {
        event_free(d->spare);
        d->spare = NULL;
    }
}

int tt_delivery_watch(struct tt_delivery *d)
{
    if (!d->on)
        return -1;
    if (d->watch != NULL)
        return 0;
    /* a duplicate: libevent will not mix edge- and level-triggered events
     * on one descriptor, and the connection's are level-triggered */
    d->wfd = fcntl(d->fd, F_DUPFD_CLOEXEC, 0);
    if (d->wfd < 0)
        return -1;
    if (d->spare != NULL &&
        event_assign(d->spare, d->evbase, d->wfd, EV_READ | EV_CLOSED | EV_ET | EV_PERSIST,
                     d->cb, d->arg) == 0) {
        d->watch = d->spare;
        d->spare = NULL;
    } else {
        d->watch = event_new(d->evbase, d->wfd, EV_READ | EV_CLOSED | EV_ET | EV_PERSIST,
                             d->cb, d->arg);
    }
    if (d->watch == NULL || event_add(d->watch, NULL) != 0) {
        tt_delivery_fini(d);        /* and delivery is off from now on */
        return -1;
    }
    return 0;
}

void tt_delivery_begin(struct tt_delivery *d)
{
    if (!d->on)
        return;
    memset(d->want, 0, sizeof(d->want));
    memset(d->acked, 0, sizeof(d->acked));
    d->unmapped = 0;
    if (d->have_prev)
        d->base = d->prev_end;
    else if (!d->tls)
        d->base = 0;                /* nothing written on a new plain socket */
    else
        d->base = written_now(d);   /* the TLS handshake's bytes */
}

int tt_delivery_prepare(struct tt_delivery *d)
{
    if (!d->on)
        return -1;
    return d->watch != NULL ? 0 : tt_delivery_watch(d);
}

ssize_t tt_delivery_sendv(struct tt_delivery *d, const struct iovec *iov, int n)
{
    union {
        char buf[CMSG_SPACE(sizeof(uint32_t))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg;
    struct cmsghdr *cm;
    uint32_t rec = SOF_TIMESTAMPING_TX_ACK;

    memset(&msg, 0, sizeof(msg));
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_iov = (struct iovec *)iov;
    msg.msg_iovlen = (size_t)n;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SO_TIMESTAMPING;
    cm->cmsg_len = CMSG_LEN(sizeof(rec));
    memcpy(CMSG_DATA(cm), &rec, sizeof(rec));
    d->asked = 1;
    return sendmsg(d->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void tt_delivery_arm(struct tt_delivery *d)
{
    if (tt_delivery_prepare(d) == 0 && !d->armed)
        set_recording(d, 1);
}

void tt_delivery_written(struct tt_delivery *d, unsigned marks, size_t pending,
                         uint64_t handed)
{
    uint64_t w;

    if (!d->on || marks == 0)
        return;
    if (!d->tls) {
        /* plain: the socket carries the response's bytes as handed over,
         * in order, after <base>; what is still held goes out through the
         * connection's write event, which must ask for stamps too */
        if (pending > 0 && !d->armed)
            set_recording(d, 1);
        else if (pending == 0 && d->armed && d->unmapped == 0)
            set_recording(d, 0);
        if (!d->asked && !d->armed)
            return;                 /* no stamp was asked for: nothing to wait for */
        d->asked = 0;
        w = d->base + handed;
    } else if (pending == 0 && d->armed) {
        w = written_now(d);         /* TLS: all of it is records on the socket */
        if (d->unmapped == 0)
            set_recording(d, 0);
    } else {
        d->unmapped |= d->armed ? marks : 0;
        return;
    }
    if (w == 0)
        return;
    for (int k = 0; k < TT_DM__COUNT; k++)
        if ((marks & TT_DM_BIT(k)) && d->want[k] == 0)
            d->want[k] = w;
}

void tt_delivery_drained(struct tt_delivery *d)
{
    uint64_t w;

    if (!d->on)
        return;
    if (d->unmapped != 0) {
        w = written_now(d);
        for (int k = 0; k < TT_DM__COUNT; k++)
            if ((d->unmapped & TT_DM_BIT(k)) && d->want[k] == 0)
                d->want[k] = w;
        d->unmapped = 0;
    }
    if (d->armed)
        set_recording(d, 0);
    tt_delivery_poll(d);
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC now, ns */
static int64_t clock_offset(void)
{
    struct timespec rn, mn;

    clock_gettime(CLOCK_REALTIME, &rn);
    clock_gettime(CLOCK_MONOTONIC, &mn);
    return ((int64_t)rn.tv_sec - mn.tv_sec) * 1000000000LL + (rn.tv_nsec - mn.tv_nsec);
}

unsigned tt_delivery_poll(struct tt_delivery *d)
{
    char ctrl[512];
    struct msghdr msg;
    unsigned done = 0;
    int64_t off = 0;

    if (!d->on)
        return 0;
    while (d->unmapped == 0) {
        struct cmsghdr *cm;
        const struct scm_timestamping *tss = NULL;
        const struct sock_extended_err *ee = NULL;

        memset(&msg, 0, sizeof(msg));
        msg.msg_control = ctrl;
        msg.msg_controllen = sizeof(ctrl);
        if (recvmsg(d->fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            break;                  /* EAGAIN: the queue is empty */
        for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_TIMESTAMPING)
                tss = (const void *)CMSG_DATA(cm);
            else if ((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                     (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR))
                ee = (const void *)CMSG_DATA(cm);
        }
        if (tss == NULL || ee == NULL || ee->ee_origin != SO_EE_ORIGIN_TIMESTAMPING ||
            ee->ee_info != SCM_TSTAMP_ACK)
            continue;
        if (off == 0)
            off = clock_offset();   /* once a read: one stamp, one instant */
        for (int k = 0; k < TT_DM__COUNT; k++) {
            /* keys count 32 bits: compare modulo 2^32 */
            if (d->want[k] != 0 && d->acked[k] == 0 &&
                (int32_t)(ee->ee_data + 1 - (uint32_t)d->want[k]) >= 0)
                d->acked[k] = (uint64_t)((int64_t)tss->ts[0].tv_sec * 1000000000LL +
                                         tss->ts[0].tv_nsec - off);
        }
    }
    for (int k = 0; k < TT_DM__COUNT; k++)
        if (d->acked[k] != 0)
            done |= TT_DM_BIT(k);
    return done;
}

int tt_delivery_settled(const struct tt_delivery *d)
{
    if (!d->on || d->unmapped != 0)
        return !d->on;
    for (int k = 0; k < TT_DM__COUNT; k++)
        if (d->want[k] != 0 && d->acked[k] == 0)
            return 0;
    return 1;
}

int tt_delivery_response_acked(const struct tt_delivery *d)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    if (!d->on || getsockopt(d->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
        return -1;
    return ti.tcpi_bytes_acked > d->base;
}

int tt_delivery_peer_gone(const struct tt_delivery *d)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    if (getsockopt(d->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return 1;
    return ti.tcpi_state == TT_TCP_CLOSE;
}

/* token events whose read ends (<ends>, the response's bytes handed over
 * by then, modulo 2^32) are within its first <acked> bytes: the ones past
 * it are the tail the client had not acknowledged, never more than the
 * socket's buffers hold, so the count walks back from the last */
static uint32_t count_upto(const uint32_t *ends, uint32_t n, uint64_t acked)
{
    uint32_t a = (uint32_t)acked;

    while (n > 0 && (int32_t)(ends[n - 1] - a) > 0)
        n--;
    return n;
}

void tt_delivery_finish(struct tt_delivery *d, struct tt_request *r, size_t pending)
{
    struct tt_delivery_stats *ds = &r->dl;
    struct tcp_info ti;
    uint64_t w, acked, plain;
    int outq;

    if (!d->on)
        return;
    if (d->unmapped != 0 && pending == 0)
        tt_delivery_drained(d);
    tt_delivery_poll(d);
    for (int k = 0; k < TT_DM__COUNT; k++)
        if (d->acked[k] != 0)
            r->ts[TT_TS_FIRST_TOKEN_ACKED + k] = d->acked[k];
    w = socket_written(d, &ti, &outq);
    if (w != 0) {
        ds->has_tcp = 1;
        ds->rtt_us = ti.tcpi_rtt;
        ds->min_rtt_us = ti.tcpi_min_rtt;
        ds->rttvar_us = ti.tcpi_rttvar;
        ds->retransmits = ti.tcpi_total_retrans - (d->have_prev ? d->prev_retrans : 0);
        ds->delivery_rate_bps = ti.tcpi_delivery_rate * 8;
        ds->unacked_bytes = (uint64_t)outq;
        ds->written_bytes = w > d->base ? w - d->base : 0;
        acked = ti.tcpi_bytes_acked > d->base ? ti.tcpi_bytes_acked - d->base : 0;
        if (acked > ds->written_bytes)
            acked = ds->written_bytes;
        ds->acked_bytes = acked;
        /* token events by the response bytes handed over when each was
         * decoded; TLS: acknowledged records as a share of those bytes */
        if (acked >= ds->written_bytes && pending == 0)
            plain = r->handed;
        else if (!d->tls)
            plain = acked;
        else
            plain = ds->written_bytes ? r->handed * acked / ds->written_bytes : 0;
        ds->acked_token_events = r->token_end != NULL
                               ? count_upto(r->token_end, r->n_token_ts, plain) : 0;
        d->prev_end = w;
        d->prev_retrans = ti.tcpi_total_retrans;
        d->have_prev = 1;
    }
    ds->on = 1;
    if (d->armed)
        set_recording(d, 0);
    memset(d->want, 0, sizeof(d->want));
    memset(d->acked, 0, sizeof(d->acked));
    d->unmapped = 0;
}

#else   /* not Linux: no kernel stamps; every call is a no-op */

void tt_delivery_init(struct tt_delivery *d, struct event_base *base,
                      evutil_socket_t fd, int tls, int on,
                      event_callback_fn cb, void *arg)
{
    (void)on;
    init_fields(d, base, fd, tls, cb, arg);
}
void tt_delivery_fini(struct tt_delivery *d) { (void)d; }
void tt_delivery_park(struct tt_delivery *d) { (void)d; }
int  tt_delivery_watch(struct tt_delivery *d) { (void)d; return -1; }
void tt_delivery_begin(struct tt_delivery *d) { (void)d; }
int  tt_delivery_prepare(struct tt_delivery *d) { (void)d; return -1; }
ssize_t tt_delivery_sendv(struct tt_delivery *d, const struct iovec *iov, int n)
{ (void)d; (void)iov; (void)n; errno = ENOSYS; return -1; }
void tt_delivery_arm(struct tt_delivery *d) { (void)d; }
void tt_delivery_written(struct tt_delivery *d, unsigned marks, size_t pending,
                         uint64_t handed)
{ (void)d; (void)marks; (void)pending; (void)handed; }
void tt_delivery_drained(struct tt_delivery *d) { (void)d; }
unsigned tt_delivery_poll(struct tt_delivery *d) { (void)d; return 0; }
int  tt_delivery_settled(const struct tt_delivery *d) { (void)d; return 1; }
int  tt_delivery_peer_gone(const struct tt_delivery *d) { (void)d; return 0; }
int  tt_delivery_response_acked(const struct tt_delivery *d) { (void)d; return -1; }
void tt_delivery_finish(struct tt_delivery *d, struct tt_request *r, size_t pending)
{ (void)d; (void)r; (void)pending; }

#endif
