/*
 * Unit tests for tokentap-sim's WebSocket parts that need no socket: the
 * permessage-deflate offer and our answer (read back with proxy/decode/ws.c's
 * reader of answers), the handshake's checks, ?model=, the realtime usage
 * arithmetic, the second (audio) track's schedule, and the options the
 * sessions added.  Includes the .c files so static functions are
 * reachable; sim/main.c (the process) is left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim/base.c"
#include "sim/dialect.c"
#include "sim/resp.c"
#include "sim/ws.c"
#include "sim/conn.c"

/* our answer to the Sec-WebSocket-Extensions headers <v>[0..n) */
static void answer(const char *const *v, int n, char *out, size_t olen)
{
    struct sim_hdr h[4];
    struct sim_req q;
    int i;

    memset(&q, 0, sizeof(q));
    for (i = 0; i < n; i++) {
        h[i].name = (char *)(i == 1 ? "Sec-WebSocket-Extensions"
                                    : "sec-websocket-extensions");
        h[i].value = (char *)v[i];
    }
    q.hdrs = h;
    q.nhdrs = n;
    offer_answer(&q, out, olen);
}

static void want_answer(const char *offer, const char *want)
{
    char out[200];
    struct tt_ws_deflate d;

    answer(&offer, 1, out, sizeof(out));
    assert_string_equal(out, want);
    if (*want) {
        /* the proxy's reader of answers takes every answer we make */
        assert_int_equal(tt_ws_extensions(out, strlen(out), &d), 0);
        assert_true(d.on);
    }
}

static void test_offers(void **state)
{
    static const char ans[] = "permessage-deflate; server_no_context_takeover; "
                              "server_max_window_bits=10";
    struct tt_ws_deflate d;
    const char *two[2] = { "x-webkit-deflate-frame", "permessage-deflate" };
    char out[200];
    (void)state;

    /* npm ws's default offer: no value, so the client keeps 15 */
    want_answer("permessage-deflate; client_max_window_bits", "permessage-deflate");
    want_answer("permessage-deflate", "permessage-deflate");
    want_answer("PerMessage-Deflate", "permessage-deflate");
    want_answer("permessage-deflate; server_no_context_takeover; "
                "client_no_context_takeover; server_max_window_bits=10; "
                "client_max_window_bits=12",
                "permessage-deflate; server_no_context_takeover; "
                "client_no_context_takeover; server_max_window_bits=10; "
                "client_max_window_bits=12");
    want_answer("permessage-deflate;server_max_window_bits=\"9\"",
                "permessage-deflate; server_max_window_bits=9");
    want_answer("permessage-deflate; server_max_window_bits=8",
                "permessage-deflate; server_max_window_bits=8");
    /* the first acceptable offer wins; declined ones are skipped */
    want_answer("x-webkit-deflate-frame, permessage-deflate; client_max_window_bits=9",
                "permessage-deflate; client_max_window_bits=9");
    want_answer("permessage-deflate; bogus, permessage-deflate; server_max_window_bits=11",
                "permessage-deflate; server_max_window_bits=11");
    want_answer("permessage-deflate; x=\"a,b\", permessage-deflate",
                "permessage-deflate");
    /* declined: RFC 7692 7.1 */
    want_answer("permessage-deflate; server_max_window_bits", "");
    want_answer("permessage-deflate; server_max_window_bits=16", "");
    want_answer("permessage-deflate; server_max_window_bits=7", "");
    want_answer("permessage-deflate; client_max_window_bits=08", "");
    want_answer("permessage-deflate; server_no_context_takeover; server_no_context_takeover", "");
    want_answer("permessage-deflate; client_no_context_takeover=1", "");
    want_answer("permessage-deflate; client_max_window_bits; client_max_window_bits", "");
    want_answer("permessage-deflatex", "");
    want_answer("", "");
    /* every header of the request, in order */
    answer(two, 2, out, sizeof(out));
    assert_string_equal(out, "permessage-deflate");

    /* what the session then runs on */
    assert_int_equal(tt_ws_extensions(ans, strlen(ans), &d), 0);
    assert_true(d.on && d.server_no_context_takeover);
    assert_int_equal(d.server_max_window_bits, 10);
    assert_int_equal(d.client_max_window_bits, 15);
}

