/*
 * UTF-8 validation, one sequence at a time: what the log's escapes
 * (proxy/base/log.c), the records' JSON strings (metrics/record.c) and the
 * Prometheus label values (metrics/prom.c) keep, and what they replace by
 * U+FFFD.  Valid means RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF.
 */
#ifndef TT_UTF8_H
#define TT_UTF8_H

#include <stddef.h>

/* length of the valid UTF-8 sequence at <s> (<n> bytes left), 0 if invalid;
 * reads no further than the first byte that is not a continuation byte,
 * so a NUL-terminated string may pass a generous <n> */
size_t tt_utf8_len(const unsigned char *s, size_t n);

#endif
