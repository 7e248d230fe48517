/*
 * Configuration: one table of options serves the command line, the config
 * file (sectioned key = value, parsed with libinih), --help and
 * check-config.  Owned by proxy/config/config.c; read by everything else.
 */
#ifndef TT_CONFIG_H
#define TT_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "metrics/request.h"
#include "proxy/base/log.h"           /* TT_PATH_MAX, the log enums */

#define TT_CONFIG_SLO_MODELS 16     /* [slo.MODEL] sections kept */
#define TT_CONFIG_KEYS       96     /* config keys (the option table) at most */
#define TT_CONFIG_MAX_ERRORS 20     /* errors of a file listed, the rest counted */
/* the upstream of the shipped reference config (conf/tokentap.conf) */
#define TT_CONFIG_REFERENCE_UPSTREAM "http://127.0.0.1:8000"

struct tt_slo_set;

/* one [slo.MODEL] section: requests naming <model> are judged by <goodput> */
struct tt_config_model_slo {
    char model[128];
    char goodput[1024];
};

enum tt_otlp_protocol { TT_OTLP_PROTOBUF = 0, TT_OTLP_JSON };


/* [shadow.NAME] sections: as many as the numbers keep apart */
#define TT_MAX_SHADOWS      (TT_MAX_UPSTREAMS - 1)
#define TT_SHADOW_NAME_LEN  TT_UPSTREAM_NAME_LEN
#define TT_SHADOW_EDITS     8       /* set_header / remove_header lines each */

enum tt_shadow_cancel { TT_SHADOW_CANCEL = 0, TT_SHADOW_FINISH };

/* one [shadow.NAME] section (or --shadow NAME=URL): a candidate server that
 * gets a copy of sampled requests; see docs/shadow.md */
struct tt_shadow_cfg {
    char     name[TT_SHADOW_NAME_LEN];  /* [A-Za-z0-9_.-], not "primary" */
    char     url[TT_PATH_MAX];
    double   sample;                /* fraction mirrored, 0..1: 1 */
    char     sample_key[64];        /* header whose value decides; "" = random */
    unsigned max_inflight;          /* mirrored requests at once: 64 */
    char     paths[256];            /* "llm" or a list of API names */
    char     ca[TT_PATH_MAX];
    char     cert[TT_PATH_MAX];
    char     key[TT_PATH_MAX];
    int      insecure;
    unsigned connect_timeout_ms;    /* 5000 */
    unsigned response_timeout_ms;   /* 600000 */
    unsigned idle_timeout_ms;       /* 300000 */
    int      on_client_cancel;      /* enum tt_shadow_cancel */
    size_t   buffer_bytes;          /* request bytes held for it: 1 MiB */
    unsigned pool;                  /* idle keep-alive connections: 16 */
    size_t   max_read_rate;         /* response bytes/s read from it: 8 MiB */
    unsigned n_set, n_remove;
    char     set_header[TT_SHADOW_EDITS][256];  /* "Name: value" */
    char     remove_header[TT_SHADOW_EDITS][64];
};

