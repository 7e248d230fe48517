/*
 * The API dialects tokentap-sim speaks, and the one table that lists them
 * (sim_dialects[] at the bottom).  A dialect is its routes, its streaming
 * Content-Type and a set of emitters that turn the schedule's moments
 * (head, token event, finish, usage, error, terminal) into that API's
 * events; plus the one-JSON body of its non-streaming form.  Timing, faults
 * and framing are not here: sim/resp.c calls the emitters at the right
 * instants and wraps each event in a chunk.
 *
 * Adding a dialect: write its emitters below (copy the closest one), add one
 * entry to sim_dialects[] (an API new to the project first gets its enum
 * tt_api value and name in metrics/request.h and .c), and a line to
 * docs/simulator.md.
 *
 * Text is checkable by counting: answer tokens are "tok0 ", "tok1 ", ...,
 * reasoning tokens "think0 ", "think1 ", ...  Dialects without a reasoning
 * field carry reasoning inline as "<think>think0 ... </think>".
 *
 * Events leave through g->event, which sim/resp.c sets (chunk framing, or
 * one WebSocket message); this file calls no other file of the sim but the
 * ground (sim/base.c).  Over a WebSocket (sim/ws.c) the same emitters run;
 * put() then hands over the event's JSON alone (no "event:"/"data:" lines),
 * one message each.  openai.realtime exists only there.
 *
 * A dialect's name is the project's: the table holds enum tt_api and the
 * name is tt_api_name()'s (metrics/request.c), the one list of API names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "sim/sim.h"

/* ---- framing ------------------------------------------------------------ */

enum frame {
    FR_SSE,          /* [event: X\n]data: JSON\n\n */
    FR_SSE_NOSPACE,  /* data:JSON\n\n (TGI) */
    FR_SSE_CRLF,     /* data: JSON\r\n\r\n (Gemini) */
    FR_NDJSON        /* JSON\n (Ollama) */
};

/* queue <o> as one event and free it */
static void put(struct sim_gen *g, enum frame f, const char *event, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    struct evbuffer *b;
    size_t n;

    cJSON_Delete(o);
    if (s && g->ws) {
        /* a WebSocket message is the event: its JSON, no framing */
        g->event(g->event_arg, s, strlen(s));
        free(s);
        return;
    }
    b = evbuffer_new();
    if (!s || !b) {
        free(s);
        if (b)
            evbuffer_free(b);
        return;
    }
    /* stamp: the send time, CLOCK_MONOTONIC ns, as an SSE comment line that
     * every SSE reader skips; a load generator on this host reads it for a
     * true one-way delay per event (bench/sse_load.c) */
    if (g->o->stamp && f != FR_NDJSON)
        evbuffer_add_printf(b, ": t=%llu%s", (unsigned long long)sim_now_ns(),
                            f == FR_SSE_CRLF ? "\r\n" : "\n");
    switch (f) {
    case FR_SSE:
        if (event)
            evbuffer_add_printf(b, "event: %s\n", event);
        evbuffer_add_printf(b, "data: %s\n\n", s);
        break;
    case FR_SSE_NOSPACE:
        evbuffer_add_printf(b, "data:%s\n\n", s);
        break;
    case FR_SSE_CRLF:
        evbuffer_add_printf(b, "data: %s\r\n\r\n", s);
        break;
    case FR_NDJSON:
        evbuffer_add_printf(b, "%s\n", s);
        break;
    }
    free(s);
    n = evbuffer_get_length(b);
    g->event(g->event_arg, (const char *)evbuffer_pullup(b, -1), n);
    evbuffer_free(b);
}

/* a framed marker ("data: [DONE]"): SSE only, nothing over a WebSocket */
static void put_raw(struct sim_gen *g, const char *s)
{
    if (!g->ws)
        g->event(g->event_arg, s, strlen(s));
}

/* <text> of a reasoning event with "<think>" before the first reasoning
 * token and "</think>" after the last (r_done already counts this event) */
static char *think_wrap(const struct sim_gen *g, const char *text, int ntok)
{
    int first = g->r_done - ntok == 0;
    int last = g->r_done == g->o->reasoning_tokens;
    size_t n = strlen(text) + 20;
    char *s = malloc(n);

    if (s)
        snprintf(s, n, "%s%s%s", first ? "<think>" : "", text,
                 last ? "</think>" : "");
    return s;
}

/* whole texts for non-streaming bodies and final events */
static char *all_answer(const struct sim_gen *g)
{
    return sim_words_str(0, 0, g->a_done);
}

static char *all_reasoning(const struct sim_gen *g)
{
    return sim_words_str(1, 0, g->r_done);
}

/* reasoning inline with think tags, then the answer */
static char *all_inline(const struct sim_gen *g)
{
    char *r = all_reasoning(g), *a = all_answer(g), *s;
    size_t n = (r ? strlen(r) : 0) + (a ? strlen(a) : 0) + 20;

    s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s%s", g->r_done ? "<think>" : "", r ? r : "",
                 g->r_done ? "</think>" : "", a ? a : "");
    free(r);
    free(a);
    return s;
}

static void add_owned_string(cJSON *o, const char *key, char *s)
{
    cJSON_AddStringToObject(o, key, s ? s : "");
    free(s);
}

static const char *const mid_error = "simulated mid-stream error";

/* llama.cpp's "timings" object for the schedule: prompt_ms = ttft_ms (the
 * simulator's "prefill"), predicted_ms = gap_ms per token after the first,
 * cache_n = cached_tokens of prompt_tokens */
static void lc_timings(const struct sim_gen *g, cJSON *o)
{
    int n = g->r_done + g->a_done, cached = g->o->cached_tokens;
    cJSON *t;

    if (cached > g->o->prompt_tokens)
        cached = g->o->prompt_tokens;
    t = cJSON_AddObjectToObject(o, "timings");
    cJSON_AddNumberToObject(t, "cache_n", cached);
    cJSON_AddNumberToObject(t, "prompt_n", g->o->prompt_tokens - cached);
    cJSON_AddNumberToObject(t, "prompt_ms", g->o->ttft_ms);
    cJSON_AddNumberToObject(t, "predicted_n", n);
    cJSON_AddNumberToObject(t, "predicted_ms", (double)g->o->gap_ms * (n > 1 ? n - 1 : 0));
}

/* ---- openai.chat and openai.completions -------------------------------------- */

