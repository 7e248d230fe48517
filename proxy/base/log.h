/*
 * Logging: one structured line per message, logfmt (the default) or JSON
 * lines, with a level filter, on stderr (journald under systemd) or in a
 * file reopened on SIGHUP.  Used by every module; never logs header values
 * or bodies (SPEC 4: secrets).
 *
 *   logfmt: ts=2026-05-01T12:00:00.123Z level=info msg="listening on ..."
 *   json:   {"ts":"2026-05-01T12:00:00.123Z","level":"info","msg":"..."}
 *
 * When stderr is the systemd journal's stream (JOURNAL_STREAM), each line
 * is prefixed with its syslog priority ("<3>".."<7>"), which journald
 * turns into the entry's PRIORITY.
 *
 * The line builder (struct tt_logline) is also what the access log
 * (proxy/http/access.c) writes its lines with, so both logs share one format.
 */
#ifndef TT_LOG_H
#define TT_LOG_H

#include <stddef.h>
#include <stdint.h>

#define TT_PATH_MAX 1024            /* the longest file path a setting names */

enum tt_log_level { TT_LOG_ERROR = 0, TT_LOG_WARN, TT_LOG_INFO, TT_LOG_DEBUG };
enum tt_log_format { TT_LOG_LOGFMT = 0, TT_LOG_JSON };

extern int tt_log_level;    /* enum tt_log_level; default TT_LOG_INFO */
extern int tt_log_format;   /* enum tt_log_format; default TT_LOG_LOGFMT */

/*
 * Send the log to <path> (appended, created 0640), or to stderr when
 * <path> is empty (and find out whether stderr is the journal).  Returns
 * 0, or -1 with <err> set (the log stays where it was).  Call before the
 * workers start.
 */
int tt_log_open(const char *path, char *err, size_t errlen);

/*
 * Reopen the log file by its path (rotation); a no-op on stderr.  Safe
 * while other threads log: the new file takes the old descriptor's number
 * (dup2), so no line is written to a closed or reused descriptor.
 */
void tt_log_reopen(void);

/* back to stderr, the file closed */
void tt_log_close(void);

void tt_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define tt_log_error(...) tt_log(TT_LOG_ERROR, __VA_ARGS__)
#define tt_log_warn(...)  tt_log(TT_LOG_WARN, __VA_ARGS__)
#define tt_log_info(...)  tt_log(TT_LOG_INFO, __VA_ARGS__)
#define tt_log_debug(...) \
    do { if (tt_log_level >= TT_LOG_DEBUG) tt_log(TT_LOG_DEBUG, __VA_ARGS__); } while (0)

/*
 * One structured line in a fixed buffer (no allocation): begin, add
 * fields, end.  Values are quoted and escaped as the format needs
 * (invalid UTF-8 becomes U+FFFD); a line that would not fit is cut at a
 * field boundary or inside a string value, and stays well formed.
 */
#define TT_LOGLINE_MAX 2048

struct tt_logline {
    char   buf[TT_LOGLINE_MAX];
    size_t len;
    int    format;          /* enum tt_log_format */
    int    nfields;
};

/* start a line in <format>; with <wall_ns> != 0 the first field is
 * ts=<wall_ns as RFC 3339 UTC, milliseconds> */
void tt_logline_begin(struct tt_logline *l, int format, int64_t wall_ns);
void tt_logline_str(struct tt_logline *l, const char *key, const char *v);
void tt_logline_strn(struct tt_logline *l, const char *key, const char *v,
                     size_t n);
void tt_logline_int(struct tt_logline *l, const char *key, int64_t v);
/* a number with up to three decimals (milliseconds) */
void tt_logline_ms(struct tt_logline *l, const char *key, double v);
/* close the line ('\n' included); returns its length */
size_t tt_logline_end(struct tt_logline *l);

#endif
