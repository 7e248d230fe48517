/*
 * Shadow sampling (proxy/http/target.c): the fraction mirrored over many
 * requests lies within binomial bounds, a sample_key value always gets the
 * same decision, and only the configured APIs are mirrored.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "metrics/request.h"
#include "proxy/config/config.h"
#include "proxy/http/target.h"

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
    tt_targets_free(t, TT_MAX_TARGETS);     /* an earlier build's */
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
    tt_targets_free(t, TT_MAX_TARGETS);
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
    tt_targets_free(t, TT_MAX_TARGETS);
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
    tt_targets_free(t, TT_MAX_TARGETS);
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

/* check-config's dump of [shadow.NAME] sections loads back the same */
static void test_shadow_section_roundtrip(void **state)
{
    static struct tt_config c, d;
    char err[512], path[] = "/tmp/tt_test_target_XXXXXX";
    FILE *f;
    int fd;
    (void)state;

    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fputs("[upstream]\nupstream = http://127.0.0.1:1\n"
          "[shadow.cand]\nurl = https://10.0.0.2:8443/v2\nsample = 0.125\n"
          "sample_key = x-user-id\nmax_inflight = 7\npaths = openai.chat, tgi\n"
          "insecure = true\nconnect_timeout = 250ms\non_client_cancel = finish\n"
          "buffer_bytes = 64k\nset_header = Authorization: Bearer K\n"
          "set_header = X-Env: staging\nremove_header = Cookie\n"
          "[shadow.other]\nurl = http://10.0.0.3:80\n", f);
    fclose(f);
    tt_config_defaults(&c);
    assert_int_equal(tt_config_load(&c, path, err, sizeof(err)), 0);
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), 0);
    assert_int_equal(c.n_shadows, 2);
    assert_string_equal(c.shadows[0].name, "cand");
    assert_true(c.shadows[0].sample == 0.125);
    assert_int_equal(c.shadows[0].n_set, 2);
    assert_string_equal(c.shadows[0].set_header[1], "X-Env: staging");
    assert_string_equal(c.shadows[0].remove_header[0], "Cookie");
    assert_int_equal(c.shadows[0].on_client_cancel, TT_SHADOW_FINISH);
    assert_int_equal(c.shadows[0].connect_timeout_ms, 250);
    f = fopen(path, "w");
    assert_int_equal(tt_config_dump(&c, f), 0);
    fclose(f);
    tt_config_defaults(&d);
    assert_int_equal(tt_config_load(&d, path, err, sizeof(err)), 0);
    assert_int_equal(d.n_shadows, 2);
    assert_memory_equal(&c.shadows[0], &d.shadows[0], sizeof(c.shadows[0]));
    assert_memory_equal(&c.shadows[1], &d.shadows[1], sizeof(c.shadows[1]));
    /* a key twice in one section is an error, with file and line */
    f = fopen(path, "w");
    fputs("[upstream]\nupstream = http://127.0.0.1:1\n[shadow.a]\nurl = http://x:1\n"
          "sample = 0.5\nurl = http://y:2\n", f);
    fclose(f);
    tt_config_defaults(&d);
    assert_int_equal(tt_config_load(&d, path, err, sizeof(err)), -1);
    assert_non_null(strstr(err, ":6: key 'url': duplicate in [shadow.a] (first set on line 4)"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fraction_within_binomial_bounds),
        cmocka_unit_test(test_key_decision_is_stable),
        cmocka_unit_test(test_edges_and_paths),
        cmocka_unit_test(test_shadow_config_errors),
        cmocka_unit_test(test_shadow_section_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
