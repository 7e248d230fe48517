/*
 * The aggregator (see metrics/agg.h): label sets of (upstream, api, model)
 * with their counters and Prometheus histograms, the capped model label,
 * the /stats windows, and the two expositions.  Called by the proxy on each
 * finished request and by the admin listener on each scrape.
 */
#include "metrics/agg.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>

#include "metrics/clock.h"
#include "metrics/delay.h"
#include "metrics/hist.h"
#include "metrics/pairs.h"
#include "metrics/prom.h"
#include "metrics/recent.h"
#include "metrics/record.h"
#include "metrics/semconv.h"
#include "proxy/base/strcopy.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

#define OTHER_MODEL   "__other__"
#define UPSTREAM_LEN  64
#define API_LEN       32
#define MODEL_LEN     128

/* window histograms: one per per-request metric, plus the chunk gaps */
#define WH_ICL        TT_M_ICL
#define NWH           (TT_M__COUNT + 1)
/* window counters: the outcomes first (same order as enum tt_outcome),
 * then one per error kind (metrics/errkind.h), cancelled included */
enum { WC_OK = TT_OUT_OK, WC_ERROR = TT_OUT_ERROR, WC_CANCELLED = TT_OUT_CANCELLED,
       WC_GOOD, WC_JUDGED, WC_ERRK, WC__COUNT = WC_ERRK + TT_EK__COUNT };

enum { TOK_INPUT, TOK_OUTPUT, TOK_REASONING, TOK__COUNT };
static const char *const tok_names[TOK__COUNT] = { "input", "output", "reasoning" };

/* the family tables, from the metric rows marked FAM (metrics/metric.h) */
#define ROWS(X) TT_METRICS(X) TT_METRIC_ICL(X)
#define FAMROW(id, tag, unit, header, abbr, rank, higher, fam, family, help, buckets) \
    ONLY_##fam(id, family, help, buckets)
#define ONLY_NOFAM(id, family, help, buckets)

#define ONLY_FAM(id, family, help, buckets) [TT_FAM_##id] = family,
const char *const tt_agg_family_names[TT_FAM__COUNT] = { ROWS(FAMROW) };
#undef ONLY_FAM

#define ONLY_FAM(id, family, help, buckets) [TT_FAM_##id] = help,
static const char *const family_help[TT_FAM__COUNT] = { ROWS(FAMROW) };
#undef ONLY_FAM

/* the metric feeding each family (TT_M_ICL: fed from the gaps) */
#define ONLY_FAM(id, family, help, buckets) [TT_FAM_##id] = TT_M_##id,
static const int family_metric[TT_FAM__COUNT] = { ROWS(FAMROW) };
#undef ONLY_FAM

enum { B_LATENCY, B_GAP, B_TOKENS };
#define ONLY_FAM(id, family, help, buckets) [TT_FAM_##id] = B_##buckets,
static const unsigned char family_buckets[TT_FAM__COUNT] = { ROWS(FAMROW) };
#undef ONLY_FAM

