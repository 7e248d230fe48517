/*
 * OpenAI Realtime (SPEC section 13): the server events of one turn of a
 * WebSocket session, one event per message (proxy/http/wsturn.c opens the turn
 * and hands its server messages here).
 *
 *   response.output_text.delta             answer text     (beta: response.text.delta)
 *   response.output_audio_transcript.delta answer text     (beta: response.audio_transcript.delta)
 *   response.output_audio.delta            audio, base64   (beta: response.audio.delta)
 *   response.function_call_arguments.delta tool-call text
 *   response.done                          the end: status, usage with its details
 *   error                                  ends the turn when no response began
 *
 * Audio deltas are output token events like the transcript's, kept out of
 * the answer text; the first sets time_to_first_audio.  A response.done
 * with status "cancelled" (the client's response.cancel, or the server's
 * turn detection) records a cancelled turn.
 */
#include <string.h>

#include "proxy/decode/decode.h"

static int is(const char *type, const char *ga, const char *beta)
{
    return strcmp(type, ga) == 0 || (beta != NULL && strcmp(type, beta) == 0);
}

static void realtime_usage(struct tt_stream *st, const cJSON *u)
{
    struct tt_stream_stats *s = &st->r->s;
    const cJSON *in = tt_jget(u, "input_token_details");
    const cJSON *out = tt_jget(u, "output_token_details");
    int64_t n;

    if (!cJSON_IsObject(u))
        return;
    if (tt_jint(u, "input_tokens", &n) == 0)
        s->usage_input = n;
    if (tt_jint(u, "output_tokens", &n) == 0)
        s->usage_output = n;
    if (tt_jint(in, "cached_tokens", &n) == 0)
        s->usage_cached = n;
    if (tt_jint(in, "text_tokens", &n) == 0)
        s->usage_input_text = n;
    if (tt_jint(in, "audio_tokens", &n) == 0)
        s->usage_input_audio = n;
    if (tt_jint(out, "text_tokens", &n) == 0)
        s->usage_output_text = n;
    if (tt_jint(out, "audio_tokens", &n) == 0)
        s->usage_output_audio = n;
}

static void realtime_done(struct tt_stream *st, const cJSON *resp)
{
    struct tt_request *r = st->r;
    const cJSON *det = tt_jget(resp, "status_details");
    const char *status = tt_jstr(resp, "status");
    const char *reason = tt_jstr(det, "reason");

    tt_dec_terminal(st);
    tt_dec_response_id(st, tt_jstr(resp, "id"));
    realtime_usage(st, tt_jget(resp, "usage"));
    if (status == NULL)
        return;
    if (strcmp(status, "incomplete") == 0 && reason != NULL)
        tt_dec_finish(st, reason);
    else
        tt_dec_finish(st, status);
    if (strcmp(status, "failed") == 0) {
        const cJSON *e = tt_jget(det, "error");
        tt_dec_error(st, cJSON_IsObject(e) ? e : NULL, resp);
    } else if (strcmp(status, "cancelled") == 0 && !r->cancelled) {
        r->cancelled = 1;
        tt_request_set_error(r, 499, "cancelled",
                             reason != NULL && strcmp(reason, "client_cancelled") != 0 ?
                             "the server cancelled the response (turn detection)" :
                             "the client cancelled the response (response.cancel)");
    }
}

static void realtime_event(struct tt_stream *st, const cJSON *root,
                           const char *evname)
{
    const char *type = tt_jstr(root, "type");

    (void)evname;
    if (type == NULL)
        return;
    if (is(type, "response.output_audio_transcript.delta", "response.audio_transcript.delta") ||
        is(type, "response.output_text.delta", "response.text.delta")) {
        tt_dec_answer(st, tt_jstr(root, "delta"));
    } else if (is(type, "response.output_audio.delta", "response.audio.delta")) {
        tt_dec_audio(st, tt_jstr(root, "delta"));
    } else if (is(type, "response.function_call_arguments.delta", NULL)) {
        tt_dec_tool(st, tt_jstr(root, "delta"));
    } else if (is(type, "response.created", NULL)) {
        tt_dec_response_id(st, tt_jstr(tt_jget(root, "response"), "id"));
    } else if (is(type, "response.done", NULL)) {
        realtime_done(st, tt_jget(root, "response"));
    } else if (is(type, "error", NULL) && st->r->s.response_id[0] == '\0') {
        /* an error before any response began is the turn's answer; later
         * ones concern other client events and leave the response running */
        const cJSON *e = tt_jget(root, "error");
        tt_dec_error(st, cJSON_IsObject(e) ? e : root, root);
    }
}

const struct tt_decoder tt_dec_openai_realtime = {
    .api = TT_API_OPENAI_REALTIME, .event = realtime_event, .marker = 1,
};
