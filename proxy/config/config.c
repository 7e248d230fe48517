/*
 * Configuration (see proxy/config/config.h).  One static table, opts[], describes
 * every option: its config-file section and key, the command-line flag
 * derived from the key (max_header_bytes <-> --max-header-bytes), its type,
 * where it lives in struct tt_config, its default and its help.  Defaults,
 * the file parser, the flag parser, --help, the dump used by check-config
 * and the reference file conf/tokentap.conf are all generated from it.
 *
 * Called by proxy/server/main.c at start-up, by check-config and on SIGHUP
 * reload (always from one thread: the file parser sets libinih's
 * process-wide options before each parse).
 *
 * Value syntax:
 *   string    taken as is (leading/trailing blanks stripped in the file)
 *   bool      true/false, yes/no, on/off, 1/0; a bare flag means true
 *   uint      decimal integer within the option's range
 *   size      bytes, or with a binary suffix k/K, m/M, g/G (KiB, MiB, GiB)
 *   duration  an integer with a unit, always: ms, s or m (10s, 500ms, 5m)
 *   enum      one of the listed names
 */
#include <ctype.h>
#include <errno.h>
#include <unistd.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "metrics/request.h"
#include "metrics/semconv.h"
#include "metrics/slo.h"
#include "proxy/config/config.h"
#include "proxy/base/log.h"
#include "proxy/base/man.h"
#include "proxy/decode/stream.h"
#include "proxy/base/url.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

_Static_assert(TT_CONFIG_SLO_MODELS == TT_SLO_MODELS_MAX,
               "[slo.MODEL] sections and the SLO set hold as many models");
_Static_assert(sizeof(((struct tt_config_model_slo *)0)->model) ==
               TT_SLO_MODEL_LEN, "model name buffers agree");
_Static_assert(TT_THINK_AUTO == 0 && TT_THINK_ON == 1 && TT_THINK_OFF == 2,
               "think_names[] follows enum tt_think_mode");
_Static_assert(TT_LOG_LOGFMT == 0 && TT_LOG_JSON == 1,
               "log_format_names[] follows enum tt_log_format");

enum sect { S_PROXY, S_UPSTREAM, S_TLS, S_ADMIN, S_RECORD, S_SLO, S_LIMITS,
            S_TRACE, S__COUNT };

static const char *const sect_names[S__COUNT] = {
    "proxy", "upstream", "tls", "admin", "record", "slo", "limits", "trace",
};

static const char *const sect_help[S__COUNT] = {
    "client side listener and process",
    "the model server",
    "TLS termination on the client listener",
    "admin listener: /metrics, /healthz, /readyz, /stats",
    "per-request JSONL records",
    "SLOs of a good request, for goodput",
    "limits and timeouts",
    "OpenTelemetry spans over OTLP/HTTP, W3C trace context (docs/traces.md)",
};

enum otype { T_STR, T_BOOL, T_UINT, T_SIZE, T_DUR, T_ENUM, T_FRAC };

typedef int (*check_fn)(const char *v, char *err, size_t errlen);

struct opt {
    const char *key;            /* file key; the flag is "--" + key, '_' -> '-' */
    unsigned char sect;         /* enum sect */
    unsigned char type;         /* enum otype */
    size_t off;                 /* offset in struct tt_config (shadow_opts[]:
                                 * in struct tt_shadow_cfg) */
    size_t size;                /* sizeof the field (string: buffer size) */
    const char *def;            /* default, in the same syntax as the file */
    const char *meta;           /* metavariable in --help */
    unsigned long long min, max;            /* T_UINT, T_SIZE, T_DUR (ms) */
    const char *const *names;   /* T_ENUM, NULL-terminated */
    check_fn check;             /* T_STR extra validation, or NULL */
    const char *help;           /* one line */
};

static const char *const log_names[] = { "error", "warn", "info", "debug", NULL };
static const char *const log_format_names[] = { "logfmt", "json", NULL };
static const char *const think_names[] = { "auto", "on", "off", NULL };
static const char *const cancel_names[] = { "cancel", "finish", NULL };
static const char *const onoff_names[] = { "off", "on", NULL };
static const char *const otlp_protocol_names[] = { "http/protobuf", "http/json", NULL };

static int check_listen(const char *v, char *err, size_t errlen);
static int check_admin(const char *v, char *err, size_t errlen);
static int check_upstream(const char *v, char *err, size_t errlen);
static int check_goodput(const char *v, char *err, size_t errlen);
static int check_paths(const char *v, char *err, size_t errlen);
static int check_header_name(const char *v, char *err, size_t errlen);
static int check_otlp_endpoint(const char *v, char *err, size_t errlen);
static int check_otlp_header(const char *v, char *err, size_t errlen);
static int opt_set(void *base, const struct opt *o, const char *v,
                   char *err, size_t errlen);
static int key_index(const char *key);

#define F(field) offsetof(struct tt_config, field), \
                 sizeof(((struct tt_config *)0)->field)
#define KIB 1024ULL
#define MIB (1024ULL * 1024)
#define GIB (1024ULL * 1024 * 1024)
#define SEC 1000ULL
#define DAY (86400ULL * 1000)

static const struct opt opts[] = {
    /* [proxy] */
    { "listen", S_PROXY, T_STR, F(listen), "127.0.0.1:8080", "ADDR:PORT",
      0, 0, NULL, check_listen,
      "client listener, IPV4:PORT or [IPV6]:PORT" },
    { "workers", S_PROXY, T_UINT, F(workers), "1", "N", 1, 256, NULL, NULL,
      "event-loop threads (SO_REUSEPORT), 1..256" },
    { "log_level", S_PROXY, T_ENUM, F(log_level), "info", "LEVEL", 0, 0,
      log_names, NULL, "log verbosity: error, warn, info or debug" },
    { "log_format", S_PROXY, T_ENUM, F(log_format), "logfmt", "FORMAT", 0, 0,
      log_format_names, NULL,
      "log and access log lines: logfmt or json" },
    { "log_file", S_PROXY, T_STR, F(log_file), "", "FILE", 0, 0, NULL, NULL,
      "log to FILE (reopened on SIGHUP), empty = stderr" },
    { "access_log", S_PROXY, T_STR, F(access_log), "", "FILE", 0, 0, NULL,
      NULL, "a line per request (reopened on SIGHUP), - = stdout" },
    { "think_tags", S_PROXY, T_ENUM, F(think_tags), "auto", "MODE", 0, 0,
      think_names, NULL,
      "<think>..</think> as reasoning: auto, on, off" },
    { "add_request_id", S_PROXY, T_BOOL, F(add_request_id), "false", NULL,
      0, 0, NULL, NULL,
      "add X-Request-Id upstream when absent" },
    { "inject_usage", S_PROXY, T_BOOL, F(inject_usage), "false", NULL,
      0, 0, NULL, NULL,
      "OpenAI streams: ask for usage upstream, remove it before the client" },
    { "delivery", S_PROXY, T_ENUM, F(delivery), "on", "on|off", 0, 0,
      onoff_names, NULL,
      "client acknowledgements: client TTFT and latency (Linux)" },
    { "drain_timeout", S_PROXY, T_DUR, F(drain_timeout_ms), "30s", "DURATION",
      0, DAY, NULL, NULL,
      "SIGTERM grace period for in-flight streams" },
    { "ready_file", S_PROXY, T_STR, F(ready_file), "", "FILE", 0, 0, NULL, NULL,
      "once listening: bound addresses as JSON here" },
    /* [upstream] */
    { "upstream", S_UPSTREAM, T_STR, F(upstream), "", "URL", 0, 0, NULL,
      check_upstream,
      "model server, http[s]://HOST[:PORT][/BASE]" },
    { "upstream_ca", S_UPSTREAM, T_STR, F(upstream_ca), "", "FILE", 0, 0,
      NULL, NULL,
      "CA bundle (PEM) to verify it (else system CAs)" },
    { "upstream_cert", S_UPSTREAM, T_STR, F(upstream_cert), "", "FILE", 0, 0,
      NULL, NULL, "client certificate (PEM) shown to upstream" },
    { "upstream_key", S_UPSTREAM, T_STR, F(upstream_key), "", "FILE", 0, 0,
      NULL, NULL, "private key (PEM) of upstream_cert" },
    { "upstream_insecure", S_UPSTREAM, T_BOOL, F(upstream_insecure), "false",
      NULL, 0, 0, NULL, NULL,
      "skip upstream certificate checks (testing)" },
    { "upstream_pool", S_UPSTREAM, T_UINT, F(upstream_pool), "64", "N",
      0, 65536, NULL, NULL,
      "idle keep-alive connections kept (0: none)" },
    { "upstream_pool_idle_timeout", S_UPSTREAM, T_DUR, F(upstream_pool_idle_ms), "4s",
      "DURATION", 1, DAY, NULL, NULL,
      "close pooled connections idle this long (below the server's own)" },
    /* [tls] */
    { "tls_cert", S_TLS, T_STR, F(tls_cert), "", "FILE", 0, 0, NULL, NULL,
      "certificate chain (PEM): serve TLS to clients" },
    { "tls_key", S_TLS, T_STR, F(tls_key), "", "FILE", 0, 0, NULL, NULL,
      "private key (PEM) of tls_cert" },
    { "tls_client_ca", S_TLS, T_STR, F(tls_client_ca), "", "FILE", 0, 0, NULL,
      NULL, "require client certificates from these CAs" },
    /* [admin] */
    { "admin", S_ADMIN, T_STR, F(admin), "127.0.0.1:9464", "ADDR:PORT", 0, 0,
      NULL, check_admin,
      "/metrics /healthz /readyz /stats, or off" },
    { "admin_max_connections", S_ADMIN, T_UINT, F(admin_max_connections), "64",
      "N", 1, 10000, NULL, NULL,
      "concurrent admin connections (503 beyond)" },
    { "model_label_cap", S_ADMIN, T_UINT, F(model_label_cap), "32", "N",
      1, 10000, NULL, NULL,
      "distinct model labels, then __other__" },
    { "metrics_semconv", S_ADMIN, T_ENUM, F(metrics_semconv), "tokentap", "SET", 0, 0,
      tt_semconv_names, NULL,
      "/metrics families: tokentap (tokentap_*), both, otel (OpenTelemetry gen_ai_*)" },
    /* [record] */
    { "record", S_RECORD, T_STR, F(record), "", "FILE", 0, 0, NULL, NULL,
      "JSONL records file, - = stdout, empty = off" },
    { "record_queue", S_RECORD, T_UINT, F(record_queue), "4096", "N",
      1, 1048576, NULL, NULL,
      "records queued before drops (counted)" },
    { "compare_output", S_RECORD, T_BOOL, F(compare_output), "false", NULL,
      0, 0, NULL, NULL,
      "64-bit digest of the answer text in records (shadow exact-match)" },
    /* [slo] */
    { "goodput", S_SLO, T_STR, F(goodput), "", "SPEC", 0, 0, NULL,
      check_goodput,
      "TAG:VALUE ..., e.g. \"ttft:500 itl:50\"" },
    /* [limits] */
    { "max_header_bytes", S_LIMITS, T_SIZE, F(max_header_bytes), "64k", "SIZE",
      1 * KIB, 16 * MIB, NULL, NULL,
      "request header block (431 beyond)" },
    { "max_headers", S_LIMITS, T_UINT, F(max_headers), "100", "N", 1, 10000,
      NULL, NULL, "request header fields (431 beyond)" },
    { "max_body_bytes", S_LIMITS, T_SIZE, F(max_body_bytes), "32m", "SIZE",
      1, 64 * GIB, NULL, NULL, "request body (413 beyond)" },
    { "buffer_bytes", S_LIMITS, T_SIZE, F(buffer_bytes), "256k", "SIZE",
      4 * KIB, 1 * GIB, NULL, NULL,
      "per-direction buffer before backpressure" },
    { "head_timeout", S_LIMITS, T_DUR, F(head_timeout_ms), "10s", "DURATION",
      1, DAY, NULL, NULL,
      "deadline for a whole request head (408)" },
    { "connect_timeout", S_LIMITS, T_DUR, F(connect_timeout_ms), "5s",
      "DURATION", 1, DAY, NULL, NULL,
      "upstream connect, TLS handshake included" },
    { "response_timeout", S_LIMITS, T_DUR, F(response_timeout_ms), "600s",
      "DURATION", 1, DAY, NULL, NULL,
      "upstream time to response headers" },
    { "upstream_idle_timeout", S_LIMITS, T_DUR, F(upstream_idle_ms), "300s",
      "DURATION", 1, DAY, NULL, NULL,
      "longest gap between upstream bytes" },
    { "client_idle_timeout", S_LIMITS, T_DUR, F(client_idle_ms), "75s",
      "DURATION", 1, DAY, NULL, NULL,
      "idle client keep-alive connection" },
    { "body_idle_timeout", S_LIMITS, T_DUR, F(body_idle_ms), "60s", "DURATION",
      1, DAY, NULL, NULL,
      "longest gap in a request body while the client owes bytes (408)" },
    { "send_timeout", S_LIMITS, T_DUR, F(send_timeout_ms), "60s", "DURATION",
      1, DAY, NULL, NULL,
      "client not taking response bytes this long: cut (499), upstream closed" },
    { "max_connections", S_LIMITS, T_UINT, F(max_connections), "20000", "N",
      1, 1000000, NULL, NULL, "concurrent client connections per worker (503 beyond)" },
    { "inspect_max_bytes", S_LIMITS, T_SIZE, F(inspect_max_bytes), "1m", "SIZE",
      1 * KIB, 64 * MIB, NULL, NULL,
      "per request: body bytes read for model, stream, max_tokens" },
    { "max_event_bytes", S_LIMITS, T_SIZE, F(max_event_bytes), "1m", "SIZE",
      4 * KIB, 64 * MIB, NULL, NULL,
      "one decoded event (SSE event, NDJSON line, WebSocket message inflated): longer ones "
      "pass, not decoded, counted" },
    { "inspect_budget", S_LIMITS, T_SIZE, F(inspect_budget), "64m", "SIZE",
      64 * KIB, 64 * GIB, NULL, NULL,
      "all body copies together, process-wide" },
    /* [trace] */
    { "otlp_endpoint", S_TRACE, T_STR, F(otlp_endpoint), "", "URL", 0, 0, NULL,
      check_otlp_endpoint,
      "export a span per request to URL/v1/traces (OTLP/HTTP), empty = off" },
    { "otlp_protocol", S_TRACE, T_ENUM, F(otlp_protocol), "http/protobuf", "PROTOCOL",
      0, 0, otlp_protocol_names, NULL,
      "span encoding: http/protobuf or http/json" },
    { "otlp_header", S_TRACE, T_STR, F(otlp_header), "", "K=V", 0, 0, NULL,
      check_otlp_header,
      "header sent with each export, e.g. authorization (repeatable; K=V,K=V)" },
    { "otlp_queue", S_TRACE, T_UINT, F(otlp_queue), "4096", "N", 1, 1048576,
      NULL, NULL, "spans queued for the exporter before drops (counted)" },
    { "otlp_ca", S_TRACE, T_STR, F(otlp_ca), "", "FILE", 0, 0, NULL, NULL,
      "CA bundle (PEM) to verify an https receiver (else system CAs)" },
    { "trace_propagate", S_TRACE, T_BOOL, F(trace_propagate), "false", NULL,
      0, 0, NULL, NULL,
      "send traceparent upstream naming tokentap's span (changes forwarded bytes)" },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))
