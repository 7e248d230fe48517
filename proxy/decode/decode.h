/*
 * The per-API decoder interface, internal to the stream decoder.  One file
 * per API family (proxy/decode/dec_*.c) defines a struct tt_decoder; proxy/decode/stream.c
 * owns the life cycle (framing, events, end of body) and calls the decoder's
 * event() with each parsed event (or a whole non-streaming body); the
 * decoder reports what it finds through the tt_dec_* helpers of
 * proxy/decode/decode.c, which feed the think filter (proxy/decode/think.c) and the commit
 * (proxy/decode/commit.c).  Adding an API is adding one dec_*.c file and its line
 * in the table of proxy/decode/stream.c.
 */
#ifndef TT_DECODE_H
#define TT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/request.h"
#include "proxy/base/jsonarena.h"
#include "proxy/decode/ndjson.h"
#include "proxy/decode/sse.h"
#include "proxy/decode/think.h"

/* TT_FR_MSG: one event per message of a message transport (WebSocket) */
enum tt_framing { TT_FR_NONE = 0, TT_FR_SSE, TT_FR_NDJSON, TT_FR_JSON, TT_FR_MSG };

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
     * (or the whole body's) bytes (no tree), think_begin/end included; 0,
     * or -1 (nothing reported) when it is not one it reads with certainty */
    int (*fast)(struct tt_stream *st, const char *data, size_t len);
};

/* the decoder of <api> (TT_API_OTHER's decodes nothing) */
const struct tt_decoder *tt_decoder_of(enum tt_api api);

extern const struct tt_decoder tt_dec_openai_chat, tt_dec_openai_completions,
    tt_dec_openai_responses, tt_dec_anthropic, tt_dec_gemini, tt_dec_ollama,
    tt_dec_tgi, tt_dec_llamacpp, tt_dec_openai_realtime;

/* usage reported per choice (or per prompt): one part per index, summed */
struct tt_usage_part {
    int64_t  idx;                       /* the choice's index (or a key of its own) */
    int64_t  in, out, rsn, cached;      /* -1 = not reported */
    uint32_t fin;                       /* order of its finish_reason, 0 none yet */
    uint8_t  has;                       /* a usage object said these */
};

#define TT_USAGE_INLINE 2
struct tt_usage_sum {
    struct tt_usage_part  inl[TT_USAGE_INLINE];
    struct tt_usage_part *p;            /* inl, or owned (more choices) */
    unsigned              n, cap;       /* cap 0: p is inl (or unused) */
    uint32_t              fins;         /* finish_reasons met */
    unsigned              news;         /* parts of TT_USAGE_NEW */
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
    unsigned                 fast_events; /* events (or a body) read by dec->fast (tests) */
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
    return st->fr == TT_FR_SSE || st->fr == TT_FR_NDJSON || st->fr == TT_FR_MSG;
}

/* event text: answer (through the think filter), tool-call, reasoning */
void tt_dec_answer(struct tt_stream *st, const char *s);
void tt_dec_tool(struct tt_stream *st, const char *s);
void tt_dec_reasoning(struct tt_stream *st, const char *s);
/* an audio delta (base64 text): an output token event, outside the answer
 * text (no digest, no think filter); the first sets TT_TS_FIRST_AUDIO */
void tt_dec_audio(struct tt_stream *st, const char *b64);

void tt_dec_model(struct tt_stream *st, const char *m);     /* first wins */
void tt_dec_response_id(struct tt_stream *st, const char *id);  /* first wins */
/* the id of an event that opens with it ({"id":"..",...), as OpenAI chat
 * chunks do: read from the raw bytes, so that the fast path and the cJSON
 * path agree (the fast path's scan does not keep it) */
void tt_dec_lead_id(struct tt_stream *st, const char *data, size_t len);
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
 * Usage, told apart by what it belongs to (<key>):
 *   an index >= 0   the usage of that choice (or prompt) alone: one part
 *                   per index, a repeat of an index replaces its part
 *                   (cumulative within a choice: vLLM's continuous usage)
 *   TT_USAGE_ONLY   a usage-only chunk ("choices": []): the part of the
 *                   latest choice that finished without usage of its own
 *                   (llama.cpp sends one such chunk per choice), else a
 *                   total (OpenAI's final usage, repeated or not); in a
 *                   stream without any finish_reason, a part of its own
 *   TT_USAGE_NEW    one more part of its own (llama.cpp native results)
 *   TT_USAGE_TOTAL  the whole response's: replaces every part
 * Parts are summed: outputs and reasoning always; input and cached tokens
 * when the request listed several prompts, else the largest part is kept
 * (every choice of one prompt reports the same prompt).  Absent figures
 * are -1.  Returns 1 when the usage made a new part, else 0.
 */
#define TT_USAGE_TOTAL (-1)
#define TT_USAGE_ONLY  (-2)
#define TT_USAGE_NEW   (-3)
int tt_dec_usage(struct tt_stream *st, int64_t key, int64_t in, int64_t out,
                 int64_t rsn, int64_t cached);

/* the key of an OpenAI-style chunk's usage: its one choice's index, a
 * usage-only chunk, or a total (several choices, a non-streaming body) */
int64_t tt_dec_usage_key(const struct tt_stream *st, int has_choices,
                         unsigned nch, int64_t idx0);

/* choice <index> ended with <f> (finish_reason; tt_dec_finish too) */
void tt_dec_finish_choice(struct tt_stream *st, int64_t index, const char *f);

/* the parts' storage (tt_stream_free) */
void tt_dec_usage_free(struct tt_stream *st);

/* OpenAI-style "usage" (also vLLM, SGLang, DeepSeek, llama.cpp) under
 * <key> (tt_dec_usage); returns as tt_dec_usage, 0 without usage */
int tt_dec_openai_usage(struct tt_stream *st, const cJSON *u, int64_t key);
/* the same from the figures (-1 = absent) */
int tt_dec_openai_usage_counts(struct tt_stream *st, int64_t in, int64_t out,
                               int64_t rsn, int64_t cached, int64_t key);

/* the fast path of openai.chat (proxy/decode/dec_openai_fast.c) */
int tt_dec_openai_chat_fast(struct tt_stream *st, const char *data, size_t len);

/* llama.cpp's "timings" object into the server fields; <part> = 1 when it
 * is one per-choice report (counts merged as tt_dec_usage's parts, times
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
