/*
 * Stream decoding (interface in stream.h): API detection by path, framing
 * by Content-Type, events out of the body, and the end of the body (terminal
 * marker, truncation, the request error).  What an event means is decided
 * by the API's decoder (proxy/decode/dec_*.c, one file per API family, behind the
 * table below); text goes through the think filter (proxy/decode/think.c) into the
 * commit (proxy/decode/commit.c), the only code that sets counters and stamps.
 *
 * Called by the proxy's response path (proxy/http/conn.c): tt_stream_new() when
 * the response headers arrive, tt_stream_head() with them, tt_stream_feed()
 * on every body read (after chunked framing is removed), tt_stream_end()
 * once.  It only reads the bytes; forwarding never waits for it.
 *
 * Data path:
 *
 *   body bytes --> sse.c / ndjson.c / bounded JSON body
 *                     |  one event (data payload / line / whole body)
 *                     v
 *              decoder->fast() when it reads the event (or the body)
 *              with certainty, else tt_json_parse() (arena, jsonarena.c)
 *                     |  cJSON tree
 *                     v
 *              decoder->event()  --> tt_dec_answer / _reasoning / _tool,
 *                     |              usage, finish reason, error, terminal
 *                     v
 *              think filter (answer text only) --> commit: counters, stamps
 *
 * Decisions where the spec is silent (see also proxy/decode/decode.c and the
 * decoders):
 *  - Usage: the last value seen wins (Anthropic's and Gemini's are
 *    cumulative), except per-choice usage reports, which are summed.
 *  - finish_reason is the API's own word, the last non-empty one seen.
 *  - At tt_stream_end() a body error becomes the request error: its type is
 *    the upstream's own (error.type, code or status) when it gives one, else
 *    "stream_error" (streams) or "upstream_error" (JSON bodies); code = the
 *    error's numeric status_code/code when it has one, else the HTTP status
 *    when >= 400, else 500.
 *  - Non-streaming JSON bodies have no timeline: no stamps, no token events,
 *    events stays 0; only bytes, usage, finish reason, error, model, the
 *    reasoning/answer text split.
 *  - Oversize events (over 1 MiB) and oversize JSON bodies (over 4 MiB) are
 *    skipped; skipped events count as parse_errors.
 *  - Model: the first model name the response gives.
 *  - A path ending in /completions is OpenAI Completions until its first
 *    event says otherwise: an object without "choices" holding llama.cpp's
 *    "stop" flag switches the response (and r->api) to llamacpp.completion.
 */
#include "proxy/decode/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/decode/decode.h"

/* one SSE event / NDJSON line (max_event_bytes, set at start) */
size_t tt_stream_event_max = 1024u * 1024;
#define JSON_BODY_MAX (4u * 1024 * 1024)    /* a non-streaming body */

#define FR_NONE   TT_FR_NONE
#define FR_SSE    TT_FR_SSE
#define FR_NDJSON TT_FR_NDJSON
#define FR_JSON   TT_FR_JSON

static void no_event(struct tt_stream *st, const cJSON *root, const char *evname)
{
    (void)st;
    (void)root;
    (void)evname;
}

static const struct tt_decoder dec_other = { .api = TT_API_OTHER, .event = no_event };

static const struct tt_decoder *const decoders[TT_API__COUNT] = {
    [TT_API_OTHER]              = &dec_other,
    [TT_API_OPENAI_CHAT]        = &tt_dec_openai_chat,
    [TT_API_OPENAI_COMPLETIONS] = &tt_dec_openai_completions,
    [TT_API_OPENAI_RESPONSES]   = &tt_dec_openai_responses,
    [TT_API_ANTHROPIC]          = &tt_dec_anthropic,
    [TT_API_GEMINI]             = &tt_dec_gemini,
    [TT_API_OLLAMA]             = &tt_dec_ollama,
    [TT_API_TGI]                = &tt_dec_tgi,
    [TT_API_LLAMACPP]           = &tt_dec_llamacpp,
    [TT_API_OPENAI_REALTIME]    = &tt_dec_openai_realtime,
};

