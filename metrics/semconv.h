/*
 * OpenTelemetry GenAI metrics on /metrics (semantic conventions, GenAI
 * metrics, as of the GenAI conventions repository; docs/metrics.md), in
 * OpenTelemetry's Prometheus translation: dots to underscores, unit "s"
 * as the suffix _seconds, the annotation unit {token} dropped, no _total
 * on histograms.  Families:
 *
 *   gen_ai_server_time_to_first_token_seconds        TTFT, ok streaming
 *   gen_ai_server_time_per_output_token_seconds      ITL, ok
 *   gen_ai_server_request_duration_seconds           request latency, ok
 *   gen_ai_client_operation_time_to_first_chunk_seconds   first event, ok streaming
 *   gen_ai_client_operation_time_per_output_chunk_seconds one per token-event gap
 *   gen_ai_client_token_usage{gen_ai_token_type="input|output"}
 *
 * labels: upstream, gen_ai_operation_name, gen_ai_provider_name,
 * gen_ai_request_model (the aggregator's bounded model label).  Owned by
 * metrics/semconv.c; called by metrics/agg.c under the aggregator's lock
 * (observe, merge) and from its exposition.
 */
#ifndef TT_SEMCONV_H
#define TT_SEMCONV_H

#include "metrics/metric.h"
#include "metrics/request.h"

struct evbuffer;

/* --metrics-semconv: which families /metrics carries (index into names) */
enum tt_semconv_mode {
    TT_SEMCONV_TOKENTAP = 0,    /* tokentap_* only (default) */
    TT_SEMCONV_BOTH,            /* tokentap's and OpenTelemetry's */
    TT_SEMCONV_OTEL,            /* gen_ai_* only */
};
/* "tokentap", "both", "otel", NULL: the config option's values */
extern const char *const tt_semconv_names[];

struct tt_semconv;

struct tt_semconv *tt_semconv_new(void);
void tt_semconv_free(struct tt_semconv *sc);

/*
 * Fold one finished request in; <upstream>, <mlabel> as the aggregator
 * labels them.  Requests of api "other" are not GenAI operations and are
 * left out.  Returns 0, or -1 when a new label set could not be allocated.
 */
int tt_semconv_observe(struct tt_semconv *sc, const char *upstream,
                       const char *mlabel, const struct tt_request *r,
                       const struct tt_metric_values *m, int ok);

/*
 * Add <src> into <dst>; <relabel> (may be NULL) maps a model label of
 * <src> to <dst>'s (the destination aggregator re-applies its model cap).
 * 0 or -1.
 */
int tt_semconv_merge(struct tt_semconv *dst, const struct tt_semconv *src,
                     const char *(*relabel)(void *ctx, const char *mlabel), void *ctx);

/* the gen_ai_* families in Prometheus text format 0.0.4 */
void tt_semconv_expose(const struct tt_semconv *sc, struct evbuffer *out);

/* the (operation, provider) of an API; NULL operation for "other" */
void tt_semconv_names_of(const struct tt_request *r, const char **op,
                         const char **provider);

#endif
