/*
 * Unit tests of metrics/clock.c: hand-built request timelines turned into
 * the per-request metrics of SPEC section 5, exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/clock.h"

#define MS 1000000ull
#define T0 5000000000ull

static void token(struct tt_request *r, uint64_t at_ms, int reasoning)
{
    uint64_t t = T0 + at_ms * MS;
    assert_int_equal(tt_request_token(r, t), 0);
    if (r->ts[TT_TS_FIRST_TOKEN] == 0)
        r->ts[TT_TS_FIRST_TOKEN] = t;
    else if (r->ts[TT_TS_SECOND_TOKEN] == 0)
        r->ts[TT_TS_SECOND_TOKEN] = t;
    if (!reasoning && r->ts[TT_TS_FIRST_OUTPUT_TOKEN] == 0)
        r->ts[TT_TS_FIRST_OUTPUT_TOKEN] = t;
    r->ts[TT_TS_LAST_TOKEN] = t;
    if (r->ts[TT_TS_FIRST_EVENT] == 0)
        r->ts[TT_TS_FIRST_EVENT] = t;
    r->s.events++;
    r->s.token_events++;
    if (reasoning) {
        r->s.reasoning_events++;
        r->s.reasoning_bytes += 4;
    } else {
        r->s.answer_events++;
        r->s.answer_bytes += 4;
    }
}

static void begin(struct tt_request *r, int streaming)
{
    tt_request_init(r);
    r->t0 = T0;
    r->start_wall_ns = 1700000000000000000ll;
    r->status = 200;
    r->api = TT_API_OPENAI_CHAT;
    r->s.streaming = (unsigned)streaming;
    r->s.terminal = 1;
    r->ts[TT_TS_REQUEST_COMPLETE] = T0 + 1 * MS;
    r->ts[TT_TS_RESPONSE_HEADERS] = T0 + 100 * MS;
}

static void finish(struct tt_request *r, uint64_t at_ms)
{
    r->ts[TT_TS_RESPONSE_COMPLETE] = T0 + at_ms * MS;
}

#define HAS(m, id) tt_metric_has(&(m), (id))
#define NEAR(a, b) assert_true(fabs_((a) - (b)) < 1e-9)

static double fabs_(double x)
{
    return x < 0 ? -x : x;
}

static void test_answer_only_stream(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src = "x";
    (void)state;

    begin(&r, 1);
    for (int i = 0; i < 120; i++)
        token(&r, 450 + (uint64_t)i * 25, 0);
    finish(&r, 3430);
    tt_metrics_compute(&r, &m, &src);

    assert_string_equal(src, "events");
    NEAR(m.v[TT_M_TTFT], 450);
    NEAR(m.v[TT_M_TTFO], 450);
    NEAR(m.v[TT_M_TTST], 25);
    NEAR(m.v[TT_M_REQUEST_LATENCY], 3425);
    NEAR(m.v[TT_M_ITL], 25);
    NEAR(m.v[TT_M_OTPS_USER], 40);
    NEAR(m.v[TT_M_OSL], 120);
    NEAR(m.v[TT_M_OUTPUT_TOKENS], 120);
    NEAR(m.v[TT_M_REASONING_LATENCY], 0);
    assert_false(HAS(m, TT_M_ISL));
    assert_false(HAS(m, TT_M_REASONING_TOKENS));
    assert_int_equal(tt_icl_count(&r), 119);
    for (uint32_t i = 0; i < 119; i++)
        assert_int_equal(tt_icl_ns(&r, i), 25 * MS);
    assert_int_equal(tt_request_outcome(&r), TT_OUT_OK);
    tt_request_reset(&r);
}

static void test_reasoning_first(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src;
    (void)state;

    begin(&r, 1);
    for (int i = 0; i < 10; i++)
        token(&r, 200 + (uint64_t)i * 20, 1);
    for (int i = 0; i < 10; i++)
        token(&r, 400 + (uint64_t)i * 20, 0);
    r.s.usage_input = 57;
    r.s.usage_output = 20;
    r.s.usage_reasoning = 10;
    finish(&r, 600);
    tt_metrics_compute(&r, &m, &src);

    assert_string_equal(src, "usage");
    NEAR(m.v[TT_M_TTFT], 200);
    NEAR(m.v[TT_M_TTFO], 400);
    NEAR(m.v[TT_M_REASONING_LATENCY], 200);
    NEAR(m.v[TT_M_REQUEST_LATENCY], 580);
    NEAR(m.v[TT_M_OSL], 20);
    NEAR(m.v[TT_M_OUTPUT_TOKENS], 10);
    NEAR(m.v[TT_M_REASONING_TOKENS], 10);
    NEAR(m.v[TT_M_ISL], 57);
    NEAR(m.v[TT_M_ITL], 20);
    NEAR(m.v[TT_M_OTPS_USER], 50);
    tt_request_reset(&r);
}

static void test_three_tokens_per_event(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src;
    (void)state;

    begin(&r, 1);
    for (int i = 0; i < 10; i++)
        token(&r, 100 + (uint64_t)i * 30, 0);
    r.s.usage_output = 30;
    finish(&r, 371);
    tt_metrics_compute(&r, &m, &src);

    assert_string_equal(src, "usage");
    NEAR(m.v[TT_M_OSL], 30);
    NEAR(m.v[TT_M_REQUEST_LATENCY], 370);
    NEAR(m.v[TT_M_ITL], 270.0 / 29.0);
    NEAR(m.v[TT_M_OTPS_USER], 1000.0 / (270.0 / 29.0));
    /* gaps are per event, not per token */
    assert_int_equal(tt_icl_count(&r), 9);
    assert_int_equal(tt_icl_ns(&r, 3), 30 * MS);
    tt_request_reset(&r);
}