_Static_assert(N_OPTS <= TT_CONFIG_KEYS, "tt_config_src.line[] holds every key");

/*
 * The keys of a [shadow.NAME] section (offsets in struct tt_shadow_cfg);
 * --shadow NAME=URL sets url, --shadow-set NAME.KEY=VALUE any key.
 * set_header and remove_header may repeat (handled in load_shadow_key()).
 */
#define SF(field) offsetof(struct tt_shadow_cfg, field), \
                  sizeof(((struct tt_shadow_cfg *)0)->field)
static const struct opt shadow_opts[] = {
    { "url", 0, T_STR, SF(url), "", "URL", 0, 0, NULL, check_upstream,
      "candidate server, http[s]://HOST[:PORT][/BASE] (required)" },
    { "sample", 0, T_FRAC, SF(sample), "1", "FRACTION", 0, 0, NULL, NULL,
      "fraction of eligible requests mirrored, 0..1" },
    { "sample_key", 0, T_STR, SF(sample_key), "", "HEADER", 0, 0, NULL,
      check_header_name,
      "request header hashed for the decision (same value, same decision)" },
    { "max_inflight", 0, T_UINT, SF(max_inflight), "64", "N", 1, 100000,
      NULL, NULL, "mirrored requests in flight at once, then dropped" },
    { "paths", 0, T_STR, SF(paths), "llm", "APIS", 0, 0, NULL, check_paths,
      "APIs mirrored: llm (every decoded API) or a list, e.g. openai.chat" },
    { "ca", 0, T_STR, SF(ca), "", "FILE", 0, 0, NULL, NULL,
      "CA bundle (PEM) to verify it (else system CAs)" },
    { "cert", 0, T_STR, SF(cert), "", "FILE", 0, 0, NULL, NULL,
      "client certificate (PEM) shown to it" },
    { "key", 0, T_STR, SF(key), "", "FILE", 0, 0, NULL, NULL,
      "private key (PEM) of cert" },
    { "insecure", 0, T_BOOL, SF(insecure), "false", NULL, 0, 0, NULL, NULL,
      "skip its certificate checks (testing)" },
    { "connect_timeout", 0, T_DUR, SF(connect_timeout_ms), "5s", "DURATION",
      1, DAY, NULL, NULL, "connect and TLS handshake" },
    { "response_timeout", 0, T_DUR, SF(response_timeout_ms), "600s",
      "DURATION", 1, DAY, NULL, NULL, "time to response headers" },
    { "idle_timeout", 0, T_DUR, SF(idle_timeout_ms), "300s", "DURATION",
      1, DAY, NULL, NULL, "longest gap between its bytes" },
    { "on_client_cancel", 0, T_ENUM, SF(on_client_cancel), "cancel", "MODE",
      0, 0, cancel_names, NULL,
      "client gone mid-response: cancel the shadow too, or finish it" },
    { "buffer_bytes", 0, T_SIZE, SF(buffer_bytes), "1m", "SIZE",
      4 * KIB, 1 * GIB, NULL, NULL,
      "request bytes held for it before the copy is dropped" },
    { "pool", 0, T_UINT, SF(pool), "16", "N", 0, 65536, NULL, NULL,
      "idle keep-alive connections kept" },
    { "max_read_rate", 0, T_SIZE, SF(max_read_rate), "8m", "SIZE", 64 * KIB, 1 * GIB,
      NULL, NULL,
      "response bytes read per second per connection (a huge answer cannot starve the primary)" },
};
#define N_SHADOW_OPTS (sizeof(shadow_opts) / sizeof(shadow_opts[0]))
#define SHADOW_PREFIX "shadow."

#define SLO_MODEL_PREFIX "slo."

/* ---------------------------------------------------------------- values */

static int check_listen(const char *v, char *err, size_t errlen)
{
    return tt_addr_parse(v, NULL, NULL, err, errlen);
}

static int check_admin(const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "off") == 0)
        return 0;
    if (tt_addr_parse(v, NULL, NULL, err, errlen) < 0) {
        if (strncmp(err, "expected ", 9) == 0)
            snprintf(err, errlen, "expected ADDR:PORT or off, got '%.200s'", v);
        return -1;
    }
    return 0;
}

static int check_otlp_endpoint(const char *v, char *err, size_t errlen)
{
    if (*v == '\0')
        return 0;
    if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
        snprintf(err, errlen, "expected an http:// or https:// URL, got '%.200s'", v);
        return -1;
    }
    {
        const char *host = strstr(v, "//") + 2;
        const char *at = strchr(host, '@'), *sl = strchr(host, '/');
        if (at != NULL && (sl == NULL || at < sl)) {
            snprintf(err, errlen, "credentials in the URL are not accepted "
                     "(send them with otlp_header)");
            return -1;
        }
    }
    if (strchr(v, ' ') != NULL || strchr(v, '?') != NULL || strchr(v, '#') != NULL) {
        snprintf(err, errlen, "expected a URL without blanks, query or fragment, "
                 "got '%.200s'", v);
        return -1;
    }
    return 0;
}

/* K=V[,K=V...]: a header name (token characters), '=', a value; the
 * value is secret and never shown in a message */