const struct tt_decoder *tt_decoder_of(enum tt_api api)
{
    if ((unsigned)api >= TT_API__COUNT || decoders[api] == NULL)
        return &dec_other;
    return decoders[api];
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* ------------------------------------------------------------------ */
/* API detection                                                       */

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/*
 * The path's last segments decide, so a base path in front
 * ("/openai/v1/chat/completions", Azure's "/openai/deployments/X/chat/
 * completions") still matches; the query string and trailing slashes are
 * ignored.  Gemini is recognised by the method suffix of the last segment.
 */
enum tt_api tt_api_detect(const char *path, size_t len)
{
    const char *q, *seg;
    size_t n;

    if (path == NULL)
        return TT_API_OTHER;
    q = memchr(path, '?', len);
    n = q ? (size_t)(q - path) : len;
    q = memchr(path, '#', n);
    if (q != NULL)
        n = (size_t)(q - path);
    while (n > 1 && path[n - 1] == '/')
        n--;

    for (seg = path + n; seg > path && seg[-1] != '/'; seg--)
        ;
    if (memchr(seg, ':', (size_t)(path + n - seg)) != NULL) {
        if (ends_with(path, n, ":streamGenerateContent") ||
            ends_with(path, n, ":generateContent"))
            return TT_API_GEMINI;
        return TT_API_OTHER;
    }
    if (ends_with(path, n, "/chat/completions"))
        return TT_API_OPENAI_CHAT;
    if (ends_with(path, n, "/completions"))
        return TT_API_OPENAI_COMPLETIONS;
    if (ends_with(path, n, "/responses"))
        return TT_API_OPENAI_RESPONSES;
    if (ends_with(path, n, "/v1/realtime"))
        return TT_API_OPENAI_REALTIME;
    if (ends_with(path, n, "/v1/messages"))
        return TT_API_ANTHROPIC;
    if (ends_with(path, n, "/api/chat") || ends_with(path, n, "/api/generate"))
        return TT_API_OLLAMA;
    if (ends_with(path, n, "/generate") || ends_with(path, n, "/generate_stream"))
        return TT_API_TGI;
    /* llama.cpp's native API, whole paths only (a mistyped
     * "/v1/chat/completion" is no llama.cpp request); "/completions" without
     * /v1 is told apart from OpenAI Completions by its events, see
     * dec_openai.c */
    if ((n == 11 && memcmp(path, "/completion", 11) == 0) ||
        (n == 7 && memcmp(path, "/infill", 7) == 0))
        return TT_API_LLAMACPP;
    return TT_API_OTHER;
}


/* ------------------------------------------------------------------ */
/* events                                                              */

static int is_done_marker(const char *d, size_t n)
{
    while (n > 0 && is_ws(d[n - 1]))
        n--;
    while (n > 0 && is_ws(*d)) {
        d++;
        n--;
    }
    return n == 6 && memcmp(d, "[DONE]", 6) == 0;
}

/* one decoded event (SSE event or NDJSON line) */
static void on_event(struct tt_stream *st, const char *name, const char *data,
                     size_t len)
{
    struct tt_request *r = st->r;
    const cJSON *root;
    int is_error_event = name != NULL && name[0] == 'e' && strcmp(name, "error") == 0;

    r->s.events++;
    if (r->ts[TT_TS_FIRST_EVENT] == 0)
        r->ts[TT_TS_FIRST_EVENT] = st->now;
    if (st->dec->api == TT_API_OTHER)
        return;
    if (is_done_marker(data, len)) {
        if (st->dec->done)
            r->s.terminal = 1;
        return;
    }
    if (st->dec->fast != NULL && r->s.response_id[0] == '\0')
        tt_dec_lead_id(st, data, len);  /* one rule for both paths */
    if (!is_error_event && st->dec->fast != NULL && st->dec->fast(st, data, len) == 0) {
        st->fast_events++;  /* read without a tree (see dec_openai_fast.c) */
        return;
    }
    root = tt_json_parse(data, len);
    if (root == NULL) {
        r->s.parse_errors++;
        if (is_error_event)
            tt_dec_error_text(st, data, len);   /* plain-text error data */
        return;
    }
    tt_think_begin(&st->th, st->now);
    if (is_error_event) {
        const cJSON *e = tt_jget(root, "error");
        if (e != NULL && !cJSON_IsNull(e))
            tt_dec_error(st, e, root);
        else
            tt_dec_error(st, root, root);   /* the event is the error */
    }
    st->dec->event(st, root, name && name[0] ? name : NULL);
    tt_think_end_event(&st->th);
}

static void on_sse(void *ctx, const struct tt_sse_event *ev)
{
    on_event(ctx, ev->name, ev->data, ev->data_len);
}

static void on_line(void *ctx, const char *line, size_t len)
{
    on_event(ctx, NULL, line, len);
}

/* ------------------------------------------------------------------ */
/* life cycle                                                          */

/* the media type of <ct> (no parameters), lower-cased, into <out> */
static void media_type(const char *ct, char *out, size_t cap)
{
    size_t n = 0;

    out[0] = '\0';
    if (ct == NULL)
        return;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    while (*ct != '\0' && *ct != ';' && *ct != ' ' && *ct != '\t' && n + 1 < cap) {
        char c = *ct++;
        out[n++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    out[n] = '\0';
}

static enum tt_framing choose_framing(const struct tt_decoder *dec,
                                      const char *content_type, int req_stream)
{
    char mt[64];
    size_t n;

    media_type(content_type, mt, sizeof(mt));
    n = strlen(mt);
    if (strcmp(mt, "text/event-stream") == 0)
        return FR_SSE;
    if (dec->api == TT_API_OTHER)
        return FR_NONE;
    if (strcmp(mt, "application/x-ndjson") == 0 ||
        strcmp(mt, "application/ndjson") == 0 ||
        strcmp(mt, "application/jsonl") == 0 ||
        strcmp(mt, "application/x-jsonlines") == 0)
        return FR_NDJSON;
    if (strcmp(mt, "application/json") == 0 ||
        (n > 5 && strcmp(mt + n - 5, "+json") == 0))
        return FR_JSON;
    if (n == 0) {
        /* no Content-Type: trust the API and the request */
        if (req_stream == 0)
            return FR_JSON;
        return dec->ndjson ? FR_NDJSON : FR_SSE;
    }
    return FR_NONE;     /* text/html error pages and the like */
}

struct tt_stream *tt_stream_new(struct tt_request *r, enum tt_api api,
                                const char *content_type,
                                enum tt_think_mode think)
{
    struct tt_stream *st = calloc(1, sizeof(*st));

    if (st == NULL)
        return NULL;
    st->r = r;
    st->dec = tt_decoder_of(api);
    st->fr = choose_framing(st->dec, content_type, r->stream);
    st->max_index = -1;
    tt_think_init(&st->th, think, r, tt_dec_streaming(st));
    tt_sse_init(&st->sse, tt_stream_event_max);
    tt_ndjson_init(&st->nd, tt_stream_event_max);
    r->s.streaming = tt_dec_streaming(st);
    return st;
}

struct tt_stream *tt_stream_new_messages(struct tt_request *r, enum tt_api api,
                                         enum tt_think_mode think)
{
    struct tt_stream *st = calloc(1, sizeof(*st));

    if (st == NULL)
        return NULL;
    st->r = r;
    st->dec = tt_decoder_of(api);
    st->fr = TT_FR_MSG;
    st->max_index = -1;
    tt_think_init(&st->th, think, r, 1);
    r->s.streaming = 1;
    return st;
}

void tt_stream_message(struct tt_stream *st, const char *data, size_t len,
                       uint64_t now)
{
    if (st == NULL || st->ended || st->fr != TT_FR_MSG)
        return;
    st->now = now;
    on_event(st, NULL, data, len);
}

static void body_append(struct tt_stream *st, const char *buf, size_t len)
{
    if (st->body_over)
        return;
    if (len > JSON_BODY_MAX - st->body_len) {
        st->body_over = 1;
        free(st->body);
        st->body = NULL;
        st->body_len = st->body_cap = 0;
        return;
    }
    if (st->body_len + len > st->body_cap) {
        size_t cap = st->body_cap ? st->body_cap : 4096;
        char *p;
        while (cap < st->body_len + len)
            cap *= 2;
        p = realloc(st->body, cap);
        if (p == NULL) {
            st->body_over = 1;
            return;
        }
        st->body = p;
        st->body_cap = cap;
    }
    memcpy(st->body + st->body_len, buf, len);
    st->body_len += len;
}

void tt_stream_feed(struct tt_stream *st, const char *buf, size_t len,
                    uint64_t now)
{
    if (st == NULL || st->ended || len == 0)
        return;
    st->now = now;
    switch (st->fr) {
    case FR_SSE:
        tt_sse_feed(&st->sse, buf, len, on_sse, st);
        break;
    case FR_NDJSON:
        tt_ndjson_feed(&st->nd, buf, len, on_line, st);
        break;
    case FR_JSON:
        body_append(st, buf, len);
        break;
    default:
        break;
    }
}

static void parse_body(struct tt_stream *st)
{
    const cJSON *root;

    if (st->body_over || st->body_len == 0)
        return;
    if (st->dec->fast != NULL && st->dec->fast(st, st->body, st->body_len) == 0) {
        st->fast_events++;  /* read without a tree (see dec_openai_fast.c) */
        return;
    }
    root = tt_json_parse(st->body, st->body_len);
    if (root == NULL) {
        st->r->s.parse_errors++;
    } else {
        tt_think_begin(&st->th, st->now);
        st->dec->event(st, root, NULL);
        tt_think_end_event(&st->th);
    }
    tt_json_reset();
}

void tt_stream_end(struct tt_stream *st, int complete, uint64_t now)
{
    struct tt_request *r;
    struct tt_stream_stats *s;

    if (st == NULL || st->ended)
        return;
    r = st->r;
    s = &r->s;
    st->ended = 1;
    st->now = now;
    if (st->fr == FR_SSE)
        tt_sse_finish(&st->sse, complete, on_sse, st);
    else if (st->fr == FR_NDJSON)
        tt_ndjson_finish(&st->nd, complete, on_line, st);
    else if (st->fr == FR_JSON && complete)
        parse_body(st);
    tt_think_finish(&st->th);
    s->parse_errors += st->sse.oversize + st->nd.oversize;
    if (st->max_index >= 0)
        s->choices = (uint32_t)st->max_index + 1;

    if (complete && (!st->dec->marker || !tt_dec_streaming(st)))
        s->terminal = 1;

    if (s->error) {
        int code = st->err_code;
        if (code == 0)
            code = r->status >= 400 ? r->status : 500;
        /* the upstream's own error type when it gave one (it lives in r);
         * a bare number is a code, not a type */
        tt_request_set_error(r, code,
                             s->error_type[strspn(s->error_type, "0123456789")] ?
                             s->error_type :
                             tt_dec_streaming(st) ? "stream_error" : "upstream_error",
                             s->error_message[0] ? s->error_message :
                             s->error_type[0] ? s->error_type :
                             "error object in the response body");
    } else if (!complete || (tt_dec_streaming(st) && st->dec->marker &&
                             !s->terminal)) {
        tt_request_set_error(r, 502, "truncated",
                             "stream ended without its terminal marker");
    }
}

/* a header value in ms (TGI's x-* and OpenAI's headers are plain numbers) */
static void header_ms(struct tt_stream *st, tt_header_fn *get, const void *h,
                      const char *name, enum tt_srv k)
{
    char tmp[32], *end;
    const char *v;
    size_t n;
    double d;

    v = get(h, name, &n);
    if (v == NULL || n == 0 || n >= sizeof(tmp))
        return;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    d = strtod(tmp, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (end != tmp && *end == '\0')
        tt_request_server(st->r, k, d);
}

void tt_stream_head(struct tt_stream *st, tt_header_fn *get, const void *h)
{
    static const struct { const char *name; enum tt_srv k; } fields[] = {
        { "x-queue-time",         TT_SRV_QUEUE_MS },
        { "x-inference-time",     TT_SRV_INFERENCE_MS },
        { "x-time-per-token",     TT_SRV_PER_TOKEN_MS },
        { "x-validation-time",    TT_SRV_VALIDATION_MS },
        { "x-prompt-tokens",      TT_SRV_PROMPT_TOKENS },
        { "x-generated-tokens",   TT_SRV_GENERATED_TOKENS },
        { "openai-processing-ms", TT_SRV_PROCESSING_MS },
    };
    size_t i;

    if (st == NULL || h == NULL)
        return;
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        header_ms(st, get, h, fields[i].name, fields[i].k);
}

void tt_stream_free(struct tt_stream *st)
{
    if (st == NULL)
        return;
    tt_sse_free(&st->sse);
    tt_ndjson_free(&st->nd);
    free(st->body);
    free(st->memo);
    tt_dec_usage_free(st);
    free(st);
}
