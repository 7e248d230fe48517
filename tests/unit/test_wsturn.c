/*
 * WebSocket turns (proxy/http/wsturn.c): frames written by proxy/decode/ws.c's writer
 * (compressed or not), fed as the tunnel would, cut at every byte; the turns
 * that come out, their t0, their events and their ends.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/fixture.h"

#include <event2/buffer.h>

#include "proxy/http/httphead.h"
#include "proxy/decode/stream.h"
#include "proxy/decode/ws.h"
#include "proxy/http/wsturn.h"

#define MAXT 8

struct seen {
    int begun;
    int n;
    struct tt_request t[MAXT];      /* copies of the recorded turns */
};

static void on_begin(void *arg, struct tt_request *turn)
{
    struct seen *s = arg;
    (void)turn;
    s->begun++;
}

static void on_done(void *arg, struct tt_request *turn)
{
    struct seen *s = arg;
    if (s->n < MAXT) {
        tt_request_copy(&s->t[s->n], turn);
        s->t[s->n++].n_token_ts = turn->n_token_ts;     /* the count, not the array */
    }
}

static const struct tt_ws_sess_ops ops = { on_begin, on_done };

/* a 101 head with <ext> as Sec-WebSocket-Extensions (NULL: none) */
static void head_101(struct tt_head *h, const char *ext)
{
    tt_head_init(h, 1024, 16);
    tt_head_target(h, "Switching Protocols", 19);
    tt_head_field(h, "Upgrade", 7);
    tt_head_value(h, "websocket", 9);
    if (ext != NULL) {
        tt_head_field(h, "Sec-WebSocket-Extensions", 24);
        tt_head_value(h, ext, strlen(ext));
    }
}

struct rig {
    struct tt_request sess;
    struct tt_head h;
    struct tt_ws_sess *ws;
    struct seen seen;
    struct tt_ws_deflater *cdef, *sdef;     /* the peers' compressors */
};

static void rig_init(struct rig *g, enum tt_api api, const char *ext)
{
    memset(g, 0, sizeof(*g));
    tt_request_init(&g->sess);
    strcpy(g->sess.request_id, "sess1");
    strcpy(g->sess.path, "/v1/responses");
    strcpy(g->sess.method, "GET");
    g->sess.status = 101;
    g->sess.api = api;
    head_101(&g->h, ext);
    g->ws = tt_ws_sess_new(&g->sess, api, &g->h, 1 << 20, TT_THINK_AUTO, &ops, &g->seen);
    assert_non_null(g->ws);
    if (ext != NULL) {
        g->cdef = tt_ws_deflater_new(15, 0);
        g->sdef = tt_ws_deflater_new(15, 0);
    }
}

static void rig_free(struct rig *g)
{
    tt_ws_sess_free(g->ws);
    for (int i = 0; i < g->seen.n; i++)
        tt_request_reset(&g->seen.t[i]);
    tt_request_reset(&g->sess);
    tt_head_free(&g->h);
    tt_ws_deflater_free(g->cdef);
    tt_ws_deflater_free(g->sdef);
}

/* one message each way, fed whole at <now> */
static void client_says(struct rig *g, const char *json, uint64_t now)
{
    static const unsigned char key[4] = { 1, 2, 3, 4 };
    struct evbuffer *b = evbuffer_new();

    assert_int_equal(tt_ws_write_msg(b, TT_WS_TEXT, json, strlen(json), g->cdef, key), 0);
    tt_ws_sess_feed(g->ws, 1, b, evbuffer_get_length(b), now);
    evbuffer_free(b);
}

static void server_says(struct rig *g, const char *json, uint64_t now)
{
    struct evbuffer *b = evbuffer_new();

    assert_int_equal(tt_ws_write_msg(b, TT_WS_TEXT, json, strlen(json), g->sdef, NULL), 0);
    tt_ws_sess_feed(g->ws, 0, b, evbuffer_get_length(b), now);
    evbuffer_free(b);
}

#define MS 1000000ull

