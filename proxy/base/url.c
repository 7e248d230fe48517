/*
 * Upstream URL and listener address parsing (see proxy/base/url.h).  Pure string
 * work plus inet_pton: no name resolution happens here.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "proxy/base/url.h"

/* parse a decimal port of 1..5 digits into <out>; 0 or -1 */
static int parse_port(const char *s, size_t len, unsigned *out)
{
    unsigned v = 0;

    if (len == 0 || len > 5)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = v;
    return 0;
}

/* a registered name: letters, digits, '-', '.', '_' */
static int valid_regname(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_'))
            return 0;
    }
    return 1;
}

/*
 * Parse an upstream URL into <out>.  Returns 0, or -1 with <err> naming the
 * problem.  <out> is zeroed first and only meaningful on success.
 */
int tt_url_parse(const char *url, struct tt_url *out, char *err,
                 size_t errlen)
{
    const char *p, *auth, *auth_end, *host, *host_end, *port = NULL;
    size_t port_len = 0, hlen, plen;
    unsigned portnum;

    memset(out, 0, sizeof(*out));
    if (strncasecmp(url, "http://", 7) == 0) {
        out->tls = 0;
        p = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        out->tls = 1;
        p = url + 8;
    } else {
        snprintf(err, errlen, "expected an http:// or https:// URL, got '%.200s'",
                 url);
        return -1;
    }

    auth = p;
    auth_end = p + strcspn(p, "/?#");
    if (memchr(auth, '@', (size_t)(auth_end - auth))) {
        snprintf(err, errlen, "credentials in the URL are not supported: '%.200s'",
                 url);
        return -1;
    }

    if (*auth == '[') {
        char v6[64];
        struct in6_addr a6;

        host = auth + 1;
        host_end = memchr(host, ']', (size_t)(auth_end - host));
        if (!host_end) {
            snprintf(err, errlen, "unterminated IPv6 literal in '%.200s'", url);
            return -1;
        }
        hlen = (size_t)(host_end - host);
        if (hlen == 0 || hlen >= sizeof(v6)) {
            snprintf(err, errlen, "bad IPv6 literal in '%.200s'", url);
            return -1;
        }
        memcpy(v6, host, hlen);
        v6[hlen] = '\0';
        if (inet_pton(AF_INET6, v6, &a6) != 1) {
            snprintf(err, errlen, "bad IPv6 literal '[%s]'", v6);
            return -1;
        }
        p = host_end + 1;
        if (p < auth_end && *p != ':') {
            snprintf(err, errlen, "unexpected text after ']' in '%.200s'", url);
            return -1;
        }
    } else {
        host = auth;
        host_end = memchr(auth, ':', (size_t)(auth_end - auth));
        if (!host_end)
            host_end = auth_end;
        hlen = (size_t)(host_end - host);
        if (hlen == 0) {
            snprintf(err, errlen, "missing host in '%.200s'", url);
            return -1;
        }
        if (!valid_regname(host, hlen)) {
            snprintf(err, errlen, "bad host '%.*s'", (int)(hlen > 200 ? 200 : hlen),
                     host);
            return -1;
        }
        p = host_end;
    }
    if (p < auth_end) {             /* *p == ':' */
        port = p + 1;
        port_len = (size_t)(auth_end - port);
        if (parse_port(port, port_len, &portnum) < 0 || portnum == 0) {
            snprintf(err, errlen, "bad port '%.*s' (expected 1..65535)",
                     (int)(port_len > 32 ? 32 : port_len), port);
            return -1;
        }
    }

    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    if (port)
        snprintf(out->port, sizeof(out->port), "%u", portnum);
    else
        strcpy(out->port, out->tls ? "443" : "80");

    {
        int deflt = !port || portnum == (out->tls ? 443u : 80u);
        int v6 = *auth == '[';

        snprintf(out->authority, sizeof(out->authority), "%s%s%s%s%s",
                 v6 ? "[" : "", out->host, v6 ? "]" : "",
                 deflt ? "" : ":", deflt ? "" : out->port);
    }

    /* base path: up to '?' or '#', which are refused */
    p = auth_end;
    plen = strcspn(p, "?#");
    if (p[plen] != '\0') {
        snprintf(err, errlen, "query or fragment not allowed in the upstream URL '%.200s'",
                 url);
        return -1;
    }
    for (size_t i = 0; i < plen; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            snprintf(err, errlen, "bad character in the URL path of '%.200s'", url);
            return -1;
        }
    }
    while (plen > 0 && p[plen - 1] == '/')
        plen--;
    if (plen >= sizeof(out->base_path)) {
        snprintf(err, errlen, "base path too long (max %zu bytes)",
                 sizeof(out->base_path) - 1);
        return -1;
    }
    memcpy(out->base_path, p, plen);
    out->base_path[plen] = '\0';
    return 0;
}

/*
 * Parse "IPV4:PORT" or "[IPV6]:PORT".  Returns 0 (filling <ss>/<sslen> when
 * given), or -1 with <err> set.
 */
int tt_addr_parse(const char *s, struct sockaddr_storage *ss,
                  socklen_t *sslen, char *err, size_t errlen)
{
    char host[64];
    const char *colon, *h;
    size_t hlen;
    unsigned port;
    int v6 = 0;

    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            goto bad;
        h = s + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
        v6 = 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            goto bad;
        h = s;
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0 || hlen >= sizeof(host))
        goto bad;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    if (parse_port(colon + 1, strlen(colon + 1), &port) < 0) {
        snprintf(err, errlen, "bad port in '%.200s' (expected 0..65535)", s);
        return -1;
    }

    if (v6) {
        struct sockaddr_in6 sin6;
        memset(&sin6, 0, sizeof(sin6));
        sin6.sin6_family = AF_INET6;
        sin6.sin6_port = htons((unsigned short)port);
        if (inet_pton(AF_INET6, host, &sin6.sin6_addr) != 1) {
            snprintf(err, errlen, "bad IPv6 address '[%s]'", host);
            return -1;
        }
        if (ss) {
            memset(ss, 0, sizeof(*ss));
            memcpy(ss, &sin6, sizeof(sin6));
        }
        if (sslen)
            *sslen = sizeof(sin6);
    } else {
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        sin.sin_port = htons((unsigned short)port);
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
            goto bad;
        if (ss) {
            memset(ss, 0, sizeof(*ss));
            memcpy(ss, &sin, sizeof(sin));
        }
        if (sslen)
            *sslen = sizeof(sin);
    }
    return 0;

bad:
    snprintf(err, errlen,
             "expected ADDR:PORT (IPv4 or [IPv6], e.g. 127.0.0.1:8080), got '%.200s'",
             s);
    return -1;
}
