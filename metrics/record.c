/*
 * Records: the "tokentap.record/1" line of a finished request (a small JSON
 * writer straight into one growing buffer, one malloc per record in the
 * common case) and the writer thread that appends lines to the record file
 * without ever blocking the event loop.  See metrics/record.h.
 *
 *   event loop(s)                       writer thread
 *   tt_record_format -> line
 *   tt_recorder_submit --[bounded queue, mutex+cond]--> writev(O_APPEND)
 *        full? free + dropped++ (logged)                repair a cut line,
 *                                                       count + log drops,
 *                                                       reopen on request
 */
#include "metrics/record.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "metrics/clock.h"
#include "proxy/base/log.h"
#include "proxy/base/ratelimit.h"
#include "proxy/base/utf8.h"

/* ---- a tiny JSON writer ------------------------------------------------ */

struct jw {
    char  *p;
    size_t len, cap;
    int    oom;
};

static int jw_grow(struct jw *w, size_t need)
{
    if (w->oom)
        return -1;
    if (w->len + need <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 1024;
    while (cap < w->len + need)
        cap *= 2;
    char *p = realloc(w->p, cap);
    if (p == NULL) {
        w->oom = 1;
        return -1;
    }
    w->p = p;
    w->cap = cap;
    return 0;
}

static inline void jw_raw(struct jw *w, const char *s, size_t n)
{
    if (w->len + n > w->cap && jw_grow(w, n) < 0)
        return;
    memcpy(w->p + w->len, s, n);
    w->len += n;
}

static void jw_lit(struct jw *w, const char *s)
{
    jw_raw(w, s, strlen(s));
}

/* a string literal, its length known at compile time */
#define JW_LIT(w, lit) jw_raw((w), "" lit, sizeof(lit) - 1)

static const char pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* see record.h: two digits a step from <pairs> */
char *tt_fmt_u64(char *end, uint64_t v)
{
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--end = pairs[d + 1];
        *--end = pairs[d];
    }
    if (v >= 10) {
        *--end = pairs[v * 2 + 1];
        *--end = pairs[v * 2];
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

/* <v> in decimal, written in place: its digits counted first, then set
 * from the last two at a time (no copy through a scratch buffer) */
static void jw_u64(struct jw *w, uint64_t v)
{
    static const uint64_t p10[20] = {
        1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
        10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
        100000000000ull, 1000000000000ull, 10000000000000ull,
        100000000000000ull, 1000000000000000ull, 10000000000000000ull,
        100000000000000000ull, 1000000000000000000ull,
        10000000000000000000ull };
    /* digits: log10 from the bit length (1233/4096 ~ log10 2), then one
     * compare */
    unsigned t = (unsigned)(64 - __builtin_clzll(v | 1)) * 1233 >> 12;
    unsigned n = t + (v >= p10[t]) + (v == 0);
    if (w->len + n > w->cap && jw_grow(w, n) < 0)
        return;
    w->len += n;
    tt_fmt_u64(w->p + w->len, v);
}

static void jw_i64(struct jw *w, int64_t v)
{
    if (v < 0) {
        jw_raw(w, "-", 1);
        jw_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        jw_u64(w, (uint64_t)v);
    }
}

/* <ns> as milliseconds, exact: integer part, up to six decimals, written
 * at <o> (MS_MAX bytes at most); returns the length */
#define MS_MAX 27

static inline size_t fmt_ms(char *o, uint64_t ns)
{
    uint64_t ms = ns / 1000000;
    unsigned frac = (unsigned)(ns % 1000000);
    size_t n;

    if (ms < 10) {                  /* the usual gap: one or two digits */
        o[0] = (char)('0' + ms);
        n = 1;
    } else if (ms < 100) {
        memcpy(o, pairs + ms * 2, 2);
        n = 2;
    } else {
        char tmp[24];
        char *s = tt_fmt_u64(tmp + sizeof(tmp), ms);
        n = (size_t)(tmp + sizeof(tmp) - s);
        memcpy(o, s, n);
    }
    if (frac != 0) {
        char *f = o + n;
        size_t k = 6;
        f[0] = '.';
        memcpy(f + 1, pairs + frac / 10000 * 2, 2);
        memcpy(f + 3, pairs + frac / 100 % 100 * 2, 2);
        memcpy(f + 5, pairs + frac % 100 * 2, 2);
        while (f[k] == '0')
            k--;
        n += k + 1;
    }
    return n;
}

static void jw_ms(struct jw *w, uint64_t ns)
{
    if (w->len + MS_MAX > w->cap && jw_grow(w, MS_MAX) < 0)
        return;
    w->len += fmt_ms(w->p + w->len, ns);
}

/*
 * printf's "%.15g" of <v>, without printf where that is safe: 1e-4 <= |v| <
 * 1e15 is scaled to a 15-digit integer in long double (10^k exact for k <=
 * 27, one rounding of 2^-64 relative, under 1e-4 absolute at 1e15), which
 * rounds as printf's exact decimal expansion does unless the product lies
 * within 1e-3 of a half: those, and everything else, go to snprintf.
 * Writes at most 32 bytes and a NUL; returns the length.
 */
size_t tt_fmt_g15(char *buf, double v)
{
#if LDBL_MANT_DIG >= 64
    static const long double p10[19] = {
        1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L,
        1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L };
    double a = fabs(v);

    if (a >= 1e-4 && a < 1e15) {
        uint64_t bits, d;
        long double sc;
        int e, x;                   /* a's binary and decimal exponents */

        memcpy(&bits, &a, sizeof(bits));
        e = (int)(bits >> 52) - 1023;
        x = e >= 0 ? e * 1233 >> 12 : -((-e * 1233 + 4095) >> 12);  /* ~e log10(2) */
        x = x < -4 ? -4 : x > 14 ? 14 : x;
        sc = (long double)a * p10[14 - x];
        while (sc >= 1e15L && x < 14)
            sc = (long double)a * p10[14 - ++x];
        while (sc < 1e14L && x > -4)
            sc = (long double)a * p10[14 - --x];
        long double fl = floorl(sc), fr = sc - fl;
        if (sc >= 1e14L && fabsl(fr - 0.5L) > 1e-3L) {
            d = (uint64_t)fl + (fr > 0.5L);
            if (d < 1000000000000000ull) {
                char dig[15], *o = buf;
                int last, i;
                for (i = 14; i >= 0; i--, d /= 10)
                    dig[i] = (char)('0' + d % 10);
                for (last = 14; last > x && dig[last] == '0'; last--)
                    ;               /* trailing fraction zeros go */
                if (v < 0)
                    *o++ = '-';
                if (x >= 0) {
                    memcpy(o, dig, (size_t)x + 1);
                    o += x + 1;
                    if (last > x) {
                        *o++ = '.';
                        memcpy(o, dig + x + 1, (size_t)(last - x));
                        o += last - x;
                    }
                } else {
                    *o++ = '0';
                    *o++ = '.';
                    for (i = x; i < -1; i++)
                        *o++ = '0';
                    memcpy(o, dig, (size_t)last + 1);
                    o += last + 1;
                }
                *o = '\0';
                return (size_t)(o - buf);
            }
        }
    }
#endif
    int n = snprintf(buf, 33, "%.15g", v);
    return n > 0 ? (size_t)n : 0;
}

static void jw_double(struct jw *w, double v)
{
    char tmp[40];
    if (!isfinite(v)) {
        jw_lit(w, "null");
        return;
    }
    if (v == floor(v) && fabs(v) < 9e15) {
        jw_i64(w, (int64_t)v);
        return;
    }
    /* times are whole ns in ms: print those exactly without snprintf */
    if (fabs(v) < 1e9) {
        double k = nearbyint(v * 1e6);
        if (k / 1e6 == v) {
            if (k < 0) {
                jw_raw(w, "-", 1);
                k = -k;
            }
            jw_ms(w, (uint64_t)k);
            return;
        }
    }
    jw_raw(w, tmp, tt_fmt_g15(tmp, v));
}

/* bytes a JSON string takes as they are: printable ASCII but the quote
 * and the backslash */
#define PLAIN16(b) [b] = 1, [b + 1] = 1, [b + 2] = 1, [b + 3] = 1, \
    [b + 4] = 1, [b + 5] = 1, [b + 6] = 1, [b + 7] = 1, [b + 8] = 1, \
    [b + 9] = 1, [b + 10] = 1, [b + 11] = 1, [b + 12] = 1, [b + 13] = 1, \
    [b + 14] = 1, [b + 15] = 1
#define PLAIN4(b) [b] = 1, [b + 1] = 1, [b + 2] = 1, [b + 3] = 1
static const unsigned char plain[256] = {
    [0x20] = 1, [0x21] = 1, /* '"' */ [0x23] = 1, PLAIN4(0x24),
    PLAIN4(0x28), PLAIN4(0x2c), PLAIN16(0x30), PLAIN16(0x40),
    PLAIN4(0x50), PLAIN4(0x54), PLAIN4(0x58), /* '\\' */ [0x5d] = 1,
    [0x5e] = 1, [0x5f] = 1, PLAIN16(0x60), PLAIN16(0x70),
};

static void jw_strn(struct jw *w, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;

    jw_raw(w, "\"", 1);
    while (i < n) {
        /* copy plain printable ASCII in runs */
        size_t j = i;
        while (j < n && plain[s[j]])
            j++;
        if (j > i) {
            jw_raw(w, str + i, j - i);
            i = j;
            continue;
        }
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            jw_raw(w, e, 2);
            i++;
        } else if (c < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            if (c == '\n')
                jw_raw(w, "\\n", 2);
            else if (c == '\r')
                jw_raw(w, "\\r", 2);
            else if (c == '\t')
                jw_raw(w, "\\t", 2);
            else
                jw_raw(w, e, 6);
            i++;
        } else {
            size_t l = tt_utf8_len(s + i, n - i);
            if (l == 0) {
                jw_lit(w, "\\ufffd");
                i++;
            } else {
                jw_raw(w, str + i, l);
                i += l;
            }
        }
    }
    jw_raw(w, "\"", 1);
}

static void jw_str(struct jw *w, const char *s)
{
    jw_strn(w, s, strlen(s));
}

static void jw_key(struct jw *w, const char *k, int *first)
{
    size_t n = strlen(k);           /* keys are ours: no escaping needed */
    char *o;

    if (w->len + n + 4 > w->cap && jw_grow(w, n + 4) < 0)
        return;
    o = w->p + w->len;
    if (!*first)
        *o++ = ',';
    *first = 0;
    *o++ = '"';
    memcpy(o, k, n);
    o += n;
    *o++ = '"';
    *o++ = ':';
    w->len = (size_t)(o - w->p);
}

/* a key that is a string literal: its quotes and colon joined at compile time */
#define JW_KEY(w, lit, first) jw_key_raw((w), "\"" lit "\":", sizeof(lit) + 2, (first))

static inline void jw_key_raw(struct jw *w, const char *k, size_t n, int *first)
{
    if (!*first)
        jw_raw(w, ",", 1);
    *first = 0;
    jw_raw(w, k, n);
}

/* ---- redaction ----------------------------------------------------------- */

/*
 * Query parameters whose values are credentials: Gemini's ?key=, the
 * usual API-key and OAuth spellings, Azure's subscription-key and the
 * AWS pre-signed URL fields.  Compared case-insensitively after
 * percent-decoding, so ?%6Bey= and ?K%45Y= are caught too.
 */
static const char *const secret_names[] = {
    "key", "api_key", "api-key", "apikey", "x-api-key", "x-goog-api-key",
    "access_token", "refresh_token", "id_token", "token", "auth",
    "authorization", "password", "passwd", "secret", "client_secret",
    "subscription-key", "sig", "signature", "x-amz-signature",
    "x-amz-security-token", "x-amz-credential",
};

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* percent-decode <in> (n bytes) into <out>, '+' as a space; returns the
 * length, or SIZE_MAX when it does not fit */
static size_t pct_decode(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)in[i], h, l;
        if (c == '%' && i + 2 < n && (h = hexval(in[i + 1])) >= 0 &&
            (l = hexval(in[i + 2])) >= 0) {
            c = h * 16 + l;
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (o == cap)
            return SIZE_MAX;
        out[o++] = (char)c;
    }
    return o;
}

