/*
 * The OTLP/HTTP span exporter (see metrics/otlp_export.h).
 *
 * Decisions:
 *  - libcurl (Debian's libcurl4-openssl-dev) sends: keep-alive, TLS with
 *    verification against the system CAs, proxies, timeouts, all on the
 *    exporter's own thread with a blocking easy handle.
 *  - retries: 429, 502, 503, 504 and connection errors (OTLP/HTTP's
 *    retryable set), up to TT_OTLP_ATTEMPTS attempts, waiting 0.5 s, 1 s,
 *    2 s, 4 s, 8 s or the receiver's Retry-After (at most 60 s); any other
 *    answer drops the batch (a receiver that rejects the data will reject
 *    it again).
 *  - at the end (tt_otlp_stop) what is queued is sent within the deadline;
 *    a receiver that cannot be reached then is not retried.
 */
#include "metrics/otlp_export.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <zlib.h>

#include "metrics/otlp.h"
#include "proxy/base/log.h"
#include "proxy/base/ratelimit.h"

#ifndef TT_VERSION
#define TT_VERSION "0.0.0"
#endif

struct tt_otlp {
    pthread_mutex_t mu;
    pthread_cond_t  work;
    struct tt_span **q;             /* ring of <cap> */
    unsigned        cap, head, count;
    int             stop;
    uint64_t        first_ns;       /* monotonic: oldest queued span's arrival */
    uint64_t        deadline_ns;    /* stopping: monotonic end of the flush */
    const volatile sig_atomic_t *cut;
    _Atomic uint64_t exported, dropped_queue, dropped_export;
    pthread_t       thread;
    int             started;