static void responses_turn(struct rig *g, uint64_t t0, int ntok)
{
    char ev[256];

    client_says(g, "{\"type\":\"response.create\",\"model\":\"m1\",\"input\":\"hi\"}", t0);
    server_says(g, "{\"type\":\"response.created\",\"sequence_number\":0,"
                   "\"response\":{\"id\":\"resp_1\",\"model\":\"m1\",\"status\":\"in_progress\"}}",
                t0 + 1 * MS);
    for (int i = 0; i < ntok; i++) {
        snprintf(ev, sizeof(ev), "{\"type\":\"response.output_text.delta\",\"sequence_number\":%d,"
                 "\"delta\":\"tok%d \"}", i + 1, i);
        server_says(g, ev, t0 + (uint64_t)(10 + i) * MS);
    }
    snprintf(ev, sizeof(ev), "{\"type\":\"response.completed\",\"sequence_number\":%d,"
             "\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":"
             "{\"input_tokens\":7,\"output_tokens\":%d}}}", ntok + 1, ntok);
    server_says(g, ev, t0 + (uint64_t)(10 + ntok) * MS);
}

static void check_turn(const struct tt_request *t, unsigned turn, uint64_t t0, int ntok)
{
    assert_int_equal(t->ws.on, 1);
    assert_int_equal(t->ws.session, 0);
    assert_int_equal(t->ws.turn, turn);
    assert_string_equal(t->ws.session_id, "sess1");
    assert_int_equal(t->t0, t0);
    assert_int_equal(t->ts[TT_TS_FIRST_TOKEN], t0 + 10 * MS);
    assert_int_equal(t->s.token_events, (unsigned)ntok);
    assert_int_equal(t->s.usage_output, ntok);
    assert_int_equal(t->s.usage_input, 7);
    assert_int_equal(t->s.terminal, 1);
    assert_null(t->err_type);
    assert_string_equal(t->s.response_id, "resp_1");
    assert_string_equal(t->model, "m1");
    assert_int_equal(t->api, TT_API_OPENAI_RESPONSES);
}

static void test_three_turns(void **state)
{
    (void)state;
    for (int comp = 0; comp < 2; comp++) {
        struct rig g;
        rig_init(&g, TT_API_OPENAI_RESPONSES, comp ? "permessage-deflate" : NULL);
        for (int i = 0; i < 3; i++)
            responses_turn(&g, (uint64_t)(1000 + 100 * i) * MS, 3 + i);
        assert_int_equal(g.seen.begun, 3);
        assert_int_equal(g.seen.n, 3);
        for (int i = 0; i < 3; i++)
            check_turn(&g.seen.t[i], (unsigned)i + 1, (uint64_t)(1000 + 100 * i) * MS, 3 + i);
        assert_int_equal(g.sess.ws.turn, 3);
        assert_int_equal(g.sess.ws.msgs_in, 3);
        assert_null(g.sess.ws.stopped);
        rig_free(&g);
    }
}

