/*
 * Decoder of the OpenAI Chat Completions and Completions APIs (and of the
 * servers that speak them: vLLM, SGLang, DeepSeek, llama.cpp's /v1 routes).
 * Table entries tt_dec_openai_chat and tt_dec_openai_completions, called by
 * proxy/decode/stream.c with each event or a whole body.
 *
 *   answer     choices[].delta.content (message.content in a body), refusal,
 *              tool_calls[].function.name/arguments, legacy function_call;
 *              Completions: choices[].text
 *   reasoning  delta.reasoning_content, else delta.reasoning (never both)
 *   usage      "usage"; per choice (llama.cpp: a usage-only chunk after each
 *              choice's finish, or usage on each prompt's last chunk) summed,
 *              repeated or cumulative (vLLM, OpenAI) not: see tt_dec_usage()
 *              in proxy/decode/decode.c; cached prompt tokens from
 *              prompt_tokens_details.cached_tokens (DeepSeek:
 *              prompt_cache_hit_tokens)
 *   server     llama.cpp's "timings" object, wherever it comes
 *   choices    the highest choices[].index + 1 (the position without index)
 *
 * A /completions path may be llama.cpp's native API: an event without
 * "choices" holding llama.cpp's "stop" flag hands the response to
 * proxy/decode/dec_llamacpp.c.
 */
#include "proxy/decode/decode.h"

static void openai_event(struct tt_stream *st, const cJSON *root, int completions)
{
    const cJSON *choices = tt_jget(root, "choices"), *c;
    int64_t idx0 = -1;
    int i = 0, part;

    if (st->r->s.model[0] == '\0') {    /* looked up once per response */
        tt_dec_model(st, tt_jstr(root, "model"));
        if (completions)            /* chat: tt_dec_lead_id() in stream.c */
            tt_dec_response_id(st, tt_jstr(root, "id"));
    }
    tt_dec_generic_error(st, root);
    cJSON_ArrayForEach(c, tt_jarr(choices)) {
        const cJSON *d = tt_jget(c, "delta"), *tc, *t;
        const char *rs;
        int64_t idx;

        if (tt_jint(c, "index", &idx) != 0)
            idx = i;
        tt_dec_choice(st, idx);
        if (i == 0)
            idx0 = idx;
        i++;
        if (!cJSON_IsObject(d))
            d = tt_jget(c, "message");     /* non-streaming */
        if (cJSON_IsObject(d)) {
            rs = tt_jstr(d, "reasoning_content");
            if (rs == NULL || rs[0] == '\0')
                rs = tt_jstr(d, "reasoning");  /* never both: same text */
            tt_dec_reasoning(st, rs);
            tt_dec_answer(st, tt_jstr(d, "content"));
            tt_dec_tool(st, tt_jstr(d, "refusal"));
            tc = tt_jget(d, "tool_calls");
            cJSON_ArrayForEach(t, tt_jarr(tc)) {
                const cJSON *f = tt_jget(t, "function");
                tt_dec_tool(st, tt_jstr(f, "name"));
                tt_dec_tool(st, tt_jstr(f, "arguments"));
            }
            tc = tt_jget(d, "function_call");      /* legacy */
            tt_dec_tool(st, tt_jstr(tc, "name"));
            tt_dec_tool(st, tt_jstr(tc, "arguments"));
        } else if (completions) {
            tt_dec_answer(st, tt_jstr(c, "text"));
        }
        tt_dec_finish_choice(st, idx, tt_jstr(c, "finish_reason"));
    }
    /* usage per choice is summed, a repeated one is not (tt_dec_usage) */
    part = tt_dec_openai_usage(st, tt_jget(root, "usage"),
                               tt_dec_usage_key(st, cJSON_IsArray(choices),
                                                (unsigned)i, idx0));
    tt_dec_llamacpp_timings(st, tt_jget(root, "timings"),
                            part || (tt_dec_streaming(st) && cJSON_IsArray(choices) &&
                                     i == 0));
}

static void chat_event(struct tt_stream *st, const cJSON *root, const char *evname)
{
    (void)evname;
    openai_event(st, root, 0);
}

static void completions_event(struct tt_stream *st, const cJSON *root,
                              const char *evname)
{
    if (tt_dec_llamacpp_like(root)) {
        tt_dec_switch(st, &tt_dec_llamacpp);
        st->dec->event(st, root, evname);
        return;
    }
    openai_event(st, root, 1);
}

const struct tt_decoder tt_dec_openai_chat = {
    .api = TT_API_OPENAI_CHAT, .event = chat_event, .marker = 1, .done = 1,
    .fast = tt_dec_openai_chat_fast,
};

const struct tt_decoder tt_dec_openai_completions = {
    .api = TT_API_OPENAI_COMPLETIONS, .event = completions_event,
    .marker = 1, .done = 1,
};
