/*
 * Unit tests of metrics/hist.c: percentile accuracy against exact
 * nearest-rank percentiles of sorted samples within the bound stated in
 * metrics/hist.h, merging, and the time windows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "metrics/hist.h"
#include "tests/unit/rng.h"

#define NS 1000000000ull

static uint64_t rng = 88172645463325252ull;

static uint64_t xorshift(void)
{
    return test_xorshift(&rng);
}

static double unif(void)
{
    return ((double)(xorshift() >> 11) + 0.5) / 9007199254740992.0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t exact_pct(const uint64_t *sorted, size_t n, double p)
{
    double want = p / 100.0 * (double)n;
    size_t rank = (size_t)want;
    if ((double)rank < want)
        rank++;
    if (rank == 0)
        rank = 1;
    return sorted[rank - 1];
}

static void check_within_bound(const uint64_t *v, size_t n)
{
    struct tt_hist *h = malloc(sizeof(*h));
    uint64_t *s = malloc(n * sizeof(*s));
    static const double ps[] = { 1, 10, 25, 50, 75, 90, 95, 99, 99.9 };
    uint64_t sum = 0;

    assert_non_null(h);
    assert_non_null(s);
    tt_hist_init(h);
    for (size_t i = 0; i < n; i++) {
        tt_hist_record(h, v[i]);
        sum += v[i];
    }
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u64);

    assert_int_equal(h->count, n);
    assert_int_equal(h->sum, sum);
    assert_int_equal(h->min, s[0]);
    assert_int_equal(h->max, s[n - 1]);
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        uint64_t ex = exact_pct(s, n, ps[i]);
        uint64_t got = tt_hist_percentile(h, ps[i]);
        double err = fabs((double)got - (double)ex);
        if (ex < 64)
            assert_int_equal(got, ex);
        else if (err > (double)ex / 128.0)
            fail_msg("p%g: got %llu exact %llu (err %.4f%% > 0.78125%%)", ps[i],
                     (unsigned long long)got, (unsigned long long)ex,
                     100.0 * err / (double)ex);
    }
    free(h);
    free(s);
}

static void test_index_layout(void **state)
{
    (void)state;
    /* every bucket's range maps back to itself and buckets tile the line */
    uint64_t next = 0;
    for (unsigned i = 0; i < TT_HIST_BUCKETS; i++) {
        uint64_t lo, w;
        tt_hist_bucket(i, &lo, &w);
        assert_int_equal(lo, next);
        assert_int_equal(tt_hist_index(lo), i);
        assert_int_equal(tt_hist_index(lo + w - 1), i);
        /* width relative to the bucket's lower bound never exceeds 1/64 */
        if (lo >= 64)
            assert_true(w * 64 <= lo);
        next = lo + w;
    }
    assert_int_equal(next, 1ull << (TT_HIST_MAX_EXP + 1));
    assert_int_equal(tt_hist_index(UINT64_MAX), TT_HIST_BUCKETS - 1);
}

static void test_accuracy_random(void **state)
{
    enum { N = 200000 };
    uint64_t *v = malloc(N * sizeof(*v));
    (void)state;
    assert_non_null(v);

    /* uniform 0..10 s in us */
    for (size_t i = 0; i < N; i++)
        v[i] = xorshift() % (10ull * 1000000);
    check_within_bound(v, N);

    /* log-normal around 200 ms (TTFT-like), in us */
    for (size_t i = 0; i < N; i++) {
        double z = sqrt(-2 * log(unif())) * cos(2 * M_PI * unif());
        v[i] = (uint64_t)(200000.0 * exp(1.2 * z));
    }
    check_within_bound(v, N);

    /* exponential, small values (ITL-like, 25 ms mean) */
    for (size_t i = 0; i < N; i++)
        v[i] = (uint64_t)(-25000.0 * log(unif()));
    check_within_bound(v, N);

    /* bimodal token lengths, many tiny values */
    for (size_t i = 0; i < N; i++)
        v[i] = (xorshift() & 1) ? 1 + xorshift() % 40 : 2000 + xorshift() % 30000;
    check_within_bound(v, N);

    /* a handful of samples */
    for (size_t i = 0; i < 7; i++)
        v[i] = 1000 + i * 977;
    check_within_bound(v, 7);
    free(v);
}