static cJSON *oa_usage(const struct sim_gen *g)
{
    cJSON *u = cJSON_CreateObject(), *d;
    int out = g->r_done + g->a_done;

    cJSON_AddNumberToObject(u, "prompt_tokens", g->o->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", out);
    cJSON_AddNumberToObject(u, "total_tokens", g->o->prompt_tokens + out);
    d = cJSON_AddObjectToObject(u, "completion_tokens_details");
    cJSON_AddNumberToObject(d, "reasoning_tokens", g->r_done);
    if (g->o->cached_tokens > 0) {
        d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
        cJSON_AddNumberToObject(d, "cached_tokens", g->o->cached_tokens);
    }
    return u;
}

/* a chunk of <object> with one choice (returned for filling) or none */
static cJSON *oa_chunk(const struct sim_gen *g, const char *object,
                       const char *idprefix, cJSON **choice)
{
    cJSON *o = cJSON_CreateObject(), *ch;
    char id[80];

    snprintf(id, sizeof(id), "%s%s", idprefix, g->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)g->created);
    cJSON_AddStringToObject(o, "model", g->model);
    ch = cJSON_AddArrayToObject(o, "choices");
    if (choice) {
        *choice = cJSON_CreateObject();
        cJSON_AddNumberToObject(*choice, "index", 0);
        cJSON_AddItemToArray(ch, *choice);
    }
    return o;
}

static int chat_think_tags(const struct sim_gen *g)
{
    return g->o->rfield == SIM_RF_THINK_TAGS;
}

static void chat_head(struct sim_gen *g)
{
    cJSON *ch, *o, *d;

    if (!g->o->role_chunk)
        return;
    o = oa_chunk(g, "chat.completion.chunk", "chatcmpl-", &ch);
    d = cJSON_AddObjectToObject(ch, "delta");
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddNullToObject(ch, "finish_reason");
    put(g, FR_SSE, NULL, o);
    g->block = -1;   /* role sent */
}

static void chat_token(struct sim_gen *g, int reasoning, const char *text,
                       int ntok, int last)
{
    cJSON *ch, *o = oa_chunk(g, "chat.completion.chunk", "chatcmpl-", &ch);
    cJSON *d = cJSON_AddObjectToObject(ch, "delta");
    (void)last;

    if (g->block == 0)
        cJSON_AddStringToObject(d, "role", "assistant");   /* no role chunk */
    g->block = reasoning ? 1 : 2;
    if (!reasoning)
        cJSON_AddStringToObject(d, "content", text);
    else if (chat_think_tags(g))
        add_owned_string(d, "content", think_wrap(g, text, ntok));
    else
        cJSON_AddStringToObject(d, g->o->rfield == SIM_RF_REASONING ?
                                "reasoning" : "reasoning_content", text);
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddNullToObject(ch, "finish_reason");
    put(g, FR_SSE, NULL, o);
}

static void chat_finish(struct sim_gen *g)
{
    cJSON *ch, *o = oa_chunk(g, "chat.completion.chunk", "chatcmpl-", &ch);
    cJSON_AddObjectToObject(ch, "delta");
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", "stop");
    put(g, FR_SSE, NULL, o);
}

static void chat_usage(struct sim_gen *g)
{
    cJSON *o = oa_chunk(g, "chat.completion.chunk", "chatcmpl-", NULL);
    cJSON_AddItemToObject(o, "usage", oa_usage(g));
    if (g->o->timings)
        lc_timings(g, o);
    put(g, FR_SSE, NULL, o);
}

static void oa_error(struct sim_gen *g)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", mid_error);
    cJSON_AddStringToObject(e, "type", "server_error");
    cJSON_AddStringToObject(e, "code", "sim_error");
    put(g, FR_SSE, NULL, o);
}

static void oa_done(struct sim_gen *g)
{
    put_raw(g, "data: [DONE]\n\n");
}

static cJSON *chat_whole(struct sim_gen *g)
{
    cJSON *ch, *o = oa_chunk(g, "chat.completion", "chatcmpl-", &ch);
    cJSON *m = cJSON_AddObjectToObject(ch, "message");

    cJSON_AddStringToObject(m, "role", "assistant");
    if (chat_think_tags(g)) {
        add_owned_string(m, "content", all_inline(g));
    } else {
        add_owned_string(m, "content", all_answer(g));
        if (g->r_done)
            add_owned_string(m, g->o->rfield == SIM_RF_REASONING ?
                             "reasoning" : "reasoning_content", all_reasoning(g));
    }
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", "stop");
    cJSON_AddItemToObject(o, "usage", oa_usage(g));
    return o;
}

static void cmpl_token(struct sim_gen *g, int reasoning, const char *text,
                       int ntok, int last)
{
    cJSON *ch, *o = oa_chunk(g, "text_completion", "cmpl-", &ch);
    (void)last;

    if (reasoning)
        add_owned_string(ch, "text", think_wrap(g, text, ntok));
    else
        cJSON_AddStringToObject(ch, "text", text);
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddNullToObject(ch, "finish_reason");
    put(g, FR_SSE, NULL, o);
}

static void cmpl_finish(struct sim_gen *g)
{
    cJSON *ch, *o = oa_chunk(g, "text_completion", "cmpl-", &ch);
    cJSON_AddStringToObject(ch, "text", "");
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", "stop");
    put(g, FR_SSE, NULL, o);
}

static void cmpl_usage(struct sim_gen *g)
{
    cJSON *o = oa_chunk(g, "text_completion", "cmpl-", NULL);
    cJSON_AddItemToObject(o, "usage", oa_usage(g));
    if (g->o->timings)
        lc_timings(g, o);
    put(g, FR_SSE, NULL, o);
}

static cJSON *cmpl_whole(struct sim_gen *g)
{
    cJSON *ch, *o = oa_chunk(g, "text_completion", "cmpl-", &ch);
    add_owned_string(ch, "text", all_inline(g));
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", "stop");
    cJSON_AddItemToObject(o, "usage", oa_usage(g));
    return o;
}

/* ---- openai.responses ------------------------------------------------------------ */

static int resp_summary(const struct sim_gen *g)
{
    return g->o->rfield == SIM_RF_SUMMARY;
}

/* an event object {"type":<type>,"sequence_number":n} */
static cJSON *re_ev(struct sim_gen *g, const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddNumberToObject(o, "sequence_number", g->seq++);
    return o;
}

static void re_put(struct sim_gen *g, cJSON *o)
{
    char type[80];
    snprintf(type, sizeof(type), "%s", cJSON_GetStringValue(cJSON_GetObjectItem(o, "type")));
    put(g, FR_SSE, type, o);
}

static void re_item_id(const struct sim_gen *g, int reasoning, char *buf, size_t n)
{
    snprintf(buf, n, "%s_%s", reasoning ? "rs" : "msg", g->id);
}

static cJSON *re_reasoning_item(const struct sim_gen *g, int done)
{
    cJSON *it = cJSON_CreateObject(), *arr;
    char id[80];

    re_item_id(g, 1, id, sizeof(id));
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "reasoning");
    arr = cJSON_AddArrayToObject(it, "summary");
    if (done && resp_summary(g)) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "summary_text");
        add_owned_string(p, "text", all_reasoning(g));
        cJSON_AddItemToArray(arr, p);
    }
    if (done && !resp_summary(g)) {
        cJSON *p = cJSON_CreateObject();
        arr = cJSON_AddArrayToObject(it, "content");
        cJSON_AddStringToObject(p, "type", "reasoning_text");
        add_owned_string(p, "text", all_reasoning(g));
        cJSON_AddItemToArray(arr, p);
    }
    return it;
}

