/*
 * The cost of recording one finished request: tt_metrics_compute,
 * tt_agg_observe and tt_record_format (+ free), each timed over many
 * iterations for a streamed answer of N token events (default 120 and
 * 1000).  Standalone:
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_record.c build/libtt.a \
 *      -levent -lssl -lcrypto -lcjson -lpthread -lm -o build/bench_record
 *   build/bench_record [events...]
 *
 * For a repeatable figure count instructions instead (BENCH_ITERS sets the
 * iterations; each function's inclusive count over them is its cost):
 *
 *   BENCH_ITERS=2000 valgrind --tool=callgrind build/bench_record 120
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/agg.h"
#include "metrics/clock.h"
#include "metrics/record.h"
#include "metrics/slo.h"

#define MS 1000000ull

static void build(struct tt_request *r, unsigned n, int i)
{
    uint64_t t0 = 1000 * MS;
    tt_request_init(r);
    r->t0 = t0;
    r->start_wall_ns = 1759813207532900363ll;
    r->status = 200;
    r->api = TT_API_OPENAI_CHAT;
    snprintf(r->model, sizeof(r->model), "model-%d", i % 8);
    snprintf(r->request_id, sizeof(r->request_id), "req-%d", i);
    strcpy(r->method, "POST");
    strcpy(r->path, "/v1/chat/completions");
    r->s.streaming = 1;
    r->s.terminal = 1;
    r->s.usage_input = 512;
    r->s.usage_output = n;
    strcpy(r->s.finish_reason, "stop");
    for (int k = 0; k < TT_TS_FIRST_TOKEN; k++)
        r->ts[k] = t0 + (uint64_t)(k + 1) * MS;
    for (unsigned k = 0; k < n; k++) {
        uint64_t t = t0 + 200 * MS + k * 25 * MS + (uint64_t)(k * 7919 % 1000) * 1000;
        tt_request_token(r, t);
    }
    r->ts[TT_TS_FIRST_TOKEN] = r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = r->token_ts[0];
    if (n > 1)
        r->ts[TT_TS_SECOND_TOKEN] = r->token_ts[1];
    r->ts[TT_TS_LAST_TOKEN] = r->token_ts[n - 1];
    r->ts[TT_TS_RESPONSE_COMPLETE] = r->ts[TT_TS_DELIVERED] = r->token_ts[n - 1] + MS;
    r->s.token_events = r->s.answer_events = r->s.events = n;
}

static void run(unsigned events)
{
    enum { ITERS = 200000 };
    struct tt_agg *a = tt_agg_new(NULL);
    struct tt_slo slo;
    struct tt_request r[8];
    char err[64];
    uint64_t t_metrics = 0, t_agg = 0, t_fmt = 0;
    size_t bytes = 0;
    unsigned iters = events > 200 ? ITERS / 10 : ITERS;
    const char *env = getenv("BENCH_ITERS");

    if (env != NULL && atoi(env) > 0)
        iters = (unsigned)atoi(env);

    tt_slo_parse("ttft:500 itl:50", &slo, err, sizeof(err));
    for (int i = 0; i < 8; i++)
        build(&r[i], events, i);

    for (unsigned i = 0; i < iters; i++) {
        struct tt_request *q = &r[i % 8];
        struct tt_metric_values m;
        struct tt_slo_result res;
        const char *src;
        size_t len;

        uint64_t a0 = tt_now_mono();
        tt_metrics_compute(q, &m, &src);
        tt_slo_judge(&slo, &m, 0, &res);
        uint64_t a1 = tt_now_mono();
        tt_agg_observe(a, q, &m, &res);
        uint64_t a2 = tt_now_mono();
        char *line = tt_record_format(q, &m, src, &res, &len);
        free(line);
        uint64_t a3 = tt_now_mono();
        t_metrics += a1 - a0;
        t_agg += a2 - a1;
        t_fmt += a3 - a2;
        bytes += len;
    }
    printf("events=%-5u metrics+judge %7.0f ns  agg_observe %7.0f ns  "
           "record_format %7.0f ns  total %7.0f ns  record %zu bytes\n",
           events, (double)t_metrics / iters, (double)t_agg / iters,
           (double)t_fmt / iters, (double)(t_metrics + t_agg + t_fmt) / iters,
           bytes / iters);
    for (int i = 0; i < 8; i++)
        tt_request_reset(&r[i]);
    tt_agg_free(a);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        run(120);
        run(1000);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        run((unsigned)atoi(argv[i]));
    return 0;
}
