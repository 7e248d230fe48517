/*
 * One generated or replayed response of tokentap-sim.
 *
 * Owns: reading the request's "sim" options (with their defaults), loading a
 * replay file, and the schedule.  Every event is timed from the instant the
 * request was complete (t_start), never from the previous event, so delays
 * do not drift:
 *
 *   t_start + headers_delay_ms        status line, headers, dialect head
 *                                     (role chunk, message_start, ...)
 *   t_first = t_start + max(ttft_ms, headers_delay_ms)
 *   t_first + k * gap_ms              token event k (reasoning events first)
 *   with the last token event         finish, usage, terminal marker
 *
 * A non-streaming response is one JSON body at t_first + (events-1)*gap_ms.
 * Faults (status, error_after, truncate_after, reset_after, drop_terminal,
 * hang) are applied here; how the connection ends is its owner's job.
 * What each event looks like is the dialect's (sim/dialect.c): its emitters
 * hand each event to resp_event() through the sim_gen.
 *
 * The sink is the struct sim_out the owner hands over at start, and this
 * file names no file above it: an HTTP body (the connection's output: a
 * status line, chunk framing, the dialect's SSE or NDJSON), or a turn of a
 * WebSocket session (the session's output, out->messages set), where each
 * event is one text message holding the event's JSON alone and the "head"
 * is the dialect's first events (no status line).  Either ends with
 * out->end(): the end of the body, or of the turn.
 *
 * The second track (realtime audio): a dialect with an audio emitter gets
 * one audio event per answer token event, audio event k at
 *   t_afirst + (reasoning events + k) * gap_ms,
 *   t_afirst = t_start + max(audio_ttft_ms, headers_delay_ms)
 * so with audio_ttft_ms = ttft_ms (the default) each audio delta follows
 * its transcript delta at once.  The timer always aims at the earlier of
 * the two tracks' next events; finish comes after both are done.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/sim.h"

enum phase { PH_HEAD = 0, PH_WHOLE, PH_TOKENS, PH_REPLAY, PH_DONE };

struct sim_resp {
    const struct sim_out *out;        /* borrowed: our owner's output (it owns us) */
    const struct sim_dialect *d;      /* NULL when replaying on another path */
    struct sim_opts o;
    struct sim_gen g;
    cJSON *body;                      /* the request JSON, owned (g.model points in) */
    char model[160];
    int stream;
    int chunked;                      /* chunk framing on a streamed body */
    int keep_alive;                   /* the connection survives a normal end */
    enum phase phase;
    uint64_t t_start, t_first, t_afirst;
    int r_events, ev_total, ev_sent;
    int au_total, au_sent;            /* the second track (audio) */
    struct event *timer;              /* owned */
    /* replay: event i is rbuf[roff[i] .. roff[i+1]) */
    char *rbuf;
    size_t *roff;
    int rn;
    const char *rctype;
};

/* ---- the "sim" object ------------------------------------------------------ */

enum opt_kind { OPT_INT, OPT_BOOL };

