/*
 * A WebSocket session of tokentap-sim: the OpenAI Responses API's WebSocket
 * mode (GET /v1/responses) and the Realtime API (GET /v1/realtime), each
 * with Upgrade: websocket.
 *
 * Owns: the handshake (RFC 6455 section 4.2, and the permessage-deflate
 * offer of RFC 7692: the first acceptable offer is answered with the
 * parameters honoured), the client's frames (a tt_ws_reader: unmasked,
 * reassembled, inflated), our frames (tt_ws_write_msg, compressed with a
 * tt_ws_deflater when negotiated), the client events, and the turns.  The
 * frame code is proxy/decode/ws.c's (one mechanism for the proxy and the sim);
 * only the offer parsing is here, since the proxy reads answers, not offers.
 *
 *   session: 101 --> OPEN --client close / protocol error--> CLOSING
 *            (close frame sent, then the TCP close once it is written)
 *
 *   turn:    IDLE --response.create--> RUNNING (sim_resp_start_ws: the
 *            HTTP dialects' schedule and emitters, one message per event)
 *            --out.end (turn_end)--> OVER --kick (or the next client
 *            event)--> freed, IDLE; the next queued create starts
 *
 * Floors: the connection (sim/conn.c) hands us its output at accept (a
 * struct sim_out: the 101, our frames, the close, the split) and we never
 * call it by name; we hand each turn (sim/resp.c) our own output, s->out,
 * whose write is one text message and whose end is the turn's end.
 *
 * Responses: a response.create while a turn runs waits in a queue and
 * starts when the turn ends (OpenAI's WebSocket mode runs the creates of a
 * connection sequentially, one in-flight response at a time); at most
 * WS_MAX_QUEUE wait, the next gets an error event.  Realtime: it gets the
 * error conversation_already_has_active_response, as OpenAI answers.
 *
 * The turn's options: the client event's top-level "sim" object, else
 * metadata.sim (Responses) or response.metadata.sim (Realtime) holding that
 * object as a JSON string.  A bad option answers an error event and the
 * session stays open.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "proxy/decode/ws.h"
#include "sim/sim.h"

#define WS_MAX_MSG   (16u << 20)   /* a client message kept whole (base64 audio) */
#define WS_MAX_QUEUE 16            /* response.create waiting behind a turn */

enum ws_api { WS_API_RESPONSES = 0, WS_API_REALTIME };

enum ws_state {
    WS_OPEN = 0,       /* messages both ways */
    WS_CLOSING         /* our close frame sent (or the connection ends):
                        * nothing more is read or written */
};

enum ws_turn {
    TURN_IDLE = 0,     /* no turn: a response.create starts one */
    TURN_RUNNING,      /* its timers run (or it hangs) */
    TURN_OVER          /* it ended; freed outside its own stack */
};

struct sim_ws {
    const struct sim_out *conn;         /* borrowed: the connection's output (it owns us) */
    struct sim_out out;                 /* ours, handed to each turn */
    enum ws_api api;
    enum ws_state state;
    const struct sim_dialect *d;
    struct tt_ws_reader rd;             /* the client's frames (owns its buffers) */
    struct tt_ws_deflate defl;          /* as our 101 accepted it */
    struct tt_ws_deflater *z;           /* owned: our messages' compressor, or NULL */
    struct evbuffer *frame;             /* owned: one frame on its way to the queue */
    enum ws_turn tstate;
    struct sim_resp *turn;              /* owned: the turn, NULL when IDLE */
    cJSON *queue[WS_MAX_QUEUE];         /* owned: response.create waiting (Responses) */
    int nqueue;
    struct event *kick;                 /* owned: turn end, outside the turn's stack */
    /* Realtime */
    struct sim_rt rt;
    cJSON *session;                     /* owned: the session object */
    char model[160];
    char last_item[64];                 /* previous_item_id, "" = none */
    uint64_t items;
    size_t audio_in;                    /* input_audio_buffer bytes since a commit */
};

/* ---- the handshake ------------------------------------------------------------ */

static int ws_path_is(const struct sim_req *q, const char *p)
{
    return q->path_len == strlen(p) && memcmp(q->url, p, q->path_len) == 0;
}

/* <v> is a comma-separated list holding <tok> (case-insensitive) */
static int has_token(const char *v, const char *tok)
{
    size_t tl = strlen(tok);

    while (v && *v) {
        size_t n;
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        n = strcspn(v, ",");
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n == tl && strncasecmp(v, tok, tl) == 0)
            return 1;
        v += strcspn(v, ",");
    }
    return 0;
}

/* any header <name> of <q> holds <tok> */
static int header_has_token(const struct sim_req *q, const char *name, const char *tok)
{
    int i;
    for (i = 0; i < q->nhdrs; i++)
        if (strcasecmp(q->hdrs[i].name, name) == 0 && has_token(q->hdrs[i].value, tok))
            return 1;
    return 0;
}

