/*
 * systemd integration over libsystemd's sd-daemon: readiness (READY=1 once
 * every listener is up), reload (RELOADING=1 / READY=1 around SIGHUP),
 * STOPPING=1, a STATUS= line (requests, requests in flight), the watchdog
 * (WATCHDOG=1 only while every event loop is alive) and socket activation
 * (the listening socket systemd passed, sd_listen_fds).  Owned by
 * proxy/server/sdnotify.c; called by proxy/server/server.c at start, on signals and at
 * exit.  Without NOTIFY_SOCKET every call is a no-op.
 *
 * No call waits for the receiver: messages are queued for a sender thread
 * (sd_notify() blocks while the socket's queue is full), and tt_sd_free()
 * gives what is still queued one second before it returns without it.
 *
 * Liveness: every registered event loop runs a timer that bumps its own
 * counter every WATCHDOG_USEC/8; the main loop checks every WATCHDOG_USEC/4
 * and pings only when every counter moved since the previous check, so a
 * loop stuck in a callback stops the pings and systemd restarts the
 * service after WatchdogSec.
 */
#ifndef TT_SDNOTIFY_H
#define TT_SDNOTIFY_H

#include <stddef.h>

struct event_base;
struct tt_agg;
struct tt_sd;

/*
 * The listening socket passed by systemd (LISTEN_FDS/LISTEN_PID, unset
 * afterwards so that children do not inherit them).  Returns 1 with *fd
 * set, 0 when none was passed, -1 with <err> set when the passed
 * descriptors are not exactly one listening stream socket.
 */
int tt_sd_listen_fd(int *fd, char *err, size_t errlen);

/* the notifier on the main loop <base>; <agg> (borrowed) gives STATUS=.
 * NULL only when out of memory. */
struct tt_sd *tt_sd_new(struct event_base *base, struct tt_agg *agg);

/* watch the liveness of loop <base> (call before its thread starts) */
int tt_sd_watch_loop(struct tt_sd *sd, struct event_base *base);

/* every listener is up: READY=1 with <status>, then the periodic timer */
void tt_sd_ready(struct tt_sd *sd, const char *status);
void tt_sd_reloading(struct tt_sd *sd);
void tt_sd_reloaded(struct tt_sd *sd);
void tt_sd_stopping(struct tt_sd *sd);

/* frees the timers: before the event bases they were added to */
void tt_sd_free(struct tt_sd *sd);

#endif