static void test_handshake_checks(void **state)
{
    char m[64];
    (void)state;

    assert_true(key_ok("dGhlIHNhbXBsZSBub25jZQ=="));
    assert_false(key_ok(NULL));
    assert_false(key_ok("dGhlIHNhbXBsZSBub25jZQ="));     /* 23 */
    assert_false(key_ok("dGhlIHNhbXBsZSBub25jZQ=x"));    /* not 16 bytes */
    assert_false(key_ok("dGhlIHNhbXBsZS!ub25jZQ=="));    /* not base64 */
    assert_true(has_token("keep-alive, Upgrade", "upgrade"));
    assert_true(has_token(" upgrade ", "upgrade"));
    assert_false(has_token("upgrades", "upgrade"));
    assert_false(has_token("", "upgrade"));

    snprintf(m, sizeof(m), "x");
    query_model("/v1/realtime", m, sizeof(m));
    assert_string_equal(m, "x");
    query_model("/v1/realtime?model=gpt-realtime", m, sizeof(m));
    assert_string_equal(m, "gpt-realtime");
    query_model("/v1/realtime?a=1&model=m2&b=2", m, sizeof(m));
    assert_string_equal(m, "m2");
    snprintf(m, sizeof(m), "x");
    query_model("/v1/realtime?model=&b=2", m, sizeof(m));
    assert_string_equal(m, "x");
}

static double num(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItem(o, a);
    if (b)
        v = cJSON_GetObjectItem(v, b);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_realtime_usage(void **state)
{
    struct sim_opts o;
    struct sim_gen g;
    cJSON *u;
    (void)state;

    opts_default(&o);
    o.tokens = 6;
    o.prompt_tokens = 30;
    o.input_audio_tokens = 12;
    o.cached_tokens = 25;
    o.audio_tokens = 40;
    memset(&g, 0, sizeof(g));
    g.o = &o;
    g.audio = 1;
    g.a_done = 6;
    g.au_done = 3;          /* half the audio went out (a cancel) */
    u = rt_usage(&g);
    assert_int_equal(num(u, "output_tokens", NULL), 6 + 20);
    assert_int_equal(num(u, "total_tokens", NULL), 30 + 26);
    assert_int_equal(num(u, "input_token_details", "text_tokens"), 18);
    assert_int_equal(num(u, "input_token_details", "audio_tokens"), 12);
    assert_int_equal(num(u, "input_token_details", "cached_tokens"), 25);
    assert_int_equal(num(cJSON_GetObjectItem(u, "input_token_details"),
                         "cached_tokens_details", "text_tokens"), 18);
    assert_int_equal(num(cJSON_GetObjectItem(u, "input_token_details"),
                         "cached_tokens_details", "audio_tokens"), 7);
    assert_int_equal(num(u, "output_token_details", "audio_tokens"), 20);
    cJSON_Delete(u);

    /* audio_tokens unset: one per answer token; text only: none; beta:
     * no GA-only fields; more audio input than input is clamped */
    o.audio_tokens = -1;
    o.input_audio_tokens = 99;
    g.au_done = 6;
    g.beta = 1;
    u = rt_usage(&g);
    assert_int_equal(num(u, "output_token_details", "audio_tokens"), 6);
    assert_int_equal(num(u, "input_token_details", "audio_tokens"), 30);
    assert_int_equal(num(u, "input_token_details", "text_tokens"), 0);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(u, "input_token_details"),
                                    "cached_tokens_details"));
    cJSON_Delete(u);
    g.audio = 0;
    g.r_done = 4;           /* silent reasoning counts as text */
    u = rt_usage(&g);
    assert_int_equal(num(u, "output_token_details", "audio_tokens"), 0);
    assert_int_equal(num(u, "output_token_details", "text_tokens"), 10);
    cJSON_Delete(u);
}

