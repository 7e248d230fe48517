/*
 * Timeslices of a record set: see metrics/report/report_slice.h.
 */
#include "metrics/report/report_slice.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int cmp_row_start(const void *x, const void *y)
{
    const struct tt_rrow *a = *(const struct tt_rrow *const *)x;
    const struct tt_rrow *b = *(const struct tt_rrow *const *)y;
    return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

/* the summary of <n> values (sorted here), as tt_rset_summary computes it */
static void summarize(float *v, size_t n, struct tt_rsummary *out)
{
    struct tt_moments mo;

    memset(out, 0, sizeof(*out));
    out->exact = 1;
    out->count = n;
    if (n == 0) {
        out->avg = out->min = out->max = out->std = NAN;
        for (int i = 0; i < TT_RPT_NPCT; i++)
            out->pct[i] = NAN;
        return;
    }
    tt_moments_init(&mo);
    for (size_t i = 0; i < n; i++)
        tt_moments_add(&mo, v[i]);
    tt_sort_floats(v, n);
    out->sum = mo.sum;
    out->avg = mo.sum / (double)n;
    out->min = mo.min;
    out->max = mo.max;
    out->std = tt_moments_std(&mo);
    for (int i = 0; i < TT_RPT_NPCT; i++)
        out->pct[i] = tt_pct_linear_f(v, n, tt_rpt_pcts[i]);
}

int tt_rslices_build(const struct tt_rset *set, int64_t width_ns,
                     int64_t origin_ns, struct tt_rslices *out, char *err,
                     size_t errlen)
{
    const struct tt_rrow **v = NULL;
    float *scratch = NULL;
    size_t n = 0;

    memset(out, 0, sizeof(*out));
    out->width_ns = width_ns;
    out->origin_ns = origin_ns;
    out->have_good = set->judged > 0;
    if (width_ns <= 0) {
        snprintf(err, errlen, "slice width must be positive");
        return -1;
    }
    v = malloc((set->nrows ? set->nrows : 1) * sizeof(*v));
    scratch = malloc((set->nrows ? set->nrows : 1) * sizeof(*scratch));
    if (v == NULL || scratch == NULL)
        goto oom;
    for (size_t i = 0; i < set->nrows; i++) {
        if (set->rows[i].start_ns == 0)
            out->unplaced++;
        else
            v[n++] = &set->rows[i];
    }
    if (n == 0) {
        free(v);
        free(scratch);
        return 0;
    }
    qsort(v, n, sizeof(*v), cmp_row_start);

    int64_t k0 = floor_div(v[0]->start_ns - origin_ns, width_ns);
    int64_t k1 = floor_div(v[n - 1]->start_ns - origin_ns, width_ns);
    if (k1 - k0 + 1 > TT_RSLICE_MAX) {
        snprintf(err, errlen, "%lld slices of %.6g s for a span of %.6g s; at most %d (choose a longer --slice-duration)",
                 (long long)(k1 - k0 + 1), (double)width_ns / 1e9,
                 (double)(v[n - 1]->start_ns - v[0]->start_ns) / 1e9, TT_RSLICE_MAX);
        free(v);
        free(scratch);
        return -1;
    }
    out->n = (size_t)(k1 - k0 + 1);
    out->s = calloc(out->n, sizeof(*out->s));
    if (out->s == NULL)
        goto oom;

    int64_t span_lo = set->first_start_ns < v[0]->start_ns ? set->first_start_ns
                                                            : v[0]->start_ns;
    int64_t span_hi = set->last_end_ns > v[n - 1]->start_ns ? set->last_end_ns
                                                             : v[n - 1]->start_ns;
    size_t i = 0;
    for (size_t k = 0; k < out->n; k++) {
        struct tt_rslice *s = &out->s[k];
        s->start_ns = origin_ns + (k0 + (int64_t)k) * width_ns;
        s->end_ns = s->start_ns + width_ns;
        int64_t lo = s->start_ns > span_lo ? s->start_ns : span_lo;
        int64_t hi = s->end_ns < span_hi ? s->end_ns : span_hi;
        s->covered_s = hi > lo ? (double)(hi - lo) / 1e9 : 0;

        size_t j = i;
        while (j < n && v[j]->start_ns < s->end_ns)
            j++;
        for (size_t r = i; r < j; r++) {
            s->records++;
            if (v[r]->flags & TT_RROW_ERROR) {
                s->errors++;
            } else {
                s->valid++;
                if (v[r]->present & (1u << TT_M_OSL))
                    s->osl_sum += v[r]->v[TT_M_OSL];
            }
            if (v[r]->flags & TT_RROW_JUDGED)
                s->judged++;
            if (v[r]->flags & TT_RROW_GOOD)
                s->good++;
        }
        for (int m = 0; m < TT_M__COUNT; m++) {
            size_t c = 0;
            for (size_t r = i; r < j; r++)
                if (!(v[r]->flags & TT_RROW_ERROR) && (v[r]->present & (1u << m)))
                    scratch[c++] = v[r]->v[m];
            summarize(scratch, c, &s->m[m]);
        }
        i = j;
    }
    free(v);
    free(scratch);
    return 0;
oom:
    free(v);
    free(scratch);
    snprintf(err, errlen, "timeslices: out of memory");
    return -1;
}

void tt_rslices_free(struct tt_rslices *sl)
{
    free(sl->s);
    sl->s = NULL;
    sl->n = 0;
}

double tt_rslice_req_tput(const struct tt_rslice *s)
{
    return s->covered_s > 0 ? (double)s->valid / s->covered_s : NAN;
}

double tt_rslice_out_tput(const struct tt_rslice *s)
{
    return s->covered_s > 0 ? s->osl_sum / s->covered_s : NAN;
}

double tt_rslice_goodput(const struct tt_rslice *s, int have_good)
{
    return have_good && s->covered_s > 0 ? (double)s->good / s->covered_s : NAN;
}

double tt_rslice_good_frac(const struct tt_rslice *s, int have_good)
{
    return have_good && s->records > 0 ? (double)s->good / (double)s->records : NAN;
}

int tt_rpt_parse_duration(const char *str, int64_t *ns)
{
    static const struct { const char *u; double ns; } units[] = {
        { "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 }, { "h", 3600e9 },
        { "d", 86400e9 }, { "", 1e9 },
    };
    char *end;

    if (str == NULL || *str == '\0' || *str == '-' || *str == '+')
        return -1;
    errno = 0;
    double v = strtod(str, &end);
    if (errno || end == str || !isfinite(v) || v <= 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].u) != 0)
            continue;
        double x = v * units[i].ns;
        if (x < 1e6 || x > 366 * 86400e9)   /* 1 ms .. 366 days */
            return -1;
        *ns = (int64_t)llround(x);
        return 0;
    }
    return -1;
}
