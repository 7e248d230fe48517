/*
 * Unit tests of metrics/record.c: the record line parsed back with cJSON,
 * redaction and escaping, and the writer thread (line atomicity under many
 * threads, drop counting when the queue is full, reopen after rename).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "metrics/clock.h"
#include "metrics/record.h"
#include "tests/unit/rng.h"

#define MS 1000000ull
#define T0 7000000000ull
#define WALL 1759813207532900363ll

static void token(struct tt_request *r, uint64_t at_ms, int reasoning)
{
    uint64_t t = T0 + at_ms * MS;
    tt_request_token(r, t);
    if (r->ts[TT_TS_FIRST_TOKEN] == 0)
        r->ts[TT_TS_FIRST_TOKEN] = t;
    else if (r->ts[TT_TS_SECOND_TOKEN] == 0)
        r->ts[TT_TS_SECOND_TOKEN] = t;
    if (!reasoning && r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0)
        r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = t;
    r->ts[TT_TS_LAST_TOKEN] = t;
    r->s.token_events++;
    r->s.events++;
    if (reasoning)
        r->s.reasoning_events++;
    else
        r->s.answer_events++;
}

static void sample(struct tt_request *r)
{
    tt_request_init(r);
    r->t0 = T0;
    r->start_wall_ns = WALL;
    strcpy(r->request_id, "req-42");
    strcpy(r->method, "POST");
    strcpy(r->path, "/v1/chat/completions");
    strcpy(r->model, "qwen3-8b");
    r->api = TT_API_OPENAI_CHAT;
    r->stream = 1;
    r->status = 200;
    r->s.streaming = 1;
    r->s.terminal = 1;
    r->s.usage_input = 550;
    r->s.usage_output = 4;
    r->s.usage_reasoning = 2;
    strcpy(r->s.finish_reason, "stop");
    r->ts[TT_TS_REQUEST_COMPLETE] = T0 + 1 * MS;
    r->ts[TT_TS_UPSTREAM_CONNECTED] = T0 + 2 * MS;
    r->ts[TT_TS_REQUEST_SENT] = T0 + 3 * MS;
    r->ts[TT_TS_RESPONSE_HEADERS] = T0 + 100 * MS;
    r->ts[TT_TS_FIRST_EVENT] = T0 + 150 * MS;
    token(r, 200, 1);
    token(r, 225, 1);
    token(r, 262, 0);
    r->token_ts[2] += 500000;   /* 262.5 ms: a fractional gap */
    r->ts[TT_TS_FIRST_OUTPUT_TOKEN] += 500000;
    token(r, 300, 0);
    r->ts[TT_TS_RESPONSE_COMPLETE] = T0 + 301 * MS;
    r->ts[TT_TS_DELIVERED] = T0 + 302 * MS;
}

static cJSON *format_parse(const struct tt_request *r,
                           const struct tt_slo_result *slo, char **line_out)
{
    struct tt_metric_values m;
    const char *src;
    size_t len;

    tt_metrics_compute(r, &m, &src);
    char *line = tt_record_format(r, &m, src, slo, &len);
    assert_non_null(line);
    assert_int_equal(strlen(line), len);
    assert_true(len > 2 && line[len - 1] == '\n');
    assert_null(memchr(line, '\n', len - 1));
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (j == NULL)
        fail_msg("record does not parse: %s", line);
    if (line_out)
        *line_out = line;
    else
        free(line);
    return j;
}

static double metric(cJSON *j, const char *tag, const char *unit)
{
    cJSON *e = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "metrics"), tag);
    if (e == NULL)
        fail_msg("metric %s missing", tag);
    assert_string_equal(cJSON_GetObjectItem(e, "unit")->valuestring, unit);
    return cJSON_GetObjectItem(e, "value")->valuedouble;
}

