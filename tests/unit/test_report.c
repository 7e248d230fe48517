/*
 * Unit tests for the statistics (metrics/stats.c) and the report's
 * record parsing (metrics/report/report_set.c) and timeslices
 * (metrics/report/report_slice.c), against hand-computed answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "metrics/report/report_set.h"
#include "metrics/report/report_slice.h"
#include "metrics/stats.h"

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

/* numpy.percentile([10, 20, ..., 100], p) for the report's p values */
static void test_percentile_linear(void **state)
{
    float v[10];
    (void)state;
    for (int i = 0; i < 10; i++)
        v[i] = (float)(10 * (i + 1));
    NEAR(tt_pct_linear_f(v, 10, 1), 10.9, 1e-9);
    NEAR(tt_pct_linear_f(v, 10, 5), 14.5, 1e-9);
    NEAR(tt_pct_linear_f(v, 10, 25), 32.5, 1e-9);
    NEAR(tt_pct_linear_f(v, 10, 50), 55.0, 1e-9);
    NEAR(tt_pct_linear_f(v, 10, 90), 91.0, 1e-9);
    NEAR(tt_pct_linear_f(v, 10, 99), 99.1, 1e-9);
    NEAR(tt_pct_linear_f(v, 10, 0), 10.0, 0);
    NEAR(tt_pct_linear_f(v, 10, 100), 100.0, 0);
    /* one sample: every percentile is it; none: NaN */
    NEAR(tt_pct_linear_f(v, 1, 99), 10.0, 0);
    assert_true(isnan(tt_pct_linear_f(v, 0, 50)));
    /* even count median: mean of the middle two */
    double d[4] = { 1, 2, 4, 8 };
    NEAR(tt_pct_linear_d(d, 4, 50), 3.0, 1e-12);
    /* h = 0.75 * 3 = 2.25: 4 + 0.25 * 4 */
    NEAR(tt_pct_linear_d(d, 4, 75), 5.0, 1e-12);
}

static void test_sort(void **state)
{
    float v[6] = { 3, -1, 2.5f, 7, 0, 2.5f };
    double d[5] = { 5, 1, 4, 2, 3 };
    (void)state;
    tt_sort_floats(v, 6);
    for (int i = 1; i < 6; i++)
        assert_true(v[i - 1] <= v[i]);
    tt_sort_doubles(d, 5);
    for (int i = 0; i < 5; i++)
        NEAR(d[i], i + 1, 0);
}

/* population std (numpy np.std, ddof = 0), stable for a large offset */
static void test_moments(void **state)
{
    struct tt_moments m;
    (void)state;
    tt_moments_init(&m);
    assert_true(tt_moments_std(&m) == 0);
    for (int i = 1; i <= 10; i++)
        tt_moments_add(&m, 10.0 * i);
    assert_int_equal(m.n, 10);
    NEAR(m.sum, 550, 1e-9);
    NEAR(m.mean, 55, 1e-9);
    NEAR(m.min, 10, 0);
    NEAR(m.max, 100, 0);
    NEAR(tt_moments_std(&m), sqrt(825.0), 1e-9);

    /* 1e9 + {1, 2, 3, 4}: variance 1.25 exactly, no cancellation */
    tt_moments_init(&m);
    for (int i = 1; i <= 4; i++)
        tt_moments_add(&m, 1e9 + i);
    NEAR(tt_moments_std(&m), sqrt(1.25), 1e-6);
}

/* pXX needs 100 / min(XX, 100 - XX) samples */
static void test_low_sample_rule(void **state)
{
    (void)state;
    assert_true(tt_pct_low_sample(99, 99));
    assert_false(tt_pct_low_sample(100, 99));
    assert_true(tt_pct_low_sample(99, 1));
    assert_false(tt_pct_low_sample(100, 1));
    assert_true(tt_pct_low_sample(19, 95));
    assert_false(tt_pct_low_sample(20, 95));
    assert_true(tt_pct_low_sample(9, 90));
    assert_false(tt_pct_low_sample(10, 90));
    assert_true(tt_pct_low_sample(3, 75));
    assert_false(tt_pct_low_sample(4, 25));
    assert_true(tt_pct_low_sample(1, 50));
    assert_false(tt_pct_low_sample(2, 50));
    assert_true(tt_pct_low_sample(0, 50));
}

