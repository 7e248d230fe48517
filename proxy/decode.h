/*
 * The per-API decoder interface, internal to the stream decoder.  One file
 * per API family (proxy/dec_*.c) defines a struct tt_decoder; proxy/stream.c
 * owns the life cycle (framing, events, end of body) and calls the decoder's
 * event() with each parsed event (or a whole non-streaming body); the
 * decoder reports what it finds through the tt_dec_* helpers of
 * proxy/decode.c, which feed the think filter (proxy/think.c) and the commit
 * (proxy/commit.c).  Adding an API is adding one dec_*.c file and its line
 * in the table of proxy/stream.c.
 */
#ifndef TT_DECODE_H
#define TT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/request.h"
#include "proxy/jsonarena.h"
#include "proxy/ndjson.h"
#include "proxy/sse.h"
#include "proxy/think.h"

enum tt_framing { TT_FR_NONE = 0, TT_FR_SSE, TT_FR_NDJSON, TT_FR_JSON };

struct tt_stream;

struct tt_decoder {
    enum tt_api api;
    /* one parsed event (SSE data, NDJSON line) or a whole JSON body;
     * <evname> is the SSE event name, NULL when none */
    void (*event)(struct tt_stream *st, const cJSON *root, const char *evname);
    unsigned marker:1;      /* a stream ends with a terminal marker */
    unsigned done:1;        /* "data: [DONE]" is that marker */
    unsigned ndjson:1;      /* a stream without Content-Type is NDJSON */
    /* optional: the same reports as event() straight from the event's
     * bytes (no tree), think_begin/end included; 0, or -1 (nothing
     * reported) when the event is not one it reads with certainty */
    int (*fast)(struct tt_stream *st, const char *data, size_t len);
};

/* the decoder of <api> (TT_API_OTHER's decodes nothing) */
const struct tt_decoder *tt_decoder_of(enum tt_api api);

extern const struct tt_decoder tt_dec_openai_chat, tt_dec_openai_completions,
    tt_dec_openai_responses, tt_dec_anthropic, tt_dec_gemini, tt_dec_ollama,
    tt_dec_tgi, tt_dec_llamacpp;

/* usage reported per choice (or per prompt), summed over the parts */
struct tt_usage_sum {
    int64_t  in, out, rsn, cached;      /* -1 = no part reported it */
    unsigned parts;
};

struct tt_fast_memo;

struct tt_stream {
    struct tt_request       *r;         /* borrowed until tt_stream_free() */
    const struct tt_decoder *dec;
    enum tt_framing          fr;
    int                      ended;
    uint64_t                 now;       /* arrival time of the bytes being decoded */

    struct tt_sse            sse;
    struct tt_ndjson         nd;
    char                    *body;      /* TT_FR_JSON: the body so far; owned */
    size_t                   body_len, body_cap;
    int                      body_over; /* outgrew the bound: not parsed */

    struct tt_think          th;        /* think filter + commit */
    struct tt_usage_sum      usum;
    unsigned                 timings_parts; /* llama.cpp timings objects seen */
    int64_t                  max_index; /* highest choice index seen, -1 none */
    int                      err_code;  /* numeric code of the first error object */
    unsigned                 fast_events; /* events read by dec->fast (tests) */
    unsigned                 memo_hits;   /* of those, resumed after a known prefix */
    unsigned                 shape_hits;  /* of those, read by the known shape */
    struct tt_fast_memo     *memo;      /* owned: dec->fast's prefix memo, or NULL */
};

/* ---- JSON helpers ------------------------------------------------------ */

static inline const cJSON *tt_jget(const cJSON *o, const char *key)
{
    if (!cJSON_IsObject(o))
        return NULL;
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* <v> when it is an array, else NULL (cJSON_ArrayForEach wants one) */
static inline const cJSON *tt_jarr(const cJSON *v)
{
    return cJSON_IsArray(v) ? v : NULL;
}

static inline const char *tt_jstr(const cJSON *o, const char *key)
{
    const cJSON *v = tt_jget(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* a non-negative integral number; 0, or -1 when absent or not a count */
static inline int tt_jint(const cJSON *o, const char *key, int64_t *out)
{
    return tt_json_count(tt_jget(o, key), out);
}

/* a finite non-negative number; 0, or -1 */
int tt_jnum(const cJSON *o, const char *key, double *out);

/* ---- what a decoder reports ------------------------------------------- */

static inline int tt_dec_streaming(const struct tt_stream *st)
{
    return st->fr == TT_FR_SSE || st->fr == TT_FR_NDJSON;
}

/* event text: answer (through the think filter), tool-call, reasoning */
void tt_dec_answer(struct tt_stream *st, const char *s);
void tt_dec_tool(struct tt_stream *st, const char *s);
void tt_dec_reasoning(struct tt_stream *st, const char *s);

void tt_dec_model(struct tt_stream *st, const char *m);     /* first wins */
void tt_dec_finish(struct tt_stream *st, const char *f);    /* last non-empty wins */
void tt_dec_terminal(struct tt_stream *st);                 /* marker seen (streams) */
void tt_dec_choice(struct tt_stream *st, int64_t index);     /* a choice index seen */

/* an error object (or string) <err>, held by <parent>; the first wins */
void tt_dec_error(struct tt_stream *st, const cJSON *err, const cJSON *parent);
/* an error whose text is all there is (an "error" event with plain data) */
void tt_dec_error_text(struct tt_stream *st, const char *text, size_t len);
/* <root>.error when it is set */
void tt_dec_generic_error(struct tt_stream *st, const cJSON *root);

/*
 * One part of a per-choice (or per-prompt) usage report: outputs (and
 * reasoning) are summed over parts; input and cached tokens are summed when
 * the request listed several prompts, else the largest part is kept (every
 * choice of one prompt reports the same prompt).  Absent figures are -1.
 */
void tt_dec_usage_part(struct tt_stream *st, int64_t in, int64_t out,
                       int64_t rsn, int64_t cached);

/* OpenAI-style "usage" (also vLLM, SGLang, DeepSeek, llama.cpp); a
 * usage-only chunk (<part> = 1) is one part of a per-choice report, any
 * other usage replaces what was seen (last wins) */
void tt_dec_openai_usage(struct tt_stream *st, const cJSON *u, int part);
/* the same from the figures (-1 = absent) */
void tt_dec_openai_usage_counts(struct tt_stream *st, int64_t in, int64_t out,
                                int64_t rsn, int64_t cached, int part);

/* the fast path of openai.chat (proxy/dec_openai_fast.c) */
int tt_dec_openai_chat_fast(struct tt_stream *st, const char *data, size_t len);

/* llama.cpp's "timings" object into the server fields; <part> = 1 when it
 * is one per-choice report (counts merged as tt_dec_usage_part does, times
 * the longest), 0 when it replaces what was seen */
void tt_dec_llamacpp_timings(struct tt_stream *st, const cJSON *t, int part);

/* <one>(st, x) for <root>, or for each element when <root> is an array
 * (bodies of several results, Gemini's array of chunks) */
void tt_dec_each(struct tt_stream *st, const cJSON *root,
                 void (*one)(struct tt_stream *st, const cJSON *x));

/* does <root> look like a llama.cpp native completion event/body? */
int tt_dec_llamacpp_like(const cJSON *root);
/* switch the response to <dec> (the events told a different API) */
void tt_dec_switch(struct tt_stream *st, const struct tt_decoder *dec);

#endif
