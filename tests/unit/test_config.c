/*
 * Unit tests for proxy/config/config.c (option table, file, flags, checks, dump,
 * reference file) and proxy/base/url.c (upstream URLs, listener addresses).
 * Run from the top of the tree (conf/tokentap.conf is read), or set
 * TT_SRCDIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "metrics/slo.h"
#include "proxy/config/config.h"
#include "proxy/decode/stream.h"
#include "proxy/base/url.h"

static char err[4096];
static char path[64];
static char want[4096];

/* write <text> to a fresh temporary file, its name in <path> */
static void write_conf(const char *text)
{
    int fd;

    if (path[0])
        unlink(path);
    strcpy(path, "/tmp/tt_test_config_XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int teardown(void **state)
{
    (void)state;
    if (path[0])
        unlink(path);
    path[0] = '\0';
    return 0;
}

static int load(struct tt_config *c, const char *text)
{
    tt_config_defaults(c);
    write_conf(text);
    err[0] = '\0';
    return tt_config_load(c, path, err, sizeof(err));
}

/* the values of a config, not where they came from (tt_config_src) */
#define CFG_VALUES offsetof(struct tt_config, src)

/* the file <text> fails with "PATH:<line>: <reason>"; further errors in
 * <reason> (after '\n') say PATH for the file's name */
static void load_err(const char *text, int line, const char *reason)
{
    struct tt_config c;
    size_t o;

    assert_int_equal(load(&c, text), -1);
    o = (size_t)snprintf(want, sizeof(want), "%s:%d: ", path, line);
    for (const char *p = reason; *p && o + 1 < sizeof(want); p++) {
        if (strncmp(p, "PATH:", 5) == 0) {
            o += (size_t)snprintf(want + o, sizeof(want) - o, "%s", path);
            p += 3;
            continue;
        }
        want[o++] = *p;
    }
    want[o < sizeof(want) ? o : sizeof(want) - 1] = '\0';
    assert_string_equal(err, want);
}

/* parse the flags of the NULL-terminated list; returns tt_config_args() */
static int args(struct tt_config *c, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;

    va_start(ap, c);
    while ((argv[argc] = va_arg(ap, char *)) != NULL)
        argc++;
    va_end(ap);
    err[0] = '\0';
    return tt_config_args(c, argc, argv, err, sizeof(err));
}

static void test_defaults(void **state)
{
    struct tt_config c;

    (void)state;
    tt_config_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_int_equal(c.workers, 1);
    assert_int_equal(c.log_level, TT_LOG_INFO);
    assert_int_equal(c.think_tags, TT_THINK_AUTO);
    assert_int_equal(c.add_request_id, 0);
    assert_int_equal(c.drain_timeout_ms, 30000);
    assert_string_equal(c.upstream, "");
    assert_string_equal(c.upstream_ca, "");
    assert_int_equal(c.upstream_insecure, 0);
    assert_int_equal(c.upstream_pool, 64);
    assert_string_equal(c.tls_cert, "");
    assert_string_equal(c.admin, "127.0.0.1:9464");
    assert_int_equal(c.model_label_cap, 32);
    assert_string_equal(c.record, "");
    assert_int_equal(c.record_queue, 4096);
    assert_string_equal(c.goodput, "");
    assert_int_equal(c.n_model_slos, 0);
    assert_int_equal(c.max_header_bytes, 65536);
    assert_int_equal(c.max_headers, 100);
    assert_int_equal(c.max_body_bytes, 33554432);
    assert_int_equal(c.buffer_bytes, 262144);
    assert_int_equal(c.head_timeout_ms, 10000);
    assert_int_equal(c.connect_timeout_ms, 5000);
    assert_int_equal(c.response_timeout_ms, 600000);
    assert_int_equal(c.upstream_idle_ms, 300000);
    assert_int_equal(c.client_idle_ms, 75000);
    assert_int_equal(c.max_connections, 20000);
}

/* a value in matching quotes means the text inside them */
static void test_quoted_values(void **state)
{
    struct tt_config c;

    (void)state;
    assert_int_equal(load(&c,
        "[upstream]\n"
        "upstream = \"http://127.0.0.1:9/base\"\n"
        "[slo]\n"
        "goodput = 'ttft:500 itl:50'\n"), 0);
    assert_string_equal(c.upstream, "http://127.0.0.1:9/base");
    assert_string_equal(c.goodput, "ttft:500 itl:50");
    /* unmatched quotes stay part of the value, and fail where they must */
    assert_int_equal(load(&c, "[slo]\ngoodput = \"ttft:500\n"), -1);
}

static void test_types(void **state)
{
    struct tt_config c;

    (void)state;
    assert_int_equal(load(&c,
        "# comment\n"
        "; another\n"
        "[proxy]\n"
        "listen = [::1]:0\n"
        "workers = 256\n"
        "log_level = debug   ; inline comment\n"
        "think_tags = off    # inline comment\n"
        "add_request_id = yes\n"
        "drain_timeout = 0s\n"
        "[upstream]\n"
        "upstream = https://api.example.com/openai/\n"
        "upstream_ca = /etc/ssl/ca#1.pem\n"
        "upstream_insecure = ON\n"
        "upstream_pool = 0\n"
        "[admin]\n"
        "admin = off\n"
        "[record]\n"
        "record = -\n"
        "[slo]\n"
        "goodput = ttft:500 itl:50\n"
        "[limits]\n"
        "max_header_bytes = 1K\n"
        "max_headers = 1\n"
        "max_body_bytes = 2G\n"
        "buffer_bytes = 4KiB\n"
        "head_timeout = 1500ms\n"
        "connect_timeout = 2m\n"
        "response_timeout = 1s\n"
        "upstream_idle_timeout = 1ms\n"
        "client_idle_timeout = 5s\n"
        "max_connections = 7\n"), 0);
    assert_string_equal(c.listen, "[::1]:0");
    assert_int_equal(c.workers, 256);
    assert_int_equal(c.log_level, TT_LOG_DEBUG);
    assert_int_equal(c.think_tags, TT_THINK_OFF);
    assert_int_equal(c.add_request_id, 1);
    assert_int_equal(c.drain_timeout_ms, 0);
    assert_string_equal(c.upstream, "https://api.example.com/openai/");
    assert_string_equal(c.upstream_ca, "/etc/ssl/ca#1.pem");
    assert_int_equal(c.upstream_insecure, 1);
    assert_int_equal(c.upstream_pool, 0);
    assert_string_equal(c.admin, "off");
    assert_string_equal(c.record, "-");
    assert_string_equal(c.goodput, "ttft:500 itl:50");
    assert_int_equal(c.max_header_bytes, 1024);
    assert_int_equal(c.max_headers, 1);
    assert_int_equal(c.max_body_bytes, 2ULL << 30);
    assert_int_equal(c.buffer_bytes, 4096);
    assert_int_equal(c.head_timeout_ms, 1500);
    assert_int_equal(c.connect_timeout_ms, 120000);
    assert_int_equal(c.response_timeout_ms, 1000);
    assert_int_equal(c.upstream_idle_ms, 1);
    assert_int_equal(c.client_idle_ms, 5000);
    assert_int_equal(c.max_connections, 7);
}

static void test_size_and_bool_forms(void **state)
{
    static const struct { const char *v; size_t n; } sizes[] = {
        { "65536", 65536 }, { "64k", 65536 }, { "64K", 65536 },
        { "64KiB", 65536 }, { "1m", 1 << 20 }, { "1M", 1 << 20 },
        { "1MiB", 1 << 20 }, { "16m", 16 << 20 },
    };
    static const struct { const char *v; int b; } bools[] = {
        { "true", 1 }, { "false", 0 }, { "yes", 1 }, { "no", 0 }, { "on", 1 },
        { "off", 0 }, { "1", 1 }, { "0", 0 }, { "TRUE", 1 }, { "No", 0 },
    };
    struct tt_config c;
    char text[128];

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        snprintf(text, sizeof(text), "[limits]\nmax_header_bytes = %s\n",
                 sizes[i].v);
        assert_int_equal(load(&c, text), 0);
        assert_int_equal(c.max_header_bytes, sizes[i].n);
    }
    for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
        snprintf(text, sizeof(text), "[proxy]\nadd_request_id = %s\n",
                 bools[i].v);
        assert_int_equal(load(&c, text), 0);
        assert_int_equal(c.add_request_id, bools[i].b);
    }
    /* BOM, CRLF, blank lines, indentation */
    assert_int_equal(load(&c, "\xEF\xBB\xBF[proxy]\r\n\r\n   workers = 3\r\n"
                          "\t[limits]\r\n  max_headers=9\r\n"), 0);
    assert_int_equal(c.workers, 3);
    assert_int_equal(c.max_headers, 9);
}

