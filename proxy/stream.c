/*
 * Stream decoding (interface in stream.h): API detection by path, framing
 * by Content-Type, per-API extractors, <think> tag splitting, and the
 * bookkeeping that turns decoded events into the request clock's facts
 * (r->s, r->ts[TT_TS_FIRST_EVENT .. TT_TS_LAST_TOKEN], r->token_ts).
 *
 * Called by the proxy's response path (proxy/conn.c): tt_stream_new() when
 * the response headers arrive, tt_stream_feed() on every body read (after
 * chunked framing is removed), tt_stream_end() once.  It only reads the
 * bytes; forwarding never waits for it.
 *
 * Data path:
 *
 *   body bytes --> sse.c / ndjson.c / bounded JSON body
 *                     |  one event (data payload / line / whole body)
 *                     v
 *              tt_json_parse() (arena, jsonarena.c)
 *                     |  cJSON tree
 *                     v
 *              extract_<api>()  --> add_answer / add_reasoning / add_tool,
 *                     |             usage, finish reason, error, terminal
 *                     v
 *              think filter (answer text only) --> commit(): counters, stamps
 *
 * Decisions where the spec is silent (see also the comments below):
 *  - A token event carrying both answer (or tool) text and reasoning text is
 *    an answer event: it is the first output token when it comes first.
 *  - Usage: the last value seen wins (Anthropic's and Gemini's are
 *    cumulative).  Anthropic input = input_tokens + cache_creation + cache
 *    read tokens (OpenAI's prompt_tokens include cached tokens too).  Gemini
 *    output = candidatesTokenCount + thoughtsTokenCount, reasoning =
 *    thoughtsTokenCount.  Absent figures stay -1 (no reasoning count from
 *    Anthropic or Ollama).
 *  - finish_reason is the API's own word, the last non-empty one seen
 *    (OpenAI finish_reason, Anthropic stop_reason, Gemini finishReason,
 *    Ollama done_reason, TGI details.finish_reason); for the Responses API
 *    the final status ("completed", "failed", or incomplete_details.reason).
 *  - Responses API: response.completed, response.incomplete and
 *    response.failed are all terminal events (the stream ends there).
 *  - The first error object wins for error_type/error_message; error_type is
 *    error.type, else error.code (as text), else error.status (Gemini), else
 *    TGI's error_type.  At tt_stream_end() a body error becomes the request
 *    error: type "stream_error" (streams) or "upstream_error" (JSON bodies),
 *    code = the error's numeric status_code/code when it has one, else the
 *    HTTP status when >= 400, else 500.
 *  - Non-streaming JSON bodies have no timeline: no stamps, no token events,
 *    events stays 0; only bytes, usage, finish reason, error, model.
 *  - Oversize events (over 1 MiB) and oversize JSON bodies (over 4 MiB) are
 *    skipped; skipped events count as parse_errors.
 *  - Model: the first model name the response gives (model, modelVersion,
 *    message.model, response.model).
 */
#include "proxy/stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/jsonarena.h"
#include "proxy/ndjson.h"
#include "proxy/sse.h"

#define EVENT_MAX     (1024u * 1024)        /* one SSE event / NDJSON line */
#define JSON_BODY_MAX (4u * 1024 * 1024)    /* a non-streaming body */
#define CARRY_MAX     8                     /* > strlen("</think>") - 1 */
#define PEND_MAX      8
#define OWN_CUR       0xFF

enum framing { FR_NONE = 0, FR_SSE, FR_NDJSON, FR_JSON };

/*
 * Phases of the think filter (answer text only; mode OFF skips it):
 *   PRE         nothing but whitespace yet; "<think>" opens a thought (and in
 *               AUTO "</think>" closes one we joined midway)
 *   UNRESOLVED  AUTO only: answer text seen, no tag yet; a "</think>" now
 *               means the stream started mid-thought
 *   IN          inside <think>; "</think>" ends it
 *   OUT         ON only: after a thought or after plain text; "<think>"
 *               opens another
 *   DONE        AUTO only: decided; no more scanning
 */
enum phase { PH_PRE = 0, PH_UNRESOLVED, PH_IN, PH_OUT, PH_DONE };

/* text bytes of one token-bearing event while it is being classified */
struct evacc {
    uint64_t now;
    uint64_t r;     /* reasoning */
    uint64_t a;     /* answer (incl. tool-call text), final */
    uint64_t p;     /* provisional answer: may still turn into reasoning */
};

struct tt_stream {
    struct tt_request *r;           /* borrowed until tt_stream_free() */
    enum tt_api        api;
    enum framing       fr;
    enum tt_think_mode think;
    int                ended;
    uint64_t           now;         /* arrival time of the bytes being decoded */