/* the server's own figures, cached tokens, choices, usage injection */
static void test_record_server_truth(void **state)
{
    struct tt_request r;
    char *line;
    cJSON *j, *md, *srv, *u;
    (void)state;

    sample(&r);
    j = format_parse(&r, NULL, &line);
    md = cJSON_GetObjectItem(j, "metadata");
    assert_null(cJSON_GetObjectItem(md, "server"));         /* the server said nothing */
    assert_null(cJSON_GetObjectItem(md, "choices"));
    assert_null(cJSON_GetObjectItem(md, "usage_injected"));
    cJSON_Delete(j);
    free(line);

    r.s.usage_cached = 12;
    r.s.choices = 2;
    r.usage_injected = 1;
    tt_request_server(&r, TT_SRV_PROMPT_MS, 95.582);
    tt_request_server(&r, TT_SRV_CACHE_N, 12);
    tt_request_server(&r, TT_SRV_QUEUE_MS, -1);             /* not a measurement */
    j = format_parse(&r, NULL, &line);
    md = cJSON_GetObjectItem(j, "metadata");
    srv = cJSON_GetObjectItem(md, "server");
    assert_non_null(srv);
    assert_int_equal(cJSON_GetArraySize(srv), 2);
    assert_true(cJSON_GetObjectItem(srv, "prompt_ms")->valuedouble == 95.582);
    assert_non_null(strstr(line, "\"server\":{\"cache_n\":12,\"prompt_ms\":95.582}"));
    u = cJSON_GetObjectItem(md, "usage");
    assert_int_equal(cJSON_GetObjectItem(u, "cached_input_tokens")->valueint, 12);
    assert_int_equal(cJSON_GetObjectItem(md, "choices")->valueint, 2);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(md, "usage_injected")));
    assert_true(metric(j, "cached_input_tokens", "tokens") == 12);
    assert_true(metric(j, "server_prefill_ms", "ms") == 95.582);
    cJSON_Delete(j);
    free(line);
    tt_request_reset(&r);
}

/*
 * request_end_ns: the response's completion when it completed; for a
 * request that failed or was cancelled, the instant that was known (a leg
 * cut by its response_timeout ends at the timeout, not at its last mark);
 * with neither, the last mark
 */
static void test_record_end_of_failed_request(void **state)
{
    struct tt_request r;
    char *line;
    cJSON *j;
    (void)state;

    sample(&r);
    r.ended = T0 + 900 * MS;            /* completed: the completion counts */
    j = format_parse(&r, NULL, &line);
    assert_non_null(strstr(line, "\"request_end_ns\":1759813207833900363,"));
    cJSON_Delete(j);
    free(line);

    r.ts[TT_TS_RESPONSE_COMPLETE] = 0;  /* cut after its last token (300 ms) */
    r.ts[TT_TS_DELIVERED] = 0;
    tt_request_set_error(&r, 504, "upstream_timeout", "no response in time");
    j = format_parse(&r, NULL, &line);
    assert_non_null(strstr(line, "\"request_end_ns\":1759813208432900363,"));
    cJSON_Delete(j);
    free(line);

    r.ended = 0;                        /* never handed over: the last mark */
    j = format_parse(&r, NULL, &line);
    assert_non_null(strstr(line, "\"request_end_ns\":1759813207832900363,"));
    cJSON_Delete(j);
    free(line);
    tt_request_reset(&r);
}

