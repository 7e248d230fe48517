/*
 * TLS (see tls.h).  Without TLS configured, connections run on plain
 * socket bufferevents.
 */
#include "tls/tls.h"

#include <stdio.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "proxy/log.h"
#include "proxy/server.h"
#include "proxy/worker.h"

struct bufferevent *tt_tls_server_bev(struct tt_worker *w, evutil_socket_t fd)
{
    return bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
}

struct bufferevent *tt_tls_upstream_bev(struct tt_worker *w)
{
    return bufferevent_socket_new(w->base, -1, BEV_OPT_CLOSE_ON_FREE);
}

const char *tt_tls_log_errors(struct bufferevent *bev, const char *side)
{
    static __thread char reason[256];
    unsigned long e;
    const char *first = NULL;

    while ((e = bufferevent_get_openssl_error(bev)) != 0) {
        ERR_error_string_n(e, reason, sizeof(reason));
        tt_log_info("%s tls: %s", side, reason);
        first = reason;
    }
    return first;
}

int tt_tls_setup(struct tt_server *srv, struct tt_tls_ctx **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    if (srv->cfg.tls_cert[0] || srv->up.tls) {
        snprintf(err, errlen, "TLS is not available in this build yet");
        return -1;
    }
    return 0;
}

void tt_tls_worker_init(struct tt_tls_ctx *t, struct tt_worker *w)
{
    (void)t;
    (void)w;
}

void tt_tls_reload(struct tt_tls_ctx *t)
{
    (void)t;
}

void tt_tls_free(struct tt_tls_ctx *t)
{
    (void)t;
}
