/*
 * systemd notifications, watchdog and socket activation (see
 * proxy/server/sdnotify.h).  The protocol itself is libsystemd's; this module
 * decides what to say when.  Called by proxy/server/server.c only.
 */
#include "proxy/server/sdnotify.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>
#include <event2/util.h>
#include <systemd/sd-daemon.h>

#include "metrics/agg.h"
#include "metrics/request.h"
#include "proxy/base/log.h"

#define MAX_LOOPS 257           /* 256 workers, and a spare */
#define STATUS_EVERY_USEC 5000000ULL
#define NOTE_QUEUE 32           /* messages waiting for the sender */
#define NOTE_MAX 256            /* the longest: RELOADING=1 with its stamp */
#define EXIT_WAIT_MS 1000       /* at exit, for what is still queued */

/*
 * The sender.  sd_notify() blocks when the receiver does not read (a
 * datagram socket keeps net.unix.max_dgram_qlen messages, 10 by default):
 * called on the main loop, a stuck or slow reader would stop the loop, its
 * clients and SIGTERM with it.  So the loop only queues, and this thread
 * calls sd_notify().  A periodic message (STATUS=, WATCHDOG=1) replaces
 * one still queued behind it, since only the latest counts; READY=1,
 * RELOADING=1 and STOPPING=1 keep their order.  At exit the sender gets
 * EXIT_WAIT_MS to deliver what is queued; then it is left behind (it frees
 * itself if its send ever returns) and the process exits without it.
 */
struct note {
    int  periodic;
    char text[NOTE_MAX];
};

struct sender {
    pthread_mutex_t lock;
    pthread_cond_t  more;       /* a message was queued, or stop */
    pthread_cond_t  idle;       /* the queue emptied, or the thread ended */
    struct note     q[NOTE_QUEUE];
    unsigned        head, n;
    unsigned        dropped;    /* the queue was full */
    int             sending;    /* one message is in sd_notify() */
    int             stop;       /* send what is queued, then end */
    int             done;       /* the thread has ended */
    int             abandoned;  /* the owner stopped waiting: the thread frees */
    pthread_t       thread;
};

struct loop {
    struct event     *beat;     /* owned: a timer on the loop's own base */
    _Atomic uint64_t  count;    /* bumped by <beat>, read by the main loop */
    uint64_t          seen;     /* count at the previous check */
};

struct tt_sd {
    struct event_base *base;    /* borrowed: the main loop */
    struct tt_agg     *agg;     /* borrowed */
    struct sender     *tx;      /* owned; left behind at exit when stuck */
    struct event      *tick;    /* owned: status and watchdog check */
    int                enabled; /* NOTIFY_SOCKET is set */
    uint64_t           wd_usec; /* 0: no watchdog */
    unsigned           nloops;
    int                stalled; /* a loop did not move at the last check */
    int                stopping;/* draining: loops end one by one, so the
                                   liveness check is over (systemd stops the
                                   watchdog on STOPPING=1 too) */
    struct loop        loops[MAX_LOOPS];
};

static void sender_destroy(struct sender *tx)
{
    pthread_cond_destroy(&tx->idle);
    pthread_cond_destroy(&tx->more);
    pthread_mutex_destroy(&tx->lock);
    free(tx);
}

static void *sender_main(void *arg)
{
    struct sender *tx = arg;
    struct note cur;
    int abandoned;

    pthread_mutex_lock(&tx->lock);
    for (;;) {
        while (tx->n == 0 && !tx->stop)
            pthread_cond_wait(&tx->more, &tx->lock);
        if (tx->n == 0)
            break;
        cur = tx->q[tx->head];
        tx->head = (tx->head + 1) % NOTE_QUEUE;
        tx->n--;
        tx->sending = 1;
        pthread_mutex_unlock(&tx->lock);
        sd_notify(0, cur.text);         /* may block: only this thread waits */
        pthread_mutex_lock(&tx->lock);
        tx->sending = 0;
        if (tx->n == 0)
            pthread_cond_broadcast(&tx->idle);
    }
    tx->done = 1;
    abandoned = tx->abandoned;
    pthread_cond_broadcast(&tx->idle);
    pthread_mutex_unlock(&tx->lock);
    if (abandoned)
        sender_destroy(tx);
    return NULL;
}

static struct sender *sender_new(void)
{
    struct sender *tx = calloc(1, sizeof(*tx));
    pthread_condattr_t ca;
    sigset_t all, old;
    int rc;

