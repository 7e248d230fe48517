/*
 * The process (see server.h): the top floor.  It starts the workers, hands
 * them accepted sockets (proxy/http/conn.c), drains and aborts their
 * connections and shadow legs, and reports every finished request
 * (report_request, the worker's w->report: metrics, SLO, records, access
 * log, spans).  Nothing below calls into this file.
 *
 * Worker 0 runs on the main thread and also owns the signal events and the
 * admin listener; workers 1..N-1 run on their own threads.  Every worker
 * has its own SO_REUSEPORT listener, so the kernel spreads connections.
 * All workers share one aggregator (it takes its own lock once per
 * finished request and once per scrape) and one record writer (its own
 * queue).
 *
 * SIGTERM/SIGINT: every listener stops, idle connections close, busy ones
 * close after their current response; when none is left (or the grace
 * period ends) the loops exit, records are flushed and the process exits 0.
 * SIGHUP: the record file is reopened, SLOs are re-read from the config
 * file, certificates are reloaded.
 *
 * Start-up ends with announce_ready(): once every listener is up, the
 * bound addresses are logged, written to the ready file (--ready-file) and
 * READY=1 goes to systemd (proxy/server/sdnotify.c, also the watchdog, reload
 * and status notifications).  Under socket activation the listening socket
 * comes from systemd; with several workers each one accepts on its own
 * duplicate of that one socket (the kernel wakes them in turn) instead of
 * its own SO_REUSEPORT socket.
 */
#include "proxy/server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "metrics/agg.h"
#include "metrics/clock.h"
#include "metrics/otlp_export.h"
#include "metrics/pairs.h"
#include "metrics/record.h"
#include "proxy/http/access.h"
#include "proxy/server/admin.h"
#include "proxy/http/conn.h"
#include "proxy/http/inspect.h"
#include "proxy/base/jsonarena.h"
#include "proxy/http/leg.h"
#include "proxy/http/linger.h"
#include "proxy/server/listen.h"
#include "proxy/base/log.h"
#include "proxy/server/ready.h"
#include "proxy/server/sdnotify.h"
#include "proxy/decode/stream.h"
#include "proxy/http/trace.h"
#include "proxy/base/ratelimit.h"
#include "proxy/http/upstream.h"
#include "proxy/http/worker.h"
#include "tls/tls.h"

/*
 * A finished request (worker.h: tt_worker_request_done hands it up here):
 * metrics, SLO, aggregates, the record, the access log, the span, the
 * shadow comparison.
 */
static void report_request(struct tt_worker *w, struct tt_request *r)
{
    struct tt_server *srv = w->srv;
    struct tt_metric_values m;
    struct tt_slo_result res, *resp = NULL;
    const char *source = NULL;
    char *line;
    size_t len;

    tt_metrics_compute(r, &m, &source);
    if (srv->have_slo) {
        const char *model = r->model[0] ? r->model : r->s.model;
        pthread_rwlock_rdlock(&srv->slo_lock);
        tt_slo_judge(tt_slo_for_model(&srv->slos, model), &m,
                     tt_request_outcome(r) != TT_OUT_OK, &res);
        pthread_rwlock_unlock(&srv->slo_lock);
        resp = &res;
    }
    tt_agg_observe(w->agg, r, &m, resp);     /* locks the aggregator itself */
    if (srv->rec != NULL) {
        line = tt_record_format(r, &m, source, resp, &len);
        if (line != NULL)
            tt_recorder_submit(srv->rec, line, len);
    }
    if (srv->access != NULL && !r->shadow) {    /* client requests only */
        line = tt_access_format(r, &m, srv->cfg.log_format, &len);
        tt_recorder_submit(srv->access, line, len);     /* NULL: counted */
    }
    if (srv->otlp != NULL) {          /* queued, never waits */
        if (!r->trace.on)               /* ended before its head was whole */
            tt_trace_begin(&r->trace, NULL);
        const struct tt_url *u = &srv->targets[r->target_idx < srv->ntargets
                                               ? r->target_idx : 0].url;
        tt_otlp_submit(srv->otlp, r, &m, resp, u->host, u->port);
    }
    if (r->pair != NULL) {
        tt_pair_leg_done(r->pair, r->target_idx, r, &m);
        r->pair = NULL;
    }
}

