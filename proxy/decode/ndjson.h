/*
 * Incremental NDJSON (newline-delimited JSON) line splitter.  Owns the
 * partial line of one stream; called by proxy/decode/stream.c with each piece of a
 * response body, in order (Ollama's application/x-ndjson streams).
 *
 * Lines end with LF; a CR before the LF is dropped; lines holding only
 * whitespace are skipped; a UTF-8 BOM at the very start is dropped.  Any
 * split of the input yields the same lines; a line longer than <max_line> is
 * skipped whole and counted, and splitting resumes after its LF; the line
 * buffer is grown by doubling and reused.
 */
#ifndef TT_NDJSON_H
#define TT_NDJSON_H

#include <stddef.h>
#include <stdint.h>

#define TT_NDJSON_MAX_LINE_DEFAULT (1024u * 1024)

/* one line without its line end; valid only during the call */
typedef void (*tt_ndjson_cb)(void *ctx, const char *line, size_t len);

struct tt_ndjson {
    size_t   max_line;
    char    *line;          /* partial line carried between feeds; owned */
    size_t   line_len, line_cap;
    uint8_t  bom;           /* BOM bytes matched so far; 3 = decided */
    uint8_t  skip;          /* dropping the rest of an oversize line */
    uint32_t oversize;      /* lines skipped for size */
    uint64_t dispatched;    /* lines delivered */
};

/* <max_line> 0 = TT_NDJSON_MAX_LINE_DEFAULT */
void tt_ndjson_init(struct tt_ndjson *d, size_t max_line);
void tt_ndjson_feed(struct tt_ndjson *d, const char *buf, size_t len,
                    tt_ndjson_cb cb, void *ctx);
/* the body ended; with <flush> a last line without LF is delivered */
void tt_ndjson_finish(struct tt_ndjson *d, int flush, tt_ndjson_cb cb,
                      void *ctx);
void tt_ndjson_free(struct tt_ndjson *d);

#endif
