/*
 * The recent-request ring behind the dashboard: the last finished requests
 * of one aggregator, each with its request clock, its metrics, its SLO
 * verdict and the arrival offsets of its first token events, plus the
 * slowest requests of the last minute.  Owned by metrics/recent.c; written
 * by the aggregator (metrics/agg.c) once per finished request under the
 * aggregator's lock (no lock of its own, nothing on the per-event path);
 * /stats copies it under that lock (one memcpy), renders the copy outside
 * it and merges the rings of several aggregators (when the admin listener
 * is given several; the process builds one) at read time.
 *
 * What an entry keeps is what a record keeps (metadata + metrics + error;
 * the path redacted by tt_record_redact_path), never a body, a header other
 * than X-Request-Id, or anything the record leaves out.  Token event
 * offsets beyond TT_RECENT_TOKENS are counted, not kept.
 *
 * Memory: fixed, allocated once per ring: (TT_RECENT_ENTRIES +
 * TT_RECENT_SLOW) entries of sizeof(struct tt_recent_entry) bytes
 * (tt_recent_bytes(): 3,008 bytes each, 216,592 bytes = 212 KiB per ring
 * with the defaults on x86-64, most of it the copied request clock).
 * No allocation when a request is added.
 */
#ifndef TT_RECENT_H
#define TT_RECENT_H

#include <stdint.h>

#include "metrics/metric.h"
#include "metrics/request.h"
#include "metrics/slo.h"

#define TT_RECENT_ENTRIES   64      /* most recent requests per ring */
#define TT_RECENT_SLOW      8       /* slowest of the last TT_RECENT_SLOW_NS */
#define TT_RECENT_TOKENS    256     /* token event offsets kept per request */
#define TT_RECENT_SLOW_NS   60000000000ull
#define TT_RECENT_UPSTREAM  64

struct tt_recent_entry {
    struct tt_request       r;          /* copy: token_ts NULL, path redacted */
    struct tt_metric_values m;
    struct tt_slo_result    slo;
    int                     has_slo;
    const char             *source;     /* token_count_source, static */
    uint64_t                done_ns;    /* monotonic ns when it was added */
    uint64_t                seq;        /* 1, 2, ... per ring; 0 = empty */
    double                  latency_ms; /* the "slowest" key */
    uint32_t                ntok;       /* token events seen */
    uint32_t                tok_us[TT_RECENT_TOKENS];  /* us since t0 */
    char                    upstream[TT_RECENT_UPSTREAM];
};

struct tt_recent {
    struct tt_recent_entry e[TT_RECENT_ENTRIES];
    struct tt_recent_entry slow[TT_RECENT_SLOW];
    unsigned               head;        /* next slot of e[] */
    uint64_t               seq;
};

/* a zeroed ring (calloc) is an empty ring; bytes of one ring */
unsigned long tt_recent_bytes(void);

/* add a finished request (<slo> NULL without SLOs) at monotonic <now_ns> */
void tt_recent_add(struct tt_recent *rr, const struct tt_request *r,
                   const struct tt_metric_values *m,
                   const struct tt_slo_result *slo, uint64_t now_ns);

struct cJSON;

/*
 * Append the entries of <rr> as JSON objects to <requests> (the recent ones)
 * and <slowest> (those still within TT_RECENT_SLOW_NS of <now_ns>):
 *   {"upstream", "seq", "age_s", "latency_ms", "token_events",
 *    "token_us":[token event offsets since request start, integer us,
 *                at most TT_RECENT_TOKENS],
 *    "record":{the record of the request (tokentap.record/1) without the
 *              inter_chunk_latency list}}
 * Each object also carries "done_ns" (for tt_recent_finish to sort on).
 * Returns 0, or -1 when out of memory.
 */
int tt_recent_json(const struct tt_recent *rr, uint64_t now_ns,
                   struct cJSON *requests, struct cJSON *slowest);

/*
 * After every ring was appended: keep the newest TT_RECENT_ENTRIES of
 * <requests> (newest first) and the TT_RECENT_SLOW slowest of <slowest>
 * (slowest first), and drop the "done_ns" sort keys.  0 or -1.
 */
int tt_recent_finish(struct cJSON *requests, struct cJSON *slowest);

#endif
