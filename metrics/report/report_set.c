/*
 * Record sets for the offline report: the streaming JSONL reader, the
 * per-record parse (cJSON), filters, goodput judging and the bounded
 * stores behind the report's statistics.  See metrics/report/report_set.h.
 */
#include "metrics/report/report_set.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const double tt_rpt_pcts[TT_RPT_NPCT] = { 1, 5, 10, 25, 50, 75, 90, 95, 99 };

double tt_rset_hist_scale(int metric)
{
    if (metric >= TT_M__COUNT)
        return 1000.0;                              /* ICL: ms -> us */
    if (strcmp(tt_metric_unit[metric], "ms") == 0)
        return 1000.0;                              /* us */
    if (strcmp(tt_metric_unit[metric], "tokens") == 0)
        return 1.0;
    return 1000.0;                                  /* milli-tokens/s */
}

static void hist_add(struct tt_hist *h, double v, double scale)
{
    double x = nearbyint(v * scale);
    if (!(x >= 0))
        x = 0;
    if (x > 1.8e19)
        x = 1.8e19;
    tt_hist_record(h, (uint64_t)x);
}

void tt_rset_init(struct tt_rset *s, const char *label, size_t max_exact,
                  const struct tt_rfilter *f, const struct tt_rjudge *j)
{
    memset(s, 0, sizeof(*s));
    s->label = label;
    s->max_exact = max_exact;
    s->filter = f;
    s->judge = j;
    s->first_start_ns = INT64_MAX;
    s->last_end_ns = INT64_MIN;
    for (int i = 0; i < TT_M__COUNT; i++) {
        tt_moments_init(&s->mo[i]);
        tt_hist_init(&s->h[i]);
    }
    tt_moments_init(&s->icl.mo);
    tt_hist_init(&s->icl.h);
    s->icl.exact = 1;
    s->icl.limit = max_exact > SIZE_MAX / 8 ? SIZE_MAX : max_exact * 8;
}

void tt_rset_free(struct tt_rset *s)
{
    free(s->rows);
    free(s->icl.v);
    s->rows = NULL;
    s->icl.v = NULL;
}

uint64_t tt_rpt_id_hash(const char *str)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* ---- small tables ---- */

static struct tt_rcount *table_bump(struct tt_rtable *t, const char *name,
                                    int code, const char *detail)
{
    for (unsigned i = 0; i < t->n; i++)
        if (t->e[i].code == code && strcmp(t->e[i].name, name) == 0) {
            t->e[i].count++;
            return &t->e[i];
        }
    if (t->n == TT_RPT_TABLE) {
        t->overflow++;
        return NULL;
    }
    struct tt_rcount *e = &t->e[t->n++];
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->detail, sizeof(e->detail), "%s", detail ? detail : "");
    e->code = code;
    e->count = 1;
    return e;
}

/* ---- time parsing ---- */

static int all_digits(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static int num2(const char *s, int *v)
{
    if (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]))
        return -1;
    *v = (s[0] - '0') * 10 + (s[1] - '0');
    return 0;
}

