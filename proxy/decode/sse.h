/*
 * Incremental text/event-stream decoder (WHATWG "server-sent events"
 * parsing rules).  Owns the partial line and event of one stream; called by
 * proxy/decode/stream.c with each piece of a response body, in order.
 *
 * Guarantees: any split of the input, down to one byte per call, yields the
 * same events; memory for one event is bounded by <max_event> (a larger
 * event is skipped whole and counted, and decoding resumes at the next event
 * boundary); buffers are grown by doubling and reused, so steady state does
 * no allocation per event.
 */
#ifndef TT_SSE_H
#define TT_SSE_H

#include <stddef.h>
#include <stdint.h>

#define TT_SSE_MAX_EVENT_DEFAULT (1024u * 1024)
#define TT_SSE_EVENT_NAME_MAX    63     /* longer event names are truncated */

/* one dispatched event; pointers are valid only during the callback */
struct tt_sse_event {
    const char *name;       /* NUL-terminated; "" when no event: field (= "message") */
    size_t      name_len;
    const char *data;       /* data lines joined with "\n"; not NUL-terminated */
    size_t      data_len;
};

/* called once per event, in stream order */
typedef void (*tt_sse_cb)(void *ctx, const struct tt_sse_event *ev);

struct tt_sse {
    size_t   max_event;     /* bound on line + data bytes of one event */
    char    *line;          /* partial line carried between feeds; owned */
    size_t   line_len, line_cap;
    char    *data;          /* data buffer of the current event; owned */
    size_t   data_len, data_cap;
    const char *ref;        /* or: its one data line, in place in the feed */
    size_t   ref_len;
    char     name[TT_SSE_EVENT_NAME_MAX + 1];
    size_t   name_len;
    uint8_t  bom;           /* BOM bytes matched so far; 3 = decided */
    uint8_t  cr;            /* last byte was CR: a following LF is ignored */
    uint8_t  has_data;      /* at least one data: field in this event */
    uint8_t  field;         /* field of the partial line: 0 not known yet, 1 data, 2 event */
    uint8_t  skip_line;     /* dropping the rest of a line that cannot matter */
    uint8_t  skip_event;    /* dropping the rest of an oversize event */
    uint32_t oversize;      /* events skipped for size */
    uint64_t dispatched;    /* events delivered */
};

/* <max_event> 0 = TT_SSE_MAX_EVENT_DEFAULT */
void tt_sse_init(struct tt_sse *d, size_t max_event);

/* decode <len> bytes, calling <cb> for every complete event */
void tt_sse_feed(struct tt_sse *d, const char *buf, size_t len,
                 tt_sse_cb cb, void *ctx);

/*
 * The body ended.  WHATWG discards an unterminated event at end of input;
 * with <flush> = 1 (the body ended cleanly) a pending line is processed and a
 * pending event is dispatched instead, so a server that omits the final
 * blank line loses nothing.  The decoder is then ready for a new stream.
 */
void tt_sse_finish(struct tt_sse *d, int flush, tt_sse_cb cb, void *ctx);

void tt_sse_free(struct tt_sse *d);

#endif
