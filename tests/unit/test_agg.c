/*
 * Unit tests of metrics/agg.c: counters, histograms, the capped model
 * label, merging workers, /stats goodput, and the Prometheus text checked
 * by `promtool check metrics` (skipped when promtool is not installed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>

#include "metrics/agg.h"
#include "metrics/clock.h"
#include "metrics/hist.h"
#include "metrics/slo.h"

#define MS 1000000ull
#define T0 9000000000ull
#define PROMTOOL "/usr/bin/promtool"

/* token <i> of a streamed answer, read at <t> */
static void add_token(struct tt_request *r, unsigned i, uint64_t t)
{
    tt_request_token(r, t);
    if (i == 0)
        r->ts[TT_TS_FIRST_TOKEN] = r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = t;
    if (i == 1)
        r->ts[TT_TS_SECOND_TOKEN] = t;
    r->ts[TT_TS_LAST_TOKEN] = t;
    r->s.token_events++;
    r->s.answer_events++;
}

/* a streamed answer: first token at <ttft_ms>, <n> tokens <gap_ms> apart */
static void stream_req(struct tt_request *r, const char *model,
                       uint64_t ttft_ms, unsigned n, uint64_t gap_ms)
{
    tt_request_init(r);
    r->t0 = T0;
    r->start_wall_ns = 1;
    r->status = 200;
    r->api = TT_API_OPENAI_CHAT;
    snprintf(r->model, sizeof(r->model), "%s", model);
    r->s.streaming = 1;
    r->s.terminal = 1;
    r->s.usage_input = 100;
    for (unsigned i = 0; i < n; i++)
        add_token(r, i, T0 + (ttft_ms + i * gap_ms) * MS);
    r->ts[TT_TS_RESPONSE_COMPLETE] = r->ts[TT_TS_LAST_TOKEN] + MS;
}

static void observe(struct tt_agg *a, struct tt_request *r,
                    const struct tt_slo *slo, uint64_t now)
{
    struct tt_metric_values m;
    struct tt_slo_result res;
    tt_metrics_compute(r, &m, NULL);
    if (slo != NULL)
        tt_slo_judge(slo, &m, tt_request_outcome(r) != TT_OUT_OK, &res);
    assert_int_equal(tt_agg_observe_at(a, r, &m, slo ? &res : NULL, now), 0);
}

static char *text_of(struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);
    char *p = malloc(n + 1);
    evbuffer_remove(b, p, n);
    p[n] = '\0';
    return p;
}

/* /stats of <a> as seen at <now>, parsed */
static cJSON *stats_at(struct tt_agg *a, uint64_t now)
{
    struct evbuffer *b = evbuffer_new();
    assert_int_equal(tt_agg_stats_json_at(&a, 1, b, now), 0);
    char *js = text_of(b);
    evbuffer_free(b);
    cJSON *j = cJSON_Parse(js);
    free(js);
    assert_non_null(j);
    return j;
}

static char *prom(struct tt_agg *const *aggs, unsigned n)
{
    struct evbuffer *b = evbuffer_new();
    assert_int_equal(tt_agg_prometheus_many(aggs, n, b), 0);
    char *p = text_of(b);
    evbuffer_free(b);
    return p;
}

/* 1 when <line> (a whole line) is in <text> */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
    return 0;
}

/* run promtool on <text>; 1 ok, 0 rejected (output printed), -1 missing */
static int promtool_ok(const char *text)
{
    if (access(PROMTOOL, X_OK) != 0)
        return -1;
    char in[] = "/tmp/tt_prom_XXXXXX";
    int fd = mkstemp(in);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), PROMTOOL " check metrics < %s 2>&1", in);
    FILE *p = popen(cmd, "r");
    char out[4096];
    size_t k = fread(out, 1, sizeof(out) - 1, p);
    out[k] = '\0';
    int st = pclose(p);
    unlink(in);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        print_error("promtool: %s\n", out);
        return 0;
    }
    return 1;
}

