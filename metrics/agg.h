/*
 * The aggregator: every finished request folded into the Prometheus
 * families of SPEC section 7 and into the time windows behind /stats.
 * Owned by metrics/agg.c.  The proxy calls tt_agg_observe once per finished
 * request and tt_agg_inflight(+1/-1) around each request; the admin
 * listener (proxy/server/admin.c) calls tt_agg_prometheus / tt_agg_stats_json.
 *
 * Threads: each aggregator has its own mutex.  The process builds one,
 * shared by every worker thread (proxy/server/server.c): its lock is taken once
 * per finished request and once per scrape.  The exposition functions
 * take an array of aggregators and can merge several at scrape time
 * (counters and histograms add up; the model-label cap applies to the
 * merged view too); the admin listener passes the one.
 *
 * Which requests feed what:
 *  - tokentap_requests_total{outcome}: all (ok | error | cancelled).
 *  - latency and length histograms, /stats percentiles: ok requests only
 *    (AIPerf computes its statistics over valid requests; an error's partial
 *    timeline is in its record).
 *  - tokens_total, token_events_total, stream_parse_errors_total: all
 *    requests (the tokens did cross the proxy).
 *  - good_requests_total, slo_violations_total, slo_attainment_ratio: only
 *    when an SLO result is passed; when no SLO is configured /stats shows
 *    goodput and good_request_fraction as null.
 *
 * Hot path cost: after a label set's first request, tt_agg_observe does no
 * allocation: a hash lookup of (upstream, api, model), counter increments,
 * a bucket search per histogram, the window histograms, and one copy of
 * the request clock into the recent ring (about 3 KB, ~9,000 instructions
 * with 300 token events).
 *
 * Memory: the windows are fixed per aggregator (21 slots x 12 histograms x
 * 14,368 bytes = 3.6 MB, see metrics/hist.h), the recent-request ring
 * (metrics/recent.h) 212 KiB, allocated at its first request, written under
 * the same lock once per finished request; each label set costs about
 * 1.8 KB with the default buckets (plus its escaped label string); label
 * sets are bounded by upstreams x apis x (model_cap + 1).
 */
#ifndef TT_AGG_H
#define TT_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/metric.h"
#include "metrics/request.h"
#include "metrics/slo.h"

struct evbuffer;
struct tt_recorder;

/*
 * The Prometheus histogram families: TT_FAM_<ID> for each metric row of
 * metrics/metric.h marked FAM (TT_FAM_TTFT, TT_FAM_REQUEST_LATENCY, ...),
 * the gaps' TT_FAM_ICL last.  Names and help come from those rows.
 */
#define TT_FAM_ROW_FAM(id) TT_FAM_##id,
#define TT_FAM_ROW_NOFAM(id)
#define TT_FAM_ENUM(id, tag, unit, header, abbr, rank, higher, fam, ...) TT_FAM_ROW_##fam(id)
enum tt_agg_family {
    TT_METRICS(TT_FAM_ENUM)
    TT_METRIC_ICL(TT_FAM_ENUM)
    TT_FAM__COUNT
};
#undef TT_FAM_ENUM

extern const char *const tt_agg_family_names[TT_FAM__COUNT];

#define TT_AGG_MAX_BUCKETS 64
#define TT_AGG_UPSTREAMS   TT_MAX_UPSTREAMS /* window sets: primary + shadows */

#define TT_AGG_MAX_DELAYS  256              /* workers */

struct tt_pairs;
struct tt_delay;

struct tt_agg_opts {
    unsigned      model_cap;                    /* 0 = 32 */
    /* upper bounds (seconds or tokens), strictly increasing; NULL = default */
    const double *buckets[TT_FAM__COUNT];
    unsigned      nbuckets[TT_FAM__COUNT];
    const char   *version;                      /* NULL = TT_VERSION */
    int           semconv;                      /* enum tt_semconv_mode, 0 = tokentap */
};

struct tt_agg;

/* NULL <opts> = defaults; NULL on bad buckets or out of memory */
struct tt_agg *tt_agg_new(const struct tt_agg_opts *opts);
void tt_agg_free(struct tt_agg *a);

