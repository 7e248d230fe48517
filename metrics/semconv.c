/*
 * OpenTelemetry GenAI metric families: see metrics/semconv.h.
 *
 * Bucket boundaries are the conventions' ExplicitBucketBoundaries
 * advisories (GenAI metrics page): time to first token, time per output
 * token, and the shared duration boundaries for request duration and the
 * client chunk timings; powers of 4 for token usage.  Label sets live in a
 * small chained hash, bounded like the aggregator's: upstreams x
 * (operation, provider) pairs x (model cap + 1).
 */
#include "metrics/semconv.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "metrics/clock.h"
#include "metrics/prom.h"

const char *const tt_semconv_names[] = { "tokentap", "both", "otel", NULL };

enum { H_TTFT, H_TPOT, H_DUR, H_TTFC, H_TPOC, H_TOK_IN, H_TOK_OUT, H__COUNT };

static const double b_ttft[] = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0,
};
static const double b_tpot[] = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
};
static const double b_dur[] = {
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
    40.96, 81.92,
};
static const double b_tok[] = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
    16777216, 67108864,
};
#define NB_MAX 16

static const struct fam {
    const char   *name, *help;
    const double *b;
    unsigned      nb;
} fams[] = {
    [H_TTFT] = { "gen_ai_server_time_to_first_token_seconds",
                 "gen_ai.server.time_to_first_token: time to the first token event (reasoning included), ok streaming requests.",
                 b_ttft, sizeof(b_ttft) / sizeof(b_ttft[0]) },
    [H_TPOT] = { "gen_ai_server_time_per_output_token_seconds",
                 "gen_ai.server.time_per_output_token: (request latency - TTFT) / (output tokens - 1), ok requests.",
                 b_tpot, sizeof(b_tpot) / sizeof(b_tpot[0]) },
    [H_DUR]  = { "gen_ai_server_request_duration_seconds",
                 "gen_ai.server.request.duration: to the last token event (streaming) or response complete, ok requests.",
                 b_dur, sizeof(b_dur) / sizeof(b_dur[0]) },
    [H_TTFC] = { "gen_ai_client_operation_time_to_first_chunk_seconds",
                 "gen_ai.client.operation.time_to_first_chunk: request received to the first stream event, ok streaming requests.",
                 b_dur, sizeof(b_dur) / sizeof(b_dur[0]) },
    [H_TPOC] = { "gen_ai_client_operation_time_per_output_chunk_seconds",
                 "gen_ai.client.operation.time_per_output_chunk: gaps between consecutive token events, one per gap.",
                 b_dur, sizeof(b_dur) / sizeof(b_dur[0]) },
    [H_TOK_IN] = { "gen_ai_client_token_usage",
                   "gen_ai.client.token.usage: tokens per request by gen_ai_token_type (input: prompt; output: answer + reasoning).",
                   b_tok, sizeof(b_tok) / sizeof(b_tok[0]) },
};

struct hist {
    uint64_t b[NB_MAX + 1];     /* per bucket, the last is +Inf */
    double   sum;
    uint64_t count;
};

struct series {
    struct series *next, *order;
    uint32_t       hash;
    const char    *op, *prov;   /* static strings */
    char           upstream[64];
    char           model[128];
    char          *labels;      /* escaped, without braces */
    struct hist    h[H__COUNT];
};

#define NCHAIN 256

struct tt_semconv {
    struct series *chain[NCHAIN];
    struct series *first, **last;
};

struct tt_semconv *tt_semconv_new(void)
{
    struct tt_semconv *sc = calloc(1, sizeof(*sc));
    if (sc != NULL)
        sc->last = &sc->first;
    return sc;
}

void tt_semconv_free(struct tt_semconv *sc)
{
    if (sc == NULL)
        return;
    for (struct series *s = sc->first, *n; s != NULL; s = n) {
        n = s->order;
        free(s->labels);
        free(s);
    }
    free(sc);
}

