/*
 * Per-request metrics from the request clock (SPEC section 5); see
 * metrics/clock.h for the decisions the spec leaves open.  Called once per
 * finished request by the proxy; pure, no allocation.
 */
#include "metrics/clock.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

const char *const tt_outcome_names[TT_OUT__COUNT] = {
    "ok", "error", "cancelled",
};

static void put(struct tt_metric_values *m, enum tt_metric id, double v)
{
    m->v[id] = v;
    m->present |= 1u << id;
}

/* ms from t0 to <ts>, or -1 when <ts> was not seen (or precedes t0) */
static double since_t0(const struct tt_request *r, uint64_t ts)
{
    if (ts == 0 || ts < r->t0)
        return -1.0;
    return (double)(ts - r->t0) / 1e6;
}

/* the n-th (0-based) token event time, from the timeline or the list */
static uint64_t token_time(const struct tt_request *r, unsigned n)
{
    static const enum tt_ts slot[2] = { TT_TS_FIRST_TOKEN, TT_TS_SECOND_TOKEN };

    if (n < 2 && r->ts[slot[n]] != 0)
        return r->ts[slot[n]];
    if (n < r->n_token_ts)
        return r->token_ts[n];
    return 0;
}

static uint64_t last_token_time(const struct tt_request *r)
{
    if (r->ts[TT_TS_LAST_TOKEN] != 0)
        return r->ts[TT_TS_LAST_TOKEN];
    if (r->n_token_ts > 0)
        return r->token_ts[r->n_token_ts - 1];
    return 0;
}

/*
 * What the server says it spent (SPEC section 11), beside tokentap's clock:
 * prefill = llama.cpp timings.prompt_ms, Ollama prompt_eval_duration; queue
 * (server time before prefill) = TGI x-queue-time, Ollama load_duration;
 * outside = TTFT - queue - prefill: transit, proxying, connection set-up and
 * delivery, the part of the client's wait the model did not spend.
 */
static void server_figures(const struct tt_request *r, struct tt_metric_values *m,
                           double ttft)
{
    double prefill = tt_request_server_get(r, TT_SRV_PROMPT_MS);
    double queue = tt_request_server_get(r, TT_SRV_QUEUE_MS);
    double v;

    if (prefill < 0 && (v = tt_request_server_get(r, TT_SRV_PROMPT_EVAL_NS)) >= 0)
        prefill = v / 1e6;
    if (queue < 0 && (v = tt_request_server_get(r, TT_SRV_LOAD_NS)) >= 0)
        queue = v / 1e6;
    if (r->s.usage_cached >= 0)
        put(m, TT_M_CACHED_INPUT, (double)r->s.usage_cached);
    if (prefill >= 0)
        put(m, TT_M_SERVER_PREFILL, prefill);
    if (queue >= 0)
        put(m, TT_M_SERVER_QUEUE, queue);
    if (ttft >= 0 && prefill >= 0)
        put(m, TT_M_TTFT_OUTSIDE, ttft - prefill - (queue > 0 ? queue : 0));
}

/*
 * The client's clock (SPEC section 12): the instants its TCP acknowledged
 * the last byte of the first token event, the first output token event and
 * the response.  Absent when no acknowledgement came, never guessed.
 */
static void client_figures(const struct tt_request *r, struct tt_metric_values *m,
                           int streaming)
{
    double v;

    if (streaming) {
        if ((v = since_t0(r, r->ts[TT_TS_FIRST_TOKEN_ACKED])) >= 0)
            put(m, TT_M_CLIENT_TTFT, v);
        if ((v = since_t0(r, r->ts[TT_TS_FIRST_OUTPUT_TOKEN_ACKED])) >= 0)
            put(m, TT_M_CLIENT_TTFO, v);
        if (r->ts[TT_TS_FIRST_TOKEN_ACKED] != 0 &&
            r->ts[TT_TS_FIRST_TOKEN_ACKED] >= r->ts[TT_TS_FIRST_TOKEN] &&
            r->ts[TT_TS_FIRST_TOKEN] != 0)
            put(m, TT_M_DELIVERY_DELAY,
                (double)(r->ts[TT_TS_FIRST_TOKEN_ACKED] - r->ts[TT_TS_FIRST_TOKEN]) / 1e6);
    }
    if ((v = since_t0(r, r->ts[TT_TS_RESPONSE_ACKED])) >= 0)
        put(m, TT_M_CLIENT_LATENCY, v);
}

