/*
 * OTLP spans: building and encoding (see metrics/otlp.h).
 */
#include "metrics/otlp.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/clock.h"
#include "metrics/record.h"
#include "metrics/semconv.h"

/* ---------------------------------------------------------------- filling */

/* <len> bytes of <v> into the span's strings (cut when full); its offset */
static uint16_t span_str(struct tt_span *sp, const char *v, size_t len, uint16_t *olen)
{
    size_t room = sizeof(sp->s) - sp->slen;
    uint16_t off = (uint16_t)sp->slen;

    if (len > room)
        len = room;
    memcpy(sp->s + sp->slen, v, len);
    sp->slen += len;
    *olen = (uint16_t)len;
    return off;
}

static struct tt_span_attr *attr(struct tt_span *sp, const char *key, int type)
{
    struct tt_span_attr *a;

    if (sp->nattrs >= TT_SPAN_ATTRS)
        return NULL;
    a = &sp->a[sp->nattrs++];
    memset(a, 0, sizeof(*a));
    a->key = key;
    a->type = (uint8_t)type;
    return a;
}

static void attr_str(struct tt_span *sp, const char *key, const char *v, int type)
{
    struct tt_span_attr *a;

    if (v == NULL || v[0] == '\0' || (a = attr(sp, key, type)) == NULL)
        return;
    a->soff = span_str(sp, v, strlen(v), &a->slen);
}

static void attr_int(struct tt_span *sp, const char *key, int64_t v)
{
    struct tt_span_attr *a = attr(sp, key, TT_A_INT);
    if (a != NULL)
        a->i = v;
}

static void attr_dbl(struct tt_span *sp, const char *key, double v)
{
    struct tt_span_attr *a;
    if (isfinite(v) && (a = attr(sp, key, TT_A_DBL)) != NULL)
        a->d = v;
}

/* metric <id> (ms) as seconds, when present */
static void attr_ms_s(struct tt_span *sp, const char *key,
                      const struct tt_metric_values *m, enum tt_metric id)
{
    if (tt_metric_has(m, id))
        attr_dbl(sp, key, m->v[id] / 1000.0);
}

static void attr_count(struct tt_span *sp, const char *key,
                       const struct tt_metric_values *m, enum tt_metric id)
{
    if (tt_metric_has(m, id) && m->v[id] >= 0)
        attr_int(sp, key, (int64_t)llround(m->v[id]));
}

static int64_t wall_of(const struct tt_request *r, uint64_t mono)
{
    return r->start_wall_ns + (int64_t)(mono - r->t0);
}

static void event(struct tt_span *sp, const struct tt_request *r, const char *name,
                  enum tt_ts k)
{
    if (r->ts[k] == 0 || r->ts[k] < r->t0 || sp->nevents >= TT_SPAN_EVENTS)
        return;
    sp->ev[sp->nevents].name = name;
    sp->ev[sp->nevents].t = wall_of(r, r->ts[k]);
    sp->nevents++;
}

