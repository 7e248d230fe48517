/*
 * Unit tests for metrics/slo.c: goodput spec parsing (AIPerf syntax,
 * aliases, errors) and the judge (inclusive limits, missing metrics,
 * throughput >=, error requests), plus per-model SLO sets.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/slo.h"

static char err[2048];

static void parse_ok(const char *spec, struct tt_slo *slo)
{
    err[0] = '\0';
    if (tt_slo_parse(spec, slo, err, sizeof(err)) != 0)
        fail_msg("'%s' should parse, got: %s", spec, err);
}

static void parse_err(const char *spec, const char *want)
{
    struct tt_slo slo;

    err[0] = '\0';
    assert_int_equal(tt_slo_parse(spec, &slo, err, sizeof(err)), -1);
    assert_string_equal(err, want);
}

static void test_parse_basic(void **state)
{
    struct tt_slo slo;

    (void)state;
    parse_ok("time_to_first_token:500 inter_token_latency:50", &slo);
    assert_int_equal(slo.n, 2);
    assert_int_equal(slo.c[0].metric, TT_M_TTFT);
    assert_true(slo.c[0].limit == 500.0);
    assert_int_equal(slo.c[0].ge, 0);
    assert_int_equal(slo.c[1].metric, TT_M_ITL);
    assert_true(slo.c[1].limit == 50.0);

    parse_ok("", &slo);
    assert_int_equal(slo.n, 0);
    parse_ok(" \t \n", &slo);
    assert_int_equal(slo.n, 0);
    parse_ok("\t request_latency:0.5  \t", &slo);
    assert_int_equal(slo.n, 1);
    assert_int_equal(slo.c[0].metric, TT_M_REQUEST_LATENCY);
    assert_true(slo.c[0].limit == 0.5);
    parse_ok("ttft:.5 e2el:1e3 itl:0", &slo);
    assert_true(slo.c[0].limit == 0.5);
    assert_true(slo.c[1].limit == 1000.0);
    assert_true(slo.c[2].limit == 0.0);
}

static void test_parse_aliases(void **state)
{
    static const struct { const char *tag; int id; } cases[] = {
        { "ttft", TT_M_TTFT }, { "ttfo", TT_M_TTFO }, { "itl", TT_M_ITL },
        { "tpot", TT_M_ITL }, { "e2el", TT_M_REQUEST_LATENCY },
    };
    struct tt_slo slo;
    char spec[64];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(spec, sizeof(spec), "%s:7", cases[i].tag);
        parse_ok(spec, &slo);
        assert_int_equal(slo.n, 1);
        assert_int_equal(slo.c[0].metric, cases[i].id);
        assert_true(slo.c[0].limit == 7.0);
    }
}

static void test_parse_every_tag(void **state)
{
    struct tt_slo slo;
    char spec[1024];
    size_t off = 0;

    (void)state;
    for (int i = 0; i < TT_M__COUNT; i++)
        off += (size_t)snprintf(spec + off, sizeof(spec) - off, "%s:%d ",
                                tt_metric_tag[i], i + 1);
    parse_ok(spec, &slo);
    assert_int_equal(slo.n, TT_M__COUNT);
    for (int i = 0; i < TT_M__COUNT; i++) {
        assert_int_equal(slo.c[i].metric, i);
        assert_true(slo.c[i].limit == i + 1);
        assert_int_equal(slo.c[i].ge, i == TT_M_OTPS_USER);
    }
    assert_int_equal(tt_metric_by_tag("output_token_throughput_per_user"),
                     TT_M_OTPS_USER);
    assert_int_equal(tt_metric_by_tag("ttft"), -1);
    assert_string_equal(tt_metric_unit[TT_M_OTPS_USER], "tokens/sec/user");
    assert_string_equal(tt_metric_unit[TT_M_TTFT], "ms");
    assert_string_equal(tt_metric_unit[TT_M_OSL], "tokens");
}

/* the hint of a time metric's value that is not a number */
#define ND " or a duration (500, 500ms, 0.5s)"

