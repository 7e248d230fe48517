/*
 * WebSocket frames (RFC 6455) and permessage-deflate (RFC 7692), see ws.h.
 *
 * The reader is a small state machine fed any byte runs: it gathers a
 * frame head (head[], hlen of hneed bytes; the first two bytes say how many
 * more) and then reads <left> payload bytes.  Control frames go to ctl[];
 * data frames go to the message buffer, unmasked in place, or through
 * zlib's raw inflate (a compressed message: RSV1 on its first frame) as
 * they come, with 00 00 ff ff fed after the message's last byte.  A whole
 * unmasked, uncompressed single-frame message that lies in one feed is
 * handed over from the feed's own bytes, without a copy.
 *
 * Choices where the RFCs leave room, or where a passive reader differs
 * from an endpoint:
 *  - a length not in its shortest form (RFC 6455 5.2: MUST) is a stop;
 *  - any frame after a close frame is a stop (the sender MUST NOT send
 *    more; the stream is no longer a WebSocket's);
 *  - a close frame of 1 byte is a stop; close codes are not judged, and
 *    the whole payload (code included) is handed over;
 *  - text is not checked for UTF-8 (callers parse it anyway);
 *  - a compressed message must end at a deflate block boundary once
 *    00 00 ff ff is added (else the shared window would go wrong
 *    silently); a block with BFINAL set (RFC 7692 7.2.3.4) ends zlib's
 *    stream, and the reader starts a new one on the same window (kept
 *    with inflateGetDictionary/inflateSetDictionary), so what follows,
 *    in the message or the next ones, still inflates;
 *  - a compressed message of no payload bytes at all is an empty message;
 *  - window bits 8 are read with a 512-byte window: zlib's deflate cannot
 *    make 8 and uses 9, and a larger window reads a smaller one's data.
 *
 * Counters: frames counts every complete frame, messages and overs the data
 * messages.  max_msg 0 keeps nothing (every non-empty message is over).
 * A stopped reader frees its buffers at once.
 *
 * Writing: tt_ws_write_msg compresses into the deflater's reusable buffer
 * and appends head and payload to the evbuffer in one reserved space.
 */
#include "proxy/decode/ws.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST
#include <zlib.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#define BUF_MIN   1024              /* a message buffer's first size */
#define BUF_KEEP  (64 * 1024)       /* larger ones are freed after their message */
#define CHUNK     4096              /* stack scratch: unmasking, over output */
#define ZIN_MAX   (1u << 30)        /* bytes per inflate/deflate call (uInt) */

static const unsigned char sync_tail[4] = { 0x00, 0x00, 0xff, 0xff };

/* ---- reading ------------------------------------------------------------ */

static int stop(struct tt_ws_reader *r, const char *why)
{
    if (r->why == NULL)
        r->why = why;
    return -1;
}

static void release(struct tt_ws_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
    free(r->win);
    r->win = NULL;
    if (r->z != NULL) {
        inflateEnd(r->z);
        free(r->z);
        r->z = NULL;
    }
}

void tt_ws_reader_init(struct tt_ws_reader *r, int from_client,
                       const struct tt_ws_deflate *d, size_t max_msg,
                       tt_ws_msg_fn *fn, void *arg)
{
    memset(r, 0, sizeof(*r));
    r->from_client = from_client != 0;
    r->hneed = 2;
    r->max = max_msg;
    r->fn = fn;
    r->arg = arg;
    if (d != NULL && d->on) {
        unsigned bits = from_client ? d->client_max_window_bits
                                    : d->server_max_window_bits;
        r->deflate_on = 1;
        r->no_takeover = from_client ? d->client_no_context_takeover
                                     : d->server_no_context_takeover;
        if (bits == 0 || bits > 15)
            bits = 15;
        if (bits < 9)
            bits = 9;
        r->window_bits = (unsigned char)bits;
    }
}

void tt_ws_reader_free(struct tt_ws_reader *r)
{
    release(r);
}