static void test_goodput_ten_requests(void **state)
{
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_slo slo;
    char err[128];
    (void)state;

    assert_non_null(a);
    /* the windows run on the real monotonic clock from tt_agg_new */
    uint64_t base = tt_now_mono();
    assert_int_equal(tt_slo_parse("time_to_first_token:500", &slo, err, sizeof(err)), 0);
    for (int i = 0; i < 10; i++) {
        struct tt_request r;
        /* three miss the TTFT SLO of 500 ms, one exactly at the limit */
        uint64_t ttft = i < 3 ? 700 + (uint64_t)i : i == 3 ? 500 : 200;
        stream_req(&r, "llama", ttft, 20, 25);
        observe(a, &r, &slo, base + 10000 * MS);
        tt_request_reset(&r);
    }
    char *t = prom(&a, 1);
    assert_true(has_line(t, "tokentap_good_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"llama\"} 7"));
    assert_true(has_line(t, "tokentap_slo_violations_total{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",metric=\"time_to_first_token\"} 3"));
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",outcome=\"ok\"} 10"));
    assert_true(has_line(t, "tokentap_time_to_first_token_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",le=\"0.5\"} 7"));
    assert_true(has_line(t, "tokentap_time_to_first_token_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",le=\"+Inf\"} 10"));
    assert_true(has_line(t, "tokentap_time_to_first_token_seconds_count{upstream=\"primary\",api=\"openai.chat\",model=\"llama\"} 10"));
    /* 19 gaps of 25 ms per request, all in the le=0.025 bucket */
    assert_true(has_line(t, "tokentap_inter_chunk_latency_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",le=\"0.025\"} 190"));
    assert_true(has_line(t, "tokentap_inter_chunk_latency_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",le=\"0.02\"} 0"));
    assert_true(has_line(t, "tokentap_tokens_total{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",type=\"input\"} 1000"));
    assert_true(has_line(t, "tokentap_tokens_total{upstream=\"primary\",api=\"openai.chat\",model=\"llama\",type=\"output\"} 200"));
    assert_true(has_line(t, "tokentap_token_events_total{upstream=\"primary\",api=\"openai.chat\",model=\"llama\"} 200"));
    int ok = promtool_ok(t);
    free(t);
    if (ok == 0)
        fail_msg("promtool rejected the exposition");

    /* /stats: good 7 of 10, fraction 0.7, over the since-start window */
    struct evbuffer *b = evbuffer_new();
    assert_int_equal(tt_agg_stats_json_at(&a, 1, b, base + 10000 * MS), 0);
    char *js = text_of(b);
    evbuffer_free(b);
    cJSON *j = cJSON_Parse(js);
    assert_non_null(j);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "slo_configured")));
    cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "1m");
    assert_non_null(w);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "requests"), "ok")->valueint, 10);
    assert_int_equal(cJSON_GetObjectItem(w, "good_requests")->valueint, 7);
    assert_true(fabs(cJSON_GetObjectItem(w, "good_request_fraction")->valuedouble - 0.7) < 1e-12);
    double dur = cJSON_GetObjectItem(w, "duration_s")->valuedouble;
    assert_true(dur > 0);
    /* /stats rounds to 3 decimals, duration_s too */
    assert_true(fabs(cJSON_GetObjectItem(w, "goodput")->valuedouble - 7 / dur) <
                5e-4 + 7 * 5e-4 / (dur * (dur - 5e-4)));
    assert_true(fabs(cJSON_GetObjectItem(w, "request_throughput")->valuedouble - 10 / dur) <
                5e-4 + 10 * 5e-4 / (dur * (dur - 5e-4)));
    cJSON *ttft = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "metrics"), "time_to_first_token");
    assert_int_equal(cJSON_GetObjectItem(ttft, "count")->valueint, 10);
    assert_true(fabs(cJSON_GetObjectItem(ttft, "max")->valuedouble - 702) < 1e-9);
    assert_true(fabs(cJSON_GetObjectItem(ttft, "min")->valuedouble - 200) < 1e-9);
    assert_true(fabs(cJSON_GetObjectItem(ttft, "p50")->valuedouble - 200) <= 200 / 128.0);
    cJSON *itl = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "metrics"), "inter_token_latency");
    assert_true(fabs(cJSON_GetObjectItem(itl, "avg")->valuedouble - 25) < 1e-9);
    cJSON *icl = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "metrics"), "inter_chunk_latency");
    assert_int_equal(cJSON_GetObjectItem(icl, "count")->valueint, 190);
    /* an hour later the 1m window is empty, the total is not */
    cJSON_Delete(j);
    free(js);

    b = evbuffer_new();
    assert_int_equal(tt_agg_stats_json_at(&a, 1, b, base + 4000000 * MS), 0);
    js = text_of(b);
    evbuffer_free(b);
    j = cJSON_Parse(js);
    w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "1m");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "requests"), "total")->valueint, 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(w, "good_request_fraction")));
    w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "total");
    assert_int_equal(cJSON_GetObjectItem(w, "good_requests")->valueint, 7);
    cJSON_Delete(j);
    free(js);
    tt_agg_free(a);
}

