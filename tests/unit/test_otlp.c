/*
 * Unit tests for proxy/http/trace.c (W3C traceparent parsing and formatting,
 * trace decisions) and metrics/otlp.c (span filling, the protobuf
 * encoder's nested lengths and field layout, OTLP/JSON), and the
 * exporter's Retry-After parsing.  The integration tests decode the wire
 * with protoc --decode_raw (tests/integration/test_otlp.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <cmocka.h>

#include "metrics/clock.h"
#include "metrics/otlp.h"
#include "metrics/otlp_export.h"
#include "proxy/http/httphead.h"
#include "proxy/http/trace.h"

static int parse(const char *v, uint8_t tid[16], uint8_t pid[8], uint8_t *fl)
{
    return tt_traceparent_parse(v, strlen(v), tid, pid, fl);
}

static void test_traceparent_valid(void **state)
{
    uint8_t tid[16], pid[8], fl;
    char hex[33];
    (void)state;

    assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                           tid, pid, &fl), 0);
    tt_hex(tid, 16, hex);
    assert_string_equal(hex, "4bf92f3577b34da6a3ce929d0e0e4736");
    tt_hex(pid, 8, hex);
    assert_string_equal(hex, "00f067aa0ba902b7");
    assert_int_equal(fl, 1);
    /* flags are carried as they are; blanks around the value are not part of it */
    assert_int_equal(parse(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ",
                           tid, pid, &fl), 0);
    assert_int_equal(fl, 0);
    /* a later version: the first 55 bytes, more after a '-' */
    assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz",
                           tid, pid, &fl), 0);
    assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                           tid, pid, &fl), 0);
}

static void test_traceparent_invalid(void **state)
{
    static const char *const bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",           /* short */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",       /* 00 longer */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",        /* uppercase */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",        /* zero trace */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",        /* zero parent */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        /* version ff */
        "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",       /* no '-' after */
    };
    uint8_t tid[16], pid[8], fl;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse(bad[i], tid, pid, &fl) == 0)
            fail_msg("'%s' parsed", bad[i]);
}

static void head_with(struct tt_head *h, const char *const *kv, size_t n)
{
    assert_int_equal(tt_head_init(h, 8192, 32), 0);
    for (size_t i = 0; i < n; i += 2) {
        assert_int_equal(tt_head_field(h, kv[i], strlen(kv[i])), 0);
        assert_int_equal(tt_head_value(h, kv[i + 1], strlen(kv[i + 1])), 0);
    }
}

static void test_trace_begin_child_format(void **state)
{
    static const char *const kv[] = {
        "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate", "congo=t61rcWkgMzE",
    };
    static const char *const badkv[] = {
        "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "tracestate", "congo=t61rcWkgMzE",
    };
    struct tt_head h;
    struct tt_trace t, c, n;
    char tp[TT_TRACEPARENT_LEN + 1], hex[33];
    (void)state;

    head_with(&h, kv, 4);
    tt_trace_begin(&t, &h);
    tt_head_free(&h);
    assert_true(t.on);
    tt_hex(t.trace_id, 16, hex);
    assert_string_equal(hex, "4bf92f3577b34da6a3ce929d0e0e4736");
    tt_hex(t.parent_id, 8, hex);
    assert_string_equal(hex, "00f067aa0ba902b7");
    assert_string_equal(t.state, "congo=t61rcWkgMzE");
    tt_traceparent_format(&t, tp);
    assert_int_equal(strlen(tp), TT_TRACEPARENT_LEN);
    assert_memory_equal(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36);
    tt_hex(t.span_id, 8, hex);
    assert_memory_equal(tp + 36, hex, 16);
    assert_string_equal(tp + 52, "-01");
    /* what it formats parses back to its own ids */
    {
        uint8_t tid[16], pid[8], fl;
        assert_int_equal(parse(tp, tid, pid, &fl), 0);
        assert_memory_equal(tid, t.trace_id, 16);
        assert_memory_equal(pid, t.span_id, 8);
    }
    tt_trace_child(&c, &t);
    assert_memory_equal(c.trace_id, t.trace_id, 16);
    assert_memory_equal(c.parent_id, t.parent_id, 8);
    assert_memory_equal(c.link_id, t.span_id, 8);
    assert_memory_not_equal(c.span_id, t.span_id, 8);

    /* invalid: a new trace, sampled, no parent, the tracestate not kept */
    head_with(&h, badkv, 4);
    tt_trace_begin(&n, &h);
    tt_head_free(&h);
    assert_memory_not_equal(n.trace_id, t.trace_id, 16);
    static const uint8_t zero[16];
    assert_memory_equal(n.parent_id, zero, 8);
    assert_memory_not_equal(n.trace_id, zero, 16);
    assert_int_equal(n.flags, 1);
    assert_string_equal(n.state, "");
}

