/*
 * libFuzzer harness for the goodput SLO parser and judge (metrics/slo.c).
 * Checks: no crash; a spec that parses formats to text that parses to the
 * same SLO; judging never marks a request good while a bit is violated.
 *
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -fsanitize=fuzzer,address,undefined \
 *     fuzz/fuzz_goodput.c metrics/slo.c metrics/metric.c -lm -o fuzz_goodput
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/slo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tt_slo a, b;
    struct tt_metric_values m;
    struct tt_slo_result r;
    char err[1024], buf[2048], *s;
    size_t mlen = sizeof(m.v) + sizeof(m.present) + 1;

    /* leading bytes, when there are enough: a metrics vector + error flag */
    memset(&m, 0, sizeof(m));
    int is_error = 0;
    if (size > mlen) {
        memcpy(m.v, data, sizeof(m.v));
        memcpy(&m.present, data + sizeof(m.v), sizeof(m.present));
        is_error = data[mlen - 1] & 1;
        data += mlen;
        size -= mlen;
    }
    s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    if (tt_slo_parse(s, &a, err, sizeof(err)) == 0) {
        if (a.n > TT_M__COUNT)
            abort();
        if (tt_slo_format(&a, buf, sizeof(buf)) >= (int)sizeof(buf))
            abort();
        if (tt_slo_parse(buf, &b, err, sizeof(err)) != 0 ||
            memcmp(&a, &b, sizeof(a)) != 0) {
            fprintf(stderr, "format does not round-trip: '%s' -> '%s'\n", s, buf);
            abort();
        }
        tt_slo_judge(&a, &m, is_error, &r);
        if (r.good && (r.violated || is_error))
            abort();
    } else if (strncmp(err, "goodput: ", 9) != 0) {
        abort();
    }
    free(s);
    return 0;
}