    struct tt_sse      sse;
    struct tt_ndjson   nd;
    char              *body;        /* FR_JSON: the body so far; owned */
    size_t             body_len, body_cap;
    int                body_over;   /* body outgrew JSON_BODY_MAX: not parsed */

    /* think filter; see the comment above think_text() */
    enum phase         phase;
    struct evacc       cur;         /* the event being decoded */
    struct evacc       pend[PEND_MAX];  /* events waiting for the carry */
    unsigned           npend;
    char               carry[CARRY_MAX];    /* a tag's possible start */
    uint8_t            carry_own[CARRY_MAX];/* pend index or OWN_CUR */
    unsigned           ncarry;
    uint32_t           prov_events; /* committed answer events that are provisional */
    uint64_t           prov_bytes;  /* committed provisional answer bytes */
    int                fo_prov;     /* FIRST_OUTPUT_TOKEN set by a provisional event */
    uint64_t           first_firm;  /* time of the first definite answer event */

    int                err_code;    /* numeric code of the first error object */
};

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
    if (ends_with(path, n, "/v1/messages"))
        return TT_API_ANTHROPIC;
    if (ends_with(path, n, "/api/chat") || ends_with(path, n, "/api/generate"))
        return TT_API_OLLAMA;
    if (ends_with(path, n, "/generate") || ends_with(path, n, "/generate_stream"))
        return TT_API_TGI;
    return TT_API_OTHER;
}

/* ------------------------------------------------------------------ */
/* small JSON helpers                                                  */