static const struct opt_desc {
    const char *key;
    enum opt_kind kind;
    size_t off;
    int min, max;
} opt_table[] = {
    { "ttft_ms",          OPT_INT,  offsetof(struct sim_opts, ttft_ms), 0, 3600000 },
    { "reasoning_tokens", OPT_INT,  offsetof(struct sim_opts, reasoning_tokens), 0, 10000000 },
    { "tokens",           OPT_INT,  offsetof(struct sim_opts, tokens), 0, 10000000 },
    { "gap_ms",           OPT_INT,  offsetof(struct sim_opts, gap_ms), 0, 3600000 },
    { "tokens_per_event", OPT_INT,  offsetof(struct sim_opts, tokens_per_event), 1, 1000000 },
    { "prompt_tokens",    OPT_INT,  offsetof(struct sim_opts, prompt_tokens), 0, 100000000 },
    { "cached_tokens",    OPT_INT,  offsetof(struct sim_opts, cached_tokens), 0, 100000000 },
    { "timings",          OPT_BOOL, offsetof(struct sim_opts, timings), 0, 1 },
    { "usage",            OPT_BOOL, offsetof(struct sim_opts, usage), 0, 1 },
    { "role_chunk",       OPT_BOOL, offsetof(struct sim_opts, role_chunk), 0, 1 },
    { "status",           OPT_INT,  offsetof(struct sim_opts, status), 100, 599 },
    { "error_after",      OPT_INT,  offsetof(struct sim_opts, error_after), 0, 10000000 },
    { "truncate_after",   OPT_INT,  offsetof(struct sim_opts, truncate_after), 0, 10000000 },
    { "reset_after",      OPT_INT,  offsetof(struct sim_opts, reset_after), 0, 10000000 },
    { "drop_terminal",    OPT_BOOL, offsetof(struct sim_opts, drop_terminal), 0, 1 },
    { "hang",             OPT_BOOL, offsetof(struct sim_opts, hang), 0, 1 },
    { "headers_delay_ms", OPT_INT,  offsetof(struct sim_opts, headers_delay_ms), 0, 3600000 },
    { "chunked",          OPT_BOOL, offsetof(struct sim_opts, chunked), 0, 1 },
    { "stamp",            OPT_BOOL, offsetof(struct sim_opts, stamp), 0, 1 },
    { "audio_ttft_ms",    OPT_INT,  offsetof(struct sim_opts, audio_ttft_ms), 0, 3600000 },
    { "audio_tokens",     OPT_INT,  offsetof(struct sim_opts, audio_tokens), 0, 100000000 },
    { "input_audio_tokens", OPT_INT, offsetof(struct sim_opts, input_audio_tokens), 0, 100000000 },
    { "beta",             OPT_BOOL, offsetof(struct sim_opts, beta), 0, 1 },
};

static const char *const rfield_names[] = {
    [SIM_RF_DEFAULT] = "default",
    [SIM_RF_REASONING_CONTENT] = "reasoning_content",
    [SIM_RF_REASONING] = "reasoning",
    [SIM_RF_THINK_TAGS] = "think_tags",
    [SIM_RF_REASONING_TEXT] = "reasoning_text",
    [SIM_RF_SUMMARY] = "reasoning_summary_text",
};

static void opts_default(struct sim_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->ttft_ms = 50;
    o->tokens = 16;
    o->gap_ms = 10;
    o->tokens_per_event = 1;
    o->prompt_tokens = 10;
    o->usage = -1;
    o->role_chunk = 1;
    o->status = 200;
    o->error_after = o->truncate_after = o->reset_after = -1;
    o->chunked = 1;
    o->seed = 1;
    o->audio_ttft_ms = o->audio_tokens = o->beta = -1;
}

