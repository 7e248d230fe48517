/*
 * The process: workers (one event loop per thread, SO_REUSEPORT
 * listeners), the record writer, SLOs, the admin listener, signals and
 * draining.  Called by proxy/server/main.c.
 */
#ifndef TT_SERVER_H
#define TT_SERVER_H

#include <pthread.h>

#include "metrics/slo.h"
#include "proxy/config/config.h"
#include "proxy/http/target.h"
#include "proxy/base/url.h"

struct tt_worker;
struct tt_recorder;
struct tt_admin;
struct tt_tls_ctx;
struct tt_pairs;
struct tt_sd;
struct tt_otlp;

struct tt_server {
    struct tt_config    cfg;        /* owned copy */
    int                 argc;       /* the command line, for SIGHUP */
    char              **argv;       /* borrowed */
    struct tt_url       up;         /* == targets[0].url */
    struct tt_target    targets[TT_MAX_TARGETS];    /* 0 primary, then shadows */
    unsigned            ntargets;
    struct tt_worker   *workers;    /* owned, cfg.workers entries */
    unsigned            nworkers;
    struct tt_recorder *rec;        /* owned, may be NULL */
    struct tt_recorder *access;     /* owned: the access log, may be NULL */
    struct tt_admin    *admin;      /* owned, may be NULL */
    struct tt_tls_ctx  *tls;        /* owned, may be NULL */
    struct tt_pairs    *pairs;      /* owned: shadow comparisons, NULL without shadows */
    struct tt_sd       *sd;         /* owned: systemd notifications */
    struct tt_otlp     *otlp;       /* owned: span exporter, NULL when off */
    int                 sd_fd;      /* socket passed by systemd until the
                                       workers duplicated it, else -1 */
    int                 activated;  /* the listener came from systemd */

    /* SLOs: replaced as a whole on SIGHUP, read under <slo_lock> */
    pthread_rwlock_t    slo_lock;
    struct tt_slo_set   slos;
    int                 have_slo;
};

/* run the proxy until SIGTERM/SIGINT; returns the process exit status */
int tt_server_run(const struct tt_config *cfg, int argc, char **argv);

#endif