static const cJSON *jget(const cJSON *o, const char *key)
{
    if (!cJSON_IsObject(o))
        return NULL;
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* <v> when it is an array, else NULL (cJSON_ArrayForEach wants one) */
static const cJSON *jarr(const cJSON *v)
{
    return cJSON_IsArray(v) ? v : NULL;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = jget(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* a non-negative integral number; 0 or -1 when absent or not a count */
static int jint(const cJSON *o, const char *key, int64_t *out)
{
    return tt_json_count(jget(o, key), out);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------------------ */
/* committing events                                                   */

static struct evacc *owner(struct tt_stream *st, uint8_t own)
{
    return own == OWN_CUR ? &st->cur : &st->pend[own];
}

static int streaming(const struct tt_stream *st)
{
    return st->fr == FR_SSE || st->fr == FR_NDJSON;
}

/*
 * One event's text is classified: count it.  An event with any answer (or
 * tool) text is an answer event, else one with reasoning text is a
 * reasoning event, else it is no token event at all.
 */
static void commit(struct tt_stream *st, const struct evacc *e)
{
    struct tt_request *r = st->r;
    struct tt_stream_stats *s = &r->s;
    uint64_t ans = e->a + e->p;

    if (ans + e->r == 0)
        return;
    s->answer_bytes += ans;
    s->reasoning_bytes += e->r;
    st->prov_bytes += e->p;
    if (!streaming(st))
        return;             /* no timeline for a non-streaming body */

    s->token_events++;
    (void)tt_request_token(r, e->now);
    if (r->ts[TT_TS_FIRST_TOKEN] == 0)
        r->ts[TT_TS_FIRST_TOKEN] = e->now;
    else if (r->ts[TT_TS_SECOND_TOKEN] == 0)
        r->ts[TT_TS_SECOND_TOKEN] = e->now;
    r->ts[TT_TS_LAST_TOKEN] = e->now;
    if (ans > 0) {
        s->answer_events++;
        if (e->a == 0)
            st->prov_events++;
        else if (st->first_firm == 0)
            st->first_firm = e->now;
        if (r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0) {
            r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = e->now;
            st->fo_prov = e->a == 0;
        }
    } else {
        s->reasoning_events++;
    }
}

static void commit_pending(struct tt_stream *st)
{
    unsigned i;

    for (i = 0; i < st->npend; i++)
        commit(st, &st->pend[i]);
    st->npend = 0;
}

/* provisional answer text is answer after all */
static void make_firm(struct tt_stream *st)
{
    unsigned i;

    st->prov_events = 0;
    st->prov_bytes = 0;
    st->fo_prov = 0;
    for (i = 0; i < st->npend; i++) {
        st->pend[i].a += st->pend[i].p;
        st->pend[i].p = 0;
    }
    st->cur.a += st->cur.p;
    st->cur.p = 0;
}

/* provisional answer text was reasoning: move it, counted or not */
static void reclassify(struct tt_stream *st)
{
    struct tt_stream_stats *s = &st->r->s;
    unsigned i;

    s->answer_events -= st->prov_events;
    s->reasoning_events += st->prov_events;
    s->answer_bytes -= st->prov_bytes;
    s->reasoning_bytes += st->prov_bytes;
    if (st->fo_prov)
        st->r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = st->first_firm;
    st->prov_events = 0;
    st->prov_bytes = 0;
    st->fo_prov = 0;
    for (i = 0; i < st->npend; i++) {
        st->pend[i].r += st->pend[i].p;
        st->pend[i].p = 0;
    }
    st->cur.r += st->cur.p;
    st->cur.p = 0;
}

/* ------------------------------------------------------------------ */
/* the think filter                                                    */

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int scanning(const struct tt_stream *st)
{
    if (st->think == TT_THINK_OFF)
        return 0;
    return st->phase != PH_DONE;
}

/* plain text (not part of a tag) owned by <own>, classified by phase */
static void literal(struct tt_stream *st, const char *s, size_t n, uint8_t own)
{
    struct evacc *e = owner(st, own);
    size_t i = 0;

    if (st->think == TT_THINK_OFF) {
        e->a += n;
        return;
    }
    while (i < n) {
        switch (st->phase) {
        case PH_IN:
            e->r += n - i;
            return;
        case PH_OUT:
        case PH_DONE:
            e->a += n - i;
            return;
        case PH_UNRESOLVED:
            e->p += n - i;
            return;
        case PH_PRE: {
            size_t k = i;
            while (k < n && is_ws(s[k]))
                k++;
            e->p += k - i;
            i = k;
            if (i < n) {
                if (st->think == TT_THINK_ON) {
                    st->phase = PH_OUT;
                    make_firm(st);
                } else {
                    st->phase = PH_UNRESOLVED;
                }
            }
            break;
        }
        }
    }
}

/* the carried bytes are plain text after all; waiting events are done */
static void flush_carry(struct tt_stream *st)
{
    char c[CARRY_MAX];
    uint8_t o[CARRY_MAX];
    unsigned i, n = st->ncarry;

    memcpy(c, st->carry, n);
    memcpy(o, st->carry_own, n);
    st->ncarry = 0;
    for (i = 0; i < n; i++)
        literal(st, &c[i], 1, o[i]);
    commit_pending(st);
}

/* the carried bytes form a tag: it is reasoning text (a model token) */
static void tag_done(struct tt_stream *st, int close)
{
    unsigned i;

    for (i = 0; i < st->ncarry; i++)
        owner(st, st->carry_own[i])->r++;
    st->ncarry = 0;
    if (!close) {
        if (st->phase == PH_PRE)
            reclassify(st);         /* leading whitespace joins the thought */
        st->phase = PH_IN;
    } else if (st->phase == PH_IN) {
        st->phase = st->think == TT_THINK_ON ? PH_OUT : PH_DONE;
    } else {
        /* AUTO: "</think>" with no "<think>": we joined mid-thought, so all
         * answer text so far was reasoning */
        reclassify(st);
        st->phase = PH_DONE;
    }
    commit_pending(st);
}

static int tag_state(const char *carry, unsigned n, const char *tag)
{
    size_t k = strlen(tag);
    if (n > k || memcmp(carry, tag, n) != 0)
        return 0;           /* dead */
    return n == k ? 2 : 1;  /* complete : alive */
}

static void match_byte(struct tt_stream *st, char b)
{
    static const char open_tag[] = "<think>", close_tag[] = "</think>";
    int so = 0, sc = 0;
    unsigned n = st->ncarry;

    st->carry[n] = b;
    st->carry_own[n] = OWN_CUR;
    n++;
    if (st->phase == PH_PRE || st->phase == PH_OUT)
        so = tag_state(st->carry, n, open_tag);
    if (st->phase == PH_IN || st->phase == PH_UNRESOLVED ||
        (st->phase == PH_PRE && st->think == TT_THINK_AUTO))
        sc = tag_state(st->carry, n, close_tag);
    if (so == 2 || sc == 2) {
        st->ncarry = n;
        tag_done(st, sc == 2);
        return;
    }
    if (so == 1 || sc == 1) {
        st->ncarry = n;
        return;
    }
    /* dead: what was carried is text; <b> may start a new tag (both tags
     * hold '<' only at their start, so no other restart point exists) */
    flush_carry(st);
    if (b == '<' && scanning(st)) {
        st->carry[0] = b;
        st->carry_own[0] = OWN_CUR;
        st->ncarry = 1;
    } else {
        literal(st, &b, 1, OWN_CUR);
    }
}

/*
 * Answer text goes through the think filter.  Rules (think_tags):
 *  off   all answer text is answer.
 *  on    "<think>" anywhere outside a thought opens one, "</think>" closes
 *        it; text inside and the tags themselves are reasoning.
 *  auto  "<think>" opens a thought only as the first non-whitespace answer
 *        text; "</think>" closes it.  A "</think>" with no "<think>" before
 *        (a server that put the opening tag in the prompt template, so the
 *        stream starts mid-thought) turns all answer text so far into
 *        reasoning, counted events included, and moves first_output_token
 *        to the first answer event after the tag.  Until such a decision,
 *        answer text is provisional: counted as answer, movable.  After the
 *        first "</think>" nothing is scanned any more.  A server that sends
 *        reasoning in its own field (reasoning_content...) separates it
 *        already: the first such text ends scanning.
 * The tags are model tokens, so they count as reasoning text, and an event
 * holding only a tag is a reasoning token event.  Whitespace before an
 * opening tag is part of the thought.
 *
 * A tag split across events ("<th" + "ink>") is handled with a carry: bytes
 * that may start a tag are held, and an event whose text ends inside the
 * carry waits (with its own arrival time) in <pend> until the next answer
 * text (or another token event, or the end) decides; events are committed
 * in arrival order, so stamps stay exact.
 */
static void think_text(struct tt_stream *st, const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        if (st->ncarry == 0) {
            const char *lt;
            size_t k;

            if (!scanning(st)) {
                literal(st, s + i, n - i, OWN_CUR);
                return;
            }
            lt = memchr(s + i, '<', n - i);
            k = lt ? (size_t)(lt - (s + i)) : n - i;
            if (k > 0)
                literal(st, s + i, k, OWN_CUR);
            i += k;
            if (i == n)
                return;
        }
        match_byte(st, s[i]);
        i++;
    }
}

static void add_answer(struct tt_stream *st, const char *s)
{
    if (s != NULL && s[0] != '\0')
        think_text(st, s, strlen(s));
}

static void add_tool(struct tt_stream *st, const char *s)
{
    if (s != NULL)
        st->cur.a += strlen(s);
}

static void add_reasoning(struct tt_stream *st, const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0)
        return;
    st->cur.r += n;
    if (st->think == TT_THINK_AUTO &&
        (st->phase == PH_PRE || st->phase == PH_UNRESOLVED)) {
        st->phase = PH_DONE;
        make_firm(st);
    }
}

static void ev_begin(struct tt_stream *st)
{
    memset(&st->cur, 0, sizeof(st->cur));
    st->cur.now = st->now;
}

static void ev_end(struct tt_stream *st)
{
    unsigned i;
    int owns = 0;

    for (i = 0; i < st->ncarry; i++)
        if (st->carry_own[i] == OWN_CUR)
            owns = 1;
    if (owns && st->npend == PEND_MAX) {
        flush_carry(st);        /* cannot happen: the carry is < PEND_MAX bytes */
        commit(st, &st->cur);
    } else if (owns) {
        for (i = 0; i < st->ncarry; i++)
            if (st->carry_own[i] == OWN_CUR)
                st->carry_own[i] = (uint8_t)st->npend;
        st->pend[st->npend++] = st->cur;
    } else {
        if (st->ncarry > 0 && st->cur.a + st->cur.p + st->cur.r > 0)
            flush_carry(st);    /* another token event: no tag after all */
        commit(st, &st->cur);
    }
    memset(&st->cur, 0, sizeof(st->cur));
}

/* ------------------------------------------------------------------ */
/* facts other than text                                               */

static void set_model(struct tt_stream *st, const char *m)
{
    if (m != NULL && m[0] != '\0' && st->r->s.model[0] == '\0')
        copy_str(st->r->s.model, sizeof(st->r->s.model), m);
}

static void set_finish(struct tt_stream *st, const char *f)
{
    if (f != NULL && f[0] != '\0')
        copy_str(st->r->s.finish_reason, sizeof(st->r->s.finish_reason), f);
}

/*
 * An error object (or string) in the body.  <err> is the value of "error"
 * (object or string) or the event itself; <parent> the object holding it.
 */
static void note_error(struct tt_stream *st, const cJSON *err,
                       const cJSON *parent)
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
        type = jstr(parent, "error_type");
    } else if (cJSON_IsObject(err)) {
        msg = jstr(err, "message");
        type = jstr(err, "type");
        if (type != NULL && strcmp(type, "error") == 0)
            type = NULL;    /* a flat error event: its own type, not the error's */
        code = jget(err, "code");
        if (type == NULL && cJSON_IsString(code))
            type = code->valuestring;
        if (type == NULL && cJSON_IsNumber(code) && jint(err, "code", &n) == 0) {
            snprintf(num, sizeof(num), "%lld", (long long)n);
            type = num;
        }
        if (type == NULL)
            type = jstr(err, "status");
        if (jint(err, "status_code", &n) == 0 && n >= 100 && n <= 599)
            st->err_code = (int)n;
        else if (jint(err, "code", &n) == 0 && n >= 100 && n <= 599)
            st->err_code = (int)n;
    }
    if (type != NULL)
        copy_str(s->error_type, sizeof(s->error_type), type);
    if (msg != NULL)
        copy_str(s->error_message, sizeof(s->error_message), msg);
}