/* is the parameter name <name> (n bytes, as sent) a credential? */
static int secret_param(const char *name, size_t n)
{
    char a[64], b[64];
    const char *cur = name;

    /* decode until stable: %256Bey is %6Bey is key to a server that
     * decodes twice; three rounds cover every sane stack */
    for (int round = 0; round < 3; round++) {
        char *dst = round % 2 ? b : a;
        size_t m = pct_decode(cur, n, dst, sizeof(a));
        if (m == SIZE_MAX)
            return 0;               /* longer than any secret name */
        int same = m == n && memcmp(dst, cur, n) == 0;
        cur = dst;
        n = m;
        if (same)
            break;
    }
    for (size_t i = 0; i < sizeof(secret_names) / sizeof(secret_names[0]); i++)
        if (strlen(secret_names[i]) == n && strncasecmp(secret_names[i], cur, n) == 0)
            return 1;
    return 0;
}

size_t tt_record_redact_path(const char *path, char *buf, size_t bufsize)
{
    const char *q = strchr(path, '?');
    const char *p;
    size_t o = 0, cap;

    if (bufsize == 0)
        return 0;
    cap = bufsize - 1;
#define PUT(s, n) do { size_t _n = (n); if (o + _n > cap) _n = cap - o; \
                       memcpy(buf + o, (s), _n); o += _n; } while (0)
    if (q == NULL) {
        PUT(path, strlen(path));
        buf[o] = '\0';
        return o;
    }
    p = q + 1;
    PUT(path, (size_t)(p - path));
    while (*p != '\0') {
        /* '&' and ';' both separate: redact for either reading */
        size_t len = strcspn(p, "&;");
        const char *end = p + len;
        const char *eq = memchr(p, '=', len);
        if (eq != NULL && secret_param(p, (size_t)(eq - p))) {
            PUT(p, (size_t)(eq - p) + 1);
            PUT("REDACTED", 8);
        } else {
            PUT(p, len);
        }
        if (*end == '\0')
            break;
        PUT(end, 1);
        p = end + 1;
    }
