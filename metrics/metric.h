/*
 * The per-request metrics, defined once: ids, record tags, units, the
 * report's names, and the Prometheus histogram family of those that have
 * one.  Read by the judge (metrics/slo.c), records (metrics/record.c), the
 * aggregator (metrics/agg.c), the paired comparisons (metrics/pairs.c) and
 * the report (metrics/report/); computed by metrics/clock.c.  The tables
 * are built from the rows below in metrics/metric.c.
 *
 * X(ID, tag, unit, header, abbr, rank, higher, fam, family, help, buckets)
 *   ID       enum tt_metric TT_M_<ID>; the row order is the id order (the
 *            record's key order, the present/violated bits)
 *   tag      AIPerf's tag: the record key, /stats and SLO name
 *   unit     the record's unit
 *   header   AIPerf's display name (the report's rows, its CSV export)
 *   abbr     the report's short label when the table is too wide (NULL:
 *            the header)
 *   rank     the row's place in the report and its exports (0 first)
 *   higher   1 when higher is better (a throughput: an SLO is value >= limit)
 *   fam      FAM: a Prometheus histogram family; NOFAM: none (then family,
 *            help and buckets are NULL/0 and unused)
 *   family   its name on /metrics, in seconds for ms metrics
 *   help     its # HELP text
 *   buckets  its default buckets: LATENCY, GAP or TOKENS (metrics/agg.c)
 * Adding a metric is one row here and its computation in metrics/clock.c.
 */
#ifndef TT_METRIC_H
#define TT_METRIC_H

#include <stdint.h>

#define TT_METRICS(X) \
    X(TTFT, "time_to_first_token", "ms", "Time to First Token", "TTFT (ms)", 0, 0, \
      FAM, "tokentap_time_to_first_token_seconds", \
      "Time to the first token event, reasoning included (streaming, ok requests).", LATENCY) \
    X(TTST, "time_to_second_token", "ms", "Time to Second Token", "TTST (ms)", 1, 0, \
      NOFAM, NULL, NULL, 0) \
    X(TTFO, "time_to_first_output_token", "ms", "Time to First Output Token", "TTFO (ms)", 2, 0, \
      FAM, "tokentap_time_to_first_output_token_seconds", \
      "Time to the first answer (non-reasoning) token event (streaming, ok requests).", LATENCY) \
    X(REQUEST_LATENCY, "request_latency", "ms", "Request Latency", "Latency (ms)", 3, 0, \
      FAM, "tokentap_request_latency_seconds", \
      "Request latency: last token event (streaming) or response complete.", LATENCY) \
    X(ITL, "inter_token_latency", "ms", "Inter Token Latency", "ITL (ms)", 4, 0, \
      FAM, "tokentap_inter_token_latency_seconds", \
      "(request latency - TTFT) / (output tokens - 1) per ok request.", GAP) \
    X(OTPS_USER, "output_token_throughput_per_user", "tokens/sec/user", \
      "Output Token Throughput Per User", "Tok/s/user", 6, 1, NOFAM, NULL, NULL, 0) \
    X(ISL, "input_sequence_length", "tokens", "Input Sequence Length", "ISL (tokens)", 7, 0, \
      FAM, "tokentap_input_sequence_length_tokens", \
      "Input (prompt) tokens per ok request, from usage.", TOKENS) \
    X(OSL, "output_sequence_length", "tokens", "Output Sequence Length", "OSL (tokens)", 8, 0, \
      FAM, "tokentap_output_sequence_length_tokens", \
      "Output tokens (answer + reasoning) per ok request.", TOKENS) \
    X(OUTPUT_TOKENS, "output_token_count", "tokens", "Output Token Count", "Output tokens", 9, 0, \
      NOFAM, NULL, NULL, 0) \
    X(REASONING_TOKENS, "reasoning_token_count", "tokens", "Reasoning Token Count", \
      "Reasoning tokens", 10, 0, NOFAM, NULL, NULL, 0) \
    X(REASONING_LATENCY, "reasoning_latency", "ms", "Reasoning Latency", "Reasoning (ms)", 11, 0, \
      NOFAM, NULL, NULL, 0) \
    /* server-reported (SPEC section 11) */ \
    X(CACHED_INPUT, "cached_input_tokens", "tokens", "Cached Input Tokens", NULL, 16, 0, \
      NOFAM, NULL, NULL, 0) \
    X(SERVER_PREFILL, "server_prefill_ms", "ms", "Server Prefill", NULL, 18, 0, \
      FAM, "tokentap_server_prefill_seconds", \
      "Prompt processing time the server itself reports (llama.cpp prompt_ms, Ollama " \
      "prompt_eval_duration) per ok request.", LATENCY) \
    X(SERVER_QUEUE, "server_queue_ms", "ms", "Server Queue", NULL, 17, 0, NOFAM, NULL, NULL, 0) \
    /* TTFT - server queue - prefill */ \
    X(TTFT_OUTSIDE, "ttft_outside_server_ms", "ms", "TTFT Outside Server", NULL, 19, 0, \
      NOFAM, NULL, NULL, 0) \
    /* the client's clock (SPEC section 12): its TCP acknowledged the bytes */ \
    X(CLIENT_TTFT, "client_time_to_first_token", "ms", "Client Time to First Token", \
      "Client TTFT (ms)", 12, 0, FAM, "tokentap_client_time_to_first_token_seconds", \
      "Time until the client's TCP acknowledged the first token event (streaming, ok requests).", \
      LATENCY) \
    X(CLIENT_TTFO, "client_time_to_first_output_token", "ms", "Client Time to First Output Token", \
      "Client TTFO (ms)", 13, 0, FAM, "tokentap_client_time_to_first_output_token_seconds", \
      "Time until the client's TCP acknowledged the first answer token event (streaming, ok " \
      "requests).", LATENCY) \
    X(CLIENT_LATENCY, "client_request_latency", "ms", "Client Request Latency", \
      "Client latency (ms)", 14, 0, FAM, "tokentap_client_request_latency_seconds", \
      "Time until the client's TCP acknowledged the whole response (ok requests).", LATENCY) \
    /* first_token_acked - first_token */ \
    X(DELIVERY_DELAY, "delivery_delay", "ms", "Delivery Delay", "Delivery (ms)", 15, 0, \
      NOFAM, NULL, NULL, 0) \
    /* Realtime (SPEC section 13): the first audio delta */ \
    X(TTFA, "time_to_first_audio", "ms", "Time to First Audio", "TTFA (ms)", 20, 0, \
      FAM, "tokentap_time_to_first_audio_seconds", \
      "Time to the first audio delta (Realtime turns, ok requests).", LATENCY)