static int check_otlp_header(const char *v, char *err, size_t errlen)
{
    const char *p = v;

    while (*p) {
        const char *end = strchr(p, ','), *eq;
        size_t len = end ? (size_t)(end - p) : strlen(p), n;

        eq = memchr(p, '=', len);
        if (eq == NULL || eq == p) {
            snprintf(err, errlen, "expected NAME=VALUE (a list separated by commas)");
            return -1;
        }
        for (n = 0; p + n < eq; n++)
            if (!isalnum((unsigned char)p[n]) && strchr("!#$%&'*+-.^_`|~", p[n]) == NULL) {
                snprintf(err, errlen, "'%.*s' is not a header name",
                         (int)((size_t)(eq - p) > 64 ? 64 : (size_t)(eq - p)), p);
                return -1;
            }
        for (const char *q = eq + 1; q < p + len; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t') {
                snprintf(err, errlen, "control character in the value of '%.*s'",
                         (int)((size_t)(eq - p) > 64 ? 64 : (size_t)(eq - p)), p);
                return -1;
            }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int check_upstream(const char *v, char *err, size_t errlen)
{
    struct tt_url u;

    if (*v == '\0')         /* unset; tt_config_check() requires it */
        return 0;
    return tt_url_parse(v, &u, err, errlen);
}

/* tt_slo_parse()'s messages start with "goodput: ", already said by our
 * "key 'goodput'" or "--goodput" prefix */
static int check_goodput(const char *v, char *err, size_t errlen)
{
    struct tt_slo slo;
    char tmp[1024];

    if (tt_slo_parse(v, &slo, tmp, sizeof(tmp)) == 0)
        return 0;
    snprintf(err, errlen, "%s",
             strncmp(tmp, "goodput: ", 9) == 0 ? tmp + 9 : tmp);
    return -1;
}

/* "llm", or a comma/space separated list of decoded API names */
static int check_paths(const char *v, char *err, size_t errlen)
{
    const char *p = v;

    if (strcmp(v, "llm") == 0)
        return 0;
    while (*p) {
        size_t n;
        int api, found = 0;
        while (*p == ',' || *p == ' ')
            p++;
        n = strcspn(p, ", ");
        if (n == 0)
            break;
        for (api = 1; api < TT_API__COUNT; api++)
            if (strlen(tt_api_name((enum tt_api)api)) == n &&
                strncmp(tt_api_name((enum tt_api)api), p, n) == 0)
                found = 1;
        if (!found) {
            snprintf(err, errlen, "'%.*s' is not a decoded API (llm, or a list "
                     "of: openai.chat, openai.completions, openai.responses, "
                     "anthropic.messages, gemini, ollama, tgi ...)",
                     (int)(n > 64 ? 64 : n), p);
            return -1;
        }
        p += n;
    }
    return 0;
}

/* an HTTP token (RFC 9110 5.6.2) */
static int check_header_name(const char *v, char *err, size_t errlen)
{
    for (const char *p = v; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("!#$%&'*+-.^_`|~", *p))) {
            snprintf(err, errlen, "'%.100s' is not a header name", v);
            return -1;
        }
    return 0;
}

/* shadow names become label values and record fields: keep them plain */
static int check_shadow_name(const char *v, char *err, size_t errlen)
{
    size_t n = strlen(v);

    if (n == 0 || n >= TT_SHADOW_NAME_LEN) {
        snprintf(err, errlen, "shadow name must be 1..%d characters",
                 TT_SHADOW_NAME_LEN - 1);
        return -1;
    }
    for (const char *p = v; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')) {
            snprintf(err, errlen, "shadow name '%.40s': only letters, digits, "
                     "'_', '-' and '.'", v);
            return -1;
        }
    if (strcmp(v, "primary") == 0) {
        snprintf(err, errlen, "shadow name 'primary' is the primary upstream's");
        return -1;
    }
    return 0;
}

/*
 * The shadow named <name> (<len> bytes), created with its defaults when
 * new.  Returns it, or NULL with <err> set (bad name, too many).
 */
static struct tt_shadow_cfg *shadow_get(struct tt_config *c, const char *name,
                                        size_t len, char *err, size_t errlen)
{
    char nm[TT_SHADOW_NAME_LEN + 8];
    struct tt_shadow_cfg *sh;

    if (len >= sizeof(nm))
        len = sizeof(nm) - 1;
    memcpy(nm, name, len);
    nm[len] = '\0';
    if (check_shadow_name(nm, err, errlen) < 0)
        return NULL;
    for (unsigned i = 0; i < c->n_shadows; i++)
        if (strcmp(c->shadows[i].name, nm) == 0)
            return &c->shadows[i];
    if (c->n_shadows == TT_MAX_SHADOWS) {
        snprintf(err, errlen, "too many shadows (max %d)", TT_MAX_SHADOWS);
        return NULL;
    }
    sh = &c->shadows[c->n_shadows++];
    memset(sh, 0, sizeof(*sh));
    for (size_t i = 0; i < N_SHADOW_OPTS; i++)
        if (opt_set(sh, &shadow_opts[i], shadow_opts[i].def, err, errlen) < 0)
            abort();    /* a bad default in shadow_opts[]: caught by the unit tests */
    memcpy(sh->name, nm, len + 1);
    return sh;
}

/*
 * Set key <key> of shadow <sh> to <v>.  set_header ("Name: value") and
 * remove_header ("Name") add one edit per call.  Returns 0, or -1 with
 * <err> set to the reason alone.
 */
static int shadow_set(struct tt_shadow_cfg *sh, const char *key, const char *v,
                      char *err, size_t errlen)
{
    if (strcmp(key, "set_header") == 0 || strcmp(key, "remove_header") == 0) {
        int set = key[0] == 's';
        unsigned *n = set ? &sh->n_set : &sh->n_remove;
        size_t cap = set ? sizeof(sh->set_header[0]) : sizeof(sh->remove_header[0]);
        char name[64];
        size_t nl = set ? strcspn(v, ":") : strlen(v);

        if (*n == TT_SHADOW_EDITS) {
            snprintf(err, errlen, "at most %d %s lines", TT_SHADOW_EDITS, key);
            return -1;
        }
        if (strlen(v) >= cap || nl >= sizeof(name) || nl == 0 ||
            (set && v[nl] != ':')) {
            snprintf(err, errlen, set ? "expected 'Name: value' (max %zu bytes)"
                                      : "expected a header name (max %zu bytes)",
                     set ? cap - 1 : sizeof(name) - 1);
            return -1;
        }
        memcpy(name, v, nl);
        name[nl] = '\0';
        if (check_header_name(name, err, errlen) < 0)
            return -1;
        if (set && (strchr(v, '\r') || strchr(v, '\n'))) {
            snprintf(err, errlen, "header value must be one line");
            return -1;
        }
        memcpy(set ? sh->set_header[*n] : sh->remove_header[*n], v, strlen(v) + 1);
        (*n)++;
        return 0;
    }
    for (size_t i = 0; i < N_SHADOW_OPTS; i++)
        if (strcmp(shadow_opts[i].key, key) == 0)
            return opt_set(sh, &shadow_opts[i], v, err, errlen);
    snprintf(err, errlen, "unknown shadow key '%.60s' (known: url, sample, "
             "sample_key, max_inflight, paths, ca, cert, key, insecure, "
             "connect_timeout, response_timeout, idle_timeout, "
             "on_client_cancel, buffer_bytes, pool, max_read_rate, set_header, "
             "remove_header)",
             key);
    return -1;
}

/* parse the leading decimal digits of <s> into <v>; returns the end, or
 * NULL when there are none or on overflow */
static const char *parse_digits(const char *s, unsigned long long *v)
{
    unsigned long long n = 0;
    const char *p = s;

    while (*p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (n > (ULLONG_MAX - d) / 10)
            return NULL;
        n = n * 10 + d;
        p++;
    }
    if (p == s)
        return NULL;
    *v = n;
    return p;
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = { "true", "yes", "on", "1" };
    static const char *const no[] = { "false", "no", "off", "0" };

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* "64k" -> 65536; suffixes k/m/g (either case) optionally followed by "iB" */
static int parse_size(const char *v, unsigned long long *out)
{
    unsigned long long n, mul = 1;
    const char *p = parse_digits(v, &n);

    if (!p)
        return -1;
    switch (*p) {
    case 'k': case 'K': mul = KIB; p++; break;
    case 'm': case 'M': mul = MIB; p++; break;
    case 'g': case 'G': mul = GIB; p++; break;
    default: break;
    }
    if (mul > 1 && strcmp(p, "iB") == 0)
        p += 2;
    if (*p != '\0' || (n && mul > ULLONG_MAX / n))
        return -1;
    *out = n * mul;
    return 0;
}

/* "10s" -> 10000 (ms); the unit is required: ms, s or m */
static int parse_duration(const char *v, unsigned long long *out)
{
    unsigned long long n, mul;
    const char *p = parse_digits(v, &n);

    if (!p)
        return -1;
    /* the units goodput limits take too (metrics/slo.c); whole ms here */
    double u = tt_duration_unit_ms(p, strlen(p));
    if (u < 1)
        return -1;
    mul = (unsigned long long)u;
    if (n && mul > ULLONG_MAX / n)
        return -1;
    *out = n * mul;
    return 0;
}

static void fmt_size(unsigned long long v, char *buf, size_t len)
{
    if (v && v % GIB == 0)
        snprintf(buf, len, "%llug", v / GIB);
    else if (v && v % MIB == 0)
        snprintf(buf, len, "%llum", v / MIB);
    else if (v && v % KIB == 0)
        snprintf(buf, len, "%lluk", v / KIB);
    else
        snprintf(buf, len, "%llu", v);
}

static void fmt_duration(unsigned long long ms, char *buf, size_t len)
{
    if (ms % SEC == 0)
        snprintf(buf, len, "%llus", ms / SEC);
    else
        snprintf(buf, len, "%llums", ms);
}

static void store_num(void *field, size_t size, unsigned long long v)
{
    if (size == sizeof(size_t))
        *(size_t *)field = (size_t)v;
    else
        *(unsigned *)field = (unsigned)v;     /* int and unsigned fields */
}

static unsigned long long load_num(const void *field, size_t size)
{
    if (size == sizeof(size_t))
        return *(const size_t *)field;
    return *(const unsigned *)field;
}

/*
 * Parse <v> as the value of <o> and store it into <c>.  Returns 0, or -1
 * with <err> set to the reason alone (the caller adds "FILE:LINE: key 'K': "
 * or "--flag: ").  <c> is left untouched on error.
 */
static int opt_set(void *base, const struct opt *o, const char *v,
                   char *err, size_t errlen)
{
    char *field = (char *)base + o->off;
    char lo[32], hi[32];
    unsigned long long n;
    int b;

    switch (o->type) {
    case T_STR:
        if (strlen(v) >= o->size) {
            snprintf(err, errlen, "value too long (max %zu bytes)", o->size - 1);
            return -1;
        }
        if (o->check && o->check(v, err, errlen) < 0)
            return -1;
        if (o->check == check_otlp_header && field[0] && v[0]) {
            /* repeatable: each flag adds to the list */
            size_t have = strlen(field);
            if (have + 1 + strlen(v) >= o->size) {
                snprintf(err, errlen, "too many headers (max %zu bytes)", o->size - 1);
                return -1;
            }
            field[have] = ',';
            memcpy(field + have + 1, v, strlen(v) + 1);
            return 0;
        }
        memset(field, 0, o->size);      /* no tail of an older value */
        memcpy(field, v, strlen(v));
        return 0;
    case T_BOOL:
        if (parse_bool(v, &b) < 0) {
            snprintf(err, errlen, "expected true or false, got '%.200s'", v);
            return -1;
        }
        *(int *)field = b;
        return 0;
    case T_UINT: {
        const char *end = parse_digits(v, &n);
        if (!end || *end != '\0') {
            snprintf(err, errlen, "expected an integer, got '%.200s'", v);
            return -1;
        }
        if (n < o->min || n > o->max) {
            snprintf(err, errlen, "%llu out of range (%llu..%llu)", n, o->min,
                     o->max);
            return -1;
        }
        store_num(field, o->size, n);
        return 0;
    }
    case T_SIZE:
        if (parse_size(v, &n) < 0) {
            snprintf(err, errlen, "expected a size in bytes, optionally with "
                     "k, m or g (KiB, MiB, GiB), got '%.200s'", v);
            return -1;
        }
        if (n < o->min || n > o->max) {
            fmt_size(o->min, lo, sizeof(lo));
            fmt_size(o->max, hi, sizeof(hi));
            snprintf(err, errlen, "'%.200s' out of range (%s..%s)", v, lo, hi);
            return -1;
        }
        store_num(field, o->size, n);
        return 0;
    case T_DUR:
        if (parse_duration(v, &n) < 0) {
            snprintf(err, errlen, "expected a duration with a unit, ms, s or m "
                     "(e.g. 10s), got '%.200s'", v);
            return -1;
        }
        if (n < o->min || n > o->max) {
            fmt_duration(o->min, lo, sizeof(lo));
            fmt_duration(o->max, hi, sizeof(hi));
            snprintf(err, errlen, "'%.200s' out of range (%s..%s)", v, lo, hi);
            return -1;
        }
        store_num(field, o->size, n);
        return 0;
    case T_ENUM:
        for (int i = 0; o->names[i]; i++)
            if (strcmp(v, o->names[i]) == 0) {
                *(int *)field = i;
                return 0;
            }
        {
            size_t off = (size_t)snprintf(err, errlen, "expected ");
            for (int i = 0; o->names[i] && off < errlen; i++)
                off += (size_t)snprintf(err + off, errlen - off, "%s%s",
                                        i == 0 ? "" : o->names[i + 1] ? ", " : " or ",
                                        o->names[i]);
            if (off < errlen)
                snprintf(err + off, errlen - off, ", got '%.200s'", v);
        }
        return -1;
    case T_FRAC: {
        char *end;
        double d;
        errno = 0;
        d = strtod(v, &end);
        if (end == v || *end != '\0' || errno != 0 || !(d >= 0.0 && d <= 1.0)) {
            snprintf(err, errlen, "expected a fraction from 0 to 1, got '%.200s'", v);
            return -1;
        }
        *(double *)field = d;
        return 0;
    }
    }
    snprintf(err, errlen, "internal error: bad option type");
    return -1;
}

/* the value of <o> in <c>, in file syntax */
static void opt_format(const void *base, const struct opt *o,
                       char *buf, size_t len)
{
    const char *field = (const char *)base + o->off;

    switch (o->type) {
    case T_STR:
        snprintf(buf, len, "%s", field);
        break;
    case T_BOOL:
        snprintf(buf, len, "%s", *(const int *)field ? "true" : "false");
        break;
    case T_UINT:
        snprintf(buf, len, "%llu", load_num(field, o->size));
        break;
    case T_SIZE:
        fmt_size(load_num(field, o->size), buf, len);
        break;
    case T_DUR:
        fmt_duration(load_num(field, o->size), buf, len);
        break;
    case T_ENUM: {
        int i = *(const int *)field, n = 0;
        while (o->names[n])
            n++;
        snprintf(buf, len, "%s", i >= 0 && i < n ? o->names[i] : "?");
        break;
    }
    case T_FRAC:
        snprintf(buf, len, "%g", *(const double *)field);
        break;
    default:
        snprintf(buf, len, "?");
    }
}

/* -------------------------------------------------------------- defaults */

void tt_config_defaults(struct tt_config *c)
{
    char err[256];

    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < N_OPTS; i++)
        if (opt_set(c, &opts[i], opts[i].def, err, sizeof(err)) < 0)
            abort();    /* a bad default in opts[]: caught by the unit tests */
}

/* ------------------------------------------------------------- the file */

#define LINE_MAX_BYTES 4096

struct load_ctx {
    struct tt_config *c;
    const char *path;
    FILE *f;
    char *buf;              /* getline() buffer */
    size_t bufsize;
    int line;               /* number of the line last handed to inih */
    char section[256];      /* current section, full (inih truncates at 50) */
    int sect_ok;            /* current section is known */
    int nerr;               /* errors so far */
    char errs[TT_CONFIG_MAX_ERRORS * 1600]; /* "NAME:LINE: reason\n" each */
    size_t errs_len;
    int seen[N_OPTS];       /* line where each key was set, 0 = not yet */
    int model_seen[TT_CONFIG_SLO_MODELS];
    int shadow_line[TT_MAX_SHADOWS];    /* line of each [shadow.NAME] header */
    int shadow_seen[TT_MAX_SHADOWS][N_SHADOW_OPTS];   /* line each key was set */
};

static void ctx_fail(struct load_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ctx_fail(struct load_ctx *x, const char *fmt, ...)
{
    va_list ap;
    char reason[1200];

    /* every error is kept (up to TT_CONFIG_MAX_ERRORS) and the parse goes
     * on: the file's errors are listed at once, as a compiler does */
    if (x->nerr++ >= TT_CONFIG_MAX_ERRORS)
        return;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    if (x->errs_len < sizeof(x->errs)) {
        int n = snprintf(x->errs + x->errs_len, sizeof(x->errs) - x->errs_len,
                         "%.300s:%d: %s\n", x->path, x->line, reason);
        if (n > 0)
            x->errs_len += (size_t)n;
        if (x->errs_len > sizeof(x->errs))
            x->errs_len = sizeof(x->errs);
    }
}


static int section_index(const char *name)
{
    for (int i = 0; i < S__COUNT; i++)
        if (strcmp(name, sect_names[i]) == 0)
            return i;
    return -1;
}

/* what inih strips around names and values (isspace) */
static int blank(char ch)
{
    return isspace((unsigned char)ch);
}

/* <s> is empty, blanks, or blanks and then a comment */
static int blank_or_comment(const char *s)
{
    const char *p = s;

    while (blank(*p))
        p++;
    return *p == '\0' || (p > s && (*p == '#' || *p == ';'));
}

/* a line inih would refuse: not blank, a comment, a [section] or key = value */
static int bad_syntax(const char *line)
{
    while (blank(*line))
        line++;
    if (*line == '\0' || *line == '#' || *line == ';')
        return 0;
    if (*line == '[')
        return strchr(line, ']') == NULL;
    return strpbrk(line, "=:") == NULL;
}

/*
 * Inline comments are cut here, not by inih, so that quotes protect them.
 * On a key line, '#' or ';' after a blank starts a comment ("key = v  #
 * note"; "key =#v" is the value "#v"), except inside a quoted value: one
 * that starts with '"' or '\'' runs to the last matching quote when only
 * blanks or a comment follow it.  tt_config_dump() quotes every value that
 * needs it, so whatever it prints reads back the same.
 */
static void cut_inline_comment(char *line)
{
    char *p = line, *v, *last;
    int was_blank = 0;

    while (blank(*p))
        p++;
    if (*p == '\0' || *p == '#' || *p == ';' || *p == '[')
        return;
    v = p + strcspn(p, "=:");
    if (*v == '\0')
        return;
    v++;
    for (p = v; blank(*p); p++)
        ;
    if ((*p == '"' || *p == '\'') && (last = strrchr(p + 1, *p)) != NULL &&
        blank_or_comment(last + 1)) {
        last[1] = '\0';
        return;
    }
    for (p = v; *p; p++) {
        if (was_blank && (*p == '#' || *p == ';')) {
            *p = '\0';
            return;
        }
        was_blank = blank(*p);
    }
}

/*
 * The inih reader: hands over one line per call and keeps the line number
 * and the current section (full length) for the handler.  Unknown sections
 * and over-long lines are caught here; returning NULL ends the parse.
 */
static char *load_reader(char *str, int num, void *stream)
{
    struct load_ctx *x = stream;
    ssize_t n;
    const char *p;

    n = getline(&x->buf, &x->bufsize, x->f);
    if (n < 0)
        return NULL;
    x->line++;
    /* inih gives <num> bytes, NUL included, when our options took effect */
    if (n > (num - 1 < LINE_MAX_BYTES ? num - 1 : LINE_MAX_BYTES)) {
        ctx_fail(x, "line too long (max %d bytes)",
                 num - 1 < LINE_MAX_BYTES ? num - 1 : LINE_MAX_BYTES);
        return strcpy(str, "\n");   /* reported: inih sees an empty line */
    }
    if (memchr(x->buf, '\0', (size_t)n)) {
        ctx_fail(x, "NUL byte in line");
        return strcpy(str, "\n");
    }

    /* section header: the name is what inih takes, '[' up to the first ']' */
    p = x->buf;
    if (x->line == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '[') {
        const char *end = strchr(p + 1, ']');
        if (end) {
            size_t len = (size_t)(end - p - 1);
            if (len >= sizeof(x->section))
                len = sizeof(x->section) - 1;
            memcpy(x->section, p + 1, len);
            x->section[len] = '\0';
            x->sect_ok = 0;
            if (section_index(x->section) >= 0) {
                x->sect_ok = 1;
            } else if (strncmp(x->section, SLO_MODEL_PREFIX,
                               strlen(SLO_MODEL_PREFIX)) == 0) {
                const char *model = x->section + strlen(SLO_MODEL_PREFIX);
                if (*model == '\0') {
                    ctx_fail(x, "section [%s]: missing model name, expected "
                             "[slo.MODEL]", x->section);
                    return strcpy(str, "\n");  /* its keys skipped */
                }
                if (strlen(model) >= TT_SLO_MODEL_LEN) {
                    ctx_fail(x, "section [%.200s]: model name too long "
                             "(max %d bytes)", x->section, TT_SLO_MODEL_LEN - 1);
                    return strcpy(str, "\n");
                }
                x->sect_ok = 1;
            } else if (strncmp(x->section, SHADOW_PREFIX,
                               strlen(SHADOW_PREFIX)) == 0) {
                const char *nm = x->section + strlen(SHADOW_PREFIX);
                char why[256];
                struct tt_shadow_cfg *sh;
                for (unsigned i = 0; i < x->c->n_shadows; i++)
                    if (strcmp(x->c->shadows[i].name, nm) == 0 && x->shadow_line[i]) {
                        ctx_fail(x, "section [%.200s]: duplicate (first on line %d)",
                                 x->section, x->shadow_line[i]);
                        return strcpy(str, "\n");
                    }
                sh = shadow_get(x->c, nm, strlen(nm), why, sizeof(why));
                if (sh == NULL) {
                    ctx_fail(x, "section [%.200s]: %s", x->section, why);
                    return strcpy(str, "\n");
                }
                x->shadow_line[sh - x->c->shadows] = x->line;
                x->sect_ok = 1;
            } else {
                ctx_fail(x, "section [%.200s]: unknown section (known: proxy, "
                         "upstream, tls, admin, record, slo, slo.MODEL, "
                         "shadow.NAME, limits)", x->section);
                return strcpy(str, "\n");
            }
        }
    }
    cut_inline_comment(x->buf);
    if (bad_syntax(x->line == 1 && strncmp(x->buf, "\xEF\xBB\xBF", 3) == 0
                   ? x->buf + 3 : x->buf)) {
        ctx_fail(x, "syntax error, expected 'key = value', '[section]' or a "
                 "comment");
        return strcpy(str, "\n");
    }
    memcpy(str, x->buf, (size_t)n + 1);
    return str;
}

/* a key of a [slo.MODEL] section */
static int load_model_slo(struct load_ctx *x, const char *name,
                          const char *value)
{
    struct tt_config *c = x->c;
    const char *model = x->section + strlen(SLO_MODEL_PREFIX);
    char err[1024];
    unsigned i;

    if (strcmp(name, "goodput") != 0) {
        ctx_fail(x, "key '%.100s': unknown key in section [%.200s] (only "
                 "goodput)", name, x->section);
        return 0;
    }
    for (i = 0; i < c->n_model_slos; i++)
        if (strcmp(c->model_slos[i].model, model) == 0)
            break;
    if (i < c->n_model_slos && x->model_seen[i]) {
        ctx_fail(x, "key 'goodput': duplicate in [%.200s] (first set on line "
                 "%d)", x->section, x->model_seen[i]);
        return 0;
    }
    if (i == c->n_model_slos && i == TT_CONFIG_SLO_MODELS) {
        ctx_fail(x, "section [%.200s]: too many [slo.MODEL] sections (max %d)",
                 x->section, TT_CONFIG_SLO_MODELS);
        return 0;
    }
    if (strlen(value) >= sizeof(c->model_slos[0].goodput)) {
        ctx_fail(x, "key 'goodput': value too long (max %zu bytes)",
                 sizeof(c->model_slos[0].goodput) - 1);
        return 0;
    }
    if (check_goodput(value, err, sizeof(err)) < 0) {
        ctx_fail(x, "key 'goodput': %s", err);
        return 0;
    }
    if (i == c->n_model_slos) {
        snprintf(c->model_slos[i].model, sizeof(c->model_slos[i].model), "%s",
                 model);
        c->n_model_slos++;
    }
    memcpy(c->model_slos[i].goodput, value, strlen(value) + 1);   /* length checked above */
    x->model_seen[i] = x->line;
    return 1;
}

/* a key of a [shadow.NAME] section */
static int load_shadow_key(struct load_ctx *x, const char *name,
                           const char *value)
{
    const char *nm = x->section + strlen(SHADOW_PREFIX);
    char err[1024];
    struct tt_shadow_cfg *sh = shadow_get(x->c, nm, strlen(nm), err, sizeof(err));

    if (sh != NULL) {
        int *seen = x->shadow_seen[sh - x->c->shadows];
        for (size_t i = 0; i < N_SHADOW_OPTS; i++)
            if (strcmp(shadow_opts[i].key, name) == 0) {
                if (seen[i]) {
                    ctx_fail(x, "key '%s': duplicate in [%.200s] (first set on line %d)",
                             name, x->section, seen[i]);
                    return 0;
                }
                seen[i] = x->line;
            }
    }
    if (sh == NULL || shadow_set(sh, name, value, err, sizeof(err)) < 0) {
        ctx_fail(x, "key '%.100s': %s", name, err);
        return 0;
    }
    return 1;
}

/*
 * A value written in matching double or single quotes ("ttft:500 itl:50")
 * means the text inside them: people quote values with spaces, and the
 * help text shows them quoted.  <buf> receives the unquoted copy.
 */
static const char *unquote(const char *value, char *buf, size_t len)
{
    size_t n = strlen(value);

    if (n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0] &&
        n - 2 < len) {
        memcpy(buf, value + 1, n - 2);
        buf[n - 2] = '\0';
        return buf;
    }
    return value;
}

/* the inih handler: one key = value line; 1 to go on, 0 on error */
static int load_handler(void *user, const char *section, const char *name,
                        const char *raw)
{
    struct load_ctx *x = user;
    const struct opt *o = NULL;
    char err[1024], vbuf[TT_PATH_MAX + 64];
    const char *value = unquote(raw, vbuf, sizeof(vbuf));
    int si;
    size_t i;

    (void)section;          /* truncated by inih; x->section is whole */
    if (x->section[0] == '\0') {
        ctx_fail(x, "key '%.100s': outside any [section]", name);
        return 1;
    }
    if (!x->sect_ok)
        return 1;           /* the section's error was reported */
    si = section_index(x->section);
    if (si < 0 && strncmp(x->section, SHADOW_PREFIX, strlen(SHADOW_PREFIX)) == 0)
        return load_shadow_key(x, name, value);
    if (si < 0)
        return load_model_slo(x, name, value);

    for (i = 0; i < N_OPTS; i++)
        if (strcmp(opts[i].key, name) == 0) {
            o = &opts[i];
            break;
        }
    if (!o) {
        ctx_fail(x, "key '%.100s': unknown key in section [%s]", name,
                 x->section);
        return 0;
    }
    if (o->sect != si) {
        ctx_fail(x, "key '%s': belongs in section [%s], not [%s]", name,
                 sect_names[o->sect], x->section);
        return 0;
    }
    if (x->seen[i]) {
        ctx_fail(x, "key '%s': duplicate (first set on line %d)", name,
                 x->seen[i]);
        return 0;
    }
    x->seen[i] = x->line;   /* a bad value too: a second line is a duplicate */
    if (opt_set(x->c, o, value, err, sizeof(err)) < 0) {
        ctx_fail(x, "key '%s': %s", name, err);
        return 1;
    }
    x->c->src.line[i] = x->line;
    return 1;
}

static char ini_comment_prefixes[] = ";#";

/*
 * Load the config text read from <f> over the values already in <c>
 * (defaults, normally); <name> is the file name used in messages.  On error
 * <c> may hold part of the file.  Returns 0, or -1 with <err> set to
 * "NAME:LINE: key 'K': reason", "NAME:LINE: section [S]: reason",
 * "NAME:LINE: syntax error ..." or "NAME: read error: ...".
 */
int tt_config_load_stream(struct tt_config *c, FILE *f, const char *name,
                          char *err, size_t errlen)
{
    struct load_ctx *x;
    int rc;

    x = calloc(1, sizeof(*x));
    if (!x) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    x->c = c;
    x->path = name;
    x->f = f;

    /* libinih 55 as Debian builds it keeps its options in globals */
    ini_allow_multiline = false;        /* an indented line is a new key */
    ini_allow_bom = true;
    ini_allow_inline_comments = false;  /* cut_inline_comment() does it */
    ini_inline_comment_prefixes = ini_comment_prefixes;
    ini_start_comment_prefixes = ini_comment_prefixes;
    ini_use_stack = false;
    ini_allow_realloc = false;
    ini_initial_alloc = LINE_MAX_BYTES + 2;
    ini_max_line = LINE_MAX_BYTES + 2;
    ini_stop_on_first_error = false;   /* ctx_fail() keeps every error */
    ini_allow_no_value = false;

    errno = 0;
    rc = ini_parse_stream(load_reader, x, load_handler, x);
    if (!x->nerr && rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s: read error: %s", name,
                 strerror(errno ? errno : EIO));
        rc = -1;
    } else if (x->nerr) {
        size_t l = x->errs_len;
        if (l > 0 && x->errs[l - 1] == '\n')
            l--;
        if (x->nerr > TT_CONFIG_MAX_ERRORS)
            snprintf(err, errlen, "%.*s\n%s: %d more errors not listed", (int)l,
                     x->errs, name, x->nerr - TT_CONFIG_MAX_ERRORS);
        else
            snprintf(err, errlen, "%.*s", (int)l, x->errs);
        rc = -1;
    } else if (rc > 0) {
        snprintf(err, errlen, "%s:%d: syntax error, expected 'key = value', "
                 "'[section]' or a comment", name, rc);
        rc = -1;
    } else if (rc < 0) {
        snprintf(err, errlen, "%s: out of memory", name);
        rc = -1;
    }
    free(x->buf);
    free(x);
    return rc;
}

