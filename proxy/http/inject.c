/*
 * --inject-usage, the pure parts (interface in inject.h): the request body
 * rewrite and the incremental response filter.  Called by the proxy's
 * request and response paths when the option is on; owns the held bytes of
 * one event.  The JSON is never re-serialised: a small scanner finds the
 * top-level members, and bytes are inserted or cut at their positions, so
 * everything else stays byte for byte.
 *
 * Decisions where the spec is silent:
 *  - A request whose stream_options.include_usage is present (true or
 *    false) is left alone: the client said what it wants.
 *  - Only top-level members count; a "stream_options" inside a message's
 *    text is text.  A key written with escapes is not recognised (the body
 *    is then left alone).
 *  - Removing "usage": null from content chunks is right only for servers
 *    that add it because usage was asked for (OpenAI's API); TGI and others
 *    send it regardless, so the caller turns it on per upstream
 *    (<strip_null>).  Usage attached to a chunk that has choices (DeepSeek's
 *    finish chunk) cannot be removed without changing that chunk: it is
 *    left, and the caller should not inject for such servers.
 *  - An event over TT_INJECT_EVENT_MAX bytes is forwarded unfiltered as it
 *    arrives.
 */
#include "proxy/http/inject.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/base/jsonarena.h"

/* ---- a top-level member scanner --------------------------------------- */

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* s[i] == '"': the index after the closing quote, or n */
static size_t skip_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n;
}

/* the index after the value starting at s[i], or n */
static size_t skip_value(const char *s, size_t i, size_t n)
{
    int depth = 0;

    if (i >= n)
        return n;
    if (s[i] == '"')
        return skip_string(s, i, n);
    if (s[i] != '{' && s[i] != '[') {
        while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' &&
               s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            i++;
        return i;
    }
    while (i < n) {
        char c = s[i];
        if (c == '"') {
            i = skip_string(s, i, n);
            continue;
        }
        if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return i + 1;
        i++;
    }
    return n;
}

struct member {
    size_t start;           /* the key's opening quote */
    size_t key, key_len;    /* inside the quotes */
    size_t val, val_end;
};

/* the member at *pos (just after '{' or a ','): 1, 0 at '}', -1 malformed */
static int next_member(const char *s, size_t n, size_t *pos, struct member *m)
{
    size_t i = skip_ws(s, *pos, n);

    if (i < n && s[i] == ',')
        i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == '}')
        return 0;
    if (i >= n || s[i] != '"')
        return -1;
    m->start = i;
    m->key = i + 1;
    i = skip_string(s, i, n);
    if (i >= n)
        return -1;
    m->key_len = i - 1 - m->key;
    i = skip_ws(s, i, n);
    if (i >= n || s[i] != ':')
        return -1;
    m->val = skip_ws(s, i + 1, n);
    m->val_end = skip_value(s, m->val, n);
    if (m->val_end >= n)
        return -1;
    *pos = m->val_end;
    return 1;
}

static int key_is(const char *s, const struct member *m, const char *k)
{
    size_t n = strlen(k);
    return m->key_len == n && memcmp(s + m->key, k, n) == 0;
}

/* ---- the request ------------------------------------------------------- */

static int splice(const char *body, size_t len, size_t at, const char *ins,
                  int comma, char **out, size_t *out_len)
{
    size_t k = strlen(ins), n = len + k + (comma ? 1 : 0);
    char *p = malloc(n);

    if (p == NULL)
        return -1;
    memcpy(p, body, at);
    memcpy(p + at, ins, k);
    if (comma)
        p[at + k] = ',';
    memcpy(p + at + k + (comma ? 1 : 0), body + at, len - at);
    *out = p;
    *out_len = n;
    return 1;
}

/* is the object whose '{' is at s[i] empty? */
static int empty_object(const char *s, size_t i, size_t n)
{
    i = skip_ws(s, i + 1, n);
    return i < n && s[i] == '}';
}

int tt_inject_request(const char *body, size_t len, char **out, size_t *out_len)
{
    const cJSON *root, *so;
    int has_so;
    size_t top, pos;
    struct member m;
    int rc;

    root = tt_json_parse(body, len);
    if (!cJSON_IsObject(root) ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream"))) {
        tt_json_reset();
        return 0;
    }
    so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    has_so = so != NULL && !cJSON_IsNull(so);
    if ((has_so && !cJSON_IsObject(so)) ||
        cJSON_GetObjectItemCaseSensitive(so, "include_usage") != NULL) {
        tt_json_reset();
        return 0;
    }
    tt_json_reset();

    top = skip_ws(body, 0, len);
    if (top >= len || body[top] != '{')
        return 0;           /* a BOM or the like: leave it */
    if (!has_so)
        return splice(body, len, top + 1, "\"stream_options\":{\"include_usage\":true}",
                      !empty_object(body, top, len), out, out_len);
    pos = top + 1;
    while ((rc = next_member(body, len, &pos, &m)) == 1)
        if (key_is(body, &m, "stream_options") && body[m.val] == '{')
            return splice(body, len, m.val + 1, "\"include_usage\":true",
                          !empty_object(body, m.val, len), out, out_len);
    return 0;               /* not found as written (escaped key): leave it */
}

/* ---- the response filter ---------------------------------------------- */

void tt_inject_filter_init(struct tt_inject_filter *f, int strip_null)
{
    memset(f, 0, sizeof(*f));
    f->strip_null = strip_null ? 1 : 0;
}

void tt_inject_filter_free(struct tt_inject_filter *f)
{
    free(f->buf);
    f->buf = NULL;
    f->len = f->cap = 0;
}

