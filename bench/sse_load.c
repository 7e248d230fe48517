/*
 * sse_load: the load generator of bench/run.sh.
 *
 * Opens N keep-alive connections to HOST:PORT (tokentap-sim directly, or a
 * proxy in front of it), staggers their start evenly over one event gap (or
 * --ramp), and on each connection sends streaming requests back to back:
 *
 *   POST /v1/chat/completions  {"model":"m","stream":true,
 *        "sim":{"ttft_ms":T,"tokens":N,"gap_ms":G,"tokens_per_event":1}}
 *   X-Request-Id: <prefix>-<n>
 *
 * The response (chunked) is de-chunked and split into SSE events (or NDJSON
 * lines with --ollama).  A token event is one carrying non-empty
 * "content":"..." text.  Every read is timestamped (CLOCK_MONOTONIC) and all
 * events completed by that read get that time.  For token k of a request:
 *
 *   lateness_k = arrival_k - (send + ttft + k * gap)
 *
 * where send is the time just before the request's write().  The simulator
 * schedules token k at (its receive time + ttft + k * gap), so the lateness
 * measured directly against the simulator is the baseline (timer jitter, the
 * two loopback hops, this process's own scheduling); a proxy's added latency
 * per event is its lateness minus the direct one, percentile by percentile.
 * With --ollama the simulator also stamps each line with CLOCK_REALTIME
 * ("created_at", microseconds), giving a true one-way delay per event too;
 * with --stamp (SSE) the request asks the sim for "stamp":true, and each
 * event's ": t=NS" comment line (the sim's CLOCK_MONOTONIC send time) gives
 * the same in nanoseconds: ow = read time - NS.
 *
 * With --align each stream sends only at its own phase of the gap
 * (t_begin + i * ramp/streams + m * gap, the next such time once its last
 * response has ended), so the streams stay evenly spread round after round
 * instead of drifting by each request's delays and bunching up by chance.
 *
 * Client-observed TTFT = first token event's arrival - send.  With
 * --records FILE (tokentap's JSONL records), after the run each request is
 * matched by metadata.x_request_id and |client TTFT - record TTFT| is
 * summarised.
 *
 * Several configurations at once: --connect LABEL=HOST:PORT given up to 8
 * times opens --streams connections to each; connection i goes to target
 * i mod T, so with --align their phases interleave over the gap (one
 * stream each: target j sends at j * gap / T).  Every configuration then
 * lives through the same moments of the machine (a pause of the VM, a
 * neighbour's burst) instead of each getting a slot of its own, and its
 * figures are comparable within the one run.  Besides the line for all,
 * one "RESULT target=LABEL ..." line each gives its lateness and one-way
 * percentiles.
 *
 * With --close every request goes on a new connection, which the client
 * closes once the response has ended (the cost of a connection, for
 * bench/run.sh's reqconn); rps = responses that ended inside the window per
 * second, the denominator of CPU per request.  --usage asks for the usage
 * chunk (stream_options.include_usage).
 *
 * Only events arriving inside [warmup end, warmup end + duration) count.
 * One line "RESULT key=value ..." goes to stdout.
 *
 *   cc -O2 -o sse_load bench/sse_load.c -lm
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAXPIDS 4
#define MAXTARGETS 8

static struct {
    int streams, ttft_ms, tokens, gap_ms, tpe, ollama, stamp, align, close_each, usage;
    double duration, warmup, ramp;
    const char *prefix, *records;
    int cpu_pid[MAXPIDS], ncpu;
    int rss_pid;
    int finish;     /* after the window: no new requests, wait for those running */
} opt = { .streams = 1, .ttft_ms = 20, .tokens = 100, .gap_ms = 20, .tpe = 1,
          .duration = 5, .warmup = 1, .ramp = -1, .prefix = "b" };

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t real_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- growable sample arrays ---- */
struct vec { int64_t *v; size_t n, cap; };
static void vpush(struct vec *a, int64_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 4096;
        a->v = realloc(a->v, a->cap * sizeof(*a->v));
        if (!a->v) { perror("realloc"); exit(2); }
    }
    a->v[a->n++] = x;
}
static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
static double pct(struct vec *a, double p) /* call after sort */
{
    if (!a->n) return NAN;
    size_t i = (size_t)ceil(p / 100.0 * (double)a->n);
    if (i > 0) i--;
    if (i >= a->n) i = a->n - 1;
    return (double)a->v[i];
}

/* ---- connections ---- */
enum { S_IDLE, S_CONNECTING, S_HEAD, S_CSIZE, S_CDATA, S_CCRLF, S_TRAILER };

