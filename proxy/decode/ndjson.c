/*
 * Incremental NDJSON line splitter, see ndjson.h.  Called by
 * proxy/decode/stream.c; complete lines inside one feed are delivered in place,
 * only a line cut by the end of a feed is copied into <line>.
 */
#include "proxy/decode/ndjson.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/base/bom.h"


void tt_ndjson_init(struct tt_ndjson *d, size_t max_line)
{
    memset(d, 0, sizeof(*d));
    d->max_line = max_line ? max_line : TT_NDJSON_MAX_LINE_DEFAULT;
}

void tt_ndjson_free(struct tt_ndjson *d)
{
    free(d->line);
    d->line = NULL;
    d->line_cap = d->line_len = 0;
}

static void deliver(struct tt_ndjson *d, const char *s, size_t n,
                    tt_ndjson_cb cb, void *ctx)
{
    size_t i;

    if (n > 0 && s[n - 1] == '\r')
        n--;
    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            break;
    if (i == n)
        return;             /* blank line */
    d->dispatched++;
    cb(ctx, s, n);
}

static void keep_partial(struct tt_ndjson *d, const char *s, size_t n)
{
    if (n == 0 || d->skip)
        return;
    if (n > d->max_line || d->line_len + n > d->max_line) {
        d->line_len = 0;
        d->skip = 1;
        d->oversize++;
        return;
    }
    if (d->line_len + n > d->line_cap) {
        size_t cap = d->line_cap ? d->line_cap : 256;
        char *p;
        while (cap < d->line_len + n)
            cap *= 2;
        p = realloc(d->line, cap);
        if (p == NULL) {
            d->line_len = 0;
            d->skip = 1;
            d->oversize++;
            return;
        }
        d->line = p;
        d->line_cap = cap;
    }
    memcpy(d->line + d->line_len, s, n);
    d->line_len += n;
}

static void feed_bytes(struct tt_ndjson *d, const char *p, size_t len,
                       tt_ndjson_cb cb, void *ctx)
{
    const char *end = p + len;

    while (p < end) {
        const char *q = memchr(p, '\n', (size_t)(end - p));
        size_t n;

        if (q == NULL) {
            keep_partial(d, p, (size_t)(end - p));
            return;
        }
        n = (size_t)(q - p);
        if (d->skip) {
            d->skip = 0;
        } else if (d->line_len == 0) {
            if (n > d->max_line)
                d->oversize++;
            else
                deliver(d, p, n, cb, ctx);
        } else {
            keep_partial(d, p, n);
            if (d->skip)
                d->skip = 0;
            else
                deliver(d, d->line, d->line_len, cb, ctx);
            d->line_len = 0;
        }
        p = q + 1;
    }
}

void tt_ndjson_feed(struct tt_ndjson *d, const char *buf, size_t len,
                    tt_ndjson_cb cb, void *ctx)
{
    size_t replay, n = tt_bom_skip(&d->bom, buf, len, &replay);

    if (replay > 0)         /* not a BOM after all: the matched bytes are content */
        feed_bytes(d, (const char *)tt_bom_bytes, replay, cb, ctx);
    if (n < len)
        feed_bytes(d, buf + n, len - n, cb, ctx);
}

void tt_ndjson_finish(struct tt_ndjson *d, int flush, tt_ndjson_cb cb,
                      void *ctx)
{
    {
        size_t n = tt_bom_end(&d->bom);
        if (n > 0)
            feed_bytes(d, (const char *)tt_bom_bytes, n, cb, ctx);
    }
    if (flush && !d->skip && d->line_len > 0)
        deliver(d, d->line, d->line_len, cb, ctx);
    d->line_len = 0;
    d->skip = 0;
    d->bom = 0;
}
