/*
 * Incremental text/event-stream decoder, see sse.h.  Called by
 * proxy/decode/stream.c; owns nothing beyond its two reusable buffers.
 *
 * Follows the WHATWG "event stream interpretation": lines end with CRLF, LF
 * or CR (a CR at the end of one feed and an LF at the start of the next are
 * one line end: the <cr> flag remembers it); a line starting with ':' is a
 * comment; "field: value" drops one space after the colon; a line without a
 * colon is a field with an empty value; data lines are joined with LF; an
 * empty line dispatches the event when at least one data field was seen;
 * "id" and "retry" are accepted and ignored; unknown fields are ignored.
 * A UTF-8 BOM at the very start of the stream is dropped.
 *
 * Complete lines inside one feed are processed in place; only a line cut by
 * the end of a feed is copied into <line>.  An event of one data line that
 * ends inside the feed it starts in (a live stream's usual event) is
 * delivered from the feed's own bytes (<ref>); its data is copied into
 * <data> only when a second data line joins it or the feed ends first.
 */
#include "proxy/decode/sse.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/base/bom.h"


void tt_sse_init(struct tt_sse *d, size_t max_event)
{
    memset(d, 0, sizeof(*d));
    d->max_event = max_event ? max_event : TT_SSE_MAX_EVENT_DEFAULT;
}

void tt_sse_free(struct tt_sse *d)
{
    free(d->line);
    free(d->data);
    d->line = d->data = NULL;
    d->line_cap = d->data_cap = 0;
    d->line_len = d->data_len = 0;
}

/* make room for <need> bytes in *<buf>; 0 or -1 when out of memory */
static int reserve(char **buf, size_t *cap, size_t need)
{
    size_t n;
    char *p;

    if (need <= *cap)
        return 0;
    n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    p = realloc(*buf, n);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
}

static void reset_event(struct tt_sse *d)
{
    d->ref = NULL;
    d->data_len = 0;
    d->has_data = 0;
    d->name_len = 0;
    d->name[0] = '\0';
}

/* the current event is too big: drop it and ignore lines up to its end */
static void oversize(struct tt_sse *d)
{
    if (!d->skip_event)
        d->oversize++;
    d->skip_event = 1;
    reset_event(d);
}

static void dispatch(struct tt_sse *d, tt_sse_cb cb, void *ctx)
{
    struct tt_sse_event ev;

    if (d->skip_event) {
        d->skip_event = 0;
        reset_event(d);
        return;
    }
    if (!d->has_data) {
        reset_event(d);
        return;
    }
    ev.name = d->name;
    ev.name_len = d->name_len;
    if (d->ref != NULL) {
        ev.data = d->ref;
        ev.data_len = d->ref_len;
    } else {
        /* the buffer ends with the LF appended after the last data line */
        ev.data = d->data;
        ev.data_len = d->data_len - 1;
    }
    d->dispatched++;
    cb(ctx, &ev);
    reset_event(d);
}

/* the event's in-place data line into <data> (with its LF), before the
 * feed's bytes go away or a second data line joins it; -1 out of memory */
static int own_data(struct tt_sse *d)
{
    if (d->ref == NULL)
        return 0;
    if (reserve(&d->data, &d->data_cap, d->ref_len + 1) < 0)
        return -1;
    memcpy(d->data, d->ref, d->ref_len);
    d->data[d->ref_len] = '\n';
    d->data_len = d->ref_len + 1;
    d->ref = NULL;
    return 0;
}