static void test_non_streaming(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src;
    (void)state;

    begin(&r, 0);
    r.s.usage_input = 12;
    r.s.usage_output = 34;
    r.s.token_events = 1;       /* the decoder saw the body's text once */
    finish(&r, 800);
    tt_metrics_compute(&r, &m, &src);

    assert_string_equal(src, "usage");
    assert_false(HAS(m, TT_M_TTFT));
    assert_false(HAS(m, TT_M_TTST));
    assert_false(HAS(m, TT_M_TTFO));
    assert_false(HAS(m, TT_M_ITL));
    assert_false(HAS(m, TT_M_OTPS_USER));
    assert_false(HAS(m, TT_M_REASONING_LATENCY));
    NEAR(m.v[TT_M_REQUEST_LATENCY], 800);
    NEAR(m.v[TT_M_OSL], 34);
    NEAR(m.v[TT_M_ISL], 12);
    assert_int_equal(tt_icl_count(&r), 0);

    /* without usage a JSON body has no token count at all */
    r.s.usage_output = -1;
    r.s.usage_input = -1;
    tt_metrics_compute(&r, &m, &src);
    assert_null(src);
    assert_false(HAS(m, TT_M_OSL));
    assert_false(HAS(m, TT_M_OUTPUT_TOKENS));
    tt_request_reset(&r);
}

static void test_one_token_answer(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src;
    (void)state;

    begin(&r, 1);
    token(&r, 300, 0);
    finish(&r, 305);
    tt_metrics_compute(&r, &m, &src);

    NEAR(m.v[TT_M_TTFT], 300);
    NEAR(m.v[TT_M_REQUEST_LATENCY], 300);
    NEAR(m.v[TT_M_OSL], 1);
    assert_false(HAS(m, TT_M_TTST));
    assert_false(HAS(m, TT_M_ITL));
    assert_false(HAS(m, TT_M_OTPS_USER));
    assert_int_equal(tt_icl_count(&r), 0);
    tt_request_reset(&r);
}

static void test_usage_estimate(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src;
    (void)state;

    begin(&r, 1);
    for (int i = 0; i < 5; i++)
        token(&r, 100 + (uint64_t)i * 10, 1);
    for (int i = 0; i < 5; i++)
        token(&r, 150 + (uint64_t)i * 10, 0);
    r.s.reasoning_bytes = 300;
    r.s.answer_bytes = 100;
    r.s.usage_output = 100;
    finish(&r, 200);
    tt_metrics_compute(&r, &m, &src);

    assert_string_equal(src, "usage+estimate");
    NEAR(m.v[TT_M_OSL], 100);
    NEAR(m.v[TT_M_REASONING_TOKENS], 75);
    NEAR(m.v[TT_M_OUTPUT_TOKENS], 25);

    /* the same stream without usage counts events */
    r.s.usage_output = -1;
    tt_metrics_compute(&r, &m, &src);
    assert_string_equal(src, "events");
    NEAR(m.v[TT_M_OSL], 10);
    NEAR(m.v[TT_M_REASONING_TOKENS], 5);
    NEAR(m.v[TT_M_OUTPUT_TOKENS], 5);
    tt_request_reset(&r);
}

