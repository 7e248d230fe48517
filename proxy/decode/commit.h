/*
 * Event commit: turns one classified token-bearing event (answer,
 * provisional answer and reasoning text bytes, arrival time) into the
 * request clock's facts: r->s counters, r->ts[TT_TS_FIRST_TOKEN ..
 * TT_TS_LAST_TOKEN] and r->token_ts.  Also moves already-committed
 * provisional answer text to reasoning when the think filter decides it was
 * a thought after all.
 *
 * Called by the think filter (proxy/decode/think.c) only; the per-API decoders never
 * commit directly.  No allocation except the request's token time array.
 */
#ifndef TT_COMMIT_H
#define TT_COMMIT_H

#include <stdint.h>
#include "metrics/request.h"

/* text bytes of one token-bearing event while it is being classified */
struct tt_evacc {
    uint64_t now;
    uint64_t r;     /* reasoning */
    uint64_t a;     /* answer (incl. tool-call text), final */
    uint64_t p;     /* provisional answer: may still turn into reasoning */
};

struct tt_commit {
    struct tt_request *r;       /* borrowed */
    int      streaming;         /* 0: a JSON body, no timeline */
    uint32_t prov_events;       /* committed answer events that are provisional */
    uint64_t prov_bytes;        /* committed provisional answer bytes */
    int      fo_prov;           /* FIRST_OUTPUT_TOKEN set by a provisional event */
    uint64_t first_firm;        /* time of the first definite answer event */
};

void tt_commit_init(struct tt_commit *c, struct tt_request *r, int streaming);
/* count one event (nothing when it holds no text) */
void tt_commit_event(struct tt_commit *c, const struct tt_evacc *e);
/* committed provisional answer text is answer after all */
void tt_commit_firm(struct tt_commit *c);
/* committed provisional answer text was reasoning: move it */
void tt_commit_reclassify(struct tt_commit *c);

#endif