/* a complete line; <in_place>: <s> is the feed's, valid until it returns */
static void process_line(struct tt_sse *d, const char *s, size_t n, int in_place,
                         tt_sse_cb cb, void *ctx)
{
    const char *colon, *val;
    size_t flen, vlen;

    if (n == 0) {
        dispatch(d, cb, ctx);
        return;
    }
    if (d->skip_event || s[0] == ':')
        return;
    /* a data line, the usual one, needs no scan for its colon */
    colon = n >= 5 && memcmp(s, "data:", 5) == 0 ? s + 4 : memchr(s, ':', n);
    if (colon != NULL) {
        flen = (size_t)(colon - s);
        val = colon + 1;
        vlen = n - flen - 1;
        if (vlen > 0 && val[0] == ' ') {
            val++;
            vlen--;
        }
    } else {
        flen = n;
        val = s + n;
        vlen = 0;
    }
    if (flen == 4 && memcmp(s, "data", 4) == 0) {
        /* the bound counts the LF that joins (or ends) each data line */
        if (vlen >= d->max_event) {
            oversize(d);
            return;
        }
        if (in_place && !d->has_data) {
            d->ref = val;
            d->ref_len = vlen;
            d->has_data = 1;
            return;
        }
        if (own_data(d) < 0 || d->data_len + vlen + 1 > d->max_event ||
            reserve(&d->data, &d->data_cap, d->data_len + vlen + 1) < 0) {
            oversize(d);
            return;
        }
        memcpy(d->data + d->data_len, val, vlen);
        d->data_len += vlen;
        d->data[d->data_len++] = '\n';
        d->has_data = 1;
    } else if (flen == 5 && memcmp(s, "event", 5) == 0) {
        if (vlen > TT_SSE_EVENT_NAME_MAX)
            vlen = TT_SSE_EVENT_NAME_MAX;
        memcpy(d->name, val, vlen);
        d->name[vlen] = '\0';
        d->name_len = vlen;
    }
    /* "id", "retry" and unknown fields: ignored */
}

/*
 * Keep the start of a line cut by the end of a feed.  Only what the line
 * can still mean is stored, and only as much as processing the complete line
 * at once would accept, so the outcome never depends on where feeds split:
 * a field name longer than "event" (or a comment) is ignored; a data value
 * that no longer fits the event bound drops the event now rather than at
 * the line's end; an event name is kept to the length it is truncated to.
 */
#define FIELD_DATA  1
#define FIELD_EVENT 2
#define EVENT_LINE_KEEP (6 + 1 + TT_SSE_EVENT_NAME_MAX)    /* "event:" ' ' name */

static void keep_partial(struct tt_sse *d, const char *s, size_t n)
{
    size_t total, keep = n;

    if (n == 0 || d->skip_line)
        return;
    if ((d->line_len == 0 && s[0] == ':') || d->skip_event) {
        d->skip_line = 1;           /* a comment, or a line of a dropped event */
        return;
    }
    if (d->field == 0) {
        const char *colon = memchr(s, ':', n);
        size_t name_part = colon ? (size_t)(colon - s) : n;
        char name[8];

        if (d->line_len + name_part > 5) {
            d->skip_line = 1;       /* unknown field */
            d->line_len = 0;
            return;
        }
        if (colon != NULL) {
            if (d->line_len > 0)
                memcpy(name, d->line, d->line_len);
            memcpy(name + d->line_len, s, name_part);
            name_part += d->line_len;
            if (name_part == 4 && memcmp(name, "data", 4) == 0) {
                d->field = FIELD_DATA;
            } else if (name_part == 5 && memcmp(name, "event", 5) == 0) {
                d->field = FIELD_EVENT;
            } else {
                d->skip_line = 1;   /* id, retry, unknown: ignored */
                d->line_len = 0;
                return;
            }
        }
    }
    total = d->line_len + n;
    if (d->field == FIELD_DATA) {
        /* the value so far: after "data:" and one optional space */
        size_t vlen = total - 5;
        char c5 = total > 5 ? (d->line_len > 5 ? d->line[5] : s[5 - d->line_len]) : 0;
        if (c5 == ' ')
            vlen--;
        if (vlen > d->max_event || d->data_len + vlen + 1 > d->max_event) {
            d->line_len = 0;
            d->skip_line = 1;
            oversize(d);
            return;
        }
    } else if (d->field == FIELD_EVENT) {
        keep = d->line_len >= EVENT_LINE_KEEP ? 0 : EVENT_LINE_KEEP - d->line_len;
        if (keep > n)
            keep = n;
    }
    if (reserve(&d->line, &d->line_cap, d->line_len + keep) < 0) {
        d->line_len = 0;
        d->skip_line = 1;
        oversize(d);
        return;
    }
    if (keep > 0) {
        memcpy(d->line + d->line_len, s, keep);
        d->line_len += keep;
    }
}

/* the first CR or LF in [p, end), or <end>; memchr scans a word at a time */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *lim = nl != NULL ? nl : end;
    const char *cr = memchr(p, '\r', (size_t)(lim - p));

    return cr != NULL ? cr : lim;
}