/* a time limit takes the config's duration units; a bare number is ms */
static void test_parse_duration_units(void **state)
{
    struct tt_slo slo;
    (void)state;
    parse_ok("ttft:500ms itl:0.5s e2el:2m ttfo:1500us output_token_throughput_per_user:20 input_sequence_length:100", &slo);
    assert_int_equal(slo.n, 6);
    assert_int_equal(slo.c[0].metric, TT_M_TTFT);
    assert_true(slo.c[0].limit == 500);
    assert_int_equal(slo.c[1].metric, TT_M_ITL);
    assert_true(slo.c[1].limit == 500);
    assert_int_equal(slo.c[2].metric, TT_M_REQUEST_LATENCY);
    assert_true(slo.c[2].limit == 120000);
    assert_int_equal(slo.c[3].metric, TT_M_TTFO);
    assert_true(fabs(slo.c[3].limit - 1.5) < 1e-12);
    assert_true(slo.c[4].limit == 20);          /* throughput: plain */
    assert_true(slo.c[5].limit == 100);
    parse_ok("ttft:500 itl:1e3ms", &slo);       /* bare: ms */
    assert_true(slo.c[0].limit == 500);
    assert_true(slo.c[1].limit == 1000);
    /* the same units as the config's durations */
    assert_true(tt_duration_unit_ms("s", 1) == 1000);
    assert_true(tt_duration_unit_ms("ms", 2) == 1);
    assert_true(tt_duration_unit_ms("us", 2) == 0.001);
    assert_true(tt_duration_unit_ms("h", 1) == 0);
}

static void test_parse_errors(void **state)
{
    (void)state;
    err[0] = '\0';
    {
        struct tt_slo slo;
        assert_int_equal(tt_slo_parse("ttfx:5", &slo, err, sizeof(err)), -1);
        assert_string_equal(err,
            "goodput: unknown metric 'ttfx' (known: time_to_first_token, "
            "time_to_second_token, time_to_first_output_token, request_latency, "
            "inter_token_latency, output_token_throughput_per_user, "
            "input_sequence_length, output_sequence_length, output_token_count, "
            "reasoning_token_count, reasoning_latency, cached_input_tokens, server_prefill_ms, server_queue_ms, ttft_outside_server_ms, client_time_to_first_token, client_time_to_first_output_token, client_request_latency, delivery_delay, time_to_first_audio; aliases ttft, ttfo, itl, "
            "tpot, e2el)");
    }
    parse_err("ttft:-5", "goodput: 'ttft:-5': negative value");
    parse_err("itl:-0.5", "goodput: 'itl:-0.5': negative value");
    parse_err("ttft:abc", "goodput: 'ttft:abc': value is not a number" ND);
    parse_err("ttft:5parsecs", "goodput: 'ttft:5parsecs': value is not a number" ND);
    parse_err("ttft:ms", "goodput: 'ttft:ms': value is not a number" ND);
    parse_err("output_token_throughput_per_user:5s",
              "goodput: 'output_token_throughput_per_user:5s': "
              "output_token_throughput_per_user is in tokens/sec/user: a plain number, no unit");
    parse_err("input_sequence_length:5ms", "goodput: 'input_sequence_length:5ms': input_sequence_length is in tokens: "
              "a plain number, no unit");
    parse_err("input_sequence_length:x", "goodput: 'input_sequence_length:x': value is not a number");
    parse_err("ttft:0x10", "goodput: 'ttft:0x10': value is not a number" ND);
    parse_err("ttft:inf", "goodput: 'ttft:inf': value is not a number" ND);
    parse_err("ttft:nan", "goodput: 'ttft:nan': value is not a number" ND);
    parse_err("ttft:+5", "goodput: 'ttft:+5': value is not a number" ND);
    parse_err("ttft:1e", "goodput: 'ttft:1e': value is not a number" ND);
    parse_err("ttft:.", "goodput: 'ttft:.': value is not a number" ND);
    parse_err("ttft:1:2", "goodput: 'ttft:1:2': value is not a number" ND);
    parse_err("ttft:1e999", "goodput: 'ttft:1e999': value out of range");
    parse_err("ttft", "goodput: 'ttft': missing value (expected TAG:VALUE)");
    parse_err("ttft:", "goodput: 'ttft:': missing value (expected TAG:VALUE)");
    parse_err("ttft: 5", "goodput: 'ttft:': missing value (expected TAG:VALUE)");
    parse_err(":5", "goodput: ':5': missing metric name (expected TAG:VALUE)");
    parse_err("TTFT:5", "goodput: unknown metric 'TTFT' (known: "
              "time_to_first_token, time_to_second_token, "
              "time_to_first_output_token, request_latency, inter_token_latency, "
              "output_token_throughput_per_user, input_sequence_length, "
              "output_sequence_length, output_token_count, reasoning_token_count, "
              "reasoning_latency, cached_input_tokens, server_prefill_ms, server_queue_ms, ttft_outside_server_ms, client_time_to_first_token, client_time_to_first_output_token, client_request_latency, delivery_delay, time_to_first_audio; aliases ttft, ttfo, itl, tpot, e2el)");
    parse_err("ttft:1 time_to_first_token:2",
              "goodput: duplicate metric 'time_to_first_token' ('ttft:1' and "
              "'time_to_first_token:2')");
    parse_err("itl:1 tpot:2",
              "goodput: duplicate metric 'inter_token_latency' ('itl:1' and "
              "'tpot:2')");
    parse_err("e2el:1 ttft:3 request_latency:2",
              "goodput: duplicate metric 'request_latency' ('e2el:1' and "
              "'request_latency:2')");
    /* an error anywhere fails the whole spec */
    parse_err("ttft:1 itl:x", "goodput: 'itl:x': value is not a number" ND);
}