/*
 * Load <path> over the values already in <c>.  Returns 0, or -1 with <err>
 * set as for tt_config_load_stream(), or to "FILE: cannot open: reason".
 */
int tt_config_load(struct tt_config *c, const char *path, char *err,
                   size_t errlen)
{
    FILE *f = fopen(path, "r");
    int rc;

    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    rc = tt_config_load_stream(c, f, path, err, errlen);
    fclose(f);
    snprintf(c->src.file, sizeof(c->src.file), "%s", path);
    return rc;
}

/* ---------------------------------------------------------- command line */

/* does "--<flag>" (flag given without the dashes, <len> bytes) name <key>? */
static int flag_is(const char *flag, size_t len, const char *key)
{
    size_t i;

    for (i = 0; i < len && key[i]; i++)
        if (flag[i] != (key[i] == '_' ? '-' : key[i]))
            return 0;
    return i == len && key[i] == '\0';
}

static void flag_name(const char *key, char *buf, size_t len)
{
    size_t i;

    snprintf(buf, len, "--%s", key);
    for (i = 2; buf[i]; i++)
        if (buf[i] == '_')
            buf[i] = '-';
}

static void print_version(FILE *out)
{
    fprintf(out, "tokentap %s\n", TT_VERSION);
}

/*
 * Parse the command line (see proxy/config/config.h).  Two passes: the first finds
 * --config (and --help/--version, which win over everything), the second
 * applies the flags over the file.  Returns 0 to run, 1 when help, version
 * or the config reference was printed on stdout, -1 with <err> set to
 * "--flag: reason" (or the file's "FILE:LINE: ..." error).
 */