static void test_stream_without_tokens(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src;
    (void)state;

    begin(&r, 1);
    r.ts[TT_TS_FIRST_EVENT] = T0 + 120 * MS;
    r.s.events = 2;
    finish(&r, 500);
    tt_metrics_compute(&r, &m, &src);

    assert_false(HAS(m, TT_M_TTFT));
    assert_false(HAS(m, TT_M_TTFO));
    assert_false(HAS(m, TT_M_ITL));
    NEAR(m.v[TT_M_REQUEST_LATENCY], 500);
    NEAR(m.v[TT_M_OSL], 0);
    assert_string_equal(src, "events");
    tt_request_reset(&r);
}

static void test_errors(void **state)
{
    struct tt_request r;
    struct tt_metric_values m;
    const char *src, *type, *msg;
    int code;
    (void)state;

    /* upstream refused: nothing but t0 */
    tt_request_init(&r);
    r.t0 = T0;
    tt_request_set_error(&r, 502, "upstream_connect", "connection refused");
    tt_metrics_compute(&r, &m, &src);
    assert_int_equal(m.present, 0);
    assert_null(src);
    assert_int_equal(tt_request_outcome(&r), TT_OUT_ERROR);
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
    assert_int_equal(code, 502);
    assert_string_equal(type, "upstream_connect");
    assert_string_equal(msg, "connection refused");
    tt_request_reset(&r);

    /* client gone mid-stream: metrics of what was seen, outcome cancelled */
    begin(&r, 1);
    token(&r, 100, 0);
    token(&r, 120, 0);
    r.cancelled = 1;
    tt_metrics_compute(&r, &m, &src);
    NEAR(m.v[TT_M_TTFT], 100);
    NEAR(m.v[TT_M_REQUEST_LATENCY], 120);
    assert_int_equal(tt_request_outcome(&r), TT_OUT_CANCELLED);
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
    assert_int_equal(code, 499);
    tt_request_reset(&r);

    /* mid-stream error object with a 200 status */
    begin(&r, 1);
    token(&r, 100, 0);
    r.s.error = 1;
    strcpy(r.s.error_type, "overloaded_error");
    strcpy(r.s.error_message, "Overloaded");
    assert_int_equal(tt_request_outcome(&r), TT_OUT_ERROR);
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
    assert_string_equal(type, "overloaded_error");
    tt_request_reset(&r);

    /* an upstream 429 forwarded unchanged is an error */
    begin(&r, 0);
    r.status = 429;
    finish(&r, 20);
    assert_int_equal(tt_request_outcome(&r), TT_OUT_ERROR);
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
    assert_int_equal(code, 429);
    tt_request_reset(&r);

    /* ok */
    begin(&r, 0);
    finish(&r, 20);
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 0);
    tt_request_reset(&r);
}

/* every finished request maps to one fixed kind, the same exactly when it
 * is not ok; the upstream's own type is kept beside it */