/* fills <o> from the "sim" object <s>; 0, or -1 with the reason in <err> */
static int opts_parse(struct sim_opts *o, const cJSON *s, char *err, size_t elen)
{
    const cJSON *it;
    size_t i;

    if (!s)
        return 0;
    if (!cJSON_IsObject(s)) {
        snprintf(err, elen, "\"sim\" must be an object");
        return -1;
    }
    cJSON_ArrayForEach(it, s) {
        const char *k = it->string;
        for (i = 0; i < sizeof(opt_table) / sizeof(opt_table[0]); i++)
            if (!strcmp(k, opt_table[i].key))
                break;
        if (i < sizeof(opt_table) / sizeof(opt_table[0])) {
            const struct opt_desc *d = &opt_table[i];
            int *dst = (int *)(void *)((char *)o + d->off);
            if (d->kind == OPT_BOOL) {
                if (!cJSON_IsBool(it)) {
                    snprintf(err, elen, "sim.%s must be true or false", k);
                    return -1;
                }
                *dst = cJSON_IsTrue(it);
            } else {
                double v = it->valuedouble;
                if (!cJSON_IsNumber(it) || v != (double)(long long)v ||
                    v < d->min || v > d->max) {
                    snprintf(err, elen, "sim.%s must be an integer in [%d, %d]",
                             k, d->min, d->max);
                    return -1;
                }
                *dst = (int)v;
            }
        } else if (!strcmp(k, "seed")) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0) {
                snprintf(err, elen, "sim.seed must be a non-negative integer");
                return -1;
            }
            o->seed = (uint64_t)it->valuedouble;
        } else if (!strcmp(k, "split")) {
            const char *v = cJSON_GetStringValue(it);
            if (v && !strcmp(v, "none"))
                o->split = SIM_SPLIT_NONE;
            else if (v && !strcmp(v, "random"))
                o->split = SIM_SPLIT_RANDOM;
            else if (v && !strcmp(v, "byte"))
                o->split = SIM_SPLIT_BYTE;
            else {
                snprintf(err, elen, "sim.split must be \"none\", \"random\" or \"byte\"");
                return -1;
            }
        } else if (!strcmp(k, "reasoning_field")) {
            const char *v = cJSON_GetStringValue(it);
            size_t n = sizeof(rfield_names) / sizeof(rfield_names[0]);
            for (i = 1; v && i < n; i++)
                if (!strcmp(v, rfield_names[i]))
                    break;
            if (!v || i == n) {
                snprintf(err, elen, "sim.reasoning_field must be one of "
                         "reasoning_content, reasoning, think_tags, "
                         "reasoning_text, reasoning_summary_text");
                return -1;
            }
            o->rfield = (enum sim_rfield)i;
        } else if (!strcmp(k, "replay")) {
            const char *v = cJSON_GetStringValue(it);
            if (!v || !*v) {
                snprintf(err, elen, "sim.replay must be a file name");
                return -1;
            }
            free(o->replay);
            o->replay = strdup(v);
        } else {
            snprintf(err, elen, "unknown sim option \"%.60s\"", k);
            return -1;
        }
    }
    return 0;
}

/* ---- replay files ---------------------------------------------------------- */