struct tt_config {
    /* [proxy] */
    char     listen[256];           /* "127.0.0.1:8080" */
    int      workers;               /* 1 */
    int      log_level;             /* enum tt_log_level, "info" */
    int      log_format;            /* enum tt_log_format, "logfmt" */
    char     log_file[TT_PATH_MAX]; /* "" = stderr */
    char     access_log[TT_PATH_MAX]; /* "" = none, "-" = stdout */
    int      think_tags;            /* enum tt_think_mode, "auto" */
    int      add_request_id;        /* add X-Request-Id upstream when absent: 0 */
    int      inject_usage;          /* --inject-usage (proxy/http/usagewire.c): 0 */
    int      delivery;              /* --delivery on|off (proxy/http/delivery.c): 1 */
    unsigned drain_timeout_ms;      /* SIGTERM grace period: 30000 */
    char     ready_file[TT_PATH_MAX]; /* bound addresses written here, "" none */
    /* [upstream] */
    char     upstream[TT_PATH_MAX]; /* URL, http:// or https://, optional base path */
    char     upstream_ca[TT_PATH_MAX];
    char     upstream_cert[TT_PATH_MAX];
    char     upstream_key[TT_PATH_MAX];
    int      upstream_insecure;
    unsigned upstream_pool;         /* idle keep-alive connections kept: 64 */
    unsigned upstream_pool_idle_ms; /* pooled connection lifetime when idle: 4000 */
    /* [tls] (client side) */
    char     tls_cert[TT_PATH_MAX];
    char     tls_key[TT_PATH_MAX];
    char     tls_client_ca[TT_PATH_MAX];
    /* [admin] */
    char     admin[256];            /* "127.0.0.1:9464" or "off" */
    unsigned model_label_cap;       /* 32 */
    int      metrics_semconv;       /* enum tt_semconv_mode, "tokentap" */
    unsigned admin_max_connections; /* 64 */
    /* [record] */
    char     record[TT_PATH_MAX];   /* "" none, "-" stdout */
    unsigned record_queue;          /* records queued for the writer: 4096 */
    /* [slo] */
    char     goodput[1024];         /* AIPerf syntax, "" none */
    unsigned n_model_slos;          /* [slo.MODEL] sections, file only */
    struct tt_config_model_slo model_slos[TT_CONFIG_SLO_MODELS];
    /* [limits] */
    size_t   max_header_bytes;      /* 65536 */
    unsigned max_headers;           /* 100 */
    size_t   max_body_bytes;        /* 33554432 */
    size_t   buffer_bytes;          /* per-direction high watermark: 262144 */
    unsigned head_timeout_ms;       /* 10000 */
    unsigned connect_timeout_ms;    /* 5000 */
    unsigned response_timeout_ms;   /* 600000 */
    unsigned upstream_idle_ms;      /* 300000 */
    unsigned client_idle_ms;        /* 75000 */
    unsigned body_idle_ms;          /* gap in a request body (408): 60000 */
    unsigned send_timeout_ms;       /* client not taking the response (499): 60000 */
    unsigned max_connections;       /* 20000 */
    /* [shadow.NAME] sections and --shadow, in the order first named */
    unsigned n_shadows;
    struct tt_shadow_cfg shadows[TT_MAX_SHADOWS];
    int      compare_output;        /* [record] answer digests: 0 */
    size_t   inspect_max_bytes;     /* request body copy for the inspector: 1048576 */
    size_t   inspect_budget;        /* all inspector copies: 67108864 */
    size_t   max_event_bytes;       /* one decoded event or WebSocket message: 1048576 */
    /* [trace] (metrics/otlp_export.c, proxy/http/trace.c) */
    char     otlp_endpoint[TT_PATH_MAX]; /* base URL, spans go to URL/v1/traces; "" off */
    int      otlp_protocol;         /* enum tt_otlp_protocol: http/protobuf */
    char     otlp_header[4096];     /* "K=V,K=V" sent with each export; secret */
    unsigned otlp_queue;            /* spans queued for the exporter: 4096 */
    char     otlp_ca[TT_PATH_MAX];  /* CA bundle to verify an https receiver; "" system CAs */
    int      trace_propagate;       /* traceparent upstream: 0 */
    /* resolved by tt_config_args() from otlp_endpoint or, when unset, the
     * OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT variables: the URL spans are
     * POSTed to, "" = no export */
    char     otlp_url[TT_PATH_MAX + 16];
    /* where each value came from, for tt_config_check()'s messages; last,
     * so that two configs with the same values compare equal up to it */
    struct tt_config_src {
        char file[TT_PATH_MAX];     /* the config file loaded, "" none */
        int  line[TT_CONFIG_KEYS];  /* per key: its line there, -1 a flag, 0 default */
    } src;
};

void tt_config_defaults(struct tt_config *c);

/*
 * Load <path> into <c>.  Returns 0, or -1 with <err> set to one line per
 * error, "FILE:LINE: key 'K': reason" (every error of the file, as a
 * compiler lists them, up to TT_CONFIG_MAX_ERRORS; lines joined by '\n').
 */
int tt_config_load(struct tt_config *c, const char *path, char *err,
                   size_t errlen);

/* the same from an open stream; <name> is used in messages */
int tt_config_load_stream(struct tt_config *c, FILE *f, const char *name,
                          char *err, size_t errlen);

/*
 * Parse command-line options (argv[0] and a leading subcommand excluded by
 * the caller).  A --config FILE is loaded first, flags override it.
 * Returns 0 to run, 1 when --help/--version was printed (exit 0), or -1
 * with <err> set to "--flag: reason" (exit 2).
 */
int tt_config_args(struct tt_config *c, int argc, char **argv, char *err,
                   size_t errlen);

/*
 * Cross-field checks (e.g. tls_cert without tls_key, upstream required);
 * 0, or -1 with <err> set to one line per failed check ('\n' between):
 * "FILE:LINE: key 'K': reason" for a key the config file set, "FILE: key
 * 'K' in [S] (or --flag): reason" for one it lacks, "--flag: reason"
 * without a file or for a flag.
 */
int tt_config_check(const struct tt_config *c, char *err, size_t errlen);

/* --help text, generated from the option table */
void tt_config_usage(FILE *out);

/*
 * Print <c> in config-file format, every key with its effective value
 * (check-config shows what it understood).  Returns 0, or -1 on a write
 * error.
 */
int tt_config_dump(const struct tt_config *c, FILE *out);

/*
 * Print the commented reference config (conf/tokentap.conf is this output;
 * tests/unit/test_config.c checks they agree).  Returns 0 or -1.
 */
int tt_config_reference(FILE *out);

/* the OPTIONS section of tokentap(1), from the same table (written with
 * proxy/base/man.c; proxy/server/main.c composes the page) */
int tt_config_man(FILE *out);

/*
 * Build the SLO set of <c>: [slo] goodput as the default, one entry per
 * [slo.MODEL].  Returns 0, or -1 with <err> set.
 */
int tt_config_slo_set(const struct tt_config *c, struct tt_slo_set *set,
                      char *err, size_t errlen);

#endif