#undef PUT
    buf[o] = '\0';
    return o;
}

/* the path with values of secret query parameters replaced by REDACTED */
static void jw_path(struct jw *w, const char *path)
{
    char buf[TT_RECORD_PATH_MAX];
    jw_strn(w, buf, tt_record_redact_path(path, buf, sizeof(buf)));
}

static int64_t wall_of(const struct tt_request *r, uint64_t mono)
{
    return r->start_wall_ns + (int64_t)(mono - r->t0);
}

uint64_t tt_record_end_mono(const struct tt_request *r)
{
    uint64_t end = r->ts[TT_TS_RESPONSE_COMPLETE];
    if (end != 0)
        return end;
    if (r->ended >= r->t0 && r->ended != 0)
        return r->ended;        /* failed or cancelled: when that was known */
    end = r->t0;
    for (int i = 0; i < TT_TS__COUNT; i++)
        if (r->ts[i] > end)
            end = r->ts[i];
    if (r->n_token_ts && r->token_ts[r->n_token_ts - 1] > end)
        end = r->token_ts[r->n_token_ts - 1];
    return end;
}

/* each metric's entry around its value, "tag":{"value": and ,"unit":"U"},
 * joined at compile time from the metric table */
struct lit { const char *s; size_t n; };
#define LIT(str) { str, sizeof(str) - 1 }
#define M_HEAD(id, tag, ...) [TT_M_##id] = LIT("\"" tag "\":{\"value\":"),
#define M_TAIL(id, tag, unit, ...) [TT_M_##id] = LIT(",\"unit\":\"" unit "\"}"),
static const struct lit metric_head[TT_M__COUNT] = { TT_METRICS(M_HEAD) };
static const struct lit metric_tail[TT_M__COUNT] = { TT_METRICS(M_TAIL) };

