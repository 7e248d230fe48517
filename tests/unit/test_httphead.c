/*
 * tt_head_scan() (proxy/httphead.c), which finds obs-fold (a line that
 * starts with SP or HT) and empty field names (a line that starts with
 * ':') in the raw head bytes, line end to line end: against the byte-by-byte
 * scan it replaced, on heads of random lines cut into random pieces (the
 * scanner carries "at the start of a line" across pieces), and on the heads
 * the smuggling rules are about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proxy/httphead.h"
#include "tests/unit/rng.h"

/* the reference: every byte looked at */
struct ref {
    int line_start, obs_fold, empty_name;
};

static void ref_scan(struct ref *r, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (r->line_start && (p[i] == ' ' || p[i] == '\t'))
            r->obs_fold = 1;
        if (r->line_start && p[i] == ':')
            r->empty_name = 1;
        r->line_start = (p[i] == '\n');
    }
}

static void scan_in_pieces(struct tt_head *h, const char *p, size_t len,
                           uint64_t *seed)
{
    size_t off = 0;

    while (off < len) {
        size_t n = (size_t)(test_xorshift(seed) % 9);   /* 0 included */
        if (n > len - off)
            n = len - off;
        tt_head_scan(h, p + off, n);
        off += n;
    }
}

static void test_random_heads_match_reference(void **state)
{
    static const char alphabet[] = { 'a', ':', ' ', '\t', '\r', '\n', '\n', 'X' };
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    char buf[256];
    unsigned folds = 0, empties = 0, clean = 0;

    (void)state;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(test_xorshift(&seed) % sizeof(buf));
        struct tt_head h;
        struct ref r = { 0, 0, 0 };

        for (size_t i = 0; i < len; i++)
            buf[i] = alphabet[test_xorshift(&seed) % sizeof(alphabet)];
        tt_head_init(&h, 1024, 16);
        if (iter & 1)
            tt_head_scan(&h, buf, len);
        else
            scan_in_pieces(&h, buf, len, &seed);
        ref_scan(&r, buf, len);
        assert_int_equal(h.obs_fold, r.obs_fold);
        assert_int_equal(h.empty_name, r.empty_name);
        assert_int_equal(h.line_start, r.line_start);
        folds += r.obs_fold;
        empties += r.empty_name;
        clean += !r.obs_fold && !r.empty_name;
        tt_head_free(&h);
    }
    /* the inputs exercise every outcome */
    assert_true(folds > 100 && empties > 100 && clean > 100);
}

static void scan_str(struct tt_head *h, const char *s)
{
    tt_head_init(h, 1024, 16);
    tt_head_scan(h, s, strlen(s));
}

static void test_heads(void **state)
{
    struct tt_head h;

    (void)state;
    scan_str(&h, "POST /v1 HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n");
    assert_false(h.obs_fold);
    assert_false(h.empty_name);
    assert_true(h.line_start);

    scan_str(&h, "POST /v1 HTTP/1.1\r\nX: b\r\n c\r\n\r\n");
    assert_true(h.obs_fold);
    scan_str(&h, "POST /v1 HTTP/1.1\r\nX: b\r\n\tc\r\n\r\n");
    assert_true(h.obs_fold);
    scan_str(&h, "POST /v1 HTTP/1.1\r\n: b\r\n\r\n");
    assert_true(h.empty_name);
    assert_false(h.obs_fold);

    /* the request line is not a header line */
    scan_str(&h, " POST /v1 HTTP/1.1\r\n\r\n");
    assert_false(h.obs_fold);

    /* a line start carried from one piece to the next */
    tt_head_init(&h, 1024, 16);
    tt_head_scan(&h, "GET / HTTP/1.1\r\nA: b\r\n", 22);
    assert_true(h.line_start);
    tt_head_scan(&h, "", 0);
    assert_true(h.line_start);
    tt_head_scan(&h, " folded\r\n\r\n", 11);
    assert_true(h.obs_fold);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_heads_match_reference),
        cmocka_unit_test(test_heads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
