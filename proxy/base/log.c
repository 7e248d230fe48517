/*
 * Logging (see proxy/base/log.h): a structured line per message, written with a
 * single write(2) so lines from several worker threads never interleave.
 * The destination is one descriptor number for the life of the process
 * (stderr, or the log file); a reopen dup2()s the new file onto it.
 */
#include "proxy/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "proxy/base/utf8.h"

int tt_log_level = TT_LOG_INFO;
int tt_log_format = TT_LOG_LOGFMT;

static int log_fd = STDERR_FILENO;
static char log_path[TT_PATH_MAX];

static const char *const level_names[] = { "error", "warn", "info", "debug" };
/* syslog priorities (sd-daemon.h SD_ERR ... SD_DEBUG) of the levels */
static const char *const journal_prio[] = { "<3>", "<4>", "<6>", "<7>" };

/* stderr is the journal's stream: JOURNAL_STREAM names its device:inode */
static int to_journal;

/* ---- the line builder -------------------------------------------------- */

/* bytes kept free for the end of a line: a closing quote, '}' and '\n' */
#define RESERVE 4

static int room(const struct tt_logline *l, size_t n)
{
    return l->len + n + RESERVE <= sizeof(l->buf);
}

static void put(struct tt_logline *l, const char *s, size_t n)
{
    if (room(l, n)) {
        memcpy(l->buf + l->len, s, n);
        l->len += n;
    }
}

/* does a logfmt value need quotes? (empty, blanks, '=', '"', controls) */
static int needs_quotes(const char *v, size_t n)
{
    if (n == 0)
        return 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c <= ' ' || c == '=' || c == '"' || c == '\\' || c == 0x7f)
            return 1;
    }
    return 0;
}

/* <v> escaped for a JSON string or a quoted logfmt value (the same escapes
 * serve both); stops, whole characters only, when the line is full */
static void put_escaped(struct tt_logline *l, const char *v, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)v;
    size_t i = 0;

    while (i < n) {
        unsigned char c = s[i];
        char e[6];
        size_t elen = 0, clen = 1;

        if (c == '"' || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            elen = 2;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            e[0] = '\\';
            e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            elen = 2;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(e, "\\u00", 4);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            elen = 6;
        } else if (c >= 0x80) {
            clen = tt_utf8_len(s + i, n - i);
            if (clen == 0) {
                memcpy(e, "\xEF\xBF\xBD", 3);   /* U+FFFD */
                elen = 3;
                clen = 1;
            }
        }
        if (elen) {
            if (!room(l, elen))
                return;
            put(l, e, elen);
        } else {
            if (!room(l, clen))
                return;
            put(l, v + i, clen);
        }
        i += clen;
    }
}

/* the separator and "key=" / "key": of the next field; 0 when full */
static int put_key(struct tt_logline *l, const char *key)
{
    size_t k = strlen(key);

    if (!room(l, k + 8))
        return 0;
    if (l->format == TT_LOG_JSON) {
        if (l->nfields)
            put(l, ",", 1);
        put(l, "\"", 1);
        put(l, key, k);
        put(l, "\":", 2);
    } else {
        if (l->nfields)
            put(l, " ", 1);
        put(l, key, k);
        put(l, "=", 1);
    }
    l->nfields++;
    return 1;
}

void tt_logline_begin(struct tt_logline *l, int format, int64_t wall_ns)
{
    char ts[80];
    struct tm tm;
    time_t sec = (time_t)(wall_ns / 1000000000);

    l->len = 0;
    l->nfields = 0;
    l->format = format;
    if (format == TT_LOG_JSON)
        put(l, "{", 1);
    if (wall_ns != 0) {
        gmtime_r(&sec, &tm);
        snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, (int)(wall_ns % 1000000000 / 1000000));
        tt_logline_str(l, "ts", ts);
    }
}

void tt_logline_strn(struct tt_logline *l, const char *key, const char *v,
                     size_t n)
{
    int quote = l->format == TT_LOG_JSON || needs_quotes(v, n);

    if (!put_key(l, key))
        return;
    if (quote)
        put(l, "\"", 1);
    put_escaped(l, v, n);
    if (quote)                      /* RESERVE keeps room for it */
        l->buf[l->len++] = '"';
}

