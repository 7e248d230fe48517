/*
 * The fast path of the OpenAI Chat Completions decoder: a scanner for the
 * common chunk shape (vLLM, SGLang, llama.cpp, OpenAI, DeepSeek) that reads
 * exactly what proxy/decode/dec_openai.c would take from the cJSON tree (model,
 * choices[].index, delta.content / reasoning_content / reasoning / refusal /
 * tool_calls[].function.name / arguments, finish_reason, usage) and reports
 * it through the same tt_dec_* calls in the same order, without building a
 * tree.  Called by proxy/decode/stream.c for each event of an openai.chat stream
 * (tt_dec_openai_chat.fast) before the cJSON parse.
 *
 * The same scanner reads a non-streaming body (a chat.completion: the
 * choices' text in "message" rather than "delta"), called by stream.c once
 * with the whole body, without the memos (nothing repeats in one body) and
 * with a scratch as large as the body.  dec_openai.c takes the delta when
 * it is an object, else the message; so does the scanner, whichever comes
 * first in the choice (a message read before a delta object gives up).
 *
 * Certainty first: the scanner only accepts strict RFC 8259 JSON and gives
 * up (returns -1, nothing reported, the caller parses with cJSON) on
 * anything it is not sure about: \u escapes cJSON would refuse or cut
 * (\u0000, bad hex, lone surrogates) and any \u in a key, control
 * characters, numbers over 40 bytes, counts it would have to convert
 * other than plain integers, duplicate keys that
 * matter, deep nesting, an "error" member other than null, a "timings"
 * member, a legacy function_call, a choice with neither a delta nor a
 * message object, events over SCRATCH bytes.
 * Everything else is validated and skipped, so an event the scanner accepts
 * is one cJSON accepts and reads the same way.  tests/unit/test_fastpath.c
 * runs every fixture, whole and split, with the fast path on and off and
 * compares the records byte for byte, and mutated events one by one.
 */
#include "proxy/decode/decode.h"
#include "proxy/base/jstr.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SCRATCH   4096      /* longest event taken; its strings, unescaped */
#define MAXCHOICE 4
#define MAXTOOL   4
#define MAXDEPTH  32

/* tt_stream_fast = 0 sends every event to cJSON (tests compare both) */
int tt_stream_fast = 1;

struct tool { const char *name, *args; };

struct choice {
    int64_t     index;          /* -1: absent or not a count */
    int         text;           /* the object the text came from (T_*), 0 none */
    const char *content, *rc, *rs, *refusal, *finish;
    struct tool tool[MAXTOOL];
    unsigned    ntool;
    unsigned    seen;           /* keys met (duplicates: give up) */
};

struct chunk {
    const char   *model;
    int           has_choices;
    unsigned      nch;
    int           has_usage;    /* "usage" is an object */
    int64_t       in, out, rsn_d, rsn, cached_d, cached_hit;
    struct choice ch[MAXCHOICE];    /* last: cleared one by one as met */
};

/*
 * The prefix memo.  The chunks of one response mostly begin with the same
 * bytes ({"id":"chatcmpl-..","object":"chat.completion.chunk","created":..,
 * "model":"..",), about half of each event.  The scan of those bytes is a
 * function of the bytes alone, so the state it ends in (the root keys met,
 * the model) is kept with them; an event that begins with exactly the same
 * bytes resumes the scan after them.  Kept only when the prefix holds no
 * member the chunk's facts depend on other than the model (usage, choices
 * or a key that gives up come later), and the model has no escapes.
 *
 * The shape memo goes further for the rest of the event.  Between one
 * token's chunk and the next, usually only string values change (the
 * content, and fields like OpenAI's "obfuscation"): the keys, numbers,
 * literals and punctuation are the same bytes.  A successful scan keeps
 * the bytes after the prefix with the place of every string value in them
 * (a hole) and the facts it read; the scan's path through an event is a
 * function of everything but the holes' contents, which it only stores.
 * So an event whose bytes outside the holes are exactly the kept ones, and
 * whose holes hold valid strings, has the kept facts with each hole's
 * string in its slot: the scanner compares the fixed bytes, reads the
 * strings, and is done.  Any difference falls back to the scan, which
 * keeps the new shape.
 */
#define MEMO_BYTES  640         /* the prefix, then the shape's bytes */
#define PREFIX_BYTES 384
#define SHAPE_BYTES 512
#define SHAPE_HOLES 20         /* the memo within malloc's small sizes */

struct hole {
    uint16_t q0, q1;            /* the value's first byte; past its last */
    int16_t  slot;              /* a string: the fact's offset in struct
                                 * chunk, or HOLE_STR (skipped); HOLE_NUM,
                                 * HOLE_BOOL: a skipped number, true or
                                 * false (null stays a fixed byte: it
                                 * decides a legacy function_call) */
};

#define HOLE_STR (-1)
#define HOLE_NUM (-2)
#define HOLE_BOOL (-3)

/* the chunk's facts, as far as the shape keeps them (one choice) */
#define SHAPE_FACTS (offsetof(struct chunk, ch) + sizeof(struct choice))

