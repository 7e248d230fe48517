/*
 * Helpers shared by the per-API decoders (interface in decode.h): event
 * text into the think filter, model, finish reason, errors, usage summed
 * over choices, llama.cpp timings.  Called by proxy/decode/dec_*.c only.
 *
 * Decisions where the spec is silent:
 *  - The first error object wins for error_type/error_message; error_type is
 *    error.type, else error.code when it is text, else error.status (Gemini),
 *    else error.code when it is a number, else TGI's error_type.
 *  - Per-choice usage is summed over the choices, a repeated or cumulative
 *    usage is not (see tt_dec_usage()): llama.cpp sends a usage-only chunk
 *    after each choice's finish (chat, n > 1) or usage on each prompt's
 *    last chunk (/v1/completions with a list of prompts); vLLM's continuous
 *    usage repeats a choice's running count on its chunks and ends with the
 *    total on a usage-only chunk; OpenAI sends the total once, DeepSeek on
 *    the finish chunk.
 */
#include "proxy/decode/decode.h"
#include "proxy/base/strcopy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tt_jnum(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = tt_jget(o, key);

    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return -1;
    *out = v->valuedouble;
    return 0;
}

/* compare_output: FNV-1a 64 over the answer and tool-call text as the API
 * delivered it (before the think filter), so two servers' answers can be
 * compared without keeping them */
static void digest(struct tt_request *r, const char *s)
{
    uint64_t h = r->digest;

    if (!r->has_digest || s == NULL)
        return;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    r->digest = h;
}

void tt_dec_answer(struct tt_stream *st, const char *s)
{
    digest(st->r, s);
    tt_think_answer(&st->th, s);
}

void tt_dec_tool(struct tt_stream *st, const char *s)
{
    digest(st->r, s);
    tt_think_tool(&st->th, s);
}

void tt_dec_reasoning(struct tt_stream *st, const char *s)
{
    tt_think_reasoning(&st->th, s);
}

void tt_dec_audio(struct tt_stream *st, const char *b64)
{
    if (b64 == NULL || b64[0] == '\0')
        return;
    if (st->r->ts[TT_TS_FIRST_AUDIO] == 0)
        st->r->ts[TT_TS_FIRST_AUDIO] = st->now;
    tt_think_tool(&st->th, b64);
}

void tt_dec_model(struct tt_stream *st, const char *m)
{
    if (m != NULL && m[0] != '\0' && st->r->s.model[0] == '\0')
        tt_copy_str(st->r->s.model, sizeof(st->r->s.model), m);
}

void tt_dec_response_id(struct tt_stream *st, const char *id)
{
    if (id != NULL && id[0] != '\0' && st->r->s.response_id[0] == '\0')
        tt_copy_str(st->r->s.response_id, sizeof(st->r->s.response_id), id);
}

void tt_dec_lead_id(struct tt_stream *st, const char *data, size_t len)
{
    static const char open[] = "{\"id\":\"";
    char id[sizeof(st->r->s.response_id)];
    size_t i, n = sizeof(open) - 1;

    if (len <= n || memcmp(data, open, n) != 0)
        return;
    for (i = 0; n + i < len && i + 1 < sizeof(id); i++) {
        char ch = data[n + i];
        if (ch == '"') {
            id[i] = '\0';
            tt_dec_response_id(st, id);
            return;
        }
        if (ch == '\\' || (unsigned char)ch < 0x20)
            return;                 /* escaped or broken: not known */
        id[i] = ch;
    }
}

void tt_dec_finish(struct tt_stream *st, const char *f)
{
    if (f != NULL && f[0] != '\0')
        tt_copy_str(st->r->s.finish_reason, sizeof(st->r->s.finish_reason), f);
}

void tt_dec_terminal(struct tt_stream *st)
{
    if (tt_dec_streaming(st))
        st->r->s.terminal = 1;
}

void tt_dec_choice(struct tt_stream *st, int64_t index)
{
    if (index >= 0 && index < 1000000 && index > st->max_index)
        st->max_index = index;
}

void tt_dec_error(struct tt_stream *st, const cJSON *err, const cJSON *parent)
{
    struct tt_stream_stats *s = &st->r->s;
    const char *type = NULL, *msg = NULL;
    char num[24];
    const cJSON *code;
    int64_t n;

    if (s->error)
        return;             /* the first error is the cause */
    s->error = 1;
    if (cJSON_IsString(err)) {
        msg = err->valuestring;
        type = tt_jstr(parent, "error_type");
    } else if (cJSON_IsObject(err)) {
        msg = tt_jstr(err, "message");
        type = tt_jstr(err, "type");
        if (type != NULL && strcmp(type, "error") == 0)
            type = NULL;    /* a flat error event: its own type, not the error's */
        code = tt_jget(err, "code");
        if (type == NULL && cJSON_IsString(code))
            type = code->valuestring;
        if (type == NULL)
            type = tt_jstr(err, "status");
        if (type == NULL && cJSON_IsNumber(code) && tt_jint(err, "code", &n) == 0) {
            snprintf(num, sizeof(num), "%lld", (long long)n);
            type = num;
        }
        if (tt_jint(err, "status_code", &n) == 0 && n >= 100 && n <= 599)
            st->err_code = (int)n;
        else if (tt_jint(err, "code", &n) == 0 && n >= 100 && n <= 599)
            st->err_code = (int)n;
    }
    if (type != NULL)
        tt_copy_str(s->error_type, sizeof(s->error_type), type);
    if (msg != NULL)
        tt_copy_str(s->error_message, sizeof(s->error_message), msg);
}

