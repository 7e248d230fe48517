/*
 * Decoder of Hugging Face TGI's /generate and /generate_stream (table entry
 * tt_dec_tgi, called by proxy/decode/stream.c with each event or a whole body; a
 * body may be an array of results).  The x-* timing headers of /generate are
 * read by tt_stream_head() (proxy/decode/stream.c).
 *
 *   answer     token.text unless token.special; a body's generated_text
 *   usage      details.generated_tokens (no input count)
 *   finish     details.finish_reason
 */
#include "proxy/decode/decode.h"

static void extract_tgi_one(struct tt_stream *st, const cJSON *root)
{
    const cJSON *tok = tt_jget(root, "token"), *det = tt_jget(root, "details");
    int64_t n;

    tt_dec_generic_error(st, root);
    if (cJSON_IsObject(tok)) {
        if (!cJSON_IsTrue(tt_jget(tok, "special")))
            tt_dec_answer(st, tt_jstr(tok, "text"));
    } else if (!tt_dec_streaming(st)) {
        tt_dec_answer(st, tt_jstr(root, "generated_text"));   /* /generate */
    }
    if (cJSON_IsObject(det)) {
        tt_dec_finish(st, tt_jstr(det, "finish_reason"));
        if (tt_jint(det, "generated_tokens", &n) == 0)
            st->r->s.usage_output = n;
    }
}

static void tgi_event(struct tt_stream *st, const cJSON *root, const char *evname)
{
    (void)evname;
    tt_dec_each(st, root, extract_tgi_one);
}

const struct tt_decoder tt_dec_tgi = {
    .api = TT_API_TGI, .event = tgi_event,
};
