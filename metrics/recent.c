/*
 * The recent-request ring (see metrics/recent.h): a fixed array of the last
 * finished requests and of the slowest of the last minute, filled by the
 * aggregator once per finished request and turned into JSON for /stats.
 * Entries are rendered through tt_record_format, so what the dashboard
 * shows of a request is exactly what its record says.
 */
#include "metrics/recent.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "metrics/clock.h"
#include "metrics/record.h"

unsigned long tt_recent_bytes(void)
{
    return (unsigned long)sizeof(struct tt_recent);
}

static void fill(struct tt_recent_entry *e, const struct tt_request *r,
                 const struct tt_metric_values *m,
                 const struct tt_slo_result *slo, uint64_t now_ns,
                 uint64_t seq, double latency_ms)
{
    struct tt_metric_values scratch;
    uint32_t n = r->n_token_ts < TT_RECENT_TOKENS ? r->n_token_ts : TT_RECENT_TOKENS;

    /* the copy's error type points into the copy, not into a request
     * being reused; the token times are kept below, as offsets */
    tt_request_copy(&e->r, r);
    tt_record_redact_path(r->path, e->r.path, sizeof(e->r.path));
    size_t un = r->upstream_name ? strlen(r->upstream_name) : 0;
    if (un >= sizeof(e->upstream))
        un = sizeof(e->upstream) - 1;
    memcpy(e->upstream, r->upstream_name ? r->upstream_name : "", un);
    e->upstream[un] = '\0';
    e->r.upstream_name = NULL;      /* set to e->upstream when rendered */
    e->m = *m;
    e->has_slo = slo != NULL;
    if (slo != NULL)
        e->slo = *slo;
    tt_metrics_compute(r, &scratch, &e->source);
    e->done_ns = now_ns;
    e->seq = seq;
    e->latency_ms = latency_ms;
    e->ntok = r->n_token_ts;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t us = r->token_ts[i] > r->t0 ? (r->token_ts[i] - r->t0) / 1000 : 0;
        e->tok_us[i] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    }
}

/* <src> as fill() made it, into <dst>: what points into the entry's own
 * request points into the copy's */
static void copy_entry(struct tt_recent_entry *dst, const struct tt_recent_entry *src)
{
    const char *et = src->r.err_type;

    *dst = *src;
    if (et != NULL && (uintptr_t)et >= (uintptr_t)&src->r &&
        (uintptr_t)et < (uintptr_t)(&src->r + 1))
        dst->r.err_type = (const char *)&dst->r + ((uintptr_t)et - (uintptr_t)&src->r);
}

/* finished longer than TT_RECENT_SLOW_NS before <now_ns> */
static int expired(const struct tt_recent_entry *e, uint64_t now_ns)
{
    return now_ns > e->done_ns + TT_RECENT_SLOW_NS;
}

void tt_recent_add(struct tt_recent *rr, const struct tt_request *r,
                   const struct tt_metric_values *m,
                   const struct tt_slo_result *slo, uint64_t now_ns)
{
    double lat = (m->present & (1u << TT_M_REQUEST_LATENCY))
               ? m->v[TT_M_REQUEST_LATENCY] : (double)(tt_record_end_mono(r) - r->t0) / 1e6;
    uint64_t seq = ++rr->seq;
    const struct tt_recent_entry *fresh = &rr->e[rr->head];

    fill(&rr->e[rr->head], r, m, slo, now_ns, seq, lat);
    rr->head = (rr->head + 1) % TT_RECENT_ENTRIES;

    /* the slowest of the last minute: an empty or expired slot, else the
     * fastest kept one when this request is slower */
    unsigned pick = TT_RECENT_SLOW;
    double min = 0;
    for (unsigned i = 0; i < TT_RECENT_SLOW; i++) {
        const struct tt_recent_entry *s = &rr->slow[i];
        if (s->seq == 0 || expired(s, now_ns)) {
            pick = i;
            break;
        }
        if (pick == TT_RECENT_SLOW || s->latency_ms < min) {
            pick = i;
            min = s->latency_ms;
        }
    }
    const struct tt_recent_entry *p = &rr->slow[pick];
    if (p->seq == 0 || expired(p, now_ns) || lat > p->latency_ms)
        copy_entry(&rr->slow[pick], fresh);
}

