/*
 * The cost of decoding a captured stream: tt_stream_feed over a whole
 * fixture file, repeated, as the proxy's side read does it.  Prints events
 * and ns per event; for a repeatable figure count instructions instead:
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/share/include/llhttp \
 *      bench/bench_decode.c build/libtt.a -levent -lssl -lcrypto -lcjson \
 *      -lpthread -lm -o build/bench_decode
 *   build/bench_decode ../shared/fixtures/streams/vllm-0.24-chat-include_usage.sse 20000
 *   valgrind --tool=callgrind build/bench_decode FILE 500    # Ir / events
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proxy/jsonarena.h"
#include "proxy/stream.h"

int main(int argc, char **argv)
{
    static char buf[1 << 20];
    struct timespec a, b;
    unsigned long events = 0;
    size_t n;
    double ns;
    FILE *f;
    int i, iters;

    if (argc != 3 || (f = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "usage: bench_decode FIXTURE.sse ITERATIONS\n");
        return 2;
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    iters = atoi(argv[2]);
    tt_json_init();
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (i = 0; i < iters; i++) {
        struct tt_request r;
        struct tt_stream *st;

        tt_request_init(&r);
        st = tt_stream_new(&r, TT_API_OPENAI_CHAT, "text/event-stream", TT_THINK_AUTO);
        if (st == NULL)
            return 1;
        tt_stream_feed(st, buf, n, 1000);
        tt_stream_end(st, 1, 2000);
        events += r.s.events;
        tt_stream_free(st);
        tt_request_reset(&r);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("%lu events, %.0f ns/event, %.1f MB/s\n", events, ns / (double)events,
           (double)n * iters / ns * 1e3);
    return 0;
}