static void test_bad_values(void **state)
{
    (void)state;
    load_err("[proxy]\nworkers = 0\n", 2,
             "key 'workers': 0 out of range (1..256)");
    load_err("[proxy]\n\nworkers = 257\n", 3,
             "key 'workers': 257 out of range (1..256)");
    load_err("[proxy]\nworkers = two\n", 2,
             "key 'workers': expected an integer, got 'two'");
    load_err("[proxy]\nworkers = -1\n", 2,
             "key 'workers': expected an integer, got '-1'");
    load_err("[proxy]\nworkers =\n", 2,
             "key 'workers': expected an integer, got ''");
    load_err("[proxy]\nworkers = 99999999999999999999999\n", 2,
             "key 'workers': expected an integer, got "
             "'99999999999999999999999'");
    load_err("[proxy]\nlog_level = loud\n", 2,
             "key 'log_level': expected error, warn, info or debug, got 'loud'");
    load_err("[proxy]\nthink_tags = maybe\n", 2,
             "key 'think_tags': expected auto, on or off, got 'maybe'");
    load_err("[proxy]\nadd_request_id = sure\n", 2,
             "key 'add_request_id': expected true or false, got 'sure'");
    load_err("[proxy]\nlisten = foo\n", 2,
             "key 'listen': expected ADDR:PORT (IPv4 or [IPv6], e.g. "
             "127.0.0.1:8080), got 'foo'");
    load_err("[proxy]\nlisten = 127.0.0.1:70000\n", 2,
             "key 'listen': bad port in '127.0.0.1:70000' (expected 0..65535)");
    load_err("[admin]\nadmin = localhost\n", 2,
             "key 'admin': expected ADDR:PORT or off, got 'localhost'");
    load_err("[upstream]\nupstream = ftp://x\n", 2,
             "key 'upstream': expected an http:// or https:// URL, got "
             "'ftp://x'");
    load_err("[slo]\ngoodput = ttfx:5\n", 2,
             "key 'goodput': unknown metric 'ttfx' (known: time_to_first_token, "
             "time_to_second_token, time_to_first_output_token, request_latency, "
             "inter_token_latency, output_token_throughput_per_user, "
             "input_sequence_length, output_sequence_length, output_token_count, "
             "reasoning_token_count, reasoning_latency, cached_input_tokens, server_prefill_ms, server_queue_ms, ttft_outside_server_ms, client_time_to_first_token, client_time_to_first_output_token, client_request_latency, delivery_delay, time_to_first_audio; aliases ttft, ttfo, itl, "
             "tpot, e2el)");
    load_err("[slo]\ngoodput = ttft:1 time_to_first_token:2\n", 2,
             "key 'goodput': duplicate metric 'time_to_first_token' ('ttft:1' "
             "and 'time_to_first_token:2')");
    load_err("[limits]\nmax_header_bytes = 64x\n", 2,
             "key 'max_header_bytes': expected a size in bytes, optionally with "
             "k, m or g (KiB, MiB, GiB), got '64x'");
    load_err("[limits]\nmax_header_bytes = 64kb\n", 2,
             "key 'max_header_bytes': expected a size in bytes, optionally with "
             "k, m or g (KiB, MiB, GiB), got '64kb'");
    load_err("[limits]\nmax_header_bytes = 0\n", 2,
             "key 'max_header_bytes': '0' out of range (1k..16m)");
    load_err("[limits]\nmax_body_bytes = 99999999999g\n", 2,
             "key 'max_body_bytes': expected a size in bytes, optionally with "
             "k, m or g (KiB, MiB, GiB), got '99999999999g'");
    load_err("[limits]\nhead_timeout = 10\n", 2,
             "key 'head_timeout': expected a duration with a unit, ms, s or m "
             "(e.g. 10s), got '10'");
    load_err("[limits]\nhead_timeout = 1.5s\n", 2,
             "key 'head_timeout': expected a duration with a unit, ms, s or m "
             "(e.g. 10s), got '1.5s'");
    load_err("[limits]\nhead_timeout = 0s\n", 2,
             "key 'head_timeout': '0s' out of range (1ms..86400s)");
    load_err("[limits]\nconnect_timeout = 1441m\n", 2,
             "key 'connect_timeout': '1441m' out of range (1ms..86400s)");
    load_err("[limits]\nmax_connections = 0\n", 2,
             "key 'max_connections': 0 out of range (1..1000000)");
}

