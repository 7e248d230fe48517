/*
 * Paired comparison (see pairs.h).
 *
 * The interval is the one the report gives (metrics/stats.c tt_median_ci):
 * the distribution-free order-statistic interval of the median of the
 * paired differences, exact binomial coverage >= 95 %; fewer than 6 pairs
 * give none.
 */
#include "metrics/pairs.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "metrics/clock.h"
#include "metrics/hist.h"
#include "metrics/stats.h"

enum { D_TTFT, D_TTFO, D_ITL, D_LATENCY, D_OSL, D__COUNT };
/* the metrics compared (tag and unit from metrics/metric.h) */
static const int d_metric[D__COUNT] = {
    TT_M_TTFT, TT_M_TTFO, TT_M_ITL, TT_M_REQUEST_LATENCY, TT_M_OSL,
};
static const uint64_t win_ns[] = { 60ULL * 1000000000, 300ULL * 1000000000,
                                   3600ULL * 1000000000 };

struct side {
    unsigned done:1, ok:1, err:1, dropped:1, has_digest:1;
    double   v[D__COUNT];           /* NAN when absent */
    char     finish[32];
    uint64_t digest;
};

struct tt_pair {
    struct tt_pairs *ps;
    unsigned left;                  /* legs still to finish */
    struct side s[TT_MAX_UPSTREAMS];
};

struct sample {
    uint64_t t;                     /* monotonic ns the pair completed */
    float    d[D__COUNT];           /* shadow - primary; NAN when either lacks it */
    int8_t   finish_agree;          /* -1 unknown, 0, 1 */
    int8_t   exact;                 /* -1 no digests, 0, 1 */
    uint8_t  shadow_err, shadow_dropped, both_ok;
};

struct ring {
    struct sample s[TT_PAIRS_RING];
    unsigned head, n;
};

struct tt_pairs {
    pthread_mutex_t mu;
    unsigned n;
    char names[TT_MAX_UPSTREAMS][TT_UPSTREAM_NAME_LEN];
    struct ring *r[TT_MAX_UPSTREAMS];
};

struct tt_pairs *tt_pairs_new(const char *const *names, unsigned n)
{
    struct tt_pairs *ps = calloc(1, sizeof(*ps));

    if (ps == NULL)
        return NULL;
    if (n > TT_MAX_UPSTREAMS)
        n = TT_MAX_UPSTREAMS;
    pthread_mutex_init(&ps->mu, NULL);
    ps->n = n;
    for (unsigned i = 1; i < n; i++) {
        strncpy(ps->names[i], names[i], TT_UPSTREAM_NAME_LEN - 1);
        ps->r[i] = calloc(1, sizeof(struct ring));
        if (ps->r[i] == NULL) {
            tt_pairs_free(ps);
            return NULL;
        }
    }
    return ps;
}

void tt_pairs_free(struct tt_pairs *ps)
{
    if (ps == NULL)
        return;
    for (unsigned i = 0; i < TT_MAX_UPSTREAMS; i++)
        free(ps->r[i]);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}

struct tt_pair *tt_pair_new(struct tt_pairs *ps, unsigned nlegs)
{
    struct tt_pair *p;

    if (ps == NULL)
        return NULL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->ps = ps;
    p->left = nlegs;
    return p;
}

static void submit(struct tt_pair *p)
{
    struct tt_pairs *ps = p->ps;
    const struct side *pr = &p->s[0];
    uint64_t now = tt_now_mono();

    if (!pr->done)
        return;                     /* nothing to pair with */
    pthread_mutex_lock(&ps->mu);
    for (unsigned i = 1; i < ps->n; i++) {
        const struct side *sh = &p->s[i];
        struct ring *r = ps->r[i];
        struct sample *s;

        if (!sh->done || r == NULL)
            continue;
        s = &r->s[r->head];
        r->head = (r->head + 1) % TT_PAIRS_RING;
        if (r->n < TT_PAIRS_RING)
            r->n++;
        s->t = now;
        s->both_ok = pr->ok && sh->ok;
        s->shadow_err = sh->err && !sh->dropped;
        s->shadow_dropped = sh->dropped;
        for (int k = 0; k < D__COUNT; k++)
            s->d[k] = s->both_ok && !isnan(sh->v[k]) && !isnan(pr->v[k])
                    ? (float)(sh->v[k] - pr->v[k]) : NAN;
        s->finish_agree = s->both_ok && pr->finish[0] && sh->finish[0]
                        ? strcmp(pr->finish, sh->finish) == 0 : -1;
        s->exact = s->both_ok && pr->has_digest && sh->has_digest
                 ? pr->digest == sh->digest : -1;
    }
    pthread_mutex_unlock(&ps->mu);
}

static void leg_end(struct tt_pair *p)
{
    if (--p->left == 0) {
        submit(p);
        free(p);
    }
}

