/*
 * The request clock's storage: init/reset of struct tt_request, token event
 * times, the request error, and the two clocks.  Called by the proxy and the
 * stream decoder; no allocation except the token time array (amortised).
 */
#include "metrics/request.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const tt_ts_names[TT_TS__COUNT] = {
    "request_complete", "upstream_connected", "upstream_tls", "request_sent",
    "response_headers", "first_event", "first_token", "second_token",
    "first_output_token", "last_token", "response_complete", "delivered",
    "first_token_acked", "first_output_token_acked", "response_acked",
    "first_audio",
};

static const char *const api_names[TT_API__COUNT] = {
    [TT_API_OTHER]              = "other",
    [TT_API_OPENAI_CHAT]        = "openai.chat",
    [TT_API_OPENAI_COMPLETIONS] = "openai.completions",
    [TT_API_OPENAI_RESPONSES]   = "openai.responses",
    [TT_API_ANTHROPIC]          = "anthropic.messages",
    [TT_API_GEMINI]             = "gemini",
    [TT_API_OLLAMA]             = "ollama",
    [TT_API_TGI]                = "tgi",
    [TT_API_LLAMACPP]           = "llamacpp.completion",
    [TT_API_OPENAI_REALTIME]    = "openai.realtime",
};

const char *const tt_drop_names[TT_DROP__COUNT] = {
    "max_inflight", "buffer_full", "draining",
};

const char *const tt_srv_names[TT_SRV__COUNT] = {
    "prompt_n", "cache_n", "prompt_ms", "predicted_n", "predicted_ms",
    "prompt_eval_duration", "eval_duration", "load_duration", "total_duration",
    "x-queue-time", "x-inference-time", "x-time-per-token", "x-validation-time",
    "x-prompt-tokens", "x-generated-tokens", "openai-processing-ms",
};

const char *tt_api_name(enum tt_api api)
{
    if ((unsigned)api >= TT_API__COUNT || api_names[api] == NULL)
        return "other";
    return api_names[api];
}

void tt_request_init(struct tt_request *r)
{
    memset(r, 0, sizeof(*r));
    r->stream = -1;
    r->include_usage = -1;
    r->max_tokens = -1;
    r->s.usage_input = -1;
    r->s.usage_output = -1;
    r->s.usage_reasoning = -1;
    r->s.usage_cached = -1;
    r->s.usage_input_text = r->s.usage_input_audio = -1;
    r->s.usage_output_text = r->s.usage_output_audio = -1;
    r->upstream_name = "primary";
}

void tt_request_reset(struct tt_request *r)
{
    char client[sizeof(r->client)];

    memcpy(client, r->client, sizeof(client));      /* the connection's */
    free(r->token_ts);              /* token_end shares its block */
    tt_request_init(r);
    memcpy(r->client, client, sizeof(client));
}

void tt_request_fini(struct tt_request *r)
{
    free(r->token_ts);              /* token_end shares its block */
    r->token_ts = NULL;
    r->token_end = NULL;
    r->n_token_ts = r->cap_token_ts = 0;
}

void tt_request_copy(struct tt_request *dst, const struct tt_request *src)
{
    *dst = *src;
    /* an upstream-named error type lives inside the request (r->s) */
    if (src->err_type != NULL && (uintptr_t)src->err_type >= (uintptr_t)src &&
        (uintptr_t)src->err_type < (uintptr_t)(src + 1))
        dst->err_type = (const char *)dst + ((uintptr_t)src->err_type - (uintptr_t)src);
    dst->token_ts = NULL;
    dst->token_end = NULL;
    dst->n_token_ts = dst->cap_token_ts = 0;
}

void tt_request_move(struct tt_request *dst, struct tt_request *src)
{
    tt_request_copy(dst, src);
    dst->token_ts = src->token_ts;
    dst->token_end = src->token_end;
    dst->n_token_ts = src->n_token_ts;
    dst->cap_token_ts = src->cap_token_ts;
    src->token_ts = NULL;
    src->token_end = NULL;
    tt_request_reset(src);
}

/*
 * With delivery measured the read ends (token_end) share the times' block:
 * cap times, then cap ends, one allocation grown by doubling.
 */
static int token_grow(struct tt_request *r)
{
    uint32_t cap = r->cap_token_ts ? r->cap_token_ts * 2 : 64;
    size_t each = sizeof(uint64_t) + (r->measure_delivery ? sizeof(uint32_t) : 0);
    uint64_t *p = realloc(r->token_ts, cap * each);

    if (p == NULL)
        return -1;
    r->token_ts = p;
    if (r->measure_delivery) {
        r->token_end = (uint32_t *)(p + cap);
        memmove(r->token_end, p + r->cap_token_ts, r->n_token_ts * sizeof(uint32_t));
    }
    r->cap_token_ts = cap;
    return 0;
}

int tt_request_token(struct tt_request *r, uint64_t ts)
{
    if (r->n_token_ts == r->cap_token_ts && token_grow(r) < 0)
        return -1;
    if (r->token_end != NULL)   /* modulo 2^32: see tt_delivery_finish() */
        r->token_end[r->n_token_ts] = (uint32_t)r->handed;
    r->token_ts[r->n_token_ts++] = ts;
    return 0;
}

void tt_request_set_error(struct tt_request *r, int code, const char *type,
                          const char *msg)
{
    /* the first error is the cause; later ones are consequences */
    if (r->err_type != NULL)
        return;
    r->err_code = code;
    r->err_type = type;
    if (msg != NULL) {
        size_t n = strlen(msg);
        if (n >= sizeof(r->err_msg))
            n = sizeof(r->err_msg) - 1;
        memcpy(r->err_msg, msg, n);
        r->err_msg[n] = '\0';
    }
}

void tt_request_server(struct tt_request *r, enum tt_srv k, double v)
{
    if ((unsigned)k >= TT_SRV__COUNT || !(v >= 0) || v > 1e15)
        return;             /* negative, NaN or absurd: not a measurement */
    r->s.server[k] = v;
    r->s.server_present |= 1u << k;
}

double tt_request_server_get(const struct tt_request *r, enum tt_srv k)
{
    if ((unsigned)k >= TT_SRV__COUNT || !(r->s.server_present & (1u << k)))
        return -1.0;
    return r->s.server[k];
}

uint64_t tt_now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tt_timespec_add_ms(struct timespec *ts, unsigned ms)
{
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int64_t tt_now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
