/*
 * systemd notifications, watchdog and socket activation (see
 * proxy/sdnotify.h).  The protocol itself is libsystemd's; this module
 * decides what to say when.  Called by proxy/server.c only.
 */
#include "proxy/sdnotify.h"

#include <inttypes.h>
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
#include "proxy/log.h"

#define MAX_LOOPS 257           /* 256 workers, and a spare */
#define STATUS_EVERY_USEC 5000000ULL

struct loop {
    struct event     *beat;     /* owned: a timer on the loop's own base */
    _Atomic uint64_t  count;    /* bumped by <beat>, read by the main loop */
    uint64_t          seen;     /* count at the previous check */
};

struct tt_sd {
    struct event_base *base;    /* borrowed: the main loop */
    struct tt_agg     *agg;     /* borrowed */
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

static void send_status(struct tt_sd *sd, const char *extra)
{
    uint64_t requests = 0;
    int64_t inflight = 0;

    tt_agg_counts(sd->agg, &requests, &inflight);
    sd_notifyf(0, "%sSTATUS=%" PRIu64 " requests, %" PRId64 " in flight",
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
        send_status(sd, "");
        return;
    }
    if (loops_alive(sd)) {
        if (sd->stalled)
            tt_log_warn("watchdog: every event loop is running again");
        sd->stalled = 0;
        send_status(sd, "WATCHDOG=1\n");
    } else {
        if (!sd->stalled)
            tt_log_error("watchdog: an event loop is not running; "
                         "not pinging the systemd watchdog");
        sd->stalled = 1;
        send_status(sd, "");
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
    sd_notifyf(0, "READY=1\nSTATUS=%s", status);
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
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading",
               (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

void tt_sd_reloaded(struct tt_sd *sd)
{
    if (sd == NULL || !sd->enabled)
        return;
    send_status(sd, "READY=1\n");
}

void tt_sd_stopping(struct tt_sd *sd)
{
    if (sd == NULL || !sd->enabled)
        return;
    sd->stopping = 1;
    sd_notify(0, "STOPPING=1\nSTATUS=draining");
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
    free(sd);
}
