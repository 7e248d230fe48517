/*
 * Decoder of the Anthropic Messages API (table entry tt_dec_anthropic,
 * called by proxy/decode/stream.c with each event or a whole body).
 *
 *   answer     content_block_delta text_delta, input_json_delta; a body's
 *              text blocks and tool_use names
 *   reasoning  thinking_delta; a body's thinking blocks
 *   usage      message_start.message.usage.input_tokens, message_delta.usage
 *              (cumulative, last wins).  Input = input_tokens +
 *              cache_creation_input_tokens + cache_read_input_tokens (as
 *              OpenAI's prompt_tokens include cached tokens); cached input =
 *              cache_read_input_tokens.  No reasoning count.
 *   terminal   message_stop
 */
#include <string.h>

#include "proxy/decode/decode.h"

static void anthropic_input(struct tt_stream *st, const cJSON *u)
{
    int64_t in, n;

    if (tt_jint(u, "input_tokens", &in) != 0)
        return;
    if (tt_jint(u, "cache_creation_input_tokens", &n) == 0)
        in += n;
    if (tt_jint(u, "cache_read_input_tokens", &n) == 0) {
        in += n;
        st->r->s.usage_cached = n;
    }
    st->r->s.usage_input = in;
}

static void anthropic_event(struct tt_stream *st, const cJSON *root,
                            const char *evname)
{
    const char *type = tt_jstr(root, "type");
    const cJSON *u, *c;
    int64_t n;

    if (type == NULL)
        type = evname;
    tt_dec_generic_error(st, root);
    if (type == NULL)
        return;
    if (strcmp(type, "content_block_delta") == 0) {
        const cJSON *d = tt_jget(root, "delta");
        const char *dt = tt_jstr(d, "type");
        if (dt == NULL)
            return;
        if (strcmp(dt, "text_delta") == 0)
            tt_dec_answer(st, tt_jstr(d, "text"));
        else if (strcmp(dt, "input_json_delta") == 0)
            tt_dec_tool(st, tt_jstr(d, "partial_json"));
        else if (strcmp(dt, "thinking_delta") == 0)
            tt_dec_reasoning(st, tt_jstr(d, "thinking"));
    } else if (strcmp(type, "message_start") == 0) {
        const cJSON *m = tt_jget(root, "message");
        if (st->r->s.model[0] == '\0') {    /* looked up once per response */
            tt_dec_model(st, tt_jstr(m, "model"));
            tt_dec_response_id(st, tt_jstr(m, "id"));
        }
        anthropic_input(st, tt_jget(m, "usage"));
    } else if (strcmp(type, "message_delta") == 0) {
        tt_dec_finish(st, tt_jstr(tt_jget(root, "delta"), "stop_reason"));
        u = tt_jget(root, "usage");
        anthropic_input(st, u);
        if (tt_jint(u, "output_tokens", &n) == 0)
            st->r->s.usage_output = n;
    } else if (strcmp(type, "message_stop") == 0) {
        tt_dec_terminal(st);
    } else if (strcmp(type, "message") == 0) {
        /* non-streaming */
        const cJSON *content = tt_jget(root, "content");
        if (st->r->s.model[0] == '\0') {    /* looked up once per response */
            tt_dec_model(st, tt_jstr(root, "model"));
            tt_dec_response_id(st, tt_jstr(root, "id"));
        }
        cJSON_ArrayForEach(c, tt_jarr(content)) {
            const char *ct = tt_jstr(c, "type");
            if (ct == NULL)
                continue;
            if (strcmp(ct, "text") == 0)
                tt_dec_answer(st, tt_jstr(c, "text"));
            else if (strcmp(ct, "thinking") == 0)
                tt_dec_reasoning(st, tt_jstr(c, "thinking"));
            else if (strcmp(ct, "tool_use") == 0)
                tt_dec_tool(st, tt_jstr(c, "name"));
        }
        tt_dec_finish(st, tt_jstr(root, "stop_reason"));
        u = tt_jget(root, "usage");
        anthropic_input(st, u);
        if (tt_jint(u, "output_tokens", &n) == 0)
            st->r->s.usage_output = n;
    } else if (strcmp(type, "error") == 0 && !st->r->s.error) {
        tt_dec_error(st, tt_jget(root, "error"), root);
    }
}

const struct tt_decoder tt_dec_anthropic = {
    .api = TT_API_ANTHROPIC, .event = anthropic_event, .marker = 1,
};
