/*
 * Goodput SLO parsing and judging (see metrics/slo.h, SPEC section 6).
 * Called by proxy/config/config.c (validation, building the SLO set) and by the
 * request completion path (judging).  No allocation, no global state.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/slo.h"

_Static_assert(TT_M__COUNT <= 32, "metric bits must fit a uint32_t");

static const struct {
    const char *alias;
    int         metric;
} slo_aliases[] = {
    { "ttft", TT_M_TTFT },
    { "ttfo", TT_M_TTFO },
    { "itl",  TT_M_ITL },
    { "tpot", TT_M_ITL },
    { "e2el", TT_M_REQUEST_LATENCY },
};

/* higher is better for throughput tags: the constraint is value >= limit */
static int metric_is_ge(int metric)
{
    return tt_metric_higher[metric];
}

static int metric_lookup(const char *tag, size_t len)
{
    for (int i = 0; i < TT_M__COUNT; i++)
        if (strlen(tt_metric_tag[i]) == len &&
            memcmp(tt_metric_tag[i], tag, len) == 0)
            return i;
    for (size_t i = 0; i < sizeof(slo_aliases) / sizeof(slo_aliases[0]); i++)
        if (strlen(slo_aliases[i].alias) == len &&
            memcmp(slo_aliases[i].alias, tag, len) == 0)
            return slo_aliases[i].metric;
    return -1;
}

static void known_list(char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; i < TT_M__COUNT && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                                tt_metric_tag[i]);
    for (size_t i = 0; i < sizeof(slo_aliases) / sizeof(slo_aliases[0]) &&
                       off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                i ? ", " : "; aliases ", slo_aliases[i].alias);
}

/*
 * Check that [s, s+len) is a plain non-negative decimal number: digits with
 * an optional fraction and exponent ("50", "0.5", ".5", "1e3").  Returns 1
 * when it is, 0 otherwise (hex, inf, nan, signs and junk are refused).
 */
static int plain_number(const char *s, size_t len)
{
    size_t i = 0, digits = 0;

    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (digits == 0)
        return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        size_t exp = 0;
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++, exp++;
        if (exp == 0)
            return 0;
    }
    return i == len;
}

double tt_duration_unit_ms(const char *unit, size_t len)
{
    static const struct { const char *u; double ms; } units[] = {
        { "us", 0.001 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 },
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i].u) == len && memcmp(units[i].u, unit, len) == 0)
            return units[i].ms;
    return 0;
}

static int is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' ||
           ch == '\f' || ch == '\v';
}

/*
 * Parse <spec> into <out> (see metrics/slo.h).  <out> is cleared first;
 * on error its content is unspecified.
 */
int tt_slo_parse(const char *spec, struct tt_slo *out, char *err,
                 size_t errlen)
{
    const char *p = spec;
    const char *first[TT_M__COUNT] = { 0 };
    size_t first_len[TT_M__COUNT] = { 0 };

    memset(out, 0, sizeof(*out));
    for (;;) {
        const char *tok, *colon, *val;
        size_t len, tlen, vlen;
        char num[64];
        double v;
        int id;

        while (is_blank(*p))
            p++;
        if (*p == '\0')
            break;
        tok = p;
        while (*p && !is_blank(*p))
            p++;
        len = (size_t)(p - tok);
        int show = len > 80 ? 80 : (int)len;

        colon = memchr(tok, ':', len);
        tlen = colon ? (size_t)(colon - tok) : len;
        if (tlen == 0) {
            snprintf(err, errlen, "goodput: '%.*s': missing metric name "
                     "(expected TAG:VALUE)", show, tok);
            return -1;
        }
        id = metric_lookup(tok, tlen);
        if (id < 0) {
            char known[640];
            known_list(known, sizeof(known));
            snprintf(err, errlen, "goodput: unknown metric '%.*s' (known: %s)",
                     (int)(tlen > 80 ? 80 : tlen), tok, known);
            return -1;
        }
        if (!colon || colon + 1 == tok + len) {
            snprintf(err, errlen, "goodput: '%.*s': missing value "
                     "(expected TAG:VALUE)", show, tok);
            return -1;
        }
        val = colon + 1;
        vlen = (size_t)(tok + len - val);
        if (*val == '-' && plain_number(val + 1, vlen - 1)) {
            snprintf(err, errlen, "goodput: '%.*s': negative value", show, tok);
            return -1;
        }
        /* a time limit may carry a duration unit (us, ms, s, m, as the
         * config's durations); a bare number is in the metric's unit */
        int is_ms = strcmp(tt_metric_unit[id], "ms") == 0;
        size_t nlen = vlen;
        double mul = 1;
        while (nlen > 0 && ((val[nlen - 1] >= 'a' && val[nlen - 1] <= 'z') ||
                            (val[nlen - 1] >= 'A' && val[nlen - 1] <= 'Z')))
            nlen--;
        if (nlen < vlen && nlen > 0 && plain_number(val, nlen)) {
            mul = tt_duration_unit_ms(val + nlen, vlen - nlen);
            if (mul != 0 && !is_ms) {
                snprintf(err, errlen, "goodput: '%.*s': %s is in %s: a plain "
                         "number, no unit", show, tok, tt_metric_tag[id],
                         tt_metric_unit[id]);
                return -1;
            }
        }
        if (mul == 0 || nlen == vlen || nlen == 0 || !plain_number(val, nlen)) {
            nlen = vlen;        /* no unit: all of it the number */
            mul = 1;
        }
        if (nlen >= sizeof(num) || !plain_number(val, nlen)) {
            snprintf(err, errlen, "goodput: '%.*s': value is not a number%s",
                     show, tok, is_ms ? " or a duration (500, 500ms, 0.5s)" : "");
            return -1;
        }
        memcpy(num, val, nlen);
        num[nlen] = '\0';
        v = strtod(num, NULL) * mul;
        if (!isfinite(v)) {
            snprintf(err, errlen, "goodput: '%.*s': value out of range",
                     show, tok);
            return -1;
        }
        if (first[id]) {
            snprintf(err, errlen, "goodput: duplicate metric '%s' ('%.*s' and "
                     "'%.*s')", tt_metric_tag[id],
                     (int)(first_len[id] > 80 ? 80 : first_len[id]), first[id],
                     show, tok);
            return -1;
        }
        first[id] = tok;
        first_len[id] = len;
        out->c[out->n].metric = id;
        out->c[out->n].limit = v;
        out->c[out->n].ge = metric_is_ge(id);
        out->n++;
    }
    return 0;
}