static cJSON *re_message_item(const struct sim_gen *g, int done)
{
    cJSON *it = cJSON_CreateObject(), *arr;
    char id[80];

    re_item_id(g, 0, id, sizeof(id));
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    cJSON_AddStringToObject(it, "role", "assistant");
    arr = cJSON_AddArrayToObject(it, "content");
    if (done) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "output_text");
        add_owned_string(p, "text", all_answer(g));
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddItemToArray(arr, p);
    }
    return it;
}

/* the response object; <status> "in_progress", "completed" or "failed" */
static cJSON *re_response(const struct sim_gen *g, const char *status)
{
    cJSON *r = cJSON_CreateObject(), *out;
    char id[80];

    snprintf(id, sizeof(id), "resp_%s", g->id);
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddStringToObject(r, "object", "response");
    cJSON_AddNumberToObject(r, "created_at", (double)g->created);
    cJSON_AddStringToObject(r, "status", status);
    cJSON_AddStringToObject(r, "model", g->model);
    out = cJSON_AddArrayToObject(r, "output");
    if (!strcmp(status, "completed")) {
        cJSON *u, *d;
        if (g->r_done)
            cJSON_AddItemToArray(out, re_reasoning_item(g, 1));
        cJSON_AddItemToArray(out, re_message_item(g, 1));
        u = cJSON_AddObjectToObject(r, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", g->o->prompt_tokens);
        d = cJSON_AddObjectToObject(u, "input_tokens_details");
        cJSON_AddNumberToObject(d, "cached_tokens", g->o->cached_tokens);
        cJSON_AddNumberToObject(u, "output_tokens", g->r_done + g->a_done);
        d = cJSON_AddObjectToObject(u, "output_tokens_details");
        cJSON_AddNumberToObject(d, "reasoning_tokens", g->r_done);
        cJSON_AddNumberToObject(u, "total_tokens",
                                g->o->prompt_tokens + g->r_done + g->a_done);
    } else {
        cJSON_AddNullToObject(r, "usage");
    }
    return r;
}

static void re_head(struct sim_gen *g)
{
    cJSON *o = re_ev(g, "response.created");
    cJSON_AddItemToObject(o, "response", re_response(g, "in_progress"));
    re_put(g, o);
    o = re_ev(g, "response.in_progress");
    cJSON_AddItemToObject(o, "response", re_response(g, "in_progress"));
    re_put(g, o);
}

/* item-scoped event with item_id and output_index of the open block */
static cJSON *re_item_ev(struct sim_gen *g, const char *type)
{
    cJSON *o = re_ev(g, type);
    char id[80];

    re_item_id(g, g->block == 1, id, sizeof(id));
    cJSON_AddStringToObject(o, "item_id", id);
    cJSON_AddNumberToObject(o, "output_index", g->nblocks - 1);
    return o;
}

static void re_close_block(struct sim_gen *g)
{
    cJSON *o;

    if (g->block == 1) {
        if (resp_summary(g)) {
            o = re_item_ev(g, "response.reasoning_summary_text.done");
            cJSON_AddNumberToObject(o, "summary_index", 0);
        } else {
            o = re_item_ev(g, "response.reasoning_text.done");
            cJSON_AddNumberToObject(o, "content_index", 0);
        }
        add_owned_string(o, "text", all_reasoning(g));
        re_put(g, o);
        o = re_ev(g, "response.output_item.done");
        cJSON_AddNumberToObject(o, "output_index", g->nblocks - 1);
        cJSON_AddItemToObject(o, "item", re_reasoning_item(g, 1));
        re_put(g, o);
    } else if (g->block == 2) {
        cJSON *part;
        o = re_item_ev(g, "response.output_text.done");
        cJSON_AddNumberToObject(o, "content_index", 0);
        add_owned_string(o, "text", all_answer(g));
        re_put(g, o);
        o = re_item_ev(g, "response.content_part.done");
        cJSON_AddNumberToObject(o, "content_index", 0);
        part = cJSON_AddObjectToObject(o, "part");
        cJSON_AddStringToObject(part, "type", "output_text");
        add_owned_string(part, "text", all_answer(g));
        cJSON_AddArrayToObject(part, "annotations");
        re_put(g, o);
        o = re_ev(g, "response.output_item.done");
        cJSON_AddNumberToObject(o, "output_index", g->nblocks - 1);
        cJSON_AddItemToObject(o, "item", re_message_item(g, 1));
        re_put(g, o);
    }
    g->block = 0;
}

static void re_token(struct sim_gen *g, int reasoning, const char *text,
                     int ntok, int last)
{
    int want = reasoning ? 1 : 2;
    cJSON *o;
    (void)ntok; (void)last;

    if (g->block != want) {
        re_close_block(g);
        g->block = want;
        g->nblocks++;
        o = re_ev(g, "response.output_item.added");
        cJSON_AddNumberToObject(o, "output_index", g->nblocks - 1);
        cJSON_AddItemToObject(o, "item", reasoning ? re_reasoning_item(g, 0)
                                                   : re_message_item(g, 0));
        re_put(g, o);
        if (reasoning && resp_summary(g)) {
            cJSON *part;
            o = re_item_ev(g, "response.reasoning_summary_part.added");
            cJSON_AddNumberToObject(o, "summary_index", 0);
            part = cJSON_AddObjectToObject(o, "part");
            cJSON_AddStringToObject(part, "type", "summary_text");
            cJSON_AddStringToObject(part, "text", "");
            re_put(g, o);
        } else if (!reasoning) {
            cJSON *part;
            o = re_item_ev(g, "response.content_part.added");
            cJSON_AddNumberToObject(o, "content_index", 0);
            part = cJSON_AddObjectToObject(o, "part");
            cJSON_AddStringToObject(part, "type", "output_text");
            cJSON_AddStringToObject(part, "text", "");
            cJSON_AddArrayToObject(part, "annotations");
            re_put(g, o);
        }
    }
    if (!reasoning) {
        o = re_item_ev(g, "response.output_text.delta");
        cJSON_AddNumberToObject(o, "content_index", 0);
    } else if (resp_summary(g)) {
        o = re_item_ev(g, "response.reasoning_summary_text.delta");
        cJSON_AddNumberToObject(o, "summary_index", 0);
    } else {
        o = re_item_ev(g, "response.reasoning_text.delta");
        cJSON_AddNumberToObject(o, "content_index", 0);
    }
    cJSON_AddStringToObject(o, "delta", text);
    re_put(g, o);
}

static void re_finish(struct sim_gen *g)
{
    re_close_block(g);
}

static void re_error(struct sim_gen *g)
{
    cJSON *o = re_ev(g, "response.failed"), *r = re_response(g, "failed");
    cJSON *e = cJSON_AddObjectToObject(r, "error");
    cJSON_AddStringToObject(e, "code", "server_error");
    cJSON_AddStringToObject(e, "message", mid_error);
    cJSON_AddItemToObject(o, "response", r);
    re_put(g, o);
}

static void re_terminal(struct sim_gen *g)
{
    cJSON *o = re_ev(g, "response.completed");
    cJSON_AddItemToObject(o, "response", re_response(g, "completed"));
    re_put(g, o);
}

static cJSON *re_whole(struct sim_gen *g)
{
    return re_response(g, "completed");
}

/* ---- anthropic.messages -------------------------------------------------------- */

static cJSON *an_ev(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void an_put(struct sim_gen *g, cJSON *o)
{
    char type[64];
    snprintf(type, sizeof(type), "%s", cJSON_GetStringValue(cJSON_GetObjectItem(o, "type")));
    put(g, FR_SSE, type, o);
}

static void an_head(struct sim_gen *g)
{
    cJSON *o = an_ev("message_start"), *m = cJSON_AddObjectToObject(o, "message");
    cJSON *u;
    char id[80];

    snprintf(id, sizeof(id), "msg_%s", g->id);
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", g->model);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    u = cJSON_AddObjectToObject(m, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", g->o->prompt_tokens);
    cJSON_AddNumberToObject(u, "output_tokens", 1);
    an_put(g, o);
    o = an_ev("ping");
    an_put(g, o);
}

static void an_close_block(struct sim_gen *g)
{
    cJSON *o;

    if (g->block == 0)
        return;
    if (g->block == 1) {
        cJSON *d;
        o = an_ev("content_block_delta");
        cJSON_AddNumberToObject(o, "index", g->nblocks - 1);
        d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "type", "signature_delta");
        cJSON_AddStringToObject(d, "signature", "c2ltdWxhdGVk");
        an_put(g, o);
    }
    o = an_ev("content_block_stop");
    cJSON_AddNumberToObject(o, "index", g->nblocks - 1);
    an_put(g, o);
    g->block = 0;
}