/*
 * The inter-chunk gaps: not one value per request but one observation per
 * gap between token events (the record's inter_chunk_latency list); shown
 * beside the metrics by /stats, /metrics and the report, with the id
 * TT_M_ICL just past the per-request ones.  Same columns.
 */
#define TT_METRIC_ICL(X) \
    X(ICL, "inter_chunk_latency", "ms", "Inter Chunk Latency", "ICL (ms)", 5, 0, \
      FAM, "tokentap_inter_chunk_latency_seconds", \
      "Gaps between consecutive token events, one observation per gap.", GAP)

enum tt_metric {
#define TT_M_ENUM(id, ...) TT_M_##id,
    TT_METRICS(TT_M_ENUM)
#undef TT_M_ENUM
    TT_M__COUNT,
    TT_M_ICL = TT_M__COUNT      /* the gaps (TT_METRIC_ICL), not a per-request metric */
};

/* tables indexed by enum tt_metric, TT_M_ICL included (TT_M_NAMED entries) */
#define TT_M_NAMED (TT_M__COUNT + 1)

extern const char *const tt_metric_tag[TT_M_NAMED];
extern const char *const tt_metric_unit[TT_M_NAMED];
extern const char *const tt_metric_header[TT_M_NAMED];
extern const char *const tt_metric_abbr[TT_M_NAMED];    /* NULL: none */
extern const unsigned char tt_metric_higher[TT_M_NAMED];
/* the metrics in report order (rank 0 first) */
extern const int tt_metric_order[TT_M_NAMED];

struct tt_metric_values {
    double   v[TT_M__COUNT];
    uint32_t present;       /* bit (1u << id) set when v[id] is meaningful */
};

/* id of <tag> (exact, canonical name only, per-request metrics), or -1 */
int tt_metric_by_tag(const char *tag);

#endif