static void metric_entry(struct jw *w, int id, double v, int *first)
{
    if (!*first)
        jw_raw(w, ",", 1);
    *first = 0;
    jw_raw(w, metric_head[id].s, metric_head[id].n);
    jw_double(w, v);
    jw_raw(w, metric_tail[id].s, metric_tail[id].n);
}

/* Realtime's usage details (SPEC section 13), inside metadata.usage */
static void usage_details(struct jw *w, const struct tt_stream_stats *s, int *g)
{
    static const struct { const char *key; size_t off; } keys[] = {
        { "input_text_tokens",   offsetof(struct tt_stream_stats, usage_input_text) },
        { "input_audio_tokens",  offsetof(struct tt_stream_stats, usage_input_audio) },
        { "output_text_tokens",  offsetof(struct tt_stream_stats, usage_output_text) },
        { "output_audio_tokens", offsetof(struct tt_stream_stats, usage_output_audio) },
    };

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int64_t v;
        memcpy(&v, (const char *)s + keys[i].off, sizeof(v));
        if (v < 0)
            continue;
        jw_key(w, keys[i].key, g);
        jw_i64(w, v);
    }
}

/* a WebSocket turn's or session's fields (SPEC section 13) */
static void ws_fields(struct jw *w, const struct tt_request *r, int *f)
{
    const struct tt_ws_stats *ws = &r->ws;

    JW_KEY(w, "transport", f);
    JW_LIT(w, "\"websocket\"");
    JW_KEY(w, "ws_session", f);
    jw_str(w, ws->session_id);
    if (ws->session) {
        JW_KEY(w, "turns", f);
        jw_u64(w, ws->turn);
        JW_KEY(w, "messages_in", f);
        jw_u64(w, ws->msgs_in);
        JW_KEY(w, "messages_out", f);
        jw_u64(w, ws->msgs_out);
        if (ws->overs > 0) {
            JW_KEY(w, "messages_over_max_event_bytes", f);
            jw_u64(w, ws->overs);
        }
        if (ws->stopped != NULL) {
            JW_KEY(w, "decoding_stopped", f);
            jw_str(w, ws->stopped);
        }
        return;
    }
    JW_KEY(w, "turn", f);
    jw_u64(w, ws->turn);
    if (r->s.response_id[0]) {
        JW_KEY(w, "response_id", f);
        jw_str(w, r->s.response_id);
    }
}

/* metadata.client_tcp and metadata.delivery (SPEC section 12) */
static void delivery_fields(struct jw *w, const struct tt_request *r, int *f)
{
    const struct tt_delivery_stats *d = &r->dl;
    int g = 1;

    if (d->has_tcp) {
        JW_KEY(w, "client_tcp", f);
        jw_raw(w, "{", 1);
        JW_KEY(w, "rtt_us", &g);
        jw_u64(w, d->rtt_us);
        JW_KEY(w, "min_rtt_us", &g);
        jw_u64(w, d->min_rtt_us);
        JW_KEY(w, "rttvar_us", &g);
        jw_u64(w, d->rttvar_us);
        JW_KEY(w, "retransmits", &g);
        jw_u64(w, d->retransmits);
        JW_KEY(w, "delivery_rate_bps", &g);
        jw_u64(w, d->delivery_rate_bps);
        JW_KEY(w, "unacked_bytes", &g);
        jw_u64(w, d->unacked_bytes);
        jw_raw(w, "}", 1);
    }
    JW_KEY(w, "delivery", f);
    jw_raw(w, "{", 1);
    g = 1;
    JW_KEY(w, "written_bytes", &g);
    jw_u64(w, d->written_bytes);
    JW_KEY(w, "acked_bytes", &g);
    jw_u64(w, d->acked_bytes);
    JW_KEY(w, "token_events", &g);
    jw_u64(w, r->s.token_events);
    JW_KEY(w, "acked_token_events", &g);
    jw_u64(w, d->acked_token_events);
    jw_raw(w, "}", 1);
}