int sim_ws_wanted(const struct sim_req *q)
{
    return (ws_path_is(q, "/v1/responses") || ws_path_is(q, "/v1/realtime")) &&
           header_has_token(q, "upgrade", "websocket");
}

/* a Sec-WebSocket-Key: base64 of 16 bytes (RFC 6455 section 4.1) */
static int key_ok(const char *k)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i;

    if (!k || strlen(k) != 24 || strcmp(k + 22, "==") != 0)
        return 0;
    for (i = 0; i < 22; i++)
        if (!strchr(b64, k[i]) || k[i] == '\0')
            return 0;
    return 1;
}

/* one permessage-deflate offer as the client made it */
struct ws_offer {
    int snct, cnct;            /* server_/client_no_context_takeover */
    int smwb;                  /* server_max_window_bits: 0 not offered, else 8..15 */
    int cmwb;                  /* client_max_window_bits: 0 not offered, -1
                                * without a value, else 8..15 */
};

/* <p>[0..n) is the parameter <name> (case-insensitive) */
static int param_is(const char *p, size_t n, const char *name)
{
    return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

/* a parameter value: token or quoted-string; the window bits 8..15, or -1 */
static int window_bits(const char *v, size_t n)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n == 1 && v[0] >= '8' && v[0] <= '9')
        return v[0] - '0';
    if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5')
        return 10 + (v[1] - '0');
    return -1;
}

/*
 * One extension of an offer list, <e>[0..n): 1 when it is an acceptable
 * permessage-deflate offer (filled in <o>), 0 when it is another extension
 * or an offer we decline (RFC 7692 section 7.1: unknown or repeated
 * parameters, bad values).  server_max_window_bits=8 is fine: the deflater
 * serves it without back references (proxy/decode/ws.c).
 */
static int offer_parse(const char *e, size_t n, struct ws_offer *o)
{
    size_t i = 0, k;
    const char *name;

    memset(o, 0, sizeof(*o));
    while (i < n && (e[i] == ' ' || e[i] == '\t'))
        i++;
    name = e + i;
    for (k = 0; i + k < n && name[k] != ';' && name[k] != ' ' && name[k] != '\t'; k++)
        ;
    if (!param_is(name, k, "permessage-deflate"))
        return 0;
    i += k;
    while (i < n) {
        const char *p, *v = NULL;
        size_t pl, vl = 0;

        while (i < n && (e[i] == ' ' || e[i] == '\t'))
            i++;
        if (i < n && e[i] == ';')
            i++;
        while (i < n && (e[i] == ' ' || e[i] == '\t'))
            i++;
        if (i >= n)
            break;
        p = e + i;
        for (pl = 0; i < n && e[i] != '=' && e[i] != ';' && e[i] != ' ' &&
                     e[i] != '\t'; i++)
            pl++;
        while (i < n && (e[i] == ' ' || e[i] == '\t'))
            i++;
        if (i < n && e[i] == '=') {
            i++;
            while (i < n && (e[i] == ' ' || e[i] == '\t'))
                i++;
            v = e + i;
            while (i < n && e[i] != ';' && e[i] != ' ' && e[i] != '\t') {
                i++;
                vl++;
            }
        }
        if (param_is(p, pl, "server_no_context_takeover")) {
            if (v || o->snct)
                return 0;
            o->snct = 1;
        } else if (param_is(p, pl, "client_no_context_takeover")) {
            if (v || o->cnct)
                return 0;
            o->cnct = 1;
        } else if (param_is(p, pl, "server_max_window_bits")) {
            int b = v ? window_bits(v, vl) : -1;
            if (o->smwb || b < 8)
                return 0;
            o->smwb = b;
        } else if (param_is(p, pl, "client_max_window_bits")) {
            int b = v ? window_bits(v, vl) : -1;
            if (o->cmwb || (v && b < 8))
                return 0;
            o->cmwb = v ? b : -1;
        } else {
            return 0;
        }
    }
    return 1;
}

/*
 * The Sec-WebSocket-Extensions answer for the client's offers (every such
 * header, in order: the first acceptable permessage-deflate offer), or ""
 * when none is acceptable.  We honour what is offered: no context takeover
 * on our side when asked, our window as asked, the client's window as it
 * says; client_no_context_takeover is echoed (our reader needs nothing).
 */
static void offer_answer(const struct sim_req *q, char *out, size_t olen)
{
    int i;

    out[0] = '\0';
    for (i = 0; i < q->nhdrs; i++) {
        const char *v = q->hdrs[i].value;
        if (strcasecmp(q->hdrs[i].name, "sec-websocket-extensions") != 0)
            continue;
        while (*v) {
            struct ws_offer o;
            size_t n = 0;
            int quoted = 0;

            /* one extension: up to a comma outside a quoted-string */
            while (v[n] && (quoted || v[n] != ',')) {
                if (v[n] == '"')
                    quoted = !quoted;
                n++;
            }
            if (offer_parse(v, n, &o)) {
                int w = snprintf(out, olen, "permessage-deflate");
                if (o.snct)
                    w += snprintf(out + w, olen - (size_t)w, "; server_no_context_takeover");
                if (o.cnct)
                    w += snprintf(out + w, olen - (size_t)w, "; client_no_context_takeover");
                if (o.smwb)
                    w += snprintf(out + w, olen - (size_t)w, "; server_max_window_bits=%d", o.smwb);
                if (o.cmwb > 0)
                    snprintf(out + w, olen - (size_t)w, "; client_max_window_bits=%d", o.cmwb);
                return;
            }
            v += n;
            if (*v == ',')
                v++;
        }
    }
}