static void test_format_roundtrip(void **state)
{
    struct tt_slo a, b;
    char buf[512];

    (void)state;
    parse_ok("ttft:500 tpot:12.5 output_token_throughput_per_user:20", &a);
    assert_true(tt_slo_format(&a, buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "time_to_first_token:500 inter_token_latency:12.5 "
                        "output_token_throughput_per_user:20");
    parse_ok(buf, &b);
    assert_memory_equal(&a, &b, sizeof(a));
    parse_ok("", &a);
    assert_int_equal(tt_slo_format(&a, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
}

static struct tt_metric_values metrics(void)
{
    struct tt_metric_values m;

    memset(&m, 0, sizeof(m));
    m.v[TT_M_TTFT] = 500;
    m.v[TT_M_ITL] = 50;
    m.v[TT_M_OTPS_USER] = 20;
    m.v[TT_M_REQUEST_LATENCY] = 3000;
    m.present = 1u << TT_M_TTFT | 1u << TT_M_ITL | 1u << TT_M_OTPS_USER |
                1u << TT_M_REQUEST_LATENCY;
    return m;
}

static void test_judge_inclusive(void **state)
{
    struct tt_slo slo;
    struct tt_metric_values m = metrics();
    struct tt_slo_result r;

    (void)state;
    parse_ok("ttft:500 itl:50", &slo);
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 1);
    assert_int_equal(r.violated, 0);

    m.v[TT_M_TTFT] = 500.001;
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 1u << TT_M_TTFT);

    m.v[TT_M_ITL] = 51;
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 1u << TT_M_TTFT | 1u << TT_M_ITL);
}

static void test_judge_throughput_ge(void **state)
{
    struct tt_slo slo;
    struct tt_metric_values m = metrics();
    struct tt_slo_result r;

    (void)state;
    parse_ok("output_token_throughput_per_user:20", &slo);
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 1);
    m.v[TT_M_OTPS_USER] = 100;
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 1);
    m.v[TT_M_OTPS_USER] = 19.99;
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 1u << TT_M_OTPS_USER);
}

static void test_judge_missing_metric(void **state)
{
    struct tt_slo slo;
    struct tt_metric_values m = metrics();
    struct tt_slo_result r;

    (void)state;
    /* ITL of a one-token answer / TTFT of a non-streaming request */
    m.present &= ~(1u << TT_M_ITL);
    parse_ok("ttft:1000 itl:1000", &slo);
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 1u << TT_M_ITL);

    /* a missing metric nobody constrains does not matter */
    parse_ok("e2el:5000", &slo);
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 1);

    /* NaN never meets a limit */
    m.v[TT_M_REQUEST_LATENCY] = NAN;
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 1u << TT_M_REQUEST_LATENCY);
}