char *tt_record_format(const struct tt_request *r,
                       const struct tt_metric_values *m, const char *source,
                       const struct tt_slo_result *slo, size_t *len)
{
    const struct tt_stream_stats *s = &r->s;
    struct jw w = { 0 };
    int f, g;

    /* one allocation for the usual record: the gaps are reserved at their
     * longest (MS_MAX and a comma each) when their turn comes */
    if (jw_grow(&w, 1536 + (size_t)r->n_token_ts * (MS_MAX + 1)) < 0)
        return NULL;

    JW_LIT(&w, "{\"schema\":\"" TT_RECORD_SCHEMA "\",\"metadata\":{");
    f = 1;
    JW_KEY(&w, "x_request_id", &f);
    jw_str(&w, r->request_id);
    JW_KEY(&w, "request_start_ns", &f);
    jw_i64(&w, r->start_wall_ns);
    JW_KEY(&w, "request_ack_ns", &f);
    if (r->ts[TT_TS_RESPONSE_HEADERS] >= r->t0 && r->ts[TT_TS_RESPONSE_HEADERS])
        jw_i64(&w, wall_of(r, r->ts[TT_TS_RESPONSE_HEADERS]));
    else
        JW_LIT(&w, "null");
    JW_KEY(&w, "request_end_ns", &f);
    jw_i64(&w, wall_of(r, tt_record_end_mono(r)));
    JW_KEY(&w, "was_cancelled", &f);
    jw_lit(&w, r->cancelled ? "true" : "false");
    JW_KEY(&w, "upstream", &f);
    jw_str(&w, r->upstream_name ? r->upstream_name : "");
    JW_KEY(&w, "role", &f);
    jw_str(&w, r->shadow ? "shadow" : "primary");
    if (r->has_digest) {
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)r->digest);
        JW_KEY(&w, "answer_digest", &f);
        jw_str(&w, hex);
    }
    JW_KEY(&w, "upstream_reused", &f);
    jw_lit(&w, r->upstream_reused ? "true" : "false");
    JW_KEY(&w, "api", &f);
    jw_str(&w, tt_api_name(r->api));
    JW_KEY(&w, "model", &f);
    jw_str(&w, r->model[0] ? r->model : s->model);
    if (r->model[0] && s->model[0] && strcmp(r->model, s->model) != 0) {
        JW_KEY(&w, "response_model", &f);
        jw_str(&w, s->model);
    }
    JW_KEY(&w, "stream", &f);
    jw_lit(&w, s->streaming ? "true" : "false");
    JW_KEY(&w, "method", &f);
    jw_str(&w, r->method);
    JW_KEY(&w, "path", &f);
    jw_path(&w, r->path);
    JW_KEY(&w, "status", &f);
    jw_i64(&w, r->status);
    if (r->inspect_skipped != NULL) {
        JW_KEY(&w, "request_not_inspected", &f);
        jw_str(&w, r->inspect_skipped);
    }
    if (s->finish_reason[0]) {
        JW_KEY(&w, "finish_reason", &f);
        jw_str(&w, s->finish_reason);
    }
    JW_KEY(&w, "token_count_source", &f);
    if (source != NULL)
        jw_str(&w, source);
    else
        JW_LIT(&w, "null");

    JW_KEY(&w, "timeline_ns", &f);
    jw_raw(&w, "{", 1);
    g = 1;
    for (int i = 0; i < TT_TS__COUNT; i++) {
        if (r->ts[i] == 0 || r->ts[i] < r->t0)
            continue;
        jw_key(&w, tt_ts_names[i], &g);
        jw_u64(&w, r->ts[i] - r->t0);
    }
    jw_raw(&w, "}", 1);

    if (s->usage_input >= 0 || s->usage_output >= 0 || s->usage_reasoning >= 0 ||
        s->usage_cached >= 0 || s->usage_input_audio >= 0 || s->usage_output_audio >= 0) {
        JW_KEY(&w, "usage", &f);
        jw_raw(&w, "{", 1);
        g = 1;
        if (s->usage_input >= 0) {
            JW_KEY(&w, "input_tokens", &g);
            jw_i64(&w, s->usage_input);
        }
        if (s->usage_output >= 0) {
            JW_KEY(&w, "output_tokens", &g);
            jw_i64(&w, s->usage_output);
        }
        if (s->usage_reasoning >= 0) {
            JW_KEY(&w, "reasoning_tokens", &g);
            jw_i64(&w, s->usage_reasoning);
        }
        if (s->usage_cached >= 0) {
            JW_KEY(&w, "cached_input_tokens", &g);
            jw_i64(&w, s->usage_cached);
        }
        usage_details(&w, s, &g);
        jw_raw(&w, "}", 1);
    }
    if (r->usage_injected) {
        JW_KEY(&w, "usage_injected", &f);
        JW_LIT(&w, "true");
    }
    if (s->choices > 1) {
        JW_KEY(&w, "choices", &f);
        jw_u64(&w, s->choices);
    }
    if (s->server_present != 0) {
        /* the server's own figures, keyed and in units as it names them */
        JW_KEY(&w, "server", &f);
        jw_raw(&w, "{", 1);
        g = 1;
        for (int i = 0; i < TT_SRV__COUNT; i++) {
            if (!(s->server_present & (1u << i)))
                continue;
            jw_key(&w, tt_srv_names[i], &g);
            jw_double(&w, s->server[i]);
        }
        jw_raw(&w, "}", 1);
    }
    JW_KEY(&w, "events", &f);
    jw_u64(&w, s->events);
    JW_KEY(&w, "token_events", &f);
    jw_u64(&w, s->token_events);
    JW_KEY(&w, "reasoning_events", &f);
    jw_u64(&w, s->reasoning_events);
    JW_KEY(&w, "answer_events", &f);
    jw_u64(&w, s->answer_events);
    JW_KEY(&w, "parse_errors", &f);
    jw_u64(&w, s->parse_errors);
    JW_KEY(&w, "bytes_in", &f);
    jw_u64(&w, r->bytes_in);
    JW_KEY(&w, "bytes_out", &f);
    jw_u64(&w, r->bytes_out);
    if (r->dl.on)
        delivery_fields(&w, r, &f);
    if (r->ws.on)
        ws_fields(&w, r, &f);
    if (slo != NULL) {
        JW_KEY(&w, "slo", &f);
        jw_lit(&w, slo->good ? "{\"good\":true,\"violations\":["
                             : "{\"good\":false,\"violations\":[");
        g = 1;
        for (int i = 0; i < TT_M__COUNT; i++) {
            if (!(slo->violated & (1u << i)))
                continue;
            if (!g)
                jw_raw(&w, ",", 1);
            g = 0;
            jw_str(&w, tt_metric_tag[i]);
        }
        JW_LIT(&w, "]}");
    }
    JW_LIT(&w, "},\"metrics\":{");

    f = 1;
    for (int i = 0; i < TT_M__COUNT; i++)
        if (m->present & (1u << i))
            metric_entry(&w, i, m->v[i], &f);
    uint32_t ngaps = tt_icl_count(r);
    if (ngaps > 0) {
        JW_KEY(&w, "inter_chunk_latency", &f);
        JW_LIT(&w, "{\"value\":[");
        /* room for all of them at once: one gap a token, the record's bulk */
        if (jw_grow(&w, (size_t)ngaps * (MS_MAX + 1)) == 0) {
            for (uint32_t i = 0; i < ngaps; i++) {
                if (i)
                    w.p[w.len++] = ',';
                w.len += fmt_ms(w.p + w.len, tt_icl_ns(r, i));
            }
        }
        JW_LIT(&w, "],\"unit\":\"ms\"}");
    }
    JW_LIT(&w, "},\"error\":");

    int code;
    const char *type, *msg;
    if (tt_request_error(r, &code, &type, &msg)) {
        JW_LIT(&w, "{\"code\":");
        jw_i64(&w, code);
        JW_LIT(&w, ",\"type\":");
        jw_str(&w, type ? type : "error");
        JW_LIT(&w, ",\"kind\":");
        jw_str(&w, tt_errkind_names[tt_request_errkind(r)]);
        const char *up = tt_request_upstream_type(r);
        if (up != NULL) {
            JW_LIT(&w, ",\"upstream_type\":");
            jw_str(&w, up);
        }
        JW_LIT(&w, ",\"message\":");
        jw_str(&w, msg ? msg : "");
        jw_raw(&w, "}", 1);
    } else {
        JW_LIT(&w, "null");
    }
    jw_raw(&w, "}\n", 3);        /* the NUL is not part of the line */

    if (w.oom) {
        free(w.p);
        return NULL;
    }
    *len = w.len - 1;
    return w.p;
}