static void generic_error(struct tt_stream *st, const cJSON *root)
{
    const cJSON *e = jget(root, "error");

    if (e != NULL && !cJSON_IsNull(e) && !cJSON_IsFalse(e))
        note_error(st, e, root);
}

static void openai_usage(struct tt_stream *st, const cJSON *u)
{
    struct tt_stream_stats *s = &st->r->s;
    int64_t n;

    if (!cJSON_IsObject(u))
        return;
    if (jint(u, "prompt_tokens", &n) == 0)
        s->usage_input = n;
    if (jint(u, "completion_tokens", &n) == 0)
        s->usage_output = n;
    if (jint(jget(u, "completion_tokens_details"), "reasoning_tokens", &n) == 0)
        s->usage_reasoning = n;
    else if (jint(u, "reasoning_tokens", &n) == 0)    /* SGLang */
        s->usage_reasoning = n;
}

/* ------------------------------------------------------------------ */
/* extractors, one per API; <root> is one event or a whole body         */

static void extract_openai(struct tt_stream *st, const cJSON *root)
{
    const cJSON *choices = jget(root, "choices"), *c;

    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        set_model(st, jstr(root, "model"));
    generic_error(st, root);
    cJSON_ArrayForEach(c, jarr(choices)) {
        const cJSON *d = jget(c, "delta"), *tc, *t;
        const char *rs;

        if (!cJSON_IsObject(d))
            d = jget(c, "message");     /* non-streaming */
        if (cJSON_IsObject(d)) {
            rs = jstr(d, "reasoning_content");
            if (rs == NULL || rs[0] == '\0')
                rs = jstr(d, "reasoning");  /* never both: same text */
            add_reasoning(st, rs);
            add_answer(st, jstr(d, "content"));
            add_tool(st, jstr(d, "refusal"));
            tc = jget(d, "tool_calls");
            cJSON_ArrayForEach(t, jarr(tc)) {
                const cJSON *f = jget(t, "function");
                add_tool(st, jstr(f, "name"));
                add_tool(st, jstr(f, "arguments"));
            }
            tc = jget(d, "function_call");      /* legacy */
            add_tool(st, jstr(tc, "name"));
            add_tool(st, jstr(tc, "arguments"));
        } else if (st->api == TT_API_OPENAI_COMPLETIONS) {
            add_answer(st, jstr(c, "text"));
        }
        set_finish(st, jstr(c, "finish_reason"));
    }
    openai_usage(st, jget(root, "usage"));
}