/* 400 with the reason, then close: a handshake we will not take */
static struct sim_ws *refuse(const struct sim_out *conn, const char *why)
{
    char msg[200];

    snprintf(msg, sizeof(msg), "bad WebSocket handshake: %s", why);
    conn->reply_error(conn->arg, 400, msg, 0, "Sec-WebSocket-Version: 13\r\n");
    return NULL;
}

/* ---- writing ---------------------------------------------------------------- */

static void ws_close(struct sim_ws *s, uint16_t code, const char *reason,
                     int keep_turn);

/* one message (text: compressed when negotiated) or control frame */
static void ws_write(struct sim_ws *s, enum tt_ws_op op, const void *p, size_t n)
{
    if (s->state != WS_OPEN)
        return;
    if (tt_ws_write_msg(s->frame, op, p, n, op == TT_WS_TEXT ? s->z : NULL,
                        NULL) != 0) {
        evbuffer_drain(s->frame, evbuffer_get_length(s->frame));
        /* maybe inside the turn's own timer: the turn is freed later */
        ws_close(s, 1011, "tokentap-sim: cannot write a frame", 1);
        return;
    }
    s->conn->write_buffer(s->conn->arg, s->frame);
}

static void ws_send_json(struct sim_ws *s, cJSON *o)
{
    char *t = cJSON_PrintUnformatted(o);

    cJSON_Delete(o);
    if (t)
        ws_write(s, TT_WS_TEXT, t, strlen(t));
    free(t);
}


/* ---- turns ------------------------------------------------------------------ */

/* a running turn or queued creates: the peer leaving now is an abort */
int sim_ws_busy(const struct sim_ws *s)
{
    return s->state == WS_OPEN && (s->tstate == TURN_RUNNING || s->nqueue > 0);
}

/*
 * Drop the turn and the queue without a word (the client is gone).  With
 * <keep_turn> (we may be inside the turn's own timer) the running turn is
 * left to run silently, its messages dropped, until the session is freed.
 */
static void turns_drop(struct sim_ws *s, int keep_turn)
{
    int i;

    if (sim_ws_busy(s)) {
        sim_srv.aborted++;
        if (sim_srv.log)
            fprintf(stderr, "tokentap-sim: websocket client left mid-turn\n");
    }
    if (!keep_turn) {
        sim_resp_free(s->turn);
        s->turn = NULL;
        s->tstate = TURN_IDLE;
    }
    for (i = 0; i < s->nqueue; i++)
        cJSON_Delete(s->queue[i]);
    s->nqueue = 0;
}

/* our close frame (echoing the client's code, or ours), then the TCP close
 * once it is written */
static void ws_close(struct sim_ws *s, uint16_t code, const char *reason,
                     int keep_turn)
{
    unsigned char p[125];
    size_t n = 0;

    if (s->state != WS_OPEN)
        return;
    turns_drop(s, keep_turn);
    if (code) {
        p[0] = (unsigned char)(code >> 8);
        p[1] = (unsigned char)(code & 0xff);
        n = 2;
        if (reason) {
            size_t rl = strlen(reason);
            if (rl > sizeof(p) - 2)
                rl = sizeof(p) - 2;
            memcpy(p + 2, reason, rl);
            n += rl;
        }
    }
    s->state = WS_CLOSING;   /* first: nothing else goes out after this */
    if (tt_ws_write_msg(s->frame, TT_WS_CLOSE, p, n, NULL, NULL) == 0)
        s->conn->write_buffer(s->conn->arg, s->frame);
    else
        evbuffer_drain(s->frame, evbuffer_get_length(s->frame));
    s->conn->end(s->conn->arg, SIM_END_CLOSE);
}

/* the finished turn is freed (never inside its own stack: see the kick) */
static void turn_reap(struct sim_ws *s)
{
    if (s->tstate != TURN_OVER)
        return;
    sim_resp_free(s->turn);
    s->turn = NULL;
    s->tstate = TURN_IDLE;
    s->conn->set_split(s->conn->arg, SIM_SPLIT_NONE, 0);
}

static cJSON *ev_new(struct sim_ws *s, const char *type)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "type", type);
    if (s->api == WS_API_REALTIME) {
        char id[40];
        snprintf(id, sizeof(id), "event_%llu", (unsigned long long)++s->rt.event_seq);
        cJSON_AddStringToObject(o, "event_id", id);
    }
    return o;
}

