/*
 * libevent helpers shared by the client and upstream sides (see io.h).
 */
#include "proxy/http/io.h"

#include <string.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "metrics/record.h"
#include "proxy/decode/chunks.h"
#include "proxy/http/httphead.h"

size_t tt_parse_buf(llhttp_t *p, struct evbuffer *in, size_t off, size_t max,
                    enum llhttp_errno *err, struct tt_head *scan,
                    struct tt_chunks *chunks)
{
    struct evbuffer_iovec v[8];
    struct evbuffer_ptr ptr;
    size_t done = 0;
    int i, n;

    *err = HPE_OK;
    if (max == 0) {
        *err = llhttp_execute(p, "", 0);
        return 0;
    }
    while (done < max) {
        if (evbuffer_ptr_set(in, &ptr, off + done, EVBUFFER_PTR_SET) < 0)
            break;
        n = evbuffer_peek(in, (ev_ssize_t)(max - done), &ptr, v, 8);
        if (n <= 0)
            break;
        if (n > 8)
            n = 8;
        for (i = 0; i < n && done < max; i++) {
            const char *base = v[i].iov_base;
            size_t len = v[i].iov_len;
            enum llhttp_errno e;
            size_t used;

            if (len > max - done)
                len = max - done;
            e = tt_chunks_execute(chunks, p, base, len, &used);
            if (e != HPE_OK) {
                if (scan != NULL)
                    tt_head_scan(scan, base, used);
                *err = e;
                return done + used;
            }
            if (scan != NULL)
                tt_head_scan(scan, base, len);
            done += len;
        }
    }
    return done;
}

const char *tt_parse_error(const llhttp_t *p, enum llhttp_errno e)
{
    const char *r = llhttp_get_error_reason(p);
    return r != NULL ? r : llhttp_errno_name(e);
}

void tt_timer_set(struct event *ev, unsigned ms)
{
    struct timeval tv = tt_ms_tv(ms);
    evtimer_add(ev, &tv);
}

int tt_add_str(struct evbuffer *out, const char *s)
{
    return evbuffer_add(out, s, strlen(s));
}

int tt_add_num(struct evbuffer *out, long long v)
{
    char buf[24], *p;

    p = tt_fmt_u64(buf + sizeof(buf), v < 0 ? 0ull - (unsigned long long)v
                                            : (unsigned long long)v);
    if (v < 0)
        *--p = '-';
    return evbuffer_add(out, p, (size_t)(buf + sizeof(buf) - p));
}

void tt_nodelay_fd(int fd)
{
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void tt_nodelay(struct bufferevent *bev)
{
    tt_nodelay_fd(bufferevent_getfd(bev));
}