static int add_off(struct sim_resp *r, size_t off, size_t *cap)
{
    if ((size_t)r->rn + 1 >= *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        size_t *t = realloc(r->roff, nc * sizeof(*t));
        if (!t)
            return -1;
        r->roff = t;
        *cap = nc;
    }
    r->roff[++r->rn] = off;
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/*
 * Load <path> and cut it into events: .sse (and anything else) verbatim,
 * one event per blank-line-terminated block (LF LF or CRLF CRLF); .ndjson
 * one event per line; .jsonl one SSE data payload per line, sent as
 * "data: <line>\n\n".  Returns 0 or -1 with the reason in <err>.
 */
static int replay_load(struct sim_resp *r, const char *path, char *err, size_t elen)
{
    FILE *f = fopen(path, "rb");
    char *raw = NULL;
    size_t len = 0, cap = 0, i, start;
    long sz;
    int jsonl = ends_with(path, ".jsonl"), ndjson = ends_with(path, ".ndjson");

    if (!f) {
        snprintf(err, elen, "sim.replay %.200s: %s", path, strerror(errno));
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || sz > (256L << 20) ||
        fseek(f, 0, SEEK_SET) != 0 || !(raw = malloc((size_t)sz + 1)) ||
        fread(raw, 1, (size_t)sz, f) != (size_t)sz) {
        snprintf(err, elen, "sim.replay %.200s: cannot read", path);
        fclose(f);
        free(raw);
        return -1;
    }
    fclose(f);
    len = (size_t)sz;
    r->rn = 0;
    r->roff = malloc(64 * sizeof(*r->roff));
    if (!r->roff) {
        free(raw);
        return -1;
    }
    cap = 64;
    r->roff[0] = 0;

    if (jsonl) {
        /* rebuild as SSE: "data: " + line + "\n\n" */
        struct evbuffer *b = evbuffer_new();
        size_t out = 0;
        for (start = 0; start < len; start = i + 1) {
            size_t e;
            for (i = start; i < len && raw[i] != '\n'; i++)
                ;
            e = i;
            if (e > start && raw[e - 1] == '\r')
                e--;
            if (e == start)
                continue;
            evbuffer_add(b, "data: ", 6);
            evbuffer_add(b, raw + start, e - start);
            evbuffer_add(b, "\n\n", 2);
            out += 6 + (e - start) + 2;
            add_off(r, out, &cap);
        }
        free(raw);
        len = evbuffer_get_length(b);
        raw = malloc(len + 1);
        evbuffer_remove(b, raw, len);
        evbuffer_free(b);
        r->rctype = "text/event-stream";
    } else if (ndjson) {
        for (i = 0; i < len; i++)
            if (raw[i] == '\n')
                add_off(r, i + 1, &cap);
        r->rctype = "application/x-ndjson";
    } else {
        for (i = 0; i + 1 < len; i++) {
            if (raw[i] == '\n' && raw[i + 1] == '\n') {
                add_off(r, i + 2, &cap);
                i++;
            } else if (raw[i] == '\r' && i + 3 < len && raw[i + 1] == '\n' &&
                       raw[i + 2] == '\r' && raw[i + 3] == '\n') {
                add_off(r, i + 4, &cap);
                i += 3;
            }
        }
        r->rctype = "text/event-stream";
    }
    if (r->roff[r->rn] < len)
        add_off(r, len, &cap);   /* bytes after the last separator */
    r->rbuf = raw;
    return 0;
}

/* ---- output helpers -------------------------------------------------------- */

/* queue one event (one write, one chunk when chunked; over a WebSocket one
 * text message); the dialects' g->event */
static void resp_event(void *arg, const char *p, size_t n)
{
    struct sim_resp *r = arg;
    const struct sim_out *out = r->out;

    if (n == 0)
        return;
    if (out->messages) {
        out->write(out->arg, p, n);
    } else if (r->chunked) {
        char hex[24];
        int hn = snprintf(hex, sizeof(hex), "%zx\r\n", n);
        out->write(out->arg, hex, (size_t)hn);
        out->write(out->arg, p, n);
        out->write(out->arg, "\r\n", 2);
    } else {
        out->write(out->arg, p, n);
    }
}

static void at(struct sim_resp *r, uint64_t target)
{
    uint64_t now = sim_now_ns(), d = target > now ? target - now : 0;
    struct timeval tv;

    tv.tv_sec = (time_t)(d / 1000000000ull);
    tv.tv_usec = (suseconds_t)((d % 1000000000ull) / 1000);
    evtimer_add(r->timer, &tv);
}

static uint64_t ms(int v)
{
    return (uint64_t)v * 1000000ull;
}

/* the response ends as <how>: the connection's end, or the turn's */
static void resp_end(struct sim_resp *r, enum sim_end how)
{
    r->phase = PH_DONE;
    r->out->end(r->out->arg, how);
}

/* the body is complete and well framed (a WebSocket turn: over) */
static void end_body(struct sim_resp *r)
{
    if (r->out->messages) {
        resp_end(r, SIM_END_KEEPALIVE);
        return;
    }
    if (r->chunked)
        r->out->write(r->out->arg, "0\r\n\r\n", 5);
    resp_end(r, r->chunked && r->keep_alive ? SIM_END_KEEPALIVE : SIM_END_CLOSE);
}

/* faults that fire after <n> token (or replay) events; 1 when one fired */
static int fault(struct sim_resp *r, int n)
{
    if (r->o.error_after == n && r->d && r->d->error) {
        r->d->error(&r->g);
        end_body(r);
        return 1;
    }
    if (r->o.truncate_after == n) {
        resp_end(r, SIM_END_TRUNCATE);
        return 1;
    }
    if (r->o.reset_after == n) {
        resp_end(r, SIM_END_RESET);
        return 1;
    }
    return 0;
}

static void send_head(struct sim_resp *r, const char *ctype)
{
    r->out->head(r->out->arg, 200, ctype, r->chunked ? -1 : -2,
                 r->chunked && r->keep_alive, "");
}

/* ---- the schedule ----------------------------------------------------------- */

static void emit_token_event(struct sim_resp *r)
{
    struct sim_gen *g = &r->g;
    int reasoning = r->ev_sent < r->r_events, from, n;
    char *text;

    if (reasoning) {
        from = g->r_done;
        n = r->o.reasoning_tokens - from;
    } else {
        from = g->a_done;
        n = r->o.tokens - from;
    }
    if (n > r->o.tokens_per_event)
        n = r->o.tokens_per_event;
    if (reasoning)
        g->r_done += n;
    else
        g->a_done += n;
    text = sim_words_str(reasoning, from, n);
    r->d->token(g, reasoning, text ? text : "", n, r->ev_sent + 1 == r->ev_total);
    free(text);
    r->ev_sent++;
}

/* the second track's next event: audio for answer event au_sent */
static void emit_audio_event(struct sim_resp *r)
{
    int tpe = r->o.tokens_per_event, from = r->au_sent * tpe;
    int n = r->o.tokens - from;

    if (n > tpe)
        n = tpe;
    r->g.au_done += n;
    r->d->audio(&r->g, n);
    r->au_sent++;
}

/* when the next event of either track is due (UINT64_MAX: both done) */
static uint64_t next_text(const struct sim_resp *r)
{
    return r->ev_sent < r->ev_total ?
           r->t_first + ms(r->o.gap_ms) * (uint64_t)r->ev_sent : UINT64_MAX;
}

static uint64_t next_audio(const struct sim_resp *r)
{
    return r->au_sent < r->au_total ?
           r->t_afirst + ms(r->o.gap_ms) * (uint64_t)(r->r_events + r->au_sent)
           : UINT64_MAX;
}

static void send_whole(struct sim_resp *r)
{
    const struct sim_out *out = r->out;
    cJSON *j;
    char *s;
    size_t len;

    r->g.r_done = r->o.reasoning_tokens;
    r->g.a_done = r->o.tokens;
    j = r->d->whole(&r->g);
    s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!s) {
        out->reply_error(out->arg, 500, "tokentap-sim: out of memory", 0, "");
        return;
    }
    len = strlen(s);
    r->phase = PH_DONE;
    if (r->o.truncate_after >= 0 || r->o.reset_after >= 0) {
        /* headers promise the whole body; half of it arrives */
        out->head(out->arg, 200, "application/json", (long long)len, 1, "");
        out->write(out->arg, s, len / 2);
        out->end(out->arg, r->o.truncate_after >= 0 ? SIM_END_TRUNCATE
                                                    : SIM_END_RESET);
    } else {
        out->head(out->arg, 200, "application/json", (long long)len,
                  r->keep_alive, "");
        out->write(out->arg, s, len);
        out->end(out->arg, r->keep_alive ? SIM_END_KEEPALIVE : SIM_END_CLOSE);
    }
    free(s);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sim_resp *r = arg;
    (void)fd; (void)what;

    switch (r->phase) {
    case PH_HEAD:
        if (r->o.status != 200) {
            /* HTTP: the error body; a turn: the API's error event */
            char msg[64];
            snprintf(msg, sizeof(msg), "simulated error (status %d)", r->o.status);
            r->phase = PH_DONE;
            r->out->reply_error(r->out->arg, r->o.status, msg, r->keep_alive, "");
            return;
        }
        if (r->out->messages) {
            /* a turn has no status line: its first events */
            if (r->d->head)
                r->d->head(&r->g);
            r->phase = PH_TOKENS;
            {
                /* the earlier track's first event (t_first when none) */
                uint64_t tt = next_text(r), ta = next_audio(r);
                at(r, tt < ta ? tt : ta < UINT64_MAX ? ta : r->t_first);
            }
            return;
        }
        if (r->rbuf) {
            send_head(r, r->rctype);
            r->phase = PH_REPLAY;
            at(r, r->t_first);
        } else if (!r->stream) {
            r->phase = PH_WHOLE;
            at(r, r->t_first + ms(r->o.gap_ms) *
                  (uint64_t)(r->ev_total > 0 ? r->ev_total - 1 : 0));
        } else {
            send_head(r, r->d->stream_ctype);
            if (r->d->head)
                r->d->head(&r->g);
            r->phase = PH_TOKENS;
            at(r, r->t_first);
        }
        return;
    case PH_WHOLE:
        send_whole(r);
        return;
    case PH_TOKENS: {
        uint64_t tt = next_text(r), ta = next_audio(r);

        if (r->ev_sent == 0 && fault(r, 0))
            return;
        /* the earlier track first; on a tie the text, then its audio */
        if (tt != UINT64_MAX && tt <= ta) {
            emit_token_event(r);
            if (fault(r, r->ev_sent))
                return;
        }
        if (ta != UINT64_MAX && ta <= tt)
            emit_audio_event(r);
        tt = next_text(r);
        ta = next_audio(r);
        if (tt != UINT64_MAX || ta != UINT64_MAX) {
            at(r, tt < ta ? tt : ta);
            return;
        }
        if (r->d->finish)
            r->d->finish(&r->g);
        if (r->d->usage && r->g.usage)
            r->d->usage(&r->g);
        if (r->d->terminal && !r->o.drop_terminal)
            r->d->terminal(&r->g);
        end_body(r);
        return;
    }
    case PH_REPLAY:
        if (r->ev_sent == 0 && fault(r, 0))
            return;
        if (r->ev_sent < r->rn) {
            size_t a = r->roff[r->ev_sent], b = r->roff[r->ev_sent + 1];
            resp_event(r, r->rbuf + a, b - a);
            r->ev_sent++;
            if (fault(r, r->ev_sent))
                return;
        }
        if (r->ev_sent < r->rn) {
            at(r, r->t_first + ms(r->o.gap_ms) * (uint64_t)r->ev_sent);
            return;
        }
        end_body(r);
        return;
    case PH_DONE:
    default:
        return;
    }
}

