/*
 * TLS (see tls.h).  Without TLS configured, connections run on plain
 * socket bufferevents.
 *
 * Contexts.  One SSL_CTX for the listener and one per https:// upstream,
 * each shared by every worker thread (OpenSSL 3 contexts are thread-safe
 * for SSL_new()).  The current one is read under <lock> with a reference
 * taken (SSL_CTX_up_ref), so a SIGHUP
 * reload can swap in a new context at any time: new handshakes use the new
 * one, every SSL made before keeps its own reference to the old one, which
 * is freed with the last connection that uses it.
 *
 * Sessions.  Each worker keeps, per upstream, the last session ticket the
 * upstream gave it (new-session callback, client cache without internal
 * store) and offers it on its next new connection there, so a pool refill
 * costs an abbreviated handshake.  The slots are indexed by the worker's
 * number the caller passes; a slot is only touched by its worker's thread;
 * it also holds a reference to the context the session came from, so a
 * session is never offered with a context that did not make it.
 *
 * Ends of streams.  OpenSSL 3 reports a peer that closes without
 * close_notify as an error ("unexpected eof"); with
 * SSL_OP_IGNORE_UNEXPECTED_EOF and libevent's dirty-shutdown allowance it is
 * a plain BEV_EVENT_EOF, and proxy/http/leg.c decides from the HTTP framing
 * whether the body was complete (close-delimited) or cut ("truncated").
 *
 * A libevent 2.1 detail.  An OpenSSL bufferevent whose reading stops at
 * the read high watermark may leave decrypted bytes inside the SSL object;
 * when the reader drains the input, libevent only waits for the socket to
 * become readable again, which never happens once the peer has sent
 * everything.  A callback on the input buffer wakes the read side when
 * bytes were drained while the SSL object still holds some (kick_read).
 */
#include "tls/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>

#include "proxy/base/log.h"

/* Mozilla "intermediate" TLS 1.2 suites (ECDHE + AEAD only); TLS 1.3
 * suites are OpenSSL's defaults, all of them AEAD */
#define TT_TLS12_CIPHERS                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"      \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"      \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

static const unsigned char alpn_http11[] = "\x08http/1.1";
#define ALPN_HTTP11_LEN (sizeof(alpn_http11) - 1)

struct tt_tls_slot {
    SSL_SESSION *sess;          /* owned: the last session, or NULL */
    SSL_CTX     *sess_ctx;      /* owned reference: the context it came from */
};

struct tt_tls_ctx {
    struct tt_tls_conf  conf;       /* strings borrowed; conf.up is <ups> */
    struct tt_tls_upstream *ups;    /* owned copy: [conf.nup] */
    pthread_mutex_t     lock;       /* guards <server> and <upstream> */
    SSL_CTX            *server;     /* owned reference, NULL without a cert */
    SSL_CTX           **upstream;   /* owned: [conf.nup] references, one per
                                     * https:// upstream, else NULL */
    struct tt_tls_slot *slots;      /* owned, one per worker and upstream */
    unsigned            nslots;
};

static int slot_index = -1;         /* SSL ex_data: the worker's slot */
static int asked_index = -1;        /* SSL ex_data: non-NULL while the upstream
                                     * asked for a client certificate we do
                                     * not have and sent no data yet */
static const char no_client_cert[] =
    "the upstream asked for a client certificate and none is configured "
    "(--upstream-cert/--upstream-key)";

/* ------------------------------------------------------------------ */
/* helpers                                                             */

/* the reason of the first queued OpenSSL error, the queue cleared */
static const char *ssl_reason(void)
{
    static _Thread_local char buf[256];
    unsigned long e = ERR_peek_error();     /* the first: the cause */
    const char *r;

    if (e == 0) {
        ERR_clear_error();
        return "unknown error";
    }
    r = ERR_reason_error_string(e);
    if (r != NULL)
        snprintf(buf, sizeof(buf), "%s", r);
    else
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return buf;
}