/* unix seconds (with optional fraction) or RFC 3339 date-time */
int tt_rpt_parse_time(const char *s, int64_t *ns)
{
    size_t n = strlen(s);
    const char *dot = strchr(s, '.');

    if (n == 0)
        return -1;
    if (all_digits(s, dot ? (size_t)(dot - s) : n)
        && (!dot || all_digits(dot + 1, strlen(dot + 1)))) {
        char *end;
        errno = 0;
        long long sec = strtoll(s, &end, 10);
        if (errno || sec > INT64_MAX / 1000000000LL)
            return -1;
        int64_t frac = 0;
        if (dot) {
            int64_t scale = 100000000;
            for (const char *p = dot + 1; *p && scale > 0; p++, scale /= 10)
                frac += (*p - '0') * scale;
        }
        *ns = (int64_t)sec * 1000000000LL + frac;
        return 0;
    }

    /* YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM) */
    int Y, Mo, D, h, mi, sec, hi2;
    if (n < 20 || !all_digits(s, 4) || s[4] != '-' || num2(s + 5, &Mo)
        || s[7] != '-' || num2(s + 8, &D) || (s[10] != 'T' && s[10] != 't'
                                               && s[10] != ' ')
        || num2(s + 11, &h) || s[13] != ':' || num2(s + 14, &mi)
        || s[16] != ':' || num2(s + 17, &sec))
        return -1;
    num2(s, &hi2);
    Y = hi2 * 100;
    num2(s + 2, &hi2);
    Y += hi2;
    if (Mo < 1 || Mo > 12 || D < 1 || D > 31 || h > 23 || mi > 59 || sec > 60)
        return -1;
    const char *p = s + 19;
    int64_t frac = 0;
    if (*p == '.') {
        int64_t scale = 100000000;
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        for (; isdigit((unsigned char)*p); p++) {
            if (scale > 0)
                frac += (*p - '0') * scale;
            scale /= 10;
        }
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (num2(p + 1, &oh) || p[3] != ':' || num2(p + 4, &om) || oh > 23
            || om > 59)
            return -1;
        off = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p != '\0')
        return -1;
    struct tm tm = { 0 };
    tm.tm_year = Y - 1900;
    tm.tm_mon = Mo - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    *ns = ((int64_t)t - off) * 1000000000LL + frac;
    return 0;
}

/* ---- one record ---- */

/*
 * The exact integer after "<key>": in the raw line.  Unix ns do not fit a
 * double (cJSON rounds them to 256 ns); the key cannot occur inside a JSON
 * string unescaped, so the first match is the metadata field.
 */
static int raw_i64(const char *line, size_t len, const char *key, int64_t *out)
{
    size_t kl = strlen(key);
    const char *p = memmem(line, len, key, kl);
    if (p == NULL)
        return -1;
    p += kl;
    const char *end = line + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || !(isdigit((unsigned char)*p) || *p == '-'))
        return -1;
    char buf[32];
    size_t n = 0;
    while (p < end && n < sizeof(buf) - 1 && (isdigit((unsigned char)*p) || *p == '-'))
        buf[n++] = *p++;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return -1;
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno)
        return -1;
    *out = v;
    return 0;
}

static int64_t meta_ns(const cJSON *meta, const char *line, size_t len,
                       const char *name, const char *rawkey, int *ok)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(meta, name);
    int64_t v;
    *ok = 0;
    if (!cJSON_IsNumber(j))
        return 0;
    *ok = 1;
    /* prefer the exact digits when they agree with the parsed number */
    if (raw_i64(line, len, rawkey, &v) == 0
        && fabs((double)v - j->valuedouble) <= 1e-6 * fabs(j->valuedouble) + 1)
        return v;
    return (int64_t)j->valuedouble;
}