static void responses_usage(struct tt_stream *st, const cJSON *resp)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *u = jget(resp, "usage");
    int64_t n;

    if (!cJSON_IsObject(u))
        return;
    if (jint(u, "input_tokens", &n) == 0)
        s->usage_input = n;
    if (jint(u, "output_tokens", &n) == 0)
        s->usage_output = n;
    if (jint(jget(u, "output_tokens_details"), "reasoning_tokens", &n) == 0)
        s->usage_reasoning = n;
}

/* a final (or non-streaming) response object */
static void responses_final(struct tt_stream *st, const cJSON *resp)
{
    const char *status = jstr(resp, "status");
    const cJSON *e = jget(resp, "error");

    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        set_model(st, jstr(resp, "model"));
    responses_usage(st, resp);
    if (status != NULL && strcmp(status, "incomplete") == 0 &&
        jstr(jget(resp, "incomplete_details"), "reason") != NULL)
        status = jstr(jget(resp, "incomplete_details"), "reason");
    set_finish(st, status);
    if (e != NULL && !cJSON_IsNull(e))
        note_error(st, e, resp);
    else if (jstr(resp, "status") != NULL &&
             strcmp(jstr(resp, "status"), "failed") == 0)
        note_error(st, NULL, resp);
}

/* the output items of a non-streaming response */
static void responses_output(struct tt_stream *st, const cJSON *resp)
{
    const cJSON *out = jget(resp, "output"), *it, *c;

    cJSON_ArrayForEach(it, jarr(out)) {
        const char *type = jstr(it, "type");
        const cJSON *parts;

        if (type == NULL)
            continue;
        if (strcmp(type, "message") == 0) {
            parts = jget(it, "content");
            cJSON_ArrayForEach(c, jarr(parts)) {
                add_answer(st, jstr(c, "text"));
                add_tool(st, jstr(c, "refusal"));
            }
        } else if (strcmp(type, "reasoning") == 0) {
            parts = jget(it, "summary");
            cJSON_ArrayForEach(c, jarr(parts))
                add_reasoning(st, jstr(c, "text"));
            parts = jget(it, "content");
            cJSON_ArrayForEach(c, jarr(parts))
                add_reasoning(st, jstr(c, "text"));
        } else {
            add_tool(st, jstr(it, "arguments"));    /* function_call... */
            add_tool(st, jstr(it, "input"));        /* custom_tool_call */
        }
    }
}

