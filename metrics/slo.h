/*
 * SLOs and the goodput judge (SPEC section 6).  Owned by metrics/slo.c.
 * The configuration validates --goodput / [slo] / [slo.MODEL] specs with
 * tt_slo_parse(); the request path picks a tt_slo with tt_slo_for_model()
 * and judges each finished request with tt_slo_judge().
 */
#ifndef TT_SLO_H
#define TT_SLO_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/metric.h"

#define TT_SLO_MAX          TT_M__COUNT /* constraints per SLO: one per metric at most */
#define TT_SLO_MODELS_MAX   16  /* per-model SLOs in a set */
#define TT_SLO_MODEL_LEN    128 /* model name buffer, NUL included */

struct tt_slo_constraint {
    int    metric;              /* enum tt_metric */
    double limit;               /* in the metric's unit (tt_metric_unit) */
    int    ge;                  /* 1: value >= limit (throughput), 0: <= */
};

/* n == 0: no constraint, a request is good when it is not an error */
struct tt_slo {
    unsigned                 n;
    struct tt_slo_constraint c[TT_SLO_MAX];
};

struct tt_slo_result {
    int      good;
    uint32_t violated;          /* bit (1u << metric) per violated constraint */
};

/* the default SLO plus per-model overrides; plain data, copyable */
struct tt_slo_set {
    struct tt_slo dflt;
    unsigned      n;
    struct {
        char          model[TT_SLO_MODEL_LEN];
        struct tt_slo slo;
    } m[TT_SLO_MODELS_MAX];
};

/*
 * Parse an AIPerf goodput spec: whitespace-separated TAG:VALUE, TAG being a
 * per-request metric tag (metrics/metric.h) or an alias (ttft, ttfo, itl,
 * tpot, e2el), VALUE a non-negative decimal number in the metric's unit;
 * a time metric's (ms) may carry a duration unit, us, ms, s or m
 * ("ttft:500ms", "e2el:2.5s"), a bare number being ms.
 * An empty or all-blank spec gives n == 0.  Returns 0, or -1 with <err> set
 * to "goodput: <reason>" (unknown metric, missing/negative/non-numeric
 * value, duplicate metric after alias resolution).
 */
int tt_slo_parse(const char *spec, struct tt_slo *out, char *err,
                 size_t errlen);

/*
 * The milliseconds in one <unit> of a duration (<len> bytes, not
 * NUL-terminated): "us" 0.001, "ms" 1, "s" 1000, "m" 60000; 0 for any
 * other.  Shared by goodput limits and the config's durations
 * (proxy/config/config.c), so both take the same units.
 */
double tt_duration_unit_ms(const char *unit, size_t len);

/* canonical text of <slo> ("time_to_first_token:500 ..."); snprintf-style */
int tt_slo_format(const struct tt_slo *slo, char *buf, size_t len);

/*
 * Judge one finished request.  <m> holds its metrics, <is_error> whether it
 * failed (HTTP or mid-stream error, truncated, cancelled).  Comparisons are
 * inclusive.  A constraint on a metric absent from <m> is a violation of
 * that metric; an error request is never good, and its <violated> bits
 * only name metrics it has and that miss their limit (missing metrics of a
 * failed request are the error's fault, not extra violations).
 */
void tt_slo_judge(const struct tt_slo *slo, const struct tt_metric_values *m,
                  int is_error, struct tt_slo_result *res);

void tt_slo_set_init(struct tt_slo_set *set);

/*
 * Add <spec> to <set>: as the default when <model> is NULL or "", else as
 * the SLO of requests whose model is exactly <model>.  Returns 0, or -1
 * with <err> set (parse error, set full, duplicate model, name too long).
 */
int tt_slo_set_add(struct tt_slo_set *set, const char *model,
                   const char *spec, char *err, size_t errlen);

/* the SLO for <model> (NULL allowed): its own, else the default */
const struct tt_slo *tt_slo_for_model(const struct tt_slo_set *set,
                                      const char *model);

#endif