void tt_metrics_compute(const struct tt_request *r, struct tt_metric_values *m,
                        const char **token_count_source)
{
    const struct tt_stream_stats *s = &r->s;
    const char *source = NULL;
    int streaming = s->streaming != 0;
    double ttft = -1, ttfo = -1, lat = -1, v;

    memset(m, 0, sizeof(*m));

    if (streaming) {
        uint64_t first = token_time(r, 0), second = token_time(r, 1);

        ttft = since_t0(r, first);
        if (ttft >= 0)
            put(m, TT_M_TTFT, ttft);
        if (first != 0 && second >= first)
            put(m, TT_M_TTST, (double)(second - first) / 1e6);
        ttfo = since_t0(r, r->ts[TT_TS_FIRST_OUTPUT_TOKEN]);
        if (ttfo >= 0)
            put(m, TT_M_TTFO, ttfo);
        if (ttft >= 0 && ttfo >= 0)
            put(m, TT_M_REASONING_LATENCY, ttfo - ttft);
        if ((v = since_t0(r, r->ts[TT_TS_FIRST_AUDIO])) >= 0)
            put(m, TT_M_TTFA, v);
        lat = since_t0(r, last_token_time(r));
    }
    if (lat < 0 && !r->ws.session)     /* a session's length is no request's latency */
        lat = since_t0(r, r->ts[TT_TS_RESPONSE_COMPLETE]);
    if (lat >= 0)
        put(m, TT_M_REQUEST_LATENCY, lat);
    client_figures(r, m, streaming);

    if (s->usage_input >= 0)
        put(m, TT_M_ISL, (double)s->usage_input);

    /* output and reasoning token counts, and where they came from */
    double osl = -1, reasoning = -1;
    if (s->usage_output >= 0) {
        osl = (double)s->usage_output;
        source = "usage";
        if (s->usage_reasoning >= 0) {
            reasoning = (double)s->usage_reasoning;
        } else if (s->reasoning_events > 0 || s->reasoning_bytes > 0) {
            /* split the usage total by the share of reasoning text (a
             * non-streaming body has reasoning text but no events) */
            double rb = (double)s->reasoning_bytes, ab = (double)s->answer_bytes;
            double share;
            if (rb + ab > 0)
                share = rb / (rb + ab);
            else if (s->token_events > 0)
                share = (double)s->reasoning_events / (double)s->token_events;
            else
                share = 1.0;
            if (share > 1.0)
                share = 1.0;
            reasoning = floor(osl * share + 0.5);
            source = "usage+estimate";
        }
    } else if (streaming) {
        osl = (double)s->token_events;
        source = "events";
        if (s->reasoning_events > 0)
            reasoning = (double)s->reasoning_events;
    }
    if (osl >= 0) {
        if (reasoning > osl)
            reasoning = osl;
        put(m, TT_M_OSL, osl);
        put(m, TT_M_OUTPUT_TOKENS, osl - (reasoning > 0 ? reasoning : 0));
        if (reasoning >= 0)
            put(m, TT_M_REASONING_TOKENS, reasoning);
    }

    /* inter-token latency needs a stream, a first token and two tokens */
    if (ttft >= 0 && osl >= 2 && lat >= ttft) {
        double itl = (lat - ttft) / (osl - 1);
        put(m, TT_M_ITL, itl);
        if (itl > 0)
            put(m, TT_M_OTPS_USER, 1000.0 / itl);
    }

    server_figures(r, m, ttft);

    if (token_count_source != NULL)
        *token_count_source = source;
}

uint32_t tt_icl_count(const struct tt_request *r)
{
    if (!r->s.streaming || r->n_token_ts < 2)
        return 0;
    return r->n_token_ts - 1;
}

enum tt_outcome tt_request_outcome(const struct tt_request *r)
{
    if (r->cancelled)
        return TT_OUT_CANCELLED;
    if (r->err_type != NULL || r->s.error || r->status >= 400 || r->status == 0)
        return TT_OUT_ERROR;
    return TT_OUT_OK;
}

const char *tt_request_upstream_type(const struct tt_request *r)
{
    const char *t = r->s.error_type;

    if (!r->s.error || t[strspn(t, "0123456789")] == '\0')
        return NULL;
    return t;
}

/* the type tokentap set itself, not one copied from the upstream (r->s) */
static const char *own_type(const struct tt_request *r)
{
    const char *t = r->err_type;

    if (t != NULL && (uintptr_t)t >= (uintptr_t)&r->s &&
        (uintptr_t)t < (uintptr_t)(&r->s + 1))
        return NULL;
    return t;
}

int tt_request_errkind(const struct tt_request *r)
{
    const char *own = own_type(r);

    return tt_errkind_classify(own, r->s.error || (r->err_type != NULL && own == NULL),
                               r->status, r->s.streaming, r->cancelled);
}

int tt_request_error(const struct tt_request *r, int *code, const char **type,
                     const char **msg)
{
    int kind = tt_request_errkind(r);
    const char *up = tt_request_upstream_type(r);

    if (kind < 0)
        return 0;
    if (r->err_type != NULL) {
        *code = r->err_code;
        *type = r->err_type;
        *msg = r->err_msg;
        return 1;
    }
    *type = up != NULL ? up : tt_errkind_names[kind];
    if (r->cancelled) {
        *code = 499;
        *msg = "client closed the connection before the response ended";
    } else if (r->s.error) {
        *code = r->status >= 400 ? r->status : 500;
        *msg = r->s.error_message;
    } else if (r->status >= 400) {
        *code = r->status;
        *msg = "upstream answered with an error status";
    } else {
        *code = 502;
        *msg = "no response was received";
    }
    return 1;
}