/* errors by kind: summed over models, merged across workers, valid
 * exposition; a type that is no kind is tokentap's own (proxy_error) and
 * an upstream's own type its status kind: no "other", no unbounded label */
static void test_errors_by_type(void **state)
{
    struct tt_agg *a = tt_agg_new(NULL), *b = tt_agg_new(NULL);
    struct tt_agg *both[2] = { a, b };
    struct tt_request r;
    (void)state;

    stream_req(&r, "m1", 100, 2, 10);
    tt_request_set_error(&r, 502, "truncated", "x");
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    stream_req(&r, "m2", 100, 2, 10);
    tt_request_set_error(&r, 502, "truncated", "x");
    observe(b, &r, NULL, T0);
    tt_request_reset(&r);
    stream_req(&r, "m2", 100, 2, 10);
    tt_request_set_error(&r, 500, "a_type_added_later", "x");
    observe(b, &r, NULL, T0);
    tt_request_reset(&r);
    stream_req(&r, "m1", 100, 2, 10);
    r.status = 400;
    r.s.error = 1;
    snprintf(r.s.error_type, sizeof(r.s.error_type), "invalid_request_error");
    tt_request_set_error(&r, 400, r.s.error_type, "x");
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    stream_req(&r, "m1", 100, 2, 10);
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);

    char *t = prom(both, 2);
    assert_true(has_line(t, "tokentap_errors_total{upstream=\"primary\",api=\"openai.chat\",type=\"truncated\"} 2"));
    assert_true(has_line(t, "tokentap_errors_total{upstream=\"primary\",api=\"openai.chat\",type=\"proxy_error\"} 1"));
    assert_true(has_line(t, "tokentap_errors_total{upstream=\"primary\",api=\"openai.chat\",type=\"upstream_status\"} 1"));
    assert_null(strstr(t, "a_type_added_later"));
    assert_null(strstr(t, "invalid_request_error"));
    assert_null(strstr(t, "type=\"other\""));
    assert_null(strstr(t, "type=\"upstream_reset\""));    /* zero: not listed */
    int ok = promtool_ok(t);
    free(t);
    if (ok == 0)
        fail_msg("promtool rejected the exposition");
    tt_agg_free(a);
    tt_agg_free(b);
}

static void test_errors_and_no_slo(void **state)
{
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_request r;
    (void)state;

    stream_req(&r, "m", 100, 5, 10);
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    stream_req(&r, "m", 100, 5, 10);
    tt_request_set_error(&r, 502, "truncated", "stream ended early");
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    stream_req(&r, "m", 100, 5, 10);
    r.cancelled = 1;
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    tt_agg_inflight(a, +1);
    tt_agg_inflight(a, +1);
    tt_agg_inflight(a, -1);

    char *t = prom(&a, 1);
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"m\",outcome=\"ok\"} 1"));
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"m\",outcome=\"error\"} 1"));
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"m\",outcome=\"cancelled\"} 1"));
    /* only the ok request is in the latency histograms */
    assert_true(has_line(t, "tokentap_request_latency_seconds_count{upstream=\"primary\",api=\"openai.chat\",model=\"m\"} 1"));
    /* tokens of every request crossed the proxy */
    assert_true(has_line(t, "tokentap_token_events_total{upstream=\"primary\",api=\"openai.chat\",model=\"m\"} 15"));
    assert_true(has_line(t, "tokentap_inflight_requests 1"));
    assert_true(has_line(t, "tokentap_records_dropped_total 0"));
    assert_true(has_line(t, "tokentap_build_info{version=\"0.1.0\"} 1"));
    assert_null(strstr(t, "tokentap_good_requests_total{"));
    assert_null(strstr(t, "tokentap_slo_attainment_ratio{"));
    int ok = promtool_ok(t);
    free(t);
    if (ok == 0)
        fail_msg("promtool rejected the exposition");

    struct evbuffer *b = evbuffer_new();
    assert_int_equal(tt_agg_stats_json_at(&a, 1, b, T0 + MS), 0);
    char *js = text_of(b);
    evbuffer_free(b);
    cJSON *j = cJSON_Parse(js);
    cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "total");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "requests"), "error")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "requests"), "cancelled")->valueint, 1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(w, "goodput")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(w, "good_request_fraction")));
    cJSON_Delete(j);
    free(js);
    tt_agg_free(a);
}