/* Wilson score interval, hand-computed with z = 1.959964 */
static void test_wilson(void **state)
{
    double lo, hi;
    (void)state;
    /* 5 of 11: centre 0.466308, half 0.253590 */
    tt_wilson(5, 11, TT_Z95, &lo, &hi);
    NEAR(lo, 0.2127127, 1e-6);
    NEAR(hi, 0.7199085, 1e-6);
    /* 8 of 10 */
    tt_wilson(8, 10, TT_Z95, &lo, &hi);
    NEAR(lo, 0.4901624, 1e-6);
    NEAR(hi, 0.9433178, 1e-6);
    /* edges: 0 of 20 -> [0, 0.161125]; 20 of 20 -> [0.838875, 1] */
    tt_wilson(0, 20, TT_Z95, &lo, &hi);
    NEAR(lo, 0, 0);
    NEAR(hi, 0.1611251, 1e-6);
    tt_wilson(20, 20, TT_Z95, &lo, &hi);
    NEAR(lo, 0.8388749, 1e-6);
    NEAR(hi, 1, 0);
    tt_wilson(0, 0, TT_Z95, &lo, &hi);
    NEAR(lo, 0, 0);
    NEAR(hi, 1, 0);
}

/* order-statistic interval for the median */
static void test_median_ci(void **state)
{
    uint64_t lo, hi;
    double cov;
    (void)state;
    /* n = 5: P(X <= 0) = 1/32 > 2.5 %: no interval */
    assert_int_equal(tt_median_ci(5, 0.95, &lo, &hi, &cov), -1);
    /* n = 6: r = 1, [x(1), x(6)], coverage 1 - 2/64 */
    assert_int_equal(tt_median_ci(6, 0.95, &lo, &hi, &cov), 0);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 5);
    NEAR(cov, 1 - 2.0 / 64, 1e-12);
    /* n = 10: P(X<=1) = 11/1024 <= 2.5 % < P(X<=2) = 56/1024: r = 2 */
    assert_int_equal(tt_median_ci(10, 0.95, &lo, &hi, &cov), 0);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 8);
    NEAR(cov, 1 - 22.0 / 1024, 1e-12);
    /* n = 100: the textbook r = 40 (0-based 39 and 60), coverage 0.9648 */
    assert_int_equal(tt_median_ci(100, 0.95, &lo, &hi, &cov), 0);
    assert_int_equal(lo, 39);
    assert_int_equal(hi, 60);
    NEAR(cov, 0.9648, 1e-4);
    /* large n stays symmetric and near n/2 -+ 0.98 sqrt(n) */
    assert_int_equal(tt_median_ci(1000000, 0.95, &lo, &hi, &cov), 0);
    assert_true(lo > 499000 && lo < 499100);
    assert_int_equal(lo + hi, 999999);
    assert_true(cov >= 0.95 && cov < 0.951);
}

static void test_parse_time(void **state)
{
    int64_t ns;
    (void)state;
    assert_int_equal(tt_rpt_parse_time("1767225600", &ns), 0);
    assert_true(ns == 1767225600000000000LL);
    assert_int_equal(tt_rpt_parse_time("1767225600.25", &ns), 0);
    assert_true(ns == 1767225600250000000LL);
    assert_int_equal(tt_rpt_parse_time("2026-01-01T00:00:00Z", &ns), 0);
    assert_true(ns == 1767225600000000000LL);
    assert_int_equal(tt_rpt_parse_time("2026-01-01T01:00:00.5+01:00", &ns), 0);
    assert_true(ns == 1767225600500000000LL);
    assert_int_equal(tt_rpt_parse_time("2025-12-31T19:00:00-05:00", &ns), 0);
    assert_true(ns == 1767225600000000000LL);
    assert_int_equal(tt_rpt_parse_time("yesterday", &ns), -1);
    assert_int_equal(tt_rpt_parse_time("2026-01-01", &ns), -1);
    assert_int_equal(tt_rpt_parse_time("2026-01-01T00:00:00", &ns), -1);
    assert_int_equal(tt_rpt_parse_time("", &ns), -1);
}

static void add(struct tt_rset *s, const char *line)
{
    tt_rset_add_line(s, line, strlen(line));
}

