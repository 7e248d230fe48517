/*
 * The think filter (interface in think.h): classifies the answer text of
 * each event as answer, reasoning (inside <think>...</think>) or provisional
 * answer, holds events whose text ends inside a possible tag, and hands
 * every classified event to the commit (proxy/decode/commit.c) in arrival order.
 * Called by the per-API decoders through proxy/decode/decode.c.
 */
#include "proxy/decode/think.h"

#include <string.h>

#define OWN_CUR 0xFF

static struct tt_evacc *owner(struct tt_think *st, uint8_t own)
{
    return own == OWN_CUR ? &st->cur : &st->pend[own];
}

static void flush_carry(struct tt_think *st);

static void commit_pending(struct tt_think *st)
{
    unsigned i;

    for (i = 0; i < st->npend; i++)
        tt_commit_event(&st->c, &st->pend[i]);
    st->npend = 0;
}

/* provisional answer text is answer after all */
static void make_firm(struct tt_think *st)
{
    unsigned i;

    tt_commit_firm(&st->c);
    for (i = 0; i < st->npend; i++) {
        st->pend[i].a += st->pend[i].p;
        st->pend[i].p = 0;
    }
    st->cur.a += st->cur.p;
    st->cur.p = 0;
}

/* provisional answer text was reasoning: move it, counted or not */
static void reclassify(struct tt_think *st)
{
    unsigned i;

    tt_commit_reclassify(&st->c);
    for (i = 0; i < st->npend; i++) {
        st->pend[i].r += st->pend[i].p;
        st->pend[i].p = 0;
    }
    st->cur.r += st->cur.p;
    st->cur.p = 0;
}

void tt_think_init(struct tt_think *st, enum tt_think_mode mode,
                   struct tt_request *r, int streaming)
{
    memset(st, 0, sizeof(*st));
    st->mode = mode;
    st->phase = TT_PH_PRE;
    tt_commit_init(&st->c, r, streaming);
}