/* ---- start and free ----------------------------------------------------------- */

static void model_from_path(struct sim_resp *r, const char *url, size_t plen)
{
    const char *m = NULL, *e;
    size_t i;

    for (i = 0; i + 7 <= plen; i++)
        if (!memcmp(url + i, "models/", 7))
            m = url + i + 7;
    if (!m)
        return;
    e = memchr(m, ':', plen - (size_t)(m - url));
    if (!e)
        e = url + plen;
    snprintf(r->model, sizeof(r->model), "%.*s", (int)(e - m), m);
}

/* the generation state and the schedule's numbers, once the options and
 * the model are known; 0, or -1 out of memory */
static int resp_ready(struct sim_resp *r, const struct sim_dialect *d)
{
    r->g.event = resp_event;
    r->g.event_arg = r;
    r->g.ws = r->out->messages;
    r->g.o = &r->o;
    r->g.model = r->model;
    r->g.created = (long long)time(NULL);
    snprintf(r->g.id, sizeof(r->g.id), "sim%08llu",
             (unsigned long long)++sim_srv.next_id);
    if (r->o.usage >= 0) {
        r->g.usage = r->o.usage;
    } else if (d && d->usage_default_include) {
        r->g.usage = 1;
    } else {
        const cJSON *so = cJSON_GetObjectItemCaseSensitive(r->body, "stream_options");
        r->g.usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
    }
    if (r->o.audio_ttft_ms < 0)
        r->o.audio_ttft_ms = r->o.ttft_ms;
    if (sim_srv.latency_scale > 0 && sim_srv.latency_scale != 1.0) {
        /* a slower (or faster) server for the same requests: shadow demos */
        r->o.ttft_ms = (int)(r->o.ttft_ms * sim_srv.latency_scale + 0.5);
        r->o.audio_ttft_ms = (int)(r->o.audio_ttft_ms * sim_srv.latency_scale + 0.5);
        r->o.gap_ms = (int)(r->o.gap_ms * sim_srv.latency_scale + 0.5);
        r->o.headers_delay_ms = (int)(r->o.headers_delay_ms * sim_srv.latency_scale + 0.5);
    }
    r->r_events = (r->o.reasoning_tokens + r->o.tokens_per_event - 1) /
                  r->o.tokens_per_event;
    r->ev_total = r->r_events + (r->o.tokens + r->o.tokens_per_event - 1) /
                                r->o.tokens_per_event;
    if (d && d->audio && r->g.audio)
        r->au_total = r->ev_total - r->r_events;
    r->t_first = r->t_start + ms(r->o.ttft_ms > r->o.headers_delay_ms ?
                                 r->o.ttft_ms : r->o.headers_delay_ms);
    r->t_afirst = r->t_start + ms(r->o.audio_ttft_ms > r->o.headers_delay_ms ?
                                  r->o.audio_ttft_ms : r->o.headers_delay_ms);
    r->timer = evtimer_new(sim_srv.base, on_timer, r);
    return r->timer ? 0 : -1;
}