    /* the exporter thread's own */
    CURL           *curl;
    struct curl_slist *hdrs;
    char           *url;
    int             json;
    char           *service;
    long            retry_after;    /* of the last answer, -1 none */
    struct tt_obuf  body, gz;
    struct tt_ratelimit warn_rl;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

long tt_otlp_retry_after(const char *v, long now)
{
    char *end;
    long s;
    struct tm tm;

    while (*v == ' ' || *v == '\t')
        v++;
    if (*v >= '0' && *v <= '9') {
        s = strtol(v, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
            end++;
        return *end == '\0' && s >= 0 ? s : -1;
    }
    /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
    memset(&tm, 0, sizeof(tm));
    end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == NULL)
        return -1;
    s = (long)timegm(&tm) - now;
    return s > 0 ? s : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct tt_otlp *x = arg;
    size_t len = size * n;
    char tmp[128];

    if (len > 12 && len < sizeof(tmp) && strncasecmp(p, "retry-after:", 12) == 0) {
        memcpy(tmp, p + 12, len - 12);
        tmp[len - 12] = '\0';
        x->retry_after = tt_otlp_retry_after(tmp, (long)time(NULL));
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;        /* the answer's body is not needed */
}

/* stopping and past the deadline (or cut by a second signal): abort */
static int past_deadline(struct tt_otlp *x)
{
    uint64_t d = __atomic_load_n(&x->deadline_ns, __ATOMIC_ACQUIRE);
    /* <cut> is set before the deadline is published (tt_otlp_stop) */
    if (d == 0)
        return 0;
    return mono_ns() >= d || (x->cut != NULL && *x->cut);
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a; (void)b; (void)c; (void)d;
    return past_deadline(arg) ? 1 : 0;
}

static int gzip_into(struct tt_obuf *out, const struct tt_obuf *in)
{
    z_stream zs;
    size_t bound;
    int rc;

    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    bound = deflateBound(&zs, (uLong)in->len) + 32;
    if (out->cap < bound) {
        unsigned char *p = realloc(out->p, bound);
        if (p == NULL) {
            deflateEnd(&zs);
            return -1;
        }
        out->p = p;
        out->cap = bound;
    }
    zs.next_in = in->p;
    zs.avail_in = (uInt)in->len;
    zs.next_out = out->p;
    zs.avail_out = (uInt)out->cap;
    rc = deflate(&zs, Z_FINISH);
    out->len = zs.total_out;
    deflateEnd(&zs);
    return rc == Z_STREAM_END ? 0 : -1;
}

/* one POST: the HTTP status, or 0 when no answer came (curl's error) */
static long post(struct tt_otlp *x, CURLcode *cc)
{
    long status = 0;

    x->retry_after = -1;
    curl_easy_setopt(x->curl, CURLOPT_POSTFIELDS, (const char *)x->gz.p);
    curl_easy_setopt(x->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->gz.len);
    *cc = curl_easy_perform(x->curl);
    if (*cc == CURLE_OK)
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* wait <ms>, or less when stopping makes the deadline come first; 0 when
 * the whole wait passed, -1 when the deadline or a cut ended it */
static int backoff_wait(struct tt_otlp *x, long ms)
{
    struct timespec ts;
    uint64_t until = mono_ns() + (uint64_t)ms * 1000000ull, d;
    int rc = 0;

    pthread_mutex_lock(&x->mu);
    for (;;) {
        uint64_t now = mono_ns();
        d = x->deadline_ns;
        if ((d != 0 && now >= d) || (x->cut != NULL && *x->cut)) {
            rc = -1;
            break;
        }
        if (now >= until)
            break;
        if (d != 0 && d < until && x->stop) {
            /* the wait would end after the deadline: no point */
            rc = -1;
            break;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        tt_timespec_add_ms(&ts, (unsigned)((until - now) / 1000000ull) + 1);
        pthread_cond_timedwait(&x->work, &x->mu, &ts);
    }
    pthread_mutex_unlock(&x->mu);
    return rc;
}

static void send_batch(struct tt_otlp *x, struct tt_span **spans, size_t n)
{
    const struct tt_otlp_resource res = { x->service, TT_VERSION };
    uint64_t held;
    long status = 0, wait_ms = 500;
    CURLcode cc = CURLE_OK;
    int attempt, stopping;

    x->body.len = 0;
    x->body.oom = 0;
    if ((x->json ? tt_otlp_encode_json(&x->body, &res, (const struct tt_span *const *)spans, n)
                 : tt_otlp_encode_pb(&x->body, &res, (const struct tt_span *const *)spans, n)) < 0 ||
        gzip_into(&x->gz, &x->body) < 0) {
        atomic_fetch_add(&x->dropped_export, n);
        tt_log_warn("otlp: cannot encode %zu spans (out of memory); dropped", n);
        return;
    }
    for (attempt = 1; ; attempt++) {
        status = post(x, &cc);
        if (status >= 200 && status < 300) {
            atomic_fetch_add(&x->exported, n);
            return;
        }
        pthread_mutex_lock(&x->mu);
        stopping = x->stop;
        pthread_mutex_unlock(&x->mu);
        if (status == 0 && (stopping || past_deadline(x)))
            break;          /* at the end, an unreachable receiver stays so */
        if (!(status == 0 || status == 429 || status == 502 || status == 503 ||
              status == 504) || attempt >= TT_OTLP_ATTEMPTS)
            break;
        if (x->retry_after >= 0)
            wait_ms = (x->retry_after > 60 ? 60 : x->retry_after) * 1000;
        if (backoff_wait(x, wait_ms) < 0)
            break;
        wait_ms = wait_ms * 2 > 8000 ? 8000 : wait_ms * 2;
    }
    atomic_fetch_add(&x->dropped_export, n);
    if (tt_ratelimit_ok(&x->warn_rl, mono_ns(), 10 * TT_RATELIMIT_1S, &held)) {
        if (status == 0)
            tt_log_warn("otlp: %zu spans dropped: %s (after %d attempts; %llu more "
                        "warnings held)", n, curl_easy_strerror(cc), attempt,
                        (unsigned long long)held);
        else
            tt_log_warn("otlp: %zu spans dropped: the receiver answered %ld (after %d "
                        "attempts; %llu more warnings held)", n, status, attempt,
                        (unsigned long long)held);
    }
}

static void *run(void *arg)
{
    struct tt_otlp *x = arg;
    struct tt_span **batch = calloc(TT_OTLP_BATCH, sizeof(*batch));
    struct timespec ts;
    size_t n, i;

    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (x->count == 0 && !x->stop)
            pthread_cond_wait(&x->work, &x->mu);
        /* gather a batch: 512 spans, or the oldest has waited 1 s */
        while (!x->stop && x->count > 0 && x->count < TT_OTLP_BATCH) {
            uint64_t due = x->first_ns + (uint64_t)TT_OTLP_BATCH_MS * 1000000ull;
            uint64_t now = mono_ns();
            if (now >= due)
                break;
            clock_gettime(CLOCK_REALTIME, &ts);
            tt_timespec_add_ms(&ts, (unsigned)((due - now) / 1000000ull) + 1);
            pthread_cond_timedwait(&x->work, &x->mu, &ts);
        }
        if (x->count == 0 && x->stop)
            break;
        if (batch == NULL || (x->stop && past_deadline(x))) {
            /* out of memory, or the flush is over: what is left is lost */
            atomic_fetch_add(&x->dropped_export, x->count);
            while (x->count > 0) {
                free(x->q[x->head]);
                x->head = (x->head + 1) % x->cap;
                x->count--;
            }
            if (x->stop)
                break;
            continue;
        }
        for (n = 0; n < TT_OTLP_BATCH && x->count > 0; n++) {
            batch[n] = x->q[x->head];
            x->head = (x->head + 1) % x->cap;
            x->count--;
        }
        x->first_ns = mono_ns();        /* what is left waits from now */
        pthread_mutex_unlock(&x->mu);
        send_batch(x, batch, n);
        for (i = 0; i < n; i++)
            free(batch[i]);
        pthread_mutex_lock(&x->mu);
    }
    pthread_mutex_unlock(&x->mu);
    free(batch);
    return NULL;
}

/* "Name=value,Name=value" into "Name: value" fields */
static int add_headers(struct tt_otlp *x, const char *list, char *err, size_t errlen)
{
    const char *p = list, *nl, *eq;
    char field[2048];

    while (p != NULL && *p) {
        nl = strchr(p, ',');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        eq = memchr(p, '=', len);
        if (eq != NULL && eq > p && len + 2 < sizeof(field)) {
            struct curl_slist *s;
            snprintf(field, sizeof(field), "%.*s: %.*s", (int)(eq - p), p,
                     (int)(len - (size_t)(eq - p) - 1), eq + 1);
            s = curl_slist_append(x->hdrs, field);
            if (s == NULL) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            x->hdrs = s;
        }
        p = nl ? nl + 1 : NULL;
    }
    return 0;
}

static void destroy(struct tt_otlp *x)
{
    while (x->count > 0) {
        free(x->q[x->head]);
        x->head = (x->head + 1) % x->cap;
        x->count--;
    }
    free(x->q);
    if (x->curl != NULL)
        curl_easy_cleanup(x->curl);
    curl_slist_free_all(x->hdrs);
    free(x->url);
    free(x->service);
    free(x->body.p);
    free(x->gz.p);
    pthread_cond_destroy(&x->work);
    pthread_mutex_destroy(&x->mu);
    free(x);
    curl_global_cleanup();
}

struct tt_otlp *tt_otlp_start(const struct tt_otlp_opts *o, char *err, size_t errlen)
{
    struct tt_otlp *x;
    struct curl_slist *s;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "cannot initialise libcurl");
        return NULL;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        curl_global_cleanup();
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->work, NULL);
    x->cap = o->queue > 0 ? o->queue : 1;
    x->q = calloc(x->cap, sizeof(*x->q));
    x->url = strdup(o->url);
    x->service = strdup(o->service_name && o->service_name[0] ? o->service_name : "tokentap");
    x->json = o->json;
    x->curl = curl_easy_init();
    if (x->q == NULL || x->url == NULL || x->service == NULL || x->curl == NULL) {
        snprintf(err, errlen, "out of memory");
        destroy(x);
        return NULL;
    }
    s = curl_slist_append(NULL, o->json ? "Content-Type: application/json"
                                        : "Content-Type: application/x-protobuf");
    if (s != NULL)
        x->hdrs = s;
    if (s == NULL || (s = curl_slist_append(x->hdrs, "Content-Encoding: gzip")) == NULL ||
        (x->hdrs = s, (s = curl_slist_append(x->hdrs, "Expect:")) == NULL) ||
        (x->hdrs = s, add_headers(x, o->headers, err, errlen) < 0)) {
        if (err[0] == '\0')
            snprintf(err, errlen, "out of memory");
        destroy(x);
        return NULL;
    }
    curl_easy_setopt(x->curl, CURLOPT_URL, x->url);
    curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(x->curl, CURLOPT_USERAGENT, "tokentap/" TT_VERSION);
    curl_easy_setopt(x->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->curl, CURLOPT_TIMEOUT_MS, (long)TT_OTLP_TIMEOUT_MS);
    curl_easy_setopt(x->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(x->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(x->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(x->curl, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(x->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->curl, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(x->curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(x->curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (o->ca != NULL && o->ca[0] != '\0')
        curl_easy_setopt(x->curl, CURLOPT_CAINFO, o->ca);   /* libcurl keeps a copy */
    if (pthread_create(&x->thread, NULL, run, x) != 0) {
        snprintf(err, errlen, "cannot start the exporter thread");
        destroy(x);
        return NULL;
    }
    x->started = 1;
    return x;
}

void tt_otlp_submit(struct tt_otlp *x, const struct tt_request *r,
                    const struct tt_metric_values *m, const struct tt_slo_result *res,
                    const char *host, const char *port)
{
    struct tt_span *sp;
    int queued = 0;

    if (!r->trace.on || !(r->trace.flags & 0x01))
        return;
    sp = malloc(sizeof(*sp));
    if (sp == NULL || tt_span_fill(sp, r, m, res, host, port) < 0) {
        if (sp == NULL)
            atomic_fetch_add(&x->dropped_queue, 1);
        free(sp);
        return;
    }
    pthread_mutex_lock(&x->mu);
    if (x->count < x->cap && !x->stop) {
        x->q[(x->head + x->count) % x->cap] = sp;
        if (x->count++ == 0)
            x->first_ns = mono_ns();
        queued = 1;
        /* the thread wakes for a full batch; the 1 s deadline it sets itself */
        if (x->count == 1 || x->count == TT_OTLP_BATCH)
            pthread_cond_signal(&x->work);
    }
    pthread_mutex_unlock(&x->mu);
    if (!queued) {
        atomic_fetch_add(&x->dropped_queue, 1);
        free(sp);
    }
}

void tt_otlp_counts(const struct tt_otlp *x, struct tt_otlp_counts *c)
{
    struct tt_otlp *m = (struct tt_otlp *)x;
    c->exported = atomic_load(&m->exported);
    c->dropped_queue = atomic_load(&m->dropped_queue);
    c->dropped_export = atomic_load(&m->dropped_export);
}

void tt_otlp_stop(struct tt_otlp *x, unsigned ms, const volatile sig_atomic_t *cut,
                  struct tt_otlp_counts *final)
{
    if (x == NULL)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    x->cut = cut;
    __atomic_store_n(&x->deadline_ns, mono_ns() + (uint64_t)ms * 1000000ull + 1,
                     __ATOMIC_RELEASE);
    pthread_cond_broadcast(&x->work);
    pthread_mutex_unlock(&x->mu);
    if (x->started)
        pthread_join(x->thread, NULL);
    if (final != NULL)
        tt_otlp_counts(x, final);
    destroy(x);
}
