/*
 * Upstream targets: the places a request can be sent.  Target 0 is the
 * primary upstream (the one the client's response comes from); targets
 * 1..n are the shadows of [shadow.NAME] (candidates that get a copy of
 * sampled requests, see docs/shadow.md).  Built once at start by
 * proxy/server/server.c from the configuration and read-only afterwards, except
 * for the in-flight counter.  Read by proxy/http/upstream.c (where to connect,
 * pool sizes), proxy/http/leg.c (timeouts, head rewriting) and proxy/http/conn.c
 * (which requests to mirror); tt_targets_tls() describes them to tls/.
 */
#ifndef TT_TARGET_H
#define TT_TARGET_H

#include <stdatomic.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/base/url.h"

#define TT_MAX_TARGETS (1 + TT_MAX_SHADOWS)   /* TT_MAX_UPSTREAMS */

struct ev_token_bucket_cfg;

struct tt_target {
    unsigned    idx;                /* 0 = primary */
    const char *name;               /* "primary" or the shadow's name; borrowed from the config */
    struct tt_url url;
    const struct tt_shadow_cfg *sh; /* NULL for the primary; borrowed */

    /* TLS to it (https:// only); strings borrowed from the config */
    const char *ca, *cert, *key;
    int         insecure;

    unsigned    connect_ms, response_ms, idle_ms;
    unsigned    pool, pool_idle_ms;
    uint32_t    apis;               /* bit per enum tt_api mirrored (shadows) */
    double      sample;
    _Atomic unsigned inflight;      /* shadow copies running now */
    /* shadows' read rate limit: bytes a TT_RATE_TICK_NS tick (direct reads,
     * proxy/http/upstream.h), and the same for a TLS bufferevent (owned) */
    size_t      rate_tick;
    struct ev_token_bucket_cfg *rate;
};

/*
 * Fill <t>[0..] from <cfg>: the primary and every shadow.  Returns the
 * number of targets, or -1 with <err> set.
 */
int tt_targets_build(const struct tt_config *cfg, struct tt_target *t,
                     char *err, size_t errlen);
/*
 * The TLS contexts (tls/tls.h) of <cfg>'s listener and of the https://
 * targets among <t>[0..n-1], upstream number = target index.  <*out> is
 * NULL when neither side uses TLS.  Returns 0, or -1 with <err> set.
 */
struct tt_tls_ctx;
int tt_targets_tls(const struct tt_config *cfg, const struct tt_target *t,
                   unsigned n, struct tt_tls_ctx **out, char *err,
                   size_t errlen);
/* free what tt_targets_build() made for <n> targets */
void tt_targets_free(struct tt_target *t, unsigned n);

/*
 * Does shadow <t> take a copy of a request to <api>?  <key>/<keylen> is
 * the value of its sample_key header (NULL when absent or not configured):
 * the same value always gets the same answer.  Random otherwise.
 */
int tt_target_samples(const struct tt_target *t, int api, const char *key,
                      size_t keylen);

#endif