static void test_model_cap_and_nasty_labels(void **state)
{
    struct tt_agg_opts o = { .model_cap = 32 };
    struct tt_agg *a = tt_agg_new(&o);
    struct tt_slo slo;
    char err[128], model[64];
    (void)state;

    assert_int_equal(tt_slo_parse("ttft:150 itl:20", &slo, err, sizeof(err)), 0);
    /* nasty values first, so they are under the cap */
    static const char *const nasty[] = {
        "quote\"d", "back\\slash", "new\nline", "bad\xff\xfeutf8", "",
        "ünïcødé-模型", "trailing\\", "__other__",
    };
    for (size_t i = 0; i < sizeof(nasty) / sizeof(nasty[0]); i++) {
        struct tt_request r;
        stream_req(&r, nasty[i], 100, 3, 10);
        observe(a, &r, &slo, T0);
        tt_request_reset(&r);
    }
    for (int i = 0; i < 100; i++) {
        struct tt_request r;
        snprintf(model, sizeof(model), "model-%03d", i);
        stream_req(&r, model, 100 + (uint64_t)i * 3, 4, 30);
        r.upstream_name = (i & 1) ? "primary" : "shadow \"b\"";
        observe(a, &r, &slo, T0);
        tt_request_reset(&r);
    }
    char *t = prom(&a, 1);
    /* 32 distinct model values, the rest folded into __other__ */
    int distinct = 0;
    for (int i = 0; i < 100; i++) {
        snprintf(model, sizeof(model), "model=\"model-%03d\"", i);
        distinct += strstr(t, model) != NULL;
    }
    assert_int_equal(distinct, 32 - 8);
    assert_non_null(strstr(t, "model=\"quote\\\"d\""));
    assert_non_null(strstr(t, "model=\"back\\\\slash\""));
    assert_non_null(strstr(t, "model=\"new\\nline\""));
    assert_non_null(strstr(t, "model=\"bad\xef\xbf\xbd\xef\xbf\xbdutf8\""));
    assert_non_null(strstr(t, "upstream=\"shadow \\\"b\\\"\""));
    /* 76 of the 100 went to __other__ (plus the client's own "__other__") */
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"__other__\",outcome=\"ok\"} 39"));
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"shadow \\\"b\\\"\",api=\"openai.chat\",model=\"__other__\",outcome=\"ok\"} 38"));
    int ok = promtool_ok(t);
    free(t);
    if (ok < 0)
        skip();
    if (ok == 0)
        fail_msg("promtool rejected the exposition");
    tt_agg_free(a);
}

static void test_merge_workers(void **state)
{
    struct tt_agg *w[3];
    struct tt_slo slo;
    char err[128];
    (void)state;

    assert_int_equal(tt_slo_parse("e2el:1000", &slo, err, sizeof(err)), 0);
    for (int k = 0; k < 3; k++) {
        w[k] = tt_agg_new(NULL);
        for (int i = 0; i < 5 + k; i++) {
            struct tt_request r;
            stream_req(&r, k == 2 ? "b" : "a", 100, 10, k == 2 ? 201 : 1 + 10 * (uint64_t)k);
            observe(w[k], &r, &slo, T0 + (uint64_t)i * MS);
            tt_request_reset(&r);
        }
    }
    char *t = prom(w, 3);
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"a\",outcome=\"ok\"} 11"));
    assert_true(has_line(t, "tokentap_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"b\",outcome=\"ok\"} 7"));
    /* worker 2's requests last 100 + 9 * 201 ms > 1 s: not good */
    assert_true(has_line(t, "tokentap_good_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"a\"} 11"));
    assert_true(has_line(t, "tokentap_good_requests_total{upstream=\"primary\",api=\"openai.chat\",model=\"b\"} 0"));
    assert_true(has_line(t, "tokentap_inter_chunk_latency_seconds_count{upstream=\"primary\",api=\"openai.chat\",model=\"a\"} 99"));
    int ok = promtool_ok(t);
    free(t);
    if (ok == 0)
        fail_msg("promtool rejected the exposition");

    struct evbuffer *b = evbuffer_new();
    assert_int_equal(tt_agg_stats_json_at(w, 3, b, T0 + 10 * MS), 0);
    char *js = text_of(b);
    evbuffer_free(b);
    cJSON *j = cJSON_Parse(js);
    cJSON *win = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "1m");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(win, "requests"), "ok")->valueint, 18);
    assert_int_equal(cJSON_GetObjectItem(win, "good_requests")->valueint, 11);
    cJSON_Delete(j);
    free(js);
    for (int k = 0; k < 3; k++)
        tt_agg_free(w[k]);
}

