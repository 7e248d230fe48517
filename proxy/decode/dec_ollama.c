/*
 * Decoder of Ollama's /api/chat and /api/generate (table entry
 * tt_dec_ollama, called by proxy/decode/stream.c with each NDJSON line or a whole
 * body).
 *
 *   answer     message.content / response, tool_calls[].function.name
 *   reasoning  message.thinking / thinking
 *   usage      the final line (done: true): prompt_eval_count, eval_count
 *   server     the final line's prompt_eval_duration, eval_duration,
 *              load_duration, total_duration (ns)
 *   terminal   done: true; finish_reason = done_reason
 */
#include "proxy/decode/decode.h"

static const struct { const char *key; enum tt_srv k; } durations[] = {
    { "prompt_eval_duration", TT_SRV_PROMPT_EVAL_NS },
    { "eval_duration",        TT_SRV_EVAL_NS },
    { "load_duration",        TT_SRV_LOAD_NS },
    { "total_duration",       TT_SRV_TOTAL_NS },
};

static void ollama_event(struct tt_stream *st, const cJSON *root, const char *evname)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *m = tt_jget(root, "message"), *tc, *t;
    int64_t n;
    size_t i;

    (void)evname;
    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        tt_dec_model(st, tt_jstr(root, "model"));
    tt_dec_generic_error(st, root);
    tt_dec_reasoning(st, tt_jstr(m, "thinking"));
    tt_dec_reasoning(st, tt_jstr(root, "thinking"));          /* /api/generate */
    tt_dec_answer(st, tt_jstr(m, "content"));
    tt_dec_answer(st, tt_jstr(root, "response"));             /* /api/generate */
    tc = tt_jget(m, "tool_calls");
    cJSON_ArrayForEach(t, tt_jarr(tc))
        tt_dec_tool(st, tt_jstr(tt_jget(t, "function"), "name"));
    if (cJSON_IsTrue(tt_jget(root, "done"))) {
        tt_dec_terminal(st);
        tt_dec_finish(st, tt_jstr(root, "done_reason"));
        if (tt_jint(root, "prompt_eval_count", &n) == 0)
            s->usage_input = n;
        if (tt_jint(root, "eval_count", &n) == 0)
            s->usage_output = n;
        for (i = 0; i < sizeof(durations) / sizeof(durations[0]); i++)
            if (tt_jint(root, durations[i].key, &n) == 0)
                tt_request_server(st->r, durations[i].k, (double)n);
    }
}

const struct tt_decoder tt_dec_ollama = {
    .api = TT_API_OLLAMA, .event = ollama_event, .marker = 1, .ndjson = 1,
};