/*
 * An error event.  Responses: {"type":"error","status":N,"error":{"type",
 * "code","message","param"}} (OpenAI's WebSocket mode).  Realtime:
 * {"type":"error","event_id":..,"error":{"type","code","message","param",
 * "event_id"}}, the last naming the client event at fault.
 */
static void ws_error(struct sim_ws *s, int status, const char *code,
                     const char *message, const char *param,
                     const char *client_event)
{
    cJSON *o = ev_new(s, "error"), *e;

    if (s->api == WS_API_RESPONSES)
        cJSON_AddNumberToObject(o, "status", status);
    e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "type", sim_error_type(status));
    if (code)
        cJSON_AddStringToObject(e, "code", code);
    else
        cJSON_AddNullToObject(e, "code");
    cJSON_AddStringToObject(e, "message", message);
    if (param)
        cJSON_AddStringToObject(e, "param", param);
    else
        cJSON_AddNullToObject(e, "param");
    if (s->api == WS_API_REALTIME) {
        if (client_event)
            cJSON_AddStringToObject(e, "event_id", client_event);
        else
            cJSON_AddNullToObject(e, "event_id");
    }
    ws_send_json(s, o);
}

/* the turn is over: SIM_END_KEEPALIVE = the session goes on, TRUNCATE or
 * RESET end the connection; never frees the turn inside the caller */
static void turn_end(struct sim_ws *s, enum sim_end how)
{
    s->tstate = TURN_OVER;
    if (s->state != WS_OPEN)
        return;   /* a turn left running by ws_close(): counted as aborted */
    sim_srv.completed++;
    if (how == SIM_END_TRUNCATE || how == SIM_END_RESET) {
        /* the connection goes, mid-session: no close frame */
        s->state = WS_CLOSING;
        s->conn->end(s->conn->arg, how);
        return;
    }
    event_active(s->kick, EV_TIMEOUT, 0);
}

/* ---- our output, as a turn sees it (struct sim_out) --------------------------- */

/* one event: one text message */
static void ws_out_write(void *arg, const void *p, size_t n)
{
    ws_write(arg, TT_WS_TEXT, p, n);
}

static void ws_out_write_buffer(void *arg, struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);

    ws_write(arg, TT_WS_TEXT, evbuffer_pullup(b, -1), n);
    evbuffer_drain(b, n);
}

/* the turn failed before its first event (sim.status): the API's error
 * event, and the turn is over (the session goes on) */
static void ws_out_reply_error(void *arg, int status, const char *msg,
                               int keep_alive, const char *extra)
{
    struct sim_ws *s = arg;
    (void)keep_alive; (void)extra;

    ws_error(s, status, "sim_error", msg, NULL, NULL);
    turn_end(s, SIM_END_KEEPALIVE);
}

/* the split is the connection's */
static void ws_out_set_split(void *arg, enum sim_split split, uint64_t seed)
{
    struct sim_ws *s = arg;

    s->conn->set_split(s->conn->arg, split, seed);
}

static void ws_out_end(void *arg, enum sim_end how)
{
    turn_end(arg, how);
}

/*
 * The turn's "sim" options out of client event <msg>: its top-level "sim"
 * (detached), else <meta>.sim, a JSON object in a string (parsed).  0 with
 * *out set (NULL: none), or -1 with the reason.
 */
static int take_sim(cJSON *msg, const cJSON *meta, cJSON **out, char *err, size_t elen)
{
    const cJSON *ms;

    *out = cJSON_DetachItemFromObjectCaseSensitive(msg, "sim");
    if (*out)
        return 0;
    ms = cJSON_GetObjectItemCaseSensitive(meta, "sim");
    if (!ms)
        return 0;
    if (!cJSON_IsString(ms) || !(*out = cJSON_Parse(ms->valuestring)) ||
        !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        snprintf(err, elen, "metadata.sim must be a JSON object in a string");
        return -1;
    }
    return 0;
}

/* Responses: a turn for response.create <msg> (taken) */
static void rs_start(struct sim_ws *s, cJSON *msg)
{
    struct sim_turn t;
    char err[320];

    memset(&t, 0, sizeof(t));
    if (take_sim(msg, cJSON_GetObjectItemCaseSensitive(msg, "metadata"), &t.sim,
                 err, sizeof(err)) != 0) {
        cJSON_Delete(msg);
        ws_error(s, 400, "invalid_value", err, "metadata.sim", NULL);
        return;
    }
    t.body = msg;
    s->turn = sim_resp_start_ws(&s->out, s->d, &t, err, sizeof(err));
    if (!s->turn) {
        ws_error(s, 400, "invalid_value", err, "sim", NULL);
        return;
    }
    s->tstate = TURN_RUNNING;
    sim_srv.ws_turns++;
}

/* 1 when the list <m> (an array of strings) holds "audio"; -1 when absent */
static int has_audio(const cJSON *m)
{
    const cJSON *it;

    if (!cJSON_IsArray(m))
        return -1;
    cJSON_ArrayForEach(it, m)
        if (cJSON_IsString(it) && !strcmp(it->valuestring, "audio"))
            return 1;
    return 0;
}