static int is_ip_literal(const char *host)
{
    unsigned char a[16];
    return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

static SSL_CTX *ctx_get(struct tt_tls_ctx *t, SSL_CTX *const *which)
{
    SSL_CTX *c;

    pthread_mutex_lock(&t->lock);
    c = *which;
    if (c != NULL)
        SSL_CTX_up_ref(c);
    pthread_mutex_unlock(&t->lock);
    return c;
}

static void ctx_swap(struct tt_tls_ctx *t, SSL_CTX **which, SSL_CTX *fresh)
{
    SSL_CTX *old;

    pthread_mutex_lock(&t->lock);
    old = *which;
    *which = fresh;
    pthread_mutex_unlock(&t->lock);
    SSL_CTX_free(old);
}

/* "CN=api.example.com, sha256 AB:CD:..., valid until Jan  1 00:00:00 2030 GMT" */
static void describe_cert(X509 *x, char *out, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0, i;
    char fp[3 * EVP_MAX_MD_SIZE + 1] = "", subj[256] = "?", until[64] = "?";
    BIO *b;

    if (x == NULL) {
        snprintf(out, len, "(no certificate)");
        return;
    }
    X509_NAME_oneline(X509_get_subject_name(x), subj, sizeof(subj));
    if (X509_digest(x, EVP_sha256(), md, &mdlen) == 1)
        for (i = 0; i < mdlen && i < 8; i++)
            snprintf(fp + 3 * i, 4, "%02X%s", md[i], i + 1 < 8 ? ":" : "");
    b = BIO_new(BIO_s_mem());
    if (b != NULL) {
        int n;
        ASN1_TIME_print(b, X509_get0_notAfter(x));
        n = BIO_read(b, until, sizeof(until) - 1);
        until[n > 0 ? n : 0] = '\0';
        BIO_free(b);
    }
    snprintf(out, len, "%s, sha256 %s..., valid until %s", subj, fp, until);
}

/* load a PEM chain and its key into <ctx>; 0, or -1 with <err> set */
static int load_pair(SSL_CTX *ctx, const char *cert, const char *key,
                     const char *certflag, const char *keyflag, char *err,
                     size_t errlen)
{
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, errlen, "%s %s: cannot load the certificate chain: %s",
                 certflag, cert, ssl_reason());
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, errlen, "%s %s: cannot load the private key: %s",
                 keyflag, key, ssl_reason());
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "%s %s: the key does not match %s %s: %s",
                 keyflag, key, certflag, cert, ssl_reason());
        return -1;
    }
    return 0;
}

/* trust anchors from a PEM file or a hashed directory */
static int load_ca(SSL_CTX *ctx, const char *path, const char *flag, char *err,
                   size_t errlen)
{
    struct stat st;
    int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);

    if (SSL_CTX_load_verify_locations(ctx, dir ? NULL : path, dir ? path : NULL) != 1) {
        snprintf(err, errlen, "%s %s: cannot load CA certificates: %s", flag, path,
                 ssl_reason());
        return -1;
    }
    return 0;
}

static void common_options(SSL_CTX *ctx)
{
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                             SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* libevent retries a blocked SSL_write from wherever the output
     * buffer's first chain now is */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
}

/* ------------------------------------------------------------------ */
/* contexts                                                            */