void tt_semconv_names_of(const struct tt_request *r, const char **op,
                         const char **provider)
{
    size_t pl = strlen(r->path);
    *op = NULL;
    *provider = NULL;
    switch (r->api) {
    case TT_API_OPENAI_CHAT:        *op = "chat"; *provider = "openai"; break;
    case TT_API_OPENAI_COMPLETIONS: *op = "text_completion"; *provider = "openai"; break;
    case TT_API_OPENAI_RESPONSES:   *op = "chat"; *provider = "openai"; break;
    case TT_API_ANTHROPIC:          *op = "chat"; *provider = "anthropic"; break;
    case TT_API_GEMINI:             *op = "generate_content"; *provider = "gcp.gen_ai"; break;
    case TT_API_OLLAMA:
        *op = pl >= 13 && strcmp(r->path + pl - 13, "/api/generate") == 0
                  ? "text_completion" : "chat";
        *provider = "ollama";
        break;
    case TT_API_TGI:                *op = "text_completion"; *provider = "tgi"; break;
    default: break;
    }
}

static uint32_t fnv(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (h ^ 0xff) * 16777619u;      /* separator: "ab"+"c" != "a"+"bc" */
}

static char *make_labels(const char *up, const char *op, const char *prov,
                         const char *model)
{
    const char *k[4] = { "upstream", "gen_ai_operation_name", "gen_ai_provider_name",
                         "gen_ai_request_model" };
    const char *v[4] = { up, op, prov, model };
    size_t n = 1;
    for (int i = 0; i < 4; i++)
        n += strlen(k[i]) + tt_prom_escape_label(NULL, v[i]) + 4;
    char *p = malloc(n), *o = p;
    if (p == NULL)
        return NULL;
    for (int i = 0; i < 4; i++) {
        o += sprintf(o, "%s%s=\"", i ? "," : "", k[i]);
        o += tt_prom_escape_label(o, v[i]);
        *o++ = '"';
    }
    *o = '\0';
    return p;
}

static struct series *series_get(struct tt_semconv *sc, const char *up,
                                 const char *op, const char *prov,
                                 const char *model)
{
    uint32_t h = fnv(fnv(fnv(fnv(2166136261u, up), op), prov), model);
    for (struct series *s = sc->chain[h % NCHAIN]; s; s = s->next)
        if (s->hash == h && s->op == op && s->prov == prov
            && strcmp(s->model, model) == 0 && strcmp(s->upstream, up) == 0)
            return s;
    struct series *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    snprintf(s->upstream, sizeof(s->upstream), "%s", up);
    snprintf(s->model, sizeof(s->model), "%s", model);
    s->labels = make_labels(s->upstream, op, prov, s->model);
    if (s->labels == NULL) {
        free(s);
        return NULL;
    }
    s->hash = h;
    s->op = op;
    s->prov = prov;
    s->next = sc->chain[h % NCHAIN];
    sc->chain[h % NCHAIN] = s;
    *sc->last = s;
    sc->last = &s->order;
    return s;
}

static void observe(struct hist *h, int f, double v)
{
    const struct fam *fm = &fams[f == H_TOK_OUT ? H_TOK_IN : f];
    unsigned i = 0;
    while (i < fm->nb && v > fm->b[i])
        i++;
    h->b[i]++;
    h->sum += v;
    h->count++;
}

