/*
 * Statistics: running moments, exact percentiles by linear interpolation,
 * the small-sample rule, the Wilson score interval and the
 * distribution-free confidence interval of a median.  Pure functions, no
 * allocation, no global state; unit-tested in tests/unit/test_report.c.
 * Used by the offline report (tokentap report, metrics/report/) and by
 * the live paired comparison of shadows (metrics/pairs.c, the median
 * interval).
 *
 * Conventions (chosen to match AIPerf, see docs/report.md):
 *   percentile  numpy's default "linear" method: on the ascending sample
 *               x[0..n-1], p in [0, 100] sits at virtual index
 *               h = p/100 * (n - 1); the value is
 *               x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)]).
 *   std         population standard deviation (numpy's np.std, ddof = 0).
 */
#ifndef TT_STATS_H
#define TT_STATS_H

#include <stddef.h>
#include <stdint.h>

/* running count, sum, min, max, mean and variance (Welford's update) */
struct tt_moments {
    uint64_t n;
    double   sum;
    double   min, max;
    double   mean, m2;           /* m2: sum of squared deviations */
};

void   tt_moments_init(struct tt_moments *m);
void   tt_moments_add(struct tt_moments *m, double v);
/* population standard deviation (ddof = 0); 0 when n < 1 */
double tt_moments_std(const struct tt_moments *m);

/* sort ascending in place (NaN never reaches these: callers filter) */
void tt_sort_floats(float *v, size_t n);
void tt_sort_doubles(double *v, size_t n);

/*
 * Percentile <p> (0..100) of the ascending sample <v> of <n> values by
 * linear interpolation between closest ranks (numpy "linear").  NaN when
 * n == 0.
 */
double tt_pct_linear_f(const float *v, size_t n, double p);
double tt_pct_linear_d(const double *v, size_t n, double p);

/*
 * The small-sample rule: percentile <p> of <n> samples is flagged when
 * fewer than one sample is expected beyond it on its side of the
 * distribution, i.e. n * min(p, 100 - p) / 100 < 1 (p99 and p1 need 100
 * samples, p95/p5 20, p90/p10 10, p75/p25 4, p50 2).  Such a value is an
 * interpolation towards the sample's extreme, not an observed tail.
 * Returns 1 when flagged.
 */
int tt_pct_low_sample(uint64_t n, double p);

/* the two-sided standard normal quantile for 95 % (1.959963984540054) */
#define TT_Z95 1.959963984540054

/*
 * Wilson score interval of a proportion: <k> successes of <n> trials at
 * normal quantile <z>.  n == 0 gives [0, 1].
 */
void tt_wilson(uint64_t k, uint64_t n, double z, double *lo, double *hi);

/*
 * Distribution-free interval for the median of <n> sorted values: the
 * order statistics x[r-1] and x[n-r] (0-based) with the largest r >= 1
 * such that P(Binomial(n, 1/2) <= r - 1) <= (1 - conf) / 2.  Its exact
 * coverage, 1 - 2 * P(Binomial(n, 1/2) <= r - 1) (>= conf), goes to
 * <*coverage>.  Returns 0 with the 0-based indices in <*lo>, <*hi>, or -1
 * when n is too small for any such r (n < 6 at conf = 0.95).
 */
int tt_median_ci(uint64_t n, double conf, uint64_t *lo, uint64_t *hi,
                 double *coverage);

#endif