struct tt_fast_memo {
    size_t   len;               /* prefix bytes, up to the "choices" key; 0 none */
    unsigned seen;              /* root keys met in them (the model: 1) */
    size_t   model_off, model_len;  /* the model's raw bytes in the prefix */
    int      has_model;
    int      whole;             /* no prefix for this response: shapes
                                 * cover whole events (memo_keep) */
    char     bytes[MEMO_BYTES]; /* [0, len): the prefix; then the shape's */
    /* the shape: the bytes after the prefix; 0 none */
    size_t        slen;
    unsigned      nhole;
    uint32_t      stable;       /* bit i: hole i (skipped, not a fact) is
                                 * compared as fixed bytes (shape_match) */
    struct hole   hole[SHAPE_HOLES];
    unsigned char facts[SHAPE_FACTS];
};

/* string values met by a scan after <base> (the prefix's end), for the
 * shape memo; <base> NULL: none yet */
struct holes {
    const char  *base;
    const char  *facts;         /* the struct chunk the scan fills */
    unsigned     n;
    int          over;          /* more than SHAPE_HOLES, or a slot beyond one choice */
    struct hole  h[SHAPE_HOLES];
};

struct cur {
    const char *p, *e;
    char       *o, *oe;         /* scratch for unescaped strings */
    int         depth;
    struct holes *log;          /* where string values are noted, or NULL */
};

static void ws(struct cur *c)
{
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' ||
                           *c->p == '\r'))
        c->p++;
}

static int peek(struct cur *c)
{
    ws(c);
    return c->p < c->e ? (unsigned char)*c->p : -1;
}

/*
 * The first byte a string cannot hold raw (control, quote, backslash) in
 * [q, e), or e.  Most strings of a chunk are ids, keys and one-token
 * contents, so the step is one compare of a whole string rather than a
 * loop over its bytes.
 */
static const char *plain_end(const char *q, const char *e)
{
    return tt_jstr_stop(q, e, 1);
}

/* four hex digits at [q, q + 4) (cJSON's parse_hex4 on valid ones), or -1 */
static long hex4(const char *q)
{
    long v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        unsigned char ch = (unsigned char)q[i];
        if (ch >= '0' && ch <= '9')
            v = v * 16 + (ch - '0');
        else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
            v = v * 16 + ((ch | 0x20) - 'a' + 10);
        else
            return -1;
    }
    return v;
}

/*
 * A \u escape at <q> (its backslash), before <e>: its code point, and in
 * <*len> its length (6, or 12 for a surrogate pair); -1 for what cJSON
 * would refuse or cut: a bad hex digit (cJSON reads it as 0), \u0000 (the
 * C string would end there), a lone or reversed surrogate.
 */
static long uesc(const char *q, const char *e, size_t *len)
{
    long hi, lo;

    if (e - q < 6 || (hi = hex4(q + 2)) <= 0 || (hi >= 0xDC00 && hi <= 0xDFFF))
        return -1;
    *len = 6;
    if (hi < 0xD800 || hi > 0xDBFF)
        return hi;
    if (e - q < 12 || q[6] != '\\' || q[7] != 'u' || (lo = hex4(q + 8)) < 0xDC00 ||
        lo > 0xDFFF)
        return -1;
    *len = 12;
    return 0x10000 + (((hi & 0x3FF) << 10) | (lo & 0x3FF));
}

/*
 * A string at c->p: its raw bytes (between the quotes) in <*s>, <*n>, and
 * whether it holds escapes (ESC_U: some of them \u); -1 on invalid escapes
 * (and \u ones uesc() refuses), control bytes, the end of the event.
 */
#define ESC   1
#define ESC_U 2

static int span(struct cur *c, const char **s, size_t *n, int *esc)
{
    const char *q;
    size_t ul;

    if (c->p >= c->e || *c->p != '"')
        return -1;
    q = ++c->p;
    *esc = 0;
    for (;;) {
        q = plain_end(q, c->e);
        if (q >= c->e)
            return -1;
        if (*q == '"')
            break;
        if (*q != '\\' || q + 1 >= c->e)
            return -1;      /* a control byte */
        if (q[1] == 'u') {
            if (uesc(q, c->e, &ul) < 0)
                return -1;
            *esc |= ESC | ESC_U;
            q += ul;
            continue;
        }
        if (!strchr("\"\\/bfnrt", q[1]) || q[1] == '\0')
            return -1;      /* an invalid escape */
        *esc |= ESC;
        q += 2;
    }
    *s = c->p;
    *n = (size_t)(q - c->p);
    c->p = q + 1;
    return 0;
}

/* a string value into the scratch, unescaped and NUL-terminated; string
 * facts come only through val_str, which notes them for the shape memo */
