/*
 * tokentap-sim entry point, the top floor: command line, the listening
 * socket, the TLS context, SIGTERM/SIGINT.  It fills in the process-wide
 * state (sim_srv, sim/base.c) and hands each connection to sim/conn.c as
 * soon as it is accepted.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <event2/listener.h>
#include <openssl/err.h>
#include <systemd/sd-daemon.h>

#include "proxy/base/man.h"
#include "proxy/server/ready.h"
#include "sim/sim.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

static int print_usage(FILE *f)
{
    fprintf(f,
"usage: tokentap-sim --listen HOST:PORT [--ready-file FILE]\n"
"                    [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] [--log]\n"
"                    [--latency-scale F] [--ws-deflate on|off]\n"
"\n"
"A simulated LLM server for tests, the demo and benchmarks.  Serves the\n"
"OpenAI (chat, completions, responses), Anthropic, Gemini, Ollama and TGI\n"
"dialects, streaming and not, and over WebSocket the Responses API's\n"
"WebSocket mode (GET /v1/responses) and the Realtime API (GET /v1/realtime);\n"
"behaviour is chosen per request by a JSON object \"sim\" in the request\n"
"body or the client event (see docs/simulator.md).\n"
"\n"
"  --listen HOST:PORT     address to listen on; port 0 picks a free port.\n"
"                         Prints \"listening on HOST:PORT\" once ready.\n"
"  --ready-file FILE      once listening, write {\"pid\":N,\"listen\":\"HOST:PORT\"}\n"
"                         to FILE (atomically: a temporary name, then rename);\n"
"                         READY=1 goes to $NOTIFY_SOCKET when set\n"
"  --tls-cert FILE        serve HTTPS with this certificate (PEM chain)\n"
"  --tls-key FILE         and this private key\n"
"  --tls-client-ca FILE   require client certificates signed by this CA\n"
"  --log                  one line per request on stderr\n"
"  --latency-scale F      multiply every request's ttft_ms, gap_ms and\n"
"                         headers_delay_ms by F (a slower candidate: 1.5)\n"
"  --ws-deflate on|off    accept a WebSocket client's permessage-deflate offer\n"
"                         (default on); off answers every handshake without\n"
"                         the extension, so both ways go uncompressed\n"
"  --help                 this text\n"
"\n"
"Other endpoints: GET /health, GET /stats, POST /stats/reset, POST /echo,\n"
"ANY /echo/headers.  SIGTERM or SIGINT exits 0.\n");
    return ferror(f) ? -1 : 0;
}

/* tokentap-sim(1), from the --help text above (proxy/base/man.c) */
static int man_page(FILE *out)
{
    char *help = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&help, &len);

    if (m == NULL)
        return -1;
    print_usage(m);
    if (fclose(m) != 0) {
        free(help);
        return -1;
    }
    tt_man_header(out, "tokentap-sim", TT_VERSION,
                  "simulated LLM server for tokentap's tests, demo and benchmarks");
    fputs(".SH SYNOPSIS\n.B tokentap-sim\n\\fB\\-\\-listen\\fR \\fIHOST:PORT\\fR "
          "[\\fB\\-\\-tls\\-cert\\fR \\fIFILE\\fR \\fB\\-\\-tls\\-key\\fR "
          "\\fIFILE\\fR [\\fB\\-\\-tls\\-client\\-ca\\fR \\fIFILE\\fR]] "
          "[\\fB\\-\\-log\\fR] [\\fB\\-\\-latency\\-scale\\fR \\fIF\\fR] "
          "[\\fB\\-\\-ws\\-deflate\\fR \\fIon\\fR|\\fIoff\\fR]\n"
          ".SH DESCRIPTION\n", out);
    tt_man_from_help(out, help);
    free(help);
    fputs(".SH SEE ALSO\n.BR tokentap (1);\n"
          "simulator.md in /usr/share/doc/tokentap.\n", out);
    return ferror(out) ? -1 : 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig; (void)what; (void)arg;
    event_base_loopbreak(sim_srv.base);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int salen, void *arg)
{
    (void)l; (void)sa; (void)salen; (void)arg;
    sim_conn_accept(fd);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    (void)l; (void)arg;
    /* EMFILE and friends: keep serving the connections we have */
    fprintf(stderr, "tokentap-sim: accept: %s\n",
            evutil_socket_error_to_string(err));
}

static SSL_CTX *tls_setup(const char *cert, const char *key, const char *ca)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (!ctx)
        return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        fprintf(stderr, "tokentap-sim: --tls-cert %s: cannot load\n", cert);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        fprintf(stderr, "tokentap-sim: --tls-key %s: cannot load or does not "
                "match the certificate\n", key);
        goto fail;
    }
    if (ca) {
        STACK_OF(X509_NAME) *names;
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            fprintf(stderr, "tokentap-sim: --tls-client-ca %s: cannot load\n",
                    ca);
            goto fail;
        }
        names = SSL_load_client_CA_file(ca);
        if (names)
            SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
                           SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    return ctx;
fail:
    ERR_print_errors_fp(stderr);
    SSL_CTX_free(ctx);
    return NULL;
}

