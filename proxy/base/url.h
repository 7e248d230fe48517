/*
 * Upstream URL and listener address parsing.  Owned by proxy/base/url.c; called
 * by the configuration (validation), the upstream connector (host, port,
 * Host header, base path) and the listeners (sockaddr).
 */
#ifndef TT_URL_H
#define TT_URL_H

#include <stddef.h>
#include <sys/socket.h>

struct tt_url {
    int  tls;               /* 1 for https:// */
    char host[256];         /* "example.com", "10.0.0.1", "::1" (no brackets) */
    char port[8];           /* always set: "80", "443" or the explicit one */
    char authority[300];    /* Host header: host[:port], [v6] bracketed,
                             * port omitted when it is the scheme's default */
    char base_path[512];    /* "" or "/openai", never a trailing slash */
};

/*
 * Parse an upstream URL: http:// or https://, a host (name, IPv4 or
 * [IPv6]), an optional :port (1..65535) and an optional base path.  No
 * credentials, query or fragment.  Returns 0 with <out> filled, or -1 with
 * <err> set to the reason (no prefix).
 */
int tt_url_parse(const char *url, struct tt_url *out, char *err,
                 size_t errlen);

/*
 * Parse a listener address "IPV4:PORT" or "[IPV6]:PORT" (port 0..65535,
 * 0 meaning any free port).  <ss>/<sslen> may be NULL when only validating.
 * Returns 0, or -1 with <err> set to "expected ADDR:PORT, got '...'" or a
 * more precise reason.
 */
int tt_addr_parse(const char *s, struct sockaddr_storage *ss,
                  socklen_t *sslen, char *err, size_t errlen);

#endif
