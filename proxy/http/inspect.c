/*
 * The request inspector, see inspect.h.  Called by proxy/http/conn.c with the
 * request body as it streams to the upstream; owns a bounded copy of it and
 * parses it once, at the end, with the arena parser (proxy/base/jsonarena.c).
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
 *
 * The body is not parsed into a tree.  Most of it is what none of the above
 * reads (messages, prompts, tools), and cJSON would build all of it: about
 * 21 instructions a byte, 0.7 million for a 35 KB chat request, several
 * times what the whole stream costs afterwards.  One pass (top_level())
 * checks the body exactly as cJSON 1.7's parser would accept it, skipping
 * strings sixteen bytes a step (proxy/base/jstr.h), and keeps only the
 * top-level members from_body() looks at ("prompt" reduced to its shape:
 * the same length, the same kind of first item); cJSON then parses that
 * small object.  Same facts, same bodies refused; tests/unit/test_inspect.c
 * and fuzz/fuzz_inspect.c compare it with the whole-tree parse
 * (in->whole_tree).
 */
#include "proxy/http/inspect.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/jsonarena.h"
#include "proxy/base/jstr.h"
#include "proxy/decode/stream.h"

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

void tt_inspect_expect(struct tt_inspect *in, size_t n)
{
    in->expect = n <= in->cap ? n : 0;
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
        /* a JSON object or nothing: look past leading whitespace (kept,
         * so that the copy is the body byte for byte: --inject-usage) */
        size_t i = 0;
        while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' ||
                           buf[i] == '\n'))
            i++;
        if (i < len && buf[i] != '{') {
            give_up(in, "not_json");
            return;
        }
        if (i < len)
            in->started = 1;
    }
    if (len > in->cap - in->len) {
        give_up(in, "too_large");
        return;
    }
    if (in->len + len > in->alloc) {
        size_t n = in->alloc ? in->alloc : 1024;
        char *p;
        /* the declared length at once, when it is at most four times what
         * has come: a client that declares a large body and sends a byte
         * holds no more than that */
        if (in->expect >= in->len + len && in->expect > n &&
            in->expect / 4 <= in->len + len)
            n = in->expect;
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

/* the top-level members from_body() reads, as key_index() numbers them */
enum {
    K_MODEL, K_STREAM, K_PROMPT, K_STREAM_OPTIONS, K_MAX_COMPLETION_TOKENS,
    K_MAX_TOKENS, K_MAX_OUTPUT_TOKENS, K_N_PREDICT, K_GENERATION_CONFIG,
    K_PARAMETERS, K_MAX_NEW_TOKENS, K_OPTIONS, K_COUNT
};

/* the K_ of the key [k, k + n), or -1: one or two comparisons, by length */
static int key_index(const char *k, size_t n)
{
#define IS(s) (memcmp(k, s, sizeof(s) - 1) == 0)
    switch (n) {
    case 5:  return IS("model") ? K_MODEL : -1;
    case 6:  return IS("stream") ? K_STREAM : IS("prompt") ? K_PROMPT : -1;
    case 7:  return IS("options") ? K_OPTIONS : -1;
    case 9:  return IS("n_predict") ? K_N_PREDICT : -1;
    case 10: return IS("max_tokens") ? K_MAX_TOKENS :
                    IS("parameters") ? K_PARAMETERS : -1;
    case 14: return IS("stream_options") ? K_STREAM_OPTIONS :
                    IS("max_new_tokens") ? K_MAX_NEW_TOKENS : -1;
    case 16: return IS("generationConfig") ? K_GENERATION_CONFIG : -1;
    case 17: return IS("max_output_tokens") ? K_MAX_OUTPUT_TOKENS : -1;
    case 21: return IS("max_completion_tokens") ? K_MAX_COMPLETION_TOKENS : -1;
    default: return -1;
    }
#undef IS
}

/* <m>[K_]: the first member of <root> with that key, as
 * cJSON_GetObjectItemCaseSensitive() finds it, in one walk of the members
 * instead of a walk for each key */
static void members(const cJSON *root, const cJSON *m[K_COUNT])
{
    const cJSON *c;

    memset(m, 0, K_COUNT * sizeof(m[0]));
    for (c = root->child; c != NULL; c = c->next) {
        int k = c->string != NULL ? key_index(c->string, strlen(c->string)) : -1;
        if (k >= 0 && m[k] == NULL)
            m[k] = c;
    }
}

static void from_body(const cJSON *root, enum tt_api api, struct tt_request *r)
{
    static const int direct[] = {
        K_MAX_COMPLETION_TOKENS, K_MAX_TOKENS, K_MAX_OUTPUT_TOKENS,
    };
    const cJSON *m[K_COUNT], *v;
    int64_t n;
    size_t i;

    members(root, m);
    v = m[K_MODEL];
    if (cJSON_IsString(v) && v->valuestring[0] != '\0')
        set_model(r, v->valuestring, strlen(v->valuestring));

    if (api != TT_API_GEMINI && api != TT_API_TGI) {
        v = m[K_STREAM];
        if (cJSON_IsBool(v))
            r->stream = cJSON_IsTrue(v) ? 1 : 0;
        else if (v == NULL || cJSON_IsNull(v))
            r->stream = api == TT_API_OLLAMA ? 1 : 0;
    }

    /* a list of prompts (strings or token lists; a list of token ids is
     * one prompt) */
    v = m[K_PROMPT];
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 1 &&
        !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)))
        r->prompts = cJSON_GetArraySize(v);

    v = jget(m[K_STREAM_OPTIONS], "include_usage");
    if (cJSON_IsBool(v))
        r->include_usage = cJSON_IsTrue(v) ? 1 : 0;
    else if (api == TT_API_OPENAI_CHAT || api == TT_API_OPENAI_COMPLETIONS)
        r->include_usage = 0;

    for (i = 0; i < sizeof(direct) / sizeof(direct[0]); i++)
        if (tt_json_count(m[direct[i]], &n) == 0) {
            r->max_tokens = n;
            return;
        }
    if (tt_json_count(m[K_N_PREDICT], &n) == 0 ||         /* llama.cpp */
        tt_json_count(jget(m[K_GENERATION_CONFIG], "maxOutputTokens"), &n) == 0 ||
        tt_json_count(jget(m[K_PARAMETERS], "max_new_tokens"), &n) == 0 ||
        tt_json_count(m[K_MAX_NEW_TOKENS], &n) == 0 ||
        tt_json_count(jget(m[K_OPTIONS], "num_predict"), &n) == 0)
        r->max_tokens = n;
}

