/*
 * Logging: a timestamped line per message on stderr, written with a single
 * write(2) so lines from several worker threads never interleave.
 */
#include "proxy/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int tt_log_level = TT_LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void tt_log(int level, const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n, m;

    if (level > tt_log_level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                 level_names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report a failed log write */
    }
}
