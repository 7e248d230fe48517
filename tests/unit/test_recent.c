/*
 * Unit tests of metrics/recent.c and what /stats shows of it: the ring keeps
 * the newest requests in order, the slowest of the last minute, a capped
 * number of token offsets, redacted paths and record-shaped entries; rings
 * of several aggregators merge; window histograms come as bucket arrays
 * and errors by kind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>

#include "metrics/agg.h"
#include "metrics/clock.h"
#include "metrics/recent.h"
#include "metrics/slo.h"

#define MS 1000000ull
#define T0 9000000000ull

/* a streamed answer: first token at <ttft_ms>, <n> tokens 1 ms apart */
static void stream_req(struct tt_request *r, const char *id, uint64_t ttft_ms,
                       unsigned n)
{
    tt_request_init(r);
    r->t0 = T0;
    r->start_wall_ns = 1700000000000000000ll;
    r->status = 200;
    r->api = TT_API_OPENAI_CHAT;
    r->upstream_name = "primary";
    snprintf(r->request_id, sizeof(r->request_id), "%s", id);
    snprintf(r->model, sizeof(r->model), "m");
    snprintf(r->path, sizeof(r->path), "/v1/chat/completions?alt=sse&key=SECRET1&x=1");
    r->s.streaming = 1;
    r->s.terminal = 1;
    for (unsigned i = 0; i < n; i++) {
        uint64_t t = T0 + (ttft_ms + i) * MS;
        tt_request_token(r, t);
        if (i == 0)
            r->ts[TT_TS_FIRST_TOKEN] = r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = t;
        r->ts[TT_TS_LAST_TOKEN] = t;
        r->s.token_events++;
        r->s.answer_events++;
    }
    r->ts[TT_TS_RESPONSE_COMPLETE] = r->ts[TT_TS_LAST_TOKEN];
}

static cJSON *stats(struct tt_agg *const *a, unsigned n, uint64_t now)
{
    struct evbuffer *b = evbuffer_new();
    assert_int_equal(tt_agg_stats_json_at(a, n, b, now), 0);
    size_t len = evbuffer_get_length(b);
    char *s = malloc(len + 1);
    evbuffer_remove(b, s, len);
    s[len] = '\0';
    assert_null(strstr(s, "SECRET1"));
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    free(s);
    evbuffer_free(b);
    return j;
}

static const char *rid(const cJSON *e)
{
    const cJSON *md = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "record"), "metadata");
    return cJSON_GetStringValue(cJSON_GetObjectItem(md, "x_request_id"));
}

static void observe(struct tt_agg *a, struct tt_request *r, uint64_t now)
{
    struct tt_metric_values m;
    tt_metrics_compute(r, &m, NULL);
    assert_int_equal(tt_agg_observe_at(a, r, &m, NULL, now), 0);
    tt_request_reset(r);
}

/* 70 requests 1 ms apart, "req-0".. "req-69": request 5 is by far the
 * slowest, the rest grow slowly; with <errors>, each failed with an error
 * type named by the upstream ("overloaded_error" for request 5) */
static void seventy(struct tt_agg *a, int errors)
{
    struct tt_request r;
    char id[32];

    for (unsigned i = 0; i < 70; i++) {
        snprintf(id, sizeof(id), "req-%u", i);
        stream_req(&r, id, i == 5 ? 5000 : 10 + i, 3);
        if (errors) {
            snprintf(r.s.error_type, sizeof(r.s.error_type), "%s",
                     i == 5 ? "overloaded_error" : "other_error");
            tt_request_set_error(&r, 529, r.s.error_type, "busy");
        }
        observe(a, &r, T0 + (10000 + i) * MS);
    }
}