static void an_token(struct sim_gen *g, int reasoning, const char *text,
                     int ntok, int last)
{
    int want = reasoning ? 1 : 2;
    cJSON *o, *d;
    (void)ntok; (void)last;

    if (g->block != want) {
        cJSON *cb;
        an_close_block(g);
        g->block = want;
        g->nblocks++;
        o = an_ev("content_block_start");
        cJSON_AddNumberToObject(o, "index", g->nblocks - 1);
        cb = cJSON_AddObjectToObject(o, "content_block");
        if (reasoning) {
            cJSON_AddStringToObject(cb, "type", "thinking");
            cJSON_AddStringToObject(cb, "thinking", "");
            cJSON_AddStringToObject(cb, "signature", "");
        } else {
            cJSON_AddStringToObject(cb, "type", "text");
            cJSON_AddStringToObject(cb, "text", "");
        }
        an_put(g, o);
    }
    o = an_ev("content_block_delta");
    cJSON_AddNumberToObject(o, "index", g->nblocks - 1);
    d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", reasoning ? "thinking_delta" : "text_delta");
    cJSON_AddStringToObject(d, reasoning ? "thinking" : "text", text);
    an_put(g, o);
}

static void an_finish(struct sim_gen *g)
{
    cJSON *o, *d, *u;

    an_close_block(g);
    o = an_ev("message_delta");
    d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "stop_reason", "end_turn");
    cJSON_AddNullToObject(d, "stop_sequence");
    u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "output_tokens", g->r_done + g->a_done);
    an_put(g, o);
}

static void an_error(struct sim_gen *g)
{
    cJSON *o = an_ev("error"), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "type", "overloaded_error");
    cJSON_AddStringToObject(e, "message", mid_error);
    an_put(g, o);
}

static void an_terminal(struct sim_gen *g)
{
    an_put(g, an_ev("message_stop"));
}

static cJSON *an_whole(struct sim_gen *g)
{
    cJSON *o = an_ev("message"), *c, *b, *u;
    char id[80];

    snprintf(id, sizeof(id), "msg_%s", g->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", g->model);
    c = cJSON_AddArrayToObject(o, "content");
    if (g->r_done) {
        b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        add_owned_string(b, "thinking", all_reasoning(g));
        cJSON_AddStringToObject(b, "signature", "c2ltdWxhdGVk");
        cJSON_AddItemToArray(c, b);
    }
    b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "text");
    add_owned_string(b, "text", all_answer(g));
    cJSON_AddItemToArray(c, b);
    cJSON_AddStringToObject(o, "stop_reason", "end_turn");
    cJSON_AddNullToObject(o, "stop_sequence");
    u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", g->o->prompt_tokens);
    cJSON_AddNumberToObject(u, "output_tokens", g->r_done + g->a_done);
    return o;
}

/* ---- gemini ---------------------------------------------------------------------- */

static cJSON *ge_usage(const struct sim_gen *g)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "promptTokenCount", g->o->prompt_tokens);
    if (g->a_done)
        cJSON_AddNumberToObject(u, "candidatesTokenCount", g->a_done);
    cJSON_AddNumberToObject(u, "totalTokenCount",
                            g->o->prompt_tokens + g->a_done + g->r_done);
    if (g->r_done)
        cJSON_AddNumberToObject(u, "thoughtsTokenCount", g->r_done);
    return u;
}

/* {"candidates":[{"content":{"parts":[],"role":"model"},..}],..}; <parts> out */
static cJSON *ge_chunk(const struct sim_gen *g, int finish, cJSON **parts)
{
    cJSON *o = cJSON_CreateObject(), *cands = cJSON_AddArrayToObject(o, "candidates");
    cJSON *cand = cJSON_CreateObject(), *content;

    cJSON_AddItemToArray(cands, cand);
    content = cJSON_AddObjectToObject(cand, "content");
    *parts = cJSON_AddArrayToObject(content, "parts");
    cJSON_AddStringToObject(content, "role", "model");
    if (finish)
        cJSON_AddStringToObject(cand, "finishReason", "STOP");
    cJSON_AddNumberToObject(cand, "index", 0);
    cJSON_AddItemToObject(o, "usageMetadata", ge_usage(g));
    cJSON_AddStringToObject(o, "modelVersion", g->model);
    cJSON_AddStringToObject(o, "responseId", g->id);
    return o;
}

static void ge_part(cJSON *parts, const char *text, int thought)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "text", text);
    if (thought)
        cJSON_AddTrueToObject(p, "thought");
    cJSON_AddItemToArray(parts, p);
}

static void ge_token(struct sim_gen *g, int reasoning, const char *text,
                     int ntok, int last)
{
    cJSON *parts, *o = ge_chunk(g, last, &parts);
    (void)ntok;

    ge_part(parts, text, reasoning);
    g->finished_inline = last;
    put(g, FR_SSE_CRLF, NULL, o);
}

static void ge_finish(struct sim_gen *g)
{
    cJSON *parts, *o;

    if (g->finished_inline)
        return;
    o = ge_chunk(g, 1, &parts);
    ge_part(parts, "", 0);
    put(g, FR_SSE_CRLF, NULL, o);
}