/* %XX escapes decoded in place (OTEL_EXPORTER_OTLP_HEADERS values are
 * percent-encoded, as W3C Baggage's) */
static void percent_decode(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
            char hx[3] = { s[1], s[2], 0 };
            *o++ = (char)strtol(hx, NULL, 16);
            s += 2;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* <v> with blanks at both ends cut, into <out> */
static void trim_into(char *out, size_t len, const char *v, size_t n)
{
    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    snprintf(out, len, "%.*s", (int)n, v);
}

static const char *env_of(const char *a, const char *b, const char **which)
{
    const char *v = getenv(a);
    *which = a;
    if (v == NULL || *v == '\0') {
        v = getenv(b);
        *which = b;
    }
    return v != NULL && *v != '\0' ? v : NULL;
}

/*
 * The traces URL and the OpenTelemetry variables for what the file and
 * the flags left unset, as the OpenTelemetry SDKs read them:
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the URL as is,
 * OTEL_EXPORTER_OTLP_ENDPOINT a base that gets /v1/traces;
 * OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL http/protobuf or http/json (grpc is
 * not spoken); OTEL_EXPORTER_OTLP_[TRACES_]HEADERS K=V,K=V, values
 * percent-decoded.  The signal's own variable wins over the general one.
 */
static int otlp_resolve(struct tt_config *c, char *err, size_t errlen)
{
    const char *v, *which;
    char reason[512];
    int k;

    c->otlp_url[0] = '\0';
    if (c->otlp_endpoint[0]) {
        size_t n = strlen(c->otlp_endpoint);
        while (n > 0 && c->otlp_endpoint[n - 1] == '/')
            n--;
        snprintf(c->otlp_url, sizeof(c->otlp_url), "%.*s/v1/traces", (int)n,
                 c->otlp_endpoint);
    } else if ((v = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != NULL && *v) {
        if (check_otlp_endpoint(v, reason, sizeof(reason)) < 0 ||
            strlen(v) >= sizeof(c->otlp_url)) {
            snprintf(err, errlen, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %s",
                     strlen(v) >= sizeof(c->otlp_url) ? "too long" : reason);
            return -1;
        }
        snprintf(c->otlp_url, sizeof(c->otlp_url), "%s", v);
    } else if ((v = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != NULL && *v) {
        size_t n = strlen(v);
        if (check_otlp_endpoint(v, reason, sizeof(reason)) < 0 ||
            n >= TT_PATH_MAX) {
            snprintf(err, errlen, "OTEL_EXPORTER_OTLP_ENDPOINT: %s",
                     n >= TT_PATH_MAX ? "too long" : reason);
            return -1;
        }
        snprintf(c->otlp_url, sizeof(c->otlp_url), "%s%s", v,
                 v[n - 1] == '/' ? "v1/traces" : "/v1/traces");
    }
    if (c->otlp_ca[0] == '\0' &&
        (v = env_of("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE",
                    &which)) != NULL) {
        if (strlen(v) >= sizeof(c->otlp_ca)) {
            snprintf(err, errlen, "%s: path too long", which);
            return -1;
        }
        strcpy(c->otlp_ca, v);
    }
    if (c->otlp_ca[0] != '\0' && access(c->otlp_ca, R_OK) != 0) {
        snprintf(err, errlen, "otlp_ca: cannot read '%.200s': %s", c->otlp_ca, strerror(errno));
        return -1;
    }
    k = key_index("otlp_protocol");
    if (c->src.line[k] == 0 &&
        (v = env_of("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL",
                    &which)) != NULL) {
        if (strcmp(v, "http/protobuf") == 0)
            c->otlp_protocol = TT_OTLP_PROTOBUF;
        else if (strcmp(v, "http/json") == 0)
            c->otlp_protocol = TT_OTLP_JSON;
        else {
            snprintf(err, errlen, "%s: expected http/protobuf or http/json, got "
                     "'%.100s'%s", which, v,
                     strcmp(v, "grpc") == 0 ? " (tokentap speaks OTLP/HTTP, not gRPC)" : "");
            return -1;
        }
    }
    if (c->otlp_header[0] == '\0' &&
        (v = env_of("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS",
                    &which)) != NULL) {
        char item[1024], key[256], val[1024];
        size_t o = 0;
        while (*v) {
            const char *end = strchr(v, ','), *eq;
            size_t len = end ? (size_t)(end - v) : strlen(v);
            trim_into(item, sizeof(item), v, len);
            v += len + (end ? 1 : 0);
            if (item[0] == '\0')
                continue;
            eq = strchr(item, '=');
            if (eq == NULL) {
                snprintf(err, errlen, "%s: expected NAME=VALUE items separated by "
                         "commas", which);
                return -1;
            }
            trim_into(key, sizeof(key), item, (size_t)(eq - item));
            trim_into(val, sizeof(val), eq + 1, strlen(eq + 1));
            percent_decode(key);
            percent_decode(val);
            int n = snprintf(c->otlp_header + o, sizeof(c->otlp_header) - o, "%s%s=%s",
                             o ? "," : "", key, val);
            if (n < 0 || (size_t)n >= sizeof(c->otlp_header) - o) {
                snprintf(err, errlen, "%s: too long", which);
                c->otlp_header[0] = '\0';
                return -1;
            }
            o += (size_t)n;
        }
        if (check_otlp_header(c->otlp_header, reason, sizeof(reason)) < 0) {
            snprintf(err, errlen, "%s: %s", which, reason);
            c->otlp_header[0] = '\0';
            return -1;
        }
    }
    return 0;
}

int tt_config_args(struct tt_config *c, int argc, char **argv, char *err,
                   size_t errlen)
{
    const char *config = NULL;
    int i;

    for (i = 0; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tt_config_usage(stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            print_version(stdout);
            return 1;
        }
        if (strcmp(a, "--print-config-reference") == 0) {
            tt_config_reference(stdout);
            return 1;
        }
    }

    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0 || strncmp(a, "--config=", 9) == 0) {
            if (config) {
                snprintf(err, errlen, "--config: given more than once");
                return -1;
            }
            if (a[8] == '=') {
                config = a + 9;
            } else if (i + 1 < argc) {
                config = argv[++i];
            } else {
                snprintf(err, errlen, "--config: missing value (FILE)");
                return -1;
            }
            if (*config == '\0') {
                snprintf(err, errlen, "--config: empty file name");
                return -1;
            }
        }
    }
    if (config && tt_config_load(c, config, err, errlen) < 0)
        return -1;

    for (i = 0; i < argc; i++) {
        const char *a = argv[i], *name, *eq, *val;
        const struct opt *o = NULL;
        char reason[1024], flag[64];
        size_t nlen;

        if (a[0] == '-' && a[1] != '-' && a[1] != '\0') {
            snprintf(err, errlen, "%.100s: unknown option (see --help)", a);
            return -1;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            snprintf(err, errlen, "unexpected argument '%.200s' (see --help)",
                     a);
            return -1;
        }
        name = a + 2;
        eq = strchr(name, '=');
        nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (flag_is(name, nlen, "config")) {
            if (!eq)
                i++;            /* its value, checked in the first pass */
            continue;
        }
        if (flag_is(name, nlen, "shadow") || flag_is(name, nlen, "shadow_set")) {
            /* --shadow NAME=URL, --shadow-set NAME.KEY=VALUE */
            int set = nlen > 6;
            const char *fl = set ? "--shadow-set" : "--shadow";
            const char *sep, *arg;
            struct tt_shadow_cfg *sh;
            if (eq)
                arg = eq + 1;
            else if (i + 1 < argc)
                arg = argv[++i];
            else {
                snprintf(err, errlen, "%s: missing value (%s)", fl,
                         set ? "NAME.KEY=VALUE" : "NAME=URL");
                return -1;
            }
            sep = strchr(arg, set ? '.' : '=');
            if (sep == NULL || (set && strchr(sep, '=') == NULL)) {
                snprintf(err, errlen, "%s: expected %s, got '%.200s'", fl,
                         set ? "NAME.KEY=VALUE" : "NAME=URL", arg);
                return -1;
            }
            sh = shadow_get(c, arg, (size_t)(sep - arg), reason, sizeof(reason));
            if (sh != NULL) {
                if (set) {
                    const char *veq = strchr(sep, '=');
                    char key[64];
                    size_t kl = (size_t)(veq - sep - 1);
                    snprintf(key, sizeof(key), "%.*s", (int)(kl > 63 ? 63 : kl), sep + 1);
                    if (shadow_set(sh, key, veq + 1, reason, sizeof(reason)) < 0)
                        sh = NULL;
                } else if (shadow_set(sh, "url", sep + 1, reason, sizeof(reason)) < 0) {
                    sh = NULL;
                }
            }
            if (sh == NULL) {
                snprintf(err, errlen, "%s: %s", fl, reason);
                return -1;
            }
            continue;
        }
        for (size_t k = 0; k < N_OPTS; k++)
            if (flag_is(name, nlen, opts[k].key)) {
                o = &opts[k];
                break;
            }
        if (!o) {
            snprintf(err, errlen, "--%.*s: unknown option (see --help)",
                     (int)(nlen > 100 ? 100 : nlen), name);
            return -1;
        }
        flag_name(o->key, flag, sizeof(flag));
        if (eq) {
            val = eq + 1;
        } else if (o->type == T_BOOL) {
            val = "true";
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            val = argv[++i];
        } else {
            snprintf(err, errlen, "%s: missing value (%s)", flag, o->meta);
            return -1;
        }
        if (opt_set(c, o, val, reason, sizeof(reason)) < 0) {
            snprintf(err, errlen, "%s: %s", flag, reason);
            return -1;
        }
        c->src.line[o - opts] = -1;
    }
    return otlp_resolve(c, err, errlen);
}

/* the errors of tt_config_check(), one line each */
struct cerrs {
    char  *buf;
    size_t len, off;
    int    n;
};

static int key_index(const char *key)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (strcmp(opts[i].key, key) == 0)
            return (int)i;
    return -1;
}