int tt_span_fill(struct tt_span *sp, const struct tt_request *r,
                 const struct tt_metric_values *m, const struct tt_slo_result *res,
                 const char *host, const char *port)
{
    const char *op, *provider, *model, *etype, *emsg;
    char name[300];
    int ecode, n;
    uint64_t end;

    if (!r->trace.on || !(r->trace.flags & 0x01))
        return -1;
    sp->tr = r->trace;
    sp->nattrs = sp->nevents = 0;
    sp->slen = 0;
    sp->start_ns = r->start_wall_ns;
    end = tt_record_end_mono(r);
    sp->end_ns = end >= r->t0 ? wall_of(r, end) : r->start_wall_ns;
    tt_semconv_names_of(r, &op, &provider);
    model = r->model;
    /* {gen_ai.operation.name} {gen_ai.request.model}; an API tokentap does
     * not decode is an HTTP request: its method */
    if (op != NULL)
        n = snprintf(name, sizeof(name), "%s%s%s", op, model[0] ? " " : "", model);
    else
        n = snprintf(name, sizeof(name), "%s", r->method[0] ? r->method : "HTTP");
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(name))
        n = (int)sizeof(name) - 1;
    sp->name_off = span_str(sp, name, (size_t)n, &sp->name_len);

    attr_str(sp, "gen_ai.operation.name", op, TT_A_STR);
    attr_str(sp, "gen_ai.provider.name", provider, TT_A_STR);
    attr_str(sp, "gen_ai.request.model", model, TT_A_STR);
    attr_str(sp, "gen_ai.response.model", r->s.model, TT_A_STR);
    attr_str(sp, "gen_ai.response.id", r->s.response_id, TT_A_STR);
    attr_str(sp, "gen_ai.response.finish_reasons", r->s.finish_reason, TT_A_STRLIST);
    attr_count(sp, "gen_ai.usage.input_tokens", m, TT_M_ISL);
    attr_count(sp, "gen_ai.usage.output_tokens", m, TT_M_OSL);
    attr_count(sp, "gen_ai.usage.cache_read.input_tokens", m, TT_M_CACHED_INPUT);
    if (r->s.streaming && r->ts[TT_TS_FIRST_EVENT] > r->t0)
        attr_dbl(sp, "gen_ai.response.time_to_first_chunk",
                 (double)(r->ts[TT_TS_FIRST_EVENT] - r->t0) / 1e9);
    attr_str(sp, "server.address", host, TT_A_STR);
    if (port != NULL && port[0])
        attr_int(sp, "server.port", strtol(port, NULL, 10));
    if (r->status > 0)
        attr_int(sp, "http.response.status_code", r->status);
    sp->error = tt_request_error(r, &ecode, &etype, &emsg) != 0;
    if (sp->error) {
        /* the kind, as on /metrics: OpenTelemetry wants a small set */
        int kind = tt_request_errkind(r);
        attr_str(sp, "error.type", kind >= 0 ? tt_errkind_names[kind] : "error", TT_A_STR);
    }
    attr_ms_s(sp, "tokentap.time_to_first_token", m, TT_M_TTFT);
    attr_ms_s(sp, "tokentap.time_to_first_output_token", m, TT_M_TTFO);
    attr_ms_s(sp, "tokentap.inter_token_latency", m, TT_M_ITL);
    attr_ms_s(sp, "tokentap.client_time_to_first_token", m, TT_M_CLIENT_TTFT);
    attr_ms_s(sp, "tokentap.request_latency", m, TT_M_REQUEST_LATENCY);
    if (res != NULL) {
        struct tt_span_attr *a = attr(sp, "tokentap.slo.good", TT_A_BOOL);
        if (a != NULL)
            a->i = res->good != 0;
    }
    attr_str(sp, "tokentap.x_request_id", r->request_id, TT_A_STR);
    attr_str(sp, "tokentap.upstream", r->upstream_name, TT_A_STR);
    attr_str(sp, "tokentap.role", r->shadow ? "shadow" : "primary", TT_A_STR);

    event(sp, r, "first_token", TT_TS_FIRST_TOKEN);
    event(sp, r, "first_output_token", TT_TS_FIRST_OUTPUT_TOKEN);
    event(sp, r, "last_token", TT_TS_LAST_TOKEN);
    event(sp, r, "first_token_acked", TT_TS_FIRST_TOKEN_ACKED);
    event(sp, r, "response_acked", TT_TS_RESPONSE_ACKED);
    return 0;
}

/* ---------------------------------------------------------------- buffer */