/* the feed ends before its event does: its in-place data is kept */
static void keep_data(struct tt_sse *d)
{
    if (d->ref != NULL && own_data(d) < 0)
        oversize(d);            /* out of memory: the event cannot be kept */
}

/*
 * A live stream's usual event, whole at <p> with nothing pending: one data
 * line ended by an empty line ("data: V" LF LF, or CRLF CRLF), delivered
 * as process_line() and dispatch() would deliver it, without going
 * through them.  Returns where the event ends, or NULL when it is not that
 * event (the general path takes it).
 */
static const char *whole_event(struct tt_sse *d, const char *p, const char *end,
                               tt_sse_cb cb, void *ctx)
{
    struct tt_sse_event ev;
    const char *val = p + 5, *q;

    if (end - p < 7 || memcmp(p, "data:", 5) != 0)
        return NULL;
    q = line_end(val, end);
    if (end - q >= 2 && q[0] == '\n' && q[1] == '\n') {
        end = q + 2;
    } else if (end - q >= 4 && memcmp(q, "\r\n\r\n", 4) == 0) {
        end = q + 4;
    } else {
        return NULL;
    }
    if (val[0] == ' ')
        val++;
    if ((size_t)(q - val) >= d->max_event)
        return NULL;                    /* oversize: process_line() counts it */
    ev.name = d->name;
    ev.name_len = d->name_len;
    ev.data = val;
    ev.data_len = (size_t)(q - val);
    d->dispatched++;
    cb(ctx, &ev);
    if (d->name_len != 0) {
        d->name_len = 0;
        d->name[0] = '\0';
    }
    return end;
}

static void feed_bytes(struct tt_sse *d, const char *p, size_t len,
                       tt_sse_cb cb, void *ctx)
{
    const char *end = p + len;

    while (p < end) {
        const char *q;

        if (!d->cr && !d->skip_line && d->line_len == 0 && !d->has_data &&
            !d->skip_event && *p == 'd' && (q = whole_event(d, p, end, cb, ctx)) != NULL) {
            p = q;
            continue;
        }
        if (d->cr) {
            d->cr = 0;
            if (*p == '\n') {
                p++;
                continue;
            }
        }
        /* an empty line (an event's end) needs no scan */
        q = *p == '\n' || *p == '\r' ? p : line_end(p, end);
        if (q == end) {
            keep_data(d);
            keep_partial(d, p, (size_t)(q - p));
            return;
        }
        if (*q == '\r')
            d->cr = 1;
        if (d->skip_line) {
            d->skip_line = 0;           /* the dropped line ends here */
        } else if (d->line_len == 0) {
            process_line(d, p, (size_t)(q - p), 1, cb, ctx);
        } else {
            keep_partial(d, p, (size_t)(q - p));
            if (d->skip_line)
                d->skip_line = 0;
            else
                process_line(d, d->line, d->line_len, 0, cb, ctx);
            d->line_len = 0;
        }
        d->field = 0;
        p = q + 1;
    }
    keep_data(d);
}

void tt_sse_feed(struct tt_sse *d, const char *buf, size_t len,
                 tt_sse_cb cb, void *ctx)
{
    size_t replay, n = tt_bom_skip(&d->bom, buf, len, &replay);

    if (replay > 0)         /* not a BOM after all: the matched bytes are content */
        feed_bytes(d, (const char *)tt_bom_bytes, replay, cb, ctx);
    if (n < len)
        feed_bytes(d, buf + n, len - n, cb, ctx);
}

void tt_sse_finish(struct tt_sse *d, int flush, tt_sse_cb cb, void *ctx)
{
    {
        size_t n = tt_bom_end(&d->bom);
        if (n > 0)
            feed_bytes(d, (const char *)tt_bom_bytes, n, cb, ctx);
    }
    if (flush) {
        if (d->line_len > 0 && !d->skip_line)
            process_line(d, d->line, d->line_len, 0, cb, ctx);
        dispatch(d, cb, ctx);
    }
    d->line_len = 0;
    d->field = 0;
    d->skip_line = 0;
    d->skip_event = 0;
    d->cr = 0;
    d->bom = 0;
    reset_event(d);
}
