/*
 * The cost per event of decoding a Responses stream three ways: as SSE
 * (tt_stream_feed, what an HTTP stream costs), and as the server messages
 * of a WebSocket turn (proxy/http/wsturn.c over proxy/decode/ws.c), plain and with
 * permessage-deflate (context takeover, 15 bits: inflate included).  The
 * events are a captured Responses stream, one JSON object per line, the
 * delta events repeated to make a long answer.  For a repeatable figure
 * count instructions in measure() alone (bench/ws_cost.sh does):
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_ws.c build/libtt.a \
 *      -levent -lssl -lcrypto -lcjson -lz -lpthread -lm -o build/bench_ws
 *   valgrind --tool=callgrind --toggle-collect='measure*' build/bench_ws FILE.jsonl sse|ws|wsz 20
 *
 * The frames and SSE bytes are built before the measured loop; each round
 * is one response (a turn), so per-response costs are included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "proxy/http/httphead.h"
#include "proxy/decode/stream.h"
#include "proxy/decode/ws.h"
#include "proxy/http/wsturn.h"

static unsigned long long events_seen;

static void on_begin(void *arg, struct tt_request *t)
{
    (void)arg;
    (void)t;
}

static void on_done(void *arg, struct tt_request *t)
{
    (void)arg;
    events_seen += t->s.events;
}

static const struct tt_ws_sess_ops ops = { on_begin, on_done };

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b;
    long n;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)n + 1);
    if (b == NULL || fread(b, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* the measured loops (callgrind --toggle-collect=measure*): each round one
 * response, fed in reads of 4 KiB */
__attribute__((noinline)) static void measure_sse(const char *sbytes, size_t slen, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        struct tt_request r;
        tt_request_init(&r);
        struct tt_stream *st = tt_stream_new(&r, TT_API_OPENAI_RESPONSES,
                                             "text/event-stream", TT_THINK_AUTO);
        for (size_t off = 0; off < slen; off += 4096)
            tt_stream_feed(st, sbytes + off, slen - off < 4096 ? slen - off : 4096,
                           (uint64_t)i * 1000000 + off);
        tt_stream_end(st, 1, (uint64_t)i * 1000000 + slen);
        events_seen += r.s.events;
        tt_stream_free(st);
        tt_request_reset(&r);
    }
}

/* one session, one turn per round, as a long-lived socket has */
__attribute__((noinline)) static void measure_ws(const char *fbytes, const size_t *round_end,
                                                 int rounds, const struct tt_head *h,
                                                 struct evbuffer *create)
{
    struct tt_request sess;
    struct tt_ws_sess *ws;
    struct evbuffer *in = evbuffer_new();

    tt_request_init(&sess);
    sess.status = 101;
    ws = tt_ws_sess_new(&sess, TT_API_OPENAI_RESPONSES, h, 1 << 20, TT_THINK_AUTO, &ops, NULL);
    for (int i = 0; i < rounds; i++) {
        size_t from = i > 0 ? round_end[i - 1] : 0, to = round_end[i];
        struct evbuffer *c = evbuffer_new();
        evbuffer_add_buffer_reference(c, create);
        tt_ws_sess_feed(ws, 1, c, evbuffer_get_length(c), (uint64_t)i * 1000000);
        evbuffer_free(c);
        for (size_t off = from; off < to; off += 4096) {
            size_t n = to - off < 4096 ? to - off : 4096;
            evbuffer_add(in, fbytes + off, n);
            tt_ws_sess_feed(ws, 0, in, n, (uint64_t)i * 1000000 + off);
            evbuffer_drain(in, n);
        }
    }
    tt_ws_sess_free(ws);
    tt_request_reset(&sess);
    evbuffer_free(in);
}

int main(int argc, char **argv)
{
    static const unsigned char key[4] = { 0x11, 0x22, 0x33, 0x44 };
    struct evbuffer *sse = evbuffer_new(), *frames = evbuffer_new(), *create = evbuffer_new();
    struct tt_ws_deflater *def = NULL;
    struct tt_head h;
    const char *mode;
    unsigned long long nev = 0;
    size_t len;
    char *buf;
    int rounds;

    if (argc < 4) {
        fprintf(stderr, "usage: %s FILE.jsonl sse|ws|wsz ROUNDS\n", argv[0]);
        return 2;
    }
    buf = slurp(argv[1], &len);
    if (buf == NULL) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 2;
    }
    mode = argv[2];
    rounds = atoi(argv[3]);
    if (strcmp(mode, "wsz") == 0)
        def = tt_ws_deflater_new(15, 0);
    tt_head_init(&h, 1024, 16);
    tt_head_target(&h, "Switching Protocols", 19);
    tt_head_field(&h, "Upgrade", 7);
    tt_head_value(&h, "websocket", 9);
    if (def != NULL) {
        tt_head_field(&h, "Sec-WebSocket-Extensions", 24);
        tt_head_value(&h, "permessage-deflate", 18);
    }
    /* the client's create, uncompressed (a message may be) */
    tt_ws_write_msg(create, TT_WS_TEXT, "{\"type\":\"response.create\"}", 26, NULL, key);

    /* the stream: every line, the delta events 8 times over; the frames of
     * every round built ahead (a compressed stream continues its context
     * from one turn to the next, as on a long-lived socket) */
    size_t *round_end = calloc((size_t)rounds + 1, sizeof(size_t));
    for (int rd = 0; rd < (strcmp(mode, "sse") == 0 ? 1 : rounds); rd++) {
        for (char *line = buf; *line;) {
            char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) : strlen(line);
            char *d = n > 0 ? strstr(line, ".delta\",") : NULL;
            int reps = d != NULL && d < line + 64 ? 8 : 1;     /* a delta event */
            for (int r = 0; r < reps && n > 0; r++) {
                if (rd == 0) {
                    evbuffer_add(sse, "data: ", 6);
                    evbuffer_add(sse, line, n);
                    evbuffer_add(sse, "\n\n", 2);
                    nev++;
                }
                if (strcmp(mode, "sse") != 0)
                    tt_ws_write_msg(frames, TT_WS_TEXT, line, n, def, NULL);
            }
            if (nl == NULL)
                break;
            line = nl + 1;
        }
        round_end[rd] = evbuffer_get_length(frames);
    }

    size_t slen = evbuffer_get_length(sse), flen = evbuffer_get_length(frames);
    char *sbytes = malloc(slen), *fbytes = malloc(flen ? flen : 1);
    evbuffer_copyout(sse, sbytes, slen);
    evbuffer_copyout(frames, fbytes, flen);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (strcmp(mode, "sse") == 0)
        measure_sse(sbytes, slen, rounds);
    else
        measure_ws(fbytes, round_end, rounds, &h, create);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("%s: %llu events decoded (%llu per round), %.0f ns per event\n", mode, events_seen,
           nev, events_seen ? ns / (double)events_seen : 0);
    free(sbytes);
    free(fbytes);
    free(round_end);
    free(buf);
    evbuffer_free(sse);
    evbuffer_free(frames);
    evbuffer_free(create);
    tt_ws_deflater_free(def);
    tt_head_free(&h);
    return events_seen > 0 ? 0 : 1;
}