/* ---- the writer --------------------------------------------------------- */

/*
 * Lines are written whole or not at all, as far as a reader can tell:
 *  - a write that fails part-way through a line (ENOSPC, EIO, ...) is
 *    repaired: a regular file is truncated back to the end of its last full
 *    line; where that cannot be done (a pipe, a failed ftruncate) the next
 *    write starts with a newline, so the fragment stays alone on its line
 *    and no later record is glued to it;
 *  - every line not written is counted (tokentap_records_dropped_total) and
 *    the reason logged, one line a second at most;
 *  - pipes and sockets are written without blocking (poll in between), so
 *    a sink nobody reads holds the writer only until tt_recorder_flush_for's
 *    deadline, after which what is left is dropped and counted.
 */

#define BATCH 64
#define POLL_MS 100

struct line {
    char  *p;
    size_t len;
};

struct tt_recorder {
    pthread_mutex_t mu;
    pthread_cond_t  work;           /* writer waits: lines, reopen, stop */
    pthread_cond_t  idle;           /* flush waits: done caught up */
    struct line    *q;              /* ring of <cap> */
    unsigned        cap, head, count;
    int             stop, reopen;
    uint64_t        accepted;       /* lines accepted into the queue */
    uint64_t        done;           /* lines taken and written or dropped */
    int             fd;
    int             is_stdout;
    int             is_reg;         /* a regular file: repaired by ftruncate */
    int             is_sock;        /* written with send(MSG_DONTWAIT) */
    int             midline;        /* the sink ends inside a line */
    _Atomic int     abort;          /* give up on the sink: drop, exit */
    _Atomic uint64_t dropped;
    _Atomic uint64_t written;
    struct tt_ratelimit drop_rl;
    pthread_t       thread;
    char            path[];
};

/* what the sink is, and non-blocking writes where the fd is ours alone */
static void sink_setup(struct tt_recorder *rec)
{
    struct stat st;

    rec->is_reg = rec->is_sock = 0;
    if (fstat(rec->fd, &st) < 0)
        return;
    rec->is_reg = S_ISREG(st.st_mode);
    rec->is_sock = S_ISSOCK(st.st_mode);
    /* a FIFO opened here (by path, or stdout through /proc) has its own
     * open file description: O_NONBLOCK does not reach anyone else */
    if (S_ISFIFO(st.st_mode))
        fcntl(rec->fd, F_SETFL, fcntl(rec->fd, F_GETFL) | O_NONBLOCK);
}

/* O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of
 * holding the writer thread in open(); regular files ignore it */
static int open_path(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0640);
    if (fd < 0 && err != NULL)
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return fd;
}

static int open_stdout(void)
{
    struct stat st;

    /* a pipe: a description of our own, so it can be made non-blocking */
    if (fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode)) {
        int fd = open("/proc/self/fd/1", O_WRONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0)
            return fd;
    }
    return fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
}

static ssize_t sink_writev(struct tt_recorder *rec, const struct iovec *iov, int n)
{
    if (rec->is_sock) {
        struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
        return sendmsg(rec->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    return writev(rec->fd, iov, n);
}

/*
 * Write all of <iov> (<n> lines).  Returns how many whole lines made it;
 * <*partial> is set to the bytes written of the next one and <*err> to the
 * errno that stopped it (0: the writer was told to give up).
 */
static unsigned write_lines(struct tt_recorder *rec, struct iovec *iov, unsigned n,
                            size_t *partial, int *err)
{
    unsigned whole = 0;
    size_t done = 0;                /* bytes of iov[whole] written */

    *partial = 0;
    *err = 0;
    while (whole < n) {
        if (atomic_load(&rec->abort))
            break;
        ssize_t k = sink_writev(rec, iov + whole, (int)(n - whole));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pfd = { .fd = rec->fd, .events = POLLOUT };
                poll(&pfd, 1, POLL_MS);
                continue;
            }
            *err = errno;
            break;
        }
        size_t left = (size_t)k;
        while (whole < n && left >= iov[whole].iov_len) {
            left -= iov[whole].iov_len;
            iov[whole].iov_base = (char *)iov[whole].iov_base - done;
            iov[whole].iov_len += done;
            done = 0;
            whole++;
        }
        if (whole < n && left > 0) {
            /* partial line: finish it before anything else */
            iov[whole].iov_base = (char *)iov[whole].iov_base + left;
            iov[whole].iov_len -= left;
            done += left;
        }
    }
    *partial = done;
    return whole;
}