static void test_error_kinds(void **state)
{
    struct tt_request r;
    const char *type, *msg;
    int code;
    (void)state;

    /* tokentap's own errors: the type it set is the kind */
    static const struct { const char *type; int code; int kind; } own[] = {
        { "bad_request", 400, TT_EK_BAD_REQUEST },
        { "request_timeout", 408, TT_EK_REQUEST_TIMEOUT },
        { "payload_too_large", 413, TT_EK_PAYLOAD_TOO_LARGE },
        { "header_too_large", 431, TT_EK_HEADER_TOO_LARGE },
        { "upstream_connect", 502, TT_EK_UPSTREAM_CONNECT },
        { "upstream_timeout", 504, TT_EK_UPSTREAM_TIMEOUT },
        { "upstream_reset", 502, TT_EK_UPSTREAM_RESET },
        { "truncated", 502, TT_EK_TRUNCATED },
        { "upstream_status", 503, TT_EK_UPSTREAM_STATUS },
        { "shadow_dropped", 0, TT_EK_SHADOW_DROPPED },
        { "proxy_error", 502, TT_EK_PROXY_ERROR },
        /* a name that is no kind is tokentap's own mistake, never "other" */
        { "a_typo", 502, TT_EK_PROXY_ERROR },
    };
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        begin(&r, 1);
        tt_request_set_error(&r, own[i].code, own[i].type, "x");
        assert_int_equal(tt_request_errkind(&r), own[i].kind);
        assert_null(tt_request_upstream_type(&r));
        assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
        assert_string_equal(type, own[i].type);
        tt_request_reset(&r);
    }

    /* an upstream 400 with an OpenAI error body (proxy/decode/stream.c sets the
     * upstream's type, which lives in r->s): kind upstream_status */
    begin(&r, 0);
    r.status = 400;
    r.s.error = 1;
    strcpy(r.s.error_type, "invalid_request_error");
    tt_request_set_error(&r, 400, r.s.error_type, "bad");
    assert_int_equal(tt_request_errkind(&r), TT_EK_UPSTREAM_STATUS);
    assert_string_equal(tt_request_upstream_type(&r), "invalid_request_error");
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
    assert_string_equal(type, "invalid_request_error");    /* AIPerf's error.type */
    tt_request_reset(&r);

    /* an upstream that names its type "bad_request" is still the upstream's */
    begin(&r, 0);
    r.status = 400;
    r.s.error = 1;
    strcpy(r.s.error_type, "bad_request");
    tt_request_set_error(&r, 400, r.s.error_type, "bad");
    assert_int_equal(tt_request_errkind(&r), TT_EK_UPSTREAM_STATUS);
    assert_string_equal(tt_request_upstream_type(&r), "bad_request");
    tt_request_reset(&r);

    /* a 503 server_error; an Ollama-style error without a type under 500 */
    begin(&r, 1);
    r.status = 503;
    r.s.error = 1;
    strcpy(r.s.error_type, "server_error");
    tt_request_set_error(&r, 503, r.s.error_type, "down");
    assert_int_equal(tt_request_errkind(&r), TT_EK_UPSTREAM_STATUS);
    tt_request_reset(&r);
    begin(&r, 0);
    r.status = 500;
    r.s.error = 1;
    tt_request_set_error(&r, 500, "upstream_error", "model not found");
    assert_int_equal(tt_request_errkind(&r), TT_EK_UPSTREAM_STATUS);
    assert_null(tt_request_upstream_type(&r));
    tt_request_reset(&r);

    /* an error status and no body error; a bare numeric code is no type */
    begin(&r, 0);
    r.status = 429;
    r.s.error = 1;
    strcpy(r.s.error_type, "429");
    assert_int_equal(tt_request_errkind(&r), TT_EK_UPSTREAM_STATUS);
    assert_null(tt_request_upstream_type(&r));
    assert_int_equal(tt_request_error(&r, &code, &type, &msg), 1);
    assert_string_equal(type, "upstream_status");
    tt_request_reset(&r);

    /* errors in the body under 200: in a stream, in a JSON body */
    begin(&r, 1);
    r.s.error = 1;
    strcpy(r.s.error_type, "overloaded_error");
    tt_request_set_error(&r, 500, r.s.error_type, "Overloaded");
    assert_int_equal(tt_request_errkind(&r), TT_EK_STREAM_ERROR);
    assert_string_equal(tt_request_upstream_type(&r), "overloaded_error");
    tt_request_reset(&r);
    begin(&r, 0);
    r.s.error = 1;
    assert_int_equal(tt_request_errkind(&r), TT_EK_UPSTREAM_ERROR);
    tt_request_reset(&r);

    /* cancelled beats the cause set before; no response at all */
    begin(&r, 1);
    tt_request_set_error(&r, 502, "truncated", "x");
    r.cancelled = 1;
    assert_int_equal(tt_request_errkind(&r), TT_EK_CANCELLED);
    assert_int_equal(tt_request_outcome(&r), TT_OUT_CANCELLED);
    tt_request_reset(&r);
    tt_request_init(&r);
    assert_int_equal(tt_request_errkind(&r), TT_EK_NO_RESPONSE);
    tt_request_reset(&r);

    /* ok: no kind */
    begin(&r, 0);
    finish(&r, 20);
    assert_int_equal(tt_request_errkind(&r), -1);
    tt_request_reset(&r);

    /* the names round-trip; a kind exactly when the outcome is not ok */
    for (int k = 0; k < TT_EK__COUNT; k++)
        assert_int_equal(tt_errkind_by_name(tt_errkind_names[k]), k);
    assert_int_equal(tt_errkind_by_name("other"), -1);
    for (int status = 0; status < 600; status += 50)
        for (int bits = 0; bits < 8; bits++) {
            begin(&r, bits & 1);
            r.status = status;
            r.s.error = (bits >> 1) & 1;
            r.cancelled = (bits >> 2) & 1;
            assert_int_equal(tt_request_errkind(&r) >= 0,
                             tt_request_outcome(&r) != TT_OUT_OK);
            tt_request_reset(&r);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_only_stream),
        cmocka_unit_test(test_reasoning_first),
        cmocka_unit_test(test_three_tokens_per_event),
        cmocka_unit_test(test_non_streaming),
        cmocka_unit_test(test_one_token_answer),
        cmocka_unit_test(test_usage_estimate),
        cmocka_unit_test(test_stream_without_tokens),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