/* 70 requests: the newest 64 newest first; the 8 slowest; latency order */
static void test_ring_newest_and_slowest(void **state)
{
    (void)state;
    struct tt_agg *a = tt_agg_new(NULL);

    seventy(a, 0);
    cJSON *j = stats(&a, 1, T0 + 20000 * MS);
    cJSON *rc = cJSON_GetObjectItem(j, "recent");
    cJSON *rq = cJSON_GetObjectItem(rc, "requests");
    cJSON *sl = cJSON_GetObjectItem(rc, "slowest");
    assert_int_equal(cJSON_GetArraySize(rq), TT_RECENT_ENTRIES);
    assert_string_equal(rid(cJSON_GetArrayItem(rq, 0)), "req-69");
    assert_string_equal(rid(cJSON_GetArrayItem(rq, 63)), "req-6");
    assert_int_equal(cJSON_GetArraySize(sl), TT_RECENT_SLOW);
    assert_string_equal(rid(cJSON_GetArrayItem(sl, 0)), "req-5");
    assert_string_equal(rid(cJSON_GetArrayItem(sl, 1)), "req-69");
    assert_string_equal(rid(cJSON_GetArrayItem(sl, 7)), "req-63");

    /* the entry: record-shaped, path redacted, token offsets in ms */
    cJSON *e = cJSON_GetArrayItem(rq, 0);
    cJSON *md = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "record"), "metadata");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(md, "path")),
                        "/v1/chat/completions?alt=sse&key=REDACTED&x=1");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "upstream")), "primary");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(md, "upstream")), "primary");
    cJSON *tm = cJSON_GetObjectItem(e, "token_us");
    assert_int_equal(cJSON_GetArraySize(tm), 3);
    assert_true(cJSON_GetArrayItem(tm, 0)->valuedouble == 79000.0);
    assert_true(cJSON_GetArrayItem(tm, 2)->valuedouble == 81000.0);
    assert_null(cJSON_GetObjectItem(e, "done_ns"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "record"), "metrics"),
                                    "inter_chunk_latency"));
    cJSON_Delete(j);

    /* a minute later the slowest list is empty, the recent ring is not */
    j = stats(&a, 1, T0 + (10070 * MS) + TT_RECENT_SLOW_NS);
    rc = cJSON_GetObjectItem(j, "recent");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rc, "slowest")), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rc, "requests")), TT_RECENT_ENTRIES);
    cJSON_Delete(j);
    tt_agg_free(a);
}

/* token offsets are capped, the count is not */
static void test_token_cap(void **state)
{
    (void)state;
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_request r;
    stream_req(&r, "long", 10, TT_RECENT_TOKENS + 100);
    observe(a, &r, T0 + 1000 * MS);
    cJSON *j = stats(&a, 1, T0 + 2000 * MS);
    cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "recent"), "requests"), 0);
    assert_int_equal(cJSON_GetObjectItem(e, "token_events")->valueint, TT_RECENT_TOKENS + 100);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e, "token_us")), TT_RECENT_TOKENS);
    cJSON_Delete(j);
    tt_agg_free(a);
}

/* three aggregators (workers): rings merge newest first */
static void test_rings_merge(void **state)
{
    (void)state;
    struct tt_agg *w[3] = { tt_agg_new(NULL), tt_agg_new(NULL), tt_agg_new(NULL) };
    struct tt_request r;
    char id[32];
    for (unsigned i = 0; i < 30; i++) {
        snprintf(id, sizeof(id), "w%u-%u", i % 3, i);
        stream_req(&r, id, 10, 2);
        observe(w[i % 3], &r, T0 + (1000 + i) * MS);
    }
    cJSON *j = stats(w, 3, T0 + 2000 * MS);
    cJSON *rq = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "recent"), "requests");
    assert_int_equal(cJSON_GetArraySize(rq), 30);
    assert_string_equal(rid(cJSON_GetArrayItem(rq, 0)), "w2-29");
    assert_string_equal(rid(cJSON_GetArrayItem(rq, 1)), "w1-28");
    assert_string_equal(rid(cJSON_GetArrayItem(rq, 29)), "w0-0");
    cJSON_Delete(j);
    for (int i = 0; i < 3; i++)
        tt_agg_free(w[i]);
}