/* ---- the body's top level, read the way cJSON 1.7 reads it ----------------- */

#define SCAN_DEPTH 1000         /* CJSON_NESTING_LIMIT */

/* cJSON's whitespace: any byte up to ' ' */
static const char *ws(const char *p, const char *e)
{
    while (p < e && (unsigned char)*p <= ' ')
        p++;
    return p;
}

/* cJSON's parse_hex4(): a byte that is not a hex digit makes it 0;
 * <*all>: the four bytes are hex digits */
static unsigned hex4(const char *s, int *all)
{
    unsigned h = 0;
    int i, d;

    for (i = 0; i < 4; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else {
            *all = 0;
            return 0;
        }
        h = (h << 4) | (unsigned)d;
    }
    return h;
}

/*
 * cJSON's judgement of the \u escape at <b>, in a string that ends at
 * <close>: the bytes it takes (6, or 12 for a surrogate pair), or 0 when
 * it refuses it (cut short, a lone low surrogate, a high one without \u
 * and a low one after it).  <*all>: every "hex digit" it read was one.
 */
static int u_escape(const char *b, const char *close, int *all)
{
    unsigned u;

    *all = 1;
    if (close - b < 6)
        return 0;
    u = hex4(b + 2, all);
    if (u >= 0xDC00 && u <= 0xDFFF)
        return 0;
    if (u < 0xD800 || u > 0xDBFF)
        return 6;
    if (close - (b + 6) < 6 || b[6] != '\\' || b[7] != 'u')
        return 0;
    u = hex4(b + 8, all);
    return u >= 0xDC00 && u <= 0xDFFF ? 12 : 0;
}

/*
 * The string at <p> (a '"'): past its closing quote, or NULL.  As cJSON:
 * its end is the first quote not right after a backslash (each backslash
 * takes the next byte), then every escape in it must be one of \b \f \n
 * \r \t \" \\ \/ or one u_escape() takes.  <*esc>: it has a backslash.
 * These are cJSON's two passes; str() below does them in one where they
 * cannot disagree.
 */
static const char *str_exact(const char *p, const char *e, int *esc)
{
    const char *q = p + 1, *close, *b;
    int n, all;

    *esc = 0;
    if ((close = memchr(q, '"', (size_t)(e - q))) == NULL)
        return NULL;
    while ((b = memchr(q, '\\', (size_t)(close - q))) != NULL) {
        if (b + 1 >= e)
            return NULL;
        *esc = 1;
        q = b + 2;
        if (q > close && (close = memchr(q, '"', (size_t)(e - q))) == NULL)
            return NULL;            /* that quote was escaped */
    }
    for (b = p + 1; *esc && (b = memchr(b, '\\', (size_t)(close - b))) != NULL; ) {
        switch (b[1]) {
        case 'b': case 'f': case 'n': case 'r': case 't':
        case '"': case '\\': case '/':
            b += 2;
            break;
        case 'u':
            if ((n = u_escape(b, close, &all)) == 0)
                return NULL;
            b += n;
            break;
        default:
            return NULL;
        }
        if (b >= close)
            break;
    }
    return close + 1;
}