static void test_custom_buckets(void **state)
{
    static const double ttft[] = { 0.1, 0.2, 0.3 };
    static const double bad[] = { 0.2, 0.1 };
    struct tt_agg_opts o = { 0 };
    (void)state;

    o.buckets[TT_FAM_TTFT] = bad;
    o.nbuckets[TT_FAM_TTFT] = 2;
    assert_null(tt_agg_new(&o));
    o.buckets[TT_FAM_TTFT] = ttft;
    o.nbuckets[TT_FAM_TTFT] = 3;
    struct tt_agg *a = tt_agg_new(&o);
    assert_non_null(a);
    struct tt_request r;
    stream_req(&r, "m", 200, 2, 10);        /* exactly on a bound: le is inclusive */
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    char *t = prom(&a, 1);
    assert_true(has_line(t, "tokentap_time_to_first_token_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"m\",le=\"0.1\"} 0"));
    assert_true(has_line(t, "tokentap_time_to_first_token_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"m\",le=\"0.2\"} 1"));
    free(t);
    tt_agg_free(a);
}

/* the gaps of a long answer are bucketed before the aggregator's lock
 * (metrics/agg.c gaps_collect): the windows and the Prometheus family must
 * hold exactly what recording each gap would; 3,000 gaps spread over six
 * decades so that hundreds of distinct buckets are met */
static void test_many_gaps_batched_exactly(void **state)
{
    (void)state;
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_request *r = calloc(1, sizeof(*r));
    struct tt_hist ref;
    uint64_t t = T0 + 50 * MS, x = 12345, sum_us = 0;
    double sum_s = 0;
    unsigned n = 3001, le25 = 0;
    static double gap_s[3000];

    assert_non_null(a);
    assert_non_null(r);
    tt_hist_init(&ref);
    tt_request_init(r);
    r->t0 = T0;
    r->start_wall_ns = 1;
    r->status = 200;
    r->api = TT_API_OPENAI_CHAT;
    snprintf(r->model, sizeof(r->model), "long");
    r->s.streaming = 1;
    r->s.terminal = 1;
    r->s.usage_input = 10;
    for (unsigned i = 0; i < n; i++) {
        if (i > 0) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            /* 1 us .. ~1 s, log-spread: 2^(0..20) us times a 1..2 factor */
            uint64_t us = (1ull << ((x >> 59) % 21)) * (64 + ((x >> 40) & 63)) / 64;
            uint64_t ns = us * 1000 + ((x >> 20) % 1000);
            t += ns;
            tt_hist_record(&ref, (ns + 500) / 1000);
            sum_us += (ns + 500) / 1000;
            sum_s += (double)ns / 1e9;
            gap_s[i - 1] = (double)ns / 1e9;
            if ((double)ns / 1e9 <= 0.025)
                le25++;
        }
        add_token(r, i, t);
    }
    r->ts[TT_TS_RESPONSE_COMPLETE] = t + MS;
    observe(a, r, NULL, t + 2 * MS);

    cJSON *j = stats_at(a, t + 3 * MS);
    cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "total");
    cJSON *icl = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "metrics"), "inter_chunk_latency");
    assert_non_null(icl);
    assert_int_equal(cJSON_GetObjectItem(icl, "count")->valueint, n - 1);
    /* to the microsecond: /stats rounds ms to 3 decimals */
    assert_true(fabs(cJSON_GetObjectItem(icl, "avg")->valuedouble - (double)sum_us / (n - 1) / 1000.0) < 5e-4 + 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(icl, "min")->valuedouble - (double)ref.min / 1000.0) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(icl, "max")->valuedouble - (double)ref.max / 1000.0) < 1e-12);
    static const char *const pn[] = { "p50", "p90", "p95", "p99" };
    static const double ps[] = { 50, 90, 95, 99 };
    for (int i = 0; i < 4; i++)
        assert_true(fabs(cJSON_GetObjectItem(icl, pn[i])->valuedouble -
                         (double)tt_hist_percentile(&ref, ps[i]) / 1000.0) < 1e-12);
    cJSON_Delete(j);

    char *p = prom(&a, 1), line[256];
    snprintf(line, sizeof(line), "tokentap_inter_chunk_latency_seconds_count{upstream=\"primary\",api=\"openai.chat\",model=\"long\"} %u", n - 1);
    assert_true(has_line(p, line));
    snprintf(line, sizeof(line), "tokentap_inter_chunk_latency_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"long\",le=\"0.025\"} %u", le25);
    assert_true(has_line(p, line));
    {
        /* every bucket: the gaps at or under its bound, in any order of
         * arrival (they jump across buckets up and down) */
        static const char pre[] = "tokentap_inter_chunk_latency_seconds_bucket{upstream=\"primary\",api=\"openai.chat\",model=\"long\",le=\"";
        unsigned buckets = 0;
        for (const char *q = strstr(p, pre); q != NULL; q = strstr(q + 1, pre)) {
            const char *le = q + sizeof(pre) - 1;
            unsigned long got = strtoul(strstr(le, "} ") + 2, NULL, 10), want = 0;
            double bound = strncmp(le, "+Inf", 4) == 0 ? INFINITY : strtod(le, NULL);
            for (unsigned i = 0; i < n - 1; i++)
                want += gap_s[i] <= bound;
            assert_int_equal(got, want);
            buckets++;
        }
        assert_true(buckets >= 8);
    }
    {
        const char *q = strstr(p, "tokentap_inter_chunk_latency_seconds_sum{upstream=\"primary\",api=\"openai.chat\",model=\"long\"} ");
        assert_non_null(q);
        double got = strtod(strchr(q, '}') + 2, NULL);
        assert_true(fabs(got - sum_s) <= 1e-9 * sum_s);
    }
    assert_true(le25 > 100 && le25 < n - 100);      /* the check means something */
    free(p);
    tt_agg_free(a);

    /* the next request in this thread starts from empty counts: one gap of
     * 1 ms in a new aggregator is all its window holds */
    a = tt_agg_new(NULL);
    assert_non_null(a);
    t = T0 + 50 * MS;
    r->n_token_ts = 0;
    add_token(r, 0, t);
    add_token(r, 1, t + MS);
    r->ts[TT_TS_RESPONSE_COMPLETE] = t + 2 * MS;
    observe(a, r, NULL, t + 3 * MS);
    j = stats_at(a, t + 4 * MS);
    w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "windows"), "total");
    icl = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "metrics"), "inter_chunk_latency");
    assert_int_equal(cJSON_GetObjectItem(icl, "count")->valueint, 1);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(cJSON_GetObjectItem(icl, pn[i])->valuedouble - 1) <= 1 / 64.0);
    cJSON_Delete(j);
    free(r->token_ts);
    free(r);
    tt_agg_free(a);
}

