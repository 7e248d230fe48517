/*
 * Upstream targets (see target.h).
 *
 * Sampling.  With a sample_key, the header value is hashed (FNV-1a 64, then
 * a 64-bit finaliser so that similar values spread) together with the
 * shadow's name, and the request is mirrored when the hash, as a fraction
 * of 2^64, is below <sample>: one value, one decision, independently per
 * shadow.  Without one, each request draws from a per-thread xorshift
 * generator seeded from OpenSSL's RAND_bytes.
 */
#include "proxy/http/target.h"

#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <openssl/rand.h>

#include "metrics/request.h"
#include "proxy/http/upstream.h"
#include "tls/tls.h"

static uint32_t api_mask(const char *paths)
{
    uint32_t m = 0;
    const char *p = paths;

    if (strcmp(paths, "llm") == 0) {
        for (int a = 1; a < TT_API__COUNT; a++)
            m |= 1u << a;
        return m;
    }
    while (*p) {
        size_t n;
        while (*p == ',' || *p == ' ')
            p++;
        n = strcspn(p, ", ");
        for (int a = 1; a < TT_API__COUNT && n > 0; a++)
            if (strlen(tt_api_name((enum tt_api)a)) == n &&
                strncmp(tt_api_name((enum tt_api)a), p, n) == 0)
                m |= 1u << a;
        p += n;
    }
    return m;
}

int tt_targets_build(const struct tt_config *cfg, struct tt_target *t,
                     char *err, size_t errlen)
{
    char why[512];
    unsigned i;

    memset(t, 0, sizeof(*t) * TT_MAX_TARGETS);
    t[0].name = "primary";
    if (tt_url_parse(cfg->upstream, &t[0].url, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "--upstream: %s", why);
        return -1;
    }
    t[0].ca = cfg->upstream_ca;
    t[0].cert = cfg->upstream_cert;
    t[0].key = cfg->upstream_key;
    t[0].insecure = cfg->upstream_insecure;
    t[0].connect_ms = cfg->connect_timeout_ms;
    t[0].response_ms = cfg->response_timeout_ms;
    t[0].idle_ms = cfg->upstream_idle_ms;
    t[0].pool = cfg->upstream_pool;
    t[0].pool_idle_ms = cfg->upstream_pool_idle_ms;
    t[0].sample = 1.0;
    for (i = 0; i < cfg->n_shadows; i++) {
        const struct tt_shadow_cfg *sh = &cfg->shadows[i];
        struct tt_target *s = &t[i + 1];

        s->idx = i + 1;
        s->name = sh->name;
        s->sh = sh;
        if (tt_url_parse(sh->url, &s->url, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "shadow '%s': url: %s", sh->name, why);
            return -1;
        }
        s->ca = sh->ca;
        s->cert = sh->cert;
        s->key = sh->key;
        s->insecure = sh->insecure;
        s->connect_ms = sh->connect_timeout_ms;
        s->response_ms = sh->response_timeout_ms;
        s->idle_ms = sh->idle_timeout_ms;
        s->pool = sh->pool;
        s->pool_idle_ms = cfg->upstream_pool_idle_ms;
        s->apis = api_mask(sh->paths);
        s->sample = sh->sample;
        {
            /* 10 ms ticks: a smooth cap, far above any real token stream */
            struct timeval tick = TT_RATE_TICK_TV;
            size_t per_tick = sh->max_read_rate / (1000000000u / TT_RATE_TICK_NS);
            s->rate_tick = per_tick;
            s->rate = ev_token_bucket_cfg_new(per_tick, per_tick * 2, EV_RATE_LIMIT_MAX,
                                              EV_RATE_LIMIT_MAX, &tick);
            if (s->rate == NULL) {
                snprintf(err, errlen, "shadow '%s': out of memory", sh->name);
                tt_targets_free(t, i + 2);
                return -1;
            }
        }
    }
    return (int)cfg->n_shadows + 1;
}

int tt_targets_tls(const struct tt_config *cfg, const struct tt_target *t,
                   unsigned n, struct tt_tls_ctx **out, char *err,
                   size_t errlen)
{
    struct tt_tls_upstream up[TT_MAX_TARGETS];
    struct tt_tls_conf conf = {
        .cert = cfg->tls_cert,
        .key = cfg->tls_key,
        .client_ca = cfg->tls_client_ca,
        .workers = cfg->workers > 0 ? (unsigned)cfg->workers : 1,
        .up = up,
        .nup = n < TT_MAX_TARGETS ? n : TT_MAX_TARGETS,
    };

    memset(up, 0, sizeof(up));
    for (unsigned i = 0; i < conf.nup; i++) {
        up[i].host = t[i].url.tls ? t[i].url.host : NULL;
        up[i].name = t[i].name;
        up[i].shadow = t[i].sh != NULL;
        up[i].ca = t[i].ca;
        up[i].cert = t[i].cert;
        up[i].key = t[i].key;
        up[i].insecure = t[i].insecure;
    }
    return tt_tls_new(&conf, out, err, errlen);
}

void tt_targets_free(struct tt_target *t, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (t[i].rate != NULL) {
            ev_token_bucket_cfg_free(t[i].rate);
            t[i].rate = NULL;
        }
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t draw(void)
{
    static _Thread_local uint64_t s;

    if (s == 0) {
        if (RAND_bytes((unsigned char *)&s, sizeof(s)) != 1 || s == 0)
            s = 0x9e3779b97f4a7c15ULL ^ (uint64_t)tt_now_mono();
    }
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return mix64(s);
}

int tt_target_samples(const struct tt_target *t, int api, const char *key,
                      size_t keylen)
{
    uint64_t h;

    if (t->sh == NULL || api <= 0 || api >= 32 || !(t->apis & (1u << api)))
        return 0;
    if (t->sample >= 1.0)
        return 1;
    if (t->sample <= 0.0)
        return 0;
    if (t->sh->sample_key[0] && key != NULL) {
        h = 0xcbf29ce484222325ULL;
        for (const char *p = t->name; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
        h = (h ^ 0xff) * 0x100000001b3ULL;
        for (size_t i = 0; i < keylen; i++)
            h = (h ^ (unsigned char)key[i]) * 0x100000001b3ULL;
        h = mix64(h);
    } else {
        h = draw();
    }
    /* h / 2^64 < sample, without floating point on the 2^64 edge */
    return (double)(h >> 11) < t->sample * 9007199254740992.0;   /* 2^53 */
}
