/*
 * Per-request metric ids, tags and units shared by the judge (metrics/slo.c),
 * the request timeline (metrics/request.c), records and the report.  The
 * tables live in metrics/metric.c.
 */
#ifndef TT_METRIC_H
#define TT_METRIC_H

#include <stdint.h>

enum tt_metric {
    TT_M_TTFT,              /* time_to_first_token, ms */
    TT_M_TTST,              /* time_to_second_token, ms */
    TT_M_TTFO,              /* time_to_first_output_token, ms */
    TT_M_REQUEST_LATENCY,   /* request_latency, ms */
    TT_M_ITL,               /* inter_token_latency, ms */
    TT_M_OTPS_USER,         /* output_token_throughput_per_user, tokens/sec */
    TT_M_ISL,               /* input_sequence_length, tokens */
    TT_M_OSL,               /* output_sequence_length, tokens */
    TT_M_OUTPUT_TOKENS,     /* output_token_count, tokens */
    TT_M_REASONING_TOKENS,  /* reasoning_token_count, tokens */
    TT_M_REASONING_LATENCY, /* reasoning_latency, ms */
    TT_M_CACHED_INPUT,      /* cached_input_tokens, tokens (server-reported) */
    TT_M_SERVER_PREFILL,    /* server_prefill_ms, ms (server-reported) */
    TT_M_SERVER_QUEUE,      /* server_queue_ms, ms (server-reported) */
    TT_M_TTFT_OUTSIDE,      /* ttft_outside_server_ms, ms: TTFT - server queue - prefill */
    /* the client's clock (SPEC section 12): its TCP acknowledged the bytes */
    TT_M_CLIENT_TTFT,       /* client_time_to_first_token, ms: first_token_acked - t0 */
    TT_M_CLIENT_TTFO,       /* client_time_to_first_output_token, ms */
    TT_M_CLIENT_LATENCY,    /* client_request_latency, ms: response_acked - t0 */
    TT_M_DELIVERY_DELAY,    /* delivery_delay, ms: first_token_acked - first_token */
    TT_M__COUNT
};

extern const char *const tt_metric_tag[TT_M__COUNT];
extern const char *const tt_metric_unit[TT_M__COUNT];

struct tt_metric_values {
    double   v[TT_M__COUNT];
    uint32_t present;       /* bit (1u << id) set when v[id] is meaningful */
};

/* id of <tag> (exact, canonical name only), or -1 */
int tt_metric_by_tag(const char *tag);

#endif
