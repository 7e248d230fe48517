/*
 * Paired comparison of shadow legs with their primary: for every mirrored
 * request, each shadow's figures minus the primary's, kept in a bounded
 * ring per shadow and summarised for /stats over the 1m/5m/1h windows
 * (median paired difference with a 95 % interval, finish-reason agreement,
 * shadow errors and drops, exact-match fraction of answer digests).
 *
 * A tt_pair collects the legs of one request as they finish (in any
 * order, on the worker's thread); the last leg submits it to the store,
 * which takes its lock once per mirrored request.  Owned by
 * proxy/server/server.c; fed by tt_worker_request_done(); read by proxy/server/admin.c
 * through metrics/agg.c's /stats.
 *
 * Memory: TT_PAIRS_RING samples x 64 bytes per shadow (256 KiB each).
 */
#ifndef TT_PAIRS_H
#define TT_PAIRS_H

#include <stdint.h>

#include "metrics/metric.h"
#include "metrics/request.h"

#define TT_PAIRS_RING 4096

struct tt_pairs;
struct tt_pair;
struct cJSON;

/* a store for shadows <names>[1..n-1] (names[0] is the primary); NULL on
 * out of memory */
struct tt_pairs *tt_pairs_new(const char *const *names, unsigned n);
void tt_pairs_free(struct tt_pairs *ps);

/* a mirrored request with <nlegs> legs (primary included); NULL when <ps>
 * is NULL or out of memory (the request is then simply not paired) */
struct tt_pair *tt_pair_new(struct tt_pairs *ps, unsigned nlegs);

/* leg <idx> (target index) finished with record <r> and metrics <m>; the
 * last leg submits the pair and frees it */
void tt_pair_leg_done(struct tt_pair *p, unsigned idx, const struct tt_request *r,
                      const struct tt_metric_values *m);
/* leg <idx> ends without a result (never recorded) */
void tt_pair_leg_gone(struct tt_pair *p, unsigned idx);

/* add "comparisons" to the /stats object <root>; 0 or -1 */
int tt_pairs_json(struct tt_pairs *ps, struct cJSON *root, uint64_t now_ns);

#endif
