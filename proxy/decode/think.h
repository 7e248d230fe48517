/*
 * The think filter: splits answer text into answer and reasoning by
 * <think>...</think> tags (think_tags = auto|on|off, SPEC section 5), across
 * event boundaries, and commits every event through proxy/decode/commit.c in
 * arrival order.  One per response, embedded in the stream decoder
 * (proxy/decode/stream.c); the per-API decoders feed it through proxy/decode/decode.c.
 * Fixed-size state, no allocation.
 */
#ifndef TT_THINK_H
#define TT_THINK_H

#include <stddef.h>
#include <stdint.h>
#include "proxy/decode/commit.h"

enum tt_think_mode { TT_THINK_AUTO = 0, TT_THINK_ON, TT_THINK_OFF };

#define TT_THINK_CARRY_MAX 8        /* > strlen("</think>") - 1 */
#define TT_THINK_PEND_MAX  8

/*
 * Phases (answer text only; mode OFF skips the filter):
 *   PRE         nothing but whitespace yet; "<think>" opens a thought (and in
 *               AUTO "</think>" closes one we joined midway)
 *   UNRESOLVED  AUTO only: answer text seen, no tag yet; a "</think>" now
 *               means the stream started mid-thought
 *   IN          inside <think>; "</think>" ends it
 *   OUT         ON only: after a thought or after plain text; "<think>"
 *               opens another
 *   DONE        AUTO only: decided; no more scanning
 */
enum tt_think_phase { TT_PH_PRE = 0, TT_PH_UNRESOLVED, TT_PH_IN, TT_PH_OUT, TT_PH_DONE };

struct tt_think {
    enum tt_think_mode  mode;
    enum tt_think_phase phase;
    struct tt_evacc     cur;                        /* the event being decoded */
    struct tt_evacc     pend[TT_THINK_PEND_MAX];    /* events waiting for the carry */
    unsigned            npend;
    char                carry[TT_THINK_CARRY_MAX];  /* a tag's possible start */
    uint8_t             carry_own[TT_THINK_CARRY_MAX]; /* pend index or 0xFF (cur) */
    unsigned            ncarry;
    struct tt_commit    c;
};

void tt_think_init(struct tt_think *th, enum tt_think_mode mode,
                   struct tt_request *r, int streaming);
/* an event begins / ends; its text arrived at <now> */
void tt_think_begin(struct tt_think *th, uint64_t now);
void tt_think_end_event(struct tt_think *th);
/* text of the current event (NUL-terminated; NULL and "" add nothing) */
void tt_think_answer(struct tt_think *th, const char *s);
void tt_think_tool(struct tt_think *th, const char *s);
void tt_think_reasoning(struct tt_think *th, const char *s);
/* the body ended: carried bytes are text, waiting events are committed */
void tt_think_finish(struct tt_think *th);

#endif