void tt_pair_leg_done(struct tt_pair *p, unsigned idx, const struct tt_request *r,
                      const struct tt_metric_values *m)
{
    struct side *s;

    if (p == NULL)
        return;
    if (idx < TT_MAX_UPSTREAMS) {
        s = &p->s[idx];
        s->done = 1;
        s->ok = tt_request_outcome(r) == TT_OUT_OK;
        s->err = !s->ok;
        s->dropped = tt_request_errkind(r) == TT_EK_SHADOW_DROPPED;
        for (int k = 0; k < D__COUNT; k++)
            s->v[k] = m->present & (1u << d_metric[k]) ? m->v[d_metric[k]] : NAN;
        memcpy(s->finish, r->s.finish_reason, sizeof(s->finish));
        s->finish[sizeof(s->finish) - 1] = '\0';
        s->has_digest = r->has_digest;
        s->digest = r->digest;
    }
    leg_end(p);
}

void tt_pair_leg_gone(struct tt_pair *p, unsigned idx)
{
    (void)idx;
    if (p != NULL)
        leg_end(p);
}

static cJSON *frac(unsigned num, unsigned den)
{
    return den > 0 ? cJSON_CreateNumber((double)num / den) : cJSON_CreateNull();
}

/* one window of one shadow */
static void window_json(const struct ring *r, uint64_t now, uint64_t span,
                        cJSON *w, double *buf)
{
    unsigned pairs = 0, both = 0, err = 0, drop = 0, fa = 0, fn = 0, ex = 0, en = 0;

    for (unsigned i = 0; i < r->n; i++) {
        const struct sample *s = &r->s[i];
        if (now - s->t > span)
            continue;
        pairs++;
        both += s->both_ok;
        err += s->shadow_err;
        drop += s->shadow_dropped;
        if (s->finish_agree >= 0) {
            fn++;
            fa += (unsigned)s->finish_agree;
        }
        if (s->exact >= 0) {
            en++;
            ex += (unsigned)s->exact;
        }
    }
    cJSON_AddNumberToObject(w, "pairs", pairs);
    cJSON_AddNumberToObject(w, "both_ok", both);
    cJSON_AddItemToObject(w, "shadow_error_fraction", frac(err, pairs));
    cJSON_AddItemToObject(w, "shadow_dropped_fraction", frac(drop, pairs));
    cJSON_AddItemToObject(w, "finish_reason_agreement", frac(fa, fn));
    cJSON_AddItemToObject(w, "exact_match_fraction", frac(ex, en));
    cJSON *diff = cJSON_AddObjectToObject(w, "difference");
    for (int k = 0; k < D__COUNT && diff != NULL; k++) {
        unsigned n = 0;
        uint64_t lo, hi;
        double cov;
        cJSON *m = cJSON_AddObjectToObject(diff, tt_metric_tag[d_metric[k]]);
        for (unsigned i = 0; i < r->n; i++) {
            const struct sample *s = &r->s[i];
            if (now - s->t <= span && !isnan(s->d[k]))
                buf[n++] = s->d[k];
        }
        cJSON_AddStringToObject(m, "unit", tt_metric_unit[d_metric[k]]);
        cJSON_AddNumberToObject(m, "count", n);
        if (n == 0)
            continue;
        tt_sort_doubles(buf, n);
        cJSON_AddNumberToObject(m, "median", n % 2 ? buf[n / 2]
                                             : (buf[n / 2 - 1] + buf[n / 2]) / 2.0);
        if (tt_median_ci(n, 0.95, &lo, &hi, &cov) == 0) {
            cJSON_AddNumberToObject(m, "ci95_low", buf[lo]);
            cJSON_AddNumberToObject(m, "ci95_high", buf[hi]);
        }
    }
}

int tt_pairs_json(struct tt_pairs *ps, cJSON *root, uint64_t now_ns)
{
    cJSON *cmp;
    double *buf;

    if (ps == NULL || ps->n < 2)
        return 0;
    cmp = cJSON_AddObjectToObject(root, "comparisons");
    buf = malloc(TT_PAIRS_RING * sizeof(*buf));
    if (cmp == NULL || buf == NULL) {
        free(buf);
        return -1;
    }
    pthread_mutex_lock(&ps->mu);
    for (unsigned i = 1; i < ps->n; i++) {
        cJSON *o = cJSON_AddObjectToObject(cmp, ps->names[i]);
        cJSON *ws = o ? cJSON_AddObjectToObject(o, "windows") : NULL;
        if (ws == NULL)
            continue;
        cJSON_AddStringToObject(o, "primary", "primary");
        for (int k = 0; k < 3; k++) {
            cJSON *w = cJSON_AddObjectToObject(ws, tt_window_names[k]);
            if (w != NULL)
                window_json(ps->r[i], now_ns, win_ns[k], w, buf);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    free(buf);
    return 0;
}