/* Realtime: a turn for response.create <msg> (taken) */
static void rt_start(struct sim_ws *s, cJSON *msg, const char *client_event)
{
    struct sim_turn t;
    cJSON *resp = cJSON_DetachItemFromObjectCaseSensitive(msg, "response");
    char err[320];
    int audio = -1;

    memset(&t, 0, sizeof(t));
    if (resp && !cJSON_IsObject(resp)) {
        cJSON_Delete(resp);
        cJSON_Delete(msg);
        ws_error(s, 400, "invalid_type", "response must be an object", "response",
                 client_event);
        return;
    }
    if (!resp)
        resp = cJSON_CreateObject();
    if (take_sim(msg, cJSON_GetObjectItemCaseSensitive(resp, "metadata"), &t.sim,
                 err, sizeof(err)) != 0) {
        cJSON_Delete(resp);
        cJSON_Delete(msg);
        ws_error(s, 400, "invalid_value", err, "response.metadata.sim", client_event);
        return;
    }
    cJSON_Delete(msg);
    /* the response's modalities, else the session's; audio by default */
    audio = has_audio(cJSON_GetObjectItemCaseSensitive(resp, "output_modalities"));
    if (audio < 0)
        audio = has_audio(cJSON_GetObjectItemCaseSensitive(resp, "modalities"));
    if (audio < 0)
        audio = has_audio(cJSON_GetObjectItemCaseSensitive(s->session, "output_modalities"));
    if (audio < 0)
        audio = has_audio(cJSON_GetObjectItemCaseSensitive(s->session, "modalities"));
    t.body = resp;
    t.model = s->model;
    t.rt = &s->rt;
    t.audio = audio != 0;
    s->turn = sim_resp_start_ws(&s->out, s->d, &t, err, sizeof(err));
    if (!s->turn) {
        ws_error(s, 400, "invalid_value", err, "sim", client_event);
        return;
    }
    s->tstate = TURN_RUNNING;
    sim_srv.ws_turns++;
}

/* the kick: a turn ended; free it and start the next one waiting */
static void on_turn_kick(evutil_socket_t fd, short what, void *arg)
{
    struct sim_ws *s = arg;
    (void)fd; (void)what;

    turn_reap(s);
    while (s->state == WS_OPEN && s->tstate == TURN_IDLE && s->nqueue > 0) {
        cJSON *msg = s->queue[0];
        memmove(s->queue, s->queue + 1, sizeof(s->queue[0]) * (size_t)--s->nqueue);
        rs_start(s, msg);
    }
}

/* ---- client events ------------------------------------------------------------ */

static void rs_event(struct sim_ws *s, cJSON *msg, const char *type)
{
    char m[200];

    if (strcmp(type, "response.create") != 0) {
        snprintf(m, sizeof(m), "unsupported event type \"%.80s\" (this endpoint "
                 "takes response.create)", type);
        cJSON_Delete(msg);
        ws_error(s, 400, "invalid_value", m, "type", NULL);
        return;
    }
    turn_reap(s);
    if (s->tstate == TURN_IDLE && s->nqueue == 0) {
        rs_start(s, msg);
        return;
    }
    /* behind the turn, or behind creates the kick is about to start */
    if (s->nqueue == WS_MAX_QUEUE) {
        cJSON_Delete(msg);
        ws_error(s, 429, "too_many_queued", "tokentap-sim: too many response.create "
                 "waiting behind the response in progress", NULL, NULL);
        return;
    }
    s->queue[s->nqueue++] = msg;   /* runs when the turn ends */
}

static void rt_new_item_id(struct sim_ws *s, char *out, size_t n)
{
    snprintf(out, n, "item_%s_%llu", s->rt.conv_id + 5,
             (unsigned long long)++s->items);
}

static void rt_previous(struct sim_ws *s, cJSON *o)
{
    if (s->last_item[0])
        cJSON_AddStringToObject(o, "previous_item_id", s->last_item);
    else
        cJSON_AddNullToObject(o, "previous_item_id");
}

