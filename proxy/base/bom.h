/*
 * A UTF-8 byte order mark at the very start of a stream that arrives in
 * pieces, down to one byte at a time.  Shared by the SSE and NDJSON
 * decoders (proxy/decode/sse.c, proxy/decode/ndjson.c); <state> lives in each decoder and
 * counts the BOM bytes matched so far, TT_BOM_DONE once decided.
 */
#ifndef TT_BOM_H
#define TT_BOM_H

#include <stddef.h>
#include <stdint.h>

#define TT_BOM_DONE 3

static const unsigned char tt_bom_bytes[3] = { 0xEF, 0xBB, 0xBF };

/*
 * Match BOM bytes at the start of <buf,len>.  Returns how many bytes of
 * <buf> were taken as BOM.  When the match fails, <*replay> is set to the
 * number of bytes matched earlier that are content after all: the caller
 * feeds tt_bom_bytes[0..*replay) before the rest of <buf>.
 */
static inline size_t tt_bom_skip(uint8_t *state, const char *buf, size_t len,
                                 size_t *replay)
{
    size_t i = 0;

    *replay = 0;
    while (*state < TT_BOM_DONE && i < len) {
        if ((unsigned char)buf[i] == tt_bom_bytes[*state]) {
            (*state)++;
            i++;
            continue;
        }
        *replay = *state;
        *state = TT_BOM_DONE;
    }
    return i;
}

/* the stream ended inside a would-be BOM: how many bytes are content */
static inline size_t tt_bom_end(uint8_t *state)
{
    size_t n = *state < TT_BOM_DONE ? *state : 0;

    *state = TT_BOM_DONE;
    return n;
}

#endif