/* the same bytes cut at every boundary give the same turn */
static void test_every_split(void **state)
{
    static const unsigned char key[4] = { 9, 8, 7, 6 };
    const char *cm = "{\"type\":\"response.create\",\"model\":\"m1\"}";
    const char *sm[] = {
        "{\"type\":\"response.output_text.delta\",\"delta\":\"hello \"}",
        "{\"type\":\"response.output_text.delta\",\"delta\":\"world\"}",
        ("{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_9\",\"status\":\"completed\","
         "\"usage\":{\"input_tokens\":3,\"output_tokens\":2}}}"),
    };
    (void)state;

    for (int comp = 0; comp < 2; comp++) {
        struct tt_ws_deflater *cd = comp ? tt_ws_deflater_new(15, 0) : NULL;
        struct tt_ws_deflater *sd = comp ? tt_ws_deflater_new(15, 0) : NULL;
        struct evbuffer *cb = evbuffer_new(), *sb = evbuffer_new();
        size_t clen, slen;
        unsigned char *cbytes, *sbytes;

        assert_int_equal(tt_ws_write_msg(cb, TT_WS_TEXT, cm, strlen(cm), cd, key), 0);
        for (int i = 0; i < 3; i++)
            assert_int_equal(tt_ws_write_msg(sb, TT_WS_TEXT, sm[i], strlen(sm[i]), sd, NULL), 0);
        clen = evbuffer_get_length(cb);
        slen = evbuffer_get_length(sb);
        cbytes = malloc(clen);
        sbytes = malloc(slen);
        evbuffer_remove(cb, cbytes, clen);
        evbuffer_remove(sb, sbytes, slen);

        for (size_t cut = 1; cut < slen; cut++) {
            struct rig g;
            struct evbuffer *b = evbuffer_new();

            rig_init(&g, TT_API_OPENAI_RESPONSES, comp ? "permessage-deflate" : NULL);
            for (size_t k = 0; k < clen; k++) {      /* the client's, byte by byte */
                evbuffer_add(b, cbytes + k, 1);
                tt_ws_sess_feed(g.ws, 1, b, 1, 5 * MS + k);
                evbuffer_drain(b, 1);
            }
            evbuffer_add(b, sbytes, cut);
            tt_ws_sess_feed(g.ws, 0, b, cut, 20 * MS);
            evbuffer_drain(b, cut);
            evbuffer_add(b, sbytes + cut, slen - cut);
            tt_ws_sess_feed(g.ws, 0, b, slen - cut, 30 * MS);
            evbuffer_free(b);

            assert_int_equal(g.seen.n, 1);
            assert_int_equal(g.seen.t[0].t0, 5 * MS + clen - 1);    /* the message's last byte */
            assert_int_equal(g.seen.t[0].s.token_events, 2);
            assert_int_equal(g.seen.t[0].s.usage_output, 2);
            assert_string_equal(g.seen.t[0].s.response_id, "resp_9");
            rig_free(&g);
        }
        free(cbytes);
        free(sbytes);
        evbuffer_free(cb);
        evbuffer_free(sb);
        tt_ws_deflater_free(cd);
        tt_ws_deflater_free(sd);
    }
}

/* a create while a turn runs waits, with its own t0 */
static void test_queued_create(void **state)
{
    struct rig g;
    (void)state;

    rig_init(&g, TT_API_OPENAI_RESPONSES, NULL);
    client_says(&g, "{\"type\":\"response.create\",\"model\":\"a\"}", 100 * MS);
    client_says(&g, "{\"type\":\"response.create\",\"model\":\"b\"}", 105 * MS);
    server_says(&g, "{\"type\":\"response.output_text.delta\",\"delta\":\"x\"}", 110 * MS);
    server_says(&g, "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}",
                120 * MS);
    server_says(&g, "{\"type\":\"response.output_text.delta\",\"delta\":\"y\"}", 130 * MS);
    server_says(&g, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
                    "\"message\":\"bad\"}}", 140 * MS);
    assert_int_equal(g.seen.n, 2);
    assert_int_equal(g.seen.t[0].t0, 100 * MS);
    assert_string_equal(g.seen.t[0].model, "a");
    assert_int_equal(g.seen.t[1].t0, 105 * MS);
    assert_string_equal(g.seen.t[1].model, "b");
    assert_int_equal(g.seen.t[1].ts[TT_TS_FIRST_TOKEN], 130 * MS);
    assert_int_equal(g.seen.t[1].s.error, 1);
    assert_string_equal(g.seen.t[1].s.error_type, "invalid_request_error");
    rig_free(&g);
}

/* the client leaves mid-turn: cancelled; the server does: truncated */
static void test_tunnel_closes(void **state)
{
    (void)state;
    for (int client = 0; client < 2; client++) {
        struct rig g;
        rig_init(&g, TT_API_OPENAI_RESPONSES, NULL);
        client_says(&g, "{\"type\":\"response.create\"}", 100 * MS);
        server_says(&g, "{\"type\":\"response.output_text.delta\",\"delta\":\"x\"}", 110 * MS);
        tt_ws_sess_end(g.ws, client, 150 * MS);
        assert_int_equal(g.seen.n, 1);
        assert_int_equal(g.seen.t[0].cancelled, client);
        assert_string_equal(g.seen.t[0].err_type, client ? "cancelled" : "truncated");
        assert_int_equal(g.seen.t[0].ts[TT_TS_RESPONSE_COMPLETE], 150 * MS);
        rig_free(&g);
    }
}

