/*
 * The request inspector, see inspect.h.  Called by proxy/conn.c with the
 * request body as it streams to the upstream; owns a bounded copy of it and
 * parses it once, at the end, with the arena parser (proxy/jsonarena.c).
 *
 * What it fills (absent = left at tt_request_init()'s -1 / ""):
 *   model          body "model"; Gemini: the path's last segment before ':'
 *                  (/v1beta/models/NAME:streamGenerateContent) when the body
 *                  names none
 *   stream         body "stream" (absent = 0; Ollama's default is 1);
 *                  Gemini and TGI by path (:streamGenerateContent,
 *                  /generate_stream)
 *   include_usage  stream_options.include_usage; for the OpenAI chat and
 *                  completions APIs an absent flag is 0 (their default)
 *   max_tokens     the first of max_completion_tokens, max_tokens,
 *                  max_output_tokens, generationConfig.maxOutputTokens,
 *                  parameters.max_new_tokens, max_new_tokens,
 *                  options.num_predict, n_predict (llama.cpp) that is a
 *                  non-negative number
 *   prompts        the length of a "prompt" list of strings or token lists
 *                  (left 0 for one prompt)
 */
#include "proxy/inspect.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/jsonarena.h"
#include "proxy/stream.h"

/* the copies of every inspector in the process, against one budget */
static size_t budget = TT_INSPECT_BUDGET_DEFAULT;
static _Atomic size_t held;

void tt_inspect_set_budget(size_t bytes)
{
    budget = bytes ? bytes : TT_INSPECT_BUDGET_DEFAULT;
}

size_t tt_inspect_held(void)
{
    return atomic_load(&held);
}

/* take <n> more bytes from the budget; 0, or -1 when it has not got them */
static int charge(size_t n)
{
    size_t before = atomic_fetch_add(&held, n);
    if (before + n > budget) {
        atomic_fetch_sub(&held, n);
        return -1;
    }
    return 0;
}

void tt_inspect_init(struct tt_inspect *in, size_t cap)
{
    memset(in, 0, sizeof(*in));
    in->cap = cap ? cap : TT_INSPECT_CAP_DEFAULT;
}

void tt_inspect_free(struct tt_inspect *in)
{
    free(in->buf);
    if (in->alloc > 0)
        atomic_fetch_sub(&held, in->alloc);
    in->buf = NULL;
    in->len = in->alloc = 0;
}

static void give_up(struct tt_inspect *in, const char *why)
{
    in->gave_up = 1;
    in->skipped = why;
    tt_inspect_free(in);
}

void tt_inspect_feed(struct tt_inspect *in, const char *buf, size_t len)
{
    if (in->gave_up || len == 0)
        return;
    if (!in->started) {
        /* a JSON object or nothing: skip leading whitespace, then look */
        while (len > 0 && (*buf == ' ' || *buf == '\t' || *buf == '\r' ||
                           *buf == '\n')) {
            buf++;
            len--;
        }
        if (len == 0)
            return;
        if (*buf != '{') {
            give_up(in, "not_json");
            return;
        }
        in->started = 1;
    }
    if (len > in->cap - in->len) {
        give_up(in, "too_large");
        return;
    }
    if (in->len + len > in->alloc) {
        size_t n = in->alloc ? in->alloc : 1024;
        char *p;
        while (n < in->len + len)
            n *= 2;
        if (n > in->cap)
            n = in->cap;
        if (charge(n - in->alloc) < 0) {
            give_up(in, "budget");
            return;
        }
        p = realloc(in->buf, n);
        if (p == NULL) {
            atomic_fetch_sub(&held, n - in->alloc);
            give_up(in, "out_of_memory");
            return;
        }
        in->buf = p;
        in->alloc = n;
    }
    memcpy(in->buf + in->len, buf, len);
    in->len += len;
}

