/*
 * tls_conns: the client of bench/cost.sh.  Sends the same small request over
 * N connections, K requests on each (kept alive), plain or TLS, optionally
 * resuming the previous connection's TLS session (a TLS 1.3 ticket), and
 * reads every response to its end (Content-Length or the chunked
 * terminator) before the next.  Only the proxy is counted, so this client is
 * plain blocking code; what matters is that every proxy gets the very same
 * bytes and the same close (close_notify, then FIN).
 *
 *   tls_conns --connect HOST:PORT | --unix PATH  --body FILE
 *             [--conns N] [--requests K] [--path /v1/chat/completions]
 *             [--tls] [--resume] [--ciphersuites S] [--groups G]
 *
 * --tls offers only TLS 1.3 with --ciphersuites (TLS_AES_128_GCM_SHA256)
 * and a key share of --groups (X25519), so every server negotiates the
 * same; the certificate is not verified.  With --resume connection i > 0
 * offers the last ticket received.  On success prints one line:
 *
 *   TLS_CONNS conns=N requests=N resumed=N cipher=... group=... bytes=N
 *
 *   cc -O2 -o tls_conns bench/tls_conns.c -lssl -lcrypto
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static SSL *ssl;
static int fd = -1;

static void die(const char *what)
{
    fprintf(stderr, "tls_conns: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static void put(const char *p, size_t n)
{
    while (n) {
        int w = ssl ? SSL_write(ssl, p, (int)n) : (int)write(fd, p, n);
        if (w <= 0) die("write failed");
        p += w; n -= (size_t)w;
    }
}

/* the response buffer: bytes [rpos, rlen) not yet consumed */
static char rbuf[1 << 16];
static size_t rpos, rlen;
static unsigned long long total;

static int fill(void)
{
    if (rpos == rlen) rpos = rlen = 0;
    if (rlen == sizeof(rbuf)) {           /* keep the unconsumed tail */
        memmove(rbuf, rbuf + rpos, rlen - rpos);
        rlen -= rpos; rpos = 0;
        if (rlen == sizeof(rbuf)) die("response line too long");
    }
    int r = ssl ? SSL_read(ssl, rbuf + rlen, (int)(sizeof(rbuf) - rlen))
                : (int)read(fd, rbuf + rlen, sizeof(rbuf) - rlen);
    if (r <= 0) die("connection closed before the response ended");
    rlen += (size_t)r;
    total += (unsigned long long)r;
    return r;
}

/* one line (up to and including \n) into out, NUL-terminated */
static void line(char *out, size_t cap)
{
    for (;;) {
        char *nl = memchr(rbuf + rpos, '\n', rlen - rpos);
        if (nl) {
            size_t n = (size_t)(nl - (rbuf + rpos)) + 1;
            if (n >= cap) die("response line too long");
            memcpy(out, rbuf + rpos, n);
            out[n] = 0;
            rpos += n;
            return;
        }
        fill();
    }
}

static void skip(unsigned long long n)
{
    while (n) {
        if (rpos == rlen) fill();
        size_t k = rlen - rpos < n ? rlen - rpos : (size_t)n;
        rpos += k; n -= k;
    }
}

static void response(void)
{
    char l[8192];
    long long clen = -1;
    int chunked = 0;
    line(l, sizeof(l));
    if (strncmp(l, "HTTP/1.1 200", 12) != 0) {
        fprintf(stderr, "tls_conns: status: %s", l);
        exit(1);
    }
    for (;;) {
        line(l, sizeof(l));
        if (l[0] == '\r' || l[0] == '\n') break;
        if (!strncasecmp(l, "content-length:", 15)) clen = atoll(l + 15);
        if (!strncasecmp(l, "transfer-encoding:", 18) && strcasestr(l + 18, "chunked")) chunked = 1;
    }
    if (chunked) {
        for (;;) {
            line(l, sizeof(l));
            unsigned long long n = strtoull(l, NULL, 16);
            if (!n) break;
            skip(n);
            line(l, sizeof(l));         /* the chunk's CRLF */
        }
        do line(l, sizeof(l)); while (l[0] != '\r' && l[0] != '\n');   /* trailers */
    } else if (clen >= 0) {
        skip((unsigned long long)clen);
    } else {
        die("response without a length");
    }
}

