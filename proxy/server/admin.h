/*
 * The admin listener (SPEC section 7): Prometheus /metrics, /healthz,
 * /readyz and /stats over libevent's evhttp, on an event base the caller
 * owns (never the proxy port).  Owned by proxy/server/admin.c; started and freed by
 * proxy/server/server.c, which also flips it to draining on SIGTERM.
 *
 *   GET /metrics  200 text/plain; version=0.0.4; charset=utf-8
 *   GET /healthz  200 "ok"
 *   GET /readyz   200 "ready", or 503 "draining" after set_draining
 *   GET /stats    200 application/json
 *   GET /dashboard 200 text/html: the live dashboard (proxy/server/dashboard.html,
 *                 embedded at build time; polls /stats, loads nothing else)
 *   other paths 404; methods other than GET/HEAD 405 (Allow: GET, HEAD)
 */
#ifndef TT_ADMIN_H
#define TT_ADMIN_H

#include <stddef.h>

struct event_base;
struct tt_agg;
struct tt_admin;

/*
 * Listen on <addr_port> ("127.0.0.1:9464", "[::1]:9464", ":9464" = all
 * addresses) on <base>, serving <agg> (borrowed; the aggregator locks
 * itself, so the base may run on another thread than the workers).
 * Returns NULL with <err> set.
 */
struct tt_admin *tt_admin_start(struct event_base *base, const char *addr_port,
                                struct tt_agg *agg, char *err, size_t errlen);

/* serve the merged view of <aggs> (n of them, borrowed) instead */
void tt_admin_set_aggs(struct tt_admin *ad, struct tt_agg *const *aggs,
                       unsigned n);

/* the port actually bound (useful with port 0), or -1 */
int tt_admin_port(const struct tt_admin *ad);
/* the address actually bound, "127.0.0.1:9464" / "[::1]:9464"; 0 or -1 */
int tt_admin_name(const struct tt_admin *ad, char *buf, size_t len);

void tt_admin_set_draining(struct tt_admin *ad, int draining);
/* at most <n> connections at once (0: the default, 64); beyond, 503 */
void tt_admin_set_max_connections(struct tt_admin *ad, unsigned n);

/* proxy/server/dashboard.html, generated into the build by the Makefile */
extern const unsigned char tt_dashboard_html[];
extern const size_t tt_dashboard_html_len;
void tt_admin_free(struct tt_admin *ad);

#endif