/* abandon every shadow leg still running (grace over, shutdown) */
/* the exporter's counters for /metrics (metrics/agg.h knows no exporter) */
static void span_counts(const void *src, struct tt_span_counts *c)
{
    struct tt_otlp_counts oc;

    tt_otlp_counts(src, &oc);
    c->exported = oc.exported;
    c->dropped_queue = oc.dropped_queue;
    c->dropped_export = oc.dropped_export;
}

static void abort_legs(struct tt_worker *w)
{
    while (w->legs != NULL)
        tt_leg_abort(w->legs);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int socklen, void *arg)
{
    struct tt_worker *w = arg;
    static struct tt_ratelimit over_rl;
    uint64_t held;
    (void)l;

    if (w->nconns >= w->cfg->max_connections) {
        tt_listen_refuse(w->linger, fd, w->srv->tls == NULL,
                         "tokentap is at max_connections, retry later");
        if (tt_ratelimit_ok(&over_rl, tt_now_mono(), TT_RATELIMIT_1S, &held))
            tt_log_warn("worker %d: %u connections (max_connections): refusing "
                        "new clients with 503 (%llu more refused since the last warning)",
                        w->id, w->nconns, (unsigned long long)held);
        return;
    }
    tt_conn_accept(w, fd, sa, socklen);
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct tt_worker *w = arg;
    (void)fd;
    (void)what;

    if (w->nconns > 0 || w->nlegs > 0)
        tt_log_warn("worker %d: drain grace period over, closing %u connections "
                    "and %u shadow requests", w->id, w->nconns, w->nlegs);
    while (w->conns != NULL)
        tt_conn_abort(w->conns);
    tt_conn_pool_free(w);
    abort_legs(w);
    event_base_loopexit(w->base, NULL);
}

/* ask worker <w> to drain, from any thread */
static void worker_wake(struct tt_worker *w)
{
    uint64_t one = 1;

    if (write(w->wake_fd, &one, sizeof(one)) < 0) {
        /* the counter is already non-zero: the request is pending */
    }
}

/* runs on the worker's own thread */
static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    struct tt_worker *w = arg;
    struct tt_conn *c, *next;
    struct timeval grace = { w->cfg->drain_timeout_ms / 1000,
                             (w->cfg->drain_timeout_ms % 1000) * 1000 };
    uint64_t n;
    (void)what;

    if (read(fd, &n, sizeof(n)) < 0) {
        /* spurious wake-up: nothing to take */
    }
    if (w->draining)
        return;
    event_del(w->drain_ev);         /* asked once is enough */
    w->draining = 1;
    /* close the listening socket: new clients are refused by the kernel
     * (and go to another instance) instead of waiting in a backlog */
    if (w->listener != NULL) {
        tt_listen_guard_free(w->lguard);
        w->lguard = NULL;
        evconnlistener_free(w->listener);
        w->listener = NULL;
    }
    tt_upstream_close_idle(w);
    evtimer_add(w->grace_ev, &grace);
    for (c = w->conns; c != NULL; c = next) {
        next = tt_conn_next(c);
        tt_conn_drain(c);
    }
    if (w->nconns == 0 && w->nlegs == 0)
        event_base_loopexit(w->base, NULL);
}

static struct tt_server *the_server;

/* SIGTERM/SIGINT once the loops are done: stop waiting for the records */
static volatile sig_atomic_t late_signal;

