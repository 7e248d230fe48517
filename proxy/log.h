/*
 * Logging to stderr, one line per message, with a level filter.  Used by
 * every module; never logs header values or bodies (SPEC 4: secrets).
 */
#ifndef TT_LOG_H
#define TT_LOG_H

#include "proxy/config.h"

extern int tt_log_level;    /* enum tt_log_level; default TT_LOG_INFO */

void tt_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define tt_log_error(...) tt_log(TT_LOG_ERROR, __VA_ARGS__)
#define tt_log_warn(...)  tt_log(TT_LOG_WARN, __VA_ARGS__)
#define tt_log_info(...)  tt_log(TT_LOG_INFO, __VA_ARGS__)
#define tt_log_debug(...) \
    do { if (tt_log_level >= TT_LOG_DEBUG) tt_log(TT_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