static void ge_error(struct sim_gen *g)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddNumberToObject(e, "code", 500);
    cJSON_AddStringToObject(e, "message", mid_error);
    cJSON_AddStringToObject(e, "status", "INTERNAL");
    put(g, FR_SSE_CRLF, NULL, o);
}

static cJSON *ge_whole(struct sim_gen *g)
{
    cJSON *parts, *o = ge_chunk(g, 1, &parts);
    char *s;

    if (g->r_done) {
        s = all_reasoning(g);
        ge_part(parts, s ? s : "", 1);
        free(s);
    }
    s = all_answer(g);
    ge_part(parts, s ? s : "", 0);
    free(s);
    return o;
}

/* ---- ollama (/api/chat and /api/generate) ------------------------------------------ */

static void ol_base(const struct sim_gen *g, cJSON *o)
{
    struct timespec ts;
    struct tm tm;
    char t[48], z[80];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(z, sizeof(z), "%s.%06uZ", t,
             (unsigned)((unsigned long)ts.tv_nsec / 1000u % 1000000u));
    cJSON_AddStringToObject(o, "model", g->model);
    cJSON_AddStringToObject(o, "created_at", z);
}

/* text fields of one line: <chat> puts them in "message" */
static void ol_text(const struct sim_gen *g, cJSON *o, int chat,
                    const char *content, const char *thinking)
{
    cJSON *m = o;
    if (chat) {
        m = cJSON_AddObjectToObject(o, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
    }
    cJSON_AddStringToObject(m, chat ? "content" : "response", content);
    if (thinking)
        cJSON_AddStringToObject(m, "thinking", thinking);
    (void)g;
}

static void ol_token(struct sim_gen *g, int chat, int reasoning,
                     const char *text, int ntok)
{
    cJSON *o = cJSON_CreateObject();

    ol_base(g, o);
    if (!reasoning) {
        ol_text(g, o, chat, text, NULL);
    } else if (g->o->rfield == SIM_RF_THINK_TAGS) {
        char *s = think_wrap(g, text, ntok);
        ol_text(g, o, chat, s ? s : "", NULL);
        free(s);
    } else {
        ol_text(g, o, chat, "", text);
    }
    cJSON_AddFalseToObject(o, "done");
    put(g, FR_NDJSON, NULL, o);
}

static void ol_counts(const struct sim_gen *g, cJSON *o)
{
    int out = g->r_done + g->a_done;
    double gap = (double)g->o->gap_ms * 1e6, ttft = (double)g->o->ttft_ms * 1e6;

    cJSON_AddStringToObject(o, "done_reason", "stop");
    cJSON_AddTrueToObject(o, "done");
    cJSON_AddNumberToObject(o, "total_duration", ttft + gap * (out > 0 ? out - 1 : 0));
    cJSON_AddNumberToObject(o, "load_duration", 0);
    cJSON_AddNumberToObject(o, "prompt_eval_count", g->o->prompt_tokens);
    cJSON_AddNumberToObject(o, "prompt_eval_duration", ttft);
    cJSON_AddNumberToObject(o, "eval_count", out);
    cJSON_AddNumberToObject(o, "eval_duration", gap * (out > 0 ? out - 1 : 0));
}

static void ol_terminal(struct sim_gen *g, int chat)
{
    cJSON *o = cJSON_CreateObject();
    ol_base(g, o);
    ol_text(g, o, chat, "", NULL);
    ol_counts(g, o);
    put(g, FR_NDJSON, NULL, o);
}

static cJSON *ol_whole(struct sim_gen *g, int chat)
{
    cJSON *o = cJSON_CreateObject();
    char *a, *r = NULL;

    ol_base(g, o);
    if (g->o->rfield == SIM_RF_THINK_TAGS) {
        a = all_inline(g);
    } else {
        a = all_answer(g);
        r = g->r_done ? all_reasoning(g) : NULL;
    }
    ol_text(g, o, chat, a ? a : "", r);
    free(a);
    free(r);
    ol_counts(g, o);
    return o;
}

static void olc_token(struct sim_gen *g, int reasoning, const char *text,
                      int ntok, int last)
{
    (void)last;
    ol_token(g, 1, reasoning, text, ntok);
}

static void olg_token(struct sim_gen *g, int reasoning, const char *text,
                      int ntok, int last)
{
    (void)last;
    ol_token(g, 0, reasoning, text, ntok);
}

static void olc_terminal(struct sim_gen *g) { ol_terminal(g, 1); }
static void olg_terminal(struct sim_gen *g) { ol_terminal(g, 0); }
static cJSON *olc_whole(struct sim_gen *g) { return ol_whole(g, 1); }
static cJSON *olg_whole(struct sim_gen *g) { return ol_whole(g, 0); }

static void ol_error(struct sim_gen *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", mid_error);
    put(g, FR_NDJSON, NULL, o);
}

/* ---- tgi (/generate_stream and /generate) -------------------------------------------- */

static cJSON *tgi_details(const struct sim_gen *g)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "finish_reason", "eos_token");
    cJSON_AddNumberToObject(d, "generated_tokens", g->r_done + g->a_done);
    cJSON_AddNullToObject(d, "seed");
    return d;
}

static void tgi_event(struct sim_gen *g, const char *text, int special, int last)
{
    cJSON *o = cJSON_CreateObject(), *t;
    int idx = g->r_done + g->a_done;

    cJSON_AddNumberToObject(o, "index", idx);
    t = cJSON_AddObjectToObject(o, "token");
    cJSON_AddNumberToObject(t, "id", 1000 + idx);
    cJSON_AddStringToObject(t, "text", text);
    cJSON_AddNumberToObject(t, "logprob", -0.25);
    cJSON_AddBoolToObject(t, "special", special);
    if (last) {
        add_owned_string(o, "generated_text", all_inline(g));
        cJSON_AddItemToObject(o, "details", tgi_details(g));
        g->finished_inline = 1;
    } else {
        cJSON_AddNullToObject(o, "generated_text");
        cJSON_AddNullToObject(o, "details");
    }
    put(g, FR_SSE_NOSPACE, NULL, o);
}

static void tgi_token(struct sim_gen *g, int reasoning, const char *text,
                      int ntok, int last)
{
    if (reasoning) {
        char *s = think_wrap(g, text, ntok);
        tgi_event(g, s ? s : "", 0, last);
        free(s);
    } else {
        tgi_event(g, text, 0, last);
    }
}

static void tgi_finish(struct sim_gen *g)
{
    if (!g->finished_inline)
        tgi_event(g, "", 1, 1);   /* nothing generated: an eos event ends it */
}

static void tgi_error(struct sim_gen *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", mid_error);
    cJSON_AddStringToObject(o, "error_type", "generation");
    put(g, FR_SSE_NOSPACE, NULL, o);
}