static int on_alpn_select(SSL *ssl, const unsigned char **out,
                          unsigned char *outlen, const unsigned char *in,
                          unsigned int inlen, void *arg)
{
    unsigned char *sel;
    (void)ssl;
    (void)arg;

    if (SSL_select_next_proto(&sel, outlen, alpn_http11, ALPN_HTTP11_LEN, in,
                              inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    /* a client that only offers h2: go on without ALPN rather than fail */
    return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *server_ctx_new(const struct tt_tls_conf *cfg, char *err,
                               size_t errlen)
{
    static const unsigned char sid_ctx[] = "tokentap";
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        snprintf(err, errlen, "cannot create a TLS context: %s", ssl_reason());
        return NULL;
    }
    common_options(ctx);
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_set_cipher_list(ctx, TT_TLS12_CIPHERS) != 1) {
        snprintf(err, errlen, "cannot set the cipher list: %s", ssl_reason());
        goto fail;
    }
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn_select, NULL);
    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1);
    if (load_pair(ctx, cfg->cert, cfg->key, "--tls-cert", "--tls-key",
                  err, errlen) < 0)
        goto fail;
    if (cfg->client_ca[0]) {
        STACK_OF(X509_NAME) *names;

        if (load_ca(ctx, cfg->client_ca, "--tls-client-ca", err, errlen) < 0)
            goto fail;
        names = SSL_load_client_CA_file(cfg->client_ca);
        if (names != NULL)
            SSL_CTX_set_client_CA_list(ctx, names);
        ERR_clear_error();
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           NULL);
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* a new session from an upstream: keep it in the connection's worker slot */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct tt_tls_slot *slot = SSL_get_ex_data(ssl, slot_index);
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);

    if (slot == NULL || !SSL_SESSION_is_resumable(sess))
        return 0;
    if (slot->sess != NULL)
        SSL_SESSION_free(slot->sess);
    if (slot->sess_ctx != ctx) {
        SSL_CTX_free(slot->sess_ctx);
        SSL_CTX_up_ref(ctx);
        slot->sess_ctx = ctx;
    }
    slot->sess = sess;
    return 1;                       /* the reference is ours now */
}

/* only called when the upstream asks for a certificate and we have none:
 * go on without one, but remember, so that a refusal can be named (with
 * TLS 1.3 it comes after the handshake, and a reset may swallow the alert) */
static int on_client_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    (void)x509;
    (void)pkey;
    SSL_set_ex_data(ssl, asked_index, (void *)no_client_cert);
    return 0;
}

/* the flag or key names of <tg>'s settings, for messages */
static void target_flags(const struct tt_tls_upstream *tg, char *ca, char *cert,
                         char *key, size_t len)
{
    if (!tg->shadow) {
        snprintf(ca, len, "--upstream-ca");
        snprintf(cert, len, "--upstream-cert");
        snprintf(key, len, "--upstream-key");
    } else {
        snprintf(ca, len, "shadow %s: ca", tg->name);
        snprintf(cert, len, "shadow %s: cert", tg->name);
        snprintf(key, len, "shadow %s: key", tg->name);
    }
}

static SSL_CTX *upstream_ctx_new(const struct tt_tls_upstream *tg, char *err,
                                 size_t errlen)
{
    char fca[64], fcert[64], fkey[64];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (ctx == NULL) {
        snprintf(err, errlen, "cannot create a TLS context: %s", ssl_reason());
        return NULL;
    }
    common_options(ctx);
    target_flags(tg, fca, fcert, fkey, sizeof(fca));
    if (tg->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (tg->ca[0]) {
            if (load_ca(ctx, tg->ca, fca, err, errlen) < 0)
                goto fail;
        } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            snprintf(err, errlen, "cannot load the system CA store: %s",
                     ssl_reason());
            goto fail;
        }
    }
    if (tg->cert[0]) {
        if (load_pair(ctx, tg->cert, tg->key, fcert, fkey, err, errlen) < 0)
            goto fail;
    } else {
        SSL_CTX_set_client_cert_cb(ctx, on_client_cert);
    }
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
                                        SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

