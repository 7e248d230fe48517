/*
 * tokentap's entry point: picks the subcommand.
 *
 *   tokentap [options]                 run the proxy (proxy/server.c)
 *   tokentap check-config FILE         validate a config file, print it
 *   tokentap report RECORDS.jsonl ...  offline analysis (metrics/report.c)
 *   tokentap --help | --version
 *   tokentap --man                     tokentap(1) in roff (proxy/man.c)
 */
#include <stdio.h>
#include <string.h>

#include "proxy/config.h"
#include "proxy/jsonarena.h"
#include "proxy/man.h"
#include "proxy/server.h"

#include "metrics/report.h"

/* every line of <err> (the config's errors, one a line) after "tokentap: " */
static void print_errors(const char *err)
{
    while (*err) {
        size_t n = strcspn(err, "\n");
        fprintf(stderr, "tokentap: %.*s\n", (int)n, err);
        err += n + (err[n] == '\n');
    }
}

/* every error of the file, then every failed check; exit 2 on any */
static int check_config(int argc, char **argv)
{
    struct tt_config cfg;
    static char err[65536];

    if (argc != 2) {
        fprintf(stderr, "usage: tokentap check-config FILE\n");
        return 2;
    }
    tt_config_defaults(&cfg);
    if (tt_config_load(&cfg, argv[1], err, sizeof(err)) < 0) {
        print_errors(err);
        return 2;
    }
    if (tt_config_check(&cfg, err, sizeof(err)) < 0) {
        print_errors(err);
        return 2;
    }
    tt_config_dump(&cfg, stdout);
    fprintf(stderr, "tokentap: %s: configuration OK\n", argv[1]);
    return 0;
}

int main(int argc, char **argv)
{
    struct tt_config cfg;
    static char err[65536];
    int rc;

    if (argc > 1 && strcmp(argv[1], "check-config") == 0)
        return check_config(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "report") == 0)
        return tt_report_main(argc - 1, argv + 1);
    if (argc == 2 && strcmp(argv[1], "--man") == 0)    /* the build writes tokentap.1 */
        return tt_man_tokentap(stdout) < 0 ? 1 : 0;

    /* cJSON's allocation hooks are process-wide: set them before any thread */
    tt_json_init();
    tt_config_defaults(&cfg);
    rc = tt_config_args(&cfg, argc - 1, argv + 1, err, sizeof(err));
    if (rc > 0)
        return 0;
    if (rc < 0 || tt_config_check(&cfg, err, sizeof(err)) < 0) {
        print_errors(err);
        return 2;
    }
    return tt_server_run(&cfg, argc - 1, argv + 1);
}