/* room for <need> bytes (need <= r->max) in the message buffer */
static int reserve(struct tt_ws_reader *r, size_t need)
{
    unsigned char *p;
    size_t n;

    if (need <= r->cap)
        return 0;
    n = r->cap ? r->cap : BUF_MIN;
    while (n < need)
        n = n > SIZE_MAX / 2 ? SIZE_MAX : n * 2;
    if (n > r->max)
        n = r->max;
    p = realloc(r->buf, n);
    if (p == NULL)
        return stop(r, "out of memory");
    r->buf = p;
    r->cap = n;
    return 0;
}

static int z_start(struct tt_ws_reader *r)
{
    z_stream *z;

    if (r->z != NULL)
        return 0;
    z = calloc(1, sizeof(*z));
    if (z == NULL)
        return stop(r, "out of memory");
    if (inflateInit2(z, -(int)r->window_bits) != Z_OK) {
        free(z);
        return stop(r, "out of memory (inflateInit2)");
    }
    r->z = z;
    return 0;
}

/*
 * zlib's stream ended (a block with BFINAL set): the sender goes on with
 * new blocks on the same window, so start a new stream with the window as
 * its dictionary.
 */
static int z_restart(struct tt_ws_reader *r)
{
    z_stream *z = r->z;
    uInt n = 0;

    if (r->win == NULL && (r->win = malloc((size_t)1 << r->window_bits)) == NULL)
        return stop(r, "out of memory");
    if (inflateGetDictionary(z, r->win, &n) != Z_OK || inflateReset(z) != Z_OK ||
        (n > 0 && inflateSetDictionary(z, r->win, n) != Z_OK))
        return stop(r, "permessage-deflate: inflate restart failed");
    return 0;
}

/*
 * Inflate <n> (at most ZIN_MAX) bytes of a compressed message into the
 * message buffer, or, once it holds max bytes, into a stack scratch that
 * only counts (the message is then over).
 */
static int inflate_in(struct tt_ws_reader *r, const unsigned char *p, size_t n)
{
    unsigned char scratch[CHUNK];
    z_stream *z = r->z;

    z->next_in = p;
    z->avail_in = (uInt)n;
    if (n > 0)
        r->z_fresh = 0;
    for (;;) {
        unsigned char *out;
        size_t room, made;
        int ret, scr = 0;

        if (!r->msg_over && r->len == r->cap && r->cap < r->max &&
            reserve(r, r->len + 1) < 0)
            return -1;
        if (!r->msg_over && r->len < r->cap) {
            out = r->buf + r->len;
            room = r->cap - r->len;
            if (room > ZIN_MAX)
                room = ZIN_MAX;
        } else {
            out = scratch;
            room = sizeof(scratch);
            scr = 1;
        }
        z->next_out = out;
        z->avail_out = (uInt)room;
        ret = inflate(z, Z_SYNC_FLUSH);
        made = room - z->avail_out;
        r->seen += made;
        if (!scr)
            r->len += made;
        else if (made > 0)
            r->msg_over = 1;
        if (ret == Z_STREAM_END) {
            if (z_restart(r) < 0)
                return -1;
            r->z_fresh = z->avail_in == 0;
            if (z->avail_in == 0)
                return 0;
            continue;
        }
        if (ret == Z_MEM_ERROR)
            return stop(r, "out of memory (inflate)");
        if (ret != Z_OK && ret != Z_BUF_ERROR)
            return stop(r, "permessage-deflate: bad compressed data");
        if (z->avail_out != 0)
            return 0;       /* input used up */
    }
}