struct conn {
    int fd, state, id, tgt;
    uint64_t send_ns, first_tok_ns;
    unsigned reqno;           /* global request number */
    int tok;                  /* token events seen in this response */
    char head[4096]; size_t hlen;
    size_t chunk_left;
    char ev[8192]; size_t evlen; int ev_overflow;
    char line[64]; size_t llen;
    int active;               /* between first token and end of response */
    uint64_t send_at;         /* --align: the next request waits for this slot, 0 none */
    int retry;                /* failed: reconnect on the next retry tick */
};

/* one --connect: where, and its own share of the figures */
struct target {
    struct sockaddr_in addr;
    const char *label;          /* "" with a single unlabelled --connect */
    struct vec lat, oneway;
    uint64_t tokens_win;
};
static struct target targets[MAXTARGETS];
static int ntargets;

static struct conn *conns;
static int ep;
static uint64_t t_begin, t_meas, t_end, stagger;
static int waiting;           /* --align: connections with a send_at */
static char reqbuf[1024];
static size_t reqlen_fixed;
static unsigned next_req;
static int stopping;

static struct vec lat, jit, oneway, ttft_client_win, ttft_all;
static uint64_t events_win, tokens_win, bytes_win, responses, errors, reconnects, late_errors;
static uint64_t responses_in_win;     /* responses that ended inside the window */
struct ttft_rec { unsigned reqno; int64_t ns; };
static struct ttft_rec *tt; static size_t ntt, cap_tt;

static void conn_start(struct conn *c);

static void conn_fail(struct conn *c, const char *why)
{
    static int warned;
    if (stopping && opt.finish && c->state != S_IDLE)
        late_errors++;              /* a request that did not end well */
    if (!stopping) {
        errors++;
        if (warned++ < 5)
            fprintf(stderr, "sse_load: conn %d: %s\n", c->id, why);
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = S_IDLE;
    c->active = 0;
    c->retry = 1;     /* reconnected by the main loop, at most every 100 ms */
}

static void send_request(struct conn *c)
{
    char hdr[256];
    int hl;
    c->reqno = next_req++;
    hl = snprintf(hdr, sizeof(hdr), "X-Request-Id: %s-%u\r\n\r\n", opt.prefix, c->reqno);
    char buf[1400];
    memcpy(buf, reqbuf, reqlen_fixed);
    memcpy(buf + reqlen_fixed, hdr, (size_t)hl);
    /* the body is stored after the fixed head's terminating NUL */
    const char *body = reqbuf + reqlen_fixed + 1;
    size_t blen = strlen(body);
    memcpy(buf + reqlen_fixed + hl, body, blen);
    size_t total = reqlen_fixed + (size_t)hl + blen;
    c->tok = 0; c->hlen = 0; c->evlen = 0; c->ev_overflow = 0; c->first_tok_ns = 0;
    c->state = S_HEAD;
    c->send_ns = now_ns();
    ssize_t w = write(c->fd, buf, total);
    if (w != (ssize_t)total)
        conn_fail(c, w < 0 ? strerror(errno) : "short write of request");
}

static void conn_start(struct conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) { perror("socket"); exit(2); }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->fd = fd;
    c->state = S_CONNECTING;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
    if (connect(fd, (struct sockaddr *)&targets[c->tgt].addr, sizeof(targets[c->tgt].addr)) < 0 && errno != EINPROGRESS) {
        conn_fail(c, strerror(errno));
        return;
    }
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static int is_token_event(const char *e, size_t n)
{
    static const char pat[] = "\"content\":\"";
    const char *p = e, *end = e + n;
    while ((p = memmem(p, (size_t)(end - p), pat, sizeof(pat) - 1))) {
        p += sizeof(pat) - 1;
        if (p < end && *p != '"') return 1;
    }
    return 0;
}

/* "created_at":"2025-10-07T12:34:56.123456Z" -> realtime us, or -1 */
static int64_t created_at_us(const char *e, size_t n)
{
    static const char pat[] = "\"created_at\":\"";
    const char *p = memmem(e, n, pat, sizeof(pat) - 1);
    struct tm tm = { 0 };
    unsigned us;
    if (!p || (size_t)(e + n - p) < sizeof(pat) + 27) return -1;
    p += sizeof(pat) - 1;
    if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d.%6uZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &us) != 7) return -1;
    tm.tm_year -= 1900; tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000000 + us;
}