void tt_dec_error_text(struct tt_stream *st, const char *text, size_t len)
{
    struct tt_stream_stats *s = &st->r->s;

    if (s->error)
        return;
    s->error = 1;
    if (len >= sizeof(s->error_message))
        len = sizeof(s->error_message) - 1;
    memcpy(s->error_message, text, len);
    s->error_message[len] = '\0';
}

void tt_dec_each(struct tt_stream *st, const cJSON *root,
                 void (*one)(struct tt_stream *st, const cJSON *x))
{
    const cJSON *c;

    if (!cJSON_IsArray(root)) {
        one(st, root);
        return;
    }
    cJSON_ArrayForEach(c, root)
        one(st, c);
}

void tt_dec_generic_error(struct tt_stream *st, const cJSON *root)
{
    const cJSON *e = tt_jget(root, "error");

    if (e != NULL && !cJSON_IsNull(e) && !cJSON_IsFalse(e))
        tt_dec_error(st, e, root);
}

/* the part of index <idx>, made when <make> (NULL: none, or no memory) */
static struct tt_usage_part *part_of(struct tt_usage_sum *u, int64_t idx, int make)
{
    struct tt_usage_part *p = u->cap > 0 ? u->p : u->inl;
    unsigned i;

    for (i = 0; i < u->n; i++)
        if (p[i].idx == idx)
            return &p[i];
    if (!make)
        return NULL;
    if (u->n == (u->cap > 0 ? u->cap : TT_USAGE_INLINE)) {
        unsigned cap = u->n * 2;
        struct tt_usage_part *np;
        if (u->n >= 4096)
            return NULL;            /* beyond any real n or list of prompts */
        np = u->cap > 0 ? realloc(u->p, cap * sizeof(*np)) : malloc(cap * sizeof(*np));
        if (np == NULL)
            return NULL;
        if (u->cap == 0)
            memcpy(np, u->inl, sizeof(u->inl));
        u->p = p = np;
        u->cap = cap;
    }
    p = &p[u->n++];
    p->idx = idx;
    p->in = p->out = p->rsn = p->cached = -1;
    p->fin = 0;
    p->has = 0;
    return p;
}

void tt_dec_usage_free(struct tt_stream *st)
{
    if (st->usum.cap > 0)
        free(st->usum.p);
    st->usum.p = NULL;
    st->usum.cap = st->usum.n = 0;
}

/* one figure into a sum: added, or the larger kept */
static void sum1(int64_t *acc, int64_t v, int add)
{
    if (v < 0)
        return;
    if (*acc < 0)
        *acc = v;
    else if (add)
        *acc += v;
    else if (v > *acc)
        *acc = v;
}

static void set1(int64_t *dst, int64_t v)
{
    if (v >= 0)
        *dst = v;
}

int64_t tt_dec_usage_key(const struct tt_stream *st, int has_choices,
                         unsigned nch, int64_t idx0)
{
    if (!tt_dec_streaming(st))
        return TT_USAGE_TOTAL;
    if (has_choices && nch == 0)
        return TT_USAGE_ONLY;
    if (nch == 1 && idx0 >= 0)
        return idx0;
    return TT_USAGE_TOTAL;
}

void tt_dec_finish_choice(struct tt_stream *st, int64_t index, const char *f)
{
    struct tt_usage_part *p;

    if (f == NULL || f[0] == '\0')
        return;
    tt_dec_finish(st, f);
    if (tt_dec_streaming(st) && index >= 0 &&
        (p = part_of(&st->usum, index, 1)) != NULL)
        p->fin = ++st->usum.fins;
}