static void test_record_fields(void **state)
{
    struct tt_request r;
    struct tt_slo_result slo = { .good = 0, .violated = 1u << TT_M_TTFT };
    (void)state;

    char *line;

    sample(&r);
    cJSON *j = format_parse(&r, &slo, &line);
    assert_string_equal(cJSON_GetObjectItem(j, "schema")->valuestring,
                        "tokentap.record/1");
    cJSON *md = cJSON_GetObjectItem(j, "metadata");
    assert_non_null(md);
    assert_string_equal(cJSON_GetObjectItem(md, "x_request_id")->valuestring, "req-42");
    /* ns values above 2^53 would lose digits in a double: compare the text */
    assert_non_null(strstr(line, "\"request_start_ns\":1759813207532900363,"));
    assert_non_null(strstr(line, "\"request_ack_ns\":1759813207632900363,"));
    assert_non_null(strstr(line, "\"request_end_ns\":1759813207833900363,"));
    /* AIPerf's record shape: schema, metadata, metrics, error at the top */
    static const char head[] = "{\"schema\":\"tokentap.record/1\",\"metadata\":{";
    assert_memory_equal(line, head, sizeof(head) - 1);
    free(line);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(md, "was_cancelled")));
    assert_string_equal(cJSON_GetObjectItem(md, "upstream")->valuestring, "primary");
    assert_string_equal(cJSON_GetObjectItem(md, "api")->valuestring, "openai.chat");
    assert_string_equal(cJSON_GetObjectItem(md, "model")->valuestring, "qwen3-8b");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(md, "stream")));
    assert_string_equal(cJSON_GetObjectItem(md, "method")->valuestring, "POST");
    assert_string_equal(cJSON_GetObjectItem(md, "path")->valuestring, "/v1/chat/completions");
    assert_int_equal(cJSON_GetObjectItem(md, "status")->valueint, 200);
    assert_string_equal(cJSON_GetObjectItem(md, "finish_reason")->valuestring, "stop");
    assert_string_equal(cJSON_GetObjectItem(md, "token_count_source")->valuestring, "usage");
    assert_int_equal(cJSON_GetObjectItem(md, "token_events")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(md, "reasoning_events")->valueint, 2);

    cJSON *tl = cJSON_GetObjectItem(md, "timeline_ns");
    assert_int_equal(cJSON_GetObjectItem(tl, "request_complete")->valuedouble, 1e6);
    assert_int_equal(cJSON_GetObjectItem(tl, "response_headers")->valuedouble, 100e6);
    assert_int_equal(cJSON_GetObjectItem(tl, "first_token")->valuedouble, 200e6);
    assert_int_equal(cJSON_GetObjectItem(tl, "first_output_token")->valuedouble, 262.5e6);
    assert_int_equal(cJSON_GetObjectItem(tl, "delivered")->valuedouble, 302e6);
    assert_null(cJSON_GetObjectItem(tl, "upstream_tls"));     /* not seen */
    assert_int_equal(cJSON_GetArraySize(tl), 11);

    cJSON *s = cJSON_GetObjectItem(md, "slo");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(s, "good")));
    cJSON *v = cJSON_GetObjectItem(s, "violations");
    assert_int_equal(cJSON_GetArraySize(v), 1);
    assert_string_equal(cJSON_GetArrayItem(v, 0)->valuestring, "time_to_first_token");

    assert_true(metric(j, "time_to_first_token", "ms") == 200);
    assert_true(metric(j, "time_to_second_token", "ms") == 25);
    assert_true(metric(j, "time_to_first_output_token", "ms") == 262.5);
    assert_true(metric(j, "reasoning_latency", "ms") == 62.5);
    assert_true(metric(j, "request_latency", "ms") == 300);
    assert_true(metric(j, "inter_token_latency", "ms") == 100.0 / 3.0 ||
                fabs(metric(j, "inter_token_latency", "ms") - 100.0 / 3.0) < 1e-9);
    assert_true(metric(j, "input_sequence_length", "tokens") == 550);
    assert_true(metric(j, "output_sequence_length", "tokens") == 4);
    assert_true(metric(j, "output_token_count", "tokens") == 2);
    assert_true(metric(j, "reasoning_token_count", "tokens") == 2);

    cJSON *icl = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metrics"),
                                                         "inter_chunk_latency"), "value");
    assert_int_equal(cJSON_GetArraySize(icl), 3);
    assert_true(cJSON_GetArrayItem(icl, 0)->valuedouble == 25);
    assert_true(cJSON_GetArrayItem(icl, 1)->valuedouble == 37.5);
    assert_true(cJSON_GetArrayItem(icl, 2)->valuedouble == 37.5);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "error")));
    cJSON_Delete(j);

    /* without SLOs there is no slo object */
    j = format_parse(&r, NULL, NULL);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "slo"));
    cJSON_Delete(j);
    tt_request_reset(&r);
}

/* the inter-chunk gaps are written exactly, in ms with up to six decimals
 * and no trailing zeros, however many there are */
