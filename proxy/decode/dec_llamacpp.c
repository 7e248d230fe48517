/*
 * Decoder of llama.cpp's native completion API: POST /completion,
 * /completions without /v1, /infill (table entry tt_dec_llamacpp, called by
 * proxy/decode/stream.c with each event or a whole body; a body for a list of
 * prompts is an array of results).  A /completions response starts in the
 * OpenAI Completions decoder and is handed here by its first event
 * (proxy/decode/dec_openai.c).
 *
 *   events     {"index":0,"content":"..","tokens":[..],"stop":false,
 *              "tokens_predicted":n,"tokens_evaluated":m}; the last one per
 *              prompt has "stop":true, stop_type, timings; no [DONE]
 *   answer     content (through the think filter)
 *   usage      on each stop:true result: output = tokens_predicted (else
 *              timings.predicted_n), input = tokens_evaluated (else
 *              timings.prompt_n + cache_n), cached input = timings.cache_n;
 *              one part per prompt, summed (proxy/decode/decode.c)
 *   server     timings: prompt_n, cache_n, prompt_ms, predicted_n,
 *              predicted_ms
 *   terminal   "stop": true; finish_reason = stop_type ("eos", "limit",
 *              "word")
 *   choices    the highest top-level index + 1
 */
#include "proxy/decode/decode.h"

static void llamacpp_one(struct tt_stream *st, const cJSON *root)
{
    const cJSON *t = tt_jget(root, "timings");
    int64_t in = -1, out = -1, cached = -1, n, idx;

    if (st->r->s.model[0] == '\0')
        tt_dec_model(st, tt_jstr(root, "model"));
    tt_dec_generic_error(st, root);
    if (tt_jint(root, "index", &idx) == 0)
        tt_dec_choice(st, idx);
    tt_dec_answer(st, tt_jstr(root, "content"));
    if (!cJSON_IsTrue(tt_jget(root, "stop")))
        return;

    tt_dec_terminal(st);
    tt_dec_finish(st, tt_jstr(root, "stop_type"));
    tt_dec_llamacpp_timings(st, t, 1);
    if (tt_jint(root, "tokens_predicted", &out) != 0)
        (void)tt_jint(t, "predicted_n", &out);
    if (tt_jint(root, "tokens_evaluated", &in) != 0 &&
        tt_jint(t, "prompt_n", &in) == 0 && tt_jint(t, "cache_n", &n) == 0)
        in += n;
    (void)tt_jint(t, "cache_n", &cached);
    /* one part per prompt (a repeated index replaces its own) */
    tt_dec_usage(st, tt_jint(root, "index", &idx) == 0 ? idx : TT_USAGE_NEW,
                 in, out, -1, cached);
}

static void llamacpp_event(struct tt_stream *st, const cJSON *root,
                           const char *evname)
{
    (void)evname;
    tt_dec_each(st, root, llamacpp_one);
}

const struct tt_decoder tt_dec_llamacpp = {
    .api = TT_API_LLAMACPP, .event = llamacpp_event, .marker = 1,
};
