/*
 * tokentap-sim: a simulated model server for tests, the demo and benchmarks.
 * This header holds the types shared by its six files, a stack of floors:
 * each file calls only the files below it, never one above.
 *
 *   sim/main.c     the process: command line, listener, TLS context, signals
 *   sim/conn.c     one client connection: request parsing (llhttp), routing,
 *                  the plain endpoints (/health /stats /echo, 404, upgrade),
 *                  keep-alive, the write pump that splits bytes, and how a
 *                  response ends (keep-alive, close, truncate, RST)
 *   sim/ws.c       a WebSocket session (the Responses API's WebSocket mode,
 *                  the Realtime API): handshake, client events, turns; the
 *                  frames themselves are proxy/decode/ws.h's
 *   sim/resp.c     one generated or replayed response: the "sim" options,
 *                  the event schedule on absolute timer targets, faults
 *   sim/dialect.c  THE table of API dialects and their event emitters
 *   sim/base.c     the ground: the process-wide state and counters behind
 *                  GET /stats (sim_srv), the clock, the token words, the
 *                  request header lookup, the error types
 *
 *   main.c > conn.c > ws.c > resp.c > dialect.c > base.c
 *
 * A lower floor answers upward through what it is handed, never by name: a
 * response (resp.c) and a WebSocket session (ws.c) write through a struct
 * sim_out that their owner hands them at start (the connection's, or for a
 * turn the session's); a dialect's emitters hand their events to the
 * sim_gen's event function (resp.c's framing).
 *
 * Data path: client bytes -> conn.c (llhttp) -> sim_resp_start() -> timers
 * -> dialect emitters -> g->event (resp.c: chunk framing) -> out->write
 * (conn.c) -> outq -> pump (split none|random|byte) -> bufferevent -> socket.
 *
 * WebSocket: client bytes -> conn.c -> sim_ws_feed() (tt_ws_reader) -> client
 * event -> sim_resp_start_ws() with the session's sim_out -> the same timers
 * and emitters -> g->event -> out->write (ws.c: one text message,
 * tt_ws_write_msg) -> the connection's out->write_buffer -> the same pump.
 */
#ifndef SIM_H
#define SIM_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/ssl.h>

#include "metrics/request.h"

/* ---- the ground: process-wide state and helpers (sim/base.c) ------------- */

struct sim_conn;

struct sim_path_count {
    char path[96];
    uint64_t n;
};

#define SIM_MAX_PATHS 64

struct sim_server {
    struct event_base *base;
    SSL_CTX *ssl;                 /* NULL = plain HTTP */
    int log;                      /* --log: one line per request on stderr */
    double latency_scale;         /* --latency-scale: ttft/gap/headers delays times this */
    struct sim_conn *conns;       /* every open connection (owned by sim/conn.c) */
    uint64_t requests;            /* requests received, GET /stats excluded */
    uint64_t connections;         /* connections accepted */
    uint64_t aborted;             /* peer closed while a response was in progress */
    uint64_t completed;           /* responses that ended as the options asked */
    uint64_t open;                /* connections open now */
    int ws_deflate;               /* --ws-deflate: accept permessage-deflate (default 1) */
    uint64_t ws_sessions;         /* WebSocket sessions opened (101 sent) */
    uint64_t ws_turns;            /* WebSocket turns started (response.create) */
    uint64_t next_id;             /* response ids */
    struct sim_path_count paths[SIM_MAX_PATHS];
    int npaths;
};

extern struct sim_server sim_srv;

uint64_t sim_now_ns(void);        /* CLOCK_MONOTONIC */
void sim_count_path(const char *path, size_t len);

/* "tok3 tok4 " / "think0 ": <n> words from index <from> appended to <b> */
void sim_words(struct evbuffer *b, int reasoning, int from, int n);
/* all words of a kind as a malloc'ed string */
char *sim_words_str(int reasoning, int from, int n);

/* one parsed request header */
struct sim_hdr {
    char *name;
    char *value;
};

/* a parsed request; owned by its connection, valid until the response ends */
struct sim_req {
    char *method;
    char *url;                    /* as received, query string included */
    size_t path_len;              /* url[0..path_len) is the path */
    struct sim_hdr *hdrs;
    int nhdrs;
    struct evbuffer *body;        /* de-chunked body */
    int chunked;                  /* request body came chunked */
    int keep_alive;               /* llhttp_should_keep_alive() */
    int http_minor;
    unsigned conn_requests;       /* 1 for the first request on the connection */
};

/* the value of header <name> (case-insensitive), or NULL */
const char *sim_req_header(const struct sim_req *q, const char *name);
/* the OpenAI error "type" for an HTTP status (invalid_request_error, ...) */
const char *sim_error_type(int status);

enum sim_split { SIM_SPLIT_NONE = 0, SIM_SPLIT_RANDOM, SIM_SPLIT_BYTE };

/* how a response ends once every queued byte reached the socket */
enum sim_end {
    SIM_END_NONE = 0,
    SIM_END_KEEPALIVE,   /* next request on the same connection */
    SIM_END_CLOSE,       /* orderly close (close-delimited body, Connection: close) */
    SIM_END_TRUNCATE,    /* close mid-body (FIN, no TLS close_notify) */
    SIM_END_RESET        /* RST: SO_LINGER 0 then close */
};

