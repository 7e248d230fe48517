/*
 * Log-linear histograms and their time windows; see metrics/hist.h for the
 * bucket layout, the error bound and the memory.  Called by the aggregator
 * (metrics/agg.c) on every finished request and at /stats.
 */
#include "metrics/hist.h"

#include <stdlib.h>
#include <string.h>

#define SUB       (1u << TT_HIST_SUB_BITS)

const char *const tt_window_names[TT_WIN__COUNT] = { "1m", "5m", "1h", "total" };

static const struct {
    uint64_t slot_ns;
    unsigned nslots;
} window_shape[TT_WIN__COUNT] = {
    [TT_WIN_1M]    = { 10ull * 1000000000ull, 7 },
    [TT_WIN_5M]    = { 60ull * 1000000000ull, 6 },
    [TT_WIN_1H]    = { 600ull * 1000000000ull, 7 },
    [TT_WIN_TOTAL] = { 0, 1 },
};

void tt_hist_init(struct tt_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

void tt_hist_bucket(unsigned i, uint64_t *lo, uint64_t *width)
{
    if (i < SUB) {
        *lo = i;
        *width = 1;
        return;
    }
    unsigned k = i >> TT_HIST_SUB_BITS;     /* >= 1: octave e = k + 5 */
    uint64_t m = i & (SUB - 1);
    *lo = (SUB + m) << (k - 1);
    *width = 1ull << (k - 1);
}

void tt_hist_record_n(struct tt_hist *h, uint64_t v, uint64_t n)
{
    if (n == 0)
        return;
    h->b[tt_hist_index(v)] += n;
    h->count += n;
    h->sum += v * n;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void tt_hist_record(struct tt_hist *h, uint64_t v)
{
    tt_hist_record_n(h, v, 1);
}

void tt_hist_merge(struct tt_hist *dst, const struct tt_hist *src)
{
    if (src->count == 0)
        return;
    for (unsigned i = 0; i < TT_HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t tt_hist_percentile(const struct tt_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (p <= 0)
        return h->min;
    if (p >= 100)
        return h->max;

    /* nearest rank: the smallest sample with at least p% at or below it */
    double want = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++;
    if (rank == 0)
        rank = 1;

    uint64_t seen = 0;
    for (unsigned i = 0; i < TT_HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t lo, w, v;
            tt_hist_bucket(i, &lo, &w);
            v = lo + w / 2;
            if (v < h->min)
                v = h->min;
            if (v > h->max)
                v = h->max;
            return v;
        }
    }
    return h->max;
}

double tt_hist_avg(const struct tt_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}

/* ---- windows ---------------------------------------------------------- */

static void ring_clear_slot(struct tt_wring *r, unsigned nhist, unsigned ncount,
                            unsigned slot)
{
    for (unsigned i = 0; i < nhist; i++)
        tt_hist_init(&r->h[(size_t)slot * nhist + i]);
    if (ncount)
        memset(&r->c[(size_t)slot * ncount], 0, ncount * sizeof(uint64_t));
}

int tt_wstats_init(struct tt_wstats *w, unsigned nhist, unsigned ncount,
                   uint64_t now_ns)
{
    memset(w, 0, sizeof(*w));
    w->nhist = nhist;
    w->ncount = ncount;
    w->start_ns = now_ns;
    for (int k = 0; k < TT_WIN__COUNT; k++) {
        struct tt_wring *r = &w->ring[k];
        r->slot_ns = window_shape[k].slot_ns;
        r->nslots = window_shape[k].nslots;
        r->epoch = calloc(r->nslots, sizeof(*r->epoch));
        r->h = nhist ? malloc((size_t)r->nslots * nhist * sizeof(*r->h)) : NULL;
        r->c = ncount ? calloc((size_t)r->nslots * ncount, sizeof(*r->c)) : NULL;
        if (r->epoch == NULL || (nhist && r->h == NULL) || (ncount && r->c == NULL)) {
            tt_wstats_free(w);
            return -1;
        }
        for (unsigned s = 0; s < r->nslots; s++)
            ring_clear_slot(r, nhist, ncount, s);
    }
    return 0;
}

void tt_wstats_free(struct tt_wstats *w)
{
    for (int k = 0; k < TT_WIN__COUNT; k++) {
        free(w->ring[k].epoch);
        free(w->ring[k].h);
        free(w->ring[k].c);
        w->ring[k].epoch = NULL;
        w->ring[k].h = NULL;
        w->ring[k].c = NULL;
    }
}

static uint64_t epoch_of(const struct tt_wring *r, uint64_t now_ns)
{
    return r->slot_ns ? now_ns / r->slot_ns : 0;
}

/* the slot for <now_ns>, recycled when it holds an older epoch */
static unsigned ring_slot(struct tt_wstats *w, struct tt_wring *r,
                          uint64_t now_ns)
{
    uint64_t e = epoch_of(r, now_ns);
    unsigned s = (unsigned)(e % r->nslots);
    if (r->epoch[s] != e + 1) {
        if (r->epoch[s] > e + 1)    /* clock went back: keep the newer slot */
            return s;
        ring_clear_slot(r, w->nhist, w->ncount, s);
        r->epoch[s] = e + 1;
    }
    return s;
}

void tt_wstats_at(struct tt_wstats *w, uint64_t now_ns, struct tt_wcursor *c)
{
    for (int k = 0; k < TT_WIN__COUNT; k++)
        c->slot[k] = ring_slot(w, &w->ring[k], now_ns);
}

void tt_wcursor_record(struct tt_wstats *w, const struct tt_wcursor *c,
                       unsigned hist, uint64_t v)
{
    if (hist >= w->nhist)
        return;
    for (int k = 0; k < TT_WIN__COUNT; k++)
        tt_hist_record(&w->ring[k].h[(size_t)c->slot[k] * w->nhist + hist], v);
}

void tt_wcursor_add(struct tt_wstats *w, const struct tt_wcursor *c, unsigned hist,
                    const uint16_t *idx, const uint32_t *n, unsigned nd,
                    uint64_t count, uint64_t sum, uint64_t min, uint64_t max)
{
    if (hist >= w->nhist || count == 0)
        return;
    for (int k = 0; k < TT_WIN__COUNT; k++) {
        struct tt_hist *h = &w->ring[k].h[(size_t)c->slot[k] * w->nhist + hist];
        for (unsigned j = 0; j < nd; j++)
            h->b[idx[j]] += n[j];
        h->count += count;
        h->sum += sum;
        if (min < h->min)
            h->min = min;
        if (max > h->max)
            h->max = max;
    }
}

void tt_wcursor_count(struct tt_wstats *w, const struct tt_wcursor *c,
                      unsigned counter, uint64_t delta)
{
    if (counter >= w->ncount)
        return;
    for (int k = 0; k < TT_WIN__COUNT; k++)
        w->ring[k].c[(size_t)c->slot[k] * w->ncount + counter] += delta;
}

void tt_wstats_record(struct tt_wstats *w, uint64_t now_ns, unsigned hist,
                      uint64_t v)
{
    struct tt_wcursor c;
    tt_wstats_at(w, now_ns, &c);
    tt_wcursor_record(w, &c, hist, v);
}

void tt_wstats_count(struct tt_wstats *w, uint64_t now_ns, unsigned counter,
                     uint64_t delta)
{
    struct tt_wcursor c;
    tt_wstats_at(w, now_ns, &c);
    tt_wcursor_count(w, &c, counter, delta);
}

double tt_wstats_query(const struct tt_wstats *w, uint64_t now_ns,
                       enum tt_window win, struct tt_hist *hists,
                       uint64_t *counts)
{
    const struct tt_wring *r = &w->ring[win];
    uint64_t cur = epoch_of(r, now_ns);
    uint64_t oldest = cur >= r->nslots - 1 ? cur - (r->nslots - 1) : 0;

    for (unsigned s = 0; s < r->nslots; s++) {
        uint64_t e = r->epoch[s];
        if (e == 0 || e - 1 < oldest || e - 1 > cur)
            continue;
        if (hists != NULL)
            for (unsigned i = 0; i < w->nhist; i++)
                tt_hist_merge(&hists[i], &r->h[(size_t)s * w->nhist + i]);
        if (counts != NULL)
            for (unsigned i = 0; i < w->ncount; i++)
                counts[i] += r->c[(size_t)s * w->ncount + i];
    }

    uint64_t from = r->slot_ns ? oldest * r->slot_ns : w->start_ns;
    if (from < w->start_ns)
        from = w->start_ns;
    return now_ns > from ? (double)(now_ns - from) / 1e9 : 0.0;
}

int tt_wstats_merge(struct tt_wstats *dst, const struct tt_wstats *src)
{
    if (dst->nhist != src->nhist || dst->ncount != src->ncount)
        return -1;
    if (src->start_ns < dst->start_ns)
        dst->start_ns = src->start_ns;
    for (int k = 0; k < TT_WIN__COUNT; k++) {
        struct tt_wring *d = &dst->ring[k];
        const struct tt_wring *s = &src->ring[k];
        for (unsigned i = 0; i < d->nslots; i++) {
            if (s->epoch[i] == 0 || s->epoch[i] < d->epoch[i])
                continue;
            if (s->epoch[i] > d->epoch[i]) {
                ring_clear_slot(d, dst->nhist, dst->ncount, i);
                d->epoch[i] = s->epoch[i];
            }
            for (unsigned j = 0; j < dst->nhist; j++)
                tt_hist_merge(&d->h[(size_t)i * dst->nhist + j],
                              &s->h[(size_t)i * dst->nhist + j]);
            for (unsigned j = 0; j < dst->ncount; j++)
                d->c[(size_t)i * dst->ncount + j] += s->c[(size_t)i * dst->ncount + j];
        }
    }
    return 0;
}