static const cJSON *jget(const cJSON *o, const char *key)
{
    if (!cJSON_IsObject(o))
        return NULL;
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static void set_model(struct tt_request *r, const char *m, size_t n)
{
    if (n >= sizeof(r->model))
        n = sizeof(r->model) - 1;
    memcpy(r->model, m, n);
    r->model[n] = '\0';
}

/* the path without its query: [<path>, <path> + return value) */
static size_t path_len(const char *path)
{
    const char *q = strchr(path, '?');
    return q ? (size_t)(q - path) : strlen(path);
}

/* Gemini: "/v1beta/models/NAME:streamGenerateContent" -> NAME */
static void model_from_path(struct tt_request *r)
{
    size_t n = path_len(r->path);
    const char *colon = NULL, *seg;
    size_t i;

    for (i = n; i > 0; i--) {
        if (r->path[i - 1] == '/')
            break;
        if (r->path[i - 1] == ':')
            colon = r->path + i - 1;
    }
    seg = r->path + i;
    if (colon != NULL && colon > seg)
        set_model(r, seg, (size_t)(colon - seg));
}

static int path_ends(const struct tt_request *r, const char *suffix)
{
    size_t n = path_len(r->path), k = strlen(suffix);

    while (n > 1 && r->path[n - 1] == '/')
        n--;
    return n >= k && memcmp(r->path + n - k, suffix, k) == 0;
}

static void from_body(const cJSON *root, enum tt_api api, struct tt_request *r)
{
    static const char *const direct[] = {
        "max_completion_tokens", "max_tokens", "max_output_tokens",
    };
    const cJSON *v, *so;
    int64_t n;
    size_t i;

    v = jget(root, "model");
    if (cJSON_IsString(v) && v->valuestring[0] != '\0')
        set_model(r, v->valuestring, strlen(v->valuestring));

    if (api != TT_API_GEMINI && api != TT_API_TGI) {
        v = jget(root, "stream");
        if (cJSON_IsBool(v))
            r->stream = cJSON_IsTrue(v) ? 1 : 0;
        else if (v == NULL || cJSON_IsNull(v))
            r->stream = api == TT_API_OLLAMA ? 1 : 0;
    }

    /* a list of prompts (strings or token lists; a list of token ids is
     * one prompt) */
    v = jget(root, "prompt");
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 1 &&
        !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)))
        r->prompts = cJSON_GetArraySize(v);

    so = jget(root, "stream_options");
    v = jget(so, "include_usage");
    if (cJSON_IsBool(v))
        r->include_usage = cJSON_IsTrue(v) ? 1 : 0;
    else if (api == TT_API_OPENAI_CHAT || api == TT_API_OPENAI_COMPLETIONS)
        r->include_usage = 0;

    for (i = 0; i < sizeof(direct) / sizeof(direct[0]); i++)
        if (tt_json_count(jget(root, direct[i]), &n) == 0) {
            r->max_tokens = n;
            return;
        }
    if (tt_json_count(jget(root, "n_predict"), &n) == 0 ||         /* llama.cpp */
        tt_json_count(jget(jget(root, "generationConfig"), "maxOutputTokens"), &n) == 0 ||
        tt_json_count(jget(jget(root, "parameters"), "max_new_tokens"), &n) == 0 ||
        tt_json_count(jget(root, "max_new_tokens"), &n) == 0 ||
        tt_json_count(jget(jget(root, "options"), "num_predict"), &n) == 0)
        r->max_tokens = n;
}

void tt_inspect_finish(struct tt_inspect *in, struct tt_request *r)
{
    enum tt_api api = r->api;

    if (api == TT_API_OTHER)
        api = tt_api_detect(r->path, strlen(r->path));

    if (!in->gave_up && in->len > 0) {
        const cJSON *root = tt_json_parse(in->buf, in->len);
        if (cJSON_IsObject(root))
            from_body(root, api, r);
        else
            r->inspect_skipped = "not_json";
        tt_json_reset();
    } else if (in->gave_up) {
        r->inspect_skipped = in->skipped;
    }
    if (api == TT_API_GEMINI) {
        if (r->model[0] == '\0')
            model_from_path(r);
        r->stream = path_ends(r, ":streamGenerateContent") ? 1 : 0;
    } else if (api == TT_API_TGI) {
        r->stream = path_ends(r, "/generate_stream") ? 1 : 0;
    }
    tt_inspect_free(in);
}
