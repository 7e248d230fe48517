/*
 * Bounded copies into fixed fields (request ids, models, labels, header
 * values): the ground floor's one way, truncating to fit and always
 * NUL-terminated.  Used by the decoders, the client connection, the
 * WebSocket turns and the aggregator.
 */
#ifndef TT_STRCOPY_H
#define TT_STRCOPY_H

#include <stddef.h>
#include <string.h>

/* <len> bytes of <src> into <dst> of <cap> (> 0) bytes, truncated */
static inline void tt_copy_mem(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    if (len > 0)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

/* the string <src> (NULL: empty) into <dst> of <cap> (> 0) bytes, truncated */
static inline void tt_copy_str(char *dst, size_t cap, const char *src)
{
    tt_copy_mem(dst, cap, src, src != NULL ? strlen(src) : 0);
}

#endif