int tt_dec_usage(struct tt_stream *st, int64_t key, int64_t in, int64_t out,
                 int64_t rsn, int64_t cached)
{
    struct tt_usage_sum *u = &st->usum;
    struct tt_stream_stats *s = &st->r->s;
    struct tt_usage_part *p = NULL, *all;
    int prompts = st->r->prompts > 1, made;
    int64_t sin = -1, sout = -1, srsn = -1, scached = -1;
    unsigned i;

    all = u->cap > 0 ? u->p : u->inl;
    if (key == TT_USAGE_ONLY) {
        /* the latest choice that finished without usage of its own */
        for (i = 0; i < u->n; i++)
            if (all[i].fin > 0 && !all[i].has && (p == NULL || all[i].fin > p->fin))
                p = &all[i];
        /* a stream without finish_reasons: each is a part of its own */
        if (p == NULL && u->fins == 0)
            key = TT_USAGE_NEW;
    }
    if (key == TT_USAGE_NEW) {
        p = part_of(u, -4 - (int64_t)u->news++, 1);
    } else if (key >= 0) {
        p = part_of(u, key, 1);
    }
    if (p == NULL) {
        /* a total: what the parts said is replaced */
        all = u->cap > 0 ? u->p : u->inl;
        for (i = 0; i < u->n; i++) {
            all[i].has = 0;
            all[i].fin = 0;
        }
        set1(&s->usage_input, in);
        set1(&s->usage_output, out);
        set1(&s->usage_reasoning, rsn);
        set1(&s->usage_cached, cached);
        return 0;
    }
    made = !p->has;
    p->has = 1;
    set1(&p->in, in);
    set1(&p->out, out);
    set1(&p->rsn, rsn);
    set1(&p->cached, cached);
    all = u->cap > 0 ? u->p : u->inl;
    for (i = 0; i < u->n; i++) {
        if (!all[i].has)
            continue;
        sum1(&sin, all[i].in, prompts);
        sum1(&sout, all[i].out, 1);
        sum1(&srsn, all[i].rsn, 1);
        sum1(&scached, all[i].cached, prompts);
    }
    set1(&s->usage_input, sin);
    set1(&s->usage_output, sout);
    set1(&s->usage_reasoning, srsn);
    set1(&s->usage_cached, scached);
    return made;
}

int tt_dec_openai_usage(struct tt_stream *st, const cJSON *u, int64_t key)
{
    int64_t in = -1, out = -1, rsn = -1, cached = -1;

    if (!cJSON_IsObject(u))
        return 0;
    (void)tt_jint(u, "prompt_tokens", &in);
    (void)tt_jint(u, "completion_tokens", &out);
    if (tt_jint(tt_jget(u, "completion_tokens_details"), "reasoning_tokens", &rsn) != 0)
        (void)tt_jint(u, "reasoning_tokens", &rsn);     /* SGLang */
    if (tt_jint(tt_jget(u, "prompt_tokens_details"), "cached_tokens", &cached) != 0)
        (void)tt_jint(u, "prompt_cache_hit_tokens", &cached);   /* DeepSeek */
    return tt_dec_openai_usage_counts(st, in, out, rsn, cached, key);
}

int tt_dec_openai_usage_counts(struct tt_stream *st, int64_t in, int64_t out,
                               int64_t rsn, int64_t cached, int64_t key)
{
    return tt_dec_usage(st, key, in, out, rsn, cached);
}

/* a server figure from one more per-choice report: summed or the largest */
static void server_part(struct tt_stream *st, enum tt_srv k, double v, int add)
{
    double old = tt_request_server_get(st->r, k);

    if (st->timings_parts > 1 && old >= 0)
        v = add ? old + v : (v > old ? v : old);
    tt_request_server(st->r, k, v);
}

void tt_dec_llamacpp_timings(struct tt_stream *st, const cJSON *t, int is_part)
{
    int prompts = st->r->prompts > 1;
    double v;

    if (!cJSON_IsObject(t))
        return;
    if (is_part)
        st->timings_parts++;
    else
        st->timings_parts = 1;      /* cumulative (timings_per_token): replace */
    if (tt_jnum(t, "prompt_n", &v) == 0)
        server_part(st, TT_SRV_PROMPT_N, v, prompts);
    if (tt_jnum(t, "cache_n", &v) == 0)
        server_part(st, TT_SRV_CACHE_N, v, prompts);
    if (tt_jnum(t, "prompt_ms", &v) == 0)
        server_part(st, TT_SRV_PROMPT_MS, v, 0);
    if (tt_jnum(t, "predicted_n", &v) == 0)
        server_part(st, TT_SRV_PREDICTED_N, v, 1);
    if (tt_jnum(t, "predicted_ms", &v) == 0)
        server_part(st, TT_SRV_PREDICTED_MS, v, 0);
}

int tt_dec_llamacpp_like(const cJSON *root)
{
    return cJSON_IsObject(root) && tt_jget(root, "choices") == NULL &&
           cJSON_IsBool(tt_jget(root, "stop")) &&
           (tt_jget(root, "content") != NULL ||
            tt_jget(root, "tokens_predicted") != NULL);
}

void tt_dec_switch(struct tt_stream *st, const struct tt_decoder *dec)
{
    st->dec = dec;
    st->r->api = dec->api;
}