/* records to a set: metrics, errors, verdicts, units, malformed lines */
static void test_set_records(void **state)
{
    struct tt_rset s;
    struct tt_rsummary sum;
    (void)state;
    tt_rset_init(&s, "t", 100, NULL, NULL);
    add(&s, "{\"schema\":\"tokentap.record/1\",\"metadata\":{\"x_request_id\":\"a\","
            "\"request_start_ns\":1767225600000000001,\"request_end_ns\":1767225601000000001,"
            "\"token_count_source\":\"usage\",\"slo\":{\"good\":true}},"
            "\"metrics\":{\"time_to_first_token\":{\"value\":0.1,\"unit\":\"s\"},"
            "\"output_token_throughput_per_user\":{\"value\":50,\"unit\":\"tokens/sec/user\"},"
            "\"inter_chunk_latency\":{\"value\":[1,2,3],\"unit\":\"ms\"}},\"error\":null}");
    add(&s, "{\"schema\":\"tokentap.record/1\",\"metadata\":{\"x_request_id\":\"b\","
            "\"request_start_ns\":1767225600500000000,\"request_end_ns\":1767225602000000001,"
            "\"token_count_source\":null},"
            "\"metrics\":{\"time_to_first_token\":{\"value\":300,\"unit\":\"ms\"}},"
            "\"error\":{\"code\":502,\"type\":\"upstream_reset\",\"message\":\"x\"}}");
    add(&s, "{\"metadata\":{\"was_cancelled\":true,\"request_start_ns\":1767225600000000001},\"metrics\":{}}");
    add(&s, "not json");
    add(&s, "   ");
    assert_int_equal(s.lines, 4);
    assert_int_equal(s.blank, 1);
    assert_int_equal(s.malformed, 1);
    assert_int_equal(s.records, 3);
    assert_int_equal(s.valid, 1);
    assert_int_equal(s.errors, 2);         /* the cancelled one included (499) */
    assert_int_equal(s.cancelled, 1);
    assert_int_equal(s.judged, 1);
    assert_int_equal(s.good, 1);
    /* exact ns kept beyond double precision */
    assert_true(s.first_start_ns == 1767225600000000001LL);
    assert_true(s.last_end_ns == 1767225602000000001LL);
    NEAR(tt_rset_duration_s(&s), 2.0, 1e-12);
    /* seconds converted to ms; the error's TTFT left out */
    tt_rset_summary(&s, 0, &sum);
    assert_int_equal(sum.count, 1);
    NEAR(sum.avg, 100, 1e-9);
    assert_true(sum.exact);
    /* ICL pooled */
    tt_rset_summary(&s, TT_M__COUNT, &sum);
    assert_int_equal(sum.count, 3);
    NEAR(sum.pct[4], 2.0, 1e-9);
    assert_int_equal(s.errtypes.n, 2);
    assert_string_equal(s.errtypes.e[0].name, "upstream_reset");
    assert_string_equal(s.errtypes.e[1].name, "cancelled");   /* an error of its own type */
    assert_int_equal(s.errtypes.e[1].code, 499);
    assert_int_equal(s.sources.n, 1);          /* valid records only */
    /* every record's upstream, before the filters: (none) for all three */
    assert_int_equal(s.upstreams.n, 1);
    assert_string_equal(s.upstreams.e[0].name, "(none)");
    assert_int_equal(s.upstreams.e[0].count, 3);
    assert_int_equal(s.nrows, 3);
    assert_true(s.rows[0].id == tt_rpt_id_hash("a"));
    tt_rset_free(&s);
}