static const double latency_buckets[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    25, 50, 100, 250, 600, 1200,
};
static const double gap_buckets[] = {
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03,
    0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5, 10,
};
static const double token_buckets[] = {
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
    32768, 65536, 131072,
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct fam_hist {
    uint64_t *b;                /* nb + 1 counts, the last one is +Inf */
    double    sum;
    uint64_t  count;
};

struct series {
    struct series *next;        /* hash chain */
    struct series *order;       /* creation order, for stable exposition */
    uint32_t       hash;
    char           upstream[UPSTREAM_LEN];
    char           api[API_LEN];
    char           model[MODEL_LEN];
    char          *labels;      /* escaped: upstream="..",api="..",model=".." */
    uint64_t       req[TT_OUT__COUNT];
    uint64_t       good;
    uint64_t       viol[TT_M__COUNT];
    uint64_t       tokens[TOK__COUNT];
    uint64_t       cached_input;    /* server-reported cached prompt tokens */
    uint64_t       injected;        /* requests --inject-usage rewrote */
    uint64_t       token_events;
    uint64_t       parse_errors;
    uint64_t       errors[TT_EK__COUNT];    /* by error kind */
    struct fam_hist h[TT_FAM__COUNT];
};

struct tt_agg {
    pthread_mutex_t  mu;
    unsigned         model_cap;
    double           bounds[TT_FAM__COUNT][TT_AGG_MAX_BUCKETS];
    unsigned         nb[TT_FAM__COUNT];
    double           wscale[TT_M__COUNT];   /* window_scale(), per metric */
    double           fdiv[TT_M__COUNT];     /* to a family's unit: ms to s */
    char             version[64];

    struct series  **tab;       /* hash table of chains, tab_cap a power of 2 */
    unsigned         tab_cap, nseries;
    struct series   *first, **last;

    char           (*models)[MODEL_LEN];   /* model_cap names, first come */
    unsigned         nmodels;
    int             *mslot;     /* open addressing: index into models, -1 */
    unsigned         mslot_cap;

    /* time windows per upstream (0 = primary), made on first use */
    struct tt_wstats w[TT_AGG_UPSTREAMS];
    char             up[TT_AGG_UPSTREAMS][UPSTREAM_LEN];
    unsigned         nup;
    uint64_t         dropped[TT_AGG_UPSTREAMS][TT_DROP__COUNT];  /* shadow copies */
    struct tt_pairs *pairs;     /* borrowed, may be NULL */
    struct tt_delay *delays[TT_AGG_MAX_DELAYS];  /* borrowed: one per worker */
    unsigned         ndelays;
    int              slo_seen;
    struct tt_recent *recent;   /* allocated on the first observe */
    struct tt_slo_set slos;     /* the objectives, for /stats (have_slos) */
    int              have_slos;
    _Atomic int64_t  inflight;
    _Atomic uint64_t started;   /* requests started, for the systemd status */
    struct tt_recorder *rec;
    tt_agg_span_counts_fn *span_counts; /* the span exporter's counters, NULL off */
    const void         *span_src;
    int                semconv_mode;   /* enum tt_semconv_mode */
    struct tt_semconv *sc;             /* the gen_ai_* families (metrics/semconv.c) */
};

/* ---- labels ------------------------------------------------------------ */

static uint32_t fnv(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (h ^ 0xff) * 16777619u;      /* separator */
}

static char *make_labels(const char *upstream, const char *api, const char *model)
{
    size_t n = tt_prom_escape_label(NULL, upstream) + tt_prom_escape_label(NULL, api)
             + tt_prom_escape_label(NULL, model) + 32;
    char *p = malloc(n), *o = p;
    if (p == NULL)
        return NULL;
    memcpy(o, "upstream=\"", 10);
    o += 10;
    o += tt_prom_escape_label(o, upstream);
    memcpy(o, "\",api=\"", 7);
    o += 7;
    o += tt_prom_escape_label(o, api);
    memcpy(o, "\",model=\"", 9);
    o += 9;
    o += tt_prom_escape_label(o, model);
    *o++ = '"';
    *o = '\0';
    return p;
}

/* the label value for <model>: itself while under the cap, else __other__ */
static const char *model_label(struct tt_agg *a, const char *model)
{
    uint32_t h = fnv(2166136261u, model);
    unsigned mask = a->mslot_cap - 1, i = h & mask;

    while (a->mslot[i] >= 0) {
        if (strcmp(a->models[a->mslot[i]], model) == 0)
            return a->models[a->mslot[i]];
        i = (i + 1) & mask;
    }
    if (a->nmodels >= a->model_cap)
        return OTHER_MODEL;
    tt_copy_str(a->models[a->nmodels], MODEL_LEN, model);
    a->mslot[i] = (int)a->nmodels;
    return a->models[a->nmodels++];
}

static size_t series_size(const struct tt_agg *a)
{
    size_t n = sizeof(struct series);
    for (int f = 0; f < TT_FAM__COUNT; f++)
        n += (a->nb[f] + 1) * sizeof(uint64_t);
    return n;
}

static int tab_grow(struct tt_agg *a)
{
    unsigned cap = a->tab_cap ? a->tab_cap * 2 : 64;
    struct series **t = calloc(cap, sizeof(*t));
    if (t == NULL)
        return -1;
    for (struct series *s = a->first; s != NULL; s = s->order) {
        unsigned i = s->hash & (cap - 1);
        s->next = t[i];
        t[i] = s;
    }
    free(a->tab);
    a->tab = t;
    a->tab_cap = cap;
    return 0;
}

/* the series of (upstream, api, model-label), created on first use */
static struct series *series_get(struct tt_agg *a, const char *upstream,
                                 const char *api, const char *mlabel)
{
    char up[UPSTREAM_LEN];
    tt_copy_str(up, sizeof(up), upstream);
    uint32_t h = fnv(fnv(fnv(2166136261u, up), api), mlabel);

    for (struct series *s = a->tab[h & (a->tab_cap - 1)]; s; s = s->next)
        if (s->hash == h && strcmp(s->model, mlabel) == 0
            && strcmp(s->api, api) == 0 && strcmp(s->upstream, up) == 0)
            return s;

    if (a->nseries + 1 > a->tab_cap && tab_grow(a) < 0)
        return NULL;
    struct series *s = calloc(1, series_size(a));
    if (s == NULL)
        return NULL;
    s->labels = make_labels(up, api, mlabel);
    if (s->labels == NULL) {
        free(s);
        return NULL;
    }
    s->hash = h;
    tt_copy_str(s->upstream, sizeof(s->upstream), up);
    tt_copy_str(s->api, sizeof(s->api), api);
    tt_copy_str(s->model, sizeof(s->model), mlabel);
    uint64_t *b = (uint64_t *)(s + 1);
    for (int f = 0; f < TT_FAM__COUNT; f++) {
        s->h[f].b = b;
        b += a->nb[f] + 1;
    }
    unsigned i = h & (a->tab_cap - 1);
    s->next = a->tab[i];
    a->tab[i] = s;
    *a->last = s;
    a->last = &s->order;
    a->nseries++;
    return s;
}

/* ---- life ---------------------------------------------------------------- */

static double window_scale(int metric);

struct tt_agg *tt_agg_new(const struct tt_agg_opts *opts)
{
    struct tt_agg *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->model_cap = opts && opts->model_cap ? opts->model_cap : 32;
    for (int i = 0; i < TT_M__COUNT; i++) {
        a->wscale[i] = window_scale(i);
        a->fdiv[i] = strcmp(tt_metric_unit[i], "ms") == 0 ? 1000.0 : 1.0;
    }
    tt_copy_str(a->version, sizeof(a->version),
               opts && opts->version ? opts->version : TT_VERSION);

    for (int f = 0; f < TT_FAM__COUNT; f++) {
        const double *src;
        unsigned n;
        if (opts && opts->buckets[f]) {
            src = opts->buckets[f];
            n = opts->nbuckets[f];
        } else if (family_buckets[f] == B_GAP) {
            src = gap_buckets;
            n = N(gap_buckets);
        } else if (family_buckets[f] == B_TOKENS) {
            src = token_buckets;
            n = N(token_buckets);
        } else {
            src = latency_buckets;
            n = N(latency_buckets);
        }
        if (n == 0 || n > TT_AGG_MAX_BUCKETS)
            goto fail;
        for (unsigned i = 0; i < n; i++) {
            if (!isfinite(src[i]) || (i > 0 && src[i] <= src[i - 1]))
                goto fail;
            a->bounds[f][i] = src[i];
        }
        a->nb[f] = n;
    }

    a->mslot_cap = 16;
    while (a->mslot_cap < a->model_cap * 2)
        a->mslot_cap *= 2;
    a->models = calloc(a->model_cap, sizeof(*a->models));
    a->mslot = malloc(a->mslot_cap * sizeof(*a->mslot));
    if (a->models == NULL || a->mslot == NULL)
        goto fail;
    for (unsigned i = 0; i < a->mslot_cap; i++)
        a->mslot[i] = -1;
    a->last = &a->first;
    a->semconv_mode = opts ? opts->semconv : TT_SEMCONV_TOKENTAP;
    a->sc = tt_semconv_new();
    if (a->sc == NULL || tab_grow(a) < 0)
        goto fail;
    if (tt_wstats_init(&a->w[0], NWH, WC__COUNT, tt_now_mono()) < 0)
        goto fail;
    tt_copy_str(a->up[0], sizeof(a->up[0]), "primary");
    a->nup = 1;
    pthread_mutex_init(&a->mu, NULL);
    return a;

fail:
    tt_semconv_free(a->sc);
    free(a->models);
    free(a->mslot);
    free(a->tab);
    free(a);
    return NULL;
}

void tt_agg_free(struct tt_agg *a)
{
    if (a == NULL)
        return;
    struct series *s = a->first;
    while (s != NULL) {
        struct series *n = s->order;
        free(s->labels);
        free(s);
        s = n;
    }
    for (unsigned i = 0; i < a->nup; i++)
        tt_wstats_free(&a->w[i]);
    tt_semconv_free(a->sc);
    free(a->recent);
    free(a->tab);
    free(a->models);
    free(a->mslot);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

void tt_agg_set_recorder(struct tt_agg *a, struct tt_recorder *rec)
{
    a->rec = rec;
}

void tt_agg_set_span_counts(struct tt_agg *a, tt_agg_span_counts_fn *fn, const void *src)
{
    a->span_counts = fn;
    a->span_src = src;
}


void tt_agg_set_slos(struct tt_agg *a, const struct tt_slo_set *set)
{
    pthread_mutex_lock(&a->mu);
    a->have_slos = set != NULL;
    if (set != NULL)
        a->slos = *set;
    pthread_mutex_unlock(&a->mu);
}

void tt_agg_inflight(struct tt_agg *a, int delta)
{
    atomic_fetch_add(&a->inflight, delta);
    if (delta > 0)
        atomic_fetch_add_explicit(&a->started, (uint64_t)delta, memory_order_relaxed);
}

void tt_agg_counts(struct tt_agg *a, uint64_t *started, int64_t *inflight)
{
    *started = atomic_load_explicit(&a->started, memory_order_relaxed);
    *inflight = atomic_load(&a->inflight);
}

/* the window set of upstream <name>, made on first use (lock held);
 * beyond TT_AGG_UPSTREAMS names the primary's */
static unsigned upstream_index(struct tt_agg *a, const char *name)
{
    unsigned i;

    for (i = 0; i < a->nup; i++)
        if (strncmp(a->up[i], name, UPSTREAM_LEN - 1) == 0)
            return i;
    if (a->nup == TT_AGG_UPSTREAMS ||
        tt_wstats_init(&a->w[a->nup], NWH, WC__COUNT, a->w[0].start_ns) < 0)
        return 0;
    tt_copy_str(a->up[a->nup], sizeof(a->up[0]), name);
    return a->nup++;
}

int tt_agg_add_upstream(struct tt_agg *a, const char *name)
{
    pthread_mutex_lock(&a->mu);
    unsigned i = upstream_index(a, name);
    pthread_mutex_unlock(&a->mu);
    return i > 0 || strcmp(name, "primary") == 0 ? 0 : -1;
}

void tt_agg_shadow_dropped(struct tt_agg *a, const char *shadow, enum tt_drop why)
{
    pthread_mutex_lock(&a->mu);
    a->dropped[upstream_index(a, shadow)][why]++;
    pthread_mutex_unlock(&a->mu);
}

void tt_agg_set_pairs(struct tt_agg *a, struct tt_pairs *ps)
{
    a->pairs = ps;
}

void tt_agg_add_delay(struct tt_agg *a, struct tt_delay *d)
{
    pthread_mutex_lock(&a->mu);
    if (a->ndelays < TT_AGG_MAX_DELAYS)
        a->delays[a->ndelays++] = d;
    pthread_mutex_unlock(&a->mu);
}

/* ---- observe ------------------------------------------------------------- */

/* window histogram units: us for ms metrics, milli-units for rates */
static double window_scale(int metric)
{
    const char *u = tt_metric_unit[metric];
    if (strcmp(u, "tokens") == 0)
        return 1.0;
    return 1000.0;
}

static uint64_t to_window(const struct tt_agg *a, int metric, double v)
{
    v *= a->wscale[metric];
    return v > 0 ? (uint64_t)llround(v) : 0;
}

static void fam_observe(const struct tt_agg *a, struct series *s, int f, double v)
{
    const double *b = a->bounds[f];
    unsigned lo = 0, hi = a->nb[f];   /* first bound >= v, or nb (+Inf) */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (v <= b[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    s->h[f].b[lo]++;
    s->h[f].sum += v;
    s->h[f].count++;
}

/*
 * The inter-chunk gaps of one request, bucketed before the aggregator's
 * lock is taken: one observation per gap is per-event work, and a
 * 100,000-token answer must not hold the lock that every worker's
 * request end takes.  Under the lock only the distinct buckets are added
 * (tt_wcursor_add).  The counts go into a per-thread table indexed by the
 * window bucket (no search per gap), which is left zeroed again after use.
 */
static _Thread_local uint32_t gap_n[TT_HIST_BUCKETS];

struct gaps {
    unsigned nd;
    uint32_t ngaps;
    uint16_t idx[TT_HIST_BUCKETS];          /* the buckets met, in gap_n */
    uint32_t n[TT_HIST_BUCKETS];            /* their counts, for tt_wcursor_add */
    uint64_t count, sum, min, max;          /* us: the window histogram */
    uint64_t fb[TT_AGG_MAX_BUCKETS + 1];    /* the family's buckets */
    double   fsum;
    uint64_t fcount;
};

static void gaps_collect(const struct tt_agg *a, const struct tt_request *r, struct gaps *g)
{
    const double *b = a->bounds[TT_FAM_ICL];
    unsigned nb = a->nb[TT_FAM_ICL];
    uint32_t i;
    unsigned lo = 0;

    g->nd = 0;
    g->ngaps = tt_icl_count(r);
    g->count = g->sum = g->max = 0;
    g->min = UINT64_MAX;
    memset(g->fb, 0, (nb + 1) * sizeof(g->fb[0]));
    g->fsum = 0;
    g->fcount = g->ngaps;
    for (i = 0; i < g->ngaps; i++) {
        uint64_t ns = tt_icl_ns(r, i);
        uint64_t us = (ns + 500) / 1000;
        double v = (double)ns / 1e9;
        unsigned x = tt_hist_index(us);
        /* the first bound >= v, or nb (+Inf): walked from the last gap's,
         * which the next gap of a stream is usually in or next to */
        while (lo > 0 && v <= b[lo - 1])
            lo--;
        while (lo < nb && v > b[lo])
            lo++;
        g->fb[lo]++;
        g->fsum += v;
        if (gap_n[x]++ == 0)
            g->idx[g->nd++] = (uint16_t)x;
        g->sum += us;
        if (us < g->min)
            g->min = us;
        if (us > g->max)
            g->max = us;
    }
    g->count = g->ngaps;
    for (i = 0; i < g->nd; i++) {
        g->n[i] = gap_n[g->idx[i]];
        gap_n[g->idx[i]] = 0;
    }
}

static void gaps_family(const struct tt_agg *a, struct series *s, const struct gaps *g)
{
    struct fam_hist *h = &s->h[TT_FAM_ICL];

    for (unsigned k = 0; k <= a->nb[TT_FAM_ICL]; k++)
        h->b[k] += g->fb[k];
    h->sum += g->fsum;
    h->count += g->fcount;
}

int tt_agg_observe_at(struct tt_agg *a, const struct tt_request *r,
                      const struct tt_metric_values *m,
                      const struct tt_slo_result *slo, uint64_t now_ns)
{
    enum tt_outcome oc = tt_request_outcome(r);
    int ek = tt_request_errkind(r);     /* -1 exactly when oc is ok */
    int good = slo != NULL && slo->good && oc == TT_OUT_OK;
    struct tt_wcursor c;
    struct gaps g;

    if (oc == TT_OUT_OK)
        gaps_collect(a, r, &g);     /* outside the lock */
    pthread_mutex_lock(&a->mu);

    struct tt_wstats *ws = &a->w[upstream_index(a, r->upstream_name ? r->upstream_name
                                                                    : "primary")];
    tt_wstats_at(ws, now_ns, &c);
    tt_wcursor_count(ws, &c, (unsigned)oc, 1);
    if (ek >= 0)
        tt_wcursor_count(ws, &c, WC_ERRK + (unsigned)ek, 1);
    if (a->recent == NULL)
        a->recent = calloc(1, sizeof(*a->recent));
    if (a->recent != NULL)
        tt_recent_add(a->recent, r, m, slo, now_ns);
    if (slo != NULL) {
        a->slo_seen = 1;
        tt_wcursor_count(ws, &c, WC_JUDGED, 1);
        if (good)
            tt_wcursor_count(ws, &c, WC_GOOD, 1);
    }
    if (oc == TT_OUT_OK) {
        for (int i = 0; i < TT_M__COUNT; i++)
            if (m->present & (1u << i))
                tt_wcursor_record(ws, &c, (unsigned)i, to_window(a, i, m->v[i]));
        tt_wcursor_add(ws, &c, WH_ICL, g.idx, g.n, g.nd, g.count, g.sum, g.min, g.max);
    }

    const char *model = r->model[0] ? r->model : r->s.model;
    const char *mlabel = model_label(a, model);
    struct series *s = series_get(a, r->upstream_name ? r->upstream_name : "",
                                  tt_api_name(r->api), mlabel);
    if (s == NULL) {
        pthread_mutex_unlock(&a->mu);
        return -1;
    }
    s->req[oc]++;
    if (good)
        s->good++;
    if (slo != NULL)
        for (int i = 0; i < TT_M__COUNT; i++)
            if (slo->violated & (1u << i))
                s->viol[i]++;
    if (m->present & (1u << TT_M_ISL))
        s->tokens[TOK_INPUT] += (uint64_t)m->v[TT_M_ISL];
    if (m->present & (1u << TT_M_OUTPUT_TOKENS))
        s->tokens[TOK_OUTPUT] += (uint64_t)m->v[TT_M_OUTPUT_TOKENS];
    if (m->present & (1u << TT_M_REASONING_TOKENS))
        s->tokens[TOK_REASONING] += (uint64_t)m->v[TT_M_REASONING_TOKENS];
    if (m->present & (1u << TT_M_CACHED_INPUT))
        s->cached_input += (uint64_t)m->v[TT_M_CACHED_INPUT];
    s->token_events += r->s.token_events;
    s->parse_errors += r->s.parse_errors;
    if (r->usage_injected)
        s->injected++;
    if (ek >= 0)
        s->errors[ek]++;

    if (oc == TT_OUT_OK) {
        for (int f = 0; f < TT_FAM__COUNT; f++) {
            int id = family_metric[f];
            if (id == TT_M_ICL || !(m->present & (1u << id)))
                continue;
            fam_observe(a, s, f, m->v[id] / a->fdiv[id]);
        }
        gaps_family(a, s, &g);
    }
    int rc = a->semconv_mode == TT_SEMCONV_TOKENTAP ? 0
             : tt_semconv_observe(a->sc, s->upstream, mlabel, r, m, oc == TT_OUT_OK);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

int tt_agg_observe(struct tt_agg *a, const struct tt_request *r,
                   const struct tt_metric_values *m,
                   const struct tt_slo_result *slo)
{
    return tt_agg_observe_at(a, r, m, slo, tt_now_mono());
}

/* ---- merge --------------------------------------------------------------- */

/* the model label <dst> gives a model label of another aggregator */
static const char *merge_model(void *dst, const char *mlabel)
{
    return strcmp(mlabel, OTHER_MODEL) == 0 ? OTHER_MODEL : model_label(dst, mlabel);
}

int tt_agg_merge(struct tt_agg *dst, struct tt_agg *src)
{
    int rc = 0;

    if (dst == src)
        return -1;
    for (int f = 0; f < TT_FAM__COUNT; f++)
        if (dst->nb[f] != src->nb[f]
            || memcmp(dst->bounds[f], src->bounds[f], dst->nb[f] * sizeof(double)))
            return -1;

    pthread_mutex_lock(&src->mu);
    pthread_mutex_lock(&dst->mu);
    for (unsigned i = 0; i < src->nup; i++) {
        unsigned j = upstream_index(dst, src->up[i]);
        if (j == 0 && dst->w[0].start_ns == UINT64_MAX)
            dst->w[0].start_ns = src->w[0].start_ns;
        if (tt_wstats_merge(&dst->w[j], &src->w[i]) < 0)
            rc = -1;
        for (int k = 0; k < TT_DROP__COUNT; k++)
            dst->dropped[j][k] += src->dropped[i][k];
    }
    if (dst->pairs == NULL)
        dst->pairs = src->pairs;
    for (unsigned i = 0; i < src->ndelays && dst->ndelays < TT_AGG_MAX_DELAYS; i++)
        dst->delays[dst->ndelays++] = src->delays[i];
    dst->slo_seen |= src->slo_seen;
    atomic_fetch_add(&dst->inflight, atomic_load(&src->inflight));
    if (dst->rec == NULL)
        dst->rec = src->rec;

    for (struct series *s = src->first; s != NULL; s = s->order) {
        /* a model beyond src's cap is already __other__; dst re-applies its own */
        const char *ml = strcmp(s->model, OTHER_MODEL) == 0 ? OTHER_MODEL
                                                           : model_label(dst, s->model);
        struct series *d = series_get(dst, s->upstream, s->api, ml);
        if (d == NULL) {
            rc = -1;
            break;
        }
        for (int i = 0; i < TT_OUT__COUNT; i++)
            d->req[i] += s->req[i];
        d->good += s->good;
        for (int i = 0; i < TT_M__COUNT; i++)
            d->viol[i] += s->viol[i];
        for (int i = 0; i < TOK__COUNT; i++)
            d->tokens[i] += s->tokens[i];
        d->cached_input += s->cached_input;
        d->injected += s->injected;
        d->token_events += s->token_events;
        d->parse_errors += s->parse_errors;
        for (unsigned i = 0; i < TT_EK__COUNT; i++)
            d->errors[i] += s->errors[i];
        for (int f = 0; f < TT_FAM__COUNT; f++) {
            for (unsigned i = 0; i <= dst->nb[f]; i++)
                d->h[f].b[i] += s->h[f].b[i];
            d->h[f].sum += s->h[f].sum;
            d->h[f].count += s->h[f].count;
        }
    }
    /* after the series: dst's model labels are settled, the gen_ai ones follow */
    if (rc == 0 && tt_semconv_merge(dst->sc, src->sc, merge_model, dst) < 0)
        rc = -1;
    pthread_mutex_unlock(&dst->mu);
    pthread_mutex_unlock(&src->mu);
    return rc;
}

/* a fresh aggregator with <a>'s options, holding the sum of <aggs> */
static struct tt_agg *merged(struct tt_agg *const *aggs, unsigned n)
{
    struct tt_agg_opts o = { 0 };
    o.model_cap = aggs[0]->model_cap;
    o.version = aggs[0]->version;
    o.semconv = aggs[0]->semconv_mode;
    for (int f = 0; f < TT_FAM__COUNT; f++) {
        o.buckets[f] = aggs[0]->bounds[f];
        o.nbuckets[f] = aggs[0]->nb[f];
    }
    struct tt_agg *sum = tt_agg_new(&o);
    if (sum == NULL)
        return NULL;
    sum->w[0].start_ns = UINT64_MAX;
    for (unsigned i = 0; i < n; i++) {
        if (tt_agg_merge(sum, aggs[i]) < 0) {
            tt_agg_free(sum);
            return NULL;
        }
    }
    return sum;
}

/* ---- Prometheus ---------------------------------------------------------- */

/* the span exporter's counters, when it runs */
static void expose_otlp(const struct tt_agg *a, struct evbuffer *out)
{
    struct tt_span_counts c;

    if (a->span_counts == NULL)
        return;
    a->span_counts(a->span_src, &c);
    tt_prom_family(out, "tokentap_otlp_spans_exported_total", "counter",
                "Spans an OTLP receiver accepted.");
    evbuffer_add_printf(out, "tokentap_otlp_spans_exported_total %llu\n",
                        (unsigned long long)c.exported);
    tt_prom_family(out, "tokentap_otlp_spans_dropped_total", "counter",
                "Spans lost: the exporter's queue was full (queue_full) or their "
                "batch could not be delivered (export_failed).");
    evbuffer_add_printf(out, "tokentap_otlp_spans_dropped_total{reason=\"queue_full\"} %llu\n"
                        "tokentap_otlp_spans_dropped_total{reason=\"export_failed\"} %llu\n",
                        (unsigned long long)c.dropped_queue,
                        (unsigned long long)c.dropped_export);
}

/* errors by (upstream, api), summed over the model label */
static void expose_errors(const struct tt_agg *a, struct evbuffer *out)
{
    for (const struct series *s = a->first; s != NULL; s = s->order) {
        uint64_t sum[TT_EK__COUNT];
        int seen = 0;
        char up[UPSTREAM_LEN * 3 + 1], api[API_LEN * 3 + 1];

        /* only the first series of each (upstream, api) prints it */
        for (const struct series *p = a->first; p != s && !seen; p = p->order)
            seen = strcmp(p->upstream, s->upstream) == 0 && strcmp(p->api, s->api) == 0;
        if (seen)
            continue;
        memset(sum, 0, sizeof(sum));
        for (const struct series *q = s; q != NULL; q = q->order)
            if (strcmp(q->upstream, s->upstream) == 0 && strcmp(q->api, s->api) == 0)
                for (unsigned i = 0; i < TT_EK__COUNT; i++)
                    sum[i] += q->errors[i];
        up[tt_prom_escape_label(up, s->upstream)] = '\0';
        api[tt_prom_escape_label(api, s->api)] = '\0';
        for (unsigned i = 0; i < TT_EK__COUNT; i++)
            if (sum[i] > 0)
                evbuffer_add_printf(out,
                                    "tokentap_errors_total{upstream=\"%s\",api=\"%s\",type=\"%s\"} %llu\n",
                                    up, api, tt_errkind_names[i], (unsigned long long)sum[i]);
    }
}

static int expose_tokentap(struct tt_agg *a, struct evbuffer *out);

/* --metrics-semconv: tokentap's families, OpenTelemetry's, or both */
static int expose(struct tt_agg *a, struct evbuffer *out)
{
    int rc = 0;
    if (a->semconv_mode != TT_SEMCONV_OTEL)
        rc = expose_tokentap(a, out);
    if (a->semconv_mode != TT_SEMCONV_TOKENTAP)
        tt_semconv_expose(a->sc, out);
    return rc;
}

static int expose_tokentap(struct tt_agg *a, struct evbuffer *out)
{
    char num[64];

    for (int f = 0; f < TT_FAM__COUNT; f++) {
        const char *name = tt_agg_family_names[f];
        tt_prom_family(out, name, "histogram", family_help[f]);
        for (struct series *s = a->first; s != NULL; s = s->order) {
            const struct fam_hist *h = &s->h[f];
            uint64_t cum = 0;
            for (unsigned i = 0; i < a->nb[f]; i++) {
                cum += h->b[i];
                tt_prom_fmt_bound(num, sizeof(num), a->bounds[f][i]);
                evbuffer_add_printf(out, "%s_bucket{%s,le=\"%s\"} %llu\n", name,
                                    s->labels, num, (unsigned long long)cum);
            }
            cum += h->b[a->nb[f]];
            evbuffer_add_printf(out, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name,
                                s->labels, (unsigned long long)cum);
            tt_prom_fmt_double(num, sizeof(num), h->sum);
            evbuffer_add_printf(out, "%s_sum{%s} %s\n", name, s->labels, num);
            evbuffer_add_printf(out, "%s_count{%s} %llu\n", name, s->labels,
                                (unsigned long long)h->count);
        }
    }

    tt_prom_family(out, "tokentap_requests_total", "counter",
                "Finished requests by outcome (cancelled: the client went away).");
    for (struct series *s = a->first; s != NULL; s = s->order)
        for (int i = 0; i < TT_OUT__COUNT; i++)
            evbuffer_add_printf(out, "tokentap_requests_total{%s,outcome=\"%s\"} %llu\n",
                                s->labels, tt_outcome_names[i],
                                (unsigned long long)s->req[i]);

    tt_prom_family(out, "tokentap_good_requests_total", "counter",
                "Requests that were not errors and met every SLO.");
    if (a->slo_seen)
        for (struct series *s = a->first; s != NULL; s = s->order)
            evbuffer_add_printf(out, "tokentap_good_requests_total{%s} %llu\n",
                                s->labels, (unsigned long long)s->good);

    tt_prom_family(out, "tokentap_slo_violations_total", "counter",
                "SLO constraints missed, by metric.");
    for (struct series *s = a->first; s != NULL; s = s->order)
        for (int i = 0; i < TT_M__COUNT; i++)
            if (s->viol[i])
                evbuffer_add_printf(out, "tokentap_slo_violations_total{%s,metric=\"%s\"} %llu\n",
                                    s->labels, tt_metric_tag[i],
                                    (unsigned long long)s->viol[i]);

    tt_prom_family(out, "tokentap_tokens_total", "counter",
                "Tokens by type: input (prompt), output (answer), reasoning.");
    for (struct series *s = a->first; s != NULL; s = s->order)
        for (int i = 0; i < TOK__COUNT; i++)
            evbuffer_add_printf(out, "tokentap_tokens_total{%s,type=\"%s\"} %llu\n",
                                s->labels, tok_names[i],
                                (unsigned long long)s->tokens[i]);

    tt_prom_family(out, "tokentap_cached_input_tokens_total", "counter",
                "Prompt tokens the server reports it served from its cache.");
    for (struct series *s = a->first; s != NULL; s = s->order)
        evbuffer_add_printf(out, "tokentap_cached_input_tokens_total{%s} %llu\n",
                            s->labels, (unsigned long long)s->cached_input);

    tt_prom_family(out, "tokentap_usage_injected_total", "counter",
                "Requests whose body --inject-usage rewrote to ask for usage.");
    for (struct series *s = a->first; s != NULL; s = s->order)
        evbuffer_add_printf(out, "tokentap_usage_injected_total{%s} %llu\n",
                            s->labels, (unsigned long long)s->injected);

    tt_prom_family(out, "tokentap_token_events_total", "counter",
                "Stream events carrying answer, reasoning or tool-call text.");
    for (struct series *s = a->first; s != NULL; s = s->order)
        evbuffer_add_printf(out, "tokentap_token_events_total{%s} %llu\n",
                            s->labels, (unsigned long long)s->token_events);

    tt_prom_family(out, "tokentap_stream_parse_errors_total", "counter",
                "Malformed stream events (forwarded unchanged).");
    for (struct series *s = a->first; s != NULL; s = s->order)
        evbuffer_add_printf(out, "tokentap_stream_parse_errors_total{%s} %llu\n",
                            s->labels, (unsigned long long)s->parse_errors);

    tt_prom_family(out, "tokentap_errors_total", "counter",
                "Requests that did not end ok, by error kind (the record's error.kind, "
                "cancelled included).");
    expose_errors(a, out);

    tt_prom_family(out, "tokentap_records_dropped_total", "counter",
                "Records that could not be queued or written.");
    evbuffer_add_printf(out, "tokentap_records_dropped_total %llu\n",
                        (unsigned long long)tt_recorder_dropped(a->rec));
    expose_otlp(a, out);

    tt_prom_family(out, "tokentap_inflight_requests", "gauge",
                "Requests in flight.");
    evbuffer_add_printf(out, "tokentap_inflight_requests %lld\n",
                        (long long)atomic_load(&a->inflight));

    tt_prom_family(out, "tokentap_slo_attainment_ratio", "gauge",
                "Good requests / judged requests over the window (convenience; "
                "use the counters for aggregation).");
    if (a->slo_seen) {
        uint64_t now = tt_now_mono();
        for (unsigned u = 0; u < a->nup; u++) {
            char up[UPSTREAM_LEN * 2];
            up[tt_prom_escape_label(up, a->up[u])] = '\0';
            for (int win = TT_WIN_1M; win <= TT_WIN_1H; win++) {
                uint64_t cnt[WC__COUNT] = { 0 };
                tt_wstats_query(&a->w[u], now, (enum tt_window)win, NULL, cnt);
                if (cnt[WC_JUDGED] == 0)
                    continue;
                tt_prom_fmt_double(num, sizeof(num),
                           (double)cnt[WC_GOOD] / (double)cnt[WC_JUDGED]);
                evbuffer_add_printf(out, "tokentap_slo_attainment_ratio{upstream=\"%s\","
                                    "window=\"%s\"} %s\n", up, tt_window_names[win], num);
            }
        }
    }

    tt_prom_family(out, "tokentap_shadow_dropped_total", "counter",
                "Shadow copies of requests abandoned, by reason (the primary "
                "never waits for a shadow).");
    for (unsigned u = 1; u < a->nup; u++) {
        char up[UPSTREAM_LEN * 2];
        up[tt_prom_escape_label(up, a->up[u])] = '\0';
        for (int k = 0; k < TT_DROP__COUNT; k++)
            evbuffer_add_printf(out, "tokentap_shadow_dropped_total{shadow=\"%s\","
                                "reason=\"%s\"} %llu\n", up, tt_drop_names[k],
                                (unsigned long long)a->dropped[u][k]);
    }

    if (a->ndelays > 0)
        tt_delay_expose(a->delays, a->ndelays, out);

    tt_prom_family(out, "tokentap_build_info", "gauge", "Build information.");
    char ver[200];
    ver[tt_prom_escape_label(ver, a->version)] = '\0';
    evbuffer_add_printf(out, "tokentap_build_info{version=\"%s\"} 1\n", ver);
    return 0;
}

int tt_agg_prometheus_many(struct tt_agg *const *aggs, unsigned n,
                           struct evbuffer *out)
{
    if (n == 0)
        return -1;
    if (n == 1) {
        pthread_mutex_lock(&aggs[0]->mu);
        int rc = expose(aggs[0], out);
        pthread_mutex_unlock(&aggs[0]->mu);
        return rc;
    }
    struct tt_agg *sum = merged(aggs, n);
    if (sum == NULL)
        return -1;
    int rc = expose(sum, out);
    tt_agg_free(sum);
    return rc;
}

int tt_agg_prometheus(struct tt_agg *a, struct evbuffer *out)
{
    return tt_agg_prometheus_many(&a, 1, out);
}

/* ---- /stats -------------------------------------------------------------- */

/*
 * Every float of /stats is rounded the same way, once, on the finished
 * tree: to 3 decimals (ms values to the microsecond; seconds, rates and
 * fractions alike), so no value shows the float noise of a division
 * (354.6524658203125).  Integral values (counts, ns stamps) are left as
 * they are; raw members (the records of recent requests) are already text.
 */
static void round_numbers(cJSON *o)
{
    cJSON *c;

    for (c = o != NULL ? o->child : NULL; c != NULL; c = c->next) {
        if (cJSON_IsNumber(c)) {
            double v = c->valuedouble;
            if (isfinite(v) && v != floor(v) && fabs(v) < 1e12)
                cJSON_SetNumberValue(c, round(v * 1000.0) / 1000.0);
        } else if (cJSON_IsArray(c) || cJSON_IsObject(c)) {
            round_numbers(c);
        }
    }
}

static cJSON *num_or_null(double v, int ok)
{
    return ok && isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/*
 * "buckets": [[lo, hi, count], ...] in the metric's unit, the non-empty
 * ones in increasing order: the window histogram with every 8 adjacent
 * buckets joined (8 per power of two, so a bucket spans at most 1/8 of its
 * lower bound; values below 64 base units in steps of 8).
 */
#define BUCKET_JOIN 8

static void add_buckets(cJSON *m, const struct tt_hist *h, double scale)
{
    cJSON *arr = cJSON_AddArrayToObject(m, "buckets");
    if (arr == NULL)
        return;
    for (unsigned i = 0; i < TT_HIST_BUCKETS; i += BUCKET_JOIN) {
        uint64_t c = 0, lo, w, lo2, w2;
        for (unsigned j = i; j < i + BUCKET_JOIN; j++)
            c += h->b[j];
        if (c == 0)
            continue;
        tt_hist_bucket(i, &lo, &w);
        tt_hist_bucket(i + BUCKET_JOIN - 1, &lo2, &w2);
        cJSON *b = cJSON_CreateArray();
        if (b == NULL || !cJSON_AddItemToArray(arr, b)) {
            cJSON_Delete(b);
            return;
        }
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)lo / scale));
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)(lo2 + w2) / scale));
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)c));
    }
}

