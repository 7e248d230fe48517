/*
 * The request clock turned into numbers: the per-request metrics of SPEC
 * section 5 computed from a finished struct tt_request, the request's
 * outcome and its error triple.  Pure functions, no allocation.  Called by
 * the proxy when a request finishes (before the record and the aggregator),
 * by metrics/record.c and metrics/agg.c.
 *
 * Decisions where the spec is silent:
 *  - "streaming" means the body was an event stream (r->s.streaming); a
 *    stream=true request answered with a JSON error body is non-streaming.
 *  - TTFT, TTST, TTFO, ITL, OTPS/user, reasoning_latency and the
 *    inter-chunk list exist only for streaming responses.
 *  - request_latency: last token event - t0 when a stream had token events,
 *    else response complete - t0; absent when neither was seen (an upstream
 *    connect failure has no latency).
 *  - OSL without usage is counted from token events for streams only; a
 *    non-streaming body without usage has no token counts (source NULL).
 *  - reasoning_token_count is present when the server reported it, or when
 *    reasoning text was seen (events, or a body's reasoning fields); a plain
 *    answer has no reasoning count.
 *  - server_prefill_ms / server_queue_ms / cached_input_tokens are the
 *    server's own figures, present whenever it reports them;
 *    ttft_outside_server_ms = TTFT - queue - prefill needs a TTFT (streams)
 *    and may be negative when the server's accounting and the client's wait
 *    disagree (it is reported as measured, not clamped).
 *  - output_throughput_per_user is absent when ITL is 0 (all tokens in one
 *    event): an infinite rate is not a measurement.
 *  - Error and cancelled requests get the metrics of what was seen (the
 *    record shows them, useful for diagnosis); the aggregator keeps them
 *    out of the latency distributions, as AIPerf keeps errors out of its
 *    statistics.
 */
#ifndef TT_CLOCK_H
#define TT_CLOCK_H

#include <stdint.h>

#include "metrics/errkind.h"
#include "metrics/metric.h"
#include "metrics/request.h"

enum tt_outcome { TT_OUT_OK = 0, TT_OUT_ERROR, TT_OUT_CANCELLED, TT_OUT__COUNT };

/* "ok", "error", "cancelled" */
extern const char *const tt_outcome_names[TT_OUT__COUNT];


/*
 * Fill <m> from <r> (absent metrics have their bit clear and value 0) and set
 * <*token_count_source> (may be NULL) to "usage", "events", "usage+estimate"
 * or NULL when no token count exists.
 */
void tt_metrics_compute(const struct tt_request *r, struct tt_metric_values *m,
                        const char **token_count_source);

static inline int tt_metric_has(const struct tt_metric_values *m,
                                enum tt_metric id)
{
    return (m->present >> id) & 1u;
}

/* number of inter-chunk gaps (token events - 1, 0 for non-streaming) */
uint32_t tt_icl_count(const struct tt_request *r);
/* gap <i> (0-based) between token events i and i+1, in ns (inline: it is
 * read once per token when a request ends) */
static inline uint64_t tt_icl_ns(const struct tt_request *r, uint32_t i)
{
    uint64_t a = r->token_ts[i], b = r->token_ts[i + 1];
    return b >= a ? b - a : 0;
}

/*
 * Cancelled (client gone) beats error; error is an own error
 * (r->err_type), an error in the body, or an HTTP status >= 400 or none.
 */
enum tt_outcome tt_request_outcome(const struct tt_request *r);

/*
 * The error triple for the record, or 0 when the request is ok.  <type> and
 * <msg> point into <r> or at static strings.  <type> is the most specific
 * name known: the type tokentap set, else the upstream's own type, else the
 * kind's name (AIPerf's error.type); group by tt_request_errkind instead.
 */
int tt_request_error(const struct tt_request *r, int *code, const char **type,
                     const char **msg);

/*
 * The kind (enum tt_errkind, metrics/errkind.h) of a request that did not
 * end ok, cancelled ones included; -1 for an ok request.  The one grouping
 * of failures records, /metrics, /stats and the report share.
 */
int tt_request_errkind(const struct tt_request *r);

/* the upstream's own error type when its error object named one (not a
 * bare number), else NULL; points into <r> */
const char *tt_request_upstream_type(const struct tt_request *r);

#endif