static cJSON *tgi_whole(struct sim_gen *g)
{
    cJSON *o = cJSON_CreateObject();
    add_owned_string(o, "generated_text", all_inline(g));
    cJSON_AddItemToObject(o, "details", tgi_details(g));
    return o;
}

/* ---- llamacpp.completion (/completion, /completions, /infill) -------------------------- */

/*
 * llama.cpp's native API: {"index":0,"content":..,"stop":false,
 * "tokens_predicted":n,"tokens_evaluated":p} per token event, then one
 * stop:true summary with stop_type and timings; no [DONE].  Reasoning is
 * inline (<think> tags).  The timings report the schedule: prompt_ms =
 * ttft_ms (see lc_timings()).
 */
static cJSON *lc_event(const struct sim_gen *g, const char *content, int stop)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "index", 0);
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddArrayToObject(o, "tokens");
    cJSON_AddBoolToObject(o, "stop", stop);
    cJSON_AddNumberToObject(o, "id_slot", stop ? 0 : -1);
    if (stop)
        cJSON_AddStringToObject(o, "model", g->model);
    cJSON_AddNumberToObject(o, "tokens_predicted", g->r_done + g->a_done);
    cJSON_AddNumberToObject(o, "tokens_evaluated", g->o->prompt_tokens);
    return o;
}

static void lc_summary(const struct sim_gen *g, cJSON *o)
{
    cJSON_AddStringToObject(o, "stop_type", "eos");
    cJSON_AddNumberToObject(o, "tokens_cached", g->o->prompt_tokens + g->r_done + g->a_done);
    lc_timings(g, o);
}

static void lc_token(struct sim_gen *g, int reasoning, const char *text,
                     int ntok, int last)
{
    char *s = reasoning ? think_wrap(g, text, ntok) : NULL;

    (void)last;
    put(g, FR_SSE, NULL, lc_event(g, reasoning ? (s ? s : "") : text, 0));
    free(s);
}

static void lc_terminal(struct sim_gen *g)
{
    cJSON *o = lc_event(g, "", 1);

    lc_summary(g, o);
    put(g, FR_SSE, NULL, o);
}

static void lc_error(struct sim_gen *g)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddNumberToObject(e, "code", 500);
    cJSON_AddStringToObject(e, "message", mid_error);
    cJSON_AddStringToObject(e, "type", "server_error");
    put(g, FR_SSE, NULL, o);
}

static cJSON *lc_whole(struct sim_gen *g)
{
    char *s = all_inline(g);
    cJSON *o = lc_event(g, s ? s : "", 1);

    free(s);
    lc_summary(g, o);
    return o;
}

/* ---- openai.realtime (WebSocket only: GET /v1/realtime, sim/ws.c) ------------------ */

/*
 * The Realtime API's response events (GA names; the beta's with g->beta):
 *
 *   head          response.created (status in_progress)
 *   first delta   response.output_item.added, response.content_part.added
 *   token event   audio: response.output_audio_transcript.delta
 *                        (beta response.audio_transcript.delta)
 *                 text:  response.output_text.delta (beta response.text.delta)
 *   audio event   response.output_audio.delta (beta response.audio.delta),
 *                 base64 PCM16 24 kHz mono, RT_AUDIO_BYTES per token
 *   finish        response.output_audio.done + ..._transcript.done (or
 *                 response.output_text.done), response.content_part.done,
 *                 response.output_item.done
 *   terminal      response.done, status completed, with usage
 *   error         response.done, status failed (status_details.error)
 *   cancel        response.output_item.done (item incomplete) when an item
 *                 is open, response.done, status cancelled
 *
 * Every server event has an event_id (no sequence_number).  Reasoning
 * tokens are silent (the Realtime API streams no reasoning) and count as
 * output text tokens.  The shapes follow openai-python's types/realtime
 * (GA) and types/beta/realtime.
 */

#define RT_AUDIO_BYTES 480   /* per token: 10 ms of 24 kHz 16-bit mono */

enum rt_item { RT_ITEM_NONE = 0, RT_ITEM_OPEN, RT_ITEM_DONE, RT_ITEM_CUT };

static cJSON *rt_ev(struct sim_gen *g, const char *type)
{
    cJSON *o = cJSON_CreateObject();
    char id[40];

    snprintf(id, sizeof(id), "event_%llu",
             (unsigned long long)++g->rt->event_seq);
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddStringToObject(o, "event_id", id);
    return o;
}

static void rt_put(struct sim_gen *g, cJSON *o)
{
    put(g, FR_SSE, NULL, o);   /* over a WebSocket: the JSON alone */
}

static const char *rt_name(const struct sim_gen *g, const char *ga, const char *beta)
{
    return g->beta ? beta : ga;
}

/* response_id, item_id, output_index, content_index of the one item */
static cJSON *rt_part_ev(struct sim_gen *g, const char *type)
{
    cJSON *o = rt_ev(g, type);
    char id[80];

    snprintf(id, sizeof(id), "resp_%s", g->id);
    cJSON_AddStringToObject(o, "response_id", id);
    snprintf(id, sizeof(id), "item_%s", g->id);
    cJSON_AddStringToObject(o, "item_id", id);
    cJSON_AddNumberToObject(o, "output_index", 0);
    cJSON_AddNumberToObject(o, "content_index", 0);
    return o;
}

/* the assistant message item; <status> in_progress (no content yet),
 * completed or incomplete (the content so far, audio data left out) */
static cJSON *rt_item(const struct sim_gen *g, const char *status)
{
    cJSON *it = cJSON_CreateObject(), *arr;
    char id[80];

    snprintf(id, sizeof(id), "item_%s", g->id);
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "object", "realtime.item");
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "status", status);
    cJSON_AddStringToObject(it, "role", "assistant");
    arr = cJSON_AddArrayToObject(it, "content");
    if (strcmp(status, "in_progress") != 0) {
        cJSON *p = cJSON_CreateObject();
        if (g->audio) {
            cJSON_AddStringToObject(p, "type", g->beta ? "audio" : "output_audio");
            add_owned_string(p, "transcript", all_answer(g));
        } else {
            cJSON_AddStringToObject(p, "type", g->beta ? "text" : "output_text");
            add_owned_string(p, "text", all_answer(g));
        }
        cJSON_AddItemToArray(arr, p);
    }
    return it;
}

