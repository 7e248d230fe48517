/*
 * Shadow sampling (proxy/target.c): the fraction mirrored over many
 * requests lies within binomial bounds, a sample_key value always gets the
 * same decision, and only the configured APIs are mirrored.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/request.h"
#include "proxy/config.h"
#include "proxy/target.h"

static void build(struct tt_config *c, struct tt_target *t, const char *sample,
                  const char *key, const char *paths)
{
    char err[512];
    char *argv[] = { "--upstream", "http://127.0.0.1:1", "--shadow", "cand=http://127.0.0.1:2",
                     "--shadow-set", NULL, "--shadow-set", NULL, "--shadow-set", NULL };
    char s1[64], s2[96], s3[300];
    int argc = 6;

    snprintf(s1, sizeof(s1), "cand.sample=%s", sample);
    argv[5] = s1;
    if (key) {
        snprintf(s2, sizeof(s2), "cand.sample_key=%s", key);
        argv[argc++] = "--shadow-set";
        argv[argc++] = s2;
    }
    if (paths) {
        snprintf(s3, sizeof(s3), "cand.paths=%s", paths);
        argv[argc++] = "--shadow-set";
        argv[argc++] = s3;
    }
    tt_config_defaults(c);
    assert_int_equal(tt_config_args(c, argc, argv, err, sizeof(err)), 0);
    assert_int_equal(tt_config_check(c, err, sizeof(err)), 0);
    assert_int_equal(tt_targets_build(c, t, err, sizeof(err)), 2);
}

/* 10,000 random draws at 0.3: within 5 standard deviations of 3,000 */
static void test_fraction_within_binomial_bounds(void **state)
{
    static struct tt_config c;
    static struct tt_target t[TT_MAX_TARGETS];
    int n = 10000, k = 0;
    double mean = n * 0.3, sd = sqrt(n * 0.3 * 0.7);
    (void)state;

    build(&c, t, "0.3", NULL, NULL);
    for (int i = 0; i < n; i++)
        k += tt_target_samples(&t[1], TT_API_OPENAI_CHAT, NULL, 0);
    printf("# 10000 requests at sample 0.3: %d mirrored (bounds %.0f..%.0f)\n", k,
           mean - 5 * sd, mean + 5 * sd);
    assert_true(fabs(k - mean) <= 5 * sd);
}

/* with a sample_key, 10,000 distinct values give the fraction, and each
 * value's decision never changes */
static void test_key_decision_is_stable(void **state)
{
    static struct tt_config c;
    static struct tt_target t[TT_MAX_TARGETS];
    int n = 10000, k = 0;
    double mean = n * 0.25, sd = sqrt(n * 0.25 * 0.75);
    char key[32];
    (void)state;

    build(&c, t, "0.25", "X-User", NULL);
    for (int i = 0; i < n; i++) {
        int len = snprintf(key, sizeof(key), "user-%d", i);
        int d = tt_target_samples(&t[1], TT_API_OPENAI_CHAT, key, (size_t)len);
        for (int rep = 0; rep < 3; rep++)
            assert_int_equal(tt_target_samples(&t[1], TT_API_OPENAI_CHAT, key, (size_t)len), d);
        k += d;
    }
    printf("# 10000 keys at sample 0.25: %d mirrored (bounds %.0f..%.0f)\n", k,
           mean - 5 * sd, mean + 5 * sd);
    assert_true(fabs(k - mean) <= 5 * sd);
}

static void test_edges_and_paths(void **state)
{
    static struct tt_config c;
    static struct tt_target t[TT_MAX_TARGETS];
    (void)state;

    build(&c, t, "1", NULL, NULL);
    assert_int_equal(tt_target_samples(&t[1], TT_API_OPENAI_CHAT, NULL, 0), 1);
    assert_int_equal(tt_target_samples(&t[1], TT_API_OTHER, NULL, 0), 0);
    build(&c, t, "0", NULL, NULL);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(tt_target_samples(&t[1], TT_API_OPENAI_CHAT, NULL, 0), 0);
    build(&c, t, "1", NULL, "openai.chat, anthropic.messages");
    assert_int_equal(tt_target_samples(&t[1], TT_API_OPENAI_CHAT, NULL, 0), 1);
    assert_int_equal(tt_target_samples(&t[1], TT_API_ANTHROPIC, NULL, 0), 1);
    assert_int_equal(tt_target_samples(&t[1], TT_API_GEMINI, NULL, 0), 0);
    /* the primary is never "sampled" */
    assert_int_equal(tt_target_samples(&t[0], TT_API_OPENAI_CHAT, NULL, 0), 0);
}

static void test_shadow_config_errors(void **state)
{
    static struct tt_config c;
    char err[512];
    char *bad_name[] = { "--upstream", "http://x:1", "--shadow", "primary=http://y:2" };
    char *bad_frac[] = { "--upstream", "http://x:1", "--shadow", "a=http://y:2",
                         "--shadow-set", "a.sample=1.5" };
    char *bad_key[] = { "--upstream", "http://x:1", "--shadow", "a=http://y:2",
                        "--shadow-set", "a.nope=1" };
    char *no_url[] = { "--upstream", "http://x:1", "--shadow-set", "a.sample=0.5" };
    (void)state;

    tt_config_defaults(&c);
    assert_int_equal(tt_config_args(&c, 4, bad_name, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--shadow: shadow name 'primary'"));
    tt_config_defaults(&c);
    assert_int_equal(tt_config_args(&c, 6, bad_frac, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "expected a fraction from 0 to 1"));
    tt_config_defaults(&c);
    assert_int_equal(tt_config_args(&c, 6, bad_key, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown shadow key 'nope'"));
    tt_config_defaults(&c);
    assert_int_equal(tt_config_args(&c, 4, no_url, err, sizeof(err)), 0);
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "shadow 'a': url required (--shadow a=URL)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fraction_within_binomial_bounds),
        cmocka_unit_test(test_key_decision_is_stable),
        cmocka_unit_test(test_edges_and_paths),
        cmocka_unit_test(test_shadow_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