static void extract_responses(struct tt_stream *st, const cJSON *root,
                              const char *evname)
{
    const char *type = jstr(root, "type");
    const cJSON *resp = jget(root, "response");

    if (type == NULL)
        type = evname;
    if (!streaming(st) && type == NULL) {
        if (jstr(root, "object") != NULL || jget(root, "output") != NULL) {
            responses_output(st, root);
            responses_final(st, root);
        }
        generic_error(st, root);
        return;
    }
    if (type == NULL)
        return;
    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        set_model(st, jstr(resp, "model"));
    if (strcmp(type, "response.output_text.delta") == 0) {
        add_answer(st, jstr(root, "delta"));
    } else if (strcmp(type, "response.refusal.delta") == 0 ||
               strcmp(type, "response.function_call_arguments.delta") == 0 ||
               strcmp(type, "response.custom_tool_call_input.delta") == 0) {
        add_tool(st, jstr(root, "delta"));
    } else if (strcmp(type, "response.reasoning_text.delta") == 0 ||
               strcmp(type, "response.reasoning_summary_text.delta") == 0) {
        add_reasoning(st, jstr(root, "delta"));
    } else if (strcmp(type, "response.completed") == 0 ||
               strcmp(type, "response.incomplete") == 0 ||
               strcmp(type, "response.failed") == 0) {
        if (streaming(st))
            st->r->s.terminal = 1;
        responses_final(st, resp);
    } else if (strcmp(type, "error") == 0) {
        const cJSON *e = jget(root, "error");
        note_error(st, cJSON_IsObject(e) ? e : root, root);
    } else {
        generic_error(st, root);
    }
}

static void anthropic_input(struct tt_stream *st, const cJSON *u)
{
    int64_t in, n;

    if (jint(u, "input_tokens", &in) != 0)
        return;
    if (jint(u, "cache_creation_input_tokens", &n) == 0)
        in += n;
    if (jint(u, "cache_read_input_tokens", &n) == 0)
        in += n;
    st->r->s.usage_input = in;
}

static void extract_anthropic(struct tt_stream *st, const cJSON *root,
                              const char *evname)
{
    const char *type = jstr(root, "type");
    const cJSON *u, *c;
    int64_t n;

    if (type == NULL)
        type = evname;
    generic_error(st, root);
    if (type == NULL)
        return;
    if (strcmp(type, "content_block_delta") == 0) {
        const cJSON *d = jget(root, "delta");
        const char *dt = jstr(d, "type");
        if (dt == NULL)
            return;
        if (strcmp(dt, "text_delta") == 0)
            add_answer(st, jstr(d, "text"));
        else if (strcmp(dt, "input_json_delta") == 0)
            add_tool(st, jstr(d, "partial_json"));
        else if (strcmp(dt, "thinking_delta") == 0)
            add_reasoning(st, jstr(d, "thinking"));
    } else if (strcmp(type, "message_start") == 0) {
        const cJSON *m = jget(root, "message");
        if (st->r->s.model[0] == '\0')      /* looked up once per response */
            set_model(st, jstr(m, "model"));
        anthropic_input(st, jget(m, "usage"));
    } else if (strcmp(type, "message_delta") == 0) {
        set_finish(st, jstr(jget(root, "delta"), "stop_reason"));
        u = jget(root, "usage");
        anthropic_input(st, u);
        if (jint(u, "output_tokens", &n) == 0)
            st->r->s.usage_output = n;
    } else if (strcmp(type, "message_stop") == 0) {
        if (streaming(st))
            st->r->s.terminal = 1;
    } else if (strcmp(type, "message") == 0) {
        /* non-streaming */
        const cJSON *content = jget(root, "content");
        if (st->r->s.model[0] == '\0')      /* looked up once per response */
            set_model(st, jstr(root, "model"));
        cJSON_ArrayForEach(c, jarr(content)) {
            const char *ct = jstr(c, "type");
            if (ct == NULL)
                continue;
            if (strcmp(ct, "text") == 0)
                add_answer(st, jstr(c, "text"));
            else if (strcmp(ct, "thinking") == 0)
                add_reasoning(st, jstr(c, "thinking"));
            else if (strcmp(ct, "tool_use") == 0)
                add_tool(st, jstr(c, "name"));
        }
        set_finish(st, jstr(root, "stop_reason"));
        u = jget(root, "usage");
        anthropic_input(st, u);
        if (jint(u, "output_tokens", &n) == 0)
            st->r->s.usage_output = n;
    } else if (strcmp(type, "error") == 0 && !st->r->s.error) {
        note_error(st, jget(root, "error"), root);
    }
}