static void test_structure_errors(void **state)
{
    char longline[5000];

    (void)state;
    load_err("[proxy]\n# c\nfoo = 1\n", 3,
             "key 'foo': unknown key in section [proxy]");
    load_err("[limits]\nworkers = 2\n", 2,
             "key 'workers': belongs in section [proxy], not [limits]");
    load_err("[proxy]\nhead_timeout = 2s\n", 2,
             "key 'head_timeout': belongs in section [limits], not [proxy]");
    load_err("[proxy]\nworkers = 1\n[bogus]\nx = 1\n", 3,
             "section [bogus]: unknown section (known: proxy, upstream, tls, "
             "admin, record, slo, slo.MODEL, shadow.NAME, limits)");
    load_err("[bogus]\n", 1,
             "section [bogus]: unknown section (known: proxy, upstream, tls, "
             "admin, record, slo, slo.MODEL, shadow.NAME, limits)");
    load_err("[ proxy ]\n", 1,
             "section [ proxy ]: unknown section (known: proxy, upstream, tls, "
             "admin, record, slo, slo.MODEL, shadow.NAME, limits)");
    load_err("workers = 2\n", 1, "key 'workers': outside any [section]");
    load_err("[proxy]\nworkers = 2\nworkers = 3\n", 3,
             "key 'workers': duplicate (first set on line 2)");
    load_err("[proxy]\nworkers 2\n", 2,
             "syntax error, expected 'key = value', '[section]' or a comment");
    load_err("[proxy\nworkers = 2\n", 1,
             "syntax error, expected 'key = value', '[section]' or a comment\n"
             "PATH:2: key 'workers': outside any [section]");
    load_err("[proxy]\nworkers = 2\n[proxy]\nworkers = 2\n", 4,
             "key 'workers': duplicate (first set on line 2)");

    memset(longline, 'a', sizeof(longline));
    memcpy(longline, "[proxy]\nlisten = ", 17);
    strcpy(longline + sizeof(longline) - 2, "\n");
    load_err(longline, 2, "line too long (max 4096 bytes)");

    /* every error is reported, in file order, each with its line */
    load_err("[proxy]\nnonsense\nworkers = 0\n", 2,
             "syntax error, expected 'key = value', '[section]' or a comment\n"
             "PATH:3: key 'workers': 0 out of range (1..256)");

    {
        struct tt_config c;
        tt_config_defaults(&c);
        assert_int_equal(tt_config_load(&c, "/nonexistent/tt.conf", err,
                                        sizeof(err)), -1);
        assert_string_equal(err, "/nonexistent/tt.conf: cannot open: No such "
                            "file or directory");
    }
}

