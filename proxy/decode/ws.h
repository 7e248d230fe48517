/*
 * WebSocket frames (RFC 6455) and permessage-deflate (RFC 7692).
 *
 * Reading: one tt_ws_reader per direction of a session, fed the bytes as
 * they pass through the tunnel (a side read: nothing is changed or held
 * back).  It unmasks client frames, reassembles fragmented messages (control
 * frames may come between fragments), inflates compressed messages with
 * zlib (context takeover or not, the negotiated window bits), and calls back
 * once per complete message and once per control frame.  A byte stream that
 * breaks RFC 6455 stops its reader for good (r->why says why); the proxy
 * forwards the bytes all the same, since it is not the endpoint.
 *
 * Bounds: a message's payload is kept up to <max_msg> bytes (inflated);
 * a longer one is still read (and inflated, so that a shared compression
 * context stays right) but handed over with over = 1 and no data.  zlib's
 * memory per reader is its inflate state plus a window of 2^bits bytes.
 *
 * Writing (the simulator, tests): frame heads, masking, a deflater.
 *
 * Only permessage-deflate gives meaning to RSV1; a frame with any RSV bit
 * the reader cannot explain stops it ("RSV1 set without permessage-deflate"),
 * which is also what happens when the server accepted some other extension
 * that sets them (tt_ws_extensions ignores other extensions): the caller
 * should then count the session as not decodable, not as broken.
 */
#ifndef TT_WS_H
#define TT_WS_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

#define TT_WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

enum tt_ws_op {
    TT_WS_CONT = 0x0, TT_WS_TEXT = 0x1, TT_WS_BINARY = 0x2,
    TT_WS_CLOSE = 0x8, TT_WS_PING = 0x9, TT_WS_PONG = 0xA
};

/* permessage-deflate as the server's handshake response accepted it */
struct tt_ws_deflate {
    unsigned      on:1;                         /* negotiated */
    unsigned      server_no_context_takeover:1;
    unsigned      client_no_context_takeover:1;
    unsigned char server_max_window_bits;       /* 8..15; 15 when not said */
    unsigned char client_max_window_bits;       /* 8..15; 15 when not said */
};

/*
 * Read a Sec-WebSocket-Extensions value of a server's 101 response: 0 with
 * <d> filled (d->on = 0 when permessage-deflate is not among the accepted
 * extensions), -1 when the value or its permessage-deflate parameters are
 * malformed (RFC 7692 section 7.1: unknown or repeated parameters, window
 * bits outside 8..15).
 */
int tt_ws_extensions(const char *v, size_t len, struct tt_ws_deflate *d);

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: 28 characters and a NUL */
void tt_ws_accept(const char *key, size_t len, char out[29]);

/* a complete message or control frame, as a reader hands it over */
struct tt_ws_msg {
    enum tt_ws_op        op;        /* TEXT, BINARY, CLOSE, PING or PONG */
    const unsigned char *data;      /* payload, unmasked and inflated; valid
                                     * during the callback only; NULL when over */
    size_t               len;       /* its length (inflated, or as far as read when over) */
    unsigned             compressed:1;  /* sent with RSV1 (permessage-deflate) */
    unsigned             over:1;        /* longer than max_msg: not kept */
    uint16_t             close_code;    /* CLOSE: its status code, 0 when none */
};

typedef void tt_ws_msg_fn(void *arg, const struct tt_ws_msg *m);

struct z_stream_s;

struct tt_ws_reader {
    /* read by callers */
    const char     *why;            /* NULL, or why the reader stopped (static text) */
    uint64_t        frames, messages, overs;
    unsigned        closed:1;       /* a close frame was read */

    /* internal (proxy/decode/ws.c) */
    unsigned        from_client:1;  /* frames must be masked */
    unsigned        in_msg:1;       /* a data message is open (first frame read) */
    unsigned        msg_comp:1;     /* the open message is compressed */
    unsigned        msg_over:1;
    unsigned        fin:1, rsv1:1, masked:1;
    unsigned        no_takeover:1;  /* the sender resets its context per message */
    unsigned        deflate_on:1;
    unsigned char   window_bits;
    unsigned char   op;             /* the frame's opcode */
    unsigned char   msg_op;         /* the open message's opcode */
    unsigned char   hlen, hneed;    /* head bytes gathered, needed */
    unsigned char   head[14];
    unsigned char   mask[4];
    uint64_t        left;           /* payload bytes of the frame still to come */
    uint64_t        pos;            /* payload bytes of the frame read (mask offset) */
    unsigned char   ctl[125];       /* a control frame's payload */
    unsigned char   ctl_len;
    unsigned char  *buf;            /* owned: the message so far */
    size_t          len, cap, max;
    size_t          seen;           /* the message's bytes (inflated) */
    struct z_stream_s *z;           /* owned: inflate state, made on first use */
    unsigned char  *win;            /* owned: the window kept across a BFINAL block */
    uint64_t        msg_in;         /* the message's payload bytes (compressed) */
    unsigned        z_fresh:1;      /* a deflate stream just ended, no input since */
    tt_ws_msg_fn   *fn;
    void           *arg;
};

/*
 * <from_client> 1 for the client's frames (masked), 0 for the server's;
 * <d> the negotiated extension (NULL or d->on = 0: none); <max_msg> the
 * largest payload kept.  No allocation until the first message.
 */
void tt_ws_reader_init(struct tt_ws_reader *r, int from_client,
                       const struct tt_ws_deflate *d, size_t max_msg,
                       tt_ws_msg_fn *fn, void *arg);

/* the next bytes of the direction: 0, or -1 once the reader has stopped
 * (r->why); messages are handed to fn as their last byte is read */
int tt_ws_reader_feed(struct tt_ws_reader *r, const void *p, size_t n);

void tt_ws_reader_free(struct tt_ws_reader *r);

/* ---- writing (the simulator, tests) ------------------------------------ */

/* the head of a frame of <len> payload bytes: its length (2..14);
 * <mask> NULL for a server's frame, else the client's 4-byte key */
size_t tt_ws_frame_head(unsigned char out[14], int fin, int rsv1,
                        enum tt_ws_op op, uint64_t len,
                        const unsigned char *mask);

/* XOR <p> with <mask>, the first byte being payload byte <offset> */
void tt_ws_mask(unsigned char *p, size_t n, const unsigned char mask[4],
                uint64_t offset);

struct tt_ws_deflater;

/* a compressor for one direction: window 2^bits (8..15), context reset
 * after every message when <no_context_takeover> */
struct tt_ws_deflater *tt_ws_deflater_new(int bits, int no_context_takeover);
void tt_ws_deflater_free(struct tt_ws_deflater *d);

/*
 * One whole message as one frame appended to <out>: compressed (RSV1,
 * trailing 00 00 ff ff removed) when <d> is not NULL, masked when <mask>
 * is not NULL.  0, or -1 (out of memory, zlib error).
 */
int tt_ws_write_msg(struct evbuffer *out, enum tt_ws_op op, const void *p,
                    size_t n, struct tt_ws_deflater *d,
                    const unsigned char *mask);

#endif