static void extract_gemini_one(struct tt_stream *st, const cJSON *root)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *cands = jget(root, "candidates"), *c, *p, *u;
    int64_t cand = -1, thoughts = -1, n;

    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        set_model(st, jstr(root, "modelVersion"));
    generic_error(st, root);
    cJSON_ArrayForEach(c, jarr(cands)) {
        const cJSON *parts = jget(jget(c, "content"), "parts");
        cJSON_ArrayForEach(p, jarr(parts)) {
            if (cJSON_IsTrue(jget(p, "thought")))
                add_reasoning(st, jstr(p, "text"));
            else
                add_answer(st, jstr(p, "text"));
            add_tool(st, jstr(jget(p, "functionCall"), "name"));
        }
        set_finish(st, jstr(c, "finishReason"));
    }
    u = jget(root, "usageMetadata");
    if (cJSON_IsObject(u)) {
        if (jint(u, "promptTokenCount", &n) == 0)
            s->usage_input = n;
        (void)jint(u, "candidatesTokenCount", &cand);
        (void)jint(u, "thoughtsTokenCount", &thoughts);
        if (cand >= 0 || thoughts >= 0)
            s->usage_output = (cand > 0 ? cand : 0) + (thoughts > 0 ? thoughts : 0);
        if (thoughts >= 0)
            s->usage_reasoning = thoughts;
    }
}

static void extract_gemini(struct tt_stream *st, const cJSON *root)
{
    const cJSON *c;

    if (!cJSON_IsArray(root)) {
        extract_gemini_one(st, root);
        return;
    }
    /* streamGenerateContent without alt=sse: one JSON array of chunks */
    cJSON_ArrayForEach(c, root)
        extract_gemini_one(st, c);
}

static void extract_ollama(struct tt_stream *st, const cJSON *root)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *m = jget(root, "message"), *tc, *t;
    int64_t n;

    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        set_model(st, jstr(root, "model"));
    generic_error(st, root);
    add_reasoning(st, jstr(m, "thinking"));
    add_reasoning(st, jstr(root, "thinking"));          /* /api/generate */
    add_answer(st, jstr(m, "content"));
    add_answer(st, jstr(root, "response"));             /* /api/generate */
    tc = jget(m, "tool_calls");
    cJSON_ArrayForEach(t, jarr(tc))
        add_tool(st, jstr(jget(t, "function"), "name"));
    if (cJSON_IsTrue(jget(root, "done"))) {
        if (streaming(st))
            s->terminal = 1;
        set_finish(st, jstr(root, "done_reason"));
        if (jint(root, "prompt_eval_count", &n) == 0)
            s->usage_input = n;
        if (jint(root, "eval_count", &n) == 0)
            s->usage_output = n;
    }
}

static void extract_tgi_one(struct tt_stream *st, const cJSON *root)
{
    const cJSON *tok = jget(root, "token"), *det = jget(root, "details");
    int64_t n;

    generic_error(st, root);
    if (cJSON_IsObject(tok)) {
        if (!cJSON_IsTrue(jget(tok, "special")))
            add_answer(st, jstr(tok, "text"));
    } else if (!streaming(st)) {
        add_answer(st, jstr(root, "generated_text"));   /* /generate */
    }
    if (cJSON_IsObject(det)) {
        set_finish(st, jstr(det, "finish_reason"));
        if (jint(det, "generated_tokens", &n) == 0)
            st->r->s.usage_output = n;
    }
}

static void extract_tgi(struct tt_stream *st, const cJSON *root)
{
    const cJSON *c;

    if (!cJSON_IsArray(root)) {
        extract_tgi_one(st, root);
        return;
    }
    cJSON_ArrayForEach(c, root)
        extract_tgi_one(st, c);
}