/*
 * str_exact() in one pass over the backslashes: both of cJSON's passes see
 * every escape at the same place as long as each \u has four hex digits
 * (cJSON's second pass takes six bytes there, the first two), so an escape
 * is judged where it is found; a \u without them goes to str_exact().
 */
static const char *str(const char *p, const char *e, int *esc)
{
    const char *q = p + 1, *b;
    int n, all;

    *esc = 0;
    for (;;) {
        if ((b = tt_jstr_stop(q, e, 0)) >= e)
            return NULL;            /* no closing quote */
        if (*b == '"')
            return b + 1;
        if (b + 1 >= e)
            return NULL;            /* a backslash at the very end */
        *esc = 1;
        switch (b[1]) {
        case 'b': case 'f': case 'n': case 'r': case 't': case '\\': case '/':
        case '"':
            q = b + 2;
            break;
        case 'u':
            /* refused, or not four hex digits: cJSON's own two passes
             * decide (rare, so the second look costs nothing).  <e> as the
             * limit: four hex digits hold no quote, so a \u that reaches
             * the closing quote goes there as well */
            if ((n = u_escape(b, e, &all)) == 0 || !all)
                return str_exact(p, e, esc);
            q = b + n;
            break;
        default:
            return NULL;
        }
    }
}

static int num_byte(char c)
{
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'e' ||
           c == 'E' || c == '.';
}

