/*
 * HTTP message heads: collects the request line / status line and header
 * fields that llhttp hands over in spans (possibly split across reads),
 * checks them against the smuggling rules of SPEC 9, and writes the head
 * forwarded to the other side with hop-by-hop headers handled.
 *
 * Used by proxy/http/conn.c for both directions; owns nothing but its buffer.
 */
#ifndef TT_HTTPHEAD_H
#define TT_HTTPHEAD_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

struct tt_hfield {
    uint32_t name, nlen;            /* offsets into tt_head.buf */
    uint32_t val, vlen;
};

struct tt_head {
    char    *buf;                   /* owned; grows up to <limit> */
    size_t   len, cap, limit;
    struct tt_hfield *f;            /* owned; <max> entries */
    unsigned n, max;
    uint32_t target, tlen;          /* request target or status reason */
    int      in_value;              /* last span was a value */
    unsigned overflow:1;            /* too many fields or bytes */
    unsigned obs_fold:1;            /* continuation line seen */
    unsigned empty_name:1;          /* a header line starting with ':' */
    int      line_start;            /* scanner: at the start of a line */
};

int  tt_head_init(struct tt_head *h, size_t limit, unsigned max_fields);
void tt_head_clear(struct tt_head *h);
void tt_head_free(struct tt_head *h);
/* give this thread's kept head buffers back (a worker thread's end) */
void tt_head_thread_free(void);

/* span callbacks (return 0, or -1 when a limit is passed) */
int tt_head_target(struct tt_head *h, const char *at, size_t len);
int tt_head_field(struct tt_head *h, const char *at, size_t len);
int tt_head_value(struct tt_head *h, const char *at, size_t len);

/* scan raw head bytes for obs-fold (a line starting with SP or HT) and
 * empty field names (a line starting with ':') */
void tt_head_scan(struct tt_head *h, const char *p, size_t len);

/* first value of header <name> (case-insensitive), NULL if absent */
const char *tt_head_get(const struct tt_head *h, const char *name,
                        size_t *vlen);
/* tt_head_get() for a caller that takes any head (tt_header_fn of
 * proxy/decode/stream.h) */
const char *tt_head_lookup(const void *h, const char *name, size_t *vlen);
/* does a comma-separated header <name> contain <token>? */
int tt_head_has_token(const struct tt_head *h, const char *name,
                      const char *token);

enum tt_head_dir { TT_HEAD_REQUEST, TT_HEAD_RESPONSE };

/*
 * The checks of SPEC 9 that llhttp does not make on its own, for a head
 * received in direction <dir> with HTTP version <major>.<minor> (as llhttp
 * parsed it; 0.9 for a request line without a version):
 *   both sides: duplicate or invalid Content-Length (including leading
 *   zeros), Content-Length with Transfer-Encoding, repeated or non-"chunked"
 *   Transfer-Encoding, obs-fold, an empty field name, a version other than
 *   HTTP/1.0 or HTTP/1.1, and a Connection header naming Content-Length or
 *   Transfer-Encoding (forwarding the body while dropping its framing would
 *   let the next hop read it as another message);
 *   requests: a '#fragment' in the target.
 * Returns NULL when the head is acceptable, else a static reason.
 */
const char *tt_head_check(const struct tt_head *h, enum tt_head_dir dir,
                          int major, int minor);

/*
 * 1 when the head's Upgrade fields ask for h2c and nothing else (curl
 * --http2 on an http:// URL).  tokentap speaks HTTP/1.1 only and cannot
 * follow an upstream that switches to HTTP/2, so such a request goes on as
 * a plain HTTP/1.1 request: Upgrade dropped like any hop-by-hop field.
 */
int tt_head_upgrade_h2c(const struct tt_head *h);

/*
 * Append the fields of <h> to <out> as "Name: value\r\n", leaving out the
 * hop-by-hop fields (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * HTTP2-Settings, Upgrade unless <keep_upgrade>, Host for requests, and any
 * field named in Connection).  Returns 0 or -1.
 */
int tt_head_copy_fields(const struct tt_head *h, struct evbuffer *out,
                        enum tt_head_dir dir, int keep_upgrade,
                        int drop_te);

/*
 * A response tokentap itself produces, in the OpenAI error shape:
 * {"error":{"message":..,"type":..,"code":..}}.  <close> adds
 * "Connection: close".
 */
void tt_error_response(struct evbuffer *out, int status, const char *type,
                       const char *code, const char *message, int close);

/* the same, also leaving out the fields named in <names> (<lens> bytes
 * each, case-insensitive): a shadow's removed or replaced headers */
int tt_head_copy_fields_skip(const struct tt_head *h, struct evbuffer *out,
                             enum tt_head_dir dir, int keep_upgrade, int drop_te,
                             const char *const *names, const size_t *lens,
                             unsigned nnames);

const char *tt_status_reason(int status);

#endif