static void test_audio_track_schedule(void **state)
{
    struct sim_resp r;
    const uint64_t MS = 1000000;
    (void)state;

    memset(&r, 0, sizeof(r));
    opts_default(&r.o);
    r.o.gap_ms = 10;
    r.r_events = 2;          /* two silent reasoning events first */
    r.ev_total = 5;          /* then three answer events */
    r.au_total = 3;          /* one audio event per answer event */
    r.t_first = 100 * MS;
    r.t_afirst = 100 * MS;   /* audio_ttft_ms = ttft_ms */
    assert_int_equal(next_text(&r), 100 * MS);
    assert_int_equal(next_audio(&r), 120 * MS);   /* with answer event 0 */
    r.ev_sent = 2;
    assert_int_equal(next_text(&r), 120 * MS);    /* a tie: text first */
    r.ev_sent = 5;
    r.au_sent = 3;
    assert_true(next_text(&r) == UINT64_MAX && next_audio(&r) == UINT64_MAX);

    r.t_afirst = 300 * MS;   /* audio late: its own start, the same gap */
    r.au_sent = 1;
    assert_int_equal(next_audio(&r), 330 * MS);
}

static void test_ws_options(void **state)
{
    struct sim_opts o;
    char err[256];
    cJSON *j;
    (void)state;

    opts_default(&o);
    assert_int_equal(o.audio_ttft_ms, -1);
    assert_int_equal(o.audio_tokens, -1);
    assert_int_equal(o.beta, -1);
    assert_int_equal(o.input_audio_tokens, 0);
    j = cJSON_Parse("{\"audio_ttft_ms\":5,\"audio_tokens\":9,\"beta\":true,"
                    "\"input_audio_tokens\":3}");
    assert_int_equal(opts_parse(&o, j, err, sizeof(err)), 0);
    assert_int_equal(o.audio_ttft_ms, 5);
    assert_int_equal(o.audio_tokens, 9);
    assert_int_equal(o.beta, 1);
    assert_int_equal(o.input_audio_tokens, 3);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"beta\":1}");
    assert_int_equal(opts_parse(&o, j, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "sim.beta"));
    cJSON_Delete(j);
}

static void test_take_sim(void **state)
{
    cJSON *msg, *sim;
    char err[128];
    (void)state;

    /* top-level "sim" first, detached from the event */
    msg = cJSON_Parse("{\"sim\":{\"tokens\":2},\"metadata\":{\"sim\":\"{\\\"tokens\\\":3}\"}}");
    assert_int_equal(take_sim(msg, cJSON_GetObjectItem(msg, "metadata"), &sim,
                              err, sizeof(err)), 0);
    assert_int_equal(cJSON_GetObjectItem(sim, "tokens")->valueint, 2);
    assert_null(cJSON_GetObjectItem(msg, "sim"));
    cJSON_Delete(sim);
    /* then metadata.sim, a JSON object in a string */
    assert_int_equal(take_sim(msg, cJSON_GetObjectItem(msg, "metadata"), &sim,
                              err, sizeof(err)), 0);
    assert_int_equal(cJSON_GetObjectItem(sim, "tokens")->valueint, 3);
    cJSON_Delete(sim);
    cJSON_Delete(msg);
    /* neither */
    msg = cJSON_Parse("{\"metadata\":{\"a\":\"b\"}}");
    assert_int_equal(take_sim(msg, cJSON_GetObjectItem(msg, "metadata"), &sim,
                              err, sizeof(err)), 0);
    assert_null(sim);
    cJSON_Delete(msg);
    /* not an object in a string */
    msg = cJSON_Parse("{\"metadata\":{\"sim\":\"[1]\"}}");
    assert_int_equal(take_sim(msg, cJSON_GetObjectItem(msg, "metadata"), &sim,
                              err, sizeof(err)), -1);
    assert_null(sim);
    cJSON_Delete(msg);
    msg = cJSON_Parse("{\"metadata\":{\"sim\":{\"tokens\":1}}}");
    assert_int_equal(take_sim(msg, cJSON_GetObjectItem(msg, "metadata"), &sim,
                              err, sizeof(err)), -1);
    cJSON_Delete(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offers),
        cmocka_unit_test(test_handshake_checks),
        cmocka_unit_test(test_realtime_usage),
        cmocka_unit_test(test_audio_track_schedule),
        cmocka_unit_test(test_ws_options),
        cmocka_unit_test(test_take_sim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