/* --goodput re-judges from the rebuilt metrics, filters apply first */
static void test_set_judge_and_filter(void **state)
{
    struct tt_rset s;
    struct tt_rjudge j;
    struct tt_rfilter f = { .model = "m", .api = NULL, .upstream = NULL,
                            .status = -1, .since_ns = INT64_MIN,
                            .until_ns = INT64_MAX };
    char err[128];
    (void)state;
    memset(&j, 0, sizeof(j));
    assert_int_equal(tt_slo_parse("ttft:200", &j.slo, err, sizeof(err)), 0);
    j.have_spec = 1;
    tt_rset_init(&s, "t", 100, &f, &j);
    add(&s, "{\"metadata\":{\"model\":\"m\",\"slo\":{\"good\":false}},\"metrics\":{\"time_to_first_token\":{\"value\":150,\"unit\":\"ms\"}}}");
    add(&s, "{\"metadata\":{\"model\":\"m\"},\"metrics\":{\"time_to_first_token\":{\"value\":250,\"unit\":\"ms\"}}}");
    add(&s, "{\"metadata\":{\"model\":\"m\"},\"metrics\":{}}");
    add(&s, "{\"metadata\":{\"model\":\"x\"},\"metrics\":{\"time_to_first_token\":{\"value\":1,\"unit\":\"ms\"}}}");
    assert_int_equal(s.filtered, 1);
    assert_int_equal(s.records, 3);
    assert_int_equal(s.judged, 3);
    assert_int_equal(s.good, 1);        /* 150 <= 200; 250 no; absent no */
    tt_rset_free(&s);
}

/* beyond max_exact: histogram percentiles within 0.78 %, exact moments */
static void test_set_histogram_fallback(void **state)
{
    struct tt_rset s;
    struct tt_rsummary sum;
    char line[256];
    (void)state;
    tt_rset_init(&s, "t", 10, NULL, NULL);
    for (int i = 0; i < 1000; i++) {
        snprintf(line, sizeof(line),
                 "{\"metadata\":{},\"metrics\":{\"request_latency\":{\"value\":%d,\"unit\":\"ms\"}}}",
                 1000 + i);
        add(&s, line);
    }
    assert_int_equal(s.nrows, 10);
    assert_int_equal(s.rows_dropped, 990);
    tt_rset_summary(&s, 3, &sum);
    assert_false(sum.exact);
    assert_int_equal(sum.count, 1000);
    NEAR(sum.avg, 1499.5, 1e-9);
    NEAR(sum.min, 1000, 0);
    NEAR(sum.max, 1999, 0);
    for (int i = 0; i < TT_RPT_NPCT; i++) {
        double exact = 1000 + tt_rpt_pcts[i] / 100 * 999;
        assert_true(fabs(sum.pct[i] - exact) <= exact * 0.0079 + 1);
    }
    tt_rset_free(&s);
}