void tt_think_finish(struct tt_think *st)
{
    flush_carry(st);
    commit_pending(st);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int scanning(const struct tt_think *st)
{
    if (st->mode == TT_THINK_OFF)
        return 0;
    return st->phase != TT_PH_DONE;
}

/* plain text (not part of a tag) owned by <own>, classified by phase */
static void literal(struct tt_think *st, const char *s, size_t n, uint8_t own)
{
    struct tt_evacc *e = owner(st, own);
    size_t i = 0;

    if (st->mode == TT_THINK_OFF) {
        e->a += n;
        return;
    }
    while (i < n) {
        switch (st->phase) {
        case TT_PH_IN:
            e->r += n - i;
            return;
        case TT_PH_OUT:
        case TT_PH_DONE:
            e->a += n - i;
            return;
        case TT_PH_UNRESOLVED:
            e->p += n - i;
            return;
        case TT_PH_PRE: {
            size_t k = i;
            while (k < n && is_ws(s[k]))
                k++;
            e->p += k - i;
            i = k;
            if (i < n) {
                if (st->mode == TT_THINK_ON) {
                    st->phase = TT_PH_OUT;
                    make_firm(st);
                } else {
                    st->phase = TT_PH_UNRESOLVED;
                }
            }
            break;
        }
        }
    }
}

/* the carried bytes are plain text after all; waiting events are done */
static void flush_carry(struct tt_think *st)
{
    char c[TT_THINK_CARRY_MAX];
    uint8_t o[TT_THINK_CARRY_MAX];
    unsigned i, n = st->ncarry;

    memcpy(c, st->carry, n);
    memcpy(o, st->carry_own, n);
    st->ncarry = 0;
    for (i = 0; i < n; i++)
        literal(st, &c[i], 1, o[i]);
    commit_pending(st);
}

/* the carried bytes form a tag: it is reasoning text (a model token) */
static void tag_done(struct tt_think *st, int close)
{
    unsigned i;

    for (i = 0; i < st->ncarry; i++)
        owner(st, st->carry_own[i])->r++;
    st->ncarry = 0;
    if (!close) {
        if (st->phase == TT_PH_PRE)
            reclassify(st);         /* leading whitespace joins the thought */
        st->phase = TT_PH_IN;
    } else if (st->phase == TT_PH_IN) {
        st->phase = st->mode == TT_THINK_ON ? TT_PH_OUT : TT_PH_DONE;
    } else {
        /* AUTO: "</think>" with no "<think>": we joined mid-thought, so all
         * answer text so far was reasoning */
        reclassify(st);
        st->phase = TT_PH_DONE;
    }
    commit_pending(st);
}

static int tag_state(const char *carry, unsigned n, const char *tag)
{
    size_t k = strlen(tag);
    if (n > k || memcmp(carry, tag, n) != 0)
        return 0;           /* dead */
    return n == k ? 2 : 1;  /* complete : alive */
}

static void match_byte(struct tt_think *st, char b)
{
    static const char open_tag[] = "<think>", close_tag[] = "</think>";
    int so = 0, sc = 0;
    unsigned n = st->ncarry;

    st->carry[n] = b;
    st->carry_own[n] = OWN_CUR;
    n++;
    if (st->phase == TT_PH_PRE || st->phase == TT_PH_OUT)
        so = tag_state(st->carry, n, open_tag);
    if (st->phase == TT_PH_IN || st->phase == TT_PH_UNRESOLVED ||
        (st->phase == TT_PH_PRE && st->mode == TT_THINK_AUTO))
        sc = tag_state(st->carry, n, close_tag);
    if (so == 2 || sc == 2) {
        st->ncarry = n;
        tag_done(st, sc == 2);
        return;
    }
    if (so == 1 || sc == 1) {
        st->ncarry = n;
        return;
    }
    /* dead: what was carried is text; <b> may start a new tag (both tags
     * hold '<' only at their start, so no other restart point exists) */
    flush_carry(st);
    if (b == '<' && scanning(st)) {
        st->carry[0] = b;
        st->carry_own[0] = OWN_CUR;
        st->ncarry = 1;
    } else {
        literal(st, &b, 1, OWN_CUR);
    }
}

/*
 * Answer text goes through the think filter.  Rules (think_tags):
 *  off   all answer text is answer.
 *  on    "<think>" anywhere outside a thought opens one, "</think>" closes
 *        it; text inside and the tags themselves are reasoning.
 *  auto  "<think>" opens a thought only as the first non-whitespace answer
 *        text; "</think>" closes it.  A "</think>" with no "<think>" before
 *        (a server that put the opening tag in the prompt template, so the
 *        stream starts mid-thought) turns all answer text so far into
 *        reasoning, counted events included, and moves first_output_token
 *        to the first answer event after the tag.  Until such a decision,
 *        answer text is provisional: counted as answer, movable.  After the
 *        first "</think>" nothing is scanned any more.  A server that sends
 *        reasoning in its own field (reasoning_content...) separates it
 *        already: the first such text ends scanning.
 * The tags are model tokens, so they count as reasoning text, and an event
 * holding only a tag is a reasoning token event.  Whitespace before an
 * opening tag is part of the thought.
 *
 * A tag split across events ("<th" + "ink>") is handled with a carry: bytes
 * that may start a tag are held, and an event whose text ends inside the
 * carry waits (with its own arrival time) in <pend> until the next answer
 * text (or another token event, or the end) decides; events are committed
 * in arrival order, so stamps stay exact.
 */
static void think_text(struct tt_think *st, const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        if (st->ncarry == 0) {
            const char *lt;
            size_t k;

            if (!scanning(st)) {
                literal(st, s + i, n - i, OWN_CUR);
                return;
            }
            lt = memchr(s + i, '<', n - i);
            k = lt ? (size_t)(lt - (s + i)) : n - i;
            if (k > 0)
                literal(st, s + i, k, OWN_CUR);
            i += k;
            if (i == n)
                return;
        }
        match_byte(st, s[i]);
        i++;
    }
}

void tt_think_answer(struct tt_think *st, const char *s)
{
    if (s != NULL && s[0] != '\0')
        think_text(st, s, strlen(s));
}

void tt_think_tool(struct tt_think *st, const char *s)
{
    if (s != NULL)
        st->cur.a += strlen(s);
}

void tt_think_reasoning(struct tt_think *st, const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0)
        return;
    st->cur.r += n;
    if (st->mode == TT_THINK_AUTO &&
        (st->phase == TT_PH_PRE || st->phase == TT_PH_UNRESOLVED)) {
        st->phase = TT_PH_DONE;
        make_firm(st);
    }
}

void tt_think_begin(struct tt_think *st, uint64_t now)
{
    memset(&st->cur, 0, sizeof(st->cur));
    st->cur.now = now;
}

void tt_think_end_event(struct tt_think *st)
{
    unsigned i;
    int owns = 0;

    for (i = 0; i < st->ncarry; i++)
        if (st->carry_own[i] == OWN_CUR)
            owns = 1;
    if (owns && st->npend == TT_THINK_PEND_MAX) {
        flush_carry(st);        /* cannot happen: the carry is < TT_THINK_PEND_MAX bytes */
        tt_commit_event(&st->c, &st->cur);
    } else if (owns) {
        for (i = 0; i < st->ncarry; i++)
            if (st->carry_own[i] == OWN_CUR)
                st->carry_own[i] = (uint8_t)st->npend;
        st->pend[st->npend++] = st->cur;
    } else {
        if (st->ncarry > 0 && st->cur.a + st->cur.p + st->cur.r > 0)
            flush_carry(st);    /* another token event: no tag after all */
        tt_commit_event(&st->c, &st->cur);
    }
    memset(&st->cur, 0, sizeof(st->cur));
}