/*
 * Where a response's bytes go, handed down by the one who owns the
 * response: the HTTP connection (sim/conn.c) hands its own to a response
 * and to a WebSocket session; a session (sim/ws.c) hands its own to each
 * of its turns.  The receiver calls through it and never names the giver;
 * <arg> is the giver's and goes first to every call.  The struct lives as
 * long as its giver, which outlives the receiver.
 */
struct sim_out {
    void *arg;
    /* 1: each write() is one WebSocket text message, no status line and no
     * framing (a session's turn); 0: HTTP bytes */
    int messages;
    /* queue bytes; they reach the socket split as set_split() says */
    void (*write)(void *arg, const void *p, size_t n);
    /* the same for the whole of <b> (left empty) */
    void (*write_buffer)(void *arg, struct evbuffer *b);
    /* a status line and headers: <clen> >= 0 gives Content-Length, -1 =
     * chunked, -2 = close-delimited; <extra> is "" or "Name: v\r\n...";
     * NULL when <messages> */
    void (*head)(void *arg, int status, const char *ctype, long long clen,
                 int keep_alive, const char *extra);
    /* a complete error answer, which ends the response: HTTP a JSON body
     * with <extra> headers; a turn the API's error event (the turn then
     * ends, the session goes on) */
    void (*reply_error)(void *arg, int status, const char *msg, int keep_alive,
                        const char *extra);
    void (*set_split)(void *arg, enum sim_split split, uint64_t seed);
    /* end the response in progress once every queued byte is written; a
     * turn: SIM_END_KEEPALIVE = the session goes on, TRUNCATE or RESET end
     * the connection; never frees the response inside the caller */
    void (*end)(void *arg, enum sim_end how);
};

/* ---- dialects (sim/dialect.c) --------------------------------------------- */

/* which field carries reasoning; each dialect reads the values it knows */
enum sim_rfield {
    SIM_RF_DEFAULT = 0,
    SIM_RF_REASONING_CONTENT,     /* openai chat: delta.reasoning_content */
    SIM_RF_REASONING,             /* openai chat: delta.reasoning */
    SIM_RF_THINK_TAGS,            /* <think>..</think> inside the answer text */
    SIM_RF_REASONING_TEXT,        /* responses: response.reasoning_text.delta */
    SIM_RF_SUMMARY                /* responses: reasoning_summary_text.delta */
};

/* the request's "sim" object, defaults filled in (see docs/simulator.md) */
struct sim_opts {
    int ttft_ms;
    int reasoning_tokens;
    int tokens;
    int gap_ms;
    int tokens_per_event;
    int prompt_tokens;
    int cached_tokens;            /* of prompt_tokens, reported as cached */
    int timings;                  /* openai dialects: llama.cpp's "timings" on the usage chunk */
    int usage;                    /* -1 = dialect default */
    int role_chunk;
    enum sim_rfield rfield;
    int status;
    int error_after;              /* -1 = off */
    int truncate_after;
    int reset_after;
    int drop_terminal;
    int hang;
    int headers_delay_ms;
    int chunked;
    int stamp;                    /* SSE: ": t=NS" comment line before each event */
    int audio_ttft_ms;            /* realtime: first audio delta; -1 = ttft_ms */
    int audio_tokens;             /* realtime: output audio tokens; -1 = tokens */
    int input_audio_tokens;       /* realtime: of prompt_tokens, audio */
    int beta;                     /* realtime: beta event names; -1 = the session's */
    enum sim_split split;
    uint64_t seed;
    char *replay;                 /* owned, NULL = generate */
};

struct sim_rt;

/* the generation state an emitter reads and updates */
struct sim_gen {
    /* where events go: one event (one write, one chunk when chunked; over a
     * WebSocket one text message), set by sim/resp.c */
    void (*event)(void *arg, const char *p, size_t n);
    void *event_arg;
    int ws;                       /* events go to a WebSocket: no SSE framing */
    const struct sim_opts *o;
    const char *model;            /* echoed back */
    char id[48];
    long long created;            /* unix seconds */
    int usage;                    /* resolved: report a usage event/field */
    int r_done, a_done;           /* reasoning/answer tokens already emitted */
    int block;                    /* open output block: 0 none, 1 reasoning, 2 answer */
    int nblocks;                  /* blocks opened so far (anthropic index) */
    int seq;                      /* responses: sequence_number */
    int finished_inline;          /* the last token event carried the finish */
    /* realtime */
    struct sim_rt *rt;            /* the session (borrowed), NULL over HTTP */
    int audio;                    /* audio output: transcript and audio deltas */
    int beta;                     /* beta event names */
    int au_done;                  /* answer tokens whose audio was sent */
    int item_open;                /* 0 none, 1 open, 2 done */
};

/* a Realtime session's state its responses read (owned by sim/ws.c) */
struct sim_rt {
    uint64_t event_seq;           /* server event ids: event_<n> */
    char conv_id[40];             /* conversation_id */
    int beta;                     /* OpenAI-Beta: realtime=v1 at the handshake */
};