static void test_model_slo_sections(void **state)
{
    struct tt_config c;
    struct tt_slo_set set;
    const struct tt_slo *s;

    (void)state;
    assert_int_equal(load(&c,
        "[slo]\n"
        "goodput = ttft:500\n"
        "[slo.meta-llama/Llama-3.1-8B-Instruct]\n"
        "goodput = ttft:300 itl:30\n"
        "[slo.hf.co/bartowski/Qwen2.5-Coder-32B-Instruct-GGUF:Q4_K_M]\n"
        "goodput = e2el:9000\n"), 0);
    assert_int_equal(c.n_model_slos, 2);
    assert_string_equal(c.model_slos[0].model,
                        "meta-llama/Llama-3.1-8B-Instruct");
    /* longer than inih's 50-byte section buffer: kept whole */
    assert_string_equal(c.model_slos[1].model,
                        "hf.co/bartowski/Qwen2.5-Coder-32B-Instruct-GGUF:Q4_K_M");
    assert_string_equal(c.model_slos[1].goodput, "e2el:9000");

    assert_int_equal(tt_config_slo_set(&c, &set, err, sizeof(err)), 0);
    s = tt_slo_for_model(&set, "meta-llama/Llama-3.1-8B-Instruct");
    assert_int_equal(s->n, 2);
    assert_true(s->c[0].limit == 300);
    s = tt_slo_for_model(&set, "hf.co/bartowski/Qwen2.5-Coder-32B-Instruct-"
                               "GGUF:Q4_K_M");
    assert_int_equal(s->c[0].metric, TT_M_REQUEST_LATENCY);
    s = tt_slo_for_model(&set, "gpt-4o");
    assert_int_equal(s->n, 1);
    assert_true(s->c[0].limit == 500);

    load_err("[slo.]\ngoodput = ttft:1\n", 1,
             "section [slo.]: missing model name, expected [slo.MODEL]");
    load_err("[slo.m]\nfoo = 1\n", 2,
             "key 'foo': unknown key in section [slo.m] (only goodput)");
    load_err("[slo.m]\ngoodput = ttft:x\n", 2,
             "key 'goodput': 'ttft:x': value is not a number or a duration (500, 500ms, 0.5s)");
    load_err("[slo.m]\ngoodput = ttft:1\n[slo.n]\ngoodput = ttft:1\n"
             "[slo.m]\ngoodput = ttft:2\n", 6,
             "key 'goodput': duplicate in [slo.m] (first set on line 2)");
    {
        char text[4096];
        size_t off = 0;
        for (int i = 0; i <= TT_CONFIG_SLO_MODELS; i++)
            off += (size_t)snprintf(text + off, sizeof(text) - off,
                                    "[slo.m%d]\ngoodput = ttft:%d\n", i, i);
        load_err(text, 2 * TT_CONFIG_SLO_MODELS + 2,
                 "section [slo.m16]: too many [slo.MODEL] sections (max 16)");
    }
}

static void test_args(void **state)
{
    struct tt_config c;

    (void)state;
    tt_config_defaults(&c);
    assert_int_equal(args(&c, "--upstream", "http://127.0.0.1:8000",
                          "--listen=0.0.0.0:8081", "--workers", "4",
                          "--upstream-insecure", "--max-header-bytes=128k",
                          "--head-timeout", "3s", "--goodput",
                          "ttft:500 itl:50", "--log-level=warn",
                          "--think-tags", "on", "--add-request-id=false",
                          "--record", "-", NULL), 0);
    assert_string_equal(c.upstream, "http://127.0.0.1:8000");
    assert_string_equal(c.listen, "0.0.0.0:8081");
    assert_int_equal(c.workers, 4);
    assert_int_equal(c.upstream_insecure, 1);
    assert_int_equal(c.max_header_bytes, 131072);
    assert_int_equal(c.head_timeout_ms, 3000);
    assert_string_equal(c.goodput, "ttft:500 itl:50");
    assert_int_equal(c.log_level, TT_LOG_WARN);
    assert_int_equal(c.think_tags, TT_THINK_ON);
    assert_int_equal(c.add_request_id, 0);
    assert_string_equal(c.record, "-");

    /* every flag of --help is accepted with its default */
    tt_config_defaults(&c);
    assert_int_equal(args(&c, "--tls-cert", "a.pem", "--tls-key", "k.pem",
                          "--tls-client-ca", "ca.pem", "--upstream-ca", "x",
                          "--upstream-cert", "y", "--upstream-key", "z",
                          "--admin", "off", "--upstream-pool", "1",
                          "--model-label-cap", "5", "--record-queue", "10",
                          "--drain-timeout", "1m", "--max-headers", "5",
                          "--max-body-bytes", "1m", "--buffer-bytes", "64k",
                          "--connect-timeout", "1s", "--response-timeout",
                          "60s", "--upstream-idle-timeout", "60s",
                          "--client-idle-timeout", "60s",
                          "--max-connections", "100", NULL), 0);
    assert_string_equal(c.tls_client_ca, "ca.pem");
    assert_int_equal(c.drain_timeout_ms, 60000);
    assert_int_equal(c.max_connections, 100);

    /* last one wins */
    tt_config_defaults(&c);
    assert_int_equal(args(&c, "--workers", "2", "--workers=3", NULL), 0);
    assert_int_equal(c.workers, 3);
}

