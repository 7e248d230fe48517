/*
 * The captured streams of ../shared/fixtures/streams (or $TT_FIXTURES) for
 * the unit tests that read them: where they are, and one read whole.
 * Include after <cmocka.h>.
 */
#ifndef TT_TEST_FIXTURE_H
#define TT_TEST_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

static inline const char *fixture_dir(void)
{
    const char *d = getenv("TT_FIXTURES");
    return d && d[0] ? d : "../shared/fixtures/streams";
}

/* the whole file <name> of fixture_dir(), NUL-terminated, owned by the
 * caller; NULL when it is not there */
static inline char *read_fixture(const char *name, size_t *len)
{
    char path[1024];
    FILE *f;
    char *buf;
    long n;

    snprintf(path, sizeof(path), "%s/%s", fixture_dir(), name);
    f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

#endif