static void test_judge_error_request(void **state)
{
    struct tt_slo slo;
    struct tt_metric_values m = metrics();
    struct tt_slo_result r;

    (void)state;
    parse_ok("ttft:1000 itl:1000", &slo);
    tt_slo_judge(&slo, &m, 1, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 0);

    /* missing metrics of a failed request are not extra violations ... */
    m.present &= ~(1u << TT_M_ITL);
    tt_slo_judge(&slo, &m, 1, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 0);

    /* ... but a metric it has and misses is */
    m.v[TT_M_TTFT] = 2000;
    tt_slo_judge(&slo, &m, 1, &r);
    assert_int_equal(r.good, 0);
    assert_int_equal(r.violated, 1u << TT_M_TTFT);
}

static void test_judge_no_constraints(void **state)
{
    struct tt_slo slo;
    struct tt_metric_values m;
    struct tt_slo_result r;

    (void)state;
    memset(&m, 0, sizeof(m));
    parse_ok("", &slo);
    tt_slo_judge(&slo, &m, 0, &r);
    assert_int_equal(r.good, 1);
    tt_slo_judge(&slo, &m, 1, &r);
    assert_int_equal(r.good, 0);
    tt_slo_judge(NULL, &m, 0, &r);
    assert_int_equal(r.good, 1);
    assert_int_equal(r.violated, 0);
}

static void test_slo_set(void **state)
{
    struct tt_slo_set set;
    const struct tt_slo *s;
    char longname[200];

    (void)state;
    tt_slo_set_init(&set);
    s = tt_slo_for_model(&set, "x");
    assert_int_equal(s->n, 0);

    assert_int_equal(tt_slo_set_add(&set, NULL, "ttft:500", err, sizeof(err)), 0);
    assert_int_equal(tt_slo_set_add(&set, "llama3:8b", "ttft:100 itl:10", err,
                                    sizeof(err)), 0);
    assert_int_equal(tt_slo_set_add(&set, "org/big", "e2el:9000", err,
                                    sizeof(err)), 0);

    s = tt_slo_for_model(&set, "llama3:8b");
    assert_int_equal(s->n, 2);
    assert_true(s->c[0].limit == 100);
    s = tt_slo_for_model(&set, "org/big");
    assert_int_equal(s->c[0].metric, TT_M_REQUEST_LATENCY);
    s = tt_slo_for_model(&set, "other");
    assert_int_equal(s->n, 1);
    assert_true(s->c[0].limit == 500);
    s = tt_slo_for_model(&set, NULL);
    assert_true(s == &set.dflt);
    s = tt_slo_for_model(&set, "LLAMA3:8B");       /* exact match only */
    assert_true(s == &set.dflt);

    assert_int_equal(tt_slo_set_add(&set, "org/big", "ttft:1", err,
                                    sizeof(err)), -1);
    assert_string_equal(err, "goodput: model 'org/big' already has an SLO");
    assert_int_equal(tt_slo_set_add(&set, "m", "ttft:x", err, sizeof(err)), -1);
    assert_string_equal(err, "goodput: 'ttft:x': value is not a number" ND);
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(tt_slo_set_add(&set, longname, "ttft:1", err,
                                    sizeof(err)), -1);
    assert_string_equal(err, "goodput: model name too long (max 127 bytes)");

    for (int i = 2; i < TT_SLO_MODELS_MAX; i++) {
        char name[16];
        snprintf(name, sizeof(name), "m%d", i);
        assert_int_equal(tt_slo_set_add(&set, name, "ttft:1", err,
                                        sizeof(err)), 0);
    }
    assert_int_equal(tt_slo_set_add(&set, "one-more", "ttft:1", err,
                                    sizeof(err)), -1);
    assert_string_equal(err, "goodput: too many per-model SLOs (max 16)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_basic),
        cmocka_unit_test(test_parse_aliases),
        cmocka_unit_test(test_parse_every_tag),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_duration_units),
        cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_judge_inclusive),
        cmocka_unit_test(test_judge_throughput_ge),
        cmocka_unit_test(test_judge_missing_metric),
        cmocka_unit_test(test_judge_error_request),
        cmocka_unit_test(test_judge_no_constraints),
        cmocka_unit_test(test_slo_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
