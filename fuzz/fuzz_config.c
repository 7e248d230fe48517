/*
 * libFuzzer harness for the configuration: the file parser (libinih plus
 * proxy/config/config.c), the command-line parser and the URL/address parsers.
 * The first input byte picks the target.  Properties checked beyond "no
 * crash": a file that loads dumps to text that loads to the same config.
 *
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -fsanitize=fuzzer,address,undefined \
 *     fuzz/fuzz_config.c proxy/config/config.c proxy/base/url.c metrics/slo.c \
 *     metrics/metric.c -linih -lm -o fuzz_config
 */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/slo.h"
#include "proxy/config/config.h"
#include "proxy/base/url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tt_config c1, c2;

static void fuzz_file(const uint8_t *data, size_t size)
{
    char err[2048], *dump = NULL;
    size_t dlen = 0;
    struct tt_slo_set set;
    FILE *f, *out;

    f = fmemopen((void *)data, size, "r");
    if (!f)
        return;
    tt_config_defaults(&c1);
    if (tt_config_load_stream(&c1, f, "fuzz", err, sizeof(err)) != 0) {
        fclose(f);
        if (strncmp(err, "fuzz", 4) != 0)
            abort();
        return;
    }
    fclose(f);
    (void)tt_config_check(&c1, err, sizeof(err));
    if (tt_config_slo_set(&c1, &set, err, sizeof(err)) != 0)
        abort();                /* validated while loading */

    out = open_memstream(&dump, &dlen);
    if (!out)
        return;
    tt_config_dump(&c1, out);
    fclose(out);
    f = fmemopen(dump, dlen, "r");
    if (!f) {
        free(dump);
        return;
    }
    tt_config_defaults(&c2);
    if (tt_config_load_stream(&c2, f, "dump", err, sizeof(err)) != 0) {
        fprintf(stderr, "dump does not reload: %s\n%s\n", err, dump);
        abort();
    }
    fclose(f);
    /* the values; where they came from (src: lines) differs by design */
    if (memcmp(&c1, &c2, offsetof(struct tt_config, src)) != 0) {
        fprintf(stderr, "dump reloads differently:\n%s\n", dump);
        abort();
    }
    free(dump);
}

static void fuzz_args(const uint8_t *data, size_t size)
{
    char *copy, *argv[64], err[2048];
    int argc = 0;
    size_t i, start = 0;

    copy = malloc(size + 1);
    if (!copy)
        return;
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (i = 0; i <= size && argc < 64; i++)
        if (copy[i] == '\0') {
            argv[argc++] = copy + start;
            start = i + 1;
        }
    /* no --help/--version/--config: they print or read files */
    for (i = 0; i < (size_t)argc; i++)
        if (strncmp(argv[i], "--c", 3) == 0 || strncmp(argv[i], "--h", 3) == 0 ||
            strncmp(argv[i], "--v", 3) == 0 || strncmp(argv[i], "--p", 3) == 0 ||
            strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "-V") == 0)
            argv[i] = (char *)"--workers=1";
    tt_config_defaults(&c1);
    if (tt_config_args(&c1, argc, argv, err, sizeof(err)) == 0)
        (void)tt_config_check(&c1, err, sizeof(err));
    free(copy);
}

static void fuzz_url(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), err[1024];
    struct tt_url u;
    struct sockaddr_storage ss;
    socklen_t len;

    if (!s)
        return;
    memcpy(s, data, size);
    s[size] = '\0';
    if (tt_url_parse(s, &u, err, sizeof(err)) == 0) {
        if (!u.host[0] || !u.port[0] || !u.authority[0])
            abort();
        size_t bl = strlen(u.base_path);
        if (bl && (u.base_path[0] != '/' || u.base_path[bl - 1] == '/'))
            abort();
    }
    (void)tt_addr_parse(s, &ss, &len, err, sizeof(err));
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: fuzz_file(data + 1, size - 1); break;
    case 1: fuzz_args(data + 1, size - 1); break;
    default: fuzz_url(data + 1, size - 1); break;
    }
    return 0;
}
