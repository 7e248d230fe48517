/*
 * libFuzzer harness for proxy/decode/chunks.c: the input (after its first byte)
 * is a response body behind a chunked head, parsed twice: by llhttp alone
 * and by tt_chunks_execute(), both in pieces of the size the first byte
 * picks.  The two must agree on the result, the bytes parsed, the
 * messages ended and every body byte: the fast path may take only what
 * llhttp would have taken the same way.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "proxy/decode/chunks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    struct tt_chunks chunks;
    int fast;
    unsigned messages;
    size_t body_len;
    unsigned char *body;
};

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct seen *s = p->data;
    memcpy(s->body + s->body_len, at, len);
    s->body_len += len;
    return 0;
}

static int on_chunk_header(llhttp_t *p)
{
    struct seen *s = p->data;
    return s->fast ? tt_chunks_on_header(&s->chunks, p) : 0;
}

static int on_chunk_complete(llhttp_t *p)
{
    struct seen *s = p->data;
    return s->fast ? tt_chunks_on_complete(&s->chunks) : 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct seen *s = p->data;
    s->messages++;
    return 0;
}

static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

/* parse <msg> in pieces of <piece> bytes; the result, *<used> the bytes parsed */
static enum llhttp_errno parse(struct seen *s, const llhttp_settings_t *st,
                               const char *msg, size_t len, size_t piece, size_t *used)
{
    llhttp_t p;
    enum llhttp_errno e = HPE_OK;
    size_t off = 0;

    tt_chunks_reset(&s->chunks);
    llhttp_init(&p, HTTP_RESPONSE, st);
    p.data = s;
    while (off < len) {
        size_t n = len - off < piece ? len - off : piece, u = n;

        if (s->fast) {
            e = tt_chunks_execute(&s->chunks, &p, msg + off, n, &u);
        } else {
            e = llhttp_execute(&p, msg + off, n);
            if (e != HPE_OK)
                u = (size_t)(llhttp_get_error_pos(&p) - (msg + off));
        }
        off += u;
        if (e != HPE_OK)
            break;
    }
    *used = off;
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llhttp_settings_t st;
    struct seen a, b;
    size_t len, piece, ua, ub;
    enum llhttp_errno ea, eb;
    char *msg;

    if (size < 1)
        return 0;
    piece = data[0] == 0 ? (size_t)-1 : data[0];
    len = sizeof(head) - 1 + size - 1;
    msg = malloc(len);
    memcpy(msg, head, sizeof(head) - 1);
    memcpy(msg + sizeof(head) - 1, data + 1, size - 1);
    llhttp_settings_init(&st);
    st.on_body = on_body;
    st.on_chunk_header = on_chunk_header;
    st.on_chunk_complete = on_chunk_complete;
    st.on_message_complete = on_message_complete;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    b.fast = 1;
    a.body = malloc(len);
    b.body = malloc(len);
    ea = parse(&a, &st, msg, len, piece, &ua);
    eb = parse(&b, &st, msg, len, piece, &ub);
    if (ea != eb || ua != ub || a.messages != b.messages || a.body_len != b.body_len ||
        memcmp(a.body, b.body, a.body_len) != 0)
        abort();
    free(a.body);
    free(b.body);
    free(msg);
    return 0;
}