static void log_server_ctx(SSL_CTX *ctx, const char *what)
{
    char desc[512];
    X509 *x = SSL_CTX_get0_certificate(ctx);

    describe_cert(x, desc, sizeof(desc));
    tt_log_info("%s: %s", what, desc);
    if (x != NULL && X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
        tt_log_warn("%s: the certificate has expired", what);
    if (x != NULL && X509_cmp_current_time(X509_get0_notBefore(x)) > 0)
        tt_log_warn("%s: the certificate is not valid yet", what);
}

static void log_upstream_ctx(const struct tt_tls_upstream *tg, SSL_CTX *ctx,
                             const char *what)
{
    char desc[512] = "";

    if (tg->cert[0])
        describe_cert(SSL_CTX_get0_certificate(ctx), desc, sizeof(desc));
    tt_log_info("%s %s: verify %s%s%s", what, tg->name,
                tg->insecure ? "off" : tg->ca[0] ? tg->ca : "system CA store",
                desc[0] ? ", client certificate " : "", desc);
}

/* ------------------------------------------------------------------ */
/* bufferevents                                                        */

/* see the top of the file: wake an OpenSSL bufferevent whose SSL object
 * still holds decrypted bytes once its reader made room */
static void kick_read(struct evbuffer *buf, const struct evbuffer_cb_info *info,
                      void *arg)
{
    struct bufferevent *bev = arg;
    SSL *ssl;
    size_t low = 0, high = 0;

    ssl = bufferevent_openssl_get_ssl(bev);
    if (info->n_added > 0 && ssl != NULL && SSL_get_ex_data(ssl, asked_index) != NULL)
        SSL_set_ex_data(ssl, asked_index, NULL);    /* it answered: not refused */
    if (info->n_deleted == 0)
        return;
    if (ssl == NULL || !SSL_is_init_finished(ssl) || !SSL_has_pending(ssl))
        return;
    if (!(bufferevent_get_enabled(bev) & EV_READ))
        return;
    bufferevent_getwatermark(bev, EV_READ, &low, &high);
    if (high != 0 && evbuffer_get_length(buf) >= high)
        return;
    event_active(&bev->ev_read, EV_READ, 1);
}

static struct bufferevent *ssl_bev(struct event_base *base, evutil_socket_t fd,
                                   SSL *ssl, enum bufferevent_ssl_state st)
{
    struct bufferevent *bev;

    bev = bufferevent_openssl_socket_new(base, fd, ssl, st, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL)
        return NULL;                /* <ssl> and <fd> are still the caller's */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    evbuffer_add_cb(bufferevent_get_input(bev), kick_read, bev);
    return bev;
}

struct bufferevent *tt_tls_accept_bev(struct tt_tls_ctx *t,
                                      struct event_base *base,
                                      evutil_socket_t fd)
{
    struct bufferevent *bev;
    SSL_CTX *ctx;
    SSL *ssl;

    ctx = t != NULL ? ctx_get(t, &t->server) : NULL;
    if (ctx == NULL)
        return bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    ssl = SSL_new(ctx);
    SSL_CTX_free(ctx);              /* <ssl> holds its own reference */
    if (ssl == NULL) {
        ERR_clear_error();
        return NULL;
    }
    bev = ssl_bev(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING);
    if (bev == NULL)
        SSL_free(ssl);
    return bev;
}

int tt_tls_listens(struct tt_tls_ctx *t)
{
    int on;

    if (t == NULL)
        return 0;
    pthread_mutex_lock(&t->lock);
    on = t->server != NULL;
    pthread_mutex_unlock(&t->lock);
    return on;
}

struct bufferevent *tt_tls_connect_bev(struct event_base *base)
{
    return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
}

struct bufferevent *tt_tls_connect_start(struct tt_tls_ctx *t, int worker,
                                         unsigned up, struct bufferevent *tcp,
                                         char *why, size_t whylen)
{
    struct event_base *base = bufferevent_get_base(tcp);
    evutil_socket_t fd = bufferevent_getfd(tcp);
    struct tt_tls_slot *slot = NULL;
    struct bufferevent *bev;
    const char *host;
    SSL_CTX *ctx;
    SSL *ssl;

    ctx = t != NULL && up < t->conf.nup ? ctx_get(t, &t->upstream[up]) : NULL;
    if (ctx == NULL || fd < 0) {
        snprintf(why, whylen, "no TLS context for the upstream");
        SSL_CTX_free(ctx);
        bufferevent_free(tcp);
        return NULL;
    }
    ssl = SSL_new(ctx);
    if (ssl == NULL) {
        snprintf(why, whylen, "cannot create a TLS connection: %s", ssl_reason());
        SSL_CTX_free(ctx);
        bufferevent_free(tcp);
        return NULL;
    }
    if (worker >= 0 && (unsigned)worker * t->conf.nup + up < t->nslots)
        slot = &t->slots[(unsigned)worker * t->conf.nup + up];
    SSL_set_ex_data(ssl, slot_index, slot);
    host = t->ups[up].host;
    if (is_ip_literal(host)) {
        /* no SNI for addresses (RFC 6066); the certificate must name the IP */
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
    } else {
        SSL_set_tlsext_host_name(ssl, host);
        SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set1_host(ssl, host);
    }
    SSL_set_alpn_protos(ssl, alpn_http11, ALPN_HTTP11_LEN);
    if (slot != NULL && slot->sess != NULL && slot->sess_ctx == ctx &&
        SSL_SESSION_is_resumable(slot->sess))
        SSL_set_session(ssl, slot->sess);
    SSL_CTX_free(ctx);
    ERR_clear_error();

    /* the socket changes hands: the plain bufferevent lets go of it */
    bufferevent_setfd(tcp, -1);
    bufferevent_free(tcp);
    bev = ssl_bev(base, fd, ssl, BUFFEREVENT_SSL_CONNECTING);
    if (bev == NULL) {
        snprintf(why, whylen, "cannot create a TLS bufferevent");
        SSL_free(ssl);
        evutil_closesocket(fd);
        return NULL;
    }
    return bev;
}

const char *tt_tls_log_errors(struct bufferevent *bev, const char *side)
{
    static _Thread_local char first[384];
    char buf[256], peer[INET6_ADDRSTRLEN + 8] = "";
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    unsigned long e;
    int found = 0;

    if (ssl == NULL)
        return NULL;
    if (strcmp(side, "client") == 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        evutil_socket_t fd = bufferevent_getfd(bev);
        char host[INET6_ADDRSTRLEN] = "?";

        if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host,
                          sizeof(host));
            else
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host,
                          sizeof(host));
            snprintf(peer, sizeof(peer), " %s", host);
        }
    }
    while ((e = bufferevent_get_openssl_error(bev)) != 0) {
        const char *r;

        if (ERR_GET_LIB(e) == 0 && e < 16) {
            /* libevent also queues SSL_get_error() codes; not reasons */
            tt_log_debug("%s tls%s: SSL_get_error %lu", side, peer, e);
            continue;
        }
        ERR_error_string_n(e, buf, sizeof(buf));
        tt_log_info("%s tls%s: %s%s", side, peer,
                    SSL_is_init_finished(ssl) ? "" : "handshake failed: ", buf);
        if (found)
            continue;
        found = 1;
        if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
            ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
            SSL_get_verify_result(ssl) != X509_V_OK) {
            long vr = SSL_get_verify_result(ssl);
            snprintf(first, sizeof(first), "certificate verify failed: %s",
                     X509_verify_cert_error_string(vr));
            continue;
        }
        r = ERR_reason_error_string(e);
        snprintf(first, sizeof(first), "%s", r != NULL ? r : buf);
    }
    if (SSL_get_ex_data(ssl, asked_index) != NULL) {
        /* the refusal of a missing certificate is the likeliest reason */
        tt_log_info("%s tls%s: %s", side, peer, no_client_cert);
        char why[sizeof(first)];
        snprintf(why, sizeof(why), "%s", found ? first : "");
        snprintf(first, sizeof(first), "%s%s%.200s", no_client_cert, found ? ": " : "",
                 why);
        found = 1;
    }
    return found ? first : NULL;
}

