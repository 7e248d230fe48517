/*
 * WebSocket sessions measured turn by turn (SPEC section 13).
 *
 * A session is a tunnel (101 Switching Protocols) that carries a known API:
 * the OpenAI Responses API's WebSocket mode (/v1/responses) or Realtime
 * (/v1/realtime).  The client connection (proxy/http/conn.c) hands it the bytes
 * of both directions as they pass, after they are on their way; two frame
 * readers (proxy/decode/ws.h) turn them into messages, and this module turns
 * messages into turns:
 *
 *   client response.create             a turn begins; t0 = the end of that message
 *   (Realtime, server turn detection:  input_audio_buffer.committed begins it)
 *   server events while a turn is open the turn's stream (proxy/decode/stream.h),
 *                                      decoded like the SSE Responses API's
 *                                      events, or by proxy/decode/dec_realtime.c
 *   a terminal event or an error       the turn ends: its record goes out
 *
 * A response.create that comes while a turn runs waits (up to
 * TT_WS_PENDING_MAX) and begins its turn when the one before ends.  A
 * close frame, or the tunnel's close, ends a turn still open: cancelled
 * when the client's side closed first, truncated when the server's did.  Frames that break RFC 6455 stop the decoding
 * for good (the bytes still pass): the open turn and the session end with
 * stream_parse_error.
 *
 * Turns are tt_requests of their own, owned here while open and handed to
 * the done() callback when they end; the session's own record stays the
 * tunnel's request (<sess>), which this module fills in (turns, messages).
 */
#ifndef TT_WSTURN_H
#define TT_WSTURN_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/request.h"
#include "proxy/decode/think.h"

struct evbuffer;
struct tt_head;
struct tt_ws_sess;

#define TT_WS_PENDING_MAX 8

struct tt_ws_sess_ops {
    void (*begin)(void *arg, struct tt_request *turn);  /* a turn began */
    void (*done)(void *arg, struct tt_request *turn);   /* record it (borrowed) */
};

/* the API a tunnel carries when it is a WebSocket one this module reads
 * (the request's api, its head and the 101 response's), else TT_API_OTHER */
enum tt_api tt_ws_session_api(enum tt_api api, const struct tt_head *rsh);

/*
 * A session over the tunnel whose record is <sess> (borrowed until
 * tt_ws_sess_free), for the 101 response head <rsh> (its extensions).
 * <max_msg> bounds a decoded message (max_event_bytes).  NULL when out of
 * memory.
 */
struct tt_ws_sess *tt_ws_sess_new(struct tt_request *sess, enum tt_api api,
                                  const struct tt_head *rsh, size_t max_msg,
                                  enum tt_think_mode think,
                                  const struct tt_ws_sess_ops *ops, void *arg);

/* the first <n> bytes of <buf>, from the client (<from_client>) or the
 * server, read at <now>; a side read, <buf> is not changed */
void tt_ws_sess_feed(struct tt_ws_sess *s, int from_client,
                     struct evbuffer *buf, size_t n, uint64_t now);

/* the tunnel closed at <now>; <client_left>: by the client's side */
void tt_ws_sess_end(struct tt_ws_sess *s, int client_left, uint64_t now);

void tt_ws_sess_free(struct tt_ws_sess *s);

#endif