/* <n> payload bytes of a data frame, <r->pos> the first one's offset */
static int data_payload(struct tt_ws_reader *r, const unsigned char *p, size_t n)
{
    size_t need;

    if (r->msg_comp) {
        uint64_t off = r->pos;

        r->msg_in += n;
        while (n > 0) {
            unsigned char tmp[CHUNK];
            size_t k;

            if (r->masked) {
                k = n < CHUNK ? n : CHUNK;
                memcpy(tmp, p, k);
                tt_ws_mask(tmp, k, r->mask, off);
                if (inflate_in(r, tmp, k) < 0)
                    return -1;
            } else {
                k = n < ZIN_MAX ? n : ZIN_MAX;
                if (inflate_in(r, p, k) < 0)
                    return -1;
            }
            p += k;
            n -= k;
            off += k;
        }
        return 0;
    }
    r->seen += n;
    if (r->msg_over || n > r->max - r->len) {
        r->msg_over = 1;
        return 0;
    }
    /* at a frame's first bytes, room for all of it (up to BUF_KEEP: a
     * length is only a promise) so that a frame fed in small pieces does
     * not grow the buffer piece by piece */
    need = r->len + n;
    if (r->pos == 0 && r->left > n) {
        size_t want = r->left < BUF_KEEP ? (size_t)r->left : BUF_KEEP;
        if (want <= r->max - r->len && r->len + want > need)
            need = r->len + want;
    }
    if (reserve(r, need) < 0)
        return -1;
    memcpy(r->buf + r->len, p, n);
    if (r->masked)
        tt_ws_mask(r->buf + r->len, n, r->mask, r->pos);
    r->len += n;
    return 0;
}

/* the last frame of a data message was read: hand the message over */
static int message_end(struct tt_ws_reader *r, const unsigned char *direct)
{
    struct tt_ws_msg m;

    if (r->msg_comp) {
        if (r->msg_in > 0 && !r->z_fresh) {
            if (inflate_in(r, sync_tail, sizeof(sync_tail)) < 0)
                return -1;
            /* 128: inflate stopped right before a block header */
            if (!r->z_fresh && !(r->z->data_type & 128))
                return stop(r, "permessage-deflate: message does not end at a block boundary");
        }
        if (r->no_takeover && inflateReset(r->z) != Z_OK)
            return stop(r, "permessage-deflate: inflateReset failed");
    }
    memset(&m, 0, sizeof(m));
    m.op = (enum tt_ws_op)r->msg_op;
    m.compressed = r->msg_comp;
    m.over = r->msg_over;
    if (r->msg_over) {
        m.data = NULL;
        m.len = r->seen;
    } else {
        m.data = direct ? direct : r->buf ? r->buf : (const unsigned char *)"";
        m.len = r->len;
    }
    r->in_msg = 0;
    r->messages++;
    if (r->msg_over)
        r->overs++;
    if (r->fn != NULL)
        r->fn(r->arg, &m);
    r->len = 0;
    if (r->cap > BUF_KEEP) {
        free(r->buf);
        r->buf = NULL;
        r->cap = 0;
    }
    return 0;
}

static int control_end(struct tt_ws_reader *r)
{
    struct tt_ws_msg m;

    memset(&m, 0, sizeof(m));
    m.op = (enum tt_ws_op)r->op;
    m.data = r->ctl;
    m.len = r->ctl_len;
    if (r->op == TT_WS_CLOSE) {
        if (r->ctl_len == 1)
            return stop(r, "close frame of 1 byte");
        if (r->ctl_len >= 2)
            m.close_code = (uint16_t)(r->ctl[0] << 8 | r->ctl[1]);
        r->closed = 1;
    }
    if (r->fn != NULL)
        r->fn(r->arg, &m);
    return 0;
}

static int frame_end(struct tt_ws_reader *r, const unsigned char *direct)
{
    r->frames++;
    r->hlen = 0;
    r->hneed = 2;
    if (r->op & 0x8)
        return control_end(r);
    return r->fin ? message_end(r, direct) : 0;
}