    if (tx == NULL)
        return NULL;
    pthread_mutex_init(&tx->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tx->idle, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&tx->more, NULL);
    /* signals go to the loops, never to the sender */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&tx->thread, NULL, sender_main, tx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        sender_destroy(tx);
        return NULL;
    }
    return tx;
}

/* queue one message; never waits for the receiver */
static void sender_post(struct sender *tx, int periodic, const char *fmt, ...)
{
    struct note *last;
    va_list ap;
    int first_drop = 0;

    pthread_mutex_lock(&tx->lock);
    last = tx->n > 0 ? &tx->q[(tx->head + tx->n - 1) % NOTE_QUEUE] : NULL;
    if (!(periodic && last != NULL && last->periodic)) {
        if (tx->n == NOTE_QUEUE) {
            first_drop = tx->dropped++ == 0;
            pthread_mutex_unlock(&tx->lock);
            if (first_drop)
                tt_log_warn("systemd: %u notifications queued and none taken: "
                            "nothing reads NOTIFY_SOCKET; dropping new ones", NOTE_QUEUE);
            return;
        }
        last = &tx->q[(tx->head + tx->n) % NOTE_QUEUE];
        tx->n++;
    }
    last->periodic = periodic;
    va_start(ap, fmt);
    vsnprintf(last->text, sizeof(last->text), fmt, ap);
    va_end(ap);
    pthread_cond_signal(&tx->more);
    pthread_mutex_unlock(&tx->lock);
}

/* deliver what is queued, waiting EXIT_WAIT_MS at most; then free */
static void sender_free(struct sender *tx)
{
    struct timespec until;
    unsigned left, dropped;
    int rc = 0;

    clock_gettime(CLOCK_MONOTONIC, &until);
    tt_timespec_add_ms(&until, EXIT_WAIT_MS);
    pthread_mutex_lock(&tx->lock);
    tx->stop = 1;
    pthread_cond_signal(&tx->more);
    while (!tx->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&tx->idle, &tx->lock, &until);
    dropped = tx->dropped;
    if (tx->done) {
        pthread_mutex_unlock(&tx->lock);
        pthread_join(tx->thread, NULL);
        sender_destroy(tx);
    } else {
        left = tx->n + (unsigned)tx->sending;
        tx->abandoned = 1;
        pthread_mutex_unlock(&tx->lock);
        pthread_detach(tx->thread);
        tt_log_warn("systemd: %u notification%s not delivered within %d ms: "
                    "nothing reads NOTIFY_SOCKET", left, left == 1 ? "" : "s",
                    EXIT_WAIT_MS);
    }
    if (dropped > 0)
        tt_log_warn("systemd: %u notification%s dropped (queue full)", dropped,
                    dropped == 1 ? "" : "s");
}

int tt_sd_listen_fd(int *fd, char *err, size_t errlen)
{
    int n = sd_listen_fds(1);

    if (n < 0) {
        snprintf(err, errlen, "socket activation: %s", strerror(-n));
        return -1;
    }
    if (n == 0)
        return 0;
    if (n != 1) {
        snprintf(err, errlen, "socket activation: expected one listening socket, "
                 "systemd passed %d", n);
        return -1;
    }
    if (sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
        snprintf(err, errlen, "socket activation: descriptor %d is not a listening "
                 "stream socket", SD_LISTEN_FDS_START);
        return -1;
    }
    if (evutil_make_socket_nonblocking(SD_LISTEN_FDS_START) < 0) {
        snprintf(err, errlen, "socket activation: cannot make descriptor %d non-blocking",
                 SD_LISTEN_FDS_START);
        return -1;
    }
    *fd = SD_LISTEN_FDS_START;
    return 1;
}

static struct timeval tv_usec(uint64_t usec)
{
    struct timeval tv = { (time_t)(usec / 1000000), (suseconds_t)(usec % 1000000) };
    return tv;
}

static void on_beat(evutil_socket_t fd, short what, void *arg)
{
    struct loop *l = arg;
    (void)fd;
    (void)what;
    atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
}

/* <periodic>: a tick's (STATUS=, WATCHDOG=1), replaceable by the next */
static void send_status(struct tt_sd *sd, int periodic, const char *extra)
{
    uint64_t requests = 0;
    int64_t inflight = 0;

    tt_agg_counts(sd->agg, &requests, &inflight);
    sender_post(sd->tx, periodic, "%sSTATUS=%" PRIu64 " requests, %" PRId64 " in flight",
                extra, requests, inflight);
}