static int ob_grow(struct tt_obuf *b, size_t more)
{
    size_t cap;
    unsigned char *p;

    if (b->oom)
        return -1;
    if (b->len + more <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void ob_add(struct tt_obuf *b, const void *v, size_t n)
{
    if (ob_grow(b, n) < 0)
        return;
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

/* ---------------------------------------------------------------- protobuf */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void pb_varint(struct tt_obuf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;

    while (v >= 0x80) {
        tmp[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (unsigned char)v;
    ob_add(b, tmp, n);
}

static void pb_tag(struct tt_obuf *b, unsigned field, unsigned wt)
{
    pb_varint(b, (uint64_t)field << 3 | wt);
}

static void pb_bytes(struct tt_obuf *b, unsigned field, const void *v, size_t n)
{
    pb_tag(b, field, WT_LEN);
    pb_varint(b, n);
    ob_add(b, v, n);
}

static void pb_fixed64(struct tt_obuf *b, unsigned field, uint64_t v)
{
    unsigned char tmp[8];
    for (int i = 0; i < 8; i++)
        tmp[i] = (unsigned char)(v >> (8 * i));
    pb_tag(b, field, WT_I64);
    ob_add(b, tmp, 8);
}

static void pb_fixed32(struct tt_obuf *b, unsigned field, uint32_t v)
{
    unsigned char tmp[4];
    for (int i = 0; i < 4; i++)
        tmp[i] = (unsigned char)(v >> (8 * i));
    pb_tag(b, field, WT_I32);
    ob_add(b, tmp, 4);
}

/* a nested message: its tag and a one-byte length placeholder; the
 * length is written by pb_end (the content moved when it needs more) */
static size_t pb_begin(struct tt_obuf *b, unsigned field)
{
    pb_tag(b, field, WT_LEN);
    ob_add(b, "", 1);
    return b->len;
}

static void pb_end(struct tt_obuf *b, size_t start)
{
    size_t len, k;

    if (b->oom)
        return;
    len = b->len - start;
    k = varint_size(len);
    if (k > 1) {
        if (ob_grow(b, k - 1) < 0)
            return;
        memmove(b->p + start + k - 1, b->p + start, len);
        b->len += k - 1;
    }
    for (size_t i = 0; i < k; i++) {
        b->p[start - 1 + i] = (unsigned char)((len & 0x7f) | (i + 1 < k ? 0x80 : 0));
        len >>= 7;
    }
}

/* KeyValue (key 1, value 2: AnyValue string 1, bool 2, int 3, double 4,
 * array 5 of ArrayValue values 1) */
static void pb_kv_str(struct tt_obuf *b, unsigned field, const char *key,
                      const char *v, size_t n)
{
    size_t kv = pb_begin(b, field), av;
    pb_bytes(b, 1, key, strlen(key));
    av = pb_begin(b, 2);
    pb_bytes(b, 1, v, n);
    pb_end(b, av);
    pb_end(b, kv);
}

static void pb_attr(struct tt_obuf *b, unsigned field, const struct tt_span *sp,
                    const struct tt_span_attr *a)
{
    size_t kv, av, arr, inner;
    uint64_t bits;

    if (a->type == TT_A_STR) {
        pb_kv_str(b, field, a->key, sp->s + a->soff, a->slen);
        return;
    }
    kv = pb_begin(b, field);
    pb_bytes(b, 1, a->key, strlen(a->key));
    av = pb_begin(b, 2);
    switch (a->type) {
    case TT_A_BOOL:
        pb_tag(b, 2, WT_VARINT);
        pb_varint(b, a->i ? 1 : 0);
        break;
    case TT_A_INT:
        pb_tag(b, 3, WT_VARINT);
        pb_varint(b, (uint64_t)a->i);
        break;
    case TT_A_DBL:
        memcpy(&bits, &a->d, 8);
        pb_fixed64(b, 4, bits);
        break;
    default:        /* TT_A_STRLIST */
        arr = pb_begin(b, 5);
        inner = pb_begin(b, 1);
        pb_bytes(b, 1, sp->s + a->soff, a->slen);
        pb_end(b, inner);
        pb_end(b, arr);
        break;
    }
    pb_end(b, av);
    pb_end(b, kv);
}

static int zero(const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i])
            return 0;
    return 1;
}

/* Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5,
 * kind 6, start 7, end 8, attributes 9, events 11 (time 1, name 2),
 * links 13 (trace_id 1, span_id 2, flags 6), status 15 (code 3), flags 16 */
static void pb_span(struct tt_obuf *b, const struct tt_span *sp)
{
    size_t s = pb_begin(b, 2), e;

    pb_bytes(b, 1, sp->tr.trace_id, 16);
    pb_bytes(b, 2, sp->tr.span_id, 8);
    if (sp->tr.state[0])
        pb_bytes(b, 3, sp->tr.state, strlen(sp->tr.state));
    if (!zero(sp->tr.parent_id, 8))
        pb_bytes(b, 4, sp->tr.parent_id, 8);
    pb_bytes(b, 5, sp->s + sp->name_off, sp->name_len);
    pb_tag(b, 6, WT_VARINT);
    pb_varint(b, 3);                        /* SPAN_KIND_CLIENT */
    pb_fixed64(b, 7, (uint64_t)sp->start_ns);
    pb_fixed64(b, 8, (uint64_t)sp->end_ns);
    for (unsigned i = 0; i < sp->nattrs; i++)
        pb_attr(b, 9, sp, &sp->a[i]);
    for (unsigned i = 0; i < sp->nevents; i++) {
        e = pb_begin(b, 11);
        pb_fixed64(b, 1, (uint64_t)sp->ev[i].t);
        pb_bytes(b, 2, sp->ev[i].name, strlen(sp->ev[i].name));
        pb_end(b, e);
    }
    if (!zero(sp->tr.link_id, 8)) {
        e = pb_begin(b, 13);
        pb_bytes(b, 1, sp->tr.trace_id, 16);
        pb_bytes(b, 2, sp->tr.link_id, 8);
        pb_fixed32(b, 6, sp->tr.flags);
        pb_end(b, e);
    }
    if (sp->error) {
        e = pb_begin(b, 15);
        pb_tag(b, 3, WT_VARINT);
        pb_varint(b, 2);                    /* STATUS_CODE_ERROR */
        pb_end(b, e);
    }
    /* W3C flags; bit 8: whether the parent was remote is known, bit 9: it was */
    pb_fixed32(b, 16, sp->tr.flags | 0x100u | (zero(sp->tr.parent_id, 8) ? 0 : 0x200u));
    pb_end(b, s);
}

int tt_otlp_encode_pb(struct tt_obuf *b, const struct tt_otlp_resource *res,
                      const struct tt_span *const *spans, size_t n)
{
    /* ExportTraceServiceRequest.resource_spans 1: ResourceSpans (resource 1:
     * Resource attributes 1; scope_spans 2: ScopeSpans (scope 1:
     * InstrumentationScope name 1, version 2; spans 2)) */
    size_t rs = pb_begin(b, 1), r, ss, sc;

    r = pb_begin(b, 1);
    pb_kv_str(b, 1, "service.name", res->service_name, strlen(res->service_name));
    pb_kv_str(b, 1, "service.version", res->version, strlen(res->version));
    pb_end(b, r);
    ss = pb_begin(b, 2);
    sc = pb_begin(b, 1);
    pb_bytes(b, 1, "tokentap", 8);
    pb_bytes(b, 2, res->version, strlen(res->version));
    pb_end(b, sc);
    for (size_t i = 0; i < n; i++)
        pb_span(b, spans[i]);
    pb_end(b, ss);
    pb_end(b, rs);
    return b->oom ? -1 : 0;
}

/* ---------------------------------------------------------------- JSON */

static void js_lit(struct tt_obuf *b, const char *s)
{
    ob_add(b, s, strlen(s));
}

static void js_str(struct tt_obuf *b, const char *s, size_t n)
{
    static const char hx[] = "0123456789abcdef";

    ob_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            ob_add(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', hx[c >> 4], hx[c & 15] };
            ob_add(b, e, 6);
        } else {
            ob_add(b, &s[i], 1);
        }
    }
    ob_add(b, "\"", 1);
}

static void js_hex(struct tt_obuf *b, const uint8_t *v, size_t n)
{
    char tmp[40];
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        tmp[2 * i] = hx[v[i] >> 4];
        tmp[2 * i + 1] = hx[v[i] & 15];
    }
    ob_add(b, "\"", 1);
    ob_add(b, tmp, 2 * n);
    ob_add(b, "\"", 1);
}

static void js_fmt(struct tt_obuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void js_fmt(struct tt_obuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        ob_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void js_kv_str(struct tt_obuf *b, const char *key, const char *v, size_t n)
{
    js_lit(b, "{\"key\":");
    js_str(b, key, strlen(key));
    js_lit(b, ",\"value\":{\"stringValue\":");
    js_str(b, v, n);
    js_lit(b, "}}");
}

static void js_attr(struct tt_obuf *b, const struct tt_span *sp, const struct tt_span_attr *a)
{
    if (a->type == TT_A_STR) {
        js_kv_str(b, a->key, sp->s + a->soff, a->slen);
        return;
    }
    js_lit(b, "{\"key\":");
    js_str(b, a->key, strlen(a->key));
    js_lit(b, ",\"value\":{");
    switch (a->type) {
    case TT_A_BOOL:
        js_lit(b, a->i ? "\"boolValue\":true" : "\"boolValue\":false");
        break;
    case TT_A_INT:      /* int64 is a decimal string in OTLP/JSON */
        js_fmt(b, "\"intValue\":\"%" PRId64 "\"", a->i);
        break;
    case TT_A_DBL:
        js_fmt(b, "\"doubleValue\":%.17g", a->d);
        break;
    default:
        js_lit(b, "\"arrayValue\":{\"values\":[{\"stringValue\":");
        js_str(b, sp->s + a->soff, a->slen);
        js_lit(b, "}]}");
        break;
    }
    js_lit(b, "}}");
}

static void js_span(struct tt_obuf *b, const struct tt_span *sp)
{
    js_lit(b, "{\"traceId\":");
    js_hex(b, sp->tr.trace_id, 16);
    js_lit(b, ",\"spanId\":");
    js_hex(b, sp->tr.span_id, 8);
    if (sp->tr.state[0]) {
        js_lit(b, ",\"traceState\":");
        js_str(b, sp->tr.state, strlen(sp->tr.state));
    }
    if (!zero(sp->tr.parent_id, 8)) {
        js_lit(b, ",\"parentSpanId\":");
        js_hex(b, sp->tr.parent_id, 8);
    }
    js_fmt(b, ",\"flags\":%u", sp->tr.flags | 0x100u |
                               (zero(sp->tr.parent_id, 8) ? 0 : 0x200u));
    js_lit(b, ",\"name\":");
    js_str(b, sp->s + sp->name_off, sp->name_len);
    js_fmt(b, ",\"kind\":3,\"startTimeUnixNano\":\"%" PRId64 "\"", sp->start_ns);
    js_fmt(b, ",\"endTimeUnixNano\":\"%" PRId64 "\"", sp->end_ns);
    js_lit(b, ",\"attributes\":[");
    for (unsigned i = 0; i < sp->nattrs; i++) {
        if (i)
            js_lit(b, ",");
        js_attr(b, sp, &sp->a[i]);
    }
    js_lit(b, "],\"events\":[");
    for (unsigned i = 0; i < sp->nevents; i++) {
        js_fmt(b, "%s{\"timeUnixNano\":\"%" PRId64 "\",\"name\":", i ? "," : "",
               sp->ev[i].t);
        js_str(b, sp->ev[i].name, strlen(sp->ev[i].name));
        js_lit(b, "}");
    }
    js_lit(b, "]");
    if (!zero(sp->tr.link_id, 8)) {
        js_lit(b, ",\"links\":[{\"traceId\":");
        js_hex(b, sp->tr.trace_id, 16);
        js_lit(b, ",\"spanId\":");
        js_hex(b, sp->tr.link_id, 8);
        js_fmt(b, ",\"flags\":%u}]", sp->tr.flags);
    }
    if (sp->error)
        js_lit(b, ",\"status\":{\"code\":2}");
    js_lit(b, "}");
}

int tt_otlp_encode_json(struct tt_obuf *b, const struct tt_otlp_resource *res,
                        const struct tt_span *const *spans, size_t n)
{
    js_lit(b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
    js_kv_str(b, "service.name", res->service_name, strlen(res->service_name));
    js_lit(b, ",");
    js_kv_str(b, "service.version", res->version, strlen(res->version));
    js_lit(b, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"tokentap\",\"version\":");
    js_str(b, res->version, strlen(res->version));
    js_lit(b, "},\"spans\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            js_lit(b, ",");
        js_span(b, spans[i]);
    }
    js_lit(b, "]}]}]}");
    return b->oom ? -1 : 0;
}