/* how a route decides between streaming and one JSON body */
enum sim_stream_rule {
    SIM_STREAM_BODY = 0,          /* "stream" in the body, default false */
    SIM_STREAM_BODY_TRUE,         /* "stream" in the body, default true (ollama) */
    SIM_STREAM_ALWAYS,            /* by path */
    SIM_STREAM_NEVER
};

struct sim_route {
    const char *pattern;          /* exact path; '*' matches one segment part */
    enum sim_stream_rule stream;
};

/*
 * One API dialect.  Emitters queue events through g->event; NULL emitters
 * send nothing.  token(): <reasoning> 1 for reasoning text, <text> the
 * event's text, <ntok> tokens in it, <last> 1 on the final token event.
 */
struct sim_dialect {
    enum tt_api api;                      /* its name: tt_api_name() (SPEC 5) */
    struct sim_route routes[5];           /* pattern NULL ends the list */
    const char *stream_ctype;
    int usage_default_include;            /* 1: usage unless sim.usage=false */
    void (*head)(struct sim_gen *g);
    void (*token)(struct sim_gen *g, int reasoning, const char *text,
                  int ntok, int last);
    void (*finish)(struct sim_gen *g);
    void (*usage)(struct sim_gen *g);
    void (*error)(struct sim_gen *g);
    void (*terminal)(struct sim_gen *g);
    cJSON *(*whole)(struct sim_gen *g);   /* the non-streaming body */
    /* WebSocket-only dialects (realtime): one audio delta of <ntok> answer
     * tokens (a second track, see sim/resp.c), and response.cancel */
    void (*audio)(struct sim_gen *g, int ntok);
    void (*cancel)(struct sim_gen *g);
};

/* the dialect serving <path> (no query string), or NULL */
const struct sim_dialect *sim_dialect_route(const char *path, size_t len,
                                            enum sim_stream_rule *rule);
/* the dialect of <api> (WebSocket-only dialects have no routes), or NULL */
const struct sim_dialect *sim_dialect_of(enum tt_api api);

/* ---- generated responses (sim/resp.c) ------------------------------------ */

struct sim_resp;

/*
 * Start answering a generation request routed to dialect <d> (NULL for a
 * plain request that carries a "replay"), writing through <out> (the
 * connection's).  Parses the JSON body; replies 400 itself on bad "sim"
 * values.  The response is owned by the caller and freed with
 * sim_resp_free() once out->end() ended it.
 */
struct sim_resp *sim_resp_start(const struct sim_out *out, struct sim_req *q,
                                const struct sim_dialect *d, int stream_rule);
void sim_resp_free(struct sim_resp *r);

/* what a WebSocket turn starts from (sim/ws.c fills it in) */
struct sim_turn {
    cJSON *body;                  /* taken: the request's fields (model, ...) */
    cJSON *sim;                   /* taken: the "sim" object, or NULL */
    const char *model;            /* NULL: the body's "model" */
    struct sim_rt *rt;            /* realtime: the session's state, else NULL */
    int audio;                    /* realtime: audio among the output modalities */
};

/*
 * Start a turn of a WebSocket session writing through <out> (the
 * session's: out->messages set): the same options, schedule and emitters
 * as an HTTP stream, each event one text message.  NULL with the reason in
 * <err> (a bad "sim" option: the caller answers an error event); else the
 * turn runs until it calls out->end().  Owned by the session, freed with
 * sim_resp_free().
 */
struct sim_resp *sim_resp_start_ws(const struct sim_out *out,
                                   const struct sim_dialect *d,
                                   struct sim_turn *t, char *err, size_t elen);
/* response.cancel: stop the schedule, the dialect's cancel events, turn end;
 * 0, or -1 when the turn already ended */
int sim_resp_cancel(struct sim_resp *r);
/* its id ("sim00000042"; dialects prefix it: "resp_sim00000042") */
const char *sim_resp_id(const struct sim_resp *r);

/* ---- WebSocket sessions (sim/ws.c) ----------------------------------------- */

struct sim_ws;

/* 1 when <q> asks for one of our WebSocket APIs (an Upgrade on
 * /v1/responses or /v1/realtime); other Upgrades stay the echo tunnel */
int sim_ws_wanted(const struct sim_req *q);
/* answer the handshake through <conn> (the connection's output, kept for
 * the session's life): 101 and a new session (owned by the caller), or a
 * 400 with the reason and a close (NULL) */
struct sim_ws *sim_ws_accept(const struct sim_out *conn, const struct sim_req *q);
/* client bytes after the 101 (all of <in> is taken) */
void sim_ws_feed(struct sim_ws *s, struct evbuffer *in);
/* a turn is running or waiting: the peer's close counts as aborted */
int sim_ws_busy(const struct sim_ws *s);
void sim_ws_free(struct sim_ws *s);

/* ---- connections (sim/conn.c) --------------------------------------------- */

/* a new connection on accepted socket <fd> (listed in sim_srv.conns) */
void sim_conn_accept(evutil_socket_t fd);
void sim_conn_free_all(void);

#endif