int tt_semconv_observe(struct tt_semconv *sc, const char *upstream,
                       const char *mlabel, const struct tt_request *r,
                       const struct tt_metric_values *m, int ok)
{
    const char *op, *prov;
    tt_semconv_names_of(r, &op, &prov);
    if (op == NULL)
        return 0;
    struct series *s = series_get(sc, upstream, op, prov, mlabel);
    if (s == NULL)
        return -1;
#define HAS(id) (m->present & (1u << (id)))
    if (HAS(TT_M_ISL))
        observe(&s->h[H_TOK_IN], H_TOK_IN, m->v[TT_M_ISL]);
    if (HAS(TT_M_OSL))
        observe(&s->h[H_TOK_OUT], H_TOK_OUT, m->v[TT_M_OSL]);
    if (!ok)
        return 0;
    if (HAS(TT_M_TTFT))
        observe(&s->h[H_TTFT], H_TTFT, m->v[TT_M_TTFT] / 1000.0);
    if (HAS(TT_M_ITL))
        observe(&s->h[H_TPOT], H_TPOT, m->v[TT_M_ITL] / 1000.0);
    if (HAS(TT_M_REQUEST_LATENCY))
        observe(&s->h[H_DUR], H_DUR, m->v[TT_M_REQUEST_LATENCY] / 1000.0);
#undef HAS
    if (r->s.streaming && r->ts[TT_TS_FIRST_EVENT] > r->t0)
        observe(&s->h[H_TTFC], H_TTFC, (double)(r->ts[TT_TS_FIRST_EVENT] - r->t0) / 1e9);
    uint32_t n = tt_icl_count(r);
    for (uint32_t i = 0; i < n; i++)
        observe(&s->h[H_TPOC], H_TPOC, (double)tt_icl_ns(r, i) / 1e9);
    return 0;
}

int tt_semconv_merge(struct tt_semconv *dst, const struct tt_semconv *src,
                     const char *(*relabel)(void *ctx, const char *mlabel), void *ctx)
{
    for (const struct series *s = src->first; s != NULL; s = s->order) {
        struct series *d = series_get(dst, s->upstream, s->op, s->prov,
                                      relabel ? relabel(ctx, s->model) : s->model);
        if (d == NULL)
            return -1;
        for (int f = 0; f < H__COUNT; f++) {
            for (unsigned i = 0; i <= NB_MAX; i++)
                d->h[f].b[i] += s->h[f].b[i];
            d->h[f].sum += s->h[f].sum;
            d->h[f].count += s->h[f].count;
        }
    }
    return 0;
}

static void expose_hist(struct evbuffer *out, const char *name, const char *labels,
                        const char *extra, const struct hist *h, const struct fam *fm)
{
    char num[64];
    uint64_t cum = 0;
    for (unsigned i = 0; i < fm->nb; i++) {
        cum += h->b[i];
        tt_prom_fmt_bound(num, sizeof(num), fm->b[i]);
        evbuffer_add_printf(out, "%s_bucket{%s%s,le=\"%s\"} %llu\n", name, labels, extra,
                            num, (unsigned long long)cum);
    }
    cum += h->b[fm->nb];
    evbuffer_add_printf(out, "%s_bucket{%s%s,le=\"+Inf\"} %llu\n", name, labels, extra,
                        (unsigned long long)cum);
    tt_prom_fmt_double(num, sizeof(num), h->sum);
    evbuffer_add_printf(out, "%s_sum{%s%s} %s\n", name, labels, extra, num);
    evbuffer_add_printf(out, "%s_count{%s%s} %llu\n", name, labels, extra,
                        (unsigned long long)h->count);
}

void tt_semconv_expose(const struct tt_semconv *sc, struct evbuffer *out)
{
    for (int f = 0; f < H__COUNT; f++) {
        if (f == H_TOK_OUT)
            continue;                   /* one family, two token types */
        const struct fam *fm = &fams[f];
        tt_prom_family(out, fm->name, "histogram", fm->help);
        for (const struct series *s = sc->first; s != NULL; s = s->order) {
            if (f == H_TOK_IN) {
                expose_hist(out, fm->name, s->labels, ",gen_ai_token_type=\"input\"",
                            &s->h[H_TOK_IN], fm);
                expose_hist(out, fm->name, s->labels, ",gen_ai_token_type=\"output\"",
                            &s->h[H_TOK_OUT], fm);
            } else {
                expose_hist(out, fm->name, s->labels, "", &s->h[f], fm);
            }
        }
    }
}
