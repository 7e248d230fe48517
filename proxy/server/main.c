/*
 * tokentap's entry point: picks the subcommand.
 *
 *   tokentap [options]                 run the proxy (proxy/server/server.c)
 *   tokentap check-config FILE         validate a config file, print it
 *   tokentap report RECORDS.jsonl ...  offline analysis (metrics/report/report.c)
 *   tokentap --help | --version
 *   tokentap --man                     tokentap(1) in roff (below, written
 *                                      with proxy/base/man.c)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/config/config.h"
#include "proxy/base/jsonarena.h"
#include "proxy/base/man.h"
#include "proxy/server/server.h"

#include "metrics/report/report.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

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

/* <fn>'s output as a string (malloc'd), or NULL */
static char *capture(int (*fn)(FILE *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);

    if (m == NULL)
        return NULL;
    fn(m);
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* tokentap(1): the options from the option table (proxy/config/config.c), the
 * report's section from its --help (metrics/report/report.c) */
static int man_page(FILE *out)
{
    char *report;

    tt_man_header(out, "tokentap", TT_VERSION,
                  "transparent recording reverse proxy for LLM inference");
    fputs(".SH SYNOPSIS\n"
          ".B tokentap\n"
          "[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-\\-listen\\fR "
          "\\fIADDR:PORT\\fR] \\fB\\-\\-upstream\\fR \\fIURL\\fR "
          "[\\fIoptions\\fR]\n"
          ".br\n"
          ".B tokentap report\n"
          "\\fIRECORDS.jsonl\\fR ... [\\fIoptions\\fR]\n"
          ".br\n"
          ".B tokentap check\\-config\n"
          "\\fIFILE\\fR\n"
          ".br\n"
          ".B tokentap\n"
          "\\fB\\-\\-version\\fR | \\fB\\-\\-help\\fR\n"
          ".SH DESCRIPTION\n"
          "tokentap sits between clients and an LLM model server (vLLM,\n"
          "llama.cpp, SGLang, TGI, Ollama, OpenAI, Anthropic, Gemini) and\n"
          "forwards bytes unchanged.  It decodes SSE and NDJSON streams in\n"
          "flight, times every event, and reports time to first token (TTFT),\n"
          "inter-token latency (ITL), token counts and goodput on Prometheus\n"
          "(/metrics on the admin listener), as AIPerf-compatible JSONL\n"
          "records (\\fB\\-\\-record\\fR) and through \\fBtokentap report\\fR.\n"
          ".PP\n"
          "Every option below is also a key of the configuration file, in\n"
          "the section shown (\\fB\\-\\-max\\-header\\-bytes\\fR is\n"
          "\\fBmax_header_bytes\\fR in \\fB[limits]\\fR); flags override the\n"
          "file.  Use \\fB\\-\\-flag\\fR \\fIVALUE\\fR or\n"
          "\\fB\\-\\-flag\\fR=\\fIVALUE\\fR; booleans are bare flags.  Sizes\n"
          "take k, m or g (KiB, MiB, GiB); durations need a unit: ms, s or m.\n",
          out);
    tt_config_man(out);
    fputs(".SH COMMANDS\n"
          ".SS tokentap check\\-config FILE\n"
          "Reads \\fIFILE\\fR as the proxy would, checks every key and the\n"
          "rules across keys, prints the effective configuration (every key\n"
          "with its value) on standard output and exits 0; otherwise it\n"
          "prints every error, one line each,\n"
          "\\fIFILE\\fR:\\fILINE\\fR: key '\\fIK\\fR': reason, and exits 2.\n"
          ".SS tokentap report RECORDS.jsonl ...\n", out);
    report = capture(tt_report_usage);
    if (report != NULL)
        tt_man_from_help(out, report);
    free(report);
    fputs(".SH EXAMPLES\n"
          "Record the traffic of clients to a model server on port 8000 (vLLM,\n"
          "llama.cpp, ...), judging each request against two SLOs; clients\n"
          "then use port 8080 instead of 8000:\n"
          ".PP\n.RS\n.nf\n"
          "tokentap \\-\\-listen 0.0.0.0:8080 \\-\\-upstream http://127.0.0.1:8000 \\e\n"
          "    \\-\\-record records.jsonl \\-\\-goodput \"ttft:500 itl:50\"\n"
          ".fi\n.RE\n.PP\n"
          "Watch it live, on the admin listener (loopback by default):\n"
          ".PP\n.RS\n.nf\n"
          "curl \\-s http://127.0.0.1:9464/metrics | grep \'^tokentap_slo_attainment\'\n"
          "curl \\-s http://127.0.0.1:9464/stats\n"
          ".fi\n.RE\n.PP\n"
          "and open http://127.0.0.1:9464/dashboard in a browser.\n"
          ".PP\n"
          "Also send every request to a candidate server on port 8001 (shadow\n"
          "traffic: recorded and compared, never seen by the client):\n"
          ".PP\n.RS\n.nf\n"
          "tokentap \\-\\-upstream http://127.0.0.1:8000 \\e\n"
          "    \\-\\-shadow candidate=http://127.0.0.1:8001 \\-\\-record records.jsonl\n"
          ".fi\n.RE\n.PP\n"
          "Summarise the records: all of them, then re-judged against other\n"
          "SLOs in 5-minute slices, then the candidate against the primary,\n"
          "request by request:\n"
          ".PP\n.RS\n.nf\n"
          "tokentap report records.jsonl\n"
          "tokentap report records.jsonl \\-\\-goodput \"ttft:300 itl:40\" \\-\\-slice\\-duration 5m\n"
          "tokentap report records.jsonl \\-\\-compare\\-upstreams primary,candidate\n"
          ".fi\n.RE\n.PP\n"
          "Check a configuration file before reloading with it:\n"
          ".PP\n.RS\n.nf\n"
          "tokentap check\\-config /etc/tokentap/tokentap.conf && systemctl reload tokentap\n"
          ".fi\n.RE\n.PP\n"
          "Try it without a model server, in front of the simulator\n"
          "(\\fBtokentap\\-sim\\fR(1)):\n"
          ".PP\n.RS\n.nf\n"
          "tokentap\\-sim \\-\\-listen 127.0.0.1:8000 &\n"
          "tokentap \\-\\-upstream http://127.0.0.1:8000 \\-\\-record records.jsonl &\n"
          "curl \\-sN http://127.0.0.1:8080/v1/chat/completions \\e\n"
          "    \\-H \'Content\\-Type: application/json\' \\e\n"
          "    \\-d \'{\"model\":\"m\",\"stream\":true,\"sim\":{\"tokens\":5}}\'\n"
          ".fi\n.RE\n"
          ".SH SIGNALS\n"
          ".TP\n.B SIGTERM\\fR, \\fBSIGINT\n"
          "Stop accepting, finish the responses in flight (at most\n"
          "\\fBdrain_timeout\\fR), flush the records, exit 0.\n"
          ".TP\n.B SIGHUP\n"
          "Reopen the record file, the log file and the access log (for\n"
          "rotation), re-read the SLOs from the configuration file and\n"
          "reload the certificates.\n"
          ".SH EXIT STATUS\n"
          "0 after a clean drain; 1 when start-up fails; 2 for bad options\n"
          "or configuration.\n"
          ".SH FILES\n"
          ".TP\n.I /etc/tokentap/tokentap.conf\n"
          "the configuration read by the packaged systemd unit; every key is\n"
          "listed with its default by \\fBtokentap \\-\\-print\\-config\\-reference\\fR.\n"
          ".SH SEE ALSO\n"
          ".BR tokentap\\-sim (1),\n"
          ".BR systemd.service (5);\n"
          "the guides in /usr/share/doc/tokentap: operations.md,\n"
          "metrics.md, report.md, slo.md, tls.md.\n", out);
    return ferror(out) ? -1 : 0;
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
        return man_page(stdout) < 0 ? 1 : 0;

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