/* every loop advanced since the previous check */
static int loops_alive(struct tt_sd *sd)
{
    unsigned i;
    int alive = 1;

    for (i = 0; i < sd->nloops; i++) {
        uint64_t c = atomic_load_explicit(&sd->loops[i].count, memory_order_relaxed);
        if (c == sd->loops[i].seen)
            alive = 0;
        sd->loops[i].seen = c;
    }
    return alive;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct tt_sd *sd = arg;
    (void)fd;
    (void)what;

    if (sd->wd_usec == 0 || sd->stopping) {
        send_status(sd, 1, "");
        return;
    }
    if (loops_alive(sd)) {
        if (sd->stalled)
            tt_log_warn("watchdog: every event loop is running again");
        sd->stalled = 0;
        send_status(sd, 1, "WATCHDOG=1\n");
    } else {
        if (!sd->stalled)
            tt_log_error("watchdog: an event loop is not running; "
                         "not pinging the systemd watchdog");
        sd->stalled = 1;
        send_status(sd, 1, "");
    }
}

struct tt_sd *tt_sd_new(struct event_base *base, struct tt_agg *agg)
{
    struct tt_sd *sd = calloc(1, sizeof(*sd));
    const char *ns = getenv("NOTIFY_SOCKET");
    uint64_t usec = 0;

    if (sd == NULL)
        return NULL;
    sd->base = base;
    sd->agg = agg;
    sd->enabled = ns != NULL && ns[0] != '\0';
    if (sd->enabled && (sd->tx = sender_new()) == NULL) {
        free(sd);
        return NULL;
    }
    if (sd->enabled && sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        sd->wd_usec = usec;
    return sd;
}

int tt_sd_watch_loop(struct tt_sd *sd, struct event_base *base)
{
    struct loop *l;
    struct timeval tv;

    if (sd == NULL || sd->wd_usec == 0)
        return 0;
    if (sd->nloops == MAX_LOOPS)
        return -1;
    l = &sd->loops[sd->nloops];
    l->beat = event_new(base, -1, EV_PERSIST, on_beat, l);
    if (l->beat == NULL)
        return -1;
    tv = tv_usec(sd->wd_usec / 8);
    event_add(l->beat, &tv);
    sd->nloops++;
    return 0;
}

void tt_sd_ready(struct tt_sd *sd, const char *status)
{
    struct timeval tv;
    uint64_t every;

    if (sd == NULL || !sd->enabled)
        return;
    sender_post(sd->tx, 0, "READY=1\nSTATUS=%s", status);
    every = sd->wd_usec ? sd->wd_usec / 4 : STATUS_EVERY_USEC;
    sd->tick = event_new(sd->base, -1, EV_PERSIST, on_tick, sd);
    if (sd->tick == NULL)
        return;
    tv = tv_usec(every);
    event_add(sd->tick, &tv);
    if (sd->wd_usec)
        tt_log_info("systemd watchdog: %" PRIu64 " ms, checking %u event loop%s every %"
                    PRIu64 " ms", sd->wd_usec / 1000, sd->nloops,
                    sd->nloops > 1 ? "s" : "", every / 1000);
}

void tt_sd_reloading(struct tt_sd *sd)
{
    struct timespec ts;

    if (sd == NULL || !sd->enabled)
        return;
    /* MONOTONIC_USEC: newer systemd (Type=notify-reload) wants it */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sender_post(sd->tx, 0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading",
                (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

void tt_sd_reloaded(struct tt_sd *sd)
{
    if (sd == NULL || !sd->enabled)
        return;
    send_status(sd, 0, "READY=1\n");
}

void tt_sd_stopping(struct tt_sd *sd)
{
    if (sd == NULL || !sd->enabled)
        return;
    sd->stopping = 1;
    sender_post(sd->tx, 0, "STOPPING=1\nSTATUS=draining");
}

void tt_sd_free(struct tt_sd *sd)
{
    unsigned i;

    if (sd == NULL)
        return;
    if (sd->tick != NULL)
        event_free(sd->tick);
    for (i = 0; i < sd->nloops; i++)
        event_free(sd->loops[i].beat);
    if (sd->tx != NULL)
        sender_free(sd->tx);
    free(sd);
}