/* <v> in unit <u> to the canonical unit of metric <m>; 0 or -1 */
static int to_unit(int m, const char *u, double *v)
{
    const char *want = m < TT_M__COUNT ? tt_metric_unit[m] : "ms";
    if (u == NULL || strcmp(u, want) == 0)
        return 0;
    if (strcmp(want, "ms") == 0) {
        if (strcmp(u, "ns") == 0)
            *v /= 1e6;
        else if (strcmp(u, "us") == 0)
            *v /= 1e3;
        else if (strcmp(u, "s") == 0 || strcmp(u, "sec") == 0)
            *v *= 1e3;
        else
            return -1;
        return 0;
    }
    /* AIPerf writes tokens/sec/user, older tokentap records tokens/sec */
    if ((strcmp(want, "tokens/sec") == 0 || strcmp(want, "tokens/sec/user") == 0)
        && (strcmp(u, "tokens/sec") == 0 || strcmp(u, "tokens/sec/user") == 0))
        return 0;
    return -1;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/*
 * Count an error under its kind: the record's error.kind; a record that
 * predates it (or names a kind this build does not know) is classified
 * from its type and status the way tokentap classifies a request
 * (tt_errkind_classify), a type that is no kind being the upstream's own.
 */
static void kind_bump(struct tt_rset *s, const cJSON *err, const cJSON *meta,
                      int cancelled, int code, const char *msg)
{
    const char *kname = err ? str_of(err, "kind") : NULL;
    const char *type = err ? str_of(err, "type") : NULL;
    const char *up = err ? str_of(err, "upstream_type") : NULL;
    int k = kname ? tt_errkind_by_name(kname) : -1;

    if (k < 0) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(meta, "status");
        int status = cJSON_IsNumber(st) ? (int)st->valuedouble : 0;
        int named = type != NULL && tt_errkind_by_name(type) >= 0;
        /* "http_status": the old fallback for an error status */
        int upstream_named = type != NULL && !named && strcmp(type, "http_status") != 0;
        k = tt_errkind_classify(named ? type : NULL, upstream_named, status,
                                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "stream")),
                                cancelled);
        if (k < 0)                      /* an error object under a 2xx */
            k = TT_EK_UPSTREAM_ERROR;
        if (up == NULL && upstream_named)
            up = type;
    }
    struct tt_rkind *e = &s->errkinds[k];
    if (e->count++ == 0)
        snprintf(e->detail, sizeof(e->detail), "%s", msg ? msg : "");
    unsigned i = 0;
    while (i < e->ncodes && e->codes[i] != code)
        i++;
    if (i == e->ncodes && e->ncodes < TT_RKIND_CODES && code != 0)
        e->codes[e->ncodes++] = code;
    if (up != NULL && up[0]) {
        size_t len = strlen(e->upstream_types), n = strlen(up);
        const char *p = e->upstream_types;
        int seen = 0;
        while (!seen && (p = strstr(p, up)) != NULL) {
            seen = (p == e->upstream_types || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0');
            p += n;
        }
        if (!seen && len + n + 2 < sizeof(e->upstream_types))
            snprintf(e->upstream_types + len, sizeof(e->upstream_types) - len, "%s%s",
                     len ? ", " : "", up);
    }
}

static int passes(const struct tt_rfilter *f, const cJSON *meta, int64_t start,
                  int have_start)
{
    const char *s;
    if (f == NULL)
        return 1;
    if (f->model && (!(s = str_of(meta, "model")) || strcmp(s, f->model) != 0))
        return 0;
    if (f->api && (!(s = str_of(meta, "api")) || strcmp(s, f->api) != 0))
        return 0;
    if (f->upstream
        && (!(s = str_of(meta, "upstream")) || strcmp(s, f->upstream) != 0))
        return 0;
    if (f->status >= 0) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(meta, "status");
        if (!cJSON_IsNumber(st) || (int)st->valuedouble != f->status)
            return 0;
    }
    if (f->since_ns != INT64_MIN && (!have_start || start < f->since_ns))
        return 0;
    if (f->until_ns != INT64_MAX && (!have_start || start > f->until_ns))
        return 0;
    return 1;
}

static void icl_add(struct tt_ricl *c, double v)
{
    tt_moments_add(&c->mo, v);
    hist_add(&c->h, v, 1000.0);
    if (!c->exact)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        if (cap > c->limit)
            cap = c->limit;
        float *p = c->n < c->limit ? realloc(c->v, cap * sizeof(float)) : NULL;
        if (p == NULL) {
            /* past the cap (or out of memory): histogram from now on */
            free(c->v);
            c->v = NULL;
            c->n = c->cap = 0;
            c->exact = 0;
            return;
        }
        c->v = p;
        c->cap = cap;
    }
    c->v[c->n++] = (float)v;
}