static void extract(struct tt_stream *st, const cJSON *root, const char *evname)
{
    switch (st->api) {
    case TT_API_OPENAI_CHAT:
    case TT_API_OPENAI_COMPLETIONS:
        extract_openai(st, root);
        break;
    case TT_API_OPENAI_RESPONSES:
        extract_responses(st, root, evname);
        break;
    case TT_API_ANTHROPIC:
        extract_anthropic(st, root, evname);
        break;
    case TT_API_GEMINI:
        extract_gemini(st, root);
        break;
    case TT_API_OLLAMA:
        extract_ollama(st, root);
        break;
    case TT_API_TGI:
        extract_tgi(st, root);
        break;
    default:
        break;
    }
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
    int is_error_event = name != NULL && strcmp(name, "error") == 0;

    r->s.events++;
    if (r->ts[TT_TS_FIRST_EVENT] == 0)
        r->ts[TT_TS_FIRST_EVENT] = st->now;
    if (st->api == TT_API_OTHER)
        return;
    if (is_done_marker(data, len)) {
        if (st->api == TT_API_OPENAI_CHAT || st->api == TT_API_OPENAI_COMPLETIONS)
            r->s.terminal = 1;
        return;
    }
    root = tt_json_parse(data, len);
    if (root == NULL) {
        r->s.parse_errors++;
        if (is_error_event && !r->s.error) {
            /* an error event whose data is plain text */
            char msg[sizeof(r->s.error_message)];
            size_t n = len < sizeof(msg) - 1 ? len : sizeof(msg) - 1;
            memcpy(msg, data, n);
            msg[n] = '\0';
            r->s.error = 1;
            copy_str(r->s.error_message, sizeof(r->s.error_message), msg);
        }
        return;
    }
    ev_begin(st);
    if (is_error_event) {
        const cJSON *e = jget(root, "error");
        if (e != NULL && !cJSON_IsNull(e))
            note_error(st, e, root);
        else
            note_error(st, root, root);     /* the event is the error */
    }
    extract(st, root, name && name[0] ? name : NULL);
    ev_end(st);
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

static enum framing choose_framing(enum tt_api api, const char *content_type,
                                   int req_stream)
{
    char mt[64];
    size_t n;

    media_type(content_type, mt, sizeof(mt));
    n = strlen(mt);
    if (strcmp(mt, "text/event-stream") == 0)
        return FR_SSE;
    if (api == TT_API_OTHER)
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
        return api == TT_API_OLLAMA ? FR_NDJSON : FR_SSE;
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
    st->api = (unsigned)api < TT_API__COUNT ? api : TT_API_OTHER;
    st->think = think;
    st->fr = choose_framing(st->api, content_type, r->stream);
    st->phase = PH_PRE;
    tt_sse_init(&st->sse, EVENT_MAX);
    tt_ndjson_init(&st->nd, EVENT_MAX);
    r->s.streaming = streaming(st);
    return st;
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

static int has_marker(enum tt_api api)
{
    return api == TT_API_OPENAI_CHAT || api == TT_API_OPENAI_COMPLETIONS ||
           api == TT_API_OPENAI_RESPONSES || api == TT_API_ANTHROPIC ||
           api == TT_API_OLLAMA;
}

static void parse_body(struct tt_stream *st)
{
    const cJSON *root;

    if (st->body_over || st->body_len == 0)
        return;
    root = tt_json_parse(st->body, st->body_len);
    if (root == NULL) {
        st->r->s.parse_errors++;
    } else {
        ev_begin(st);
        extract(st, root, NULL);
        ev_end(st);
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
    flush_carry(st);
    commit_pending(st);
    s->parse_errors += st->sse.oversize + st->nd.oversize;

    if (complete && (!has_marker(st->api) || !streaming(st)))
        s->terminal = 1;

    if (s->error) {
        int code = st->err_code;
        if (code == 0)
            code = r->status >= 400 ? r->status : 500;
        tt_request_set_error(r, code,
                             streaming(st) ? "stream_error" : "upstream_error",
                             s->error_message[0] ? s->error_message :
                             s->error_type[0] ? s->error_type :
                             "error object in the response body");
    } else if (!complete || (streaming(st) && has_marker(st->api) &&
                             !s->terminal)) {
        tt_request_set_error(r, 502, "truncated",
                             "stream ended without its terminal marker");
    }
}

void tt_stream_free(struct tt_stream *st)
{
    if (st == NULL)
        return;
    tt_sse_free(&st->sse);
    tt_ndjson_free(&st->nd);
    free(st->body);
    free(st);
}