/* a streamed request: 3 token events 10 ms apart after a 50 ms TTFT */
static void request_of(struct tt_request *r)
{
    tt_request_init(r);
    r->t0 = 1000000000ull;
    r->start_wall_ns = 1700000000000000000ll;
    r->api = TT_API_OPENAI_CHAT;
    strcpy(r->model, "m1");
    strcpy(r->method, "POST");
    strcpy(r->path, "/v1/chat/completions");
    strcpy(r->request_id, "rid-1");
    r->status = 200;
    r->s.streaming = 1;
    r->s.terminal = 1;
    r->s.usage_input = 12;
    r->s.usage_output = 3;
    strcpy(r->s.finish_reason, "stop");
    r->ts[TT_TS_FIRST_EVENT] = r->t0 + 40000000;
    for (int i = 0; i < 3; i++)
        tt_request_token(r, r->t0 + 50000000 + (uint64_t)i * 10000000);
    r->ts[TT_TS_FIRST_TOKEN] = r->t0 + 50000000;
    r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = r->t0 + 50000000;
    r->ts[TT_TS_LAST_TOKEN] = r->t0 + 70000000;
    r->ts[TT_TS_RESPONSE_COMPLETE] = r->t0 + 71000000;
    r->ended = r->t0 + 72000000;
    tt_trace_begin(&r->trace, NULL);
}

static const struct tt_span_attr *find(const struct tt_span *sp, const char *k)
{
    for (unsigned i = 0; i < sp->nattrs; i++)
        if (strcmp(sp->a[i].key, k) == 0)
            return &sp->a[i];
    return NULL;
}

static void test_span_fill(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    struct tt_slo_result res = { .good = 1, .violated = 0 };
    struct tt_span *sp = malloc(sizeof(*sp));
    const struct tt_span_attr *a;
    (void)state;

    request_of(&r);
    tt_metrics_compute(&r, &m, NULL);
    assert_int_equal(tt_span_fill(sp, &r, &m, &res, "10.0.0.1", "8000"), 0);
    assert_int_equal(sp->name_len, 7);
    assert_memory_equal(sp->s + sp->name_off, "chat m1", 7);
    assert_int_equal(sp->start_ns, r.start_wall_ns);
    a = find(sp, "tokentap.time_to_first_token");
    assert_non_null(a);
    assert_true(a->d > 0.0499999 && a->d < 0.0500001);
    a = find(sp, "gen_ai.usage.input_tokens");
    assert_non_null(a);
    assert_int_equal(a->i, 12);
    a = find(sp, "server.port");
    assert_non_null(a);
    assert_int_equal(a->i, 8000);
    a = find(sp, "tokentap.slo.good");
    assert_non_null(a);
    assert_int_equal(a->i, 1);
    a = find(sp, "gen_ai.response.finish_reasons");
    assert_non_null(a);
    assert_int_equal(a->type, TT_A_STRLIST);
    assert_null(find(sp, "error.type"));
    assert_int_equal(sp->nevents, 3);
    assert_string_equal(sp->ev[0].name, "first_token");
    assert_int_equal(sp->ev[0].t, r.start_wall_ns + 50000000);

    /* an upstream error: error.type is its kind, the upstream's own type
     * aside (as tokentap_errors_total groups it) */
    r.status = 400;
    tt_request_set_error(&r, 400, "upstream_status", "upstream answered with an error status");
    tt_metrics_compute(&r, &m, NULL);
    assert_int_equal(tt_span_fill(sp, &r, &m, &res, "10.0.0.1", "8000"), 0);
    a = find(sp, "error.type");
    assert_non_null(a);
    assert_int_equal(a->slen, strlen("upstream_status"));
    assert_memory_equal(sp->s + a->soff, "upstream_status", a->slen);
    r.status = 200;
    r.err_type = NULL;
    r.err_code = 0;

    /* not sampled by the caller: nothing to export */
    r.trace.flags = 0;
    assert_int_equal(tt_span_fill(sp, &r, &m, NULL, "h", "1"), -1);
    r.trace.on = 0;
    r.trace.flags = 1;
    assert_int_equal(tt_span_fill(sp, &r, &m, NULL, "h", "1"), -1);
    tt_request_reset(&r);
    free(sp);
}

/* read a varint at <*p>; advances */
static uint64_t varint(const unsigned char **p)
{
    uint64_t v = 0;
    for (int s = 0;; s += 7) {
        unsigned char c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80))
            return v;
    }
}