static int str(struct cur *c, const char **out)
{
    const char *s;
    size_t n, i;
    int esc;
    char *o = c->o;

    if (span(c, &s, &n, &esc) != 0 || n + 1 > (size_t)(c->oe - o))
        return -1;
    if (!esc) {
        memcpy(o, s, n);
        o += n;
    } else {
        for (i = 0; i < n; i++) {
            if (s[i] != '\\') {
                *o++ = s[i];
                continue;
            }
            switch (s[++i]) {
            case 'b':  *o++ = '\b'; break;
            case 'f':  *o++ = '\f'; break;
            case 'n':  *o++ = '\n'; break;
            case 'r':  *o++ = '\r'; break;
            case 't':  *o++ = '\t'; break;
            case 'u': {     /* as cJSON's utf16_literal_to_utf8 */
                size_t ul;
                unsigned long cp = (unsigned long)uesc(s + i - 1, s + n, &ul);

                i += ul - 2;
                if (cp < 0x80) {
                    *o++ = (char)cp;
                } else if (cp < 0x800) {
                    *o++ = (char)(0xC0 | (cp >> 6));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    *o++ = (char)(0xE0 | (cp >> 12));
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                } else {
                    *o++ = (char)(0xF0 | (cp >> 18));
                    *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default:   *o++ = s[i]; break;     /* " \ / */
            }
        }
    }
    *o++ = '\0';
    *out = c->o;
    c->o = o;
    return 0;
}

/* a key (raw bytes; a key with escapes other than \u matches none of
 * ours, whose names hold no character JSON escapes; one with \u gives up,
 * it might spell one of ours) */
struct key { const char *s; size_t n; };

static int is(const struct key *k, const char *name, size_t n)
{
    return k->n == n && memcmp(k->s, name, n) == 0;
}

#define IS(k, lit) is((k), lit, sizeof(lit) - 1)

static int read_key(struct cur *c, struct key *k)
{
    int esc;

    if (span(c, &k->s, &k->n, &esc) != 0 || (esc & ESC_U))
        return -1;
    if (esc)
        k->n = (size_t)-1;  /* matches nothing */
    return 0;
}

static int is_digit(int ch)
{
    return ch >= '0' && ch <= '9';
}

/* an RFC number of at most 40 bytes; <*v> = its value when it is a plain
 * count (digits only, no leading zero, at most 15 digits), else -2; <v>
 * NULL: validated and skipped only (a timestamp, a logprob) */
static int num(struct cur *c, int64_t *v)
{
    const char *s = c->p, *q = s, *e = c->e, *d;
    int plain = 1;

    if (q < e && *q == '-') {
        plain = 0;
        q++;
    }
    if (q >= e || !is_digit(*q))
        return -1;
    d = q;
    if (*q == '0')
        q++;
    else
        while (q < e && is_digit(*q))
            q++;
    if (q < e && *q == '.') {
        plain = 0;
        q++;
        if (q >= e || !is_digit(*q))
            return -1;
        while (q < e && is_digit(*q))
            q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        plain = 0;
        q++;
        if (q < e && (*q == '+' || *q == '-'))
            q++;
        if (q >= e || !is_digit(*q))
            return -1;
        while (q < e && is_digit(*q))
            q++;
    }
    if (q - s > 40)
        return -1;          /* cJSON reads at most 63 bytes of a number */
    c->p = q;
    if (v != NULL) {
        int64_t n = 0;

        if (!plain || q - d > 15) {
            *v = -2;        /* a nanosecond timestamp: skipped only */
            return 0;
        }
        for (; d < q; d++)
            n = n * 10 + (*d - '0');
        *v = n;
    }
    return 0;
}

/* the next non-blank byte, consumed (-1 at the end, nothing consumed) */
static int next(struct cur *c)
{
    int ch = peek(c);

    if (ch >= 0)
        c->p++;
    return ch;
}

static int lit(struct cur *c, const char *w, size_t n)
{
    if ((size_t)(c->e - c->p) < n || memcmp(c->p, w, n) != 0)
        return -1;
    c->p += n;
    return 0;
}

static int skip(struct cur *c);

/* a value from <q0> to c->p noted for the shape memo: a string read into
 * the fact at <slot>, or (<slot> NULL) a skipped value of <kind> */
static void hole(struct cur *c, const char *q0, const char **slot, int kind)
{
    struct holes *hs = c->log;
    struct hole *h;
    ptrdiff_t off = kind;

    if (hs == NULL || hs->base == NULL || q0 < hs->base)
        return;
    if (slot != NULL) {
        off = (const char *)slot - hs->facts;
        if (off < 0 || (size_t)off + sizeof(*slot) > SHAPE_FACTS)
            hs->over = 1;       /* a second choice's: not kept */
    }
    if (hs->n == SHAPE_HOLES || c->p - hs->base > SHAPE_BYTES) {
        hs->over = 1;
        return;
    }
    h = &hs->h[hs->n++];
    h->q0 = (uint16_t)(q0 - hs->base);
    h->q1 = (uint16_t)(c->p - hs->base);
    h->slot = (int16_t)off;
}

/* "{" or "[" entered; members skipped */
static int skip_container(struct cur *c, char close)
{
    int first = 1;

    if (++c->depth > MAXDEPTH)
        return -1;
    c->p++;
    for (;;) {
        struct key k;
        int ch = peek(c);

        if (ch == close && first) {
            c->p++;
            break;
        }
        if (close == '}') {
            if (read_key(c, &k) != 0 || peek(c) != ':')
                return -1;
            c->p++;
        }
        if (skip(c) != 0)
            return -1;
        ch = next(c);
        if (ch == close)
            break;
        if (ch != ',')
            return -1;
        first = 0;
    }
    c->depth--;
    return 0;
}

/* any value, validated and forgotten */
static int skip(struct cur *c)
{
    int ch = peek(c);

    switch (ch) {
    case '"': {
        const char *q0 = c->p, *s;
        size_t n;
        int esc;

        if (span(c, &s, &n, &esc) != 0)
            return -1;
        hole(c, q0, NULL, HOLE_STR);
        return 0;
    }
    case '{':
        return skip_container(c, '}');
    case '[':
        return skip_container(c, ']');
    case 't':
    case 'f': {
        const char *q0 = c->p;

        if (ch == 't' ? lit(c, "true", 4) : lit(c, "false", 5))
            return -1;
        hole(c, q0, NULL, HOLE_BOOL);      /* a flag may change */
        return 0;
    }
    case 'n':
        return lit(c, "null", 4);
    default: {
        const char *q0 = c->p;

        if (num(c, NULL) != 0)
            return -1;
        hole(c, q0, NULL, HOLE_NUM);     /* a timestamp or a logprob changes */
        return 0;
    }
    }
}

/* a value read as tt_jstr does: the string, else NULL */
static int val_str(struct cur *c, const char **out)
{
    if (peek(c) == '"') {
        const char *q0 = c->p;
        if (str(c, out) != 0)
            return -1;
        hole(c, q0, out, 0);
        return 0;
    }
    *out = NULL;
    return skip(c);
}

/* a value read as tt_jint does: the count, else -1; numbers that are not
 * plain counts give up (cJSON's double conversion decides) */
static int val_count(struct cur *c, int64_t *out)
{
    int ch = peek(c);

    *out = -1;
    if (ch == '-' || is_digit(ch)) {
        if (num(c, out) != 0 || *out == -2)
            return -1;
        return 0;
    }
    return skip(c);
}

/*
 * The members of an object, one callback per key (with c->p at its value).
 * The callback returns 0 when it consumed the value, 1 to skip it, -1 to
 * give up.  Keys are compared after unescaping (as cJSON does).
 */
typedef int (*member_fn)(struct cur *c, const struct key *key, void *ctx);

static int members(struct cur *c, member_fn fn, void *ctx);

static int object(struct cur *c, member_fn fn, void *ctx)
{
    if (peek(c) != '{' || ++c->depth > MAXDEPTH)
        return -1;
    c->p++;
    if (peek(c) == '}') {
        c->p++;
        c->depth--;
        return 0;
    }
    return members(c, fn, ctx);
}

/* the members of an entered object from a key on, and its end */
static int members(struct cur *c, member_fn fn, void *ctx)
{
    for (;;) {
        struct key k;
        int rc, ch;

        if (peek(c) != '"' || read_key(c, &k) != 0 || peek(c) != ':')
            return -1;
        c->p++;
        rc = fn(c, &k, ctx);
        if (rc < 0)
            return -1;
        if (rc > 0 && skip(c) != 0)
            return -1;
        ch = next(c);
        if (ch == '}')
            break;
        if (ch != ',')
            return -1;
    }
    c->depth--;
    return 0;
}

/*
 * The elements of the array at c->p, one callback each (with c->p at the
 * element); the callback returns 0 when it consumed it, -1 to give up.
 */
typedef int (*elem_fn)(struct cur *c, void *ctx);

static int array(struct cur *c, elem_fn fn, void *ctx)
{
    if (peek(c) != '[' || ++c->depth > MAXDEPTH)
        return -1;
    c->p++;
    if (peek(c) == ']') {
        c->p++;
        c->depth--;
        return 0;
    }
    for (;;) {
        int sep;

        if (fn(c, ctx) != 0)
            return -1;
        sep = next(c);
        if (sep == ']')
            break;
        if (sep != ',')
            return -1;
    }
    c->depth--;
    return 0;
}

/* a key met once; a second time gives up (cJSON takes the first) */
static int once(unsigned *seen, unsigned bit)
{
    if (*seen & bit)
        return -1;
    *seen |= bit;
    return 0;
}

static int fn_function(struct cur *c, const struct key *k, void *ctx)
{
    struct tool *t = ctx;

    if (IS(k, "name"))
        return t->name == NULL ? val_str(c, &t->name) : -1;
    if (IS(k, "arguments"))
        return t->args == NULL ? val_str(c, &t->args) : -1;
    return 1;
}

struct toolctx { struct tool *t; int seen; };

static int fn_tool(struct cur *c, const struct key *k, void *ctx)
{
    struct toolctx *tc = ctx;

    if (!IS(k, "function"))
        return 1;
    if (tc->seen++)
        return -1;
    if (peek(c) != '{')
        return 1;               /* tt_jstr of a non-object: nothing */
    return object(c, fn_function, tc->t);
}

/* one element of tool_calls: an object's function, or two NULLs */
static int tool_elem(struct cur *c, void *ctx)
{
    struct choice *ch = ctx;

    if (ch->ntool == MAXTOOL)
        return -1;
    if (peek(c) == '{') {
        struct toolctx tc = { &ch->tool[ch->ntool], 0 };
        if (object(c, fn_tool, &tc) != 0)
            return -1;
    } else if (skip(c) != 0) {
        return -1;
    }
    ch->ntool++;            /* a non-object element reports two NULLs */
    return 0;
}

static int tool_calls(struct cur *c, struct choice *ch)
{
    if (peek(c) != '[')
        return 1;               /* not an array: no tool calls */
    return array(c, tool_elem, ch);
}

enum {
    K_CONTENT = 1, K_RC = 2, K_RS = 4, K_REFUSAL = 8, K_TOOLS = 16,
    K_INDEX = 32, K_DELTA = 64, K_FINISH = 128, K_MESSAGE = 256,
};

enum { T_DELTA = 1, T_MESSAGE = 2 };

/* the root keys met (rootctx.seen, the memo's seen) */
enum { R_MODEL = 1, R_CHOICES = 2, R_USAGE = 4, R_ERROR = 8 };

/* the members of the choice's delta, or of its message (a body) */
static int fn_delta(struct cur *c, const struct key *k, void *ctx)
{
    struct choice *ch = ctx;

    if (IS(k, "content"))
        return once(&ch->seen, K_CONTENT) ? -1 : val_str(c, &ch->content);
    if (IS(k, "reasoning_content"))
        return once(&ch->seen, K_RC) ? -1 : val_str(c, &ch->rc);
    if (IS(k, "reasoning"))
        return once(&ch->seen, K_RS) ? -1 : val_str(c, &ch->rs);
    if (IS(k, "refusal"))
        return once(&ch->seen, K_REFUSAL) ? -1 : val_str(c, &ch->refusal);
    if (IS(k, "tool_calls"))
        return once(&ch->seen, K_TOOLS) ? -1 : tool_calls(c, ch);
    if (IS(k, "function_call"))
        return peek(c) == 'n' ? 1 : -1;     /* legacy: cJSON's path */
    return 1;
}

static int fn_choice(struct cur *c, const struct key *k, void *ctx)
{
    struct choice *ch = ctx;

    if (IS(k, "index"))
        return once(&ch->seen, K_INDEX) ? -1 : val_count(c, &ch->index);
    if (IS(k, "delta")) {
        if (once(&ch->seen, K_DELTA))
            return -1;
        if (peek(c) != '{')
            return 1;           /* not an object: "message" decides */
        if (ch->text != 0)
            return -1;          /* a message read before it: the delta wins */
        ch->text = T_DELTA;
        return object(c, fn_delta, ch);
    }
    if (IS(k, "message")) {
        if (once(&ch->seen, K_MESSAGE))
            return -1;
        if (ch->text != 0 || peek(c) != '{')
            return 1;           /* a delta object wins; not an object: none */
        ch->text = T_MESSAGE;
        return object(c, fn_delta, ch);
    }
    if (IS(k, "finish_reason"))
        return once(&ch->seen, K_FINISH) ? -1 : val_str(c, &ch->finish);
    return 1;
}

/* one element of choices: an object with a delta or a message object */
static int choice_elem(struct cur *c, void *ctx)
{
    struct chunk *k = ctx;
    struct choice *ch;

    if (k->nch == MAXCHOICE)
        return -1;
    ch = &k->ch[k->nch++];
    memset(ch, 0, sizeof(*ch));
    ch->index = -1;
    return object(c, fn_choice, ch) != 0 || ch->text == 0 ? -1 : 0;
}

static int choices(struct cur *c, struct chunk *k)
{
    if (peek(c) != '[')
        return -1;
    k->has_choices = 1;
    return array(c, choice_elem, k);
}

struct usectx { struct chunk *k; unsigned seen; };

static int fn_cached(struct cur *c, const struct key *key, void *ctx)
{
    struct chunk *k = ctx;
    return IS(key, "cached_tokens") ?
           (k->cached_d != -3 ? -1 : val_count(c, &k->cached_d)) : 1;
}

static int fn_rdetails(struct cur *c, const struct key *key, void *ctx)
{
    struct chunk *k = ctx;
    return IS(key, "reasoning_tokens") ?
           (k->rsn_d != -3 ? -1 : val_count(c, &k->rsn_d)) : 1;
}

static int fn_usage(struct cur *c, const struct key *key, void *ctx)
{
    struct usectx *u = ctx;
    struct chunk *k = u->k;

    if (IS(key, "prompt_tokens"))
        return once(&u->seen, 1) ? -1 : val_count(c, &k->in);
    if (IS(key, "completion_tokens"))
        return once(&u->seen, 2) ? -1 : val_count(c, &k->out);
    if (IS(key, "reasoning_tokens"))
        return once(&u->seen, 4) ? -1 : val_count(c, &k->rsn);
    if (IS(key, "prompt_cache_hit_tokens"))
        return once(&u->seen, 8) ? -1 : val_count(c, &k->cached_hit);
    if (IS(key, "completion_tokens_details")) {
        if (once(&u->seen, 16))
            return -1;
        k->rsn_d = -3;          /* -3: not met inside the object */
        if (peek(c) != '{')
            return 1;
        return object(c, fn_rdetails, k);
    }
    if (IS(key, "prompt_tokens_details")) {
        if (once(&u->seen, 32))
            return -1;
        k->cached_d = -3;
        if (peek(c) != '{')
            return 1;
        return object(c, fn_cached, k);
    }
    return 1;
}

struct rootctx {
    struct chunk        *k;
    unsigned             seen;
    const char          *data;      /* the event */
    const char          *mraw;      /* the model's value in it */
    struct tt_fast_memo *keep;      /* where to keep the prefix, or NULL */
};

/*
 * The event's bytes before the "choices" key <key>, with the scan's state:
 * 1 when kept.  Else 0, and from then on the response has the empty
 * prefix (m->whole: its shapes cover whole events): usage or an escaped
 * model before "choices", or a prefix kept before that this event did not
 * match (a value that changes, such as a timestamp, before "choices").
 */
static int memo_keep(struct rootctx *rc, const struct key *key)
{
    struct tt_fast_memo *m = rc->keep;
    size_t len = (size_t)(key->s - 1 - rc->data);
    const char *model = rc->k->model;
    int changed = m->len > 0 || m->whole;

    m->len = 0;
    m->slen = 0;                /* a shape belongs to its prefix */
    m->seen = 0;
    m->has_model = 0;
    m->whole = 1;
    if (changed || (rc->seen & ~(unsigned)R_MODEL) != 0 || len > PREFIX_BYTES)
        return 0;
    if (model != NULL) {
        size_t n = strlen(model);
        const char *raw = rc->mraw + 1;
        if (raw + n + 1 > rc->data + len || memcmp(raw, model, n) != 0 || raw[n] != '"')
            return 0;               /* escaped: not kept */
        m->model_off = (size_t)(raw - rc->data);
        m->model_len = n;
        m->has_model = 1;
    }
    memcpy(m->bytes, rc->data, len);
    m->seen = rc->seen;
    m->len = len;
    m->whole = 0;
    return 1;
}

static int fn_root(struct cur *c, const struct key *key, void *ctx)
{
    struct rootctx *rc = ctx;
    struct chunk *k = rc->k;

    if (IS(key, "model")) {
        if (once(&rc->seen, R_MODEL))
            return -1;
        ws(c);
        rc->mraw = c->p;
        return val_str(c, &k->model);
    }
    if (IS(key, "choices")) {
        if (rc->keep != NULL && memo_keep(rc, key)) {
            /* the shape starts after the prefix: the values before it
             * are the prefix's (the model: memo_model) */
            c->log->base = rc->data + rc->keep->len;
            c->log->n = 0;
            c->log->over = 0;
        } else if (rc->keep != NULL && c->log->base != rc->data) {
            c->log->base = NULL;   /* values before here not noted: no shape */
        }
        return once(&rc->seen, R_CHOICES) ? -1 : choices(c, k);
    }
    if (IS(key, "usage")) {
        struct usectx u = { k, 0 };
        if (once(&rc->seen, R_USAGE))
            return -1;
        if (peek(c) != '{')
            return 1;           /* null: no usage */
        k->has_usage = 1;
        return object(c, fn_usage, &u);
    }
    if (IS(key, "error")) {
        /* null: no error (tt_dec_generic_error); a null is fixed bytes in a
         * kept shape, so a later error object is not read by the shape */
        if (once(&rc->seen, R_ERROR) || peek(c) != 'n')
            return -1;          /* rare and rich: cJSON's path */
        return 1;
    }
    if (IS(key, "timings"))
        return -1;
    return 1;
}

/* the model's bytes from the kept prefix into the scratch */
static void memo_model(const struct tt_fast_memo *m, const char *data,
                       struct chunk *k, struct cur *c)
{
    if (m->has_model) {
        memcpy(c->o, data + m->model_off, m->model_len);
        c->o[m->model_len] = '\0';
        k->model = c->o;
        c->o += m->model_len + 1;
    }
}

/* [a, a + n) == [b, b + n): short runs (most segments between holes)
 * compared in place, longer ones by memcmp */
static inline __attribute__((always_inline)) int same(const char *a, const char *b,
                                                      size_t n)
{
    uint64_t x, y, x2, y2;
    uint32_t u, w, u2, w2;

    if (n > 16)
        return memcmp(a, b, n) == 0;
    if (n >= 8) {           /* the first 8 bytes and the last 8 */
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        memcpy(&x2, a + n - 8, 8);
        memcpy(&y2, b + n - 8, 8);
        return ((x ^ y) | (x2 ^ y2)) == 0;
    }
    if (n >= 4) {
        memcpy(&u, a, 4);
        memcpy(&w, b, 4);
        memcpy(&u2, a + n - 4, 4);
        memcpy(&w2, b + n - 4, 4);
        return ((u ^ w) | (u2 ^ w2)) == 0;
    }
    for (; n > 0; n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

/* the hole <h> at c->p: its value read (a fact into its slot in <k>) or
 * validated as its kind; 0, with c->p past it */
static int hole_read(const struct hole *h, struct chunk *k, struct cur *c)
{
    const char *s;
    size_t n;
    int esc;

    if (h->slot >= 0)
        return str(c, (const char **)(void *)((char *)k + h->slot));
    if (h->slot == HOLE_NUM)
        return c->p < c->e && (*c->p == '-' || is_digit(*c->p)) ? num(c, NULL) : -1;
    if (h->slot == HOLE_BOOL)
        return lit(c, "true", 4) == 0 || lit(c, "false", 5) == 0 ? 0 : -1;
    return span(c, &s, &n, &esc);
}

/*
 * The event after the kept prefix, [p, e), against the kept shape: 0 and
 * the facts in <k> when only its holes differ.
 *
 * The bytes between two holes that are read (the facts, and skipped values
 * seen to change) are one segment, compared at once, holding the stable
 * holes: skipped values (an id, a timestamp, a flag) that were the kept
 * bytes.  Equal bytes are a valid value of the same extent (the kept one
 * was), so a segment that matches needs no read of them.  A segment that
 * does not is compared hole by hole: each stable hole is read as a hole,
 * and one whose bytes changed is read from then on (its bit cleared).
 */
static int shape_match(struct tt_fast_memo *m, const char *p, const char *e,
                       struct chunk *k, struct cur *c)
{
    const char *kept = m->bytes + m->len;
    size_t at = 0, to;
    unsigned i, j = 0;          /* j: the first hole of the segment */

    memcpy(k, m->facts, SHAPE_FACTS);
    if (m->stable == 0) {       /* every hole read (the common chunk) */
        for (i = 0; i < m->nhole; i++) {
            const struct hole *h = &m->hole[i];
            size_t seg = h->q0 - at;

            if ((size_t)(e - p) < seg || memcmp(p, kept + at, seg) != 0)
                return -1;
            c->p = p + seg;
            if (hole_read(h, k, c) != 0)
                return -1;
            p = c->p;
            at = h->q1;
        }
        to = m->slen - at;
        return (size_t)(e - p) == to && memcmp(p, kept + at, to) == 0 ? 0 : -1;
    }
    for (i = 0; i <= m->nhole; i++) {
        const struct hole *h = &m->hole[i];

        if (i < m->nhole && (m->stable >> i & 1u))
            continue;           /* inside the segment */
        to = i < m->nhole ? h->q0 : m->slen;
        if ((size_t)(e - p) < to - at || !same(p, kept + at, to - at)) {
            /* the segment's stable holes one by one, then its rest */
            if (j == i)
                return -1;
            for (; j < i; j++) {
                const struct hole *g = &m->hole[j];
                size_t seg = g->q0 - at;

                if ((size_t)(e - p) < seg || !same(p, kept + at, seg))
                    return -1;
                c->p = p + seg;
                if (hole_read(g, k, c) != 0)
                    return -1;
                if ((size_t)(c->p - (p + seg)) != (size_t)(g->q1 - g->q0) ||
                    !same(p + seg, kept + g->q0, (size_t)(g->q1 - g->q0)))
                    m->stable &= ~(1u << j);    /* it changes: read it */
                p = c->p;
                at = g->q1;
            }
            if ((size_t)(e - p) < to - at || !same(p, kept + at, to - at))
                return -1;
        }
        p += to - at;
        if (i == m->nhole)
            break;
        c->p = p;
        if (hole_read(h, k, c) != 0)
            return -1;
        p = c->p;
        at = h->q1;
        j = i + 1;
    }
    return p == e ? 0 : -1;
}

/*
 * Keep the shape of a scanned event (its bytes from hs->base on).  Every
 * string fact is read by val_str, which notes it as a hole, and the model
 * before the holes is the prefix's; so each pointer in the kept facts is
 * refilled when the shape is used.
 */
static void shape_keep(struct tt_fast_memo *m, const struct holes *hs,
                       const char *data, size_t len, const struct chunk *k)
{
    size_t n;
    unsigned i;

    m->slen = 0;
    if (hs->base == NULL || hs->over || hs->base != data + m->len || k->nch > 1)
        return;
    n = (size_t)(data + len - hs->base);
    if (n == 0 || n > SHAPE_BYTES || m->len + n > MEMO_BYTES)
        return;
    memcpy(m->bytes + m->len, hs->base, n);
    memcpy(m->hole, hs->h, hs->n * sizeof(hs->h[0]));
    memcpy(m->facts, k, SHAPE_FACTS);
    m->nhole = hs->n;
    m->stable = 0;
    for (i = 0; i < hs->n; i++)     /* skipped values: fixed until they change */
        if (hs->h[i].slot < 0)
            m->stable |= 1u << i;
    m->slen = n;
}

/* the facts before a scan: nothing met, the counts absent */
static void chunk_init(struct chunk *k)
{
    memset(k, 0, offsetof(struct chunk, ch));
    k->in = k->out = k->rsn = k->cached_hit = -1;
    k->rsn_d = k->cached_d = -1;
}

/* the event at <data> into <k>, its strings into <scratch> (<cap> bytes);
 * <m> the response's memo, or NULL (a body: none); 0, or -1 to give up */
static int scan(const char *data, size_t len, struct chunk *k, char *scratch,
                size_t cap, struct tt_fast_memo *m, unsigned *hits,
                unsigned *shape_hits)
{
    struct holes hs;            /* h[] is written before it is read */
    struct cur c = { data, data + len, scratch, scratch + cap, 0, NULL };
    struct rootctx rc = { k, 0, data, NULL, NULL };

    int pre;

    hs.base = NULL;
    hs.facts = (const char *)k;
    hs.n = 0;
    hs.over = 0;
    /* the same bytes as the kept prefix (maybe empty) */
    pre = m != NULL && len > m->len && memcmp(data, m->bytes, m->len) == 0;

    if (pre && m->slen > 0 && shape_match(m, data + m->len, data + len, k, &c) == 0) {
        memo_model(m, data, k, &c);
        (*shape_hits)++;
        return 0;
    }
    if (pre && m->len > 0) {
        /* the scan's state after the prefix */
        c.o = scratch;
        chunk_init(k);
        rc.seen = m->seen;
        memo_model(m, data, k, &c);
        c.p = data + m->len;
        c.depth = 1;
        hs.base = c.p;
        c.log = &hs;
        (*hits)++;
        if (members(&c, fn_root, &rc) != 0)
            return -1;
    } else {
        c.p = data;
        c.o = scratch;
        chunk_init(k);
        rc.keep = m;
        if (m != NULL) {
            c.log = &hs;        /* from the prefix's end on (fn_root) */
            if (m->whole || m->len > 0)
                hs.base = data; /* or no prefix: from the start */
        }
        if (object(&c, fn_root, &rc) != 0)
            return -1;
    }
    ws(&c);
    if (c.p != c.e)
        return -1;      /* trailing bytes: malformed */
    if (m != NULL)
        shape_keep(m, &hs, data, len, k);
    return 0;
}

/* an inner details count as tt_jint(tt_jget(u, details), key) gives it:
 * -1 when the object or the key is absent (-3: object without the key) */
static int64_t detail(int64_t v)
{
    return v == -3 ? -1 : v;
}

int tt_dec_openai_chat_fast(struct tt_stream *st, const char *data, size_t len)
{
    char stack[SCRATCH], *scratch = stack;
    struct tt_fast_memo *m = NULL;
    struct chunk k;
    unsigned i, t;
    int rc;

    if (!tt_stream_fast)
        return -1;
    if (!tt_dec_streaming(st)) {
        /* a whole body: no memo; its strings, unescaped, take at most
         * its bytes (each string's quotes make room for its NUL) */
        if (len >= SCRATCH && (scratch = malloc(len + 1)) == NULL)
            return -1;
    } else {
        if (len >= SCRATCH)
            return -1;
        if (st->memo == NULL) {
            /* once per response; not zeroed (some 1,300 bytes): it is read
             * only up to len and slen, which memo_keep() and shape_keep() set */
            st->memo = malloc(sizeof(*st->memo));
            if (st->memo != NULL) {
                st->memo->len = st->memo->slen = 0;
                st->memo->has_model = st->memo->whole = 0;
            }
        }
        m = st->memo;
    }
    rc = scan(data, len, &k, scratch, scratch == stack ? SCRATCH : len + 1, m,
              &st->memo_hits, &st->shape_hits);
    if (rc != 0) {
        if (scratch != stack)
            free(scratch);
        return -1;
    }

    /* what openai_event() does with the tree, in its order */
    tt_think_begin(&st->th, st->now);
    if (st->r->s.model[0] == '\0')
        tt_dec_model(st, k.model);
    for (i = 0; i < k.nch; i++) {
        const struct choice *ch = &k.ch[i];
        const char *rs = ch->rc;

        tt_dec_choice(st, ch->index >= 0 ? ch->index : (int64_t)i);
        if (rs == NULL || rs[0] == '\0')
            rs = ch->rs;
        tt_dec_reasoning(st, rs);
        tt_dec_answer(st, ch->content);
        tt_dec_tool(st, ch->refusal);
        for (t = 0; t < ch->ntool; t++) {
            tt_dec_tool(st, ch->tool[t].name);
            tt_dec_tool(st, ch->tool[t].args);
        }
        tt_dec_finish_choice(st, ch->index >= 0 ? ch->index : (int64_t)i, ch->finish);
    }
    if (k.has_usage) {
        int64_t rsn = detail(k.rsn_d), cached = detail(k.cached_d);
        tt_dec_openai_usage_counts(st, k.in, k.out, rsn >= 0 ? rsn : k.rsn,
                                   cached >= 0 ? cached : k.cached_hit,
                                   tt_dec_usage_key(st, k.has_choices, k.nch,
                                                    k.nch > 0 && k.ch[0].index >= 0
                                                    ? k.ch[0].index : 0));
    }
    tt_think_end_event(&st->th);
    if (scratch != stack)
        free(scratch);
    return 0;
}