static void test_parse_duration(void **state)
{
    int64_t ns;
    (void)state;
    assert_int_equal(tt_rpt_parse_duration("5m", &ns), 0);
    assert_true(ns == 300000000000LL);
    assert_int_equal(tt_rpt_parse_duration("300", &ns), 0);
    assert_true(ns == 300000000000LL);
    assert_int_equal(tt_rpt_parse_duration("2.5s", &ns), 0);
    assert_true(ns == 2500000000LL);
    assert_int_equal(tt_rpt_parse_duration("1h", &ns), 0);
    assert_true(ns == 3600000000000LL);
    assert_int_equal(tt_rpt_parse_duration("1d", &ns), 0);
    assert_int_equal(tt_rpt_parse_duration("250ms", &ns), 0);
    assert_true(ns == 250000000LL);
    const char *bad[] = { "", "0", "-1m", "+5m", "5x", "m", "5 m", "0.5ms", "367d", "nan", "inf" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(tt_rpt_parse_duration(bad[i], &ns), -1);
}

/* one record line starting at <start_s> seconds after T0 */
static void add_at(struct tt_rset *s, double start_s, double ttft, int err, int good)
{
    char line[512];
    long long st = 1767225600000000000LL + (long long)(start_s * 1e9);
    snprintf(line, sizeof(line),
             "{\"metadata\":{\"request_start_ns\":%lld,\"request_end_ns\":%lld,"
             "\"slo\":{\"good\":%s}},\"metrics\":{\"time_to_first_token\":{\"value\":%g,\"unit\":\"ms\"},"
             "\"output_sequence_length\":{\"value\":10,\"unit\":\"tokens\"}},\"error\":%s}",
             st, st + 500000000LL, good ? "true" : "false", ttft,
             err ? "{\"code\":502,\"type\":\"x\",\"message\":\"m\"}" : "null");
    tt_rset_add_line(s, line, strlen(line));
}

/* 10 s slices aligned to the clock: membership by start, covered time,
 * empty slices kept, per-slice percentiles */
static void test_slices(void **state)
{
    struct tt_rset s;
    struct tt_rslices sl;
    char err[256];
    (void)state;
    tt_rset_init(&s, "t", 100, NULL, NULL);
    add_at(&s, 2, 100, 0, 1);
    add_at(&s, 4, 300, 0, 0);
    add_at(&s, 9.999, 200, 1, 0);
    add_at(&s, 25, 50, 0, 1);               /* ends at 25.5 s */
    assert_int_equal(tt_rslices_build(&s, 10000000000LL, 0, &sl, err, sizeof(err)), 0);
    assert_int_equal(sl.n, 3);
    assert_true(sl.s[0].start_ns == 1767225600000000000LL);
    assert_int_equal(sl.s[0].records, 3);
    assert_int_equal(sl.s[0].valid, 2);
    assert_int_equal(sl.s[0].errors, 1);
    assert_int_equal(sl.s[0].good, 1);
    NEAR(sl.s[0].covered_s, 8.0, 1e-9);     /* from the first start, 2 s */
    NEAR(tt_rslice_req_tput(&sl.s[0]), 2 / 8.0, 1e-12);
    NEAR(tt_rslice_out_tput(&sl.s[0]), 20 / 8.0, 1e-12);
    NEAR(tt_rslice_good_frac(&sl.s[0], sl.have_good), 1 / 3.0, 1e-12);
    assert_int_equal(sl.s[0].m[TT_M_TTFT].count, 2);
    NEAR(sl.s[0].m[TT_M_TTFT].pct[4], 200.0, 1e-6);   /* p50 of 100, 300 */
    assert_int_equal(sl.s[1].records, 0);
    assert_int_equal(sl.s[1].m[TT_M_TTFT].count, 0);
    NEAR(sl.s[1].covered_s, 10.0, 1e-9);
    NEAR(sl.s[2].covered_s, 5.5, 1e-9);     /* to the last end, 25.5 s */
    tt_rslices_free(&sl);
    /* 1 ms slices: 23,001 of them, allowed; 200 s more is past the cap */
    assert_int_equal(tt_rslices_build(&s, 1000000LL, 0, &sl, err, sizeof(err)), 0);
    assert_int_equal(sl.n, 23000 + 1);
    tt_rslices_free(&sl);
    add_at(&s, 200, 50, 0, 1);
    assert_int_equal(tt_rslices_build(&s, 1000000LL, 0, &sl, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "at most"));
    tt_rset_free(&s);
}

/* the report's rows come from the metric rows' ranks (metrics/metric.h):
 * the order the report always had, every metric once */
static void test_metric_order(void **state)
{
    static const int want[TT_M_NAMED] = {
        TT_M_TTFT, TT_M_TTST, TT_M_TTFO, TT_M_REQUEST_LATENCY, TT_M_ITL, TT_M_ICL,
        TT_M_OTPS_USER, TT_M_ISL, TT_M_OSL, TT_M_OUTPUT_TOKENS,
        TT_M_REASONING_TOKENS, TT_M_REASONING_LATENCY,
        TT_M_CLIENT_TTFT, TT_M_CLIENT_TTFO, TT_M_CLIENT_LATENCY, TT_M_DELIVERY_DELAY,
        TT_M_CACHED_INPUT, TT_M_SERVER_QUEUE, TT_M_SERVER_PREFILL, TT_M_TTFT_OUTSIDE,
        TT_M_TTFA,
    };
    (void)state;
    for (int k = 0; k < TT_M_NAMED; k++)
        assert_int_equal(tt_metric_order[k], want[k]);
    assert_string_equal(tt_metric_tag[TT_M_ICL], "inter_chunk_latency");
    assert_string_equal(tt_metric_header[TT_M_OTPS_USER], "Output Token Throughput Per User");
    assert_true(tt_metric_higher[TT_M_OTPS_USER] && !tt_metric_higher[TT_M_TTFT]);
    assert_null(tt_metric_abbr[TT_M_CACHED_INPUT]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile_linear),
        cmocka_unit_test(test_metric_order),
        cmocka_unit_test(test_sort),
        cmocka_unit_test(test_moments),
        cmocka_unit_test(test_low_sample_rule),
        cmocka_unit_test(test_wilson),
        cmocka_unit_test(test_median_ci),
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_set_records),
        cmocka_unit_test(test_set_judge_and_filter),
        cmocka_unit_test(test_set_histogram_fallback),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