/* the first timer (or none: hang) */
static void resp_go(struct sim_resp *r)
{
    if (sim_srv.log)
        fprintf(stderr, "tokentap-sim:   -> %s %s, %d reasoning + %d answer "
                "tokens in %d events%s%s\n",
                r->d ? tt_api_name(r->d->api) : "replay",
                r->out->messages ? "websocket" : r->stream ? "stream" : "json",
                r->o.reasoning_tokens, r->o.tokens, r->ev_total,
                r->o.hang ? ", hang" : "", r->rbuf ? ", replay" : "");
    if (r->o.hang)
        return;   /* never answer; the peer's close counts as aborted */
    at(r, r->t_start + ms(r->o.headers_delay_ms));
}

struct sim_resp *sim_resp_start(const struct sim_out *out, struct sim_req *q,
                                const struct sim_dialect *d, int stream_rule)
{
    struct sim_resp *r = calloc(1, sizeof(*r));
    size_t blen = evbuffer_get_length(q->body);
    const cJSON *sv, *m;
    char err[320];
    int ka = q->keep_alive;

    if (!r) {
        out->reply_error(out->arg, 500, "tokentap-sim: out of memory", 0, "");
        return NULL;
    }
    r->out = out;
    r->d = d;
    r->t_start = sim_now_ns();
    opts_default(&r->o);
    snprintf(r->model, sizeof(r->model), "sim-model");

    if (blen) {
        const char *p = (const char *)evbuffer_pullup(q->body, -1);
        r->body = cJSON_ParseWithLength(p, blen);
        if (!r->body || !cJSON_IsObject(r->body)) {
            if (!d) {
                sim_resp_free(r);
                out->reply_error(out->arg, 404, "no such endpoint on tokentap-sim",
                                 ka, "");
                return NULL;
            }
            sim_resp_free(r);
            out->reply_error(out->arg, 400, "request body is not a JSON object",
                             ka, "");
            return NULL;
        }
    }
    if (opts_parse(&r->o, cJSON_GetObjectItemCaseSensitive(r->body, "sim"),
                   err, sizeof(err)) != 0) {
        sim_resp_free(r);
        out->reply_error(out->arg, 400, err, ka, "");
        return NULL;
    }
    if (!d && !r->o.replay) {
        sim_resp_free(r);
        out->reply_error(out->arg, 404, "no such endpoint on tokentap-sim", ka, "");
        return NULL;
    }
    if (r->o.replay && replay_load(r, r->o.replay, err, sizeof(err)) != 0) {
        sim_resp_free(r);
        out->reply_error(out->arg, 400, err, ka, "");
        return NULL;
    }

    m = cJSON_GetObjectItemCaseSensitive(r->body, "model");
    if (cJSON_IsString(m))
        snprintf(r->model, sizeof(r->model), "%s", m->valuestring);
    else
        model_from_path(r, q->url, q->path_len);

    sv = cJSON_GetObjectItemCaseSensitive(r->body, "stream");
    switch (stream_rule) {
    case SIM_STREAM_BODY:      r->stream = cJSON_IsTrue(sv); break;
    case SIM_STREAM_BODY_TRUE: r->stream = !cJSON_IsFalse(sv); break;
    case SIM_STREAM_ALWAYS:    r->stream = 1; break;
    default:                   r->stream = 0; break;
    }
    if (r->rbuf)
        r->stream = 1;
    r->keep_alive = ka;
    r->chunked = r->stream && r->o.chunked && q->http_minor >= 1;

    if (resp_ready(r, d) != 0) {
        sim_resp_free(r);
        out->reply_error(out->arg, 500, "tokentap-sim: out of memory", 0, "");
        return NULL;
    }
    out->set_split(out->arg, r->o.split, r->o.seed);
    resp_go(r);
    return r;
}