static void row_add(struct tt_rset *s, const struct tt_rrow *r)
{
    if (s->nrows == s->caprows) {
        size_t cap = s->caprows ? s->caprows * 2 : 1024;
        if (cap > s->max_exact)
            cap = s->max_exact;
        struct tt_rrow *p = s->nrows < s->max_exact
                                ? realloc(s->rows, cap * sizeof(*p)) : NULL;
        if (p == NULL) {
            s->rows_dropped++;
            return;
        }
        s->rows = p;
        s->caprows = cap;
    }
    s->rows[s->nrows++] = *r;
}

void tt_rset_add_line(struct tt_rset *s, const char *line, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++)
        if (!isspace((unsigned char)line[i]))
            break;
    if (i == len) {
        s->blank++;
        return;
    }
    s->lines++;

    cJSON *root = cJSON_ParseWithLength(line, len);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(meta)) {
        s->malformed++;
        cJSON_Delete(root);
        return;
    }

    int have_start, have_end;
    int64_t start = meta_ns(meta, line, len, "request_start_ns",
                            "\"request_start_ns\":", &have_start);
    int64_t end = meta_ns(meta, line, len, "request_end_ns",
                          "\"request_end_ns\":", &have_end);
    /* every upstream named in the files, filtered or not: an unknown
     * --upstream or --compare-upstreams name is refused with this list */
    const char *up = str_of(meta, "upstream");
    table_bump(&s->upstreams, up ? up : "(none)", 0, NULL);
    if (!passes(s->filter, meta, start, have_start)) {
        s->filtered++;
        cJSON_Delete(root);
        return;
    }
    s->records++;

    const char *schema = str_of(root, "schema");
    table_bump(&s->schemas, schema ? schema : "(none)", 0, NULL);

    /* error: the error object, or a cancelled request (code 499); as
     * AIPerf records them, a cancelled request is an error (in <errors>
     * and the error types, type "cancelled" unless the record names one)
     * and also counted in <cancelled>; like the others it is kept out of
     * the metrics */
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    int cancelled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "was_cancelled"));
    int is_error = cJSON_IsObject(err) || cancelled;
    if (is_error) {
        const char *type = cJSON_IsObject(err) ? str_of(err, "type") : NULL;
        const cJSON *code = cJSON_IsObject(err)
                                ? cJSON_GetObjectItemCaseSensitive(err, "code") : NULL;
        const char *msg = cJSON_IsObject(err) ? str_of(err, "message") : NULL;
        int icode = cJSON_IsNumber(code) ? (int)code->valuedouble : (cancelled ? 499 : 0);
        table_bump(&s->errtypes, type ? type : (cancelled ? "cancelled" : "error"), icode,
                   msg ? msg : (cancelled ? "the client went away before the end" : NULL));
        kind_bump(s, cJSON_IsObject(err) ? err : NULL, meta, cancelled, icode,
                  msg ? msg : (cancelled ? "the client went away before the end" : NULL));
        s->errors++;
        if (cancelled)
            s->cancelled++;
    }
    if (!is_error) {
        /* counting methods matter for valid records' token counts only */
        const char *src = str_of(meta, "token_count_source");
        table_bump(&s->sources, src ? src : "(none)", 0, NULL);
        s->valid++;
    }

    /* metrics, rebuilt into tt_metric_values (full precision) */
    struct tt_metric_values mv;
    memset(&mv, 0, sizeof(mv));
    const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    const cJSON *icl = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, metrics) {
        if (it->string == NULL || !cJSON_IsObject(it))
            continue;
        const cJSON *val = cJSON_GetObjectItemCaseSensitive(it, "value");
        const char *unit = str_of(it, "unit");
        if (strcmp(it->string, "inter_chunk_latency") == 0) {
            if (cJSON_IsArray(val)) {
                double probe = 1;
                if (to_unit(TT_M__COUNT, unit, &probe) < 0)
                    s->unit_mismatch++;
                else
                    icl = it;
            }
            continue;
        }
        int m = tt_metric_by_tag(it->string);
        if (m < 0 || !cJSON_IsNumber(val))
            continue;
        double v = val->valuedouble;
        if (to_unit(m, unit, &v) < 0 || !isfinite(v)) {
            s->unit_mismatch++;
            continue;
        }
        mv.v[m] = v;
        mv.present |= 1u << m;
    }

    /* goodput verdict */
    struct tt_rrow row;
    memset(&row, 0, sizeof(row));
    if (s->judge && s->judge->have_spec) {
        struct tt_slo_result res;
        tt_slo_judge(&s->judge->slo, &mv, is_error, &res);
        row.flags |= TT_RROW_JUDGED | (res.good ? TT_RROW_GOOD : 0);
    } else {
        const cJSON *slo = cJSON_GetObjectItemCaseSensitive(meta, "slo");
        const cJSON *good = cJSON_GetObjectItemCaseSensitive(slo, "good");
        if (cJSON_IsBool(good))
            row.flags |= TT_RROW_JUDGED
                         | (cJSON_IsTrue(good) && !is_error ? TT_RROW_GOOD : 0);
    }
    if (row.flags & TT_RROW_JUDGED) {
        s->judged++;
        if (row.flags & TT_RROW_GOOD)
            s->good++;
    } else {
        s->unjudged++;
    }

    if (!is_error) {
        for (int m = 0; m < TT_M__COUNT; m++) {
            if (!(mv.present & (1u << m)))
                continue;
            tt_moments_add(&s->mo[m], mv.v[m]);
            hist_add(&s->h[m], mv.v[m], tt_rset_hist_scale(m));
        }
        if (icl != NULL) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(icl, "value");
            const char *unit = str_of(icl, "unit");
            const cJSON *g;
            int any = 0;
            cJSON_ArrayForEach(g, arr) {
                if (!cJSON_IsNumber(g))
                    continue;
                double v = g->valuedouble;
                to_unit(TT_M__COUNT, unit, &v);
                if (!isfinite(v))
                    continue;
                icl_add(&s->icl, v);
                any = 1;
            }
            if (any)
                s->icl.requests++;
        }
    }

    if (have_start && start < s->first_start_ns)
        s->first_start_ns = start;
    if (!have_end)
        end = start;
    if ((have_end || have_start) && end > s->last_end_ns)
        s->last_end_ns = end;

    row.start_ns = have_start ? start : 0;
    const char *rid = str_of(meta, "x_request_id");
    row.id = rid && rid[0] ? tt_rpt_id_hash(rid) : 0;
    for (int m = 0; m < TT_M__COUNT; m++)
        if (mv.present & (1u << m)) {
            row.v[m] = (float)mv.v[m];
            row.present |= 1u << m;
        }
    if (is_error)
        row.flags |= TT_RROW_ERROR;
    row_add(s, &row);

    cJSON_Delete(root);
}

