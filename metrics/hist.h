/*
 * Fixed-memory, mergeable log-linear histograms (HDR style) and the
 * time-windowed sets of them behind /stats.  Owned by metrics/hist.c;
 * used by the aggregator (metrics/agg.c) and the offline report.
 *
 * Values are unsigned integers in the caller's unit (the aggregator uses
 * microseconds for times, tokens for lengths, milli-tokens/s for rates).
 * Values 0..63 have a bucket each (exact).  Above, every power of two
 * [2^e, 2^(e+1)) is cut into 64 equal sub-buckets of width 2^(e-6), up to
 * e = 32 (values below 2^33; larger values land in the last bucket while
 * min/max/sum stay exact).
 *
 * Error bound: a percentile is reported as the midpoint of the bucket that
 * holds the exact nearest-rank sample, clamped to [min, max], so
 *     |reported - exact| <= 2^(e-7) <= exact / 128     (0.78125 %)
 * for exact >= 64, and <= 0 for exact < 64 (no error).  min, max, count,
 * sum and avg are exact.
 *
 * Memory: struct tt_hist is 32 + 1792 * 8 = 14,368 bytes, no allocation
 * after creation; record is O(1) (one clz), merge and query O(buckets).
 */
#ifndef TT_HIST_H
#define TT_HIST_H

#include <stddef.h>
#include <stdint.h>

#define TT_HIST_SUB_BITS 6
#define TT_HIST_MAX_EXP  32
#define TT_HIST_BUCKETS  ((TT_HIST_MAX_EXP - TT_HIST_SUB_BITS + 2) << TT_HIST_SUB_BITS)

struct tt_hist {
    uint64_t count;
    uint64_t sum;
    uint64_t min;               /* UINT64_MAX when empty */
    uint64_t max;
    uint64_t b[TT_HIST_BUCKETS];
};

void     tt_hist_init(struct tt_hist *h);
void     tt_hist_record(struct tt_hist *h, uint64_t v);
void     tt_hist_record_n(struct tt_hist *h, uint64_t v, uint64_t n);
void     tt_hist_merge(struct tt_hist *dst, const struct tt_hist *src);
/* nearest-rank percentile, <p> in (0, 100]; 0 when empty */
uint64_t tt_hist_percentile(const struct tt_hist *h, double p);
double   tt_hist_avg(const struct tt_hist *h);

/* bucket index of <v> (inline: every gap of every request takes one) and
 * the range [lo, lo + width) of bucket <i> */
static inline unsigned tt_hist_index(uint64_t v)
{
    const uint64_t sub = 1u << TT_HIST_SUB_BITS;
    if (v < sub)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    if (e > TT_HIST_MAX_EXP)
        return TT_HIST_BUCKETS - 1;
    return ((e - TT_HIST_SUB_BITS + 1) << TT_HIST_SUB_BITS)
           + (unsigned)((v >> (e - TT_HIST_SUB_BITS)) - sub);
}
void     tt_hist_bucket(unsigned i, uint64_t *lo, uint64_t *width);

/*
 * Time windows.  A tt_wstats keeps <nhist> histograms and <ncount> counters
 * per slot in three rings plus a since-start total:
 *
 *   window "1m":  7 slots of 10 s   (the current slot + 6 full ones)
 *   window "5m":  6 slots of 60 s   (current + 5)
 *   window "1h":  7 slots of 600 s  (current + 6)
 *   "total":      one slot since tt_wstats_init
 *
 * A window covers its nominal length plus the elapsed part of the current
 * slot; queries report that exact covered duration (never more than the
 * time since start), so rates are not biased by the slot edge.  Slots are
 * recycled lazily by epoch number: no timer, and a query never writes.
 *
 * Memory: 21 slots * nhist * sizeof(struct tt_hist) + counters, allocated
 * once by tt_wstats_init (10 histograms: 3.0 MB).
 */
enum tt_window { TT_WIN_1M = 0, TT_WIN_5M, TT_WIN_1H, TT_WIN_TOTAL, TT_WIN__COUNT };

extern const char *const tt_window_names[TT_WIN__COUNT];   /* "1m", ... */

struct tt_wring {
    uint64_t  slot_ns;
    unsigned  nslots;
    uint64_t *epoch;            /* per slot: epoch + 1, 0 = never used */
    struct tt_hist *h;          /* nslots * nhist */
    uint64_t *c;                /* nslots * ncount */
};

struct tt_wstats {
    unsigned nhist, ncount;
    uint64_t start_ns;          /* monotonic ns at init */
    struct tt_wring ring[TT_WIN__COUNT];
};

/* 0, or -1 when out of memory */
int  tt_wstats_init(struct tt_wstats *w, unsigned nhist, unsigned ncount,
                    uint64_t now_ns);
void tt_wstats_free(struct tt_wstats *w);
void tt_wstats_record(struct tt_wstats *w, uint64_t now_ns, unsigned hist,
                      uint64_t v);
void tt_wstats_count(struct tt_wstats *w, uint64_t now_ns, unsigned counter,
                     uint64_t delta);
/*
 * The same in two steps, for many values at one instant (the inter-chunk
 * gaps of a request): tt_wstats_at picks (and recycles) the current slots
 * once, then each record is a plain histogram record per ring.
 */
struct tt_wcursor {
    unsigned slot[TT_WIN__COUNT];
};
void tt_wstats_at(struct tt_wstats *w, uint64_t now_ns, struct tt_wcursor *c);
void tt_wcursor_record(struct tt_wstats *w, const struct tt_wcursor *c,
                       unsigned hist, uint64_t v);
void tt_wcursor_count(struct tt_wstats *w, const struct tt_wcursor *c,
                      unsigned counter, uint64_t delta);
/*
 * Values bucketed by the caller (tt_hist_index): <n>[j] values in bucket
 * <idx>[j], j < <nd>, and their exact count, sum, min and max, added to
 * histogram <hist> of every window: the same result as recording each
 * value, for O(distinct buckets) work under the caller's lock.
 */
void tt_wcursor_add(struct tt_wstats *w, const struct tt_wcursor *c, unsigned hist,
                    const uint16_t *idx, const uint32_t *n, unsigned nd,
                    uint64_t count, uint64_t sum, uint64_t min, uint64_t max);

/*
 * Add window <win> as seen at <now_ns> into <hists> (nhist, initialised by
 * the caller) and <counts> (ncount, zeroed by the caller); either may be
 * NULL.  Returns the covered duration in seconds.  Adding several
 * tt_wstats into the same outputs merges them (one per aggregator).
 */
double tt_wstats_query(const struct tt_wstats *w, uint64_t now_ns,
                       enum tt_window win, struct tt_hist *hists,
                       uint64_t *counts);
/* add every slot of <src> into <dst> (same shape); 0 or -1 on mismatch */
int  tt_wstats_merge(struct tt_wstats *dst, const struct tt_wstats *src);

#endif