static void test_encode_pb_lengths(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    struct tt_span *sp = malloc(sizeof(*sp));
    const struct tt_span *list[200];
    struct tt_obuf b = { 0 };
    const struct tt_otlp_resource res = { "svc", "1.2.3" };
    const unsigned char *p, *end;
    (void)state;

    request_of(&r);
    tt_metrics_compute(&r, &m, NULL);
    assert_int_equal(tt_span_fill(sp, &r, &m, NULL, "h", "1"), 0);
    for (int i = 0; i < 200; i++)
        list[i] = sp;
    /* 200 spans: the outer lengths need 2- and 3-byte varints */
    assert_int_equal(tt_otlp_encode_pb(&b, &res, list, 200), 0);
    p = b.p;
    end = b.p + b.len;
    uint64_t len;
    assert_int_equal(*p++, 0x0a);               /* field 1, length-delimited */
    len = varint(&p);
    assert_int_equal(len, (uint64_t)(end - p)); /* the rest, exactly */
    /* ResourceSpans: resource (1) then scope_spans (2) */
    assert_int_equal(*p++, 0x0a);
    p += varint(&p);
    assert_int_equal(*p++, 0x12);
    len = varint(&p);
    assert_int_equal(len, (uint64_t)(end - p));
    /* ScopeSpans: scope (1) then 200 spans (2) of equal length */
    assert_int_equal(*p++, 0x0a);
    p += varint(&p);
    uint64_t first = 0;
    for (int i = 0; i < 200; i++) {
        assert_int_equal(*p++, 0x12);
        uint64_t n = varint(&p);
        if (i == 0)
            first = n;
        assert_int_equal(n, first);
        /* a span starts with trace_id (1, 16 bytes) and span_id (2, 8) */
        assert_int_equal(p[0], 0x0a);
        assert_int_equal(p[1], 16);
        assert_memory_equal(p + 2, r.trace.trace_id, 16);
        assert_int_equal(p[18], 0x12);
        assert_int_equal(p[19], 8);
        p += n;
    }
    assert_ptr_equal(p, end);
    free(b.p);
    tt_request_reset(&r);
    free(sp);
}

static void test_encode_json(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    struct tt_span *sp = malloc(sizeof(*sp));
    const struct tt_span *list[1];
    struct tt_obuf b = { 0 };
    const struct tt_otlp_resource res = { "svc \"x\"", "1.2.3" };
    char hex[33], *txt;
    cJSON *doc, *span, *a;
    int found = 0;
    (void)state;

    request_of(&r);
    strcpy(r.model, "we\"ird\nmodel");
    tt_metrics_compute(&r, &m, NULL);
    assert_int_equal(tt_span_fill(sp, &r, &m, NULL, "h", "1"), 0);
    list[0] = sp;
    assert_int_equal(tt_otlp_encode_json(&b, &res, list, 1), 0);
    txt = strndup((const char *)b.p, b.len);
    doc = cJSON_Parse(txt);
    assert_non_null(doc);
    span = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "resourceSpans"), 0), "scopeSpans"), 0),
        "spans"), 0);
    assert_non_null(span);
    tt_hex(r.trace.trace_id, 16, hex);
    assert_string_equal(cJSON_GetObjectItem(span, "traceId")->valuestring, hex);
    assert_string_equal(cJSON_GetObjectItem(span, "name")->valuestring, "chat we\"ird\nmodel");
    assert_int_equal(cJSON_GetObjectItem(span, "kind")->valueint, 3);
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(span, "attributes")) {
        if (strcmp(cJSON_GetObjectItem(a, "key")->valuestring,
                   "gen_ai.usage.output_tokens") == 0) {
            /* int64 is a decimal string in OTLP/JSON */
            assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "value"),
                                                    "intValue")->valuestring, "3");
            found = 1;
        }
    }
    assert_true(found);
    cJSON_Delete(doc);
    free(txt);
    free(b.p);
    tt_request_reset(&r);
    free(sp);
}

static void test_retry_after(void **state)
{
    (void)state;
    assert_int_equal(tt_otlp_retry_after("3", 0), 3);
    assert_int_equal(tt_otlp_retry_after(" 0\r\n", 0), 0);
    assert_int_equal(tt_otlp_retry_after("soon", 0), -1);
    assert_int_equal(tt_otlp_retry_after("-1", 0), -1);
    /* an HTTP date, relative to now; a past one is 0 */
    assert_int_equal(tt_otlp_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", 40), 60);
    assert_int_equal(tt_otlp_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", 400), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traceparent_valid),
        cmocka_unit_test(test_traceparent_invalid),
        cmocka_unit_test(test_trace_begin_child_format),
        cmocka_unit_test(test_span_fill),
        cmocka_unit_test(test_encode_pb_lengths),
        cmocka_unit_test(test_encode_json),
        cmocka_unit_test(test_retry_after),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
