/*
 * WebSocket sessions measured turn by turn (see wsturn.h for the picture).
 *
 * Turn state: IDLE (no turn) <-> OPEN (s->turn, s->st).  A turn opens on a
 * client response.create (or a queued one when the turn before ends, or,
 * with Realtime's server turn detection, input_audio_buffer.committed), and
 * ends on its terminal event or error, the tunnel's close, or a broken
 * frame stream.  Messages outside a turn are read only for what begins one
 * and for the Realtime session's model and turn detection.
 */
#include "proxy/http/wsturn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "proxy/decode/decode.h"
#include "proxy/http/httphead.h"
#include "proxy/decode/stream.h"
#include "proxy/decode/ws.h"
#include "proxy/base/strcopy.h"

/* a response.create that came while a turn ran: its t0 and model */
struct ws_pending {
    uint64_t t0;
    char     model[64];
};

struct tt_ws_sess {
    struct tt_ws_reader   cr, sr;       /* the client's frames, the server's */
    struct tt_request    *sess;         /* borrowed: the session's record */
    struct tt_request    *turn;         /* owned: the open turn, or NULL */
    struct tt_stream     *st;           /* owned: its decoder */
    enum tt_api           api;
    enum tt_think_mode    think;
    uint64_t              now;          /* arrival of the bytes being read */
    int                   from_client;  /* the direction being read */
    struct ws_pending     pending[TT_WS_PENDING_MAX];  /* creates that wait */
    unsigned              npending;
    unsigned              vad:1;        /* Realtime: the server detects turns */
    unsigned              stopped:1;
    char                  model[128];   /* Realtime: the session's model */
    const struct tt_ws_sess_ops *ops;
    void                 *arg;
};

enum tt_api tt_ws_session_api(enum tt_api api, const struct tt_head *rsh)
{
    if (api != TT_API_OPENAI_RESPONSES && api != TT_API_OPENAI_REALTIME)
        return TT_API_OTHER;
    if (rsh == NULL || !tt_head_has_token(rsh, "upgrade", "websocket"))
        return TT_API_OTHER;
    return api;
}

/* ------------------------------------------------------------------ */
/* turns                                                               */

static void turn_open(struct tt_ws_sess *s, uint64_t t0, const char *model)
{
    struct tt_request *sess = s->sess, *t;

    if (s->turn != NULL || s->stopped)
        return;
    t = malloc(sizeof(*t));
    if (t == NULL)
        return;
    tt_request_init(t);
    sess->ws.turn++;
    t->t0 = t0;
    t->start_wall_ns = tt_now_wall() - (int64_t)(tt_now_mono() - t0);
    t->ts[TT_TS_REQUEST_COMPLETE] = t0;
    t->ts[TT_TS_REQUEST_SENT] = t0;     /* forwarded as it came */
    t->api = s->api;
    t->stream = 1;
    t->status = sess->status;
    t->upstream_name = sess->upstream_name;
    t->target_idx = sess->target_idx;
    t->upstream_reused = sess->upstream_reused;
    tt_copy_str(t->client, sizeof(t->client), sess->client);
    tt_copy_str(t->method, sizeof(t->method), sess->method);
    tt_copy_str(t->path, sizeof(t->path), sess->path);
    tt_copy_str(t->model, sizeof(t->model), model != NULL && model[0] ? model : s->model);
    snprintf(t->request_id, sizeof(t->request_id), "%.100s.%u", sess->request_id,
             (unsigned)sess->ws.turn);
    t->ws.on = 1;
    t->ws.turn = sess->ws.turn;
    tt_copy_str(t->ws.session_id, sizeof(t->ws.session_id), sess->ws.session_id);
    s->st = tt_stream_new_messages(t, s->api, s->think);
    if (s->st == NULL) {
        tt_request_reset(t);
        free(t);
        return;
    }
    s->turn = t;
    s->ops->begin(s->arg, t);
}

/* the open turn is over: recorded, and the next queued one begins */
static void turn_close(struct tt_ws_sess *s, int complete)
{
    struct tt_request *t = s->turn;

    if (t == NULL)
        return;
    tt_stream_end(s->st, complete, s->now);
    tt_stream_free(s->st);
    s->st = NULL;
    s->turn = NULL;
    if (t->ts[TT_TS_RESPONSE_COMPLETE] == 0)
        t->ts[TT_TS_RESPONSE_COMPLETE] = s->now;
    t->ended = s->now;
    s->ops->done(s->arg, t);
    tt_request_reset(t);
    free(t);
    if (s->npending > 0 && !s->stopped) {
        struct ws_pending next = s->pending[0];

        s->npending--;
        memmove(s->pending, s->pending + 1, s->npending * sizeof(s->pending[0]));
        turn_open(s, next.t0, next.model);
    }
}

static void turn_fail(struct tt_ws_sess *s, int code, const char *type, const char *why)
{
    if (s->turn == NULL)
        return;
    if (code == 499)
        s->turn->cancelled = 1;
    tt_request_set_error(s->turn, code, type, why);
    turn_close(s, 0);
}