/* the sink ends mid-line: begin a new one; 0 when done */
static int start_new_line(struct tt_recorder *rec, int *err)
{
    struct iovec nl = { .iov_base = "\n", .iov_len = 1 };
    size_t partial;

    if (write_lines(rec, &nl, 1, &partial, err) != 1)
        return -1;
    rec->midline = 0;
    return 0;
}

static void log_drop(struct tt_recorder *rec, unsigned n, const char *why,
                     const char *repair)
{
    uint64_t held;
    if (tt_ratelimit_ok(&rec->drop_rl, tt_now_mono(), TT_RATELIMIT_1S, &held))
        tt_log_warn("records: %u record(s) not written to '%s': %s%s "
                    "(%llu dropped in all; %llu similar warnings suppressed)",
                    n, rec->is_stdout ? "stdout" : rec->path, why, repair,
                    (unsigned long long)atomic_load(&rec->dropped),
                    (unsigned long long)held);
}

/* write one batch, repair what a failure leaves, count the rest */
static void write_batch(struct tt_recorder *rec, struct iovec *iov, unsigned n)
{
    off_t start = rec->is_reg ? lseek(rec->fd, 0, SEEK_END) : -1;
    size_t partial = 0, good = 0;
    unsigned ok = 0;
    int err = 0;
    const char *repair = "";

    if (atomic_load(&rec->abort)) {
        err = 0;
    } else if (rec->midline && start_new_line(rec, &err) < 0) {
        /* nothing of the batch went out */
    } else {
        if (rec->is_reg && start >= 0)
            start = lseek(rec->fd, 0, SEEK_END);
        ok = write_lines(rec, iov, n, &partial, &err);
    }
    atomic_fetch_add(&rec->written, ok);
    if (ok == n)
        return;
    for (unsigned i = 0; i < ok; i++)
        good += iov[i].iov_len;
    if (partial > 0) {
        if (rec->is_reg && start >= 0 && ftruncate(rec->fd, start + (off_t)good) == 0) {
            repair = "; cut back to the last full line";
        } else {
            rec->midline = 1;
            repair = "; the next record starts a new line";
        }
    }
    atomic_fetch_add(&rec->dropped, n - ok);
    log_drop(rec, n - ok, err ? strerror(err) : "gave up at shutdown: the sink is not draining",
             repair);
}

static void do_reopen(struct tt_recorder *rec)
{
    int fd;

    if (rec->is_stdout)
        return;
    fd = open_path(rec->path, NULL, 0);
    if (fd < 0) {
        tt_log_error("records: cannot reopen '%s': %s; still writing to the file "
                     "opened before", rec->path, strerror(errno));
        return;
    }
    close(rec->fd);
    rec->fd = fd;
    rec->midline = 0;
    sink_setup(rec);
}

static void *writer_main(void *arg)
{
    struct tt_recorder *rec = arg;
    struct line batch[BATCH];
    struct iovec iov[BATCH];

    pthread_mutex_lock(&rec->mu);
    for (;;) {
        while (rec->count == 0 && !rec->stop && !rec->reopen)
            pthread_cond_wait(&rec->work, &rec->mu);
        if (rec->reopen) {
            rec->reopen = 0;
            pthread_mutex_unlock(&rec->mu);
            do_reopen(rec);
            pthread_mutex_lock(&rec->mu);
            continue;
        }
        if (rec->count == 0 && rec->stop)
            break;

        unsigned n = 0;
        while (n < BATCH && rec->count > 0) {
            batch[n++] = rec->q[rec->head];
            rec->head = (rec->head + 1) % rec->cap;
            rec->count--;
        }
        pthread_mutex_unlock(&rec->mu);

        for (unsigned i = 0; i < n; i++) {
            iov[i].iov_base = batch[i].p;
            iov[i].iov_len = batch[i].len;
        }
        write_batch(rec, iov, n);
        for (unsigned i = 0; i < n; i++)
            free(batch[i].p);

        pthread_mutex_lock(&rec->mu);
        rec->done += n;
        pthread_cond_broadcast(&rec->idle);
    }
    pthread_mutex_unlock(&rec->mu);
    return NULL;
}