/* bucket arrays add up to the count; errors by kind; the SLO objectives */
static void test_buckets_errors_slo(void **state)
{
    (void)state;
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_request r;
    struct tt_slo_set set;
    char err[128];

    tt_slo_set_init(&set);
    assert_int_equal(tt_slo_set_add(&set, NULL, "time_to_first_token:300", err, sizeof(err)), 0);
    tt_agg_set_slos(a, &set);
    for (unsigned i = 0; i < 10; i++) {
        stream_req(&r, "ok", 10 + 40 * i, 2);
        observe(a, &r, T0 + 1000 * MS);
    }
    stream_req(&r, "e1", 10, 0);
    tt_request_set_error(&r, 504, "upstream_connect_timeout", "x");
    observe(a, &r, T0 + 1000 * MS);
    stream_req(&r, "e2", 10, 0);
    tt_request_set_error(&r, 400, "bad_request", "x");
    observe(a, &r, T0 + 1000 * MS);
    stream_req(&r, "e3", 10, 0);
    r.s.error = 1;
    snprintf(r.s.error_type, sizeof(r.s.error_type), "overloaded_error");
    observe(a, &r, T0 + 1000 * MS);

    cJSON *j = stats(&a, 1, T0 + 2000 * MS);
    cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "1m");
    cJSON *ttft = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "metrics"), "time_to_first_token");
    cJSON *bk = cJSON_GetObjectItem(ttft, "buckets"), *b;
    double sum = 0, prev_hi = 0;
    cJSON_ArrayForEach(b, bk) {
        double lo = cJSON_GetArrayItem(b, 0)->valuedouble, hi = cJSON_GetArrayItem(b, 1)->valuedouble;
        assert_true(lo >= prev_hi && hi > lo && hi - lo <= lo / 8 + 0.065);
        prev_hi = hi;
        sum += cJSON_GetArrayItem(b, 2)->valuedouble;
    }
    assert_true(sum == 10);
    cJSON *first = cJSON_GetArrayItem(bk, 0);
    assert_true(cJSON_GetArrayItem(first, 0)->valuedouble <= 10.0
                && cJSON_GetArrayItem(first, 1)->valuedouble > 10.0);

    cJSON *ek = cJSON_GetObjectItem(w, "errors");
    assert_int_equal(cJSON_GetArraySize(ek), 3);
    assert_int_equal(cJSON_GetObjectItem(ek, "upstream_connect_timeout")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(ek, "bad_request")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(ek, "stream_error")->valueint, 1);

    cJSON *slo = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "slo"), "default");
    assert_true(cJSON_GetObjectItem(slo, "time_to_first_token")->valuedouble == 300);
    cJSON_Delete(j);

    tt_agg_set_slos(a, NULL);
    j = stats(&a, 1, T0 + 2000 * MS);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "slo")));
    cJSON_Delete(j);
    tt_agg_free(a);
}

/* an aggregator that never saw a request has an empty ring and no memory for it */
static void test_empty(void **state)
{
    (void)state;
    struct tt_agg *a = tt_agg_new(NULL);
    cJSON *j = stats(&a, 1, T0);
    cJSON *rc = cJSON_GetObjectItem(j, "recent");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rc, "requests")), 0);
    assert_int_equal(cJSON_GetObjectItem(rc, "capacity")->valueint, TT_RECENT_ENTRIES);
    assert_true(tt_recent_bytes() < 400 * 1024);
    cJSON_Delete(j);
    tt_agg_free(a);
}

/* a slow request whose error type the upstream named (text inside the
 * request) keeps it in the slowest list after its place in the ring of
 * recent requests is taken by newer ones */
static void test_slowest_keeps_its_own_error_type(void **state)
{
    (void)state;
    struct tt_agg *a = tt_agg_new(NULL);

    seventy(a, 1);
    cJSON *j = stats(&a, 1, T0 + 20000 * MS);
    cJSON *sl = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "recent"), "slowest");
    cJSON *e = cJSON_GetArrayItem(sl, 0);
    assert_string_equal(rid(e), "req-5");
    cJSON *err = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "record"), "error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(err, "type")),
                        "overloaded_error");
    cJSON_Delete(j);
    tt_agg_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_newest_and_slowest),
        cmocka_unit_test(test_slowest_keeps_its_own_error_type),
        cmocka_unit_test(test_token_cap),
        cmocka_unit_test(test_rings_merge),
        cmocka_unit_test(test_buckets_errors_slo),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