/* ---- the reader ---- */

#define BLOCK (1u << 20)

int tt_rset_read_file(struct tt_rset *s, const char *path, char *err,
                      size_t errlen)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *blk = NULL, *line = NULL;
    size_t llen = 0, lcap = 0, n;
    int skipping = 0, rc = 0;

    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    blk = malloc(BLOCK);
    if (blk == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -1;
        goto out;
    }
    while ((n = fread(blk, 1, BLOCK, f)) > 0) {
        const char *p = blk, *end = blk + n;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *seg_end = nl ? nl : end;
            size_t seg = (size_t)(seg_end - p);

            if (!skipping) {
                if (llen == 0 && nl != NULL && seg <= TT_RPT_MAX_LINE) {
                    tt_rset_add_line(s, p, seg);        /* the usual case */
                } else if (llen + seg > TT_RPT_MAX_LINE) {
                    skipping = 1;
                    llen = 0;
                } else {
                    if (llen + seg > lcap) {
                        size_t cap = lcap ? lcap : 65536;
                        while (cap < llen + seg)
                            cap *= 2;
                        char *q = realloc(line, cap);
                        if (q == NULL) {
                            skipping = 1;
                            llen = 0;
                            goto next;
                        }
                        line = q;
                        lcap = cap;
                    }
                    memcpy(line + llen, p, seg);
                    llen += seg;
                    if (nl != NULL) {
                        tt_rset_add_line(s, line, llen);
                        llen = 0;
                    }
                }
            }
next:
            if (nl != NULL) {
                if (skipping) {             /* an over-long line ended */
                    s->lines++;
                    s->malformed++;
                    skipping = 0;
                }
                p = nl + 1;
            } else {
                p = end;
            }
        }
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        rc = -1;
    }
    if (skipping) {
        s->lines++;
        s->malformed++;
    } else if (llen > 0) {
        tt_rset_add_line(s, line, llen);    /* last line, no newline */
    }
