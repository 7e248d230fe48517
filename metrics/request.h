/*
 * The request clock: everything tokentap learns about one proxied request,
 * filled by the proxy as bytes pass (proxy/http/conn.c) and by the stream decoder
 * (proxy/decode/stream.c), then turned into metrics and a record when the request
 * finishes (metrics/clock.c, metrics/record.c).
 *
 * Times are CLOCK_MONOTONIC nanoseconds; 0 means "not seen".  Every stamp is
 * taken once per socket read, at the top of the read callback, so all events
 * decoded from one read share the instant their bytes arrived.
 */
#ifndef TT_REQUEST_H
#define TT_REQUEST_H

#include <stddef.h>
#include <stdint.h>

enum tt_api {
    TT_API_OTHER = 0,
    TT_API_OPENAI_CHAT,
    TT_API_OPENAI_COMPLETIONS,
    TT_API_OPENAI_RESPONSES,
    TT_API_ANTHROPIC,
    TT_API_GEMINI,
    TT_API_OLLAMA,
    TT_API_TGI,
    TT_API_LLAMACPP,            /* llama.cpp's native /completion, /infill */
    TT_API_OPENAI_REALTIME,     /* OpenAI Realtime over WebSocket (SPEC section 13) */
    TT_API__COUNT
};

/* record and label name: "openai.chat", "anthropic.messages", ... "other" */
const char *tt_api_name(enum tt_api api);

/* the upstreams a request can go to: the primary (target_idx 0) and its
 * shadows (proxy/http/target.h).  The aggregates and the paired comparison keep
 * them apart by target_idx; the configuration's limits on shadows are
 * derived from these (proxy/config/config.h). */
#define TT_MAX_UPSTREAMS      5     /* the primary and 4 shadows */
#define TT_UPSTREAM_NAME_LEN  32    /* a shadow's name, its NUL included */

/* why a shadow's copy of a request was abandoned (label values) */
enum tt_drop {
    TT_DROP_MAX_INFLIGHT = 0,   /* max_inflight copies already running */
    TT_DROP_BUFFER_FULL,        /* it did not take the request bytes fast enough */
    TT_DROP_DRAINING,           /* the proxy is shutting down */
    TT_DROP__COUNT
};
extern const char *const tt_drop_names[TT_DROP__COUNT];

/* timeline boundaries of SPEC section 5, in order */
enum tt_ts {
    TT_TS_REQUEST_COMPLETE = 0,
    TT_TS_UPSTREAM_CONNECTED,
    TT_TS_UPSTREAM_TLS,
    TT_TS_REQUEST_SENT,
    TT_TS_RESPONSE_HEADERS,
    TT_TS_FIRST_EVENT,
    TT_TS_FIRST_TOKEN,
    TT_TS_SECOND_TOKEN,
    TT_TS_FIRST_OUTPUT_TOKEN,
    TT_TS_LAST_TOKEN,
    TT_TS_RESPONSE_COMPLETE,
    TT_TS_DELIVERED,
    /* the client's TCP acknowledged the last byte of (SPEC section 12;
     * same order as enum tt_dmark in proxy/http/delivery.h) */
    TT_TS_FIRST_TOKEN_ACKED,
    TT_TS_FIRST_OUTPUT_TOKEN_ACKED,
    TT_TS_RESPONSE_ACKED,
    TT_TS_FIRST_AUDIO,          /* first audio delta (Realtime, SPEC section 13) */
    TT_TS__COUNT
};

/* record key of each boundary ("request_complete", ...) */
extern const char *const tt_ts_names[TT_TS__COUNT];

/*
 * What the server reports about the request itself (SPEC section 11), kept
 * beside tokentap's own clock, never in place of it.  Values in the server's
 * own unit (the record key says which); absent unless the bit is set.
 */
enum tt_srv {
    TT_SRV_PROMPT_N = 0,        /* llama.cpp timings */
    TT_SRV_CACHE_N,
    TT_SRV_PROMPT_MS,
    TT_SRV_PREDICTED_N,
    TT_SRV_PREDICTED_MS,
    TT_SRV_PROMPT_EVAL_NS,      /* Ollama final line, ns */
    TT_SRV_EVAL_NS,
    TT_SRV_LOAD_NS,
    TT_SRV_TOTAL_NS,
    TT_SRV_QUEUE_MS,            /* TGI response headers, ms */
    TT_SRV_INFERENCE_MS,
    TT_SRV_PER_TOKEN_MS,
    TT_SRV_VALIDATION_MS,
    TT_SRV_PROMPT_TOKENS,
    TT_SRV_GENERATED_TOKENS,
    TT_SRV_PROCESSING_MS,       /* OpenAI openai-processing-ms header */
    TT_SRV__COUNT
};

