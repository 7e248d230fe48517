/*
 * Chunked bodies without llhttp's per-chunk cost (see chunks.c).
 *
 * llhttp parses a chunk's size line, data and CRLF through a dozen states,
 * about 250 instructions a chunk; a live stream sends one event a chunk.
 * When the parser is known to stand between two chunks, a run of complete
 * chunks in canonical form ("HEX\r\n" data "\r\n", size > 0, no extension)
 * leaves it exactly where it was: those are taken here, their data handed
 * to the parser's own on_body, and everything else (a chunk cut by the end
 * of the bytes, an extension, the last chunk, any error) goes to llhttp.
 *
 * The parser is known to stand between two chunks when it paused at a
 * chunk's end: the owner's on_chunk_header and on_chunk_complete callbacks
 * call tt_chunks_on_header() and tt_chunks_on_complete(), which pause it
 * there (never after the last chunk).  on_body must return 0 (the fast path
 * cannot stop inside a chunk).
 */
#ifndef TT_CHUNKS_H
#define TT_CHUNKS_H

#include <stddef.h>

#include <llhttp.h>

struct tt_chunks {
    unsigned edge:1;        /* the parser stands between two chunks */
    unsigned paused:1;      /* tt_chunks_on_complete() paused it */
    unsigned last:1;        /* the current chunk is the last (size 0) */
};

/* a new message (the parser was initialised or reset) */
static inline void tt_chunks_reset(struct tt_chunks *c)
{
    c->edge = c->paused = c->last = 0;
}

/* from the owner's on_chunk_header; returns what the callback returns */
int tt_chunks_on_header(struct tt_chunks *c, const llhttp_t *p);
/* from the owner's on_chunk_complete; returns what the callback returns */
int tt_chunks_on_complete(struct tt_chunks *c);

/*
 * llhttp_execute(p, buf, n), with canonical complete chunks taken directly
 * where the parser stands between chunks (<c> NULL: llhttp alone, for a
 * parser without the chunk callbacks).  *<used>: the bytes parsed (all
 * of them on HPE_OK; up to the error or the pause otherwise, as
 * llhttp_get_error_pos() would tell).
 */
enum llhttp_errno tt_chunks_execute(struct tt_chunks *c, llhttp_t *p,
                                    const char *buf, size_t n, size_t *used);

/* the canonical complete chunks at the start of [buf, buf+n), each
 * data part given to on_body; the bytes they take (for tests and fuzzing) */
size_t tt_chunks_take(llhttp_t *p, const char *buf, size_t n);

#endif