/* the first two bytes of a head: everything but the length and mask */
static int head_start(struct tt_ws_reader *r)
{
    unsigned b0 = r->head[0], b1 = r->head[1];
    unsigned op = b0 & 0x0f, len7 = b1 & 0x7f;

    r->fin = b0 >> 7;
    r->rsv1 = (b0 >> 6) & 1;
    r->masked = b1 >> 7;
    r->op = (unsigned char)op;
    if (r->closed)
        return stop(r, "frame after the close frame");
    if (b0 & 0x30)
        return stop(r, "RSV2 or RSV3 set");
    if (op & 0x8) {
        if (op > TT_WS_PONG)
            return stop(r, "reserved control opcode");
        if (!r->fin)
            return stop(r, "fragmented control frame");
        if (len7 > 125)
            return stop(r, "control frame longer than 125 bytes");
        if (r->rsv1)
            return stop(r, "RSV1 on a control frame");
    } else if (op == TT_WS_CONT) {
        if (!r->in_msg)
            return stop(r, "continuation frame outside a message");
        if (r->rsv1)
            return stop(r, "RSV1 on a continuation frame");
    } else if (op <= TT_WS_BINARY) {
        if (r->in_msg)
            return stop(r, "data frame inside a fragmented message");
        if (r->rsv1 && !r->deflate_on)
            return stop(r, "RSV1 set without permessage-deflate");
    } else {
        return stop(r, "reserved data opcode");
    }
    if (r->masked != r->from_client)
        return stop(r, r->from_client ? "unmasked client frame" : "masked server frame");
    r->hneed = (unsigned char)(2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) +
                               (r->masked ? 4 : 0));
    return 0;
}

/* the whole head is in: the length, the mask, a new message */
static int head_end(struct tt_ws_reader *r)
{
    const unsigned char *q = r->head + 2;
    uint64_t len = r->head[1] & 0x7f;
    int i;

    if (len == 126) {
        len = (uint64_t)q[0] << 8 | q[1];
        q += 2;
        if (len < 126)
            return stop(r, "frame length not in its shortest form");
    } else if (len == 127) {
        len = 0;
        for (i = 0; i < 8; i++)
            len = len << 8 | q[i];
        q += 8;
        if (len >> 63)
            return stop(r, "frame length with its top bit set");
        if (len < 65536)
            return stop(r, "frame length not in its shortest form");
    }
    if (r->masked)
        memcpy(r->mask, q, 4);
    r->left = len;
    r->pos = 0;
    if (r->op & 0x8) {
        r->ctl_len = 0;
        return 0;
    }
    if (r->op != TT_WS_CONT) {
        r->in_msg = 1;
        r->msg_op = r->op;
        r->msg_comp = r->rsv1;
        r->msg_over = 0;
        r->len = 0;
        r->seen = 0;
        r->msg_in = 0;
        if (r->msg_comp && z_start(r) < 0)
            return -1;
    }
    return 0;
}

int tt_ws_reader_feed(struct tt_ws_reader *r, const void *data, size_t n)
{
    const unsigned char *p = data;

    if (r->why != NULL)
        return -1;
    while (n > 0 && r->why == NULL) {
        size_t k;

        if (r->hlen < r->hneed) {
            unsigned had = r->hlen;

            k = (size_t)(r->hneed - r->hlen);
            if (k > n)
                k = n;
            memcpy(r->head + r->hlen, p, k);
            r->hlen = (unsigned char)(r->hlen + k);
            p += k;
            n -= k;
            if (had < 2 && r->hlen == 2 && head_start(r) < 0)
                break;
            if (r->hlen == r->hneed) {
                if (head_end(r) < 0)
                    break;
                if (r->left == 0)
                    frame_end(r, NULL);
            }
            continue;
        }
        /* a whole message here, nothing to undo: no copy */
        if (r->pos == 0 && r->fin && !r->masked && !r->rsv1 &&
            (r->op == TT_WS_TEXT || r->op == TT_WS_BINARY) &&
            r->left <= n && r->left <= r->max) {
            k = (size_t)r->left;
            r->seen = k;
            r->len = k;
            r->pos = k;
            r->left = 0;
            p += k;
            n -= k;
            frame_end(r, p - k);
            continue;
        }
        k = r->left < n ? (size_t)r->left : n;
        if (r->op & 0x8) {
            memcpy(r->ctl + r->ctl_len, p, k);
            if (r->masked)
                tt_ws_mask(r->ctl + r->ctl_len, k, r->mask, r->pos);
            r->ctl_len = (unsigned char)(r->ctl_len + k);
        } else if (data_payload(r, p, k) < 0) {
            break;
        }
        r->pos += k;
        r->left -= k;
        p += k;
        n -= k;
        if (r->left == 0)
            frame_end(r, NULL);
    }
    if (r->why != NULL) {
        release(r);
        return -1;
    }
    return 0;
}