/* how a message names <key>: "upstream_cert" when the config file is in
 * use and a flag did not set it, else "--upstream-cert" */
static const char *key_name(const struct tt_config *c, const char *key, char *buf,
                            size_t len)
{
    int k = key_index(key);
    if (c->src.file[0] && k >= 0 && c->src.line[k] >= 0)
        snprintf(buf, len, "%s", key);
    else
        flag_name(key, buf, len);
    return buf;
}

static void cfail(struct cerrs *e, const struct tt_config *c, const char *key,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* one failed check of <key> (NULL: not one key), placed as the header says */
static void cfail(struct cerrs *e, const struct tt_config *c, const char *key,
                  const char *fmt, ...)
{
    char reason[1024], flag[64];
    va_list ap;
    int k = key ? key_index(key) : -1, n;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    if (e->off >= e->len)
        return;
    const char *nl = e->n++ ? "\n" : "";
    char *p = e->buf + e->off;
    size_t room = e->len - e->off;
    if (k < 0) {
        n = snprintf(p, room, "%s%s%s%s", nl, c->src.file[0] && key == NULL ? c->src.file : "",
                     c->src.file[0] && key == NULL ? ": " : "", reason);
    } else {
        flag_name(key, flag, sizeof(flag));
        if (c->src.file[0] && c->src.line[k] > 0)
            n = snprintf(p, room, "%s%s:%d: key '%s': %s", nl, c->src.file,
                         c->src.line[k], key, reason);
        else if (c->src.file[0] && c->src.line[k] == 0)
            n = snprintf(p, room, "%s%s: key '%s' in [%s] (or %s): %s", nl, c->src.file,
                         key, sect_names[opts[k].sect], flag, reason);
        else
            n = snprintf(p, room, "%s%s: %s", nl, flag, reason);
    }
    if (n > 0)
        e->off += (size_t)n < room ? (size_t)n : room;
}

/*
 * Checks across options, after file and flags.  Every failed check is
 * listed (see proxy/config/config.h); returns 0 or -1.
 */
int tt_config_check(const struct tt_config *c, char *err, size_t errlen)
{
    struct tt_url u;
    char reason[512], n1[64], n2[64];
    struct cerrs e = { err, errlen, 0, 0 };

    if (errlen)
        err[0] = '\0';
    u.tls = 0;
    if (c->upstream[0] == '\0') {
        cfail(&e, c, "upstream", "required (the model server's URL, "
              "e.g. http://127.0.0.1:8000)");
    } else if (tt_url_parse(c->upstream, &u, reason, sizeof(reason)) < 0) {
        cfail(&e, c, "upstream", "%s", reason);
    } else if (!u.tls) {
        static const char *const tls_only[] = {
            "upstream_ca", "upstream_cert", "upstream_key", "upstream_insecure",
        };
        for (size_t i = 0; i < 4; i++) {
            int k = key_index(tls_only[i]);
            const char *v = (const char *)c + opts[k].off;
            if (i < 3 ? v[0] != '\0' : c->upstream_insecure)
                cfail(&e, c, tls_only[i], "needs an https:// upstream");
        }
    }
    if (!!c->upstream_cert[0] != !!c->upstream_key[0]) {
        if (c->upstream_cert[0])
            cfail(&e, c, "upstream_key", "required with %s",
                  key_name(c, "upstream_cert", n1, sizeof(n1)));
        else
            cfail(&e, c, "upstream_cert", "required with %s",
                  key_name(c, "upstream_key", n1, sizeof(n1)));
    }
    if (!!c->tls_cert[0] != !!c->tls_key[0]) {
        if (c->tls_cert[0])
            cfail(&e, c, "tls_key", "required with %s",
                  key_name(c, "tls_cert", n1, sizeof(n1)));
        else
            cfail(&e, c, "tls_cert", "required with %s",
                  key_name(c, "tls_key", n1, sizeof(n1)));
    }
    if (c->tls_client_ca[0] && !c->tls_cert[0])
        cfail(&e, c, "tls_client_ca", "needs %s and %s",
              key_name(c, "tls_cert", n1, sizeof(n1)), key_name(c, "tls_key", n2, sizeof(n2)));
    for (unsigned i = 0; i < c->n_shadows; i++) {
        const struct tt_shadow_cfg *sh = &c->shadows[i];
        struct tt_url su;
        if (sh->url[0] == '\0') {
            cfail(&e, c, NULL, "shadow '%s': url required (--shadow %s=URL)",
                  sh->name, sh->name);
            continue;
        }
        if (tt_url_parse(sh->url, &su, reason, sizeof(reason)) < 0) {
            cfail(&e, c, NULL, "shadow '%s': url: %s", sh->name, reason);
            continue;
        }
        if (!su.tls && (sh->ca[0] || sh->cert[0] || sh->key[0] || sh->insecure))
            cfail(&e, c, NULL, "shadow '%s': ca, cert, key and insecure need "
                  "an https:// url", sh->name);
        if (!!sh->cert[0] != !!sh->key[0])
            cfail(&e, c, NULL, "shadow '%s': cert and key go together", sh->name);
    }
    /* two writers on one stdout would interleave records and access lines */
    if (strcmp(c->access_log, "-") == 0 && strcmp(c->record, "-") == 0)
        cfail(&e, c, "access_log", "stdout (-) is already taken by %s -",
              key_name(c, "record", n1, sizeof(n1)));
    /* the same address twice would serve admin on the proxy port; port 0
     * (any free port) gives two different ports */
    if (strcmp(c->admin, "off") != 0 && strcmp(c->admin, c->listen) == 0 &&
        !(strlen(c->admin) > 2 && strcmp(c->admin + strlen(c->admin) - 2, ":0") == 0))
        cfail(&e, c, "admin", "must differ from %s (%s)",
              key_name(c, "listen", n1, sizeof(n1)), c->listen);
    return e.n ? -1 : 0;
}


int tt_config_slo_set(const struct tt_config *c, struct tt_slo_set *set,
                      char *err, size_t errlen)
{
    tt_slo_set_init(set);
    if (tt_slo_set_add(set, NULL, c->goodput, err, errlen) < 0)
        return -1;
    for (unsigned i = 0; i < c->n_model_slos; i++)
        if (tt_slo_set_add(set, c->model_slos[i].model,
                           c->model_slos[i].goodput, err, errlen) < 0)
            return -1;
    return 0;
}

/* --------------------------------------------------------------- output */

/* the options that are not config keys (parsed in tt_config_args) */
static const struct { const char *flag, *meta, *help; } general[] = {
    { "--config", "FILE", "read FILE first (see tokentap.conf)" },
    { "--help, -h", NULL, "this text" },
    { "--version, -V", NULL, "print the version" },
    { "--print-config-reference", NULL, "print the commented reference config" },
};
#define N_GENERAL (sizeof(general) / sizeof(general[0]))

void tt_config_usage(FILE *out)
{
    fputs("Usage:\n"
          "  tokentap [--config FILE] [--listen ADDR:PORT] --upstream URL [options]\n"
          "  tokentap report RECORDS.jsonl [...]   (options: tokentap report --help)\n"
          "  tokentap check-config FILE\n"
          "  tokentap --version | --help\n"
          "\n"
          "A transparent recording reverse proxy for LLM inference: TTFT, ITL\n"
          "and goodput of real traffic, on Prometheus and as JSONL records.\n"
          "\n"
          "Every option is also a key of the config file, in the section shown\n"
          "(--max-header-bytes is max_header_bytes in [limits]); flags override\n"
          "the file.  Use --flag VALUE or --flag=VALUE; booleans are bare flags.\n"
          "Sizes take k, m or g (KiB, MiB, GiB); durations need a unit: ms, s\n"
          "or m (10s).\n"
          "\n"
          "General:\n", out);
    for (size_t i = 0; i < N_GENERAL; i++) {
        char left[80];
        snprintf(left, sizeof(left), "%s%s%s", general[i].flag,
                 general[i].meta ? " " : "", general[i].meta ? general[i].meta : "");
        fprintf(out, "  %-31s %s\n", left, general[i].help);
    }
    for (int s = 0; s < S__COUNT; s++) {
        fprintf(out, "\n[%s] %s:\n", sect_names[s], sect_help[s]);
        for (size_t i = 0; i < N_OPTS; i++) {
            const struct opt *o = &opts[i];
            char left[80], flag[64];

            if (o->sect != s)
                continue;
            flag_name(o->key, flag, sizeof(flag));
            if (o->meta)
                snprintf(left, sizeof(left), "%s %s", flag, o->meta);
            else
                snprintf(left, sizeof(left), "%s", flag);
            fprintf(out, "  %-31s %s\n", left, o->help);
            if (o->check == check_upstream)
                fprintf(out, "  %-31s (required)\n", "");
            else if (o->def[0] && o->type != T_BOOL)
                fprintf(out, "  %-31s (default %s)\n", "", o->def);
        }
        if (s == S_SLO)
            fprintf(out, "  %-31s per-model SLOs: [slo.MODEL] in the config "
                    "file\n", "");
    }
    fputs("\n[shadow.NAME] candidate servers that get a copy of sampled requests\n"
          "(docs/shadow.md):\n"
          "  --shadow NAME=URL               mirror to NAME (repeatable)\n"
          "  --shadow-set NAME.KEY=VALUE     any key below for NAME\n", out);
    for (size_t i = 0; i < N_SHADOW_OPTS; i++) {
        const struct opt *o = &shadow_opts[i];
        char left[80];
        snprintf(left, sizeof(left), "  %s%s%s", o->key, o->meta ? " " : "",
                 o->meta ? o->meta : "");
        fprintf(out, "  %-31s %s\n", left, o->help);
        if (o->def[0] && o->type != T_BOOL)
            fprintf(out, "  %-31s (default %s)\n", "", o->def);
    }
    fprintf(out, "  %-31s %s\n", "  set_header 'NAME: VALUE'",
            "replace or add a request header (repeatable)");
    fprintf(out, "  %-31s %s\n", "  remove_header NAME",
            "drop a request header (repeatable)");
    fputs("\nGoodput SPEC: space-separated TAG:VALUE, values in ms (tokens/s for\n"
          "output_token_throughput_per_user, tokens for counts); aliases ttft,\n"
          "ttfo, itl, tpot, e2el.  A request is good when it is not an error and\n"
          "meets every constraint (<=, or >= for throughput).\n", out);
}

/*
 * "key = value", the value in double quotes when it would not read back
 * as itself: leading or trailing blanks (inih strips them), a leading '#',
 * ';' or quote, or a blank followed by '#' or ';' (a comment).
 */
static void print_value(FILE *out, const char *key, const char *val)
{
    size_t n = strlen(val), i;
    int quote = n > 0 && (blank(val[0]) || blank(val[n - 1]) || val[0] == '#' ||
                          val[0] == ';' || val[0] == '"' || val[0] == '\'');

    for (i = 1; i < n && !quote; i++)
        if ((val[i] == '#' || val[i] == ';') && blank(val[i - 1]))
            quote = 1;
    if (quote)
        fprintf(out, "%s = \"%s\"\n", key, val);
    else
        fprintf(out, "%s =%s%s\n", key, n ? " " : "", val);
}

/* one [shadow.NAME] section, each line prefixed by <pfx> */
static void print_shadow(const struct tt_shadow_cfg *sh, FILE *out,
                         const char *pfx)
{
    fprintf(out, "\n%s[" SHADOW_PREFIX "%s]\n", pfx, sh->name);
    for (size_t i = 0; i < N_SHADOW_OPTS; i++) {
        char val[TT_PATH_MAX + 64], key[80];
        opt_format(sh, &shadow_opts[i], val, sizeof(val));
        snprintf(key, sizeof(key), "%s%s", pfx, shadow_opts[i].key);
        print_value(out, key, val);
    }
    for (unsigned i = 0; i < sh->n_set; i++) {
        char key[80];
        snprintf(key, sizeof(key), "%sset_header", pfx);
        print_value(out, key, sh->set_header[i]);
    }
    for (unsigned i = 0; i < sh->n_remove; i++) {
        char key[80];
        snprintf(key, sizeof(key), "%sremove_header", pfx);
        print_value(out, key, sh->remove_header[i]);
    }
}

/* "K=V,K=V" shown as "K=<hidden>,...": header values are secrets */
static void redact_headers(char *val)
{
    char out[TT_PATH_MAX + 64];
    size_t o = 0;
    const char *p = val;

    while (*p && o + 80 < sizeof(out)) {
        const char *end = strchr(p, ','), *eq;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        eq = memchr(p, '=', len);
        size_t nl = eq ? (size_t)(eq - p) : len;
        if (nl > 64)
            nl = 64;
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%.*s=<hidden>",
                              o ? "," : "", (int)nl, p);
        p += len;
        if (*p == ',')
            p++;
    }
    out[o] = '\0';
    memcpy(val, out, o + 1);
}