static void test_args_errors(void **state)
{
    struct tt_config c;

    (void)state;
    tt_config_defaults(&c);
    assert_int_equal(args(&c, "--listen", "foo", NULL), -1);
    assert_string_equal(err, "--listen: expected ADDR:PORT (IPv4 or [IPv6], "
                        "e.g. 127.0.0.1:8080), got 'foo'");
    assert_int_equal(args(&c, "--workers=0", NULL), -1);
    assert_string_equal(err, "--workers: 0 out of range (1..256)");
    assert_int_equal(args(&c, "--head-timeout", "10", NULL), -1);
    assert_string_equal(err, "--head-timeout: expected a duration with a unit, "
                        "ms, s or m (e.g. 10s), got '10'");
    assert_int_equal(args(&c, "--record", NULL), -1);
    assert_string_equal(err, "--record: missing value (FILE)");
    assert_int_equal(args(&c, "--record", "--workers", "2", NULL), -1);
    assert_string_equal(err, "--record: missing value (FILE)");
    assert_int_equal(args(&c, "--bogus", NULL), -1);
    assert_string_equal(err, "--bogus: unknown option (see --help)");
    assert_int_equal(args(&c, "--bogus=1", NULL), -1);
    assert_string_equal(err, "--bogus: unknown option (see --help)");
    assert_int_equal(args(&c, "--max_header_bytes=1k", NULL), -1);
    assert_string_equal(err, "--max_header_bytes: unknown option (see --help)");
    assert_int_equal(args(&c, "-x", NULL), -1);
    assert_string_equal(err, "-x: unknown option (see --help)");
    assert_int_equal(args(&c, "stray", NULL), -1);
    assert_string_equal(err, "unexpected argument 'stray' (see --help)");
    assert_int_equal(args(&c, "--upstream-insecure=maybe", NULL), -1);
    assert_string_equal(err, "--upstream-insecure: expected true or false, "
                        "got 'maybe'");
    assert_int_equal(args(&c, "--goodput", "ttft:-1", NULL), -1);
    assert_string_equal(err, "--goodput: 'ttft:-1': negative value");
    assert_int_equal(args(&c, "--upstream", "http://h:0", NULL), -1);
    assert_string_equal(err, "--upstream: bad port '0' (expected 1..65535)");
    assert_int_equal(args(&c, "--config", NULL), -1);
    assert_string_equal(err, "--config: missing value (FILE)");
    assert_int_equal(args(&c, "--config", "a", "--config=b", NULL), -1);
    assert_string_equal(err, "--config: given more than once");
}

static void test_args_override_file(void **state)
{
    struct tt_config c;

    (void)state;
    write_conf("[proxy]\nworkers = 8\nlisten = 127.0.0.1:9000\n"
               "[upstream]\nupstream = http://file:1\n");
    tt_config_defaults(&c);
    /* flags win over the file whatever their position */
    assert_int_equal(args(&c, "--workers", "2", "--config", path, NULL), 0);
    assert_int_equal(c.workers, 2);
    assert_string_equal(c.listen, "127.0.0.1:9000");
    assert_string_equal(c.upstream, "http://file:1");

    tt_config_defaults(&c);
    snprintf(want, sizeof(want), "--config=%s", path);
    assert_int_equal(args(&c, want, "--upstream=http://flag:2", NULL), 0);
    assert_int_equal(c.workers, 8);
    assert_string_equal(c.upstream, "http://flag:2");

    /* a bad file is reported as FILE:LINE */
    write_conf("[proxy]\nworkers = 0\n");
    tt_config_defaults(&c);
    assert_int_equal(args(&c, "--config", path, NULL), -1);
    snprintf(want, sizeof(want), "%s:2: key 'workers': 0 out of range "
             "(1..256)", path);
    assert_string_equal(err, want);
}

/* a file's errors are all listed, each with its line and key; a missing
 * upstream then names the file and the [upstream] key */
static void test_every_error_and_the_file_named(void **state)
{
    struct tt_config c;
    char line[3][256];

    (void)state;
    assert_int_equal(load(&c, "[proxy]\nworkers = 0\nbogus = 1\n[limits]\n"
                          "head_timeout = 10\n"), -1);
    snprintf(line[0], sizeof(line[0]), "%s:2: key 'workers': ", path);
    snprintf(line[1], sizeof(line[1]), "\n%s:3: key 'bogus': ", path);
    snprintf(line[2], sizeof(line[2]), "\n%s:5: key 'head_timeout': ", path);
    assert_true(strncmp(err, line[0], strlen(line[0])) == 0);
    assert_non_null(strstr(err, line[1]));
    assert_non_null(strstr(err, line[2]));
    assert_null(strstr(strstr(err, line[2]) + 1, "\n"));    /* three lines */

    assert_int_equal(load(&c, "[proxy]\nworkers = 2\n[tls]\ntls_cert = c.pem\n"), 0);
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s: key 'upstream' in [upstream] (or --upstream): "
             "required (the model server's URL, e.g. http://127.0.0.1:8000)\n"
             "%s: key 'tls_key' in [tls] (or --tls-key): required with tls_cert",
             path, path);
    assert_string_equal(err, want);
}

