/*
 * Transitional (see the end of tls/tls.h): the TLS entry points with the
 * signatures proxy/conn.c, proxy/upstream.c and proxy/server.c still call,
 * each handing tls/ what it now takes as parameters.  Delete this file
 * and that block once the callers make these one-line calls themselves.
 */
#include "tls/tls.h"

#include "proxy/server.h"
#include "proxy/target.h"
#include "proxy/worker.h"

struct bufferevent *tt_tls_server_bev(struct tt_worker *w, evutil_socket_t fd)
{
    return tt_tls_accept_bev(w->srv->tls, w->base, fd);
}

struct bufferevent *tt_tls_upstream_bev(struct tt_worker *w)
{
    return tt_tls_connect_bev(w->base);
}

struct bufferevent *tt_tls_upstream_start(struct tt_worker *w,
                                          const struct tt_target *tg,
                                          struct bufferevent *tcp,
                                          char *why, size_t whylen)
{
    return tt_tls_connect_start(w->srv->tls, w->id, tg->idx, tcp, why, whylen);
}

int tt_tls_setup(struct tt_server *srv, struct tt_tls_ctx **out, char *err,
                 size_t errlen)
{
    return tt_targets_tls(&srv->cfg, srv->targets, srv->ntargets, out, err,
                          errlen);
}
