/*
 * Event commit (interface in commit.h): the one place where decoded text
 * becomes counters and stamps.  Called by proxy/decode/think.c.
 *
 * An event with any answer (or tool) text is an answer event, else one with
 * reasoning text is a reasoning event, else it is no token event at all.  A
 * token event carrying both answer and reasoning text is an answer event: it
 * is the first output token when it comes first.
 */
#include "proxy/decode/commit.h"

#include <string.h>

void tt_commit_init(struct tt_commit *c, struct tt_request *r, int streaming)
{
    memset(c, 0, sizeof(*c));
    c->r = r;
    c->streaming = streaming;
}

void tt_commit_event(struct tt_commit *c, const struct tt_evacc *e)
{
    struct tt_request *r = c->r;
    struct tt_stream_stats *s = &r->s;
    uint64_t ans = e->a + e->p;

    if (ans + e->r == 0)
        return;
    s->answer_bytes += ans;
    s->reasoning_bytes += e->r;
    c->prov_bytes += e->p;
    if (!c->streaming)
        return;             /* no timeline for a non-streaming body */

    s->token_events++;
    (void)tt_request_token(r, e->now);
    if (r->ts[TT_TS_FIRST_TOKEN] == 0)
        r->ts[TT_TS_FIRST_TOKEN] = e->now;
    else if (r->ts[TT_TS_SECOND_TOKEN] == 0)
        r->ts[TT_TS_SECOND_TOKEN] = e->now;
    r->ts[TT_TS_LAST_TOKEN] = e->now;
    if (ans > 0) {
        s->answer_events++;
        if (e->a == 0)
            c->prov_events++;
        else if (c->first_firm == 0)
            c->first_firm = e->now;
        if (r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0) {
            r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = e->now;
            c->fo_prov = e->a == 0;
        }
    } else {
        s->reasoning_events++;
    }
}

void tt_commit_firm(struct tt_commit *c)
{
    c->prov_events = 0;
    c->prov_bytes = 0;
    c->fo_prov = 0;
}

void tt_commit_reclassify(struct tt_commit *c)
{
    struct tt_stream_stats *s = &c->r->s;

    s->answer_events -= c->prov_events;
    s->reasoning_events += c->prov_events;
    s->answer_bytes -= c->prov_bytes;
    s->reasoning_bytes += c->prov_bytes;
    if (c->fo_prov)
        c->r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = c->first_firm;
    tt_commit_firm(c);
}