static void test_check(void **state)
{
    struct tt_config c;

    (void)state;
    tt_config_defaults(&c);
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--upstream: required (the model server's URL, "
                        "e.g. http://127.0.0.1:8000)");
    strcpy(c.upstream, "http://127.0.0.1:8000");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), 0);

    strcpy(c.tls_cert, "cert.pem");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--tls-key: required with --tls-cert");
    strcpy(c.tls_key, "key.pem");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), 0);
    c.tls_cert[0] = '\0';
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--tls-cert: required with --tls-key");
    c.tls_key[0] = '\0';
    strcpy(c.tls_client_ca, "ca.pem");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--tls-client-ca: needs --tls-cert and --tls-key");
    c.tls_client_ca[0] = '\0';

    c.upstream_insecure = 1;
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--upstream-insecure: needs an https:// upstream");
    strcpy(c.upstream, "https://127.0.0.1:8443");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), 0);
    strcpy(c.upstream_cert, "c.pem");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--upstream-key: required with --upstream-cert");
    strcpy(c.upstream_key, "k.pem");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), 0);
    strcpy(c.upstream, "http://127.0.0.1:8000");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--upstream-cert: needs an https:// upstream\n"
                        "--upstream-key: needs an https:// upstream\n"
                        "--upstream-insecure: needs an https:// upstream");
    strcpy(c.upstream, "https://127.0.0.1:8443");

    strcpy(c.admin, c.listen);
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "--admin: must differ from --listen "
                        "(127.0.0.1:8080)");
    strcpy(c.admin, "off");
    assert_int_equal(tt_config_check(&c, err, sizeof(err)), 0);
}