/* hold <p>[0..n) as part of the current event */
static void hold(struct tt_inject_filter *f, const char *p, size_t n,
                 tt_inject_out out, void *ctx)
{
    if (n == 0)
        return;
    if (f->passthrough || f->len + n > TT_INJECT_EVENT_MAX) {
        if (f->len > 0)
            out(ctx, f->buf, f->len);
        f->len = 0;
        f->passthrough = 1;
        out(ctx, p, n);
        return;
    }
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 1024;
        char *q;
        while (cap < f->len + n)
            cap *= 2;
        q = realloc(f->buf, cap);
        if (q == NULL) {
            /* cannot hold: forward what there is, unfiltered */
            if (f->len > 0)
                out(ctx, f->buf, f->len);
            f->len = 0;
            f->passthrough = 1;
            out(ctx, p, n);
            return;
        }
        f->buf = q;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, p, n);
    f->len += n;
}

/*
 * The one data line of the held event: [*d, *d + *dn) in f->buf.  Returns
 * 0, or -1 when the event has none or several (then it is left alone).
 */
static int data_line(const struct tt_inject_filter *f, size_t *d, size_t *dn)
{
    const char *s = f->buf;
    size_t i = 0, n = f->len;
    int found = 0;

    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n' && s[e] != '\r')
            e++;
        if (e - i >= 5 && memcmp(s + i, "data:", 5) == 0) {
            size_t v = i + 5;
            if (v < e && s[v] == ' ')
                v++;
            if (found++)
                return -1;
            *d = v;
            *dn = e - v;
        }
        i = e;
        if (i < n && s[i] == '\r')
            i++;
        if (i < n && s[i] == '\n')
            i++;
    }
    return found == 1 ? 0 : -1;
}

/* the held event is complete: forward it, changed or dropped */
static void event_done(struct tt_inject_filter *f, tt_inject_out out, void *ctx)
{
    const char *s = f->buf;
    size_t d = 0, dn = 0, pos, cut0 = 0, cut1 = 0, prev_end = 0;
    struct member m;
    int choices_empty = 0, usage_obj = 0, first = 1;

    if (f->passthrough || f->len == 0 || data_line(f, &d, &dn) != 0 ||
        dn == 0 || s[d] != '{') {
        if (!f->passthrough && f->len > 0)
            out(ctx, f->buf, f->len);
        goto reset;
    }
    pos = d + 1;
    while (next_member(s, d + dn, &pos, &m) == 1) {
        if (key_is(s, &m, "choices") && s[m.val] == '[' &&
            skip_ws(s, m.val + 1, d + dn) == m.val_end - 1)
            choices_empty = 1;
        if (key_is(s, &m, "usage")) {
            if (s[m.val] == '{') {
                usage_obj = 1;
            } else if (m.val_end - m.val == 4 && memcmp(s + m.val, "null", 4) == 0) {
                /* cut the member with one comma: the one before it, or
                 * (as the first member) the one after it */
                cut0 = first ? m.start : prev_end;
                cut1 = m.val_end;
                if (first) {
                    size_t k = skip_ws(s, cut1, d + dn);
                    if (k < d + dn && s[k] == ',')
                        cut1 = skip_ws(s, k + 1, d + dn);
                }
            }
        }
        first = 0;
        prev_end = m.val_end;
    }
    if (choices_empty && usage_obj) {
        f->dropped++;               /* the usage-only chunk: not the client's */
    } else if (cut1 > cut0 && f->strip_null) {
        f->stripped++;
        out(ctx, s, cut0);
        out(ctx, s + cut1, f->len - cut1);
    } else {
        out(ctx, s, f->len);
    }
reset:
    f->len = 0;
    f->line_len = 0;
    f->passthrough = 0;
}

void tt_inject_filter_feed(struct tt_inject_filter *f, const char *p, size_t n,
                           tt_inject_out out, void *ctx)
{
    size_t i, from = 0;

    for (i = 0; i < n; i++) {
        char c = p[i];

        if (f->end_cr) {
            /* the event ended with CR: an LF right after belongs to it */
            f->end_cr = 0;
            f->cr = 0;
            if (c == '\n') {
                hold(f, p + from, i + 1 - from, out, ctx);
                from = i + 1;
                event_done(f, out, ctx);
                continue;
            }
            hold(f, p + from, i - from, out, ctx);
            from = i;
            event_done(f, out, ctx);
        }
        if (c == '\n' && f->cr) {
            f->cr = 0;              /* the LF of a CRLF: counted at the CR */
            continue;
        }
        f->cr = c == '\r';
        if (c != '\n' && c != '\r') {
            f->line_len++;
            continue;
        }
        if (f->line_len > 0) {
            f->line_len = 0;        /* a line ended */
            continue;
        }
        /* a blank line: the event ends here */
        if (c == '\r') {
            f->end_cr = 1;
            continue;
        }
        hold(f, p + from, i + 1 - from, out, ctx);
        from = i + 1;
        event_done(f, out, ctx);
    }
    hold(f, p + from, n - from, out, ctx);
}

void tt_inject_filter_finish(struct tt_inject_filter *f, tt_inject_out out, void *ctx)
{
    if (f->end_cr) {
        f->end_cr = 0;
        event_done(f, out, ctx);
    } else if (f->len > 0 && !f->passthrough) {
        out(ctx, f->buf, f->len);   /* an unterminated event: as it is */
    }
    f->len = 0;
    f->line_len = 0;
    f->cr = 0;
    f->passthrough = 0;
}