/* print every section of <c>; with <comments>, the reference layout */
static int print_config(const struct tt_config *c, FILE *out, int comments)
{
    for (int s = 0; s < S__COUNT; s++) {
        fprintf(out, "%s[%s]\n", s ? "\n" : "", sect_names[s]);
        if (comments)
            fprintf(out, "# %s\n", sect_help[s]);
        for (size_t i = 0; i < N_OPTS; i++) {
            const struct opt *o = &opts[i];
            char val[TT_PATH_MAX + 64];

            if (o->sect != s)
                continue;
            opt_format(c, o, val, sizeof(val));
            if (o->check == check_otlp_header)
                redact_headers(val);
            if (comments)
                fprintf(out, "\n# %s\n", o->help);
            if (comments && o->check == check_upstream)
                fputs("# (required; shipped as a server on this host at vLLM's\n"
                      "# default port, so that this file passes check-config;\n"
                      "# e.g. https://host/openai)\n", out);
            if (comments && o->check == check_goodput)
                fputs("# tags: time_to_first_token, time_to_second_token,\n"
                      "# time_to_first_output_token, request_latency,\n"
                      "# inter_token_latency, output_token_throughput_per_user "
                      "(>=),\n"
                      "# input_sequence_length, output_sequence_length,\n"
                      "# output_token_count, reasoning_token_count, "
                      "reasoning_latency;\n"
                      "# aliases ttft, ttfo, itl, tpot, e2el.  Values in ms, "
                      "tokens/s or tokens.\n", out);
            print_value(out, o->key, val);
        }
    }
    for (unsigned i = 0; i < c->n_model_slos; i++) {
        fprintf(out, "\n[" SLO_MODEL_PREFIX "%s]\n", c->model_slos[i].model);
        print_value(out, "goodput", c->model_slos[i].goodput);
    }
    for (unsigned i = 0; i < c->n_shadows; i++)
        print_shadow(&c->shadows[i], out, "");
    return ferror(out) ? -1 : 0;
}