static void on_event(struct conn *c, const char *e, size_t n, uint64_t t, int64_t rt)
{
    int in = t >= t_meas && t < t_end;
    if (in) events_win++;
    if (!is_token_event(e, n)) return;
    int k = c->tok++;
    if (k == 0) {
        c->first_tok_ns = t;
        c->active = 1;
        vpush(&ttft_all, (int64_t)(t - c->send_ns));
        if (in) {
            vpush(&ttft_client_win, (int64_t)(t - c->send_ns));
            if (ntt == cap_tt) {
                cap_tt = cap_tt ? cap_tt * 2 : 4096;
                tt = realloc(tt, cap_tt * sizeof(*tt));
            }
            tt[ntt].reqno = c->reqno;
            tt[ntt++].ns = (int64_t)(t - c->send_ns);
        }
    }
    if (!in) return;
    struct target *tg = &targets[c->tgt];
    tokens_win++;
    tg->tokens_win++;
    uint64_t sched = c->send_ns + (uint64_t)opt.ttft_ms * 1000000ull +
                     (uint64_t)(k / 1) * (uint64_t)opt.gap_ms * 1000000ull;
    vpush(&lat, (int64_t)t - (int64_t)sched);
    vpush(&tg->lat, (int64_t)t - (int64_t)sched);
    if (k > 0)   /* relative to the stream's own first token: no request path */
        vpush(&jit, (int64_t)(t - c->first_tok_ns) - (int64_t)k * opt.gap_ms * 1000000ll);
    if (opt.ollama) {
        int64_t ca = created_at_us(e, n);
        if (ca > 0) {
            vpush(&oneway, (rt - ca) * 1000);
            vpush(&tg->oneway, (rt - ca) * 1000);
        }
    } else if (opt.stamp && n > 4 && !memcmp(e, ": t=", 4)) {
        /* the sim's CLOCK_MONOTONIC send time: the same clock as t */
        uint64_t s = strtoull(e + 4, NULL, 10);
        if (s > 0) {
            vpush(&oneway, (int64_t)t - (int64_t)s);
            vpush(&tg->oneway, (int64_t)t - (int64_t)s);
        }
    }
}

/* de-chunked body bytes */
static void body_bytes(struct conn *c, const char *p, size_t n, uint64_t t, int64_t rt)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (c->evlen < sizeof(c->ev)) c->ev[c->evlen++] = ch;
        else c->ev_overflow = 1;
        int end = opt.ollama ? ch == '\n'
                             : (ch == '\n' && c->evlen >= 2 && c->ev[c->evlen - 2] == '\n');
        if (end) {
            if (c->evlen > 1) on_event(c, c->ev, c->evlen, t, rt);
            c->evlen = 0;
        }
    }
}

/*
 * --align: stream i sends its requests only at t_begin + i*stagger + m*gap
 * (the next such slot once its response has ended), so that every request
 * starts at the same phase and the streams stay spread evenly over one gap,
 * round after round; back to back, their phases would drift by each
 * request's own delays and bunch up by chance.
 */
static void next_request(struct conn *c)
{
    if (opt.align && opt.gap_ms > 0) {
        uint64_t gap = (uint64_t)opt.gap_ms * 1000000ull, now = now_ns();
        uint64_t base = t_begin + stagger * (uint64_t)c->id;
        c->send_at = now <= base ? base : base + (now - base + gap - 1) / gap * gap;
        waiting++;
        return;
    }
    send_request(c);
}

/* returns -1 when the connection was closed (--close), else 0 */
static int response_done(struct conn *c, uint64_t t)
{
    responses++;
    if (t >= t_meas && t < t_end) responses_in_win++;
    c->active = 0;
    c->state = S_IDLE;
    if (opt.close_each) {
        /* a new connection for the next request: connect, then send */
        close(c->fd);
        c->fd = -1;
        if (!stopping) conn_start(c);
        return -1;
    }
    if (!stopping) next_request(c);
    return 0;
}