/* record key of each field, as the server names it ("prompt_ms", ...) */
extern const char *const tt_srv_names[TT_SRV__COUNT];

/* what the stream decoder found in a response body (proxy/decode/stream.c) */
struct tt_stream_stats {
    uint32_t events;            /* decoded events of any kind */
    uint32_t token_events;      /* events carrying answer, reasoning or tool text */
    uint32_t reasoning_events;  /* token events whose text is reasoning */
    uint32_t answer_events;     /* token events with answer or tool-call text */
    uint64_t reasoning_bytes;   /* text bytes, for the usage+estimate split */
    uint64_t answer_bytes;
    int64_t  usage_input;       /* prompt tokens, -1 when absent */
    int64_t  usage_output;      /* completion tokens incl. reasoning, -1 when absent */
    int64_t  usage_reasoning;   /* reasoning tokens, -1 when absent */
    int64_t  usage_cached;      /* cached prompt tokens, -1 when absent */
    /* Realtime's token details (SPEC section 13), -1 when absent */
    int64_t  usage_input_text, usage_input_audio, usage_output_text, usage_output_audio;
    uint32_t choices;           /* choices (or prompts) answered, 0 unknown */
    uint32_t server_present;    /* bit (1u << enum tt_srv) per known field */
    double   server[TT_SRV__COUNT];
    uint32_t parse_errors;      /* malformed events (forwarded, counted) */
    unsigned terminal:1;        /* terminal marker seen ([DONE], message_stop...) */
    unsigned error:1;           /* error object / error event in the body */
    unsigned streaming:1;       /* body was an event stream (SSE/NDJSON) */
    char     finish_reason[32];
    char     error_type[48];    /* e.g. "invalid_request_error" */
    char     error_message[256];
    char     model[128];        /* model named by the response, if any */
    char     response_id[64];   /* the response's own id (chatcmpl-.., msg_.., resp_..),
                                 * for traces (gen_ai.response.id); "" unknown */
};

/*
 * What reached the client (SPEC section 12), filled when the request ends
 * (proxy/http/delivery.c); absent from the record unless <on>.
 */
struct tt_delivery_stats {
    unsigned on:1;              /* measured: metadata.delivery */
    unsigned has_tcp:1;         /* TCP_INFO read: metadata.client_tcp */
    uint32_t rtt_us, min_rtt_us, rttvar_us;
    uint32_t retransmits;       /* during this request */
    uint64_t delivery_rate_bps;
    uint64_t unacked_bytes;     /* written, not acknowledged, at the end */
    uint64_t written_bytes;     /* this response's bytes the socket took */
    uint64_t acked_bytes;       /* of those, acknowledged */
    uint32_t acked_token_events;
};

/*
 * A WebSocket session (SPEC section 13): each turn is a request of its own
 * and the session one more (status 101); proxy/http/wsturn.c fills this.
 */
struct tt_ws_stats {
    unsigned    on:1;           /* carried by a WebSocket: metadata.transport */
    unsigned    session:1;      /* the session's own record, not a turn */
    uint32_t    turn;           /* a turn: 1, 2, ...; the session: turns begun */
    char        session_id[40]; /* the session's x_request_id, on every turn */
    uint64_t    msgs_in, msgs_out;  /* the session: messages each way */
    uint32_t    overs;          /* the session: messages over max_event_bytes */
    const char *stopped;        /* the session: why decoding stopped (static), NULL */
};

struct tt_pair;

/*
 * W3C trace context of one request (SPEC section 14), decided when its
 * head is handled (proxy/http/trace.c), exported as a span (metrics/otlp.c).
 * Ids are raw bytes; all zero means absent.
 */
#define TT_TRACESTATE_MAX 512
struct tt_trace {
    uint8_t  trace_id[16];
    uint8_t  span_id[8];        /* this leg's span */
    uint8_t  parent_id[8];      /* the incoming traceparent's span, or zero */
    uint8_t  link_id[8];        /* a shadow leg: the primary's span, or zero */
    uint8_t  flags;             /* trace-flags (01: sampled) */
    unsigned on:1;              /* ids decided (--otlp-endpoint or --trace-propagate) */
    char     state[TT_TRACESTATE_MAX + 1];  /* tracestate that came with it */
};