/* a close frame mid-turn ends it: the client's cancels, the server's truncates */
static void test_close_frame_mid_turn(void **state)
{
    static const unsigned char key[4] = { 1, 2, 3, 4 };
    (void)state;
    for (int client = 0; client < 2; client++) {
        struct rig g;
        struct evbuffer *b = evbuffer_new();
        rig_init(&g, TT_API_OPENAI_RESPONSES, NULL);
        client_says(&g, "{\"type\":\"response.create\"}", 100 * MS);
        server_says(&g, "{\"type\":\"response.output_text.delta\",\"delta\":\"x\"}", 110 * MS);
        assert_int_equal(tt_ws_write_msg(b, TT_WS_CLOSE, "\x03\xe8", 2, NULL,
                                         client ? key : NULL), 0);
        tt_ws_sess_feed(g.ws, client, b, evbuffer_get_length(b), 120 * MS);
        assert_int_equal(g.seen.n, 1);
        assert_int_equal(g.seen.t[0].cancelled, client);
        assert_string_equal(g.seen.t[0].err_type, client ? "cancelled" : "truncated");
        assert_int_equal(g.seen.t[0].ts[TT_TS_RESPONSE_COMPLETE], 120 * MS);
        tt_ws_sess_end(g.ws, !client, 130 * MS);    /* nothing more to record */
        assert_int_equal(g.seen.n, 1);
        evbuffer_free(b);
        rig_free(&g);
    }
}

/* a broken frame stream: forwarded elsewhere, decoding stops, the turn fails */
static void test_broken_frames(void **state)
{
    struct rig g;
    struct evbuffer *b = evbuffer_new();
    static const unsigned char unmasked[] = { 0x81, 0x02, '{', '}' };
    (void)state;

    rig_init(&g, TT_API_OPENAI_RESPONSES, NULL);
    client_says(&g, "{\"type\":\"response.create\"}", 100 * MS);
    evbuffer_add(b, unmasked, sizeof(unmasked));         /* a client frame must be masked */
    tt_ws_sess_feed(g.ws, 1, b, sizeof(unmasked), 120 * MS);
    assert_int_equal(evbuffer_get_length(b), sizeof(unmasked));     /* not consumed */
    assert_int_equal(g.seen.n, 1);
    assert_string_equal(g.seen.t[0].err_type, "stream_parse_error");
    assert_non_null(g.sess.ws.stopped);
    assert_string_equal(g.sess.err_type, "stream_parse_error");
    client_says(&g, "{\"type\":\"response.create\"}", 200 * MS);    /* no more turns */
    assert_int_equal(g.seen.begun, 1);
    evbuffer_free(b);
    rig_free(&g);
}