static void rt_event(struct sim_ws *s, cJSON *msg, const char *type)
{
    const cJSON *eid = cJSON_GetObjectItemCaseSensitive(msg, "event_id");
    char client_event[80], m[200];

    snprintf(client_event, sizeof(client_event), "%s",
             cJSON_IsString(eid) ? eid->valuestring : "");
#define CEV (client_event[0] ? client_event : NULL)

    if (!strcmp(type, "session.update")) {
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(msg, "session"), *it;
        cJSON *o;
        if (!cJSON_IsObject(ns)) {
            ws_error(s, 400, "invalid_type", "session must be an object", "session", CEV);
        } else {
            cJSON_ArrayForEach(it, ns) {
                if (!strcmp(it->string, "id") || !strcmp(it->string, "object"))
                    continue;
                if (!strcmp(it->string, "model") && cJSON_IsString(it))
                    snprintf(s->model, sizeof(s->model), "%s", it->valuestring);
                cJSON_DeleteItemFromObjectCaseSensitive(s->session, it->string);
                cJSON_AddItemToObject(s->session, it->string, cJSON_Duplicate(it, 1));
            }
            o = ev_new(s, "session.updated");
            cJSON_AddItemToObject(o, "session", cJSON_Duplicate(s->session, 1));
            ws_send_json(s, o);
        }
    } else if (!strcmp(type, "conversation.item.create")) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(msg, "item");
        cJSON *o, *copy;
        char id[64];
        if (!cJSON_IsObject(item)) {
            ws_error(s, 400, "invalid_type", "item must be an object", "item", CEV);
        } else {
            const cJSON *iid = cJSON_GetObjectItemCaseSensitive(item, "id");
            copy = cJSON_Duplicate(item, 1);
            if (cJSON_IsString(iid)) {
                snprintf(id, sizeof(id), "%s", iid->valuestring);
            } else {
                rt_new_item_id(s, id, sizeof(id));
                cJSON_AddStringToObject(copy, "id", id);
            }
            if (!cJSON_HasObjectItem(copy, "object"))
                cJSON_AddStringToObject(copy, "object", "realtime.item");
            if (!cJSON_HasObjectItem(copy, "status"))
                cJSON_AddStringToObject(copy, "status", "completed");
            o = ev_new(s, "conversation.item.created");
            rt_previous(s, o);
            cJSON_AddItemToObject(o, "item", copy);
            ws_send_json(s, o);
            snprintf(s->last_item, sizeof(s->last_item), "%s", id);
        }
    } else if (!strcmp(type, "input_audio_buffer.append")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(msg, "audio");
        if (!cJSON_IsString(a))
            ws_error(s, 400, "invalid_type", "audio must be a base64 string", "audio", CEV);
        else
            s->audio_in += strlen(a->valuestring);   /* taken silently */
    } else if (!strcmp(type, "input_audio_buffer.commit")) {
        if (s->audio_in == 0) {
            ws_error(s, 400, "input_audio_buffer_commit_empty",
                     "the input audio buffer is empty", NULL, CEV);
        } else {
            cJSON *o = ev_new(s, "input_audio_buffer.committed");
            char id[64];
            rt_new_item_id(s, id, sizeof(id));
            rt_previous(s, o);
            cJSON_AddStringToObject(o, "item_id", id);
            ws_send_json(s, o);
            snprintf(s->last_item, sizeof(s->last_item), "%s", id);
            s->audio_in = 0;
        }
    } else if (!strcmp(type, "input_audio_buffer.clear")) {
        s->audio_in = 0;
        ws_send_json(s, ev_new(s, "input_audio_buffer.cleared"));
    } else if (!strcmp(type, "response.create")) {
        turn_reap(s);
        if (s->tstate == TURN_RUNNING) {
            snprintf(m, sizeof(m), "Conversation already has an active response "
                     "in progress: resp_%s. Wait until the response is finished "
                     "before creating a new one.", sim_resp_id(s->turn));
            ws_error(s, 400, "conversation_already_has_active_response", m, NULL, CEV);
        } else {
            rt_start(s, msg, CEV);
            msg = NULL;
        }
    } else if (!strcmp(type, "response.cancel")) {
        const cJSON *rid = cJSON_GetObjectItemCaseSensitive(msg, "response_id");
        char want[80];
        snprintf(want, sizeof(want), "resp_%s", sim_resp_id(s->turn));
        if (s->tstate != TURN_RUNNING ||
            (cJSON_IsString(rid) && strcmp(rid->valuestring, want) != 0) ||
            sim_resp_cancel(s->turn) != 0)
            ws_error(s, 400, "response_cancel_not_active",
                     "Cancellation failed: no active response found", NULL, CEV);
    } else {
        snprintf(m, sizeof(m), "Invalid value: '%.80s'. Not a client event "
                 "tokentap-sim knows.", type);
        ws_error(s, 400, "invalid_value", m, "type", CEV);
    }
    cJSON_Delete(msg);
#undef CEV
}