/* read a whole file into a malloc'd string */
static char *slurp(const char *name, size_t *len)
{
    FILE *f = fopen(name, "r");
    char *buf;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void test_reference_file(void **state)
{
    struct tt_config c, d;
    char conf[1024], *file, *gen, *dump, *line, *save;
    size_t flen = 0, glen, dlen;
    const char *srcdir = getenv("TT_SRCDIR");
    FILE *f;

    (void)state;
    snprintf(conf, sizeof(conf), "%s/conf/tokentap.conf",
             srcdir ? srcdir : ".");
    file = slurp(conf, &flen);
    if (!file)
        fail_msg("cannot read %s (run from the top of the tree or set "
                 "TT_SRCDIR)", conf);

    /* it parses, to the defaults and a working upstream, and passes the
     * checks (tokentap check-config conf/tokentap.conf) */
    tt_config_defaults(&c);
    if (tt_config_load(&c, conf, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    tt_config_defaults(&d);
    strcpy(d.upstream, TT_CONFIG_REFERENCE_UPSTREAM);
    assert_memory_equal(&c, &d, CFG_VALUES);
    if (tt_config_check(&c, err, sizeof(err)) != 0)
        fail_msg("the reference config fails the checks: %s", err);

    /* it is what the table generates */
    f = tmpfile();
    assert_non_null(f);
    assert_int_equal(tt_config_reference(f), 0);
    glen = (size_t)ftell(f);
    rewind(f);
    gen = malloc(glen + 1);
    assert_int_equal(fread(gen, 1, glen, f), glen);
    gen[glen] = '\0';
    fclose(f);
    if (glen != flen || strcmp(gen, file) != 0)
        fail_msg("conf/tokentap.conf differs from the option table: "
                 "regenerate it with tokentap --print-config-reference");

    /* every key of the table (as the dump lists them) appears set in it */
    f = tmpfile();
    assert_int_equal(tt_config_dump(&d, f), 0);
    dlen = (size_t)ftell(f);
    rewind(f);
    dump = malloc(dlen + 1);
    assert_int_equal(fread(dump, 1, dlen, f), dlen);
    dump[dlen] = '\0';
    fclose(f);
    int keys = 0;
    for (line = strtok_r(dump, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char key[128], pat[160];
        if (line[0] == '[' || line[0] == '\0')
            continue;
        assert_int_equal(sscanf(line, "%127s =", key), 1);
        snprintf(pat, sizeof(pat), "\n%s =", key);
        if (!strstr(file, pat))
            fail_msg("key '%s' missing from %s", key, conf);
        keys++;
    }
    assert_true(keys >= 30);
    free(dump);
    free(gen);
    free(file);
}

static void test_dump_roundtrip(void **state)
{
    struct tt_config c, d;
    char *text;
    size_t len;
    FILE *f;

    (void)state;
    assert_int_equal(load(&c,
        "[proxy]\nworkers = 3\nlog_level = error\n"
        "[upstream]\nupstream = https://[::1]:8443/v1\n"
        "[limits]\nhead_timeout = 1500ms\nmax_body_bytes = 1000\n"
        "buffer_bytes = 2m\n"
        "[slo]\ngoodput = ttft:1 itl:2\n"
        "[slo.m]\ngoodput = e2el:5\n"), 0);
    f = tmpfile();
    assert_int_equal(tt_config_dump(&c, f), 0);
    len = (size_t)ftell(f);
    rewind(f);
    text = malloc(len + 1);
    assert_int_equal(fread(text, 1, len, f), len);
    text[len] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\nhead_timeout = 1500ms\n"));
    assert_non_null(strstr(text, "\nmax_body_bytes = 1000\n"));
    assert_non_null(strstr(text, "\nbuffer_bytes = 2m\n"));
    assert_non_null(strstr(text, "\nupstream_ca =\n"));
    assert_non_null(strstr(text, "\n[slo.m]\ngoodput = e2el:5\n"));
    assert_int_equal(load(&d, text), 0);
    assert_memory_equal(&c, &d, CFG_VALUES);
    free(text);
}

/* the dump of <c>, loaded again, equals <c>; returns the dump text */
static char *dump_reload(const struct tt_config *c)
{
    struct tt_config d;
    char *text;
    size_t len;
    FILE *f = tmpfile();

    assert_non_null(f);
    assert_int_equal(tt_config_dump(c, f), 0);
    len = (size_t)ftell(f);
    rewind(f);
    text = malloc(len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, len, f), len);
    text[len] = '\0';
    fclose(f);
    if (load(&d, text) != 0)
        fail_msg("dump does not reload: %s\n%s", err, text);
    assert_memory_equal(c, &d, CFG_VALUES);
    return text;
}

/*
 * check-config printed "record =#r.jsonl" as "record = #r.jsonl", which
 * reloads as a comment (records off); values with a leading '#' or ';',
 * blanks at either end, quotes or " #" inside are quoted and read back.
 */
static void test_dump_quotes_values_that_would_not_round_trip(void **state)
{
    static const struct { const char *line, *value, *dumped; } cases[] = {
        { "record =#r.jsonl", "#r.jsonl", "\nrecord = \"#r.jsonl\"\n" },
        { "record =;r", ";r", "\nrecord = \";r\"\n" },
        { "record = \" r.jsonl \"", " r.jsonl ", "\nrecord = \" r.jsonl \"\n" },
        { "record = \"a #b\"  # a comment", "a #b", "\nrecord = \"a #b\"\n" },
        { "record = \"x\" ;y\"", "x\" ;y", "\nrecord = \"x\" ;y\"\n" },
        { "record = '\"q\"'", "\"q\"", "\nrecord = \"\"q\"\"\n" },
        { "record = a#b", "a#b", "\nrecord = a#b\n" },
        { "record = r.jsonl # note", "r.jsonl", "\nrecord = r.jsonl\n" },
        { "record = # nothing", "", "\nrecord =\n" },
        { "record = \"\va\"", "\va", "\nrecord = \"\va\"\n" },
    };
    char text[256];
    struct tt_config c;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *dump;
        snprintf(text, sizeof(text), "[upstream]\nupstream = http://h:1\n"
                 "[record]\n%s\n", cases[i].line);
        if (load(&c, text) != 0)
            fail_msg("%s: %s", cases[i].line, err);
        assert_string_equal(c.record, cases[i].value);
        dump = dump_reload(&c);
        if (strstr(dump, cases[i].dumped) == NULL)
            fail_msg("%s: dumped as\n%s", cases[i].line, dump);
        free(dump);
    }
    /* the model SLO sections go through the same printer */
    assert_int_equal(load(&c, "[upstream]\nupstream = http://h:1\n"
                              "[slo.a #b]\ngoodput = ttft:5\n"), 0);
    free(dump_reload(&c));
}

static void test_usage(void **state)
{
    char *text;
    size_t len;
    FILE *f;

    (void)state;
    f = tmpfile();
    tt_config_usage(f);
    len = (size_t)ftell(f);
    rewind(f);
    text = malloc(len + 1);
    assert_int_equal(fread(text, 1, len, f), len);
    text[len] = '\0';
    fclose(f);
    assert_true(strncmp(text, "Usage:\n  tokentap [--config FILE] [--listen "
                        "ADDR:PORT] --upstream URL [options]\n"
                        "  tokentap report RECORDS.jsonl [...]   (options: tokentap report --help)\n"
                        "  tokentap check-config FILE\n"
                        "  tokentap --version | --help\n", 196) == 0);
    assert_non_null(strstr(text, "--max-header-bytes SIZE"));
    assert_non_null(strstr(text, "(default 64k)"));
    assert_non_null(strstr(text, "[limits]"));
    assert_non_null(strstr(text, "--upstream-insecure "));
    free(text);
}

static void test_url(void **state)
{
    struct tt_url u;

    (void)state;
    assert_int_equal(tt_url_parse("http://127.0.0.1:8000", &u, err,
                                  sizeof(err)), 0);
    assert_int_equal(u.tls, 0);
    assert_string_equal(u.host, "127.0.0.1");
    assert_string_equal(u.port, "8000");
    assert_string_equal(u.authority, "127.0.0.1:8000");
    assert_string_equal(u.base_path, "");

    assert_int_equal(tt_url_parse("https://api.openai.com", &u, err,
                                  sizeof(err)), 0);
    assert_int_equal(u.tls, 1);
    assert_string_equal(u.port, "443");
    assert_string_equal(u.authority, "api.openai.com");

    assert_int_equal(tt_url_parse("https://example.com:443/openai/", &u, err,
                                  sizeof(err)), 0);
    assert_string_equal(u.authority, "example.com");
    assert_string_equal(u.port, "443");
    assert_string_equal(u.base_path, "/openai");

    assert_int_equal(tt_url_parse("HTTP://h:80/a/b//", &u, err, sizeof(err)), 0);
    assert_string_equal(u.authority, "h");
    assert_string_equal(u.base_path, "/a/b");

    assert_int_equal(tt_url_parse("http://h/", &u, err, sizeof(err)), 0);
    assert_string_equal(u.base_path, "");

    assert_int_equal(tt_url_parse("http://[::1]:8000/v1", &u, err,
                                  sizeof(err)), 0);
    assert_string_equal(u.host, "::1");
    assert_string_equal(u.port, "8000");
    assert_string_equal(u.authority, "[::1]:8000");
    assert_string_equal(u.base_path, "/v1");

    assert_int_equal(tt_url_parse("https://[2001:db8::2]", &u, err,
                                  sizeof(err)), 0);
    assert_string_equal(u.authority, "[2001:db8::2]");
    assert_string_equal(u.port, "443");

    assert_int_equal(tt_url_parse("http://h:443", &u, err, sizeof(err)), 0);
    assert_string_equal(u.authority, "h:443");

#define URL_ERR(url, msg) do { \
        assert_int_equal(tt_url_parse(url, &u, err, sizeof(err)), -1); \
        assert_string_equal(err, msg); \
    } while (0)
    URL_ERR("ftp://h", "expected an http:// or https:// URL, got 'ftp://h'");
    URL_ERR("h:80", "expected an http:// or https:// URL, got 'h:80'");
    URL_ERR("", "expected an http:// or https:// URL, got ''");
    URL_ERR("http://", "missing host in 'http://'");
    URL_ERR("http:///v1", "missing host in 'http:///v1'");
    URL_ERR("http://:80", "missing host in 'http://:80'");
    URL_ERR("http://h:", "bad port '' (expected 1..65535)");
    URL_ERR("http://h:0", "bad port '0' (expected 1..65535)");
    URL_ERR("http://h:65536", "bad port '65536' (expected 1..65535)");
    URL_ERR("http://h:8x", "bad port '8x' (expected 1..65535)");
    URL_ERR("http://h:123456", "bad port '123456' (expected 1..65535)");
    URL_ERR("http://[::1", "unterminated IPv6 literal in 'http://[::1'");
    URL_ERR("http://[]", "bad IPv6 literal in 'http://[]'");
    URL_ERR("http://[zz]:80", "bad IPv6 literal '[zz]'");
    URL_ERR("http://[::1]x", "unexpected text after ']' in 'http://[::1]x'");
    URL_ERR("http://u:p@h", "credentials in the URL are not supported: "
            "'http://u:p@h'");
    URL_ERR("http://h/v1?x=1", "query or fragment not allowed in the upstream "
            "URL 'http://h/v1?x=1'");
    URL_ERR("http://h#f", "query or fragment not allowed in the upstream URL "
            "'http://h#f'");
    URL_ERR("http://h/a b", "bad character in the URL path of 'http://h/a b'");
    URL_ERR("http://h!/", "bad host 'h!'");
#undef URL_ERR
}

static void test_addr(void **state)
{
    struct sockaddr_storage ss;
    socklen_t len;

    (void)state;
    assert_int_equal(tt_addr_parse("127.0.0.1:8080", &ss, &len, err,
                                   sizeof(err)), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 8080);
    assert_int_equal(tt_addr_parse("[::]:443", &ss, &len, err, sizeof(err)), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(len, sizeof(struct sockaddr_in6));
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 443);
    assert_int_equal(tt_addr_parse("0.0.0.0:0", NULL, NULL, err,
                                   sizeof(err)), 0);

    assert_int_equal(tt_addr_parse("::1:80", NULL, NULL, err, sizeof(err)), -1);
    assert_int_equal(tt_addr_parse("localhost:80", NULL, NULL, err,
                                   sizeof(err)), -1);
    assert_int_equal(tt_addr_parse("1.2.3.4", NULL, NULL, err, sizeof(err)), -1);
    assert_int_equal(tt_addr_parse(":80", NULL, NULL, err, sizeof(err)), -1);
    assert_int_equal(tt_addr_parse("1.2.3.4:", NULL, NULL, err,
                                   sizeof(err)), -1);
    assert_string_equal(err, "bad port in '1.2.3.4:' (expected 0..65535)");
    assert_int_equal(tt_addr_parse("[::1]80", NULL, NULL, err, sizeof(err)), -1);
    assert_int_equal(tt_addr_parse("[fe80::zz]:80", NULL, NULL, err,
                                   sizeof(err)), -1);
    assert_string_equal(err, "bad IPv6 address '[fe80::zz]'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_defaults, teardown),
        cmocka_unit_test_teardown(test_types, teardown),
        cmocka_unit_test_teardown(test_quoted_values, teardown),
        cmocka_unit_test_teardown(test_size_and_bool_forms, teardown),
        cmocka_unit_test_teardown(test_bad_values, teardown),
        cmocka_unit_test_teardown(test_structure_errors, teardown),
        cmocka_unit_test_teardown(test_model_slo_sections, teardown),
        cmocka_unit_test_teardown(test_args, teardown),
        cmocka_unit_test_teardown(test_args_errors, teardown),
        cmocka_unit_test_teardown(test_args_override_file, teardown),
        cmocka_unit_test_teardown(test_every_error_and_the_file_named, teardown),
        cmocka_unit_test_teardown(test_check, teardown),
        cmocka_unit_test_teardown(test_reference_file, teardown),
        cmocka_unit_test_teardown(test_dump_roundtrip, teardown),
        cmocka_unit_test_teardown(test_dump_quotes_values_that_would_not_round_trip, teardown),
        cmocka_unit_test_teardown(test_usage, teardown),
        cmocka_unit_test_teardown(test_url, teardown),
        cmocka_unit_test_teardown(test_addr, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