static cJSON *rt_usage(const struct sim_gen *g)
{
    const struct sim_opts *o = g->o;
    cJSON *u = cJSON_CreateObject(), *d, *c;
    long long in = o->prompt_tokens, ain = o->input_audio_tokens, cached = o->cached_tokens;
    long long text = g->a_done + g->r_done, audio = 0, ctext;

    if (ain > in)
        ain = in;
    if (cached > in)
        cached = in;
    ctext = cached < in - ain ? cached : in - ain;
    if (g->audio) {
        /* audio_tokens for the whole answer, in step with the audio sent */
        long long all = o->audio_tokens >= 0 ? o->audio_tokens : o->tokens;
        audio = o->tokens ? all * g->au_done / o->tokens : all;
    }
    cJSON_AddNumberToObject(u, "total_tokens", (double)(in + text + audio));
    cJSON_AddNumberToObject(u, "input_tokens", (double)in);
    cJSON_AddNumberToObject(u, "output_tokens", (double)(text + audio));
    d = cJSON_AddObjectToObject(u, "input_token_details");
    cJSON_AddNumberToObject(d, "text_tokens", (double)(in - ain));
    cJSON_AddNumberToObject(d, "audio_tokens", (double)ain);
    cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
    if (!g->beta) {
        cJSON_AddNumberToObject(d, "image_tokens", 0);
        c = cJSON_AddObjectToObject(d, "cached_tokens_details");
        cJSON_AddNumberToObject(c, "text_tokens", (double)ctext);
        cJSON_AddNumberToObject(c, "audio_tokens", (double)(cached - ctext));
        cJSON_AddNumberToObject(c, "image_tokens", 0);
    }
    d = cJSON_AddObjectToObject(u, "output_token_details");
    cJSON_AddNumberToObject(d, "text_tokens", (double)text);
    cJSON_AddNumberToObject(d, "audio_tokens", (double)audio);
    return u;
}

/* the response object; <status> in_progress, completed, cancelled, failed */
static cJSON *rt_response(const struct sim_gen *g, const char *status)
{
    cJSON *r = cJSON_CreateObject(), *m, *out;
    char id[80];

    snprintf(id, sizeof(id), "resp_%s", g->id);
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddStringToObject(r, "object", "realtime.response");
    cJSON_AddStringToObject(r, "status", status);
    if (!strcmp(status, "cancelled")) {
        cJSON *sd = cJSON_AddObjectToObject(r, "status_details");
        cJSON_AddStringToObject(sd, "type", "cancelled");
        cJSON_AddStringToObject(sd, "reason", "client_cancelled");
    } else if (!strcmp(status, "failed")) {
        cJSON *sd = cJSON_AddObjectToObject(r, "status_details"), *e;
        cJSON_AddStringToObject(sd, "type", "failed");
        e = cJSON_AddObjectToObject(sd, "error");
        cJSON_AddStringToObject(e, "type", "server_error");
        cJSON_AddStringToObject(e, "code", "sim_error");
    } else {
        cJSON_AddNullToObject(r, "status_details");
    }
    out = cJSON_AddArrayToObject(r, "output");
    if (g->item_open == RT_ITEM_DONE)
        cJSON_AddItemToArray(out, rt_item(g, "completed"));
    else if (g->item_open == RT_ITEM_OPEN)
        cJSON_AddItemToArray(out, rt_item(g, "in_progress"));
    else if (g->item_open == RT_ITEM_CUT)
        cJSON_AddItemToArray(out, rt_item(g, "incomplete"));
    cJSON_AddStringToObject(r, "conversation_id", g->rt->conv_id);
    m = cJSON_AddArrayToObject(r, g->beta ? "modalities" : "output_modalities");
    if (g->audio)
        cJSON_AddItemToArray(m, cJSON_CreateString("audio"));
    if (!g->audio || g->beta)
        cJSON_AddItemToArray(m, cJSON_CreateString("text"));
    cJSON_AddStringToObject(r, "max_output_tokens", "inf");
    if (g->beta) {
        cJSON_AddStringToObject(r, "voice", "alloy");
        cJSON_AddStringToObject(r, "output_audio_format", "pcm16");
    } else {
        cJSON *a = cJSON_AddObjectToObject(r, "audio");
        cJSON *ao = cJSON_AddObjectToObject(a, "output");
        cJSON *f = cJSON_AddObjectToObject(ao, "format");
        cJSON_AddStringToObject(f, "type", "audio/pcm");
        cJSON_AddNumberToObject(f, "rate", 24000);
        cJSON_AddStringToObject(ao, "voice", "alloy");
    }
    if (!strcmp(status, "in_progress"))
        cJSON_AddNullToObject(r, "usage");
    else
        cJSON_AddItemToObject(r, "usage", rt_usage(g));
    cJSON_AddNullToObject(r, "metadata");
    return r;
}

static void rt_head(struct sim_gen *g)
{
    cJSON *o = rt_ev(g, "response.created");
    cJSON_AddItemToObject(o, "response", rt_response(g, "in_progress"));
    rt_put(g, o);
}

/* the item and its content part, before the first delta of either track */
static void rt_open(struct sim_gen *g)
{
    cJSON *o, *part;
    char id[80];

    if (g->item_open != RT_ITEM_NONE)
        return;
    g->item_open = RT_ITEM_OPEN;
    o = rt_ev(g, "response.output_item.added");
    snprintf(id, sizeof(id), "resp_%s", g->id);
    cJSON_AddStringToObject(o, "response_id", id);
    cJSON_AddNumberToObject(o, "output_index", 0);
    cJSON_AddItemToObject(o, "item", rt_item(g, "in_progress"));
    rt_put(g, o);
    o = rt_part_ev(g, "response.content_part.added");
    part = cJSON_AddObjectToObject(o, "part");
    cJSON_AddStringToObject(part, "type", g->audio ? "audio" : "text");
    cJSON_AddStringToObject(part, g->audio ? "transcript" : "text", "");
    rt_put(g, o);
}

static void rt_token(struct sim_gen *g, int reasoning, const char *text,
                     int ntok, int last)
{
    cJSON *o;
    (void)ntok; (void)last;

    if (reasoning)
        return;   /* thinking is silent here */
    rt_open(g);
    o = rt_part_ev(g, g->audio ? rt_name(g, "response.output_audio_transcript.delta",
                                         "response.audio_transcript.delta")
                               : rt_name(g, "response.output_text.delta",
                                         "response.text.delta"));
    cJSON_AddStringToObject(o, "delta", text);
    rt_put(g, o);
}

static void rt_audio(struct sim_gen *g, int ntok)
{
    size_t n = (size_t)ntok * RT_AUDIO_BYTES, i;
    size_t first = (size_t)(g->au_done - ntok) * RT_AUDIO_BYTES;
    unsigned char *pcm = malloc(n ? n : 1);
    char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    cJSON *o;

    if (!pcm || !b64) {
        free(pcm);
        free(b64);
        return;
    }
    for (i = 0; i < n; i++)   /* any deterministic bytes: a sawtooth */
        pcm[i] = (unsigned char)((first + i) * 7u);
    EVP_EncodeBlock((unsigned char *)b64, pcm, (int)n);
    rt_open(g);
    o = rt_part_ev(g, rt_name(g, "response.output_audio.delta", "response.audio.delta"));
    cJSON_AddStringToObject(o, "delta", b64);
    rt_put(g, o);
    free(pcm);
    free(b64);
}