/* Realtime: session model, audio and transcript, usage details, time to first audio */
static void test_realtime(void **state)
{
    struct rig g;
    (void)state;

    rig_init(&g, TT_API_OPENAI_REALTIME, NULL);
    server_says(&g, "{\"type\":\"session.created\",\"session\":{\"model\":\"gpt-realtime\","
                    "\"audio\":{\"input\":{\"turn_detection\":null}}}}", 1 * MS);
    client_says(&g, "{\"type\":\"response.create\",\"response\":{}}", 100 * MS);
    server_says(&g, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_r\"}}", 101 * MS);
    server_says(&g, "{\"type\":\"response.output_audio_transcript.delta\",\"delta\":\"Hel\"}",
                130 * MS);
    server_says(&g, "{\"type\":\"response.output_audio.delta\",\"delta\":\"AAAA\"}", 140 * MS);
    server_says(&g, "{\"type\":\"response.output_audio_transcript.delta\",\"delta\":\"lo\"}",
                150 * MS);
    server_says(&g, "{\"type\":\"response.done\",\"response\":{\"id\":\"resp_r\",\"status\":"
                    "\"completed\",\"usage\":{\"total_tokens\":30,\"input_tokens\":10,"
                    "\"output_tokens\":20,\"input_token_details\":{\"text_tokens\":4,"
                    "\"audio_tokens\":6,\"cached_tokens\":2},\"output_token_details\":"
                    "{\"text_tokens\":5,\"audio_tokens\":15}}}}", 160 * MS);
    /* a cancelled one */
    client_says(&g, "{\"type\":\"response.create\"}", 200 * MS);
    server_says(&g, "{\"type\":\"response.audio.delta\",\"delta\":\"AAAA\"}", 210 * MS);
    client_says(&g, "{\"type\":\"response.cancel\"}", 215 * MS);
    server_says(&g, "{\"type\":\"response.done\",\"response\":{\"status\":\"cancelled\","
                    "\"status_details\":{\"type\":\"cancelled\",\"reason\":\"client_cancelled\"}}}",
                220 * MS);
    assert_int_equal(g.seen.n, 2);
    struct tt_request *t = &g.seen.t[0];
    assert_string_equal(t->model, "gpt-realtime");
    assert_int_equal(t->api, TT_API_OPENAI_REALTIME);
    assert_int_equal(t->ts[TT_TS_FIRST_TOKEN], 130 * MS);
    assert_int_equal(t->ts[TT_TS_FIRST_AUDIO], 140 * MS);
    assert_int_equal(t->s.token_events, 3);
    assert_int_equal(t->s.usage_input, 10);
    assert_int_equal(t->s.usage_output, 20);
    assert_int_equal(t->s.usage_cached, 2);
    assert_int_equal(t->s.usage_input_audio, 6);
    assert_int_equal(t->s.usage_output_audio, 15);
    assert_int_equal(t->s.usage_output_text, 5);
    assert_null(t->err_type);
    t = &g.seen.t[1];
    assert_int_equal(t->cancelled, 1);
    assert_string_equal(t->err_type, "cancelled");
    assert_int_equal(t->ts[TT_TS_FIRST_AUDIO], 210 * MS);
    rig_free(&g);
}

/* Realtime with server turn detection: the server's commit begins the turn */
static void test_realtime_vad(void **state)
{
    struct rig g;
    (void)state;

    rig_init(&g, TT_API_OPENAI_REALTIME, NULL);
    server_says(&g, "{\"type\":\"session.created\",\"session\":{\"model\":\"m\","
                    "\"turn_detection\":{\"type\":\"server_vad\"}}}", 1 * MS);
    server_says(&g, "{\"type\":\"input_audio_buffer.committed\",\"item_id\":\"i1\"}", 50 * MS);
    server_says(&g, "{\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}", 60 * MS);
    server_says(&g, "{\"type\":\"response.audio_transcript.delta\",\"delta\":\"a\"}", 90 * MS);
    server_says(&g, "{\"type\":\"response.done\",\"response\":{\"status\":\"completed\"}}",
                95 * MS);
    assert_int_equal(g.seen.n, 1);
    assert_int_equal(g.seen.t[0].t0, 50 * MS);
    assert_int_equal(g.seen.t[0].ts[TT_TS_FIRST_TOKEN], 90 * MS);
    rig_free(&g);
}

/*
 * The captured Responses events (one JSON object per line) decode to the
 * same facts as a turn over WebSocket, compressed or not, as they do as an
 * SSE stream: one decoder, one answer.
 */
