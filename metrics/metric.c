/*
 * Metric tag and unit tables (see metrics/metric.h).  Read by the SLO
 * parser, the record writer and the report.
 */
#include <string.h>

#include "metrics/metric.h"

const char *const tt_metric_tag[TT_M__COUNT] = {
    [TT_M_TTFT]              = "time_to_first_token",
    [TT_M_TTST]              = "time_to_second_token",
    [TT_M_TTFO]              = "time_to_first_output_token",
    [TT_M_REQUEST_LATENCY]   = "request_latency",
    [TT_M_ITL]               = "inter_token_latency",
    [TT_M_OTPS_USER]         = "output_token_throughput_per_user",
    [TT_M_ISL]               = "input_sequence_length",
    [TT_M_OSL]               = "output_sequence_length",
    [TT_M_OUTPUT_TOKENS]     = "output_token_count",
    [TT_M_REASONING_TOKENS]  = "reasoning_token_count",
    [TT_M_REASONING_LATENCY] = "reasoning_latency",
    [TT_M_CACHED_INPUT]      = "cached_input_tokens",
    [TT_M_SERVER_PREFILL]    = "server_prefill_ms",
    [TT_M_SERVER_QUEUE]      = "server_queue_ms",
    [TT_M_TTFT_OUTSIDE]      = "ttft_outside_server_ms",
    [TT_M_CLIENT_TTFT]       = "client_time_to_first_token",
    [TT_M_CLIENT_TTFO]       = "client_time_to_first_output_token",
    [TT_M_CLIENT_LATENCY]    = "client_request_latency",
    [TT_M_DELIVERY_DELAY]    = "delivery_delay",
};

const char *const tt_metric_unit[TT_M__COUNT] = {
    [TT_M_TTFT]              = "ms",
    [TT_M_TTST]              = "ms",
    [TT_M_TTFO]              = "ms",
    [TT_M_REQUEST_LATENCY]   = "ms",
    [TT_M_ITL]               = "ms",
    [TT_M_OTPS_USER]         = "tokens/sec/user",
    [TT_M_ISL]               = "tokens",
    [TT_M_OSL]               = "tokens",
    [TT_M_OUTPUT_TOKENS]     = "tokens",
    [TT_M_REASONING_TOKENS]  = "tokens",
    [TT_M_REASONING_LATENCY] = "ms",
    [TT_M_CACHED_INPUT]      = "tokens",
    [TT_M_SERVER_PREFILL]    = "ms",
    [TT_M_SERVER_QUEUE]      = "ms",
    [TT_M_TTFT_OUTSIDE]      = "ms",
    [TT_M_CLIENT_TTFT]       = "ms",
    [TT_M_CLIENT_TTFO]       = "ms",
    [TT_M_CLIENT_LATENCY]    = "ms",
    [TT_M_DELIVERY_DELAY]    = "ms",
};

int tt_metric_by_tag(const char *tag)
{
    for (int i = 0; i < TT_M__COUNT; i++)
        if (strcmp(tt_metric_tag[i], tag) == 0)
            return i;
    return -1;
}