/* for tokentap_records_dropped_total; <rec> borrowed, may be NULL */
void tt_agg_set_recorder(struct tt_agg *a, struct tt_recorder *rec);
/*
 * The span exporter's counters, read at each scrape through <fn>(<src>)
 * (the aggregator knows no exporter: proxy/server/server.c passes it); NULL <fn>:
 * no exporter, no families.
 */
struct tt_span_counts {
    uint64_t exported;          /* spans a receiver accepted */
    uint64_t dropped_queue;     /* the exporter's queue was full */
    uint64_t dropped_export;    /* their batch could not be delivered */
};
typedef void tt_agg_span_counts_fn(const void *src, struct tt_span_counts *c);
void tt_agg_set_span_counts(struct tt_agg *a, tt_agg_span_counts_fn *fn, const void *src);

/* the SLOs in force, shown by /stats ("slo"); NULL = none configured */
void tt_agg_set_slos(struct tt_agg *a, const struct tt_slo_set *set);

/*
 * Fold one finished request in.  <m> from tt_metrics_compute; <slo> NULL
 * when no SLO is configured.  Returns 0, or -1 when a new label set could
 * not be allocated (the request still counts in the windows).
 */
int tt_agg_observe(struct tt_agg *a, const struct tt_request *r,
                   const struct tt_metric_values *m,
                   const struct tt_slo_result *slo);
/* the same at monotonic time <now_ns> (tests, replay) */
int tt_agg_observe_at(struct tt_agg *a, const struct tt_request *r,
                      const struct tt_metric_values *m,
                      const struct tt_slo_result *slo, uint64_t now_ns);

/* windows (and the shadow_dropped counters) for upstream <name> from the
 * start, so that /stats and /metrics show it before its first request;
 * 0, or -1 when there is no room */
int  tt_agg_add_upstream(struct tt_agg *a, const char *name);
/* a copy for shadow <shadow> was abandoned (tokentap_shadow_dropped_total) */
void tt_agg_shadow_dropped(struct tt_agg *a, const char *shadow, enum tt_drop why);
/* the paired comparisons shown in /stats; <ps> borrowed, may be NULL */
void tt_agg_set_pairs(struct tt_agg *a, struct tt_pairs *ps);

/* a worker's tokentap_proxy_delay_seconds, exposed with the rest; <d>
 * borrowed for the aggregator's life */
void tt_agg_add_delay(struct tt_agg *a, struct tt_delay *d);

/* requests in flight: +1 when one starts, -1 when it finishes (atomic) */
void tt_agg_inflight(struct tt_agg *a, int delta);
/* requests started so far and requests in flight (any thread, no lock) */
void tt_agg_counts(struct tt_agg *a, uint64_t *started, int64_t *inflight);

/* add everything of <src> into <dst> (same options); 0 or -1 */
int tt_agg_merge(struct tt_agg *dst, struct tt_agg *src);

/* Prometheus text format 0.0.4 of one aggregator; 0 or -1 */
int tt_agg_prometheus(struct tt_agg *a, struct evbuffer *out);
/* ... of several, merged */
int tt_agg_prometheus_many(struct tt_agg *const *aggs, unsigned n,
                           struct evbuffer *out);

/*
 * /stats JSON: {"schema":"tokentap.stats/1", "uptime_s", "inflight",
 * "records_dropped", "slo_configured", "windows":{"1m"|"5m"|"1h"|"total":
 * {"duration_s", "requests":{"ok","error","cancelled","total"},
 * "good_requests", "request_throughput", "goodput", "good_request_fraction",
 * "slo_attainment", "metrics":{tag:{"unit","count","avg","min","max",
 * "p50","p90","p95","p99"}}}}}.  Throughput and goodput are per second of
 * the window's covered duration; goodput/fraction/attainment are null
 * without SLO results.  Each window also has "errors" {kind: n} and each
 * metric "buckets" [[lo, hi, count], ...]; the root has "slo" (the
 * objectives, or null) and "recent" (the merged recent-request rings,
 * metrics/recent.h).  Exact shape: docs/metrics.md section 7.  0 or -1.
 */
int tt_agg_stats_json(struct tt_agg *a, struct evbuffer *out);
int tt_agg_stats_json_many(struct tt_agg *const *aggs, unsigned n,
                           struct evbuffer *out);
int tt_agg_stats_json_at(struct tt_agg *const *aggs, unsigned n,
                         struct evbuffer *out, uint64_t now_ns);

#endif
