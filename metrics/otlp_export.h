/*
 * The OTLP/HTTP span exporter (SPEC section 14): workers hand finished
 * request legs to tt_otlp_submit(), which builds the span (metrics/otlp.c)
 * and puts it on a bounded queue, never waiting; one thread takes batches
 * (512 spans, or what came within 1 s), encodes them (protobuf or JSON),
 * gzips and POSTs them to the traces URL with libcurl, retrying 429, 502,
 * 503, 504 and connection failures with backoff (Retry-After honoured).
 * A full queue drops the new span; a batch that cannot be delivered is
 * dropped after its retries; both are counted.
 *
 * Owned by metrics/otlp_export.c; started and stopped by proxy/server/server.c,
 * read by metrics/agg.c (/metrics counters).
 */
#ifndef TT_OTLP_EXPORT_H
#define TT_OTLP_EXPORT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/metric.h"
#include "metrics/request.h"
#include "metrics/slo.h"

#define TT_OTLP_BATCH     512       /* spans a request at most */
#define TT_OTLP_BATCH_MS  1000      /* a span waits at most this for its batch */
#define TT_OTLP_TIMEOUT_MS 10000    /* one export request, connect included */
#define TT_OTLP_ATTEMPTS  6         /* per batch: the first and 5 retries */

struct tt_otlp_opts {
    const char *url;            /* the traces URL itself (".../v1/traces") */
    int         json;           /* 1: http/json, 0: http/protobuf */
    const char *headers;        /* "Name=value,Name=value"; secret */
    unsigned    queue;          /* spans queued at most */
    const char *ca;             /* CA bundle (PEM) for an https receiver, NULL/"" system */
    const char *service_name;   /* service.name */
};

struct tt_otlp;

/* NULL with <err> set when it cannot start (curl, thread, memory) */
struct tt_otlp *tt_otlp_start(const struct tt_otlp_opts *o, char *err, size_t errlen);

/*
 * One finished request leg (any worker thread): its span, when the
 * request is traced and sampled, built and queued, or dropped and counted
 * when the queue is full.  Never blocks on the network.
 */
void tt_otlp_submit(struct tt_otlp *x, const struct tt_request *r,
                    const struct tt_metric_values *m, const struct tt_slo_result *res,
                    const char *host, const char *port);

struct tt_otlp_counts {
    uint64_t exported;          /* spans a receiver accepted */
    uint64_t dropped_queue;     /* queue full */
    uint64_t dropped_export;    /* their batch failed (retries spent, rejected) */
};
void tt_otlp_counts(const struct tt_otlp *x, struct tt_otlp_counts *c);

/*
 * Export what is queued within <ms> (a second signal setting <*cut> ends
 * it sooner), drop the rest (counted), stop the thread and free; the
 * final counts into <final> (may be NULL).  NULL <x> is a no-op.
 */
void tt_otlp_stop(struct tt_otlp *x, unsigned ms, const volatile sig_atomic_t *cut,
                  struct tt_otlp_counts *final);

/* the seconds of a Retry-After value (delta-seconds or an HTTP date,
 * relative to <now>), or -1 when it is neither */
long tt_otlp_retry_after(const char *v, long now);

#endif
