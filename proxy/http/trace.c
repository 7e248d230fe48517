/*
 * W3C Trace Context (see proxy/http/trace.h).
 */
#include "proxy/http/trace.h"

#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "proxy/http/httphead.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;              /* uppercase is invalid in traceparent */
}

/* <n> bytes from 2n lowercase hex digits; -1 on any other character */
static int unhex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static int all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

int tt_traceparent_parse(const char *v, size_t len, uint8_t trace_id[16],
                         uint8_t parent_id[8], uint8_t *flags)
{
    uint8_t ver, tid[16], pid[8], fl;

    /* blanks around a header value are not part of it */
    while (len > 0 && (v[0] == ' ' || v[0] == '\t')) {
        v++;
        len--;
    }
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (len < TT_TRACEPARENT_LEN || unhex(v, &ver, 1) < 0 || ver == 0xff ||
        v[2] != '-' || v[35] != '-' || v[52] != '-')
        return -1;
    if (ver == 0 ? len != TT_TRACEPARENT_LEN
                 : len > TT_TRACEPARENT_LEN && v[TT_TRACEPARENT_LEN] != '-')
        return -1;
    if (unhex(v + 3, tid, 16) < 0 || unhex(v + 36, pid, 8) < 0 ||
        unhex(v + 53, &fl, 1) < 0 || all_zero(tid, 16) || all_zero(pid, 8))
        return -1;
    memcpy(trace_id, tid, 16);
    memcpy(parent_id, pid, 8);
    *flags = fl;
    return 0;
}

void tt_hex(const uint8_t *b, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[b[i] >> 4];
        out[2 * i + 1] = hx[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void tt_traceparent_format(const struct tt_trace *t, char out[TT_TRACEPARENT_LEN + 1])
{
    memcpy(out, "00-", 3);
    tt_hex(t->trace_id, 16, out + 3);
    out[35] = '-';
    tt_hex(t->span_id, 8, out + 36);
    out[52] = '-';
    tt_hex(&t->flags, 1, out + 53);
}

/* random bytes from a per-thread pool refilled by RAND_bytes (one call a
 * few dozen requests); the clock mixed in should RAND_bytes ever fail */
static void random_id(uint8_t *out, size_t n)
{
    static _Thread_local unsigned char pool[512];
    static _Thread_local size_t left;

    do {
        if (left < n) {
            if (RAND_bytes(pool, sizeof(pool)) != 1) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                for (size_t i = 0; i < sizeof(pool); i++)
                    pool[i] ^= (unsigned char)((uint64_t)ts.tv_nsec >> (i % 8 * 8)) + (unsigned char)i;
            }
            left = sizeof(pool);
        }
        left -= n;
        memcpy(out, pool + left, n);
    } while (all_zero(out, n));         /* an all-zero id is invalid */
}

void tt_trace_begin(struct tt_trace *t, const struct tt_head *h)
{
    size_t len = 0, slen = 0;
    const char *v = h != NULL ? tt_head_get(h, "traceparent", &len) : NULL;
    const char *st;

    memset(t, 0, sizeof(*t));
    t->on = 1;
    if (v != NULL && tt_traceparent_parse(v, len, t->trace_id, t->parent_id,
                                          &t->flags) == 0) {
        st = tt_head_get(h, "tracestate", &slen);
        while (st != NULL && slen > 0 && (*st == ' ' || *st == '\t')) {
            st++;
            slen--;
        }
        /* a longer list may be truncated at a member; simply not kept */
        if (st != NULL && slen > 0 && slen <= TT_TRACESTATE_MAX)
            memcpy(t->state, st, slen);
    } else {
        random_id(t->trace_id, 16);
        t->flags = 0x01;                /* sampled: it is exported */
    }
    random_id(t->span_id, 8);
}

void tt_trace_child(struct tt_trace *t, const struct tt_trace *primary)
{
    *t = *primary;
    if (!primary->on)
        return;
    memcpy(t->link_id, primary->span_id, 8);
    random_id(t->span_id, 8);
}