int main(int argc, char **argv)
{
    const char *connect_to = NULL, *unix_path = NULL, *body_file = NULL, *path = "/v1/chat/completions";
    const char *suites = "TLS_AES_128_GCM_SHA256", *groups = "X25519";
    int conns = 1, requests = 1, tls = 0, resume = 0, resumed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tls")) { tls = 1; continue; }
        if (!strcmp(a, "--resume")) { resume = 1; continue; }
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "--connect")) connect_to = v;
        else if (!strcmp(a, "--unix")) unix_path = v;
        else if (!strcmp(a, "--body")) body_file = v;
        else if (!strcmp(a, "--conns")) conns = atoi(v);
        else if (!strcmp(a, "--requests")) requests = atoi(v);
        else if (!strcmp(a, "--path")) path = v;
        else if (!strcmp(a, "--ciphersuites")) suites = v;
        else if (!strcmp(a, "--groups")) groups = v;
        else goto usage;
    }
    if ((!connect_to == !unix_path) || !body_file || conns < 1 || requests < 1) {
usage:
        fprintf(stderr, "usage: tls_conns --connect HOST:PORT | --unix PATH --body FILE [--conns N]\n"
                        "       [--requests K] [--path P] [--tls] [--resume] [--ciphersuites S] [--groups G]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    /* the request, whole */
    FILE *f = fopen(body_file, "r");
    if (!f) die("cannot open --body");
    static char body[1 << 20];
    size_t blen = fread(body, 1, sizeof(body), f);
    fclose(f);
    static char req[(1 << 20) + 512];
    int hl = snprintf(req, 512, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: %zu\r\n\r\n", path, blen);
    memcpy(req + hl, body, blen);
    size_t reqlen = (size_t)hl + blen;

    struct sockaddr_storage ss = { 0 };
    socklen_t sl;
    if (unix_path) {
        struct sockaddr_un *u = (struct sockaddr_un *)&ss;
        u->sun_family = AF_UNIX;
        snprintf(u->sun_path, sizeof(u->sun_path), "%s", unix_path);
        sl = sizeof(*u);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        char host[64];
        int port;
        if (sscanf(connect_to, "%63[^:]:%d", &host[0], &port) != 2 ||
            inet_pton(AF_INET, host, &in->sin_addr) != 1)
            goto usage;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        sl = sizeof(*in);
    }

    SSL_CTX *ctx = NULL;
    SSL_SESSION *sess = NULL;
    if (tls) {
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx) die("SSL_CTX_new");
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
        if (SSL_CTX_set_ciphersuites(ctx, suites) != 1) die("bad --ciphersuites");
        if (SSL_CTX_set1_groups_list(ctx, groups) != 1) die("bad --groups");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    char cipher[64] = "-", group[32] = "-";
    for (int c = 0; c < conns; c++) {
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        if (!unix_path) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        if (connect(fd, (struct sockaddr *)&ss, sl) < 0) die(strerror(errno));
        rpos = rlen = 0;
        if (tls) {
            ssl = SSL_new(ctx);
            SSL_set_fd(ssl, fd);
            SSL_set_tlsext_host_name(ssl, "localhost");
            if (resume && sess) SSL_set_session(ssl, sess);
            if (SSL_connect(ssl) != 1) die("TLS handshake failed");
            resumed += SSL_session_reused(ssl);
            snprintf(cipher, sizeof(cipher), "%s", SSL_get_cipher_name(ssl));
            int nid = SSL_get_negotiated_group(ssl);
            snprintf(group, sizeof(group), "%s", nid ? OBJ_nid2sn(nid) : "?");
        }
        for (int k = 0; k < requests; k++) {
            put(req, reqlen);
            response();
        }
        if (tls) {
            /* the tickets came with the response (TLS 1.3: after the handshake) */
            if (resume) {
                SSL_SESSION *s = SSL_get1_session(ssl);
                if (s && SSL_SESSION_is_resumable(s)) { SSL_SESSION_free(sess); sess = s; }
                else SSL_SESSION_free(s);
            }
            SSL_shutdown(ssl);          /* close_notify, not waiting for the peer's */
            SSL_free(ssl);
            ssl = NULL;
        }
        close(fd);
        fd = -1;
    }
    printf("TLS_CONNS conns=%d requests=%d resumed=%d cipher=%s group=%s bytes=%llu\n",
           conns, conns * requests, resumed, cipher, group, total);
    SSL_SESSION_free(sess);
    SSL_CTX_free(ctx);
    return 0;
}