static void test_fixture_same_as_sse(void **state)
{
    static const char *const files[] = {
        "openai-responses-reasoning_summary-function_call.jsonl",
        "openai-responses-failed.jsonl",
    };
    (void)state;

    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        size_t len;
        char *buf = read_fixture(files[f], &len);
        if (buf == NULL) {
            printf("SKIP: fixture %s not found in %s (set TT_FIXTURES)\n", files[f],
                   fixture_dir());
            skip();
        }
        for (int comp = 0; comp < 2; comp++) {
            struct tt_request sse;
            struct tt_stream *st;
            struct rig g;
            uint64_t now = 10 * MS;

            tt_request_init(&sse);
            sse.t0 = 1 * MS;
            st = tt_stream_new(&sse, TT_API_OPENAI_RESPONSES, "text/event-stream", TT_THINK_AUTO);
            rig_init(&g, TT_API_OPENAI_RESPONSES, comp ? "permessage-deflate" : NULL);
            client_says(&g, "{\"type\":\"response.create\"}", 1 * MS);
            for (char *line = buf, *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (nl == NULL)
                    nl = line + strlen(line) - 1;
                size_t n = (size_t)(nl - line) + (*nl == '\n' ? 0 : 1);
                if (n == 0)
                    continue;
                char *ev = malloc(n + 16);
                memcpy(ev, "data: ", 6);
                memcpy(ev + 6, line, n);
                memcpy(ev + 6 + n, "\n\n", 2);
                tt_stream_feed(st, ev, n + 8, now);
                ev[6 + n] = '\0';
                server_says(&g, ev + 6, now);
                free(ev);
                now += MS;
                if (*nl == '\0')
                    break;
            }
            tt_stream_end(st, 1, now);
            assert_int_equal(g.seen.n, 1);
            struct tt_request *t = &g.seen.t[0];
            assert_true(sse.s.events > 0);
            assert_int_equal(t->s.events, sse.s.events);
            assert_int_equal(t->s.token_events, sse.s.token_events);
            assert_int_equal(t->s.reasoning_events, sse.s.reasoning_events);
            assert_int_equal(t->s.answer_events, sse.s.answer_events);
            assert_int_equal(t->s.usage_input, sse.s.usage_input);
            assert_int_equal(t->s.usage_output, sse.s.usage_output);
            assert_int_equal(t->s.usage_reasoning, sse.s.usage_reasoning);
            assert_int_equal(t->s.error, sse.s.error);
            assert_int_equal(t->s.terminal, sse.s.terminal);
            assert_string_equal(t->s.finish_reason, sse.s.finish_reason);
            assert_string_equal(t->s.response_id, sse.s.response_id);
            assert_string_equal(t->s.model, sse.s.model);
            assert_int_equal(t->ts[TT_TS_FIRST_TOKEN], sse.ts[TT_TS_FIRST_TOKEN]);
            assert_int_equal(t->ts[TT_TS_FIRST_OUTPUT_TOKEN], sse.ts[TT_TS_FIRST_OUTPUT_TOKEN]);
            assert_int_equal(t->n_token_ts, sse.n_token_ts);
            tt_stream_free(st);
            tt_request_reset(&sse);
            rig_free(&g);
        }
        free(buf);
    }
}

/* the type read without a tree only when it opens the message plainly:
 * other shapes still go to the parser, and only creates open turns */
static void test_create_shapes(void **state)
{
    struct rig g;
    (void)state;

    rig_init(&g, TT_API_OPENAI_REALTIME, NULL);
    client_says(&g, "{\"type\":\"input_audio_buffer.append\",\"audio\":\"AAAA\"}", 10 * MS);
    client_says(&g, "{\"type\":\"response.create.not\"}", 11 * MS);
    client_says(&g, " { \"type\" : \"session.update\", \"session\":{}}", 12 * MS);
    assert_int_equal(g.seen.begun, 0);
    client_says(&g, "{\"event_id\":\"e1\",\"type\":\"response.create\"}", 20 * MS);
    server_says(&g, "{\"type\":\"response.done\",\"response\":{\"status\":\"completed\"}}", 30 * MS);
    client_says(&g, "{\"type\":\"response.cre\\u0061te\"}", 40 * MS);
    server_says(&g, "{\"type\":\"response.done\",\"response\":{\"status\":\"completed\"}}", 50 * MS);
    client_says(&g, " {\n\"type\": \"response.create\"}", 60 * MS);
    server_says(&g, "{\"type\":\"response.done\",\"response\":{\"status\":\"completed\"}}", 70 * MS);
    assert_int_equal(g.seen.n, 3);
    assert_int_equal(g.seen.t[0].t0, 20 * MS);
    assert_int_equal(g.seen.t[1].t0, 40 * MS);
    assert_int_equal(g.seen.t[2].t0, 60 * MS);
    rig_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_turns),
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_queued_create),
        cmocka_unit_test(test_tunnel_closes),
        cmocka_unit_test(test_close_frame_mid_turn),
        cmocka_unit_test(test_broken_frames),
        cmocka_unit_test(test_realtime),
        cmocka_unit_test(test_realtime_vad),
        cmocka_unit_test(test_create_shapes),
        cmocka_unit_test(test_fixture_same_as_sse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
