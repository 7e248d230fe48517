/*
 * Unit tests of metrics/delay.c: each hand-off lands in the bucket a scan
 * of the bounds gives (the bit-length table that starts the scan is
 * checked at every bound, every power of two and random values), the sum
 * adds up, and the exposition is cumulative per direction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "metrics/delay.h"
#include "tests/unit/rng.h"

static const uint64_t ref_bounds[TT_DELAY_NB] = {
    1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000,
    1000000, 2000000, 5000000, 10000000, 25000000, 50000000, 100000000,
    250000000, 1000000000,
};

/* the bucket a plain scan gives: the first bound >= v, or +Inf */
static unsigned ref_bucket(uint64_t v)
{
    unsigned i = 0;
    while (i < TT_DELAY_NB && v > ref_bounds[i])
        i++;
    return i;
}

/* observe <v> alone and return the one bucket that counted it */
static unsigned bucket_of(uint64_t v)
{
    static struct tt_delay d;
    unsigned i, hit = TT_DELAY_NB + 1, n = 0;

    memset(&d, 0, sizeof(d));
    tt_delay_observe(&d, TT_DELAY_RESPONSE, 1, v + 1);
    for (i = 0; i <= TT_DELAY_NB; i++) {
        if (d.b[TT_DELAY_RESPONSE][i] != 0) {
            hit = i;
            n++;
        }
        assert_int_equal(d.b[TT_DELAY_REQUEST][i], 0);
    }
    assert_int_equal(n, 1);
    assert_int_equal(d.sum_ns[TT_DELAY_RESPONSE], v);
    return hit;
}

static void check(uint64_t v)
{
    unsigned got = bucket_of(v), want = ref_bucket(v);
    if (got != want)
        fail_msg("%llu ns: bucket %u, want %u", (unsigned long long)v, got, want);
}

static void test_delay_buckets(void **state)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    unsigned i, k;

    (void)state;
    check(0);
    for (i = 0; i < TT_DELAY_NB; i++) {
        check(ref_bounds[i] - 1);
        check(ref_bounds[i]);
        check(ref_bounds[i] + 1);
    }
    for (k = 0; k < 63; k++) {
        uint64_t p = 1ull << k;
        check(p - 1);
        check(p);
        check(p + 1);
        check(2 * p - 1);
    }
    check(UINT64_MAX - 1);
    for (i = 0; i < 100000; i++) {
        uint64_t r = test_xorshift(&s);
        check(r >> (r % 64));           /* every bit length */
    }
}

static void test_delay_unread_and_backwards(void **state)
{
    struct tt_delay d;
    unsigned i;

    (void)state;
    memset(&d, 0, sizeof(d));
    tt_delay_observe(&d, TT_DELAY_REQUEST, 0, 5000);    /* never stamped */
    tt_delay_observe(NULL, TT_DELAY_REQUEST, 1, 5000);
    for (i = 0; i <= TT_DELAY_NB; i++)
        assert_int_equal(d.b[TT_DELAY_REQUEST][i], 0);
    tt_delay_observe(&d, TT_DELAY_REQUEST, 9000, 5000); /* clock behind: 0 */
    assert_int_equal(d.b[TT_DELAY_REQUEST][0], 1);
    assert_int_equal(d.sum_ns[TT_DELAY_REQUEST], 0);
}

static void test_delay_expose(void **state)
{
    static struct tt_delay a, b;
    struct tt_delay *const ds[2] = { &a, &b };
    struct evbuffer *out = evbuffer_new();
    char *text;
    size_t n;

    (void)state;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    tt_delay_observe(&a, TT_DELAY_RESPONSE, 1, 1 + 3000);      /* le 5e-06 */
    tt_delay_observe(&b, TT_DELAY_RESPONSE, 1, 1 + 30000);     /* le 5e-05 */
    tt_delay_observe(&b, TT_DELAY_REQUEST, 1, 1 + 2000000000); /* +Inf */
    tt_delay_expose(ds, 2, out);
    n = evbuffer_get_length(out);
    evbuffer_add(out, "", 1);
    text = (char *)evbuffer_pullup(out, -1);
    assert_non_null(text);
    assert_int_equal(strlen(text), n);
    assert_non_null(strstr(text, "# TYPE tokentap_proxy_delay_seconds histogram\n"));
    assert_non_null(strstr(text, "{direction=\"response\",le=\"2e-06\"} 0\n"));
    assert_non_null(strstr(text, "{direction=\"response\",le=\"5e-06\"} 1\n"));
    assert_non_null(strstr(text, "{direction=\"response\",le=\"2e-05\"} 1\n"));
    assert_non_null(strstr(text, "{direction=\"response\",le=\"5e-05\"} 2\n"));
    assert_non_null(strstr(text, "{direction=\"response\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(text, "_sum{direction=\"response\"} 0.000033000\n"));
    assert_non_null(strstr(text, "_count{direction=\"response\"} 2\n"));
    assert_non_null(strstr(text, "{direction=\"request\",le=\"1\"} 0\n"));
    assert_non_null(strstr(text, "{direction=\"request\",le=\"+Inf\"} 1\n"));
    assert_non_null(strstr(text, "_count{direction=\"request\"} 1\n"));
    evbuffer_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_buckets),
        cmocka_unit_test(test_delay_unread_and_backwards),
        cmocka_unit_test(test_delay_expose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