int tt_config_dump(const struct tt_config *c, FILE *out)
{
    return print_config(c, out, 0);
}

int tt_config_reference(FILE *out)
{
    struct tt_config c;

    tt_config_defaults(&c);
    /* the one key without a default: a working value, so that the
     * reference passes `tokentap check-config` as shipped */
    snprintf(c.upstream, sizeof(c.upstream), "%s", TT_CONFIG_REFERENCE_UPSTREAM);
    fputs("# tokentap reference configuration: every key with its default\n"
          "# (upstream, which has none, with an example value).\n"
          "#\n"
          "# Generated by `tokentap --print-config-reference` from the option\n"
          "# table in proxy/config/config.c; tests/unit/test_config.c checks that this\n"
          "# file and the table agree.\n"
          "#\n"
          "# Syntax: [section], then key = value.  Comments start with # or ;\n"
          "# (after a blank when on a value line; a value in quotes keeps\n"
          "# them: \"a #b\").  Unknown sections and keys,\n"
          "# keys in the wrong section, keys set twice and bad values are errors\n"
          "# reported as FILE:LINE.  Every key has a command-line flag of the same\n"
          "# name with dashes: max_header_bytes = 64k is --max-header-bytes 64k;\n"
          "# flags override this file.\n"
          "#\n"
          "# Sizes: bytes, or with k, m or g (KiB, MiB, GiB).  Durations: an\n"
          "# integer with a unit, ms, s or m (10s, 500ms, 5m).  Booleans: true or\n"
          "# false.  An empty value leaves a path or URL unset.\n"
          "\n", out);
    print_config(&c, out, 1);
    fputs("\n# Per-model SLOs replace [slo] goodput for requests whose \"model\" is\n"
          "# exactly MODEL (at most 16 sections), e.g.:\n"
          "#\n"
          "# [slo.meta-llama/Llama-3.1-8B-Instruct]\n"
          "# goodput = time_to_first_token:300 inter_token_latency:30\n", out);
    fputs("\n# Shadow traffic (docs/shadow.md): each [shadow.NAME] section (at most 4)\n"
          "# is a candidate server that gets a copy of sampled requests; its\n"
          "# responses are decoded and timed like the primary's, recorded with\n"
          "# upstream = NAME and role = shadow, and never reach the client.\n"
          "# The request is forwarded with the client's headers, credentials\n"
          "# included, unless set_header/remove_header replace them.  Keys:\n"
          "#\n", out);
    for (size_t i = 0; i < N_SHADOW_OPTS; i++)
        fprintf(out, "#   %-17s %s\n", shadow_opts[i].key, shadow_opts[i].help);
    fputs("#   set_header        'Name: value' sent instead of the client's (repeatable)\n"
          "#   remove_header     a header not sent to it (repeatable)\n"
          "#\n"
          "# Every key with its default, for a shadow named candidate:\n", out);
    {
        struct tt_config tmp;
        char err[256];
        tt_config_defaults(&tmp);
        if (shadow_get(&tmp, "candidate", 9, err, sizeof(err)) != NULL) {
            snprintf(tmp.shadows[0].url, sizeof(tmp.shadows[0].url),
                     "http://10.0.0.2:8000");
            print_shadow(&tmp.shadows[0], out, "# ");
        }
        fputs("# set_header = Authorization: Bearer CANDIDATE-KEY\n"
              "# remove_header = X-Api-Key\n", out);
    }
    return ferror(out) ? -1 : 0;
}

int tt_config_man(FILE *out)
{
    fputs(".SH OPTIONS\n.SS General\n", out);
    for (size_t i = 0; i < N_GENERAL; i++)
        tt_man_option(out, general[i].flag, general[i].meta, general[i].help);
    for (int s = 0; s < S__COUNT; s++) {
        fprintf(out, ".SS [%s]\n", sect_names[s]);
        tt_man_text(out, sect_help[s]);
        fputs(".\n", out);
        for (size_t i = 0; i < N_OPTS; i++) {
            const struct opt *o = &opts[i];
            char flag[64], help[512];

            if (o->sect != s)
                continue;
            flag_name(o->key, flag, sizeof(flag));
            if (o->check == check_upstream)
                snprintf(help, sizeof(help), "%s (required; key %s)", o->help,
                         o->key);
            else if (o->def[0] && o->type != T_BOOL)
                snprintf(help, sizeof(help), "%s (key %s, default %s)", o->help,
                         o->key, o->def);
            else
                snprintf(help, sizeof(help), "%s (key %s)", o->help, o->key);
            tt_man_option(out, flag, o->meta, help);
        }
        if (s == S_SLO) {
            fputs(".PP\nPer-model SLOs: a \\fB[slo.\\fIMODEL\\fB]\\fR section with a\n"
                  "\\fBgoodput\\fR key in the configuration file.\n", out);
        }
    }
    fputs(".SS [shadow.NAME]\n"
          "Candidate servers that get a copy of sampled requests; their responses\n"
          "are decoded, timed and recorded, never sent to the client (see the\n"
          "shadow documentation).  At most 4.\n.\n", out);
    tt_man_option(out, "--shadow", "NAME=URL", "mirror to NAME at URL (repeatable)");
    tt_man_option(out, "--shadow-set", "NAME.KEY=VALUE",
                  "set any key below for shadow NAME (repeatable)");
    for (size_t i = 0; i < N_SHADOW_OPTS; i++) {
        const struct opt *o = &shadow_opts[i];
        char help[512];
        if (o->def[0] && o->type != T_BOOL)
            snprintf(help, sizeof(help), "%s (default %s)", o->help, o->def);
        else
            snprintf(help, sizeof(help), "%s", o->help);
        tt_man_option(out, o->key, o->meta, help);
    }
    tt_man_option(out, "set_header", "'NAME: VALUE'",
                  "replace or add a request header (repeatable)");
    tt_man_option(out, "remove_header", "NAME", "drop a request header (repeatable)");
    fputs(".SS Goodput SPEC\n"
          "Space-separated \\fITAG\\fR:\\fIVALUE\\fR, values in ms (tokens/s for\n"
          "output_token_throughput_per_user, tokens for counts); aliases ttft,\n"
          "ttfo, itl, tpot, e2el.  A request is good when it is not an error and\n"
          "meets every constraint (<=, or >= for throughput).\n", out);
    return ferror(out) ? -1 : 0;
}