/* an RFC 8259 number over all of [p, e) */
static int rfc_number(const char *p, const char *e)
{
    if (p < e && *p == '-')
        p++;
    if (p < e && *p == '0')
        p++;
    else if (p < e && *p >= '1' && *p <= '9')
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    if (p < e && *p == '.') {
        if (++p >= e || *p < '0' || *p > '9')
            return 0;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return 0;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    return p == e;
}

/* a number at <p>: as cJSON, strtod() over the run of [0-9+-eE.] bytes
 * there; past what it took, or NULL */
static const char *num(const char *p, const char *e)
{
    char small[64], *b = small, *after;
    size_t n = 0;
    const char *r;

    while (p + n < e && num_byte(p[n]))
        n++;
    if (rfc_number(p, p + n))
        return p + n;               /* all of it, as strtod() would */
    if (n >= sizeof(small) && (b = malloc(n + 1)) == NULL)
        return NULL;
    memcpy(b, p, n);
    b[n] = '\0';
    (void)strtod(b, &after);
    r = after == b ? NULL : p + (after - b);
    if (b != small)
        free(b);
    return r;
}

static const char *value(const char *p, const char *e, int depth);

/* an array or object at <p>; past it, or NULL.  <items>: the array's length */
static const char *list(const char *p, const char *e, int depth, size_t *items)
{
    char close = *p == '[' ? ']' : '}';
    int esc;

    if (depth >= SCAN_DEPTH)
        return NULL;
    if (items)
        *items = 0;
    p = ws(p + 1, e);
    if (p < e && *p == close)
        return p + 1;
    for (;;) {
        if (close == '}') {
            if (p >= e || *p != '"' || (p = str(p, e, &esc)) == NULL)
                return NULL;
            p = ws(p, e);
            if (p >= e || *p != ':')
                return NULL;
            p = ws(p + 1, e);
        }
        if ((p = value(p, e, depth + 1)) == NULL)
            return NULL;
        if (items)
            (*items)++;
        p = ws(p, e);
        if (p < e && *p == ',') {
            p = ws(p + 1, e);
            continue;
        }
        return p < e && *p == close ? p + 1 : NULL;
    }
}

static const char *value(const char *p, const char *e, int depth)
{
    int esc;

    if (p >= e)
        return NULL;
    switch (*p) {
    case 'n':
        return e - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    case 'f':
        return e - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 't':
        return e - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case '"':
        return str(p, e, &esc);
    case '[': case '{':
        return list(p, e, depth, NULL);
    default:
        return *p == '-' || (*p >= '0' && *p <= '9') ? num(p, e) : NULL;
    }
}

/* the members from_body() reads ("prompt" is reduced, not kept whole) */
static int wanted(const char *k, size_t n)
{
    int i = key_index(k, n);
    return i >= 0 && i != K_PROMPT;
}

struct out { char *p; size_t len, cap; };

static void put(struct out *o, const char *s, size_t n)
{
    if (o->p != NULL && o->len <= o->cap && n <= o->cap - o->len) {
        memcpy(o->p + o->len, s, n);
        o->len += n;
    } else {
        o->len = o->cap + 1;        /* cannot happen: the sum fits (below);
                                     * if it did, the body counts as unread */
    }
}

/*
 * Check the body ([p, e), a '{' after leading whitespace) as cJSON parses a
 * top-level object followed by nothing but " \t\r\n", and write to <o> an
 * object of its wanted members in order: the same bytes, except that a
 * "prompt" becomes 0 (not a list), [] (a list that starts with a number)
 * or ["",0,..] of its length.  A member whose key has an escape or a NUL
 * is kept whole: cJSON decides what it names.  <o> never needs more than
 * the body's length + 2.
 * 0, or -1 when cJSON would not parse the body.
 */
static int top_level(const char *p, const char *e, struct out *o)
{
    int first = 1, esc;

    p = ws(p, e);
    if (p >= e || *p != '{')
        return -1;
    put(o, "{", 1);
    p = ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
    } else {
        for (;;) {
            const char *k = p, *v, *ve;
            size_t n;
            if (p >= e || *p != '"' || (p = str(p, e, &esc)) == NULL)
                return -1;
            n = (size_t)(p - k) - 2;
            if (!esc && memchr(k + 1, '\0', n) != NULL)
                esc = 1;            /* cJSON's key ends at the NUL */
            p = ws(p, e);
            if (p >= e || *p != ':')
                return -1;
            v = ws(p + 1, e);
            if (!esc && n == 6 && memcmp(k + 1, "prompt", 6) == 0) {
                size_t items = 0, i;
                int is_list = v < e && *v == '[';
                if ((ve = is_list ? list(v, e, 1, &items) : value(v, e, 1)) == NULL)
                    return -1;
                put(o, first ? "" : ",", first ? 0 : 1);
                put(o, "\"prompt\":", 9);
                if (!is_list) {
                    put(o, "0", 1);     /* not a list: no shorter than it */
                } else if (items == 0 || *ws(v + 1, e) == '-' ||
                           (*ws(v + 1, e) >= '0' && *ws(v + 1, e) <= '9')) {
                    put(o, "[]", 2);
                } else {
                    put(o, "[\"\"", 3);
                    for (i = 1; i < items; i++)
                        put(o, ",0", 2);
                    put(o, "]", 1);
                }
                first = 0;
            } else {
                if ((ve = value(v, e, 1)) == NULL)
                    return -1;
                if (esc || wanted(k + 1, n)) {
                    put(o, first ? "" : ",", first ? 0 : 1);
                    put(o, k, (size_t)(ve - k));
                    first = 0;
                }
            }
            p = ws(ve, e);
            if (p < e && *p == ',') {
                p = ws(p + 1, e);
                continue;
            }
            if (p >= e || *p != '}')
                return -1;
            p++;
            break;
        }
    }
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    if (p < e)
        return -1;                  /* trailing bytes: tt_json_parse() refuses them */
    put(o, "}", 1);
    return o->len <= o->cap ? 0 : -1;
}

/* the body's facts: the small object of top_level(), or (whole_tree) the
 * whole body's tree; 0, or -1 when it is not a JSON object */
static int read_body(struct tt_inspect *in, enum tt_api api, struct tt_request *r)
{
    const cJSON *root;
    char small[1024];
    struct out o = { small, 0, sizeof(small) };
    int rc = -1;

    if (in->whole_tree) {
        root = tt_json_parse(in->buf, in->len);
    } else {
        if (in->len + 2 > sizeof(small) && (o.p = malloc(in->len + 2)) == NULL)
            return -1;
        if (o.p != small)
            o.cap = in->len + 2;
        root = top_level(in->buf, in->buf + in->len, &o) == 0 ?
               tt_json_parse(o.p, o.len) : NULL;
    }
    if (cJSON_IsObject(root)) {
        from_body(root, api, r);
        rc = 0;
    }
    tt_json_reset();
    if (o.p != small)
        free(o.p);
    return rc;
}

void tt_inspect_finish(struct tt_inspect *in, struct tt_request *r)
{
    enum tt_api api = r->api;

    if (api == TT_API_OTHER)
        api = tt_api_detect(r->path, strlen(r->path));

    if (!in->gave_up && in->len > 0) {
        if (read_body(in, api, r) < 0)
            r->inspect_skipped = "not_json";
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

int tt_inspect_body(const struct tt_inspect *in, const char **body, size_t *len)
{
    if (in->gave_up || !in->started)
        return -1;
    *body = in->buf;
    *len = in->len;
    return 0;
}