int tt_slo_format(const struct tt_slo *slo, char *buf, size_t len)
{
    size_t off = 0;
    int n;

    if (len)
        buf[0] = '\0';
    for (unsigned i = 0; i < slo->n; i++) {
        n = snprintf(off < len ? buf + off : NULL, off < len ? len - off : 0,
                     "%s%s:%.17g", i ? " " : "",
                     tt_metric_tag[slo->c[i].metric], slo->c[i].limit);
        if (n < 0)
            return n;
        off += (size_t)n;
    }
    return (int)off;
}

/* Judge one request against <slo>; see metrics/slo.h for the rules. */
void tt_slo_judge(const struct tt_slo *slo, const struct tt_metric_values *m,
                  int is_error, struct tt_slo_result *res)
{
    res->good = !is_error;
    res->violated = 0;
    if (!slo)
        return;
    for (unsigned i = 0; i < slo->n; i++) {
        const struct tt_slo_constraint *c = &slo->c[i];
        uint32_t bit = 1u << c->metric;
        double v;
        int ok;

        if (!(m->present & bit)) {
            res->good = 0;
            if (!is_error)
                res->violated |= bit;
            continue;
        }
        v = m->v[c->metric];
        ok = c->ge ? v >= c->limit : v <= c->limit;     /* NaN fails */
        if (!ok) {
            res->good = 0;
            res->violated |= bit;
        }
    }
}

void tt_slo_set_init(struct tt_slo_set *set)
{
    memset(set, 0, sizeof(*set));
}

/* Add a default or per-model SLO; see metrics/slo.h. */
int tt_slo_set_add(struct tt_slo_set *set, const char *model,
                   const char *spec, char *err, size_t errlen)
{
    struct tt_slo slo;

    if (tt_slo_parse(spec, &slo, err, errlen) < 0)
        return -1;
    if (!model || !*model) {
        set->dflt = slo;
        return 0;
    }
    if (strlen(model) >= TT_SLO_MODEL_LEN) {
        snprintf(err, errlen, "goodput: model name too long (max %d bytes)",
                 TT_SLO_MODEL_LEN - 1);
        return -1;
    }
    for (unsigned i = 0; i < set->n; i++)
        if (strcmp(set->m[i].model, model) == 0) {
            snprintf(err, errlen, "goodput: model '%s' already has an SLO",
                     model);
            return -1;
        }
    if (set->n == TT_SLO_MODELS_MAX) {
        snprintf(err, errlen, "goodput: too many per-model SLOs (max %d)",
                 TT_SLO_MODELS_MAX);
        return -1;
    }
    strcpy(set->m[set->n].model, model);
    set->m[set->n].slo = slo;
    set->n++;
    return 0;
}

const struct tt_slo *tt_slo_for_model(const struct tt_slo_set *set,
                                      const char *model)
{
    if (model)
        for (unsigned i = 0; i < set->n; i++)
            if (strcmp(set->m[i].model, model) == 0)
                return &set->m[i].slo;
    return &set->dflt;
}