static void test_record_gaps_exact(void **state)
{
    static const uint64_t gaps[] = {
        25 * MS, 1, 10, 1500000, 999999, 1000001, 3600000 * MS + 7, 120000, 0,
        123456789,
    };
    static const char want[] =
        "\"inter_chunk_latency\":{\"value\":[25,0.000001,0.00001,1.5,0.999999,"
        "1.000001,3600000.000007,0.12,0,123.456789],\"unit\":\"ms\"}";
    struct tt_request r;
    char *line;
    uint64_t t = T0 + 200 * MS;
    size_t i;

    (void)state;
    sample(&r);
    r.n_token_ts = 0;
    r.s.token_events = r.s.events = r.s.answer_events = r.s.reasoning_events = 0;
    r.ts[TT_TS_FIRST_TOKEN] = r.ts[TT_TS_SECOND_TOKEN] = r.ts[TT_TS_FIRST_OUTPUT_TOKEN] = 0;
    token(&r, 200, 0);
    for (i = 0; i < sizeof(gaps) / sizeof(gaps[0]); i++) {
        t += gaps[i];
        tt_request_token(&r, t);
        r.ts[TT_TS_LAST_TOKEN] = t;
    }
    r.ts[TT_TS_RESPONSE_COMPLETE] = r.ts[TT_TS_DELIVERED] = t + MS;
    cJSON_Delete(format_parse(&r, NULL, &line));
    if (strstr(line, want) == NULL)
        fail_msg("gaps not written exactly:\n%s\nwant %s", line, want);
    free(line);
    tt_request_reset(&r);

    /* many gaps: the list is sized once, not grown per number */
    sample(&r);
    t = r.ts[TT_TS_LAST_TOKEN];
    for (i = 0; i < 5000; i++) {
        t += 1000000 + i;
        tt_request_token(&r, t);
    }
    r.ts[TT_TS_LAST_TOKEN] = t;
    r.ts[TT_TS_RESPONSE_COMPLETE] = r.ts[TT_TS_DELIVERED] = t + MS;
    cJSON *j = format_parse(&r, NULL, NULL);
    cJSON *icl = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metrics"),
                                                         "inter_chunk_latency"), "value");
    assert_int_equal(cJSON_GetArraySize(icl), 3 + 5000);
    assert_true(cJSON_GetArrayItem(icl, 3)->valuedouble == 1);
    assert_true(cJSON_GetArrayItem(icl, 3 + 4999)->valuedouble == 1.004999);
    cJSON_Delete(j);
    tt_request_reset(&r);
}

static void test_record_error_and_absent(void **state)
{
    struct tt_request r;
    (void)state;

    tt_request_init(&r);
    r.t0 = T0;
    r.start_wall_ns = WALL;
    strcpy(r.method, "POST");
    strcpy(r.path, "/v1/messages");
    r.api = TT_API_ANTHROPIC;
    tt_request_set_error(&r, 502, "upstream_connect", "connect: Connection refused");
    cJSON *j = format_parse(&r, NULL, NULL);
    cJSON *md = cJSON_GetObjectItem(j, "metadata");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(md, "request_ack_ns")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(md, "token_count_source")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(md, "timeline_ns")), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "metrics")), 0);
    cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_int_equal(cJSON_GetObjectItem(e, "code")->valueint, 502);
    assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "upstream_connect");
    assert_string_equal(cJSON_GetObjectItem(e, "message")->valuestring,
                        "connect: Connection refused");
    cJSON_Delete(j);
    tt_request_reset(&r);
}

/* every spelling of a credential parameter is redacted, others kept */
static void test_redact_path_spellings(void **state)
{
    static const struct { const char *in, *out; } cases[] = {
        { "/m:gen?key=S1", "/m:gen?key=REDACTED" },
        { "/m:gen?%6Bey=S1", "/m:gen?%6Bey=REDACTED" },
        { "/m:gen?k%65y=S1", "/m:gen?k%65y=REDACTED" },
        { "/m:gen?%4B%45%59=S1", "/m:gen?%4B%45%59=REDACTED" },
        { "/m:gen?%4b%45%79=S1", "/m:gen?%4b%45%79=REDACTED" },
        { "/m:gen?KEY=S1", "/m:gen?KEY=REDACTED" },
        { "/m:gen?%256Bey=S1", "/m:gen?%256Bey=REDACTED" },
        { "/x?a=1&api_key=S1&b=2", "/x?a=1&api_key=REDACTED&b=2" },
        { "/x?api%5Fkey=S1", "/x?api%5Fkey=REDACTED" },
        { "/x?access_token=S1;token=S2", "/x?access_token=REDACTED;token=REDACTED" },
        { "/x?alt=sse&keys=1&monkey=2&key", "/x?alt=sse&keys=1&monkey=2&key" },
        { "/x?x-goog-api-key=S1", "/x?x-goog-api-key=REDACTED" },
        { "/plain/path", "/plain/path" },
        { "/x?%zz=1&key=", "/x?%zz=1&key=REDACTED" },
    };
    char out[TT_RECORD_PATH_MAX];
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = tt_record_redact_path(cases[i].in, out, sizeof(out));
        assert_string_equal(out, cases[i].out);
        assert_int_equal(n, strlen(cases[i].out));
    }
    /* truncation never shows a secret either */
    assert_int_equal(tt_record_redact_path("/x?key=SECRET", out, 8), 7);
    assert_string_equal(out, "/x?key=");
}

