/*
 * The request inspector: reads the client's request body on the side (as
 * it streams upstream, de-chunked) and, when the body is complete, fills the
 * request facts the response cannot tell: r->model, r->stream,
 * r->include_usage, r->max_tokens.  Called by proxy/http/conn.c; owns a bounded
 * copy of the body.
 *
 * Bodies over <cap> bytes, bodies that would take the process over its
 * inspector budget, bodies that do not start with '{' and bodies that
 * do not parse leave the fields absent (r->inspect_skipped says why) (Gemini's model and streaming, and
 * TGI's streaming, come from the path and are filled regardless).
 */
#ifndef TT_INSPECT_H
#define TT_INSPECT_H

#include <stddef.h>
#include "metrics/request.h"

#define TT_INSPECT_CAP_DEFAULT    (1024u * 1024)
#define TT_INSPECT_BUDGET_DEFAULT (64u * 1024 * 1024)

struct tt_inspect {
    char   *buf;            /* body so far; owned */
    size_t  len, alloc;     /* <alloc> bytes are charged to the budget */
    size_t  cap;            /* give up beyond this many bytes */
    size_t  expect;         /* the declared body length (<= cap), 0 unknown */
    int     gave_up;        /* too big, not JSON, over budget or out of memory */
    int     started;        /* first non-whitespace byte seen */
    int     whole_tree;     /* tests: parse the whole body into a cJSON tree,
                             * the reference the one-pass reading must equal */
    const char *skipped;    /* why the body was not read (static), or NULL */
};

/*
 * The process-wide budget: bytes all inspectors together may hold (every
 * worker, every connection).  A request that would go over it is not
 * inspected (it is still forwarded, whole); its record says
 * "request_not_inspected":"budget".  Set once at start, before traffic;
 * 0 = TT_INSPECT_BUDGET_DEFAULT.
 */
void tt_inspect_set_budget(size_t bytes);
/* bytes held by all inspectors now */
size_t tt_inspect_held(void);

/* <cap> 0 = TT_INSPECT_CAP_DEFAULT */
void tt_inspect_init(struct tt_inspect *in, size_t cap);
/* the body's declared length (Content-Length): once a quarter of it has
 * come, the copy grows to exactly that size in one step instead of by
 * doubling; a length over the cap is ignored (the body will not be read) */
void tt_inspect_expect(struct tt_inspect *in, size_t n);
/* body bytes, in order */
void tt_inspect_feed(struct tt_inspect *in, const char *buf, size_t len);
/*
 * The body is complete: fill <r>'s model, stream, include_usage and
 * max_tokens.  Uses r->path, and r->api (detected from r->path when it is
 * TT_API_OTHER).  The buffer is released; tt_inspect_free() is still safe.
 */
void tt_inspect_finish(struct tt_inspect *in, struct tt_request *r);
void tt_inspect_free(struct tt_inspect *in);
/* before tt_inspect_finish(): the body so far, byte for byte (leading
 * whitespace included); 0, or -1 when the inspector gave up on it */
int  tt_inspect_body(const struct tt_inspect *in, const char **body, size_t *len);

#endif