/* ---- the handshake ------------------------------------------------------ */

void tt_ws_accept(const char *key, size_t len, char out[29])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();

    out[0] = '\0';
    if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) &&
        EVP_DigestUpdate(ctx, key, len) &&
        EVP_DigestUpdate(ctx, TT_WS_GUID, sizeof(TT_WS_GUID) - 1) &&
        EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 20)
        EVP_EncodeBlock((unsigned char *)out, md, 20);
    EVP_MD_CTX_free(ctx);
}

struct cursor {
    const char *p, *e;
};

static int tchar(unsigned char c)
{
    return c > 0x20 && c < 0x7f && strchr("\"(),/:;<=>?@[\\]{}", c) == NULL;
}

static void ows(struct cursor *c)
{
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static size_t token(struct cursor *c)
{
    const char *s = c->p;

    while (c->p < c->e && tchar((unsigned char)*c->p))
        c->p++;
    return (size_t)(c->p - s);
}

/* ASCII case-insensitive: does [s, s+n) spell <lit>? */
static int is(const char *s, size_t n, const char *lit)
{
    size_t i;

    if (n != strlen(lit))
        return 0;
    for (i = 0; i < n; i++) {
        unsigned char a = (unsigned char)s[i];
        if (a >= 'A' && a <= 'Z')
            a = (unsigned char)(a + 32);
        if (a != (unsigned char)lit[i])
            return 0;
    }
    return 1;
}

/*
 * A parameter's value: a token or a quoted-string whose content, once
 * unescaped, is a token (RFC 6455 9.1).  Up to <max> bytes are copied to
 * <v>; *vlen gets the whole length.  0, or -1 when malformed.
 */
static int value(struct cursor *c, char *v, size_t max, size_t *vlen)
{
    size_t n = 0;

    if (c->p < c->e && *c->p == '"') {
        c->p++;
        for (;;) {
            unsigned char ch;

            if (c->p == c->e)
                return -1;
            ch = (unsigned char)*c->p++;
            if (ch == '"')
                break;
            if (ch == '\\') {
                if (c->p == c->e)
                    return -1;
                ch = (unsigned char)*c->p++;
            }
            if (!tchar(ch))
                return -1;
            if (n < max)
                v[n] = (char)ch;
            n++;
        }
    } else {
        const char *s = c->p;

        n = token(c);
        memcpy(v, s, n < max ? n : max);
    }
    *vlen = n;
    return n > 0 ? 0 : -1;
}

/* window bits: a decimal 8..15 without leading zeros (RFC 7692 7.1.2) */
static int bits(const char *v, size_t n)
{
    if (n == 1 && v[0] >= '8' && v[0] <= '9')
        return v[0] - '0';
    if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5')
        return 10 + v[1] - '0';
    return -1;
}

/* one permessage-deflate parameter; <seen> has a bit per parameter taken */
static int pmd_param(struct tt_ws_deflate *d, const char *name, size_t nlen,
                     const char *v, size_t vlen, int has_v, unsigned *seen)
{
    unsigned bit;
    int b = 15;

    if (is(name, nlen, "server_no_context_takeover")) {
        bit = 1;
        if (has_v)
            return -1;
        d->server_no_context_takeover = 1;
    } else if (is(name, nlen, "client_no_context_takeover")) {
        bit = 2;
        if (has_v)
            return -1;
        d->client_no_context_takeover = 1;
    } else if (is(name, nlen, "server_max_window_bits")) {
        bit = 4;
        if (!has_v || (b = bits(v, vlen)) < 0)
            return -1;
        d->server_max_window_bits = (unsigned char)b;
    } else if (is(name, nlen, "client_max_window_bits")) {
        bit = 8;
        if (has_v && (b = bits(v, vlen)) < 0)
            return -1;
        d->client_max_window_bits = (unsigned char)b;
    } else {
        return -1;
    }
    if (*seen & bit)
        return -1;
    *seen |= bit;
    return 0;
}

int tt_ws_extensions(const char *v, size_t len, struct tt_ws_deflate *d)
{
    struct cursor c = { v, v + len };
    struct tt_ws_deflate t;
    int found = 0;

    memset(&t, 0, sizeof(t));
    t.server_max_window_bits = t.client_max_window_bits = 15;
    memset(d, 0, sizeof(*d));
    d->server_max_window_bits = d->client_max_window_bits = 15;
    for (;;) {
        const char *name;
        size_t nlen;
        unsigned seen = 0;
        int pmd;

        ows(&c);
        while (c.p < c.e && *c.p == ',') {      /* empty list elements */
            c.p++;
            ows(&c);
        }
        if (c.p == c.e)
            break;
        name = c.p;
        if ((nlen = token(&c)) == 0)
            return -1;
        pmd = is(name, nlen, "permessage-deflate");
        if (pmd && found)
            return -1;                          /* accepted twice */
        ows(&c);
        while (c.p < c.e && *c.p == ';') {
            const char *pname;
            char val[16] = "";
            size_t plen, vlen = 0;
            int has_v = 0;

            c.p++;
            ows(&c);
            pname = c.p;
            if ((plen = token(&c)) == 0)
                return -1;
            ows(&c);
            if (c.p < c.e && *c.p == '=') {
                c.p++;
                ows(&c);
                if (value(&c, val, sizeof(val), &vlen) < 0)
                    return -1;
                has_v = 1;
                ows(&c);
            }
            if (pmd && pmd_param(&t, pname, plen, val, vlen, has_v, &seen) < 0)
                return -1;
        }
        if (c.p < c.e && *c.p != ',')
            return -1;
        found |= pmd;
    }
    if (found) {
        *d = t;
        d->on = 1;
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

size_t tt_ws_frame_head(unsigned char out[14], int fin, int rsv1,
                        enum tt_ws_op op, uint64_t len,
                        const unsigned char *mask)
{
    size_t n = 2;
    int i;

    out[0] = (unsigned char)((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (op & 0x0f));
    out[1] = mask ? 0x80 : 0;
    if (len < 126) {
        out[1] |= (unsigned char)len;
    } else if (len <= 0xffff) {
        out[1] |= 126;
        out[2] = (unsigned char)(len >> 8);
        out[3] = (unsigned char)len;
        n = 4;
    } else {
        out[1] |= 127;
        for (i = 0; i < 8; i++)
            out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
        n = 10;
    }
    if (mask != NULL) {
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

void tt_ws_mask(unsigned char *p, size_t n, const unsigned char mask[4],
                uint64_t offset)
{
    unsigned char m[8];
    uint64_t w, x;
    size_t i = 0;
    int j;

    for (j = 0; j < 8; j++)
        m[j] = mask[(offset + (uint64_t)j) & 3];
    memcpy(&w, m, 8);
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, p + i, 8);
        x ^= w;
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++)
        p[i] ^= m[i & 7];
}

struct tt_ws_deflater {
    z_stream       z;
    int            no_takeover;
    unsigned char *buf;             /* owned: the last message, compressed */
    size_t         len, cap;
};

/*
 * zlib's raw deflate refuses 8 window bits (deflateInit2 turns 8 into 9 only
 * with the zlib wrapper).  A stream made with 9 could refer 512 bytes back,
 * more than a peer limited to 8 keeps, so 8 is served with 9 and Huffman
 * coding only: no back references at all, readable with any window.
 */
struct tt_ws_deflater *tt_ws_deflater_new(int bits, int no_context_takeover)
{
    struct tt_ws_deflater *d;
    int strategy = Z_DEFAULT_STRATEGY;

    if (bits < 8 || bits > 15)
        return NULL;
    if (bits == 8) {
        bits = 9;
        strategy = Z_HUFFMAN_ONLY;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    if (deflateInit2(&d->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, 8,
                     strategy) != Z_OK) {
        free(d);
        return NULL;
    }
    d->no_takeover = no_context_takeover != 0;
    return d;
}

void tt_ws_deflater_free(struct tt_ws_deflater *d)
{
    if (d == NULL)
        return;
    deflateEnd(&d->z);
    free(d->buf);
    free(d);
}

static int dgrow(struct tt_ws_deflater *d, size_t need)
{
    unsigned char *p;
    size_t n;

    if (need <= d->cap)
        return 0;
    n = d->cap ? d->cap : 256;
    while (n < need)
        n *= 2;
    p = realloc(d->buf, n);
    if (p == NULL)
        return -1;
    d->buf = p;
    d->cap = n;
    return 0;
}

/* <n> bytes as one message into d->buf, flushed, the sync tail removed */
static int compress_msg(struct tt_ws_deflater *d, const unsigned char *p, size_t n)
{
    z_stream *z = &d->z;
    size_t rem = n;

    d->len = 0;
    if (n == 0) {
        /* RFC 7692 7.2.3.6: an empty message is one 0x00 byte; zlib would
         * send nothing when nothing came since its last flush */
        if (dgrow(d, 1) < 0)
            return -1;
        d->buf[d->len++] = 0x00;
        return 0;
    }
    if (dgrow(d, n / 2 + 64) < 0)
        return -1;
    z->next_in = p;
    z->avail_in = 0;
    for (;;) {
        size_t room;
        int ret, flush;

        if (z->avail_in == 0 && rem > 0) {
            z->avail_in = rem > ZIN_MAX ? ZIN_MAX : (uInt)rem;
            rem -= z->avail_in;
        }
        flush = rem == 0 ? Z_SYNC_FLUSH : Z_NO_FLUSH;
        if (d->cap - d->len < 64 && dgrow(d, d->cap + 64) < 0)
            return -1;
        room = d->cap - d->len;
        if (room > ZIN_MAX)
            room = ZIN_MAX;
        z->next_out = d->buf + d->len;
        z->avail_out = (uInt)room;
        ret = deflate(z, flush);
        if (ret != Z_OK && ret != Z_BUF_ERROR)
            return -1;
        d->len += room - z->avail_out;
        if (rem == 0 && z->avail_in == 0 && z->avail_out != 0)
            break;
    }
    if (d->len < 4 || memcmp(d->buf + d->len - 4, sync_tail, 4) != 0)
        return -1;
    d->len -= 4;
    return 0;
}

int tt_ws_write_msg(struct evbuffer *out, enum tt_ws_op op, const void *p,
                    size_t n, struct tt_ws_deflater *d,
                    const unsigned char *mask)
{
    const unsigned char *pl = p;
    unsigned char head[14], *w;
    struct evbuffer_iovec v;
    size_t hl, plen = n;
    int rc = 0;

    if (op & 0x8) {
        if (n > 125)
            return -1;
        d = NULL;                   /* control frames are never compressed */
    }
    if (d != NULL) {
        if (compress_msg(d, pl, n) < 0) {
            deflateReset(&d->z);
            return -1;
        }
        pl = d->buf;
        plen = d->len;
    }
    hl = tt_ws_frame_head(head, 1, d != NULL, op, plen, mask);
    if (evbuffer_reserve_space(out, (ev_ssize_t)(hl + plen), &v, 1) != 1) {
        rc = -1;
    } else {
        w = v.iov_base;
        memcpy(w, head, hl);
        if (plen > 0)
            memcpy(w + hl, pl, plen);
        if (mask != NULL)
            tt_ws_mask(w + hl, plen, mask, 0);
        v.iov_len = hl + plen;
        if (evbuffer_commit_space(out, &v, 1) < 0)
            rc = -1;
    }
    if (d != NULL) {
        if (d->no_takeover)
            deflateReset(&d->z);
        if (d->cap > BUF_KEEP) {
            free(d->buf);
            d->buf = NULL;
            d->cap = 0;
        }
    }
    return rc;
}
