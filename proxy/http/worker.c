/*
 * A worker's bookkeeping (see worker.h): requests in flight, the requests
 * that finish, the connections that go.  Below the connections and legs
 * that call it; it calls nothing of theirs, nor of proxy/server/server.c (a
 * finished request goes up through w->report).
 */
#include "proxy/http/worker.h"

#include <event2/event.h>

#include "metrics/agg.h"
#include "metrics/request.h"

void tt_worker_request_start(struct tt_worker *w)
{
    w->inflight++;
    tt_agg_inflight(w->agg, +1);
}

void tt_worker_request_done(struct tt_worker *w, struct tt_request *r)
{
    if (r->ended == 0)
        r->ended = tt_now_mono();
    if (!r->shadow) {               /* in flight counts client requests */
        w->inflight--;
        tt_agg_inflight(w->agg, -1);
    }
    w->report(w, r);
}

void tt_worker_conn_gone(struct tt_worker *w)
{
    if (w->draining && w->nconns == 0 && w->nlegs == 0)
        event_base_loopexit(w->base, NULL);
}