static void test_record_escaping_and_secrets(void **state)
{
    struct tt_request r;
    char *line;
    (void)state;

    sample(&r);
    strcpy(r.path, "/v1beta/models/gemini-2.5:streamGenerateContent?alt=sse&key=AIzaSECRET&x=1");
    strcpy(r.model, "m\"o\\d\ne\x01l\xff\xc3\xa9");
    strcpy(r.request_id, "id\twith\ttabs");
    r.api = TT_API_GEMINI;
    cJSON *j = format_parse(&r, NULL, &line);
    assert_null(strstr(line, "SECRET"));
    assert_null(strstr(line, "uthorization"));
    cJSON *md = cJSON_GetObjectItem(j, "metadata");
    assert_string_equal(cJSON_GetObjectItem(md, "path")->valuestring,
                        "/v1beta/models/gemini-2.5:streamGenerateContent?alt=sse&key=REDACTED&x=1");
    assert_string_equal(cJSON_GetObjectItem(md, "model")->valuestring,
                        "m\"o\\d\ne\x01l\xef\xbf\xbd\xc3\xa9");
    assert_string_equal(cJSON_GetObjectItem(md, "x_request_id")->valuestring,
                        "id\twith\ttabs");
    assert_string_equal(cJSON_GetObjectItem(md, "api")->valuestring, "gemini");
    free(line);
    cJSON_Delete(j);
    tt_request_reset(&r);
}

/* ---- the writer ---------------------------------------------------------- */

static char dir[64];

static int setup_dir(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/tt_record_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    p[*len] = '\0';
    fclose(f);
    return p;
}

/* count lines; each must be "T<thread> <seq> <padding>" */
static size_t count_lines(const char *p, size_t len)
{
    size_t n = 0;
    const char *s = p, *end = p + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (nl == NULL)
            fail_msg("torn last line");
        if (s[0] != 'T' || nl[-1] != '.')
            fail_msg("malformed line: %.40s", s);
        n++;
        s = nl + 1;
    }
    return n;
}

struct producer {
    struct tt_recorder *rec;
    int id, lines;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < p->lines; i++) {
        /* lines of varying size, some larger than a pipe buffer page */
        size_t pad = (size_t)((i * 7919 + p->id * 31) % 3000);
        char *line = malloc(pad + 64);
        int n = snprintf(line, 64, "T%d %d ", p->id, i);
        memset(line + n, 'x', pad);
        line[n + pad] = '.';
        line[n + pad + 1] = '\n';
        tt_recorder_submit(p->rec, line, (size_t)n + pad + 2);
    }
    return NULL;
}