void tt_tls_close(struct bufferevent *bev, int clean)
{
    SSL *ssl;

    if (bev == NULL)
        return;
    ssl = bufferevent_openssl_get_ssl(bev);
    if (clean && ssl != NULL && SSL_is_init_finished(ssl) &&
        !(SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN) &&
        evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        SSL_shutdown(ssl);          /* one try, never waits for the reply */
        ERR_clear_error();
    }
    bufferevent_free(bev);
}

/* ------------------------------------------------------------------ */
/* setup, reload                                                       */

int tt_tls_new(const struct tt_tls_conf *conf, struct tt_tls_ctx **out,
               char *err, size_t errlen)
{
    struct tt_tls_ctx *t;
    int any_tls = 0;

    *out = NULL;
    for (unsigned i = 0; i < conf->nup; i++)
        any_tls |= conf->up[i].host != NULL;
    if (!conf->cert[0] && !any_tls)
        return 0;
    if (slot_index < 0)
        slot_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    if (asked_index < 0)
        asked_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->conf = *conf;
    pthread_mutex_init(&t->lock, NULL);
    t->nslots = (conf->workers > 0 ? conf->workers : 1) * conf->nup;
    t->ups = calloc(conf->nup ? conf->nup : 1, sizeof(*t->ups));
    t->upstream = calloc(conf->nup ? conf->nup : 1, sizeof(*t->upstream));
    t->slots = calloc(t->nslots ? t->nslots : 1, sizeof(*t->slots));
    if (t->ups == NULL || t->upstream == NULL || t->slots == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (unsigned i = 0; i < conf->nup; i++)
        t->ups[i] = conf->up[i];
    t->conf.up = t->ups;
    if (conf->cert[0]) {
        t->server = server_ctx_new(conf, err, errlen);
        if (t->server == NULL)
            goto fail;
        log_server_ctx(t->server, "TLS on the listener");
        if (conf->client_ca[0])
            tt_log_info("TLS on the listener: client certificates required, "
                        "CA %s", conf->client_ca);
    }
    for (unsigned i = 0; i < conf->nup; i++) {
        const struct tt_tls_upstream *tg = &t->ups[i];
        if (tg->host == NULL)
            continue;
        t->upstream[i] = upstream_ctx_new(tg, err, errlen);
        if (t->upstream[i] == NULL)
            goto fail;
        log_upstream_ctx(tg, t->upstream[i], "TLS to upstream");
        if (tg->insecure)
            tt_log_warn("%s: the certificate of upstream %s is NOT verified; anyone "
                        "on the path can read and alter traffic",
                        tg->shadow ? "insecure" : "--upstream-insecure", tg->name);
    }
    *out = t;
    return 0;
fail:
    tt_tls_free(t);
    return -1;
}

void tt_tls_reload(struct tt_tls_ctx *t)
{
    const struct tt_tls_conf *cfg = &t->conf;
    char err[512];
    SSL_CTX *fresh;

    if (cfg->cert[0]) {
        fresh = server_ctx_new(cfg, err, sizeof(err));
        if (fresh == NULL) {
            tt_log_error("reload: %s (keeping the current listener certificate)", err);
        } else {
            log_server_ctx(fresh, "reload: TLS on the listener now");
            ctx_swap(t, &t->server, fresh);
        }
    }
    for (unsigned i = 0; i < cfg->nup; i++) {
        const struct tt_tls_upstream *tg = &t->ups[i];
        if (tg->host == NULL)
            continue;
        fresh = upstream_ctx_new(tg, err, sizeof(err));
        if (fresh == NULL) {
            tt_log_error("reload: %s (keeping the current TLS settings of "
                         "upstream %s)", err, tg->name);
        } else {
            log_upstream_ctx(tg, fresh, "reload: TLS to upstream");
            ctx_swap(t, &t->upstream[i], fresh);
        }
    }
}

void tt_tls_free(struct tt_tls_ctx *t)
{
    unsigned i;

    if (t == NULL)
        return;
    for (i = 0; t->slots != NULL && i < t->nslots; i++) {
        if (t->slots[i].sess != NULL)
            SSL_SESSION_free(t->slots[i].sess);
        SSL_CTX_free(t->slots[i].sess_ctx);
    }
    free(t->slots);
    SSL_CTX_free(t->server);
    for (i = 0; t->upstream != NULL && i < t->conf.nup; i++)
        SSL_CTX_free(t->upstream[i]);
    free(t->upstream);
    free(t->ups);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