static void test_merge(void **state)
{
    struct tt_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)),
                   *all = malloc(sizeof(*all));
    (void)state;
    tt_hist_init(a);
    tt_hist_init(b);
    tt_hist_init(all);
    for (int i = 0; i < 10000; i++) {
        uint64_t x = xorshift() % 5000000;
        tt_hist_record((i & 1) ? a : b, x);
        tt_hist_record(all, x);
    }
    tt_hist_merge(a, b);
    assert_memory_equal(a, all, sizeof(*a));
    assert_int_equal(tt_hist_percentile(a, 50), tt_hist_percentile(all, 50));

    struct tt_hist *e = malloc(sizeof(*e));
    tt_hist_init(e);
    assert_int_equal(tt_hist_percentile(e, 50), 0);
    tt_hist_merge(e, e);
    assert_int_equal(e->count, 0);
    free(a);
    free(b);
    free(all);
    free(e);
}

static void test_windows(void **state)
{
    struct tt_wstats w;
    struct tt_hist h[2];
    uint64_t c[2];
    uint64_t start = 1000 * NS;     /* epoch-aligned for easy numbers */
    double d;
    (void)state;

    assert_int_equal(tt_wstats_init(&w, 2, 2, start), 0);
    /* one request every second for 2 hours, value = its second */
    for (uint64_t s = 0; s < 7200; s++) {
        tt_wstats_record(&w, start + s * NS, 0, s);
        tt_wstats_count(&w, start + s * NS, 1, 1);
    }
    uint64_t now = start + 7199 * NS + NS / 2;

    memset(c, 0, sizeof(c));
    tt_hist_init(&h[0]);
    tt_hist_init(&h[1]);
    d = tt_wstats_query(&w, now, TT_WIN_1M, h, c);
    /* 1m covers 60 s plus the elapsed part of the current 10 s slot */
    assert_true(d >= 60.0 && d <= 70.0);
    assert_int_equal(c[1], h[0].count);
    assert_true(fabs((double)c[1] - d) <= 1.0);
    assert_int_equal(h[0].max, 7199);
    assert_true(h[0].min >= 7199 - 70);
    assert_int_equal(h[1].count, 0);

    memset(c, 0, sizeof(c));
    tt_hist_init(&h[0]);
    d = tt_wstats_query(&w, now, TT_WIN_5M, h, c);
    assert_true(d >= 300.0 && d <= 360.0);
    assert_true(fabs((double)c[1] - d) <= 1.0);

    memset(c, 0, sizeof(c));
    tt_hist_init(&h[0]);
    d = tt_wstats_query(&w, now, TT_WIN_1H, h, c);
    assert_true(d >= 3600.0 && d <= 4200.0);
    assert_true(fabs((double)c[1] - d) <= 1.0);

    memset(c, 0, sizeof(c));
    tt_hist_init(&h[0]);
    d = tt_wstats_query(&w, now, TT_WIN_TOTAL, h, c);
    assert_int_equal(c[1], 7200);
    assert_true(fabs(d - 7199.5) < 1e-6);

    /* two idle hours later every window but the total is empty */
    now += 7200 * NS;
    for (int k = TT_WIN_1M; k <= TT_WIN_1H; k++) {
        memset(c, 0, sizeof(c));
        tt_hist_init(&h[0]);
        tt_wstats_query(&w, now, (enum tt_window)k, h, c);
        assert_int_equal(c[1], 0);
        assert_int_equal(h[0].count, 0);
    }

    /* merging two workers' windows adds them up */
    struct tt_wstats w2;
    assert_int_equal(tt_wstats_init(&w2, 2, 2, start), 0);
    tt_wstats_count(&w2, now, 1, 5);
    tt_wstats_count(&w, now, 1, 3);
    assert_int_equal(tt_wstats_merge(&w2, &w), 0);
    memset(c, 0, sizeof(c));
    tt_wstats_query(&w2, now, TT_WIN_1M, NULL, c);
    assert_int_equal(c[1], 8);
    memset(c, 0, sizeof(c));
    tt_wstats_query(&w2, now, TT_WIN_TOTAL, NULL, c);
    assert_int_equal(c[1], 7200 + 8);
    tt_wstats_free(&w);
    tt_wstats_free(&w2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_layout),
        cmocka_unit_test(test_accuracy_random),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
