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
 *
 * A third argument rewrites every event of an OpenAI chat fixture into one
 * of the shapes servers send besides the common one (bench/decode_shapes.sh
 * counts each): each event gets a different value where a server's would
 * differ (a timestamp, a logprob, an obfuscation string).
 *
 *   common   the fixture as captured
 *   int19    + "t":<19-digit nanosecond timestamp> at the end
 *   negint   + "offset":<negative integer>
 *   float    + "lp":<negative number with fraction and exponent>
 *   obfusc   + "obfuscation":"<1-16 random letters>" (OpenAI)
 *   escapes  content starts with \n, \", \\, \u00e9 or a surrogate pair
 *   nested   + "meta":{"spans":[<n>,{"k":"<s>"}],"ok":true,"x":null}
 *   reorder  "choices" and what follows it first, then id, object, ...
 *   inner    + "x_note":"<s>" in each delta, "stop_reason":null in each choice
 *   mix      all of the above in one event
 *
 * With --write, the rewritten stream goes to standard output instead, its
 * token events (the fixture's between the first event and the last three)
 * repeated R times, for replaying through the whole proxy
 * (bench/proxy_shapes.sh):
 *
 *   bench_decode FIXTURE.sse --write SHAPE R > SHAPE.sse
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy/decode/decode.h"
#include "proxy/base/jsonarena.h"
#include "proxy/decode/stream.h"

static const char *const shapes[] = {
    "common", "int19", "negint", "float", "obfusc", "escapes", "nested",
    "reorder", "inner", "mix", NULL,
};

struct sb { char *p; size_t n, cap; };

static void put(struct sb *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            exit(1);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(struct sb *b, const char *s)
{
    put(b, s, strlen(s));
}

static int has(const char *shape, const char *name)
{
    return strcmp(shape, name) == 0 || strcmp(shape, "mix") == 0;
}

/* <key> inserted after every "<after>" in [s, s + n), then a comma unless
 * the object ends there */
static void insert_after(struct sb *out, const char *s, size_t n, const char *after,
                         const char *member)
{
    size_t a = strlen(after);
    const char *p = s, *e = s + n, *q;

    while ((q = memmem(p, (size_t)(e - p), after, a)) != NULL) {
        put(out, p, (size_t)(q - p) + a);
        p = q + a;
        puts_(out, member);
        if (p < e && *p != '}')
            puts_(out, ",");
    }
    put(out, p, (size_t)(e - p));
}

/* one event's JSON rewritten into <shape>; <i> varies the values */
static void reshape(struct sb *out, const char *ev, size_t n, const char *shape,
                    unsigned i)
{
    static const char *const esc[] = {
        "\\n", "\\\"q\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00",
    };
    struct sb a = { NULL, 0, 0 }, b = { NULL, 0, 0 };
    char tail[256] = "", m[64];
    const char *ch;
    unsigned j;

    put(&a, ev, n);
    if (has(shape, "escapes")) {
        snprintf(m, sizeof(m), "\"content\":\"%s", esc[i % 5]);
        insert_after(&b, a.p, a.n, "\"content\":\"", m + 11);
        a.n = 0;
        put(&a, b.p, b.n);
        b.n = 0;
    }
    if (has(shape, "inner")) {
        snprintf(m, sizeof(m), "\"x_note\":\"n%u\"", i);
        insert_after(&b, a.p, a.n, "\"delta\":{", m);
        a.n = 0;
        insert_after(&a, b.p, b.n, "\"choices\":[{", "\"stop_reason\":null");
        b.n = 0;
    }
    if (has(shape, "reorder") && (ch = strstr(a.p, "\"choices\":")) != NULL &&
        ch > a.p + 1 && ch[-1] == ',') {
        /* {PRE,"choices":...REST} -> {"choices":...REST,PRE} */
        puts_(&b, "{");
        put(&b, ch, (size_t)(a.p + a.n - 1 - ch));
        puts_(&b, ",");
        put(&b, a.p + 1, (size_t)(ch - 1 - (a.p + 1)));
        puts_(&b, "}");
        a.n = 0;
        put(&a, b.p, b.n);
        b.n = 0;
    }
    if (has(shape, "int19"))
        snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"t\":%llu",
                 1796513334704321662ULL + 10000037ULL * i);
    if (has(shape, "negint"))
        snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"offset\":-%u",
                 1000 + 7 * i);
    if (has(shape, "float"))
        snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"lp\":%.6e",
                 -0.0123 * (i + 1));
    if (has(shape, "obfusc")) {
        size_t k = strlen(tail);
        snprintf(tail + k, sizeof(tail) - k, ",\"obfuscation\":\"");
        k = strlen(tail);
        for (j = 0; j < 1 + (i * 7) % 16; j++)
            tail[k++] = (char)('a' + (i * 13 + j * 5) % 26);
        tail[k++] = '"';
        tail[k] = '\0';
    }
    if (has(shape, "nested"))
        snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail),
                 ",\"meta\":{\"spans\":[%u,{\"k\":\"s%u\"}],\"ok\":true,\"x\":null}",
                 i * 3, i);
    if (a.n > 0 && a.p[a.n - 1] == '}') {
        put(out, a.p, a.n - 1);
        puts_(out, tail);
        puts_(out, "}");
    } else {
        put(out, a.p, a.n);
    }
    free(a.p);
    free(b.p);
}