struct tt_request {
    uint64_t t0;                /* monotonic ns: first byte of the request */
    int64_t  start_wall_ns;     /* unix ns at t0 */
    uint64_t ts[TT_TS__COUNT];  /* monotonic ns, 0 = not seen */
    uint64_t ended;             /* monotonic ns the request was over (delivered,
                                 * failed or cancelled), set when it is handed
                                 * to tt_worker_request_done(); 0 before */

    /* token event arrival times (monotonic ns), for inter-chunk latency;
     * grown by doubling, owned, freed by tt_request_reset() */
    uint64_t *token_ts;
    uint32_t  n_token_ts;
    uint32_t  cap_token_ts;
    /* with delivery measured: <handed> when each token event was decoded
     * (the response bytes handed to the client by then, its read's end),
     * beside token_ts, in the same block (after cap_token_ts times); NULL
     * otherwise */
    uint32_t *token_end;
    uint64_t  handed;           /* response bytes handed to the client so far */
    unsigned  measure_delivery:1;

    char     request_id[128];
    char     client[48];        /* client address, for the access log: set
                                 * once per connection, kept by reset */
    char     method[16];
    char     path[512];
    char     model[128];        /* from the request body (inspector) */
    enum tt_api api;
    int      stream;            /* -1 unknown, 0, 1 (from the request) */
    int      include_usage;     /* -1 unknown, 0, 1 (stream_options) */
    int64_t  max_tokens;        /* -1 absent */
    int      prompts;           /* prompts in a list-of-prompts body, 0 = one/unknown */
    int      status;            /* upstream (or own) status code, 0 none */
    unsigned upstream_reused:1;
    unsigned cancelled:1;       /* client went away before the end */
    unsigned upgraded:1;        /* Upgrade tunnel */
    unsigned usage_injected:1;  /* --inject-usage rewrote the request (proxy/http/inject.c) */
    const char *upstream_name;  /* "primary" or a shadow's name; borrowed */
    unsigned    target_idx;     /* 0 primary, 1.. shadows (proxy/http/target.h) */
    unsigned    shadow:1;       /* role "shadow": a mirrored copy */
    unsigned    has_digest:1;   /* <digest> is the answer text's (compare_output) */
    uint64_t    digest;         /* FNV-1a 64 of the answer text */
    struct tt_pair *pair;       /* the mirrored request's legs; shared, NULL when none */
    struct tt_trace trace;      /* span ids (proxy/http/trace.c) */
    const char *inspect_skipped;/* body not read: "budget", "too_large",
                                   "not_json"...; static, NULL = read */

    uint64_t bytes_in;          /* request body bytes */
    uint64_t bytes_out;         /* response body bytes */

    struct tt_stream_stats s;
    struct tt_delivery_stats dl;
    struct tt_ws_stats ws;

    /* error of the request as a whole; type is a static string or NULL */
    int         err_code;       /* HTTP-ish code: 502, 504, 499, 400... */
    const char *err_type;       /* "upstream_connect", "truncated", ... */
    char        err_msg[256];
};

void tt_request_init(struct tt_request *r);      /* zero + "absent" markers */
void tt_request_reset(struct tt_request *r);     /* free owned memory, re-init */
void tt_request_fini(struct tt_request *r);      /* free owned memory only */
/* <src> copied to <dst> without what it owns (no token arrays), the
 * error type pointing into <dst> where it pointed into <src> */
void tt_request_copy(struct tt_request *dst, const struct tt_request *src);
/* <src>, with what it owns, moved to <dst> (uninitialised); <src> is left
 * as after tt_request_reset() */
void tt_request_move(struct tt_request *dst, struct tt_request *src);
/* note a token event at <ts>; returns 0, or -1 when out of memory */
int  tt_request_token(struct tt_request *r, uint64_t ts);
void tt_request_set_error(struct tt_request *r, int code, const char *type,
                          const char *msg);

/* note a server-reported figure (the last report of a field wins) */
void tt_request_server(struct tt_request *r, enum tt_srv k, double v);
/* the field, or -1 when the server did not report it */
double tt_request_server_get(const struct tt_request *r, enum tt_srv k);

uint64_t tt_now_mono(void);     /* CLOCK_MONOTONIC ns */
int64_t  tt_now_wall(void);     /* CLOCK_REALTIME ns */

struct timespec;
/* <ts> + <ms>, normalised: deadlines for pthread_cond_timedwait() */
void tt_timespec_add_ms(struct timespec *ts, unsigned ms);

#endif