/* returns 0, or -1 when the connection failed */
static int parse(struct conn *c, const char *p, size_t n, uint64_t t, int64_t rt)
{
    size_t i = 0;
    while (i < n) {
        switch (c->state) {
        case S_HEAD: {
            char ch = p[i++];
            if (c->hlen >= sizeof(c->head) - 1) { conn_fail(c, "response head too big"); return -1; }
            c->head[c->hlen++] = ch;
            if (c->hlen >= 4 && memcmp(c->head + c->hlen - 4, "\r\n\r\n", 4) == 0) {
                c->head[c->hlen] = 0;
                if (strncmp(c->head, "HTTP/1.1 200", 12) != 0) {
                    char m[80]; snprintf(m, sizeof(m), "status: %.40s", c->head);
                    conn_fail(c, m); return -1;
                }
                if (!strcasestr(c->head, "transfer-encoding: chunked")) {
                    conn_fail(c, "response not chunked"); return -1;
                }
                c->state = S_CSIZE; c->llen = 0;
            }
            break;
        }
        case S_CSIZE: case S_TRAILER: {
            char ch = p[i++];
            if (c->llen < sizeof(c->line) - 1) c->line[c->llen++] = ch;
            if (ch != '\n') break;
            c->line[c->llen] = 0;
            if (c->state == S_TRAILER) {
                c->llen = 0;
                if ((c->line[0] == '\r' || c->line[0] == '\n') && response_done(c, t) < 0)
                    return -1;
                break;
            }
            c->chunk_left = strtoul(c->line, NULL, 16);
            c->llen = 0;
            c->state = c->chunk_left ? S_CDATA : S_TRAILER;
            break;
        }
        case S_CDATA: {
            size_t k = n - i < c->chunk_left ? n - i : c->chunk_left;
            body_bytes(c, p + i, k, t, rt);
            i += k; c->chunk_left -= k;
            if (!c->chunk_left) { c->state = S_CCRLF; c->llen = 0; }
            break;
        }
        case S_CCRLF:
            if (p[i++] == '\n') { c->state = S_CSIZE; c->llen = 0; }
            break;
        default:
            i = n;   /* unexpected bytes when idle: ignore */
        }
    }
    return 0;
}

static void on_io(struct conn *c, uint32_t evs)
{
    if (c->state == S_CONNECTING) {
        int err = 0; socklen_t el = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) { conn_fail(c, strerror(err)); return; }
        if (!(evs & EPOLLOUT)) return;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->state = S_IDLE;
        next_request(c);
        return;
    }
    static char buf[65536];
    for (;;) {
        ssize_t r = read(c->fd, buf, sizeof(buf));
        if (r > 0) {
            uint64_t t = now_ns();
            int64_t rt = opt.ollama ? real_us() : 0;
            if (t >= t_meas && t < t_end) bytes_win += (uint64_t)r;
            if (parse(c, buf, (size_t)r, t, rt) < 0) return;
            if ((size_t)r < sizeof(buf)) return;
            continue;
        }
        if (r == 0) { conn_fail(c, "peer closed"); return; }
        if (errno == EAGAIN || errno == EINTR) return;
        conn_fail(c, strerror(errno));
        return;
    }
}

/* CPU time of one task in ns: schedstat's on-CPU time (exact), else the
 * utime + stime ticks of its stat (10 ms steps) */
static long long task_cpu_ns(const char *dir)
{
    char path[400], b[2048];
    FILE *f;
    size_t n;
    unsigned long long run = 0, ut = 0, st = 0;

    snprintf(path, sizeof(path), "%s/schedstat", dir);
    if ((f = fopen(path, "r")) != NULL) {
        int ok = fscanf(f, "%llu", &run) == 1;
        fclose(f);
        if (ok) return (long long)run;
    }
    snprintf(path, sizeof(path), "%s/stat", dir);
    if (!(f = fopen(path, "r"))) return -1;
    n = fread(b, 1, sizeof(b) - 1, f);
    fclose(f);
    b[n] = 0;
    char *p = strrchr(b, ')');
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)((ut + st) * (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK)));
}

/* per-thread CPU ns of <pid>, up to 16 threads; returns the count */
static int thread_ticks(int pid, int *tid, long long *ticks)
{
    char path[64];
    int n = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d) return 0;
    while ((e = readdir(d)) && n < 16) {
        if (e->d_name[0] == '.') continue;
        char p2[300];
        snprintf(p2, sizeof(p2), "/proc/%d/task/%.200s", pid, e->d_name);
        long long ns = task_cpu_ns(p2);
        if (ns >= 0) {
            tid[n] = atoi(e->d_name);
            ticks[n++] = ns;
        }
    }
    closedir(d);
    return n;
}

/* CPU ns of every thread of <pid> together */
static long long proc_cpu_ticks(int pid)
{
    int tid[16];
    long long ns[16], sum = 0;
    int n = thread_ticks(pid, tid, ns);
    if (n == 0) return -1;
    for (int i = 0; i < n; i++) sum += ns[i];
    return sum;
}

static long proc_rss_kb(int pid)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
    fclose(f);
    return kb;
}

static int cmp_tt(const void *a, const void *b)
{
    unsigned x = ((const struct ttft_rec *)a)->reqno, y = ((const struct ttft_rec *)b)->reqno;
    return x < y ? -1 : x > y;
}