static void on_message(void *arg, const struct tt_ws_msg *m)
{
    struct sim_ws *s = arg;
    const cJSON *type;
    cJSON *msg;

    if (s->state != WS_OPEN)
        return;
    switch (m->op) {
    case TT_WS_PING:
        ws_write(s, TT_WS_PONG, m->data, m->len);
        return;
    case TT_WS_PONG:
        return;
    case TT_WS_CLOSE:
        /* echo the status code, then close (RFC 6455 section 5.5.1) */
        ws_close(s, m->close_code, NULL, 0);
        return;
    case TT_WS_BINARY:
        ws_error(s, 400, "invalid_value", "binary messages are not supported: "
                 "client events are JSON text", NULL, NULL);
        return;
    case TT_WS_TEXT:
    default:
        break;
    }
    if (m->over) {
        ws_error(s, 400, "message_too_large", "message too large for tokentap-sim",
                 NULL, NULL);
        return;
    }
    msg = cJSON_ParseWithLength((const char *)m->data, m->len);
    type = cJSON_GetObjectItemCaseSensitive(msg, "type");
    if (!cJSON_IsObject(msg) || !cJSON_IsString(type)) {
        cJSON_Delete(msg);
        ws_error(s, 400, "invalid_json", "a client event is a JSON object with "
                 "a string \"type\"", NULL, NULL);
        return;
    }
    {
        char t[96];
        snprintf(t, sizeof(t), "%s", type->valuestring);
        if (sim_srv.log)
            fprintf(stderr, "tokentap-sim: websocket event %s\n", t);
        if (s->api == WS_API_RESPONSES)
            rs_event(s, msg, t);
        else
            rt_event(s, msg, t);
    }
}

void sim_ws_feed(struct sim_ws *s, struct evbuffer *in)
{
    while (evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        if (s->state == WS_OPEN && tt_ws_reader_feed(&s->rd, v.iov_base, v.iov_len) != 0 &&
            s->state == WS_OPEN) {
            char why[100];
            snprintf(why, sizeof(why), "tokentap-sim: %s",
                     s->rd.why ? s->rd.why : "bad frame");
            ws_close(s, 1002, why, 0);
        }
        evbuffer_drain(in, v.iov_len);
    }
}

/* ---- the session ---------------------------------------------------------------- */

/* the Realtime session object at connect: GA, or the beta's shape */
static cJSON *rt_session_new(const struct sim_ws *s, const char *id)
{
    cJSON *o = cJSON_CreateObject(), *m;

    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "realtime.session");
    cJSON_AddStringToObject(o, "model", s->model);
    if (s->rt.beta) {
        m = cJSON_AddArrayToObject(o, "modalities");
        cJSON_AddItemToArray(m, cJSON_CreateString("text"));
        cJSON_AddItemToArray(m, cJSON_CreateString("audio"));
        cJSON_AddStringToObject(o, "instructions", "");
        cJSON_AddStringToObject(o, "voice", "alloy");
        cJSON_AddStringToObject(o, "input_audio_format", "pcm16");
        cJSON_AddStringToObject(o, "output_audio_format", "pcm16");
        cJSON_AddNullToObject(o, "input_audio_transcription");
        cJSON_AddNullToObject(o, "turn_detection");
        cJSON_AddArrayToObject(o, "tools");
        cJSON_AddStringToObject(o, "tool_choice", "auto");
        cJSON_AddNumberToObject(o, "temperature", 0.8);
        cJSON_AddStringToObject(o, "max_response_output_tokens", "inf");
    } else {
        cJSON *a, *io, *f;
        cJSON_AddStringToObject(o, "type", "realtime");
        m = cJSON_AddArrayToObject(o, "output_modalities");
        cJSON_AddItemToArray(m, cJSON_CreateString("audio"));
        cJSON_AddStringToObject(o, "instructions", "");
        a = cJSON_AddObjectToObject(o, "audio");
        io = cJSON_AddObjectToObject(a, "input");
        f = cJSON_AddObjectToObject(io, "format");
        cJSON_AddStringToObject(f, "type", "audio/pcm");
        cJSON_AddNumberToObject(f, "rate", 24000);
        cJSON_AddNullToObject(io, "transcription");
        cJSON_AddNullToObject(io, "turn_detection");   /* no VAD here */
        io = cJSON_AddObjectToObject(a, "output");
        f = cJSON_AddObjectToObject(io, "format");
        cJSON_AddStringToObject(f, "type", "audio/pcm");
        cJSON_AddNumberToObject(f, "rate", 24000);
        cJSON_AddStringToObject(io, "voice", "alloy");
        cJSON_AddNumberToObject(io, "speed", 1.0);
        cJSON_AddArrayToObject(o, "tools");
        cJSON_AddStringToObject(o, "tool_choice", "auto");
        cJSON_AddStringToObject(o, "max_output_tokens", "inf");
        cJSON_AddNullToObject(o, "tracing");
        cJSON_AddNumberToObject(o, "expires_at", (double)(time(NULL) + 3600));
    }
    return o;
}

/* ?model=M of <url> into <out> (unchanged when absent) */
static void query_model(const char *url, char *out, size_t n)
{
    const char *q = strchr(url, '?');

    while (q) {
        q++;
        if (!strncmp(q, "model=", 6) && q[6] && q[6] != '&') {
            snprintf(out, n, "%.*s", (int)strcspn(q + 6, "&#"), q + 6);
            return;
        }
        q = strchr(q, '&');
    }
}

struct sim_ws *sim_ws_accept(const struct sim_out *conn, const struct sim_req *q)
{
    static uint64_t sessions;
    const char *key = sim_req_header(q, "sec-websocket-key");
    const char *ver = sim_req_header(q, "sec-websocket-version");
    char accept[29], ext[200], head[512];
    struct tt_ws_deflate defl;
    struct sim_ws *s;
    int n;