static void test_recorder_many_threads(void **state)
{
    char path[128], err[256];
    enum { THREADS = 8, LINES = 5000 };
    pthread_t th[THREADS];
    struct producer pr[THREADS];
    (void)state;

    snprintf(path, sizeof(path), "%s/many.jsonl", dir);
    /* queue large enough that nothing is dropped */
    struct tt_recorder *rec = tt_recorder_open(path, THREADS * LINES, err, sizeof(err));
    assert_non_null(rec);
    for (int i = 0; i < THREADS; i++) {
        pr[i] = (struct producer){ rec, i, LINES };
        pthread_create(&th[i], NULL, produce, &pr[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(tt_recorder_dropped(rec), 0);
    tt_recorder_close(rec);

    size_t len;
    char *p = slurp(path, &len);
    assert_non_null(p);
    assert_int_equal(count_lines(p, len), THREADS * LINES);
    free(p);

    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
}

static void *drain_fifo(void *arg)
{
    int fd = *(int *)arg;
    char buf[65536];
    size_t *total = malloc(sizeof(*total));
    *total = 0;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k > 0) {
            for (ssize_t i = 0; i < k; i++)
                if (buf[i] == '\n')
                    (*total)++;
        } else if (k == 0) {
            break;
        } else if (errno != EAGAIN && errno != EINTR) {
            break;
        } else {
            usleep(1000);
        }
    }
    return total;
}

static void test_recorder_queue_full(void **state)
{
    char path[128], err[256];
    enum { CAP = 16, EXTRA = 5 };
    (void)state;

    snprintf(path, sizeof(path), "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    int rfd = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(rfd >= 0);
    struct tt_recorder *rec = tt_recorder_open(path, CAP, err, sizeof(err));
    assert_non_null(rec);

    /* a line bigger than the pipe: the writer blocks in write() on it */
    size_t big = 1 << 20;
    char *line = malloc(big);
    memset(line, 'T', big - 2);
    line[big - 2] = '.';
    line[big - 1] = '\n';
    tt_recorder_submit(rec, line, big);
    for (int i = 0; i < 2000 && tt_recorder_queued(rec) != 0; i++)
        usleep(1000);
    assert_int_equal(tt_recorder_queued(rec), 0);

    /* the queue takes CAP more, the rest are dropped, never blocking */
    for (int i = 0; i < CAP + EXTRA; i++) {
        char *l = strdup("T small.\n");
        tt_recorder_submit(rec, l, strlen(l));
    }
    assert_int_equal(tt_recorder_dropped(rec), EXTRA);
    assert_int_equal(tt_recorder_queued(rec), CAP);
    tt_recorder_submit(rec, NULL, 0);            /* a failed format */
    assert_int_equal(tt_recorder_dropped(rec), EXTRA + 1);

    pthread_t th;
    pthread_create(&th, NULL, drain_fifo, &rfd);
    tt_recorder_close(rec);                      /* flushes the queue */
    void *res;
    pthread_join(th, &res);
    assert_int_equal(*(size_t *)res, 1 + CAP);
    free(res);
    close(rfd);
}

static void test_recorder_reopen(void **state)
{
    char path[128], moved[128], err[256];
    (void)state;

    snprintf(path, sizeof(path), "%s/rot.jsonl", dir);
    snprintf(moved, sizeof(moved), "%s/rot.jsonl.1", dir);
    struct tt_recorder *rec = tt_recorder_open(path, 1024, err, sizeof(err));
    assert_non_null(rec);
    for (int i = 0; i < 10; i++)
        tt_recorder_submit(rec, strdup("T before.\n"), 10);
    tt_recorder_flush(rec);
    assert_int_equal(tt_recorder_written(rec), 10);

    assert_int_equal(rename(path, moved), 0);
    tt_recorder_reopen(rec);
    for (int i = 0; i < 7; i++)
        tt_recorder_submit(rec, strdup("T after.\n"), 9);
    tt_recorder_close(rec);

    size_t len;
    char *p = slurp(moved, &len);
    assert_non_null(p);
    assert_int_equal(count_lines(p, len), 10);
    assert_null(strstr(p, "after"));
    free(p);
    p = slurp(path, &len);
    assert_non_null(p);
    assert_int_equal(count_lines(p, len), 7);
    assert_null(strstr(p, "before"));
    free(p);

    /* an unwritable path fails with a reason */
    assert_null(tt_recorder_open("/nonexistent/dir/x.jsonl", 8, err, sizeof(err)));
    assert_non_null(strstr(err, "/nonexistent/dir/x.jsonl"));
}

/* a pipe whose reader goes away mid-line: the line is counted as dropped,
 * and the next record, once a reader is back, starts on a line of its own
 * instead of being glued to the fragment */
static void test_recorder_cut_line_on_pipe(void **state)
{
    char path[128], err[256], buf[65536];
    (void)state;

    snprintf(path, sizeof(path), "%s/cut", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    int r1 = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(r1 >= 0);
    struct tt_recorder *rec = tt_recorder_open(path, 8, err, sizeof(err));
    assert_non_null(rec);

    size_t big = 1 << 20;               /* far more than the pipe holds */
    char *line = malloc(big);
    memset(line, 'T', big - 1);
    line[big - 1] = '\n';
    tt_recorder_submit(rec, line, big);
    /* once the writer has begun the line, read a little and take the
     * reader away: the writer is left mid-line */
    ssize_t got = -1;
    for (int i = 0; i < 2000 && got <= 0; i++) {
        got = read(r1, buf, 16);
        if (got <= 0)
            usleep(1000);
    }
    assert_int_equal(got, 16);
    close(r1);
    for (int i = 0; i < 2000 && tt_recorder_dropped(rec) == 0; i++)
        usleep(1000);
    assert_int_equal(tt_recorder_dropped(rec), 1);
    assert_int_equal(tt_recorder_written(rec), 0);

    int r2 = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(r2 >= 0);
    tt_recorder_submit(rec, strdup("{\"next\":1}\n"), 11);
    /* what the new reader gets: what was left of the fragment in the pipe,
     * then a newline, then the whole record (read while it is written:
     * the pipe may still be full of the fragment) */
    size_t total = 0;
    char *all = NULL;
    for (int i = 0; i < 5000; i++) {
        ssize_t k = read(r2, buf, sizeof(buf));
        if (k > 0) {
            all = realloc(all, total + (size_t)k + 1);
            memcpy(all + total, buf, (size_t)k);
            total += (size_t)k;
        } else if (tt_recorder_written(rec) == 1) {
            break;
        } else {
            usleep(1000);
        }
    }
    assert_int_equal(tt_recorder_written(rec), 1);
    assert_true(total >= 12);
    all[total] = '\0';
    assert_string_equal(all + total - 12, "\n{\"next\":1}\n");
    free(all);
    close(r2);
    tt_recorder_close(rec);
}

/* tt_fmt_g15 prints what printf's "%.15g" prints, byte for byte: random
 * bits, every magnitude, ratios, gaps in ms, and near-ties of the 15th
 * digit (the cases its fast path must hand to printf) */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    return test_xorshift(&rng_state);
}

static void check_g15(double v)
{
    char want[64], got[64];

    snprintf(want, sizeof(want), "%.15g", v);
    size_t n = tt_fmt_g15(got, v);
    if (strcmp(want, got) != 0 || n != strlen(want))
        fail_msg("tt_fmt_g15(%a) = \"%s\" (%zu), printf \"%s\"", v, got, n, want);
}

static void test_fmt_g15_matches_printf(void **state)
{
    (void)state;
    static const double fixed[] = {
        0, -0.0, 1e-4, 9.99999999999999e-5, 1e15, 999999999999999.4,
        999999999999999.5, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 2.93560835353535,
        340.644895221019, 123456789012345.5, 0.000123456789012345,
        12345678901234.25, 1e14, 99999999999999.95, 0.5, 1.5, 2.5 };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        check_g15(fixed[i]);
        check_g15(-fixed[i]);
    }
    for (int i = 0; i < 200000; i++) {
        uint64_t b = rng();
        double v;
        memcpy(&v, &b, sizeof(v));
        if (isfinite(v))
            check_g15(v);                       /* any magnitude */
        /* 1e-6 .. 1e17: the fast path's range and both sides of it */
        v = (double)(rng() >> 11) / 9007199254740992.0 * pow(10, (int)(rng() % 24) - 6);
        check_g15(v);
        check_g15((double)(rng() % 100000) / (double)(1 + rng() % 9999));  /* rates */
        check_g15((double)(rng() % 100000000000ull) / 1e6);     /* ms of a gap */
        /* a 15-digit integer and a half, scaled: near-ties of the last digit */
        uint64_t n15 = 100000000000000ull + rng() % 900000000000000ull;
        int k = (int)(rng() % 19);
        check_g15(((double)n15 + 0.5) / pow(10, k));
        check_g15(nextafter(pow(10, (int)(rng() % 20) - 4), rng() & 1 ? INFINITY : 0));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_fields),
        cmocka_unit_test(test_record_end_of_failed_request),
        cmocka_unit_test(test_record_server_truth),
        cmocka_unit_test(test_record_gaps_exact),
        cmocka_unit_test(test_fmt_g15_matches_printf),
        cmocka_unit_test(test_record_error_and_absent),
        cmocka_unit_test(test_record_escaping_and_secrets),
        cmocka_unit_test(test_redact_path_spellings),
        cmocka_unit_test(test_recorder_many_threads),
        cmocka_unit_test(test_recorder_queue_full),
        cmocka_unit_test(test_recorder_reopen),
        cmocka_unit_test(test_recorder_cut_line_on_pipe),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