/* the SSE fixture with each event's data rewritten */
static char *reshape_sse(const char *buf, size_t n, const char *shape, size_t *len)
{
    struct sb out = { NULL, 0, 0 };
    const char *p = buf, *e = buf + n;
    unsigned i = 0;

    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        size_t l = nl != NULL ? (size_t)(nl - p) : (size_t)(e - p);

        if (l > 7 && memcmp(p, "data: {", 7) == 0) {
            puts_(&out, "data: ");
            reshape(&out, p + 6, l - 6, shape, i++);
        } else {
            put(&out, p, l);
        }
        if (nl != NULL)
            puts_(&out, "\n");
        p += l + 1;
    }
    *len = out.n;
    return out.p;
}

/* the fixture's events, the middle ones (all but the first and the last
 * three) <r> times: a longer stream of the same server */
static char *repeat_middle(const char *buf, size_t n, unsigned r, size_t *len)
{
    const char *ev[4096];
    size_t nev = 0;
    const char *p = buf, *e = buf + n, *q;
    struct sb out = { NULL, 0, 0 };

    while (p < e && nev < sizeof(ev) / sizeof(ev[0])) {
        ev[nev++] = p;
        q = memmem(p, (size_t)(e - p), "\n\n", 2);
        p = q != NULL ? q + 2 : e;
    }
    if (nev < 5) {                  /* too short to have a middle */
        put(&out, buf, n);
        *len = out.n;
        return out.p;
    }
    put(&out, ev[0], (size_t)(ev[1] - ev[0]));
    for (unsigned k = 0; k < r; k++)
        put(&out, ev[1], (size_t)(ev[nev - 3] - ev[1]));
    put(&out, ev[nev - 3], (size_t)(e - ev[nev - 3]));
    *len = out.n;
    return out.p;
}

int main(int argc, char **argv)
{
    static char buf[1 << 20];
    struct timespec a, b;
    unsigned long events = 0, fast = 0;
    const char *data = buf;
    size_t n;
    double ns;
    FILE *f;
    int i, iters;

    if (argc < 3 || argc > 5 || (f = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "usage: bench_decode FIXTURE.sse ITERATIONS [SHAPE]\n"
                        "       bench_decode FIXTURE.sse --write SHAPE REPEAT\n");
        return 2;
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    if (strcmp(argv[2], "--write") == 0) {
        size_t ln;
        char *longer;
        if (argc != 5)
            return 2;
        for (i = 0; shapes[i] != NULL && strcmp(shapes[i], argv[3]) != 0; i++)
            ;
        if (shapes[i] == NULL) {
            fprintf(stderr, "bench_decode: unknown shape %s\n", argv[3]);
            return 2;
        }
        longer = repeat_middle(buf, n, (unsigned)atoi(argv[4]), &ln);
        data = reshape_sse(longer, ln, argv[3], &n);
        fwrite(data, 1, n, stdout);
        free(longer);
        return 0;
    }
    if (argc == 5)
        return 2;
    iters = atoi(argv[2]);
    if (argc == 4) {
        for (i = 0; shapes[i] != NULL && strcmp(shapes[i], argv[3]) != 0; i++)
            ;
        if (shapes[i] == NULL) {
            fprintf(stderr, "bench_decode: unknown shape %s\n", argv[3]);
            return 2;
        }
        data = reshape_sse(buf, n, argv[3], &n);
        if (getenv("BENCH_SHOW") != NULL)
            fwrite(data, 1, n, stdout);
    }
    tt_json_init();
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (i = 0; i < iters; i++) {
        struct tt_request r;
        struct tt_stream *st;

        tt_request_init(&r);
        st = tt_stream_new(&r, TT_API_OPENAI_CHAT, "text/event-stream", TT_THINK_AUTO);
        if (st == NULL)
            return 1;
        tt_stream_feed(st, data, n, 1000);
        tt_stream_end(st, 1, 2000);
        events += r.s.events;
        fast += st->fast_events;
        tt_stream_free(st);
        tt_request_reset(&r);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("%lu events, %lu fast, %.0f ns/event, %.1f MB/s\n", events, fast,
           ns / (double)events, (double)n * iters / ns * 1e3);
    return 0;
}