out:
    free(blk);
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* ---- summaries ---- */

static float *gather(struct tt_rset *s, int m, size_t *n)
{
    float *v;
    size_t k = 0;

    *n = 0;
    if (m == TT_M__COUNT) {
        if (!s->icl.exact || s->icl.n == 0)
            return NULL;
        v = malloc(s->icl.n * sizeof(float));
        if (v == NULL)
            return NULL;
        memcpy(v, s->icl.v, s->icl.n * sizeof(float));
        *n = s->icl.n;
        return v;
    }
    if (s->rows_dropped > 0 || s->mo[m].n == 0)
        return NULL;
    v = malloc((size_t)s->mo[m].n * sizeof(float));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < s->nrows; i++) {
        const struct tt_rrow *r = &s->rows[i];
        if ((r->flags & TT_RROW_ERROR) || !(r->present & (1u << m)))
            continue;
        v[k++] = r->v[m];
    }
    *n = k;
    return v;
}

float *tt_rset_sorted(struct tt_rset *s, int m, size_t *n)
{
    float *v = gather(s, m, n);
    if (v != NULL)
        tt_sort_floats(v, *n);
    return v;
}

void tt_rset_summary(struct tt_rset *s, int m, struct tt_rsummary *out)
{
    const struct tt_moments *mo = m < TT_M__COUNT ? &s->mo[m] : &s->icl.mo;
    const struct tt_hist *h = m < TT_M__COUNT ? &s->h[m] : &s->icl.h;
    size_t n;
    float *v;

    memset(out, 0, sizeof(*out));
    out->count = mo->n;
    if (mo->n == 0) {
        out->avg = out->min = out->max = out->std = NAN;
        for (int i = 0; i < TT_RPT_NPCT; i++)
            out->pct[i] = NAN;
        out->exact = 1;
        return;
    }
    out->sum = mo->sum;
    out->avg = mo->sum / (double)mo->n;
    out->min = mo->min;
    out->max = mo->max;
    out->std = tt_moments_std(mo);

    v = tt_rset_sorted(s, m, &n);
    if (v != NULL && n == mo->n) {
        for (int i = 0; i < TT_RPT_NPCT; i++)
            out->pct[i] = tt_pct_linear_f(v, n, tt_rpt_pcts[i]);
        out->exact = 1;
    } else {
        /* nearest rank from the histogram (<= 0.78 % error), clamped */
        double scale = tt_rset_hist_scale(m);
        for (int i = 0; i < TT_RPT_NPCT; i++) {
            double x = (double)tt_hist_percentile(h, tt_rpt_pcts[i]) / scale;
            out->pct[i] = x < mo->min ? mo->min : x > mo->max ? mo->max : x;
        }
        out->exact = 0;
    }
    free(v);
}

double tt_rset_duration_s(const struct tt_rset *s)
{
    if (s->first_start_ns == INT64_MAX || s->last_end_ns == INT64_MIN
        || s->last_end_ns <= s->first_start_ns)
        return 0;
    return (double)(s->last_end_ns - s->first_start_ns) / 1e9;
}