static void on_late_signal(int sig)
{
    (void)sig;
    late_signal = 1;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct tt_server *srv = arg;
    unsigned i;
    (void)what;

    if (sig == SIGHUP) {
        char err[512];
        struct tt_config fresh;

        tt_log_info("SIGHUP: reopening records and logs, reloading SLOs and certificates");
        tt_sd_reloading(srv->sd);
        if (srv->rec != NULL)
            tt_recorder_reopen(srv->rec);
        tt_log_reopen();
        tt_recorder_reopen(srv->access);
        /* the file and the command line, read again as at start */
        tt_config_defaults(&fresh);
        if (tt_config_args(&fresh, srv->argc, srv->argv, err, sizeof(err)) < 0) {
            tt_log_error("reload: %s (keeping the running configuration)", err);
        } else {
            struct tt_slo_set set;
            if (tt_config_slo_set(&fresh, &set, err, sizeof(err)) < 0) {
                tt_log_error("reload: %s (keeping the running SLOs)", err);
            } else {
                pthread_rwlock_wrlock(&srv->slo_lock);
                srv->slos = set;
                srv->have_slo = fresh.goodput[0] != '\0' || fresh.n_model_slos > 0;
                pthread_rwlock_unlock(&srv->slo_lock);
                for (i = 0; i < srv->nworkers; i++)
                    tt_agg_set_slos(srv->workers[i].agg, srv->have_slo ? &set : NULL);
                tt_log_info("reload: SLOs now '%s'", fresh.goodput);
            }
        }
        if (srv->tls != NULL)
            tt_tls_reload(srv->tls);
        tt_sd_reloaded(srv->sd);
        return;
    }
    tt_log_info("%s: draining (grace %u ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                srv->cfg.drain_timeout_ms);
    tt_sd_stopping(srv->sd);
    if (srv->admin != NULL)
        tt_admin_set_draining(srv->admin, 1);
    for (i = 0; i < srv->nworkers; i++)
        worker_wake(&srv->workers[i]);
}

/* the worker's listener: its own SO_REUSEPORT socket on --listen, or a
 * duplicate of the socket systemd passed */
static int worker_listen(struct tt_server *srv, struct tt_worker *w)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    char err[256];
    unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT;

    if (srv->sd_fd >= 0) {
        evutil_socket_t fd = fcntl(srv->sd_fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            tt_log_error("socket activation: cannot duplicate the socket: %s",
                         strerror(errno));
            return -1;
        }
        /* backlog 0: already listening */
        w->listener = evconnlistener_new(w->base, on_accept, w, LEV_OPT_CLOSE_ON_FREE,
                                         0, fd);
        if (w->listener == NULL) {
            evutil_closesocket(fd);
            tt_log_error("socket activation: cannot use the passed socket");
            return -1;
        }
    } else {
        if (tt_addr_parse(srv->cfg.listen, &ss, &sslen, err, sizeof(err)) < 0) {
            tt_log_error("--listen: %s", err);
            return -1;
        }
        /* SO_REUSEPORT lets a second process on the address take a share
         * of the connections (how an upgrade hands over): say so when the
         * address is taken before the first of our own listeners */
        if (w->id == 0 && tt_listen_addr_taken((struct sockaddr *)&ss, (unsigned)sslen) == 1)
            tt_log_warn("another socket already listens on %s; with SO_REUSEPORT the "
                        "kernel will share its connections with this tokentap (right "
                        "for an upgrade, else check for a second instance)",
                        srv->cfg.listen);
        w->listener = evconnlistener_new_bind(w->base, on_accept, w, flags, 1024,
                                              (struct sockaddr *)&ss, (int)sslen);
        if (w->listener == NULL) {
            tt_log_error("cannot listen on %s: %s", srv->cfg.listen, strerror(errno));
            return -1;
        }
    }
    /* EMFILE and friends pause accepting for a while (proxy/server/listen.c) */
    w->lguard = tt_listen_guard_new(w->listener, w->base, "the client listener");
    if (w->lguard == NULL) {
        tt_log_error("cannot guard the client listener: out of memory");
        return -1;
    }
    return 0;
}