/* "127.0.0.1:8080", "[::1]:0", ":8080" (all IPv4 interfaces); 0 or -1 */
static int parse_listen(const char *s, struct sockaddr_storage *ss, int *sl)
{
    const char *colon = strrchr(s, ':');
    char host[INET6_ADDRSTRLEN + 2], *end;
    size_t hl;
    long port;

    if (!colon || !colon[1])
        return -1;
    port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return -1;
    hl = (size_t)(colon - s);
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
        s++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
    memset(ss, 0, sizeof(*ss));
    if (hl == 0 || inet_pton(AF_INET, host, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *sl = sizeof(*s4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *sl = sizeof(*s6);
        return 0;
    }
    if (!strcmp(host, "localhost")) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s4->sin_port = htons((uint16_t)port);
        *sl = sizeof(*s4);
        return 0;
    }
    return -1;
}

/* the bound address on stdout, in the ready file and to systemd; 0 or -1 */
static int announce_ready(evutil_socket_t fd, const char *ready_file)
{
    char name[INET6_ADDRSTRLEN + 16], err[512];
    struct tt_ready_kv kv[1] = { { "listen", name } };

    if (tt_sock_name(fd, name, sizeof(name)) != 0) {
        perror("tokentap-sim: getsockname");
        return -1;
    }
    printf("listening on %s\n", name);
    fflush(stdout);
    if (ready_file && tt_ready_write(ready_file, kv, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "tokentap-sim: --ready-file: %s\n", err);
        return -1;
    }
    sd_notifyf(0, "READY=1\nSTATUS=listening on %s", name);
    return 0;
}

int main(int argc, char **argv)
{
    const char *listen_at = NULL, *cert = NULL, *key = NULL, *ca = NULL;
    const char *ready_file = NULL;
    struct sockaddr_storage ss;
    int sl = sizeof(ss), i, rc = 0;
    struct event_config *cfg;
    struct evconnlistener *lis;
    struct event *sigterm, *sigint;

    sim_srv.ws_deflate = 1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--man")) {
            return man_page(stdout) < 0 ? 1 : 0;
        } else if (!strcmp(a, "--log")) {
            sim_srv.log = 1;
            continue;
        } else if (!strcmp(a, "--latency-scale")) {
            char *end;
            if (i + 1 >= argc || (sim_srv.latency_scale = strtod(argv[i + 1], &end)) <= 0 ||
                *end != '\0' || sim_srv.latency_scale > 1000) {
                fprintf(stderr, "tokentap-sim: --latency-scale needs a factor, 0 < F <= 1000\n");
                return 2;
            }
            i++;
            continue;
        } else if (!strcmp(a, "--ws-deflate")) {
            const char *v = i + 1 < argc ? argv[i + 1] : "";
            if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
                fprintf(stderr, "tokentap-sim: --ws-deflate needs on or off\n");
                return 2;
            }
            sim_srv.ws_deflate = !strcmp(v, "on");
            i++;
            continue;
        } else if (!strcmp(a, "--listen")) {
            dst = &listen_at;
        } else if (!strcmp(a, "--ready-file")) {
            dst = &ready_file;
        } else if (!strcmp(a, "--tls-cert")) {
            dst = &cert;
        } else if (!strcmp(a, "--tls-key")) {
            dst = &key;
        } else if (!strcmp(a, "--tls-client-ca")) {
            dst = &ca;
        } else {
            fprintf(stderr, "tokentap-sim: unknown option %s (try --help)\n", a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tokentap-sim: %s needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!listen_at) {
        fprintf(stderr, "tokentap-sim: --listen HOST:PORT is required\n");
        return 2;
    }
    if (parse_listen(listen_at, &ss, &sl) != 0) {
        fprintf(stderr, "tokentap-sim: --listen %s: not HOST:PORT\n", listen_at);
        return 2;
    }
    if ((cert && !key) || (!cert && key) || (ca && !cert)) {
        fprintf(stderr, "tokentap-sim: --tls-cert and --tls-key go together "
                "(and --tls-client-ca needs them)\n");
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    if (cert && !(sim_srv.ssl = tls_setup(cert, key, ca)))
        return 2;

    /* precise timers: CLOCK_MONOTONIC and timerfd, not the 4 ms coarse
     * clock; and no cached time: a timer is added relative to the loop's
     * clock, and a clock cached when the loop woke up is earlier than the
     * sim_now_ns() the delay was computed from, so events would leave
     * early by however long the loop had been busy (tests rely on "never
     * before the schedule") */
    cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    event_config_set_flag(cfg, EVENT_BASE_FLAG_NO_CACHE_TIME);
    sim_srv.base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!sim_srv.base) {
        fprintf(stderr, "tokentap-sim: cannot create the event loop\n");
        return 1;
    }

    lis = evconnlistener_new_bind(sim_srv.base, on_accept, NULL,
                                  LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                  LEV_OPT_CLOSE_ON_EXEC, 1024,
                                  (struct sockaddr *)&ss, sl);
    if (!lis) {
        fprintf(stderr, "tokentap-sim: --listen %s: %s\n", listen_at,
                strerror(errno));
        return 1;
    }
    evconnlistener_set_error_cb(lis, on_accept_error);

    sigterm = evsignal_new(sim_srv.base, SIGTERM, on_signal, NULL);
    sigint = evsignal_new(sim_srv.base, SIGINT, on_signal, NULL);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);

    if (announce_ready(evconnlistener_get_fd(lis), ready_file) == 0)
        event_base_dispatch(sim_srv.base);
    else
        rc = 1;

    evconnlistener_free(lis);
    sim_conn_free_all();
    event_free(sigterm);
    event_free(sigint);
    event_base_free(sim_srv.base);
    if (sim_srv.ssl)
        SSL_CTX_free(sim_srv.ssl);
    return rc;
}
