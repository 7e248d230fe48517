/*
 * Prometheus text format pieces (see prom.h).
 */
#include "metrics/prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "proxy/base/utf8.h"

void tt_prom_family(struct evbuffer *out, const char *name, const char *type,
                    const char *help)
{
    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                        type);
}

size_t tt_prom_escape_label(char *out, const char *in)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
#define EMIT(str, n) do { if (out) memcpy(out + o, (str), (n)); o += (n); } while (0)
    while (*s) {
        unsigned char c = *s;
        if (c == '\\') {
            EMIT("\\\\", 2);
            s++;
        } else if (c == '"') {
            EMIT("\\\"", 2);
            s++;
        } else if (c == '\n') {
            EMIT("\\n", 2);
            s++;
        } else if (c < 0x80) {
            EMIT((const char *)s, 1);
            s++;
        } else {
            /* 4: the longest sequence; the NUL ends any sooner */
            size_t len = tt_utf8_len(s, 4);
            if (len == 0) {
                EMIT("\xef\xbf\xbd", 3);
                s++;
            } else {
                EMIT((const char *)s, len);
                s += len;
            }
        }
    }
#undef EMIT
    return o;
}

void tt_prom_fmt_double(char *buf, size_t len, double v)
{
    if (isinf(v))
        snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
    else if (isnan(v))
        snprintf(buf, len, "NaN");
    else {
        /* the shortest of 15..17 digits that reads back as the same double */
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, len, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
}

void tt_prom_fmt_bound(char *buf, size_t len, double v)
{
    snprintf(buf, len, "%.15g", v);
}