struct sim_resp *sim_resp_start_ws(const struct sim_out *out,
                                   const struct sim_dialect *d,
                                   struct sim_turn *t, char *err, size_t elen)
{
    struct sim_resp *r = calloc(1, sizeof(*r));
    const cJSON *m;
    int rc;

    if (!r) {
        cJSON_Delete(t->body);
        cJSON_Delete(t->sim);
        snprintf(err, elen, "tokentap-sim: out of memory");
        return NULL;
    }
    r->out = out;
    r->d = d;
    r->body = t->body;   /* ours from here on, freed with the response */
    r->t_start = sim_now_ns();
    r->stream = 1;
    opts_default(&r->o);
    rc = opts_parse(&r->o, t->sim, err, elen);
    cJSON_Delete(t->sim);
    t->body = t->sim = NULL;
    if (rc != 0) {
        sim_resp_free(r);
        return NULL;
    }
    if (r->o.replay) {
        snprintf(err, elen, "sim.replay is not supported over WebSocket");
        sim_resp_free(r);
        return NULL;
    }
    m = cJSON_GetObjectItemCaseSensitive(r->body, "model");
    snprintf(r->model, sizeof(r->model), "%s",
             t->model ? t->model : cJSON_IsString(m) ? m->valuestring : "sim-model");
    r->g.rt = t->rt;
    r->g.audio = t->rt && t->audio;
    r->g.beta = t->rt && (r->o.beta >= 0 ? r->o.beta : t->rt->beta);
    if (resp_ready(r, d) != 0) {
        snprintf(err, elen, "tokentap-sim: out of memory");
        sim_resp_free(r);
        return NULL;
    }
    out->set_split(out->arg, r->o.split, r->o.seed);
    resp_go(r);
    return r;
}

int sim_resp_cancel(struct sim_resp *r)
{
    if (!r || r->phase == PH_DONE)
        return -1;
    evtimer_del(r->timer);
    if (r->phase == PH_HEAD && r->d && r->d->head)
        r->d->head(&r->g);   /* cancelled before its first events (hang) */
    if (r->d && r->d->cancel)
        r->d->cancel(&r->g);
    end_body(r);
    return 0;
}

const char *sim_resp_id(const struct sim_resp *r)
{
    return r ? r->g.id : "";
}

void sim_resp_free(struct sim_resp *r)
{
    if (!r)
        return;
    if (r->timer)
        event_free(r->timer);
    cJSON_Delete(r->body);
    free(r->o.replay);
    free(r->rbuf);
    free(r->roff);
    free(r);
}