/* "[u32,u32,...]" into <buf> (room for 11 bytes per value + 3) */
static void u32_list(char *buf, const uint32_t *v, uint32_t n)
{
    char *o = buf;
    *o++ = '[';
    for (uint32_t i = 0; i < n; i++) {
        char tmp[24], *s = tt_fmt_u64(tmp + sizeof(tmp), v[i]);
        if (i)
            *o++ = ',';
        memcpy(o, s, (size_t)(tmp + sizeof(tmp) - s));
        o += tmp + sizeof(tmp) - s;
    }
    *o++ = ']';
    *o = '\0';
}

static cJSON *entry_json(const struct tt_recent_entry *e, uint64_t now_ns)
{
    struct tt_request r = e->r;
    size_t len;
    char *line;
    cJSON *o = cJSON_CreateObject();

    r.upstream_name = e->upstream;
    line = tt_record_format(&r, &e->m, e->source, e->has_slo ? &e->slo : NULL, &len);
    uint32_t n = e->ntok < TT_RECENT_TOKENS ? e->ntok : TT_RECENT_TOKENS;
    char toks[TT_RECENT_TOKENS * 11 + 3];

    if (line == NULL || o == NULL)
        goto fail;
    line[len - 1] = '\0';           /* the record's newline */
    cJSON_AddStringToObject(o, "upstream", e->upstream);
    cJSON_AddNumberToObject(o, "seq", (double)e->seq);
    cJSON_AddNumberToObject(o, "age_s",
                            now_ns > e->done_ns ? (double)(now_ns - e->done_ns) / 1e9 : 0.0);
    cJSON_AddNumberToObject(o, "latency_ms", e->latency_ms);
    cJSON_AddNumberToObject(o, "token_events", (double)e->ntok);
    /* raw text: cJSON would print each number through a float round trip */
    u32_list(toks, e->tok_us, n);
    if (cJSON_AddRawToObject(o, "token_us", toks) == NULL
        || cJSON_AddRawToObject(o, "record", line) == NULL)
        goto fail;
    cJSON_AddNumberToObject(o, "done_ns", (double)e->done_ns);
    free(line);
    return o;
fail:
    free(line);
    cJSON_Delete(o);
    return NULL;
}

int tt_recent_json(const struct tt_recent *rr, uint64_t now_ns,
                   cJSON *requests, cJSON *slowest)
{
    for (unsigned i = 0; i < TT_RECENT_ENTRIES; i++) {
        if (rr->e[i].seq == 0)
            continue;
        cJSON *o = entry_json(&rr->e[i], now_ns);
        if (o == NULL || !cJSON_AddItemToArray(requests, o)) {
            cJSON_Delete(o);
            return -1;
        }
    }
    for (unsigned i = 0; i < TT_RECENT_SLOW; i++) {
        const struct tt_recent_entry *s = &rr->slow[i];
        if (s->seq == 0 || expired(s, now_ns))
            continue;
        cJSON *o = entry_json(s, now_ns);
        if (o == NULL || !cJSON_AddItemToArray(slowest, o)) {
            cJSON_Delete(o);
            return -1;
        }
    }
    return 0;
}

static double key_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int by_done_desc(const void *a, const void *b)
{
    double x = key_of(*(cJSON *const *)a, "done_ns");
    double y = key_of(*(cJSON *const *)b, "done_ns");
    return x < y ? 1 : x > y ? -1 : 0;
}

static int by_latency_desc(const void *a, const void *b)
{
    double x = key_of(*(cJSON *const *)a, "latency_ms");
    double y = key_of(*(cJSON *const *)b, "latency_ms");
    return x < y ? 1 : x > y ? -1 : 0;
}

/* sort <arr> with <cmp>, keep the first <keep>, drop the sort keys */
static int trim(cJSON *arr, int (*cmp)(const void *, const void *), int keep)
{
    int n = cJSON_GetArraySize(arr);
    if (n == 0)
        return 0;
    cJSON **v = malloc((size_t)n * sizeof(*v));
    if (v == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        v[i] = cJSON_DetachItemFromArray(arr, 0);
    qsort(v, (size_t)n, sizeof(*v), cmp);
    for (int i = 0; i < n; i++) {
        if (i < keep) {
            cJSON_DeleteItemFromObjectCaseSensitive(v[i], "done_ns");
            cJSON_AddItemToArray(arr, v[i]);
        } else {
            cJSON_Delete(v[i]);
        }
    }
    free(v);
    return 0;
}

int tt_recent_finish(cJSON *requests, cJSON *slowest)
{
    if (trim(requests, by_done_desc, TT_RECENT_ENTRIES) < 0)
        return -1;
    return trim(slowest, by_latency_desc, TT_RECENT_SLOW);
}