    if (strcmp(q->method, "GET") != 0)
        return refuse(conn, "the method must be GET");
    if (q->http_minor < 1)
        return refuse(conn, "HTTP/1.1 or later is required");
    if (!header_has_token(q, "connection", "upgrade"))
        return refuse(conn, "Connection must include Upgrade");
    if (!ver || strcmp(ver, "13") != 0)
        return refuse(conn, "Sec-WebSocket-Version must be 13");
    if (!key_ok(key))
        return refuse(conn, "Sec-WebSocket-Key must be 16 bytes in base64");

    /* permessage-deflate: our answer, read back with the proxy's reader of
     * answers, so the session runs on what the client will believe */
    memset(&defl, 0, sizeof(defl));
    ext[0] = '\0';
    if (sim_srv.ws_deflate)
        offer_answer(q, ext, sizeof(ext));
    if (ext[0] && tt_ws_extensions(ext, strlen(ext), &defl) != 0) {
        ext[0] = '\0';
        memset(&defl, 0, sizeof(defl));
    }

    s = calloc(1, sizeof(*s));
    if (!s) {
        conn->reply_error(conn->arg, 500, "tokentap-sim: out of memory", 0, "");
        return NULL;
    }
    s->conn = conn;
    s->out.arg = s;
    s->out.messages = 1;
    s->out.write = ws_out_write;
    s->out.write_buffer = ws_out_write_buffer;
    s->out.head = NULL;   /* a turn has no status line */
    s->out.reply_error = ws_out_reply_error;
    s->out.set_split = ws_out_set_split;
    s->out.end = ws_out_end;
    s->defl = defl;
    tt_ws_reader_init(&s->rd, 1, &s->defl, WS_MAX_MSG, on_message, s);
    s->api = ws_path_is(q, "/v1/realtime") ? WS_API_REALTIME : WS_API_RESPONSES;
    s->d = sim_dialect_of(s->api == WS_API_REALTIME ? TT_API_OPENAI_REALTIME
                                                    : TT_API_OPENAI_RESPONSES);
    s->frame = evbuffer_new();
    s->kick = evtimer_new(sim_srv.base, on_turn_kick, s);
    if (s->defl.on)
        s->z = tt_ws_deflater_new(s->defl.server_max_window_bits,
                                  s->defl.server_no_context_takeover);
    if (!s->frame || !s->kick || !s->d || (s->defl.on && !s->z)) {
        sim_ws_free(s);
        conn->reply_error(conn->arg, 500, "tokentap-sim: out of memory", 0, "");
        return NULL;
    }

    tt_ws_accept(key, strlen(key), accept);
    n = snprintf(head, sizeof(head), "HTTP/1.1 101 Switching Protocols\r\n"
                 "Server: tokentap-sim\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n", accept);
    if (ext[0])
        n += snprintf(head + n, sizeof(head) - (size_t)n,
                      "Sec-WebSocket-Extensions: %s\r\n", ext);
    if (s->api == WS_API_REALTIME &&
        header_has_token(q, "sec-websocket-protocol", "realtime"))
        n += snprintf(head + n, sizeof(head) - (size_t)n,
                      "Sec-WebSocket-Protocol: realtime\r\n");
    n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
    conn->write(conn->arg, head, (size_t)n);
    sim_srv.ws_sessions++;
    sessions++;

    if (s->api == WS_API_REALTIME) {
        const char *beta = sim_req_header(q, "openai-beta");
        char id[40];
        cJSON *o;

        s->rt.beta = beta && strstr(beta, "realtime=v1") != NULL;
        snprintf(s->rt.conv_id, sizeof(s->rt.conv_id), "conv_sim%llu",
                 (unsigned long long)sessions);
        snprintf(s->model, sizeof(s->model), "sim-model");
        query_model(q->url, s->model, sizeof(s->model));
        snprintf(id, sizeof(id), "sess_sim%llu", (unsigned long long)sessions);
        s->session = rt_session_new(s, id);
        o = ev_new(s, "session.created");
        cJSON_AddItemToObject(o, "session", cJSON_Duplicate(s->session, 1));
        ws_send_json(s, o);
    }
    if (sim_srv.log)
        fprintf(stderr, "tokentap-sim: websocket session %s%s%s\n",
                s->api == WS_API_REALTIME ? "realtime" : "responses",
                ext[0] ? ", " : "", ext);
    return s;
}

void sim_ws_free(struct sim_ws *s)
{
    int i;

    if (!s)
        return;
    sim_resp_free(s->turn);
    for (i = 0; i < s->nqueue; i++)
        cJSON_Delete(s->queue[i]);
    tt_ws_reader_free(&s->rd);
    tt_ws_deflater_free(s->z);
    if (s->frame)
        evbuffer_free(s->frame);
    if (s->kick)
        event_free(s->kick);
    cJSON_Delete(s->session);
    free(s);
}