void tt_logline_str(struct tt_logline *l, const char *key, const char *v)
{
    tt_logline_strn(l, key, v, strlen(v));
}

void tt_logline_int(struct tt_logline *l, const char *key, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", (long long)v);

    if (room(l, strlen(key) + 8 + (size_t)n) && put_key(l, key))
        put(l, num, (size_t)n);
}

void tt_logline_ms(struct tt_logline *l, const char *key, double v)
{
    char num[40];
    int n = snprintf(num, sizeof(num), "%.3f", v);

    /* 12.500 -> 12.5, 3.000 -> 3 */
    while (n > 0 && num[n - 1] == '0')
        n--;
    if (n > 0 && num[n - 1] == '.')
        n--;
    if (room(l, strlen(key) + 8 + (size_t)n) && put_key(l, key))
        put(l, num, (size_t)n);
}

size_t tt_logline_end(struct tt_logline *l)
{
    if (l->format == TT_LOG_JSON)
        l->buf[l->len++] = '}';     /* RESERVE keeps room for both */
    l->buf[l->len++] = '\n';
    return l->len;
}

/* ---- the log ------------------------------------------------------------ */

static int open_log(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

    if (fd < 0 && err != NULL)
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return fd;
}

/*
 * Under systemd, stderr connected to the journal: each line then starts
 * with its syslog priority ("<3>" for errors), which journald strips and
 * keeps as the entry's PRIORITY (journalctl -p err).  Any other stderr
 * (a terminal, a file, a pipe) gets the bare line.
 */
static void detect_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;

    to_journal = js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
                 fstat(STDERR_FILENO, &st) == 0 &&
                 (unsigned long long)st.st_dev == dev &&
                 (unsigned long long)st.st_ino == ino;
}

int tt_log_open(const char *path, char *err, size_t errlen)
{
    int fd;

    if (path[0] == '\0') {
        tt_log_close();
        detect_journal();
        return 0;
    }
    if (strlen(path) >= sizeof(log_path)) {
        snprintf(err, errlen, "path too long");
        return -1;
    }
    fd = open_log(path, err, errlen);
    if (fd < 0)
        return -1;
    if (log_fd == STDERR_FILENO) {
        log_fd = fd;
    } else {
        dup2(fd, log_fd);
        close(fd);
    }
    memcpy(log_path, path, strlen(path) + 1);
    return 0;
}

void tt_log_reopen(void)
{
    char err[TT_PATH_MAX + 64];
    int fd;

    if (log_fd == STDERR_FILENO)
        return;
    fd = open_log(log_path, err, sizeof(err));
    if (fd < 0) {
        tt_log_error("log file: %s (still writing to the old file)", err);
        return;
    }
    if (dup2(fd, log_fd) < 0)
        tt_log_error("log file: dup2: %s", strerror(errno));
    close(fd);
}

void tt_log_close(void)
{
    if (log_fd != STDERR_FILENO)
        close(log_fd);
    log_fd = STDERR_FILENO;
    log_path[0] = '\0';
    to_journal = 0;
}

void tt_log(int level, const char *fmt, ...)
{
    struct tt_logline l;
    struct timespec ts;
    char msg[1024];
    va_list ap;
    int n;

    if (level > tt_log_level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n >= (int)sizeof(msg))
        n = (int)sizeof(msg) - 1;
    level = level < 0 ? 0 : level > 3 ? 3 : level;
    tt_logline_begin(&l, tt_log_format,
                     (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    tt_logline_str(&l, "level", level_names[level]);
    tt_logline_strn(&l, "msg", msg, (size_t)n);
    tt_logline_end(&l);
    if (to_journal && log_fd == STDERR_FILENO) {
        struct iovec iov[2] = { { (void *)journal_prio[level], 3 },
                                { l.buf, l.len } };
        if (writev(log_fd, iov, 2) < 0) {
            /* nowhere left to report a failed log write */
        }
        return;
    }
    if (write(log_fd, l.buf, l.len) < 0) {
        /* nowhere left to report a failed log write */
    }
}