/* "slo": {"default": {tag: limit}, "models": {model: {tag: limit}}} */
static void add_objectives(cJSON *obj, const struct tt_slo *slo)
{
    for (unsigned i = 0; i < slo->n; i++)
        cJSON_AddNumberToObject(obj, tt_metric_tag[slo->c[i].metric], slo->c[i].limit);
}

static void add_slos(cJSON *root, struct tt_agg *a)
{
    pthread_mutex_lock(&a->mu);
    if (!a->have_slos) {
        pthread_mutex_unlock(&a->mu);
        cJSON_AddNullToObject(root, "slo");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(root, "slo");
    cJSON *d = o ? cJSON_AddObjectToObject(o, "default") : NULL;
    cJSON *ms = o ? cJSON_AddObjectToObject(o, "models") : NULL;
    if (d != NULL)
        add_objectives(d, &a->slos.dflt);
    for (unsigned i = 0; ms != NULL && i < a->slos.n; i++) {
        cJSON *mo = cJSON_AddObjectToObject(ms, a->slos.m[i].model);
        if (mo != NULL)
            add_objectives(mo, &a->slos.m[i].slo);
    }
    pthread_mutex_unlock(&a->mu);
}

/*
 * "recent": the rings of every aggregator, merged.  Each ring is copied
 * under its lock (a memcpy) and rendered outside it, so a scrape holds up
 * finishing requests for microseconds, not for the rendering.
 */
static int add_recent(cJSON *root, struct tt_agg *const *aggs, unsigned n,
                      uint64_t now_ns)
{
    cJSON *o = cJSON_AddObjectToObject(root, "recent");
    struct tt_recent *copy = malloc(sizeof(*copy));
    int rc = 0;

    if (o == NULL || copy == NULL) {
        free(copy);
        return -1;
    }
    cJSON_AddNumberToObject(o, "capacity", TT_RECENT_ENTRIES);
    cJSON_AddNumberToObject(o, "slowest_capacity", TT_RECENT_SLOW);
    cJSON_AddNumberToObject(o, "slowest_window_s", (double)(TT_RECENT_SLOW_NS / 1000000000ull));
    cJSON_AddNumberToObject(o, "token_cap", TT_RECENT_TOKENS);
    cJSON *rq = cJSON_AddArrayToObject(o, "requests");
    cJSON *sl = cJSON_AddArrayToObject(o, "slowest");
    if (rq == NULL || sl == NULL)
        rc = -1;
    for (unsigned k = 0; rc == 0 && k < n; k++) {
        int have;
        pthread_mutex_lock(&aggs[k]->mu);
        have = aggs[k]->recent != NULL;
        if (have)
            memcpy(copy, aggs[k]->recent, sizeof(*copy));
        pthread_mutex_unlock(&aggs[k]->mu);
        if (have)
            rc = tt_recent_json(copy, now_ns, rq, sl);
    }
    free(copy);
    return rc < 0 ? -1 : tt_recent_finish(rq, sl);
}

static void add_metric_stats(cJSON *obj, const char *tag, const char *unit,
                             const struct tt_hist *h, double scale)
{
    cJSON *m = cJSON_AddObjectToObject(obj, tag);
    if (m == NULL)
        return;
    cJSON_AddStringToObject(m, "unit", unit);
    cJSON_AddNumberToObject(m, "count", (double)h->count);
    if (h->count == 0)
        return;
    cJSON_AddNumberToObject(m, "avg", tt_hist_avg(h) / scale);
    cJSON_AddNumberToObject(m, "min", (double)h->min / scale);
    cJSON_AddNumberToObject(m, "max", (double)h->max / scale);
    static const double ps[] = { 50, 90, 95, 99 };
    static const char *const pn[] = { "p50", "p90", "p95", "p99" };
    for (int i = 0; i < 4; i++)
        cJSON_AddNumberToObject(m, pn[i], (double)tt_hist_percentile(h, ps[i]) / scale);
    add_buckets(m, h, scale);
}

/* the windows of upstream <name> over <aggs> into a new object; NULL on
 * out of memory */
static cJSON *windows_json(struct tt_agg *const *aggs, unsigned n, const char *name,
                           int slo_seen, uint64_t now_ns, struct tt_hist *hs)
{
    cJSON *wins = cJSON_CreateObject();

    if (wins == NULL)
        return NULL;
    for (int win = 0; win < TT_WIN__COUNT; win++) {
        uint64_t cnt[WC__COUNT] = { 0 };
        double dur = 0;
        for (unsigned i = 0; i < NWH; i++)
            tt_hist_init(&hs[i]);
        for (unsigned k = 0; k < n; k++) {
            pthread_mutex_lock(&aggs[k]->mu);
            for (unsigned u = 0; u < aggs[k]->nup; u++) {
                if (strcmp(aggs[k]->up[u], name) != 0)
                    continue;
                double d = tt_wstats_query(&aggs[k]->w[u], now_ns, (enum tt_window)win,
                                           hs, cnt);
                if (d > dur)
                    dur = d;
            }
            pthread_mutex_unlock(&aggs[k]->mu);
        }

        cJSON *w = cJSON_AddObjectToObject(wins, tt_window_names[win]);
        if (w == NULL)
            goto fail;
        uint64_t total = cnt[WC_OK] + cnt[WC_ERROR] + cnt[WC_CANCELLED];
        cJSON_AddNumberToObject(w, "duration_s", dur);
        cJSON *rq = cJSON_AddObjectToObject(w, "requests");
        if (rq != NULL) {
            cJSON_AddNumberToObject(rq, "ok", (double)cnt[WC_OK]);
            cJSON_AddNumberToObject(rq, "error", (double)cnt[WC_ERROR]);
            cJSON_AddNumberToObject(rq, "cancelled", (double)cnt[WC_CANCELLED]);
            cJSON_AddNumberToObject(rq, "total", (double)total);
        }
        cJSON *ek = cJSON_AddObjectToObject(w, "errors");
        for (unsigned i = WC_ERRK; ek != NULL && i < WC__COUNT; i++)
            if (cnt[i] > 0)
                cJSON_AddNumberToObject(ek, tt_errkind_names[i - WC_ERRK], (double)cnt[i]);
        cJSON_AddItemToObject(w, "good_requests",
                              num_or_null((double)cnt[WC_GOOD], slo_seen));
        cJSON_AddItemToObject(w, "request_throughput",
                              num_or_null((double)cnt[WC_OK] / dur, dur > 0));
        cJSON_AddItemToObject(w, "goodput",
                              num_or_null((double)cnt[WC_GOOD] / dur,
                                          slo_seen && dur > 0));
        cJSON_AddItemToObject(w, "good_request_fraction",
                              num_or_null((double)cnt[WC_GOOD] / (double)total,
                                          slo_seen && total > 0));
        cJSON_AddItemToObject(w, "slo_attainment",
                              num_or_null((double)cnt[WC_GOOD] / (double)cnt[WC_JUDGED],
                                          cnt[WC_JUDGED] > 0));
        cJSON *ms = cJSON_AddObjectToObject(w, "metrics");
        if (ms == NULL)
            goto fail;
        for (int i = 0; i < TT_M__COUNT; i++)
            add_metric_stats(ms, tt_metric_tag[i], tt_metric_unit[i], &hs[i],
                             window_scale(i));
        add_metric_stats(ms, tt_metric_tag[TT_M_ICL], tt_metric_unit[TT_M_ICL], &hs[WH_ICL], 1000.0);
    }
    return wins;
fail:
    cJSON_Delete(wins);
    return NULL;
}

int tt_agg_stats_json_at(struct tt_agg *const *aggs, unsigned n,
                         struct evbuffer *out, uint64_t now_ns)
{
    struct tt_hist *hs = malloc(NWH * sizeof(*hs));
    cJSON *root = cJSON_CreateObject();
    int rc = -1;

    if (n == 0 || hs == NULL || root == NULL)
        goto done;

    int slo_seen = 0;
    int64_t inflight = 0;
    uint64_t start = UINT64_MAX, dropped = 0;
    struct tt_recorder *rec = NULL;
    struct tt_pairs *pairs = NULL;
    for (unsigned k = 0; k < n; k++) {
        slo_seen |= aggs[k]->slo_seen;
        inflight += atomic_load(&aggs[k]->inflight);
        if (aggs[k]->w[0].start_ns < start)
            start = aggs[k]->w[0].start_ns;
        if (rec == NULL)
            rec = aggs[k]->rec;
        if (pairs == NULL)
            pairs = aggs[k]->pairs;
    }
    dropped = tt_recorder_dropped(rec);

    cJSON_AddStringToObject(root, "schema", "tokentap.stats/1");
    cJSON_AddNumberToObject(root, "uptime_s",
                            now_ns > start ? (double)(now_ns - start) / 1e9 : 0.0);
    cJSON_AddNumberToObject(root, "inflight", (double)inflight);
    cJSON_AddNumberToObject(root, "records_dropped", (double)dropped);
    cJSON_AddBoolToObject(root, "slo_configured", slo_seen);
    /* the top-level windows are the primary's (as before shadows) */
    cJSON *wins = windows_json(aggs, n, "primary", slo_seen, now_ns, hs);
    if (wins == NULL)
        goto done;
    cJSON_AddItemToObject(root, "windows", wins);
    cJSON *ups = cJSON_AddObjectToObject(root, "upstreams");
    if (ups == NULL)
        goto done;
    for (unsigned u = 0; u < aggs[0]->nup; u++) {
        const char *name = aggs[0]->up[u];
        cJSON *o = cJSON_AddObjectToObject(ups, name);
        if (o == NULL)
            goto done;
        cJSON_AddStringToObject(o, "role", u == 0 ? "primary" : "shadow");
        if (u > 0) {
            cJSON *d = cJSON_AddObjectToObject(o, "dropped");
            for (int k = 0; k < TT_DROP__COUNT && d != NULL; k++) {
                uint64_t sum = 0;
                for (unsigned j = 0; j < n; j++)
                    for (unsigned v = 0; v < aggs[j]->nup; v++)
                        if (strcmp(aggs[j]->up[v], name) == 0)
                            sum += aggs[j]->dropped[v][k];
                cJSON_AddNumberToObject(d, tt_drop_names[k], (double)sum);
            }
        }
        cJSON *uw = windows_json(aggs, n, name, slo_seen, now_ns, hs);
        if (uw == NULL)
            goto done;
        cJSON_AddItemToObject(o, "windows", uw);
    }
    if (tt_pairs_json(pairs, root, now_ns) < 0)
        goto done;
    add_slos(root, aggs[0]);
    if (add_recent(root, aggs, n, now_ns) < 0)
        goto done;
    round_numbers(root);

    char *txt = cJSON_PrintUnformatted(root);
    if (txt != NULL) {
        rc = evbuffer_add(out, txt, strlen(txt)) == 0
             && evbuffer_add(out, "\n", 1) == 0 ? 0 : -1;
        cJSON_free(txt);
    }
done:
    cJSON_Delete(root);
    free(hs);
    return rc;
}

int tt_agg_stats_json_many(struct tt_agg *const *aggs, unsigned n,
                           struct evbuffer *out)
{
    return tt_agg_stats_json_at(aggs, n, out, tt_now_mono());
}

int tt_agg_stats_json(struct tt_agg *a, struct evbuffer *out)
{
    return tt_agg_stats_json_many(&a, 1, out);
}