/* match records by x_request_id; prints ttft agreement fields */
static void join_records(void)
{
    struct stat st; off_t last = -1;
    for (int i = 0; i < 40; i++) {   /* wait until the file stops growing */
        usleep(150000);
        if (stat(opt.records, &st) == 0 && st.st_size == last && i >= 4) break;
        if (stat(opt.records, &st) == 0) last = st.st_size;
    }
    FILE *f = fopen(opt.records, "r");
    if (!f) { printf(" rec_matched=0"); return; }
    qsort(tt, ntt, sizeof(*tt), cmp_tt);
    struct vec d = { 0 }, ad = { 0 };
    size_t cap = 1 << 16, nrec = 0;
    char *line = malloc(cap);
    size_t plen = strlen(opt.prefix);
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        nrec++;
        char *p = strstr(line, "\"x_request_id\":\"");
        if (!p) continue;
        p += 16;
        if (strncmp(p, opt.prefix, plen) != 0 || p[plen] != '-') continue;
        unsigned rq = (unsigned)strtoul(p + plen + 1, NULL, 10);
        char *q = strstr(line, "\"time_to_first_token\":{\"value\":");
        if (!q) continue;
        double ms = strtod(q + 31, NULL);
        struct ttft_rec key = { rq, 0 }, *hit = bsearch(&key, tt, ntt, sizeof(*tt), cmp_tt);
        if (!hit) continue;
        int64_t diff = hit->ns - (int64_t)llround(ms * 1e6);
        vpush(&d, diff);
        vpush(&ad, diff < 0 ? -diff : diff);
    }
    fclose(f);
    free(line);
    qsort(d.v, d.n, sizeof(int64_t), cmp64);
    qsort(ad.v, ad.n, sizeof(int64_t), cmp64);
    printf(" rec_lines=%zu rec_matched=%zu ttft_diff_p50_us=%.1f ttft_diff_p99_us=%.1f"
           " ttft_absdiff_p99_us=%.1f ttft_absdiff_max_us=%.1f",
           nrec, d.n, pct(&d, 50) / 1e3, pct(&d, 99) / 1e3, pct(&ad, 99) / 1e3,
           ad.n ? (double)ad.v[ad.n - 1] / 1e3 : NAN);
}

static void usage(void)
{
    fprintf(stderr,
        "usage: sse_load --connect [LABEL=]HOST:PORT... [--streams N] [--ttft MS] [--tokens N]\n"
        "       (up to %d --connect: --streams each, interleaved, a RESULT line each)\n"
        "       [--gap MS] [--duration S] [--warmup S] [--ramp S] [--prefix ID]\n"
        "       [--records FILE] [--cpu-pid PID]... [--rss-pid PID] [--ollama] [--stamp]\n"
        "       [--align]   (requests only at each stream's own phase of the gap)\n"
        "       [--close]   (each request on a new connection, closed by the client after the response)\n"
        "       [--usage]   (ask for the usage chunk: stream_options.include_usage)\n"
        "       [--finish MAX_S]   (then let running requests end, up to MAX_S)\n",
        MAXTARGETS);
    exit(2);
}

/*
 * Helpers for run.sh, so that no port is ever chosen and released:
 *
 *   --wait-ready FILE PID   wait (10 s) until FILE exists (a --ready-file of
 *                           tokentap or tokentap-sim, written by rename once
 *                           listening, or a --listen-exec port file) and
 *                           print its port; fails at once when PID exits
 *                           first
 *   --listen-exec PORTFILE CMD ARG...
 *                           listen on 127.0.0.1:0, put the socket on fd 3,
 *                           write its port to PORTFILE (by rename) and to
 *                           $LISTEN_PORT, then exec CMD: for servers that
 *                           take an inherited socket (HAProxy "bind fd@3",
 *                           nginx via NGINX="3;")
 *
 * The wait is a poll on the file's existence (every 10 ms): the file
 * appearing is the readiness; a shell has no inotify.
 */
static int wait_ready(const char *path, const char *pid_s)
{
    int pid = atoi(pid_s);
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(path, "r");
        if (f) {
            char buf[1024], *p, *q;
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            buf[n] = '\0';
            if (buf[0] >= '1' && buf[0] <= '9') {     /* a --listen-exec port file */
                printf("%d\n", atoi(buf));
                return 0;
            }
            p = strstr(buf, "\"listen\":\"");
            q = p ? strchr(p + 10, '"') : NULL;
            if (!q) break;
            *q = '\0';
            p = strrchr(p + 10, ':');
            if (!p) break;
            printf("%s\n", p + 1);
            return 0;
        }
        if (pid > 0 && kill(pid, 0) != 0) {
            fprintf(stderr, "sse_load: process %d exited before %s appeared\n", pid, path);
            return 1;
        }
        usleep(10000);
    }
    fprintf(stderr, "sse_load: no usable ready file %s\n", path);
    return 1;
}

