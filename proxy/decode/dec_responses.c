/*
 * Decoder of the OpenAI Responses API (table entry tt_dec_openai_responses,
 * called by proxy/decode/stream.c with each event or a whole body).
 *
 *   answer     response.output_text.delta; refusal and function-call /
 *              custom tool input deltas; a body's message output items
 *   reasoning  response.reasoning_text.delta, reasoning_summary_text.delta;
 *              a body's reasoning items (summary and content)
 *   usage      response.usage (output_tokens_details.reasoning_tokens,
 *              input_tokens_details.cached_tokens)
 *   terminal   response.completed, response.incomplete and response.failed
 *              (the stream ends there); finish_reason is the final status
 *              ("completed", "failed", or incomplete_details.reason)
 */
#include <string.h>

#include "proxy/decode/decode.h"

static void responses_usage(struct tt_stream *st, const cJSON *resp)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *u = tt_jget(resp, "usage");
    int64_t n;

    if (!cJSON_IsObject(u))
        return;
    if (tt_jint(u, "input_tokens", &n) == 0)
        s->usage_input = n;
    if (tt_jint(u, "output_tokens", &n) == 0)
        s->usage_output = n;
    if (tt_jint(tt_jget(u, "output_tokens_details"), "reasoning_tokens", &n) == 0)
        s->usage_reasoning = n;
    if (tt_jint(tt_jget(u, "input_tokens_details"), "cached_tokens", &n) == 0)
        s->usage_cached = n;
}

/* a final (or non-streaming) response object */
static void responses_final(struct tt_stream *st, const cJSON *resp)
{
    const char *status = tt_jstr(resp, "status");
    const cJSON *e = tt_jget(resp, "error");

    if (st->r->s.model[0] == '\0') {    /* looked up once per response */
        tt_dec_model(st, tt_jstr(resp, "model"));
        tt_dec_response_id(st, tt_jstr(resp, "id"));
    }
    responses_usage(st, resp);
    if (status != NULL && strcmp(status, "incomplete") == 0 &&
        tt_jstr(tt_jget(resp, "incomplete_details"), "reason") != NULL)
        status = tt_jstr(tt_jget(resp, "incomplete_details"), "reason");
    tt_dec_finish(st, status);
    if (e != NULL && !cJSON_IsNull(e))
        tt_dec_error(st, e, resp);
    else if (tt_jstr(resp, "status") != NULL &&
             strcmp(tt_jstr(resp, "status"), "failed") == 0)
        tt_dec_error(st, NULL, resp);
}

/* the output items of a non-streaming response */
static void responses_output(struct tt_stream *st, const cJSON *resp)
{
    const cJSON *out = tt_jget(resp, "output"), *it, *c;

    cJSON_ArrayForEach(it, tt_jarr(out)) {
        const char *type = tt_jstr(it, "type");
        const cJSON *parts;

        if (type == NULL)
            continue;
        if (strcmp(type, "message") == 0) {
            parts = tt_jget(it, "content");
            cJSON_ArrayForEach(c, tt_jarr(parts)) {
                tt_dec_answer(st, tt_jstr(c, "text"));
                tt_dec_tool(st, tt_jstr(c, "refusal"));
            }
        } else if (strcmp(type, "reasoning") == 0) {
            parts = tt_jget(it, "summary");
            cJSON_ArrayForEach(c, tt_jarr(parts))
                tt_dec_reasoning(st, tt_jstr(c, "text"));
            parts = tt_jget(it, "content");
            cJSON_ArrayForEach(c, tt_jarr(parts))
                tt_dec_reasoning(st, tt_jstr(c, "text"));
        } else {
            tt_dec_tool(st, tt_jstr(it, "arguments"));    /* function_call... */
            tt_dec_tool(st, tt_jstr(it, "input"));        /* custom_tool_call */
        }
    }
}

static void responses_event(struct tt_stream *st, const cJSON *root,
                            const char *evname)
{
    const char *type = tt_jstr(root, "type");
    const cJSON *resp = tt_jget(root, "response");

    if (type == NULL)
        type = evname;
    if (!tt_dec_streaming(st) && type == NULL) {
        if (tt_jstr(root, "object") != NULL || tt_jget(root, "output") != NULL) {
            responses_output(st, root);
            responses_final(st, root);
        }
        tt_dec_generic_error(st, root);
        return;
    }
    if (type == NULL)
        return;
    if (st->r->s.model[0] == '\0') {    /* looked up once per response */
        tt_dec_model(st, tt_jstr(resp, "model"));
        tt_dec_response_id(st, tt_jstr(resp, "id"));
    }
    if (strcmp(type, "response.output_text.delta") == 0) {
        tt_dec_answer(st, tt_jstr(root, "delta"));
    } else if (strcmp(type, "response.refusal.delta") == 0 ||
               strcmp(type, "response.function_call_arguments.delta") == 0 ||
               strcmp(type, "response.custom_tool_call_input.delta") == 0) {
        tt_dec_tool(st, tt_jstr(root, "delta"));
    } else if (strcmp(type, "response.reasoning_text.delta") == 0 ||
               strcmp(type, "response.reasoning_summary_text.delta") == 0) {
        tt_dec_reasoning(st, tt_jstr(root, "delta"));
    } else if (strcmp(type, "response.completed") == 0 ||
               strcmp(type, "response.incomplete") == 0 ||
               strcmp(type, "response.failed") == 0) {
        tt_dec_terminal(st);
        responses_final(st, resp);
    } else if (strcmp(type, "error") == 0) {
        const cJSON *e = tt_jget(root, "error");
        tt_dec_error(st, cJSON_IsObject(e) ? e : root, root);
    } else {
        tt_dec_generic_error(st, root);
    }
}

const struct tt_decoder tt_dec_openai_responses = {
    .api = TT_API_OPENAI_RESPONSES, .event = responses_event, .marker = 1,
};