struct tt_recorder *tt_recorder_open(const char *path, unsigned queue_cap,
                                     char *err, size_t errlen)
{
    size_t plen = strlen(path);
    struct tt_recorder *rec = calloc(1, sizeof(*rec) + plen + 1);
    if (rec == NULL) {
        snprintf(err, errlen, "record: out of memory");
        return NULL;
    }
    memcpy(rec->path, path, plen + 1);
    rec->cap = queue_cap ? queue_cap : 1;
    rec->q = calloc(rec->cap, sizeof(*rec->q));
    if (rec->q == NULL) {
        snprintf(err, errlen, "record: out of memory");
        free(rec);
        return NULL;
    }
    if (strcmp(path, "-") == 0) {
        rec->is_stdout = 1;
        rec->fd = open_stdout();
        if (rec->fd < 0)
            snprintf(err, errlen, "record: stdout: %s", strerror(errno));
    } else {
        rec->fd = open_path(path, err, errlen);
    }
    if (rec->fd < 0) {
        free(rec->q);
        free(rec);
        return NULL;
    }
    sink_setup(rec);
    pthread_mutex_init(&rec->mu, NULL);
    pthread_cond_init(&rec->work, NULL);
    pthread_cond_init(&rec->idle, NULL);
    /* the writer takes no signals: they go to the main thread, whose
     * handlers change while the process exits */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&rec->thread, NULL, writer_main, rec);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        snprintf(err, errlen, "record: thread: %s", strerror(e));
        pthread_mutex_destroy(&rec->mu);
        pthread_cond_destroy(&rec->work);
        pthread_cond_destroy(&rec->idle);
        close(rec->fd);
        free(rec->q);
        free(rec);
        return NULL;
    }
    return rec;
}

void tt_recorder_submit(struct tt_recorder *rec, char *line, size_t len)
{
    if (line == NULL) {
        atomic_fetch_add(&rec->dropped, 1);
        log_drop(rec, 1, "out of memory formatting it", "");
        return;
    }
    pthread_mutex_lock(&rec->mu);
    if (rec->count == rec->cap || rec->stop) {
        int full = !rec->stop;
        pthread_mutex_unlock(&rec->mu);
        free(line);
        atomic_fetch_add(&rec->dropped, 1);
        log_drop(rec, 1, full ? "the queue is full (record_queue): the sink is slower "
                                "than the traffic"
                              : "the writer has stopped", "");
        return;
    }
    rec->q[(rec->head + rec->count) % rec->cap] = (struct line){ line, len };
    rec->count++;
    rec->accepted++;
    pthread_cond_signal(&rec->work);
    pthread_mutex_unlock(&rec->mu);
}

uint64_t tt_recorder_dropped(struct tt_recorder *rec)
{
    return rec ? atomic_load(&rec->dropped) : 0;
}

uint64_t tt_recorder_written(struct tt_recorder *rec)
{
    return rec ? atomic_load(&rec->written) : 0;
}

unsigned tt_recorder_queued(struct tt_recorder *rec)
{
    pthread_mutex_lock(&rec->mu);
    unsigned n = rec->count;
    pthread_mutex_unlock(&rec->mu);
    return n;
}

void tt_recorder_reopen(struct tt_recorder *rec)
{
    if (rec == NULL)
        return;
    pthread_mutex_lock(&rec->mu);
    rec->reopen = 1;
    pthread_cond_signal(&rec->work);
    pthread_mutex_unlock(&rec->mu);
}

void tt_recorder_flush(struct tt_recorder *rec)
{
    pthread_mutex_lock(&rec->mu);
    uint64_t target = rec->accepted;
    while (rec->done < target)
        pthread_cond_wait(&rec->idle, &rec->mu);
    pthread_mutex_unlock(&rec->mu);
}

int tt_recorder_flush_for(struct tt_recorder *rec, unsigned ms,
                          const volatile sig_atomic_t *stop)
{
    struct timespec now, end, slice;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &end);
    tt_timespec_add_ms(&end, ms);
    pthread_mutex_lock(&rec->mu);
    uint64_t target = rec->accepted;
    while (rec->done < target) {
        clock_gettime(CLOCK_REALTIME, &now);
        if ((stop != NULL && *stop) || now.tv_sec > end.tv_sec ||
            (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)) {
            rc = -1;
            break;
        }
        /* short slices: a signal sets <stop> without waking us */
        slice = now;
        tt_timespec_add_ms(&slice, POLL_MS);
        if (slice.tv_sec > end.tv_sec ||
            (slice.tv_sec == end.tv_sec && slice.tv_nsec > end.tv_nsec))
            slice = end;
        pthread_cond_timedwait(&rec->idle, &rec->mu, &slice);
    }
    if (rc < 0) {
        /* give up: the writer drops what it holds and what is queued */
        unsigned left = rec->count;
        atomic_store(&rec->abort, 1);
        while (rec->count > 0) {
            free(rec->q[rec->head].p);
            rec->q[rec->head].p = NULL;
            rec->head = (rec->head + 1) % rec->cap;
            rec->count--;
            rec->done++;
        }
        rec->stop = 1;
        pthread_cond_signal(&rec->work);
        pthread_mutex_unlock(&rec->mu);
        if (left > 0) {
            atomic_fetch_add(&rec->dropped, left);
            log_drop(rec, left, "gave up at shutdown: the sink is not draining", "");
        }
        return -1;
    }
    pthread_mutex_unlock(&rec->mu);
    return 0;
}

void tt_recorder_close(struct tt_recorder *rec)
{
    if (rec == NULL)
        return;
    pthread_mutex_lock(&rec->mu);
    rec->stop = 1;
    pthread_cond_signal(&rec->work);
    pthread_mutex_unlock(&rec->mu);
    pthread_join(rec->thread, NULL);
    close(rec->fd);
    pthread_mutex_destroy(&rec->mu);
    pthread_cond_destroy(&rec->work);
    pthread_cond_destroy(&rec->idle);
    free(rec->q);
    free(rec);
}
