/*
 * Statistics: moments, linear-interpolation percentiles, the small-sample
 * rule, Wilson and median intervals.  See metrics/stats.h for the
 * definitions each function implements.
 */
#include "metrics/stats.h"

#include <math.h>
#include <stdlib.h>

void tt_moments_init(struct tt_moments *m)
{
    m->n = 0;
    m->sum = 0;
    m->min = INFINITY;
    m->max = -INFINITY;
    m->mean = 0;
    m->m2 = 0;
}

void tt_moments_add(struct tt_moments *m, double v)
{
    double d;

    m->n++;
    m->sum += v;
    if (v < m->min)
        m->min = v;
    if (v > m->max)
        m->max = v;
    /* Welford: no cancellation when the spread is tiny against the mean */
    d = v - m->mean;
    m->mean += d / (double)m->n;
    m->m2 += d * (v - m->mean);
}

double tt_moments_std(const struct tt_moments *m)
{
    if (m->n < 1 || m->m2 <= 0)
        return 0;
    return sqrt(m->m2 / (double)m->n);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tt_sort_floats(float *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_float);
}

void tt_sort_doubles(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_double);
}

/* virtual index h = p/100 (n-1); lower rank and fraction */
static size_t pct_rank(size_t n, double p, double *frac)
{
    double h;
    size_t lo;

    if (p < 0)
        p = 0;
    if (p > 100)
        p = 100;
    h = p / 100.0 * (double)(n - 1);
    lo = (size_t)floor(h);
    if (lo >= n - 1) {
        *frac = 0;
        return n - 1;
    }
    *frac = h - (double)lo;
    return lo;
}

/* linear interpolation between the closest ranks <lo> and <lo>+1 */
static double interp(double a, double b, double frac)
{
    return frac == 0 ? a : a + frac * (b - a);
}

double tt_pct_linear_f(const float *v, size_t n, double p)
{
    double frac;
    size_t lo;

    if (n == 0)
        return NAN;
    lo = pct_rank(n, p, &frac);
    return interp(v[lo], frac == 0 ? v[lo] : v[lo + 1], frac);
}

double tt_pct_linear_d(const double *v, size_t n, double p)
{
    double frac;
    size_t lo;

    if (n == 0)
        return NAN;
    lo = pct_rank(n, p, &frac);
    return interp(v[lo], frac == 0 ? v[lo] : v[lo + 1], frac);
}

int tt_pct_low_sample(uint64_t n, double p)
{
    double tail = p < 100 - p ? p : 100 - p;

    /* n * tail / 100 < 1, kept in integers where it matters (p1, p99) */
    return (double)n * tail < 100.0 - 1e-9;
}

void tt_wilson(uint64_t k, uint64_t n, double z, double *lo, double *hi)
{
    double nn, ph, z2, den, centre, half;

    if (n == 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    nn = (double)n;
    ph = (double)k / nn;
    z2 = z * z;
    den = 1 + z2 / nn;
    centre = (ph + z2 / (2 * nn)) / den;
    half = z / den * sqrt(ph * (1 - ph) / nn + z2 / (4 * nn * nn));
    *lo = centre - half;
    *hi = centre + half;
    if (*lo < 0)
        *lo = 0;
    if (*hi > 1)
        *hi = 1;
    /* the bounds are exact at the edges of the range */
    if (k == 0)
        *lo = 0;
    if (k == n)
        *hi = 1;
}

int tt_median_ci(uint64_t n, double conf, uint64_t *lo, uint64_t *hi,
                 double *coverage)
{
    double alpha = (1 - conf) / 2;
    double base, cdf = 0, next;
    uint64_t j;

    if (n == 0)
        return -1;
    base = lgamma((double)n + 1) - (double)n * log(2.0);
    /*
     * Find the largest r with P(X <= r - 1) <= alpha: walk j = r - 1 up
     * while adding pmf(j) keeps the tail within alpha.
     */
    for (j = 0; j < n; j++) {
        double lp = base - lgamma((double)j + 1) - lgamma((double)(n - j) + 1);
        next = cdf + exp(lp);
        if (next > alpha)
            break;
        cdf = next;
    }
    if (j == 0)
        return -1;          /* even r = 1 leaves more than alpha out */
    /* r - 1 = j - 1 is the last index whose cumulative tail fits */
    *lo = j - 1;             /* x_(r) with r = j, 0-based r - 1 */
    *hi = n - j;             /* x_(n - r + 1), 0-based n - r */
    *coverage = 1 - 2 * cdf;
    return 0;
}