static void test_promtool_present(void **state)
{
    (void)state;
    if (access(PROMTOOL, X_OK) != 0) {
        print_message("promtool not found at " PROMTOOL
                      ": Prometheus text not validated\n");
        skip();
    }
}

/* the histogram families take their names from the metric rows
 * (metrics/metric.h): exactly the names /metrics always had */
static void test_family_names(void **state)
{
    static const char *const want[] = {
        "tokentap_time_to_first_token_seconds",
        "tokentap_time_to_first_output_token_seconds",
        "tokentap_inter_token_latency_seconds",
        "tokentap_inter_chunk_latency_seconds",
        "tokentap_request_latency_seconds",
        "tokentap_input_sequence_length_tokens",
        "tokentap_output_sequence_length_tokens",
        "tokentap_server_prefill_seconds",
        "tokentap_client_time_to_first_token_seconds",
        "tokentap_client_time_to_first_output_token_seconds",
        "tokentap_client_request_latency_seconds",
        "tokentap_time_to_first_audio_seconds",
    };
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_request r;
    char line[160];
    (void)state;

    assert_int_equal(TT_FAM__COUNT, sizeof(want) / sizeof(want[0]));
    stream_req(&r, "m", 100, 3, 10);
    observe(a, &r, NULL, T0);
    tt_request_reset(&r);
    char *t = prom(&a, 1);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        snprintf(line, sizeof(line), "# TYPE %s histogram", want[i]);
        if (!has_line(t, line))
            fail_msg("missing: %s", line);
    }
    free(t);
    tt_agg_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promtool_present),
        cmocka_unit_test(test_family_names),
        cmocka_unit_test(test_goodput_ten_requests),
        cmocka_unit_test(test_errors_and_no_slo),
        cmocka_unit_test(test_errors_by_type),
        cmocka_unit_test(test_model_cap_and_nasty_labels),
        cmocka_unit_test(test_merge_workers),
        cmocka_unit_test(test_custom_buckets),
        cmocka_unit_test(test_many_gaps_batched_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