static int worker_init(struct tt_server *srv, struct tt_worker *w, int id,
                       struct tt_agg *agg)
{
    memset(w, 0, sizeof(*w));
    w->wake_fd = -1;
    w->id = id;
    w->srv = srv;
    w->cfg = &srv->cfg;
    w->up = &srv->up;
    w->targets = srv->targets;
    w->ntargets = srv->ntargets;
    w->pairs = srv->pairs;
    w->tls = srv->tls;
    w->report = report_request;
    w->agg = agg;
    tt_agg_add_delay(agg, &w->delay);
    /* one thread runs this loop and nothing else touches it (the drain
     * request comes through an eventfd): no lock on the per-event path */
    {
        struct event_config *ec = event_config_new();
        if (ec == NULL)
            return -1;
        event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
        w->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (w->base == NULL)
        return -1;
    /* three priorities: everything runs at the default (1); shadow legs'
     * sockets at 2, so that when both are ready the primary's events and
     * the clients' run first (proxy/http/leg.c) */
    if (event_base_priority_init(w->base, TT_PRIO_COUNT) < 0)
        return -1;
    w->dns = evdns_base_new(w->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                     EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (w->dns == NULL)
        w->dns = evdns_base_new(w->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (w->dns != NULL)
        evdns_base_load_hosts(w->dns, NULL);
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wake_fd < 0)
        return -1;
    w->drain_ev = event_new(w->base, w->wake_fd, EV_READ | EV_PERSIST, on_drain, w);
    if (w->drain_ev == NULL || event_add(w->drain_ev, NULL) < 0)
        return -1;
    w->grace_ev = evtimer_new(w->base, on_grace, w);
    w->linger = tt_linger_new(w->base, w->id);
    if (w->grace_ev == NULL || w->linger == NULL)
        return -1;
    return worker_listen(srv, w);
}

static void worker_free(struct tt_worker *w)
{
    while (w->conns != NULL)
        tt_conn_abort(w->conns);
    tt_conn_pool_free(w);
    abort_legs(w);
    tt_upstream_close_idle(w);
    if (tt_linger_overflows(w->linger) > 0)
        tt_log_warn("worker %d: %lu closes did not linger (the set of %u was "
                    "full)", w->id, tt_linger_overflows(w->linger), TT_LINGER_MAX);
    tt_linger_free(w->linger);
    tt_listen_guard_free(w->lguard);
    if (w->listener)
        evconnlistener_free(w->listener);
    if (w->drain_ev)
        event_free(w->drain_ev);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->grace_ev)
        event_free(w->grace_ev);
    if (w->dns)
        evdns_base_free(w->dns, 0);
    if (w->base)
        event_base_free(w->base);
}

static void *worker_main(void *arg)
{
    struct tt_worker *w = arg;
    event_base_dispatch(w->base);
    tt_json_thread_free();          /* this thread's JSON arena */
    tt_head_thread_free();          /* and its spare head buffers */
    return NULL;
}

/* the address worker 0 actually bound, so that --listen :0 works for all
 * (and under socket activation: the address systemd bound) */
static void share_port(struct tt_server *srv, struct tt_worker *w0)
{
    char name[sizeof(srv->cfg.listen)];

    if (tt_sock_name(evconnlistener_get_fd(w0->listener), name, sizeof(name)) == 0)
        memcpy(srv->cfg.listen, name, sizeof(name));
}

/*
 * Every listener is up: say where (a log line, the ready file) and tell
 * systemd.  Returns 0, or -1 when the ready file cannot be written (whoever
 * waits for it would wait forever).
 */
static int announce_ready(struct tt_server *srv)
{
    char admin[300], status[600], err[512];
    struct tt_ready_kv kv[3];

    if (srv->admin == NULL || tt_admin_name(srv->admin, admin, sizeof(admin)) < 0)
        snprintf(admin, sizeof(admin), "off");
    tt_log_info("tokentap %s listening on %s%s, upstream %s://%s%s, admin %s, %u worker%s",
                TT_VERSION, srv->cfg.listen, srv->activated ? " (socket from systemd)" : "",
                srv->up.tls ? "https" : "http", srv->up.authority, srv->up.base_path,
                admin, srv->nworkers, srv->nworkers > 1 ? "s" : "");
    for (unsigned i = 1; i < srv->ntargets; i++) {
        const struct tt_target *t = &srv->targets[i];
        tt_log_info("shadow %s: %s://%s%s, sample %g%s%s, max_inflight %u",
                    t->name, t->url.tls ? "https" : "http", t->url.authority,
                    t->url.base_path, t->sample,
                    t->sh->sample_key[0] ? " by " : "", t->sh->sample_key,
                    t->sh->max_inflight);
    }
    if (srv->cfg.ready_file[0]) {
        kv[0] = (struct tt_ready_kv){ "listen", srv->cfg.listen };
        kv[1] = (struct tt_ready_kv){ "admin", srv->admin != NULL ? admin : NULL };
        kv[2] = (struct tt_ready_kv){ "version", TT_VERSION };
        if (tt_ready_write(srv->cfg.ready_file, kv, 3, err, sizeof(err)) < 0) {
            tt_log_error("--ready-file: %s", err);
            return -1;
        }
    }
    snprintf(status, sizeof(status), "listening on %s, admin %s", srv->cfg.listen, admin);
    tt_sd_ready(srv->sd, status);
    return 0;
}

int tt_server_run(const struct tt_config *cfg, int argc, char **argv)
{
    struct tt_server *srv;
    struct tt_agg *agg = NULL;
    struct tt_agg_opts aopts;
    struct event *sigs[4] = { NULL, NULL, NULL, NULL };
    char err[512];
    unsigned i, started = 1;
    int rc = 1;

    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    tt_stream_event_max = cfg->max_event_bytes;     /* before any worker runs */
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return 1;
    the_server = srv;
    srv->cfg = *cfg;
    srv->sd_fd = -1;
    srv->argc = argc;
    srv->argv = argv;
    pthread_rwlock_init(&srv->slo_lock, NULL);
    tt_log_level = cfg->log_level;
    tt_log_format = cfg->log_format;
    if (tt_log_open(cfg->log_file, err, sizeof(err)) < 0) {
        tt_log_error("--log-file: %s", err);
        goto out;
    }
    if (cfg->access_log[0]) {
        srv->access = tt_recorder_open(cfg->access_log, cfg->record_queue, err,
                                       sizeof(err));
        if (srv->access == NULL) {
            tt_log_error("--access-log: %s", err);
            goto out;
        }
    }
    tt_inspect_set_budget(cfg->inspect_budget);

    {
        int n = tt_targets_build(&srv->cfg, srv->targets, err, sizeof(err));
        if (n < 0) {
            tt_log_error("%s", err);
            goto out;
        }
        srv->ntargets = (unsigned)n;
        srv->up = srv->targets[0].url;
    }
    if (tt_config_slo_set(cfg, &srv->slos, err, sizeof(err)) < 0) {
        tt_log_error("%s", err);
        goto out;
    }
    srv->have_slo = cfg->goodput[0] != '\0' || cfg->n_model_slos > 0;
    if (tt_targets_tls(&srv->cfg, srv->targets, srv->ntargets, &srv->tls, err, sizeof(err)) < 0) {
        tt_log_error("%s", err);
        goto out;
    }
    memset(&aopts, 0, sizeof(aopts));
    aopts.model_cap = cfg->model_label_cap;
    aopts.semconv = cfg->metrics_semconv;
    agg = tt_agg_new(&aopts);
    if (agg == NULL) {
        tt_log_error("cannot create the aggregator");
        goto out;
    }
    if (srv->ntargets > 1) {
        const char *names[TT_MAX_TARGETS];
        for (i = 0; i < srv->ntargets; i++) {
            names[i] = srv->targets[i].name;
            if (i > 0)
                tt_agg_add_upstream(agg, names[i]);
        }
        srv->pairs = tt_pairs_new(names, srv->ntargets);
        if (srv->pairs == NULL) {
            tt_log_error("cannot create the shadow comparison store");
            goto out;
        }
        tt_agg_set_pairs(agg, srv->pairs);
    }
    tt_agg_set_slos(agg, srv->have_slo ? &srv->slos : NULL);
    if (cfg->record[0]) {
        srv->rec = tt_recorder_open(cfg->record, cfg->record_queue, err, sizeof(err));
        if (srv->rec == NULL) {
            tt_log_error("--record: %s", err);
            goto out;
        }
        tt_agg_set_recorder(agg, srv->rec);
    }
    if (cfg->otlp_url[0]) {
        struct tt_otlp_opts oo = {
            .url = cfg->otlp_url,
            .json = cfg->otlp_protocol == TT_OTLP_JSON,
            .headers = cfg->otlp_header,
            .queue = cfg->otlp_queue,
            .ca = cfg->otlp_ca,
            .service_name = getenv("OTEL_SERVICE_NAME"),
        };
        srv->otlp = tt_otlp_start(&oo, err, sizeof(err));
        if (srv->otlp == NULL) {
            tt_log_error("--otlp-endpoint: %s", err);
            goto out;
        }
        tt_agg_set_span_counts(agg, span_counts, srv->otlp);
        /* the URL has no credentials (headers carry them) */
        tt_log_info("traces: OTLP %s to %s", cfg->otlp_protocol == TT_OTLP_JSON
                    ? "http/json" : "http/protobuf", cfg->otlp_url);
    }
    if (tt_sd_listen_fd(&srv->sd_fd, err, sizeof(err)) < 0) {
        tt_log_error("%s", err);
        goto out;
    }
    srv->nworkers = cfg->workers > 0 ? (unsigned)cfg->workers : 1;
    srv->workers = calloc(srv->nworkers, sizeof(*srv->workers));
    if (srv->workers == NULL)
        goto out;
    for (i = 0; i < srv->nworkers; i++)
        srv->workers[i].wake_fd = -1;   /* worker_free() on a failed start */
    for (i = 0; i < srv->nworkers; i++) {
        if (worker_init(srv, &srv->workers[i], (int)i, agg) < 0)
            goto out;
        if (i == 0)
            share_port(srv, &srv->workers[0]);
    }
    if (strcmp(cfg->admin, "off") != 0) {
        srv->admin = tt_admin_start(srv->workers[0].base, cfg->admin, agg, err, sizeof(err));
        if (srv->admin == NULL) {
            tt_log_error("--admin: %s", err);
            goto out;
        }
        tt_admin_set_max_connections(srv->admin, cfg->admin_max_connections);
    }
    /* the workers now hold duplicates of systemd's socket */
    if (srv->sd_fd >= 0) {
        evutil_closesocket(srv->sd_fd);
        srv->sd_fd = -1;
        srv->activated = 1;
    }
    srv->sd = tt_sd_new(srv->workers[0].base, agg);
    if (srv->sd == NULL) {
        tt_log_error("cannot start the systemd notifier (out of memory or threads)");
        goto out;
    }
    for (i = 0; i < srv->nworkers; i++)
        if (tt_sd_watch_loop(srv->sd, srv->workers[i].base) < 0) {
            tt_log_error("cannot watch worker %u's event loop", i);
            goto out;
        }
    sigs[0] = evsignal_new(srv->workers[0].base, SIGTERM, on_signal, srv);
    sigs[1] = evsignal_new(srv->workers[0].base, SIGINT, on_signal, srv);
    sigs[2] = evsignal_new(srv->workers[0].base, SIGHUP, on_signal, srv);
    for (i = 0; i < 3; i++)
        evsignal_add(sigs[i], NULL);

    for (started = 1; started < srv->nworkers; started++)
        if (pthread_create(&srv->workers[started].thread, NULL, worker_main,
                           &srv->workers[started]) != 0) {
            tt_log_error("cannot start worker %u", started);
            break;
        }
    if (started == srv->nworkers && announce_ready(srv) == 0) {
        event_base_dispatch(srv->workers[0].base);
        rc = 0;
    }
    /* worker 0 is done draining (or start-up failed); stop the others */
    for (i = 1; i < started; i++) {
        worker_wake(&srv->workers[i]);
        pthread_join(srv->workers[i].thread, NULL);
    }
    if (rc == 0)
        tt_log_info("drained, exiting");
out:
    /* freeing the signal events restores the default handlers: replace
     * them, so a repeated signal cannot kill a process exiting 0 while it
     * flushes its records */
    {
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGHUP);
        /* no window with the default (fatal) action in between */
        pthread_sigmask(SIG_BLOCK, &block, &old);
        for (i = 0; i < 3; i++)
            if (sigs[i])
                event_free(sigs[i]);
        /* a signal now cuts the record flush short instead of killing a
         * process that is about to exit 0 */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_late_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGHUP, SIG_IGN);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    /* its timers live on the workers' event bases */
    tt_sd_free(srv->sd);
    if (srv->sd_fd >= 0)
        evutil_closesocket(srv->sd_fd);
    if (srv->admin)
        tt_admin_free(srv->admin);
    if (srv->workers)
        for (i = 0; i < srv->nworkers; i++)
            worker_free(&srv->workers[i]);
    free(srv->workers);
    if (srv->otlp != NULL) {
        struct tt_otlp_counts oc;
        /* bounded like the records: a receiver that hangs cannot hold the exit */
        tt_agg_set_span_counts(agg, NULL, NULL);
        tt_otlp_stop(srv->otlp, cfg->drain_timeout_ms, &late_signal, &oc);
        srv->otlp = NULL;
        if (oc.dropped_queue + oc.dropped_export > 0)
            tt_log_warn("traces: %llu spans exported, %llu dropped (queue full), "
                        "%llu dropped (export failed)", (unsigned long long)oc.exported,
                        (unsigned long long)oc.dropped_queue,
                        (unsigned long long)oc.dropped_export);
    }
    if (srv->rec != NULL) {
        /* bounded: a sink nobody reads (--record - into a stuck pipe) must
         * not hold the exit; what is left is dropped, counted and logged */
        tt_log_info("records: flushing %u queued (at most drain_timeout; "
                    "SIGTERM/SIGINT cut it short)", tt_recorder_queued(srv->rec));
        if (tt_recorder_flush_for(srv->rec, cfg->drain_timeout_ms, &late_signal) < 0)
            tt_log_warn("records: %s; remaining records dropped",
                        late_signal ? "a second signal ended the flush"
                                    : "not flushed within drain_timeout");
        if (tt_recorder_dropped(srv->rec) > 0)
            tt_log_warn("%llu records could not be written (queue full or write errors)",
                        (unsigned long long)tt_recorder_dropped(srv->rec));
    }
    tt_recorder_close(srv->rec);
    if (srv->access != NULL && tt_recorder_dropped(srv->access) > 0)
        tt_log_warn("%llu access log lines could not be written",
                    (unsigned long long)tt_recorder_dropped(srv->access));
    tt_recorder_close(srv->access);     /* writes what is queued first */
    tt_agg_free(agg);
    tt_pairs_free(srv->pairs);
    tt_targets_free(srv->targets, srv->ntargets);
    tt_tls_free(srv->tls);
    pthread_rwlock_destroy(&srv->slo_lock);
    tt_log_close();
    free(srv);
    the_server = NULL;
    return rc;
}