/* ------------------------------------------------------------------ */
/* messages                                                            */

static int type_is(const char *type, const char *want)
{
    return type != NULL && strcmp(type, want) == 0;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * A message that opens with its type ({"type":"x",...: every event the
 * OpenAI APIs and their SDKs send) and whose type is none of <wanted>
 * (NULL-terminated) needs no tree: 1 then.  0 when the type is wanted or
 * not read there (the caller parses the message).  Realtime clients send
 * audio in input_audio_buffer.append messages of tens of KiB, many a
 * second; this keeps them out of the JSON parser.
 */
static int lead_type_other(const char *d, size_t len, const char *const *wanted)
{
    static const char key[] = "\"type\"";
    size_t i = 0, n, k;

    while (i < len && is_blank(d[i]))
        i++;
    if (i >= len || d[i++] != '{')
        return 0;
    while (i < len && is_blank(d[i]))
        i++;
    if (len - i < sizeof(key) - 1 || memcmp(d + i, key, sizeof(key) - 1) != 0)
        return 0;
    i += sizeof(key) - 1;
    while (i < len && is_blank(d[i]))
        i++;
    if (i >= len || d[i++] != ':')
        return 0;
    while (i < len && is_blank(d[i]))
        i++;
    if (i >= len || d[i++] != '"')
        return 0;
    for (n = 0; i + n < len && d[i + n] != '"'; n++)
        if (d[i + n] == '\\')
            return 0;                   /* an escape: let the parser read it */
    if (i + n >= len)
        return 0;
    for (k = 0; wanted[k] != NULL; k++)
        if (strlen(wanted[k]) == n && memcmp(wanted[k], d + i, n) == 0)
            return 0;
    return 1;
}

/* a client message: response.create begins a turn (or waits for one) */
static void client_msg(struct tt_ws_sess *s, const char *data, size_t len)
{
    static const char *const wanted[] = { "response.create", NULL };
    const cJSON *root;
    const char *type, *model;

    if (lead_type_other(data, len, wanted))
        return;
    root = tt_json_parse(data, len);
    type = tt_jstr(root, "type");
    if (!type_is(type, "response.create"))
        return;
    model = tt_jstr(root, "model");                 /* Responses */
    if (model == NULL)
        model = tt_jstr(tt_jget(root, "response"), "model");   /* Realtime */
    if (s->turn != NULL && s->turn->s.error)
        turn_close(s, 1);               /* an error without its terminal event */
    if (s->turn == NULL) {
        turn_open(s, s->now, model);
        return;
    }
    if (s->npending < TT_WS_PENDING_MAX) {
        s->pending[s->npending].t0 = s->now;
        tt_copy_str(s->pending[s->npending].model, sizeof(s->pending[0].model), model);
        s->npending++;
    }
}

/* Realtime's session object: its model and whether the server detects turns */
static void realtime_session(struct tt_ws_sess *s, const cJSON *sess)
{
    const cJSON *td;

    if (!cJSON_IsObject(sess))
        return;
    if (tt_jstr(sess, "model") != NULL)
        tt_copy_str(s->model, sizeof(s->model), tt_jstr(sess, "model"));
    td = tt_jget(sess, "turn_detection");                           /* beta */
    if (td == NULL)
        td = tt_jget(tt_jget(tt_jget(sess, "audio"), "input"), "turn_detection");
    if (td != NULL)
        s->vad = cJSON_IsObject(td);
}

/* a server message outside a turn: may begin one */
static void server_idle_msg(struct tt_ws_sess *s, const char *data, size_t len)
{
    static const char *const wanted[] = {
        "session.created", "session.updated", "input_audio_buffer.committed",
        "response.created", NULL
    };
    const cJSON *root;
    const char *type;

    if (lead_type_other(data, len, wanted))
        return;
    root = tt_json_parse(data, len);
    type = tt_jstr(root, "type");
    if (type == NULL)
        return;
    if (s->api == TT_API_OPENAI_REALTIME &&
        (type_is(type, "session.created") || type_is(type, "session.updated"))) {
        realtime_session(s, tt_jget(root, "session"));
    } else if (s->api == TT_API_OPENAI_REALTIME && s->vad &&
               type_is(type, "input_audio_buffer.committed")) {
        turn_open(s, s->now, NULL);     /* the server's turn detection */
    } else if (type_is(type, "response.created")) {
        /* a response nobody was seen asking for: its turn starts here */
        turn_open(s, s->now, NULL);
        if (s->turn != NULL)
            tt_stream_message(s->st, data, len, s->now);
    }
}

static void server_msg(struct tt_ws_sess *s, const char *data, size_t len)
{
    struct tt_request *t = s->turn;

    if (t == NULL) {
        server_idle_msg(s, data, len);
        return;
    }
    t->bytes_out += len;
    tt_stream_message(s->st, data, len, s->now);
    /* an error ends a turn whose response never began; after it began,
     * its terminal event (response.failed) follows, or the next create */
    if (t->s.terminal || (t->s.error && t->s.response_id[0] == '\0'))
        turn_close(s, 1);
}

static void on_msg(void *arg, const struct tt_ws_msg *m)
{
    struct tt_ws_sess *s = arg;
    struct tt_request *sess = s->sess;

    if (m->op == TT_WS_CLOSE) {
        /* a close frame mid-turn ends the turn: the client's abandons it */
        s->npending = 0;
        if (s->from_client)
            turn_fail(s, 499, "cancelled", "the client closed the WebSocket mid-turn");
        else
            turn_fail(s, 502, "truncated", "the server closed the WebSocket mid-turn");
        return;
    }
    if (m->op != TT_WS_TEXT && m->op != TT_WS_BINARY)
        return;                         /* ping, pong */
    if (s->from_client)
        sess->ws.msgs_in++;
    else
        sess->ws.msgs_out++;
    if (m->over) {
        sess->ws.overs++;
        if (s->turn != NULL)
            s->turn->s.parse_errors++;  /* an event not decoded */
        return;
    }
    if (m->op != TT_WS_TEXT)
        return;
    if (s->from_client) {
        if (s->turn != NULL)
            s->turn->bytes_in += m->len;
        client_msg(s, (const char *)m->data, m->len);
    } else {
        server_msg(s, (const char *)m->data, m->len);
    }
    if (m->len > 65536)
        tt_json_reset();                /* a large tree's overflow goes back */
}

/* ------------------------------------------------------------------ */
/* the session                                                         */

static void stop(struct tt_ws_sess *s, const char *why)
{
    if (s->stopped)
        return;
    s->stopped = 1;
    s->npending = 0;
    s->sess->ws.stopped = why;
    tt_request_set_error(s->sess, 502, "stream_parse_error", why);
    turn_fail(s, 502, "stream_parse_error", why);
}

struct tt_ws_sess *tt_ws_sess_new(struct tt_request *sess, enum tt_api api,
                                  const struct tt_head *rsh, size_t max_msg,
                                  enum tt_think_mode think,
                                  const struct tt_ws_sess_ops *ops, void *arg)
{
    struct tt_ws_sess *s = calloc(1, sizeof(*s));
    struct tt_ws_deflate d = { 0 };
    const char *ext;
    size_t len;
    int bad = 0;

    if (s == NULL)
        return NULL;
    s->sess = sess;
    s->api = api;
    s->think = think;
    s->ops = ops;
    s->arg = arg;
    ext = tt_head_get(rsh, "sec-websocket-extensions", &len);
    if (ext != NULL && tt_ws_extensions(ext, len, &d) < 0)
        bad = 1;
    tt_ws_reader_init(&s->cr, 1, &d, max_msg, on_msg, s);
    tt_ws_reader_init(&s->sr, 0, &d, max_msg, on_msg, s);
    sess->ws.on = 1;
    sess->ws.session = 1;
    tt_copy_str(sess->ws.session_id, sizeof(sess->ws.session_id), sess->request_id);
    if (bad)
        stop(s, "Sec-WebSocket-Extensions of the 101 response is malformed");
    return s;
}

void tt_ws_sess_feed(struct tt_ws_sess *s, int from_client,
                     struct evbuffer *buf, size_t n, uint64_t now)
{
    struct tt_ws_reader *r = from_client ? &s->cr : &s->sr;
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr at;
    int k, i;

    if (s->stopped || n == 0)
        return;
    s->now = now;
    s->from_client = from_client;
    evbuffer_ptr_set(buf, &at, 0, EVBUFFER_PTR_SET);
    while (n > 0) {
        k = evbuffer_peek(buf, (ev_ssize_t)n, &at, v, 8);
        if (k <= 0)
            break;
        for (i = 0; i < k && i < 8 && n > 0; i++) {
            size_t take = v[i].iov_len < n ? v[i].iov_len : n;
            if (tt_ws_reader_feed(r, v[i].iov_base, take) < 0) {
                stop(s, r->why != NULL ? r->why : "frames break RFC 6455");
                return;
            }
            n -= take;
            evbuffer_ptr_set(buf, &at, take, EVBUFFER_PTR_ADD);
        }
    }
}

void tt_ws_sess_end(struct tt_ws_sess *s, int client_left, uint64_t now)
{
    s->now = now;
    s->npending = 0;
    if (client_left)
        turn_fail(s, 499, "cancelled", "the client closed the WebSocket mid-turn");
    else
        turn_fail(s, 502, "truncated", "the WebSocket closed mid-turn");
}

void tt_ws_sess_free(struct tt_ws_sess *s)
{
    if (s == NULL)
        return;
    if (s->turn != NULL)
        tt_ws_sess_end(s, 1, s->now);
    tt_ws_reader_free(&s->cr);
    tt_ws_reader_free(&s->sr);
    free(s);
}