static void rt_finish(struct sim_gen *g)
{
    cJSON *o, *part;
    char id[80];

    if (g->item_open != RT_ITEM_OPEN)
        return;
    if (g->audio) {
        rt_put(g, rt_part_ev(g, rt_name(g, "response.output_audio.done",
                                        "response.audio.done")));
        o = rt_part_ev(g, rt_name(g, "response.output_audio_transcript.done",
                                  "response.audio_transcript.done"));
        add_owned_string(o, "transcript", all_answer(g));
    } else {
        o = rt_part_ev(g, rt_name(g, "response.output_text.done", "response.text.done"));
        add_owned_string(o, "text", all_answer(g));
    }
    rt_put(g, o);
    o = rt_part_ev(g, "response.content_part.done");
    part = cJSON_AddObjectToObject(o, "part");
    cJSON_AddStringToObject(part, "type", g->audio ? "audio" : "text");
    add_owned_string(part, g->audio ? "transcript" : "text", all_answer(g));
    rt_put(g, o);
    g->item_open = RT_ITEM_DONE;
    o = rt_ev(g, "response.output_item.done");
    snprintf(id, sizeof(id), "resp_%s", g->id);
    cJSON_AddStringToObject(o, "response_id", id);
    cJSON_AddNumberToObject(o, "output_index", 0);
    cJSON_AddItemToObject(o, "item", rt_item(g, "completed"));
    rt_put(g, o);
}

/* response.done with <status>; an open item is closed as incomplete */
static void rt_done(struct sim_gen *g, const char *status)
{
    cJSON *o;

    if (g->item_open == RT_ITEM_OPEN) {
        char id[80];
        g->item_open = RT_ITEM_CUT;
        o = rt_ev(g, "response.output_item.done");
        snprintf(id, sizeof(id), "resp_%s", g->id);
        cJSON_AddStringToObject(o, "response_id", id);
        cJSON_AddNumberToObject(o, "output_index", 0);
        cJSON_AddItemToObject(o, "item", rt_item(g, "incomplete"));
        rt_put(g, o);
    }
    o = rt_ev(g, "response.done");
    cJSON_AddItemToObject(o, "response", rt_response(g, status));
    rt_put(g, o);
}

static void rt_terminal(struct sim_gen *g) { rt_done(g, "completed"); }
static void rt_error(struct sim_gen *g)    { rt_done(g, "failed"); }
static void rt_cancel(struct sim_gen *g)   { rt_done(g, "cancelled"); }

/* ---- THE table: one entry per dialect ------------------------------------------------ */

static const struct sim_dialect sim_dialects[] = {
    { TT_API_OPENAI_CHAT,
      { { "/v1/chat/completions", SIM_STREAM_BODY } },
      "text/event-stream", 0,
      chat_head, chat_token, chat_finish, chat_usage, oa_error, oa_done, chat_whole,
      NULL, NULL },
    { TT_API_OPENAI_COMPLETIONS,
      { { "/v1/completions", SIM_STREAM_BODY } },
      "text/event-stream", 0,
      NULL, cmpl_token, cmpl_finish, cmpl_usage, oa_error, oa_done, cmpl_whole,
      NULL, NULL },
    { TT_API_OPENAI_RESPONSES,
      { { "/v1/responses", SIM_STREAM_BODY } },
      "text/event-stream", 1,
      re_head, re_token, re_finish, NULL, re_error, re_terminal, re_whole,
      NULL, NULL },
    { TT_API_ANTHROPIC,
      { { "/v1/messages", SIM_STREAM_BODY } },
      "text/event-stream", 1,
      an_head, an_token, an_finish, NULL, an_error, an_terminal, an_whole,
      NULL, NULL },
    { TT_API_GEMINI,
      { { "/v1beta/models/*:streamGenerateContent", SIM_STREAM_ALWAYS },
        { "/v1beta/models/*:generateContent", SIM_STREAM_NEVER },
        { "/v1/models/*:streamGenerateContent", SIM_STREAM_ALWAYS },
        { "/v1/models/*:generateContent", SIM_STREAM_NEVER } },
      "text/event-stream", 1,
      NULL, ge_token, ge_finish, NULL, ge_error, NULL, ge_whole,
      NULL, NULL },
    { TT_API_OLLAMA,   /* /api/chat */
      { { "/api/chat", SIM_STREAM_BODY_TRUE } },
      "application/x-ndjson", 1,
      NULL, olc_token, NULL, NULL, ol_error, olc_terminal, olc_whole,
      NULL, NULL },
    { TT_API_OLLAMA,   /* /api/generate */
      { { "/api/generate", SIM_STREAM_BODY_TRUE } },
      "application/x-ndjson", 1,
      NULL, olg_token, NULL, NULL, ol_error, olg_terminal, olg_whole,
      NULL, NULL },
    { TT_API_TGI,
      { { "/generate_stream", SIM_STREAM_ALWAYS },
        { "/generate", SIM_STREAM_NEVER } },
      "text/event-stream", 1,
      NULL, tgi_token, tgi_finish, NULL, tgi_error, NULL, tgi_whole,
      NULL, NULL },
    { TT_API_LLAMACPP,
      { { "/completion", SIM_STREAM_BODY },
        { "/completions", SIM_STREAM_BODY },
        { "/infill", SIM_STREAM_BODY } },
      "text/event-stream", 1,
      NULL, lc_token, NULL, NULL, lc_error, lc_terminal, lc_whole,
      NULL, NULL },
    { TT_API_OPENAI_REALTIME,   /* no routes: GET /v1/realtime with Upgrade (sim/ws.c) */
      { { NULL, SIM_STREAM_NEVER } },
      NULL, 1,
      rt_head, rt_token, rt_finish, NULL, rt_error, rt_terminal, NULL,
      rt_audio, rt_cancel },
};

const struct sim_dialect *sim_dialect_of(enum tt_api api)
{
    size_t i;

    for (i = 0; i < sizeof(sim_dialects) / sizeof(sim_dialects[0]); i++)
        if (sim_dialects[i].api == api)
            return &sim_dialects[i];
    return NULL;
}

/* <pat> against <s>[0..n): '*' matches any run of characters except '/' */
static int glob(const char *pat, const char *s, size_t n)
{
    size_t k;

    if (*pat == '\0')
        return n == 0;
    if (*pat == '*') {
        for (k = 0; k <= n; k++) {
            if (glob(pat + 1, s + k, n - k))
                return 1;
            if (k < n && s[k] == '/')
                break;
        }
        return 0;
    }
    return n > 0 && *pat == *s && glob(pat + 1, s + 1, n - 1);
}

const struct sim_dialect *sim_dialect_route(const char *path, size_t len,
                                            enum sim_stream_rule *rule)
{
    size_t i, j;

    for (i = 0; i < sizeof(sim_dialects) / sizeof(sim_dialects[0]); i++) {
        const struct sim_dialect *d = &sim_dialects[i];
        for (j = 0; j < sizeof(d->routes) / sizeof(d->routes[0]) &&
                    d->routes[j].pattern; j++) {
            if (glob(d->routes[j].pattern, path, len)) {
                *rule = d->routes[j].stream;
                return d;
            }
        }
    }
    return NULL;
}
