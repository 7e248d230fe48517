/*
 * libFuzzer harness for proxy/http/inspect.c: the first input byte picks the
 * request path and the split, the rest is the request body.  The one-pass
 * reading of the body must give what the whole cJSON tree gives
 * (in.whole_tree), refusals included.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/request.h"
#include "proxy/http/inspect.h"
#include "proxy/decode/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const paths[] = {
    "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
    "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
    "/v1beta/models/:generateContent", "/api/chat", "/api/generate",
    "/generate", "/generate_stream", "/x", ":streamGenerateContent",
    "/v1beta/models/a:b:generateContent", "/models/m:generateContent/",
    "", "/v1/messages?x=/models/y:z",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tt_request r, w;
    struct tt_inspect in;
    size_t off = 0, step;
    const char *path;

    if (size < 1)
        return 0;
    path = paths[data[0] % (sizeof(paths) / sizeof(paths[0]))];
    step = 1 + (data[0] >> 4);
    data++;
    size--;
    tt_request_init(&r);
    strcpy(r.path, path);
    r.api = tt_api_detect(path, strlen(path));
    tt_inspect_init(&in, 4096);
    if (step & 1)       /* half the time a Content-Length declares the size */
        tt_inspect_expect(&in, size);
    while (off < size) {
        size_t k = size - off < step ? size - off : step;
        tt_inspect_feed(&in, (const char *)data + off, k);
        off += k;
    }
    tt_inspect_finish(&in, &r);
    tt_inspect_free(&in);
    if (memchr(r.model, 0, sizeof(r.model)) == NULL || r.stream < -1 || r.stream > 1 ||
        r.include_usage < -1 || r.include_usage > 1 || r.max_tokens < -1)
        abort();

    tt_request_init(&w);
    strcpy(w.path, path);
    w.api = r.api;
    tt_inspect_init(&in, 4096);
    in.whole_tree = 1;
    tt_inspect_feed(&in, (const char *)data, size);
    tt_inspect_finish(&in, &w);
    tt_inspect_free(&in);
    if (strcmp(r.model, w.model) != 0 || r.stream != w.stream ||
        r.include_usage != w.include_usage || r.max_tokens != w.max_tokens ||
        r.prompts != w.prompts || (r.inspect_skipped == NULL) != (w.inspect_skipped == NULL))
        abort();
    return 0;
}