static int listen_exec(const char *portfile, char **cmd)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t l = sizeof(a);
    char tmp[4096], port[16];
    FILE *f;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0 || (fd != 3 && dup2(fd, 3) < 0)) {
        perror("sse_load: --listen-exec");
        return 1;
    }
    if (fd != 3)
        close(fd);
    snprintf(port, sizeof(port), "%d", ntohs(a.sin_port));
    setenv("LISTEN_PORT", port, 1);
    snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
    f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", port) < 0 || fclose(f) != 0 || rename(tmp, portfile) != 0) {
        perror("sse_load: --listen-exec: port file");
        return 1;
    }
    execvp(cmd[0], cmd);
    perror("sse_load: --listen-exec: exec");
    return 127;
}

int main(int argc, char **argv)
{
    const char *connect_to[MAXTARGETS];
    if (argc == 4 && !strcmp(argv[1], "--wait-ready")) return wait_ready(argv[2], argv[3]);
    if (argc >= 4 && !strcmp(argv[1], "--listen-exec")) return listen_exec(argv[2], argv + 3);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ollama")) { opt.ollama = 1; continue; }
        if (!strcmp(a, "--stamp")) { opt.stamp = 1; continue; }
        if (!strcmp(a, "--align")) { opt.align = 1; continue; }
        if (!strcmp(a, "--close")) { opt.close_each = 1; continue; }
        if (!strcmp(a, "--usage")) { opt.usage = 1; continue; }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--connect")) {
            if (ntargets == MAXTARGETS) usage();
            connect_to[ntargets++] = v;
        }
        else if (!strcmp(a, "--streams")) opt.streams = atoi(v);
        else if (!strcmp(a, "--ttft")) opt.ttft_ms = atoi(v);
        else if (!strcmp(a, "--tokens")) opt.tokens = atoi(v);
        else if (!strcmp(a, "--gap")) opt.gap_ms = atoi(v);
        else if (!strcmp(a, "--duration")) opt.duration = atof(v);
        else if (!strcmp(a, "--warmup")) opt.warmup = atof(v);
        else if (!strcmp(a, "--ramp")) opt.ramp = atof(v);
        else if (!strcmp(a, "--prefix")) opt.prefix = v;
        else if (!strcmp(a, "--records")) opt.records = v;
        else if (!strcmp(a, "--rss-pid")) opt.rss_pid = atoi(v);
        else if (!strcmp(a, "--finish")) opt.finish = atoi(v);
        else if (!strcmp(a, "--cpu-pid") && opt.ncpu < MAXPIDS) opt.cpu_pid[opt.ncpu++] = atoi(v);
        else usage();
    }
    if (ntargets == 0 || opt.streams < 1) usage();
    for (int i = 0; i < ntargets; i++) {
        const char *hp = connect_to[i], *eq = strchr(hp, '=');
        char host[64]; int port;
        targets[i].label = "";
        if (eq) {
            targets[i].label = strndup(hp, (size_t)(eq - hp));
            hp = eq + 1;
        }
        if (sscanf(hp, "%63[^:]:%d", host, &port) != 2 ||
            inet_pton(AF_INET, host, &targets[i].addr.sin_addr) != 1)
            usage();
        targets[i].addr.sin_family = AF_INET;
        targets[i].addr.sin_port = htons((uint16_t)port);
    }
    int nstreams = opt.streams * ntargets;     /* all connections */
    signal(SIGPIPE, SIG_IGN);

    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if ((rlim_t)nstreams + 16 > rl.rlim_cur) {
        fprintf(stderr, "sse_load: %d streams need more than ulimit -n %llu\n",
                nstreams, (unsigned long long)rl.rlim_cur);
        return 2;
    }

    /* fixed part of the request; "\0" then the body */
    char body[512];
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
               "%s\"sim\":{\"ttft_ms\":%d,\"tokens\":%d,\"gap_ms\":%d,\"tokens_per_event\":%d%s}}",
             opt.usage ? "\"stream_options\":{\"include_usage\":true}," : "",
             opt.ttft_ms, opt.tokens, opt.gap_ms, opt.tpe,
             opt.stamp && !opt.ollama ? ",\"stamp\":true" : "");
    int hl = snprintf(reqbuf, sizeof(reqbuf),
             "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
             "Accept: text/event-stream\r\nContent-Length: %zu\r\n",
             opt.ollama ? "/api/chat" : "/v1/chat/completions", "127.0.0.1", strlen(body));
    reqlen_fixed = (size_t)hl;
    memcpy(reqbuf + hl + 1, body, strlen(body) + 1);

    ep = epoll_create1(EPOLL_CLOEXEC);
    conns = calloc((size_t)nstreams, sizeof(*conns));
    for (int i = 0; i < nstreams; i++) {
        conns[i].fd = -1;
        conns[i].id = i;
        conns[i].tgt = i % ntargets;
    }

    double ramp = opt.ramp >= 0 ? opt.ramp : opt.gap_ms / 1000.0;
    t_begin = now_ns();
    stagger = nstreams > 1 ? (uint64_t)(ramp * 1e9) / (uint64_t)nstreams : 0;
    t_meas = t_begin + (uint64_t)((ramp + opt.warmup) * 1e9);
    t_end = t_meas + (uint64_t)(opt.duration * 1e9);
    long long cpu0[MAXPIDS] = { 0 };
    int cpu_taken = 0, started = 0;
    long rss0 = opt.rss_pid ? proc_rss_kb(opt.rss_pid) : -1;
    struct rusage ru0, ru1;
    uint64_t next_retry = 0;
    int tid0[16], tid1[16], nthr0 = 0, nthr1 = 0;
    long long thr0[16], thr1[16];

    long long cpu1[MAXPIDS];
    long rss1 = -1;
    int active = 0, open = 0, unfinished = 0;
    unsigned long long responses_win = 0;
    struct epoll_event evs[512];
    for (;;) {
        uint64_t t = now_ns();
        while (started < nstreams && t_begin + stagger * (uint64_t)started <= t)
            conn_start(&conns[started++]);
        if (!cpu_taken && t >= t_meas) {
            for (int i = 0; i < opt.ncpu; i++) cpu0[i] = proc_cpu_ticks(opt.cpu_pid[i]);
            getrusage(RUSAGE_SELF, &ru0);
            if (opt.ncpu) nthr0 = thread_ticks(opt.cpu_pid[0], tid0, thr0);
            cpu_taken = 1;
        }
        if (t >= t_end && !stopping) {
            /* the window's figures now; with --finish the running
             * requests are then let end */
            for (int i = 0; i < opt.ncpu; i++) cpu1[i] = proc_cpu_ticks(opt.cpu_pid[i]);
            getrusage(RUSAGE_SELF, &ru1);
            if (opt.ncpu) nthr1 = thread_ticks(opt.cpu_pid[0], tid1, thr1);
            rss1 = opt.rss_pid ? proc_rss_kb(opt.rss_pid) : -1;
            for (int i = 0; i < nstreams; i++) {
                active += conns[i].active;
                open += conns[i].fd >= 0 && conns[i].state != S_CONNECTING;
            }
            responses_win = responses;
            stopping = 1;
            if (!opt.finish)
                break;
        }
        if (stopping) {
            int busy = 0;
            for (int i = 0; i < nstreams; i++)
                busy += conns[i].fd >= 0 && conns[i].state != S_IDLE;
            if (busy == 0 || t >= t_end + (uint64_t)opt.finish * 1000000000ull) {
                unfinished = busy;
                break;
            }
        }
        if (errors && t >= next_retry) {
            for (int i = 0; i < started; i++)
                if (conns[i].retry) { conns[i].retry = 0; reconnects++; conn_start(&conns[i]); }
            next_retry = t + 100000000ull;
        }
        uint64_t next = t_end;
        if (waiting) {
            for (int i = 0; i < started; i++) {
                struct conn *c = &conns[i];
                if (!c->send_at) continue;
                if (c->send_at <= t || stopping) {
                    c->send_at = 0; waiting--;
                    if (!stopping && c->fd >= 0 && c->state == S_IDLE) send_request(c);
                } else if (c->send_at < next) {
                    next = c->send_at;
                }
            }
        }
        if (errors && next_retry < next) next = next_retry;
        if (!cpu_taken && t_meas < next) next = t_meas;
        if (started < nstreams) {
            uint64_t s = t_begin + stagger * (uint64_t)started;
            if (s < next) next = s;
        }
        if (stopping || next < t)
            next = t + 100000000ull;        /* finishing: just wait for the ends */
        /* a timeout to the nanosecond: the stagger (0.2 ms for 100 streams
         * over 20 ms) is finer than epoll_wait's milliseconds */
        struct timespec to = { (time_t)((next - t) / 1000000000ull), (long)((next - t) % 1000000000ull) };
        int n = epoll_pwait2(ep, evs, 512, &to, NULL);
        for (int i = 0; i < n; i++)
            on_io(evs[i].data.ptr, evs[i].events);
    }
    double win = opt.duration;

    qsort(lat.v, lat.n, sizeof(int64_t), cmp64);
    qsort(ttft_all.v, ttft_all.n, sizeof(int64_t), cmp64);
    qsort(jit.v, jit.n, sizeof(int64_t), cmp64);
    qsort(oneway.v, oneway.n, sizeof(int64_t), cmp64);
    qsort(ttft_client_win.v, ttft_client_win.n, sizeof(int64_t), cmp64);
    double self_cpu = ((ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec)) +
                      ((ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6;
    printf("RESULT streams=%d open=%d active=%d events=%llu evps=%.0f tokens=%llu tokps=%.0f MBps=%.2f"
           " responses=%llu rps=%.1f errors=%llu reconnects=%llu"
           " lat_p50_us=%.1f lat_p90_us=%.1f lat_p99_us=%.1f lat_p999_us=%.1f lat_max_us=%.1f lat_n=%zu",
           nstreams, open, active, (unsigned long long)events_win, events_win / win,
           (unsigned long long)tokens_win, tokens_win / win, bytes_win / win / 1e6,
           (unsigned long long)responses, responses_in_win / win, (unsigned long long)errors,
           (unsigned long long)reconnects,
           pct(&lat, 50) / 1e3, pct(&lat, 90) / 1e3, pct(&lat, 99) / 1e3, pct(&lat, 99.9) / 1e3,
           lat.n ? lat.v[lat.n - 1] / 1e3 : NAN, lat.n);
    printf(" jit_p50_us=%.1f jit_p99_us=%.1f", pct(&jit, 50) / 1e3, pct(&jit, 99) / 1e3);
    if (opt.ollama || opt.stamp)
        printf(" ow_p50_us=%.1f ow_p90_us=%.1f ow_p99_us=%.1f ow_n=%zu", pct(&oneway, 50) / 1e3,
               pct(&oneway, 90) / 1e3, pct(&oneway, 99) / 1e3, oneway.n);
    printf(" cttft_p50_us=%.1f cttft_p99_us=%.1f cttft_all_p50_us=%.1f cttft_all_p99_us=%.1f"
           " cttft_all_max_us=%.1f self_cpu_pct=%.1f",
           pct(&ttft_client_win, 50) / 1e3, pct(&ttft_client_win, 99) / 1e3,
           pct(&ttft_all, 50) / 1e3, pct(&ttft_all, 99) / 1e3,
           ttft_all.n ? ttft_all.v[ttft_all.n - 1] / 1e3 : NAN, 100 * self_cpu / win);
    for (int i = 0; i < opt.ncpu; i++)
        printf(" cpu%d_pct=%.1f", i, cpu0[i] < 0 || cpu1[i] < 0 ? NAN
               : 100.0 * (double)(cpu1[i] - cpu0[i]) / 1e9 / win);
    if (nthr1 > 1) {   /* threads that used CPU in the window */
        printf(" threads_pct=");
        int first = 1;
        for (int i = 0; i < nthr1; i++)
            for (int j = 0; j < nthr0; j++)
                if (tid0[j] == tid1[i] && thr1[i] > thr0[j]) {
                    printf("%s%.0f", first ? "" : ",",
                           100.0 * (double)(thr1[i] - thr0[j]) / 1e9 / win);
                    first = 0;
                }
        if (first) printf("0");
    }
    if (opt.rss_pid)
        printf(" rss0_kb=%ld rss_kb=%ld", rss0, rss1);
    if (opt.finish)     /* every request that ran ended: completed, or not */
        printf(" responses_window=%llu completed=%llu unfinished=%d late_errors=%llu", responses_win,
               (unsigned long long)responses, unfinished, (unsigned long long)late_errors);
    fflush(stdout);
    if (opt.records) {
        for (int i = 0; i < nstreams; i++)
            if (conns[i].fd >= 0) close(conns[i].fd);
        join_records();
    }
    printf("\n");
    if (ntargets > 1)
        for (int i = 0; i < ntargets; i++) {
            struct target *tg = &targets[i];
            qsort(tg->lat.v, tg->lat.n, sizeof(int64_t), cmp64);
            qsort(tg->oneway.v, tg->oneway.n, sizeof(int64_t), cmp64);
            printf("RESULT target=%s streams=%d tokens=%llu lat_p50_us=%.1f lat_p90_us=%.1f"
                   " lat_p99_us=%.1f lat_n=%zu", tg->label, opt.streams,
                   (unsigned long long)tg->tokens_win, pct(&tg->lat, 50) / 1e3,
                   pct(&tg->lat, 90) / 1e3, pct(&tg->lat, 99) / 1e3, tg->lat.n);
            if (opt.ollama || opt.stamp)
                printf(" ow_p50_us=%.1f ow_p90_us=%.1f ow_p99_us=%.1f ow_n=%zu",
                       pct(&tg->oneway, 50) / 1e3, pct(&tg->oneway, 90) / 1e3,
                       pct(&tg->oneway, 99) / 1e3, tg->oneway.n);
            printf("\n");
        }
    return 0;
}
