/*
 * Decoder of Gemini's generateContent / streamGenerateContent (table entry
 * tt_dec_gemini, called by proxy/decode/stream.c with each event or a whole body;
 * a body may be one JSON array of chunks).
 *
 *   answer     candidates[].content.parts[].text, functionCall names
 *   reasoning  parts with "thought": true
 *   usage      usageMetadata (cumulative): input = promptTokenCount, output
 *              = candidatesTokenCount + thoughtsTokenCount, reasoning =
 *              thoughtsTokenCount, cached input = cachedContentTokenCount
 *   choices    the highest candidates[].index + 1
 */
#include "proxy/decode/decode.h"

static void extract_gemini_one(struct tt_stream *st, const cJSON *root)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *cands = tt_jget(root, "candidates"), *c, *p, *u;
    int64_t cand = -1, thoughts = -1, n;

    if (st->r->s.model[0] == '\0')      /* looked up once per response */
        tt_dec_model(st, tt_jstr(root, "modelVersion"));
    tt_dec_generic_error(st, root);
    cJSON_ArrayForEach(c, tt_jarr(cands)) {
        const cJSON *parts = tt_jget(tt_jget(c, "content"), "parts");
        int64_t idx;

        if (tt_jint(c, "index", &idx) == 0)
            tt_dec_choice(st, idx);
        cJSON_ArrayForEach(p, tt_jarr(parts)) {
            if (cJSON_IsTrue(tt_jget(p, "thought")))
                tt_dec_reasoning(st, tt_jstr(p, "text"));
            else
                tt_dec_answer(st, tt_jstr(p, "text"));
            tt_dec_tool(st, tt_jstr(tt_jget(p, "functionCall"), "name"));
        }
        tt_dec_finish(st, tt_jstr(c, "finishReason"));
    }
    u = tt_jget(root, "usageMetadata");
    if (cJSON_IsObject(u)) {
        if (tt_jint(u, "promptTokenCount", &n) == 0)
            s->usage_input = n;
        (void)tt_jint(u, "candidatesTokenCount", &cand);
        (void)tt_jint(u, "thoughtsTokenCount", &thoughts);
        if (cand >= 0 || thoughts >= 0)
            s->usage_output = (cand > 0 ? cand : 0) + (thoughts > 0 ? thoughts : 0);
        if (thoughts >= 0)
            s->usage_reasoning = thoughts;
        if (tt_jint(u, "cachedContentTokenCount", &n) == 0)
            s->usage_cached = n;
    }
}

static void gemini_event(struct tt_stream *st, const cJSON *root, const char *evname)
{
    (void)evname;
    /* streamGenerateContent without alt=sse: one JSON array of chunks */
    tt_dec_each(st, root, extract_gemini_one);
}

const struct tt_decoder tt_dec_gemini = {
    .api = TT_API_GEMINI, .event = gemini_event,
};
