/*
 * The access log's line (see proxy/http/access.h).  The line is built with the
 * log's own line builder, so the access log and the log share one format
 * and one set of escapes; the writer is the records' (tt_recorder).
 */
#include "proxy/http/access.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/util.h>

#include "metrics/clock.h"
#include "metrics/record.h"
#include "proxy/base/log.h"

char *tt_access_format(const struct tt_request *r,
                       const struct tt_metric_values *m, int format,
                       size_t *len)
{
    struct tt_logline l;
    char path[TT_RECORD_PATH_MAX];
    const char *type, *msg;
    char *line;
    int code;

    tt_logline_begin(&l, format, tt_now_wall());
    tt_logline_str(&l, "id", r->request_id);
    tt_logline_str(&l, "client", r->client[0] ? r->client : "-");
    tt_logline_str(&l, "method", r->method[0] ? r->method : "-");
    tt_record_redact_path(r->path[0] ? r->path : "-", path, sizeof(path));
    tt_logline_str(&l, "path", path);
    tt_logline_int(&l, "status", r->status);
    tt_logline_str(&l, "upstream", r->upstream_name ? r->upstream_name : "");
    tt_logline_str(&l, "api", tt_api_name(r->api));
    tt_logline_str(&l, "model", r->model[0] ? r->model : r->s.model);
    tt_logline_str(&l, "stream", r->s.streaming ? "true" : "false");
    if (tt_metric_has(m, TT_M_TTFT))
        tt_logline_ms(&l, "ttft_ms", m->v[TT_M_TTFT]);
    if (tt_metric_has(m, TT_M_REQUEST_LATENCY))
        tt_logline_ms(&l, "latency_ms", m->v[TT_M_REQUEST_LATENCY]);
    if (tt_metric_has(m, TT_M_ISL))
        tt_logline_int(&l, "input_tokens", (int64_t)m->v[TT_M_ISL]);
    if (tt_metric_has(m, TT_M_OSL))
        tt_logline_int(&l, "output_tokens", (int64_t)m->v[TT_M_OSL]);
    if (tt_request_error(r, &code, &type, &msg))
        tt_logline_str(&l, "error", type ? type : "error");
    *len = tt_logline_end(&l);

    line = malloc(*len + 1);
    if (line == NULL)
        return NULL;
    memcpy(line, l.buf, *len);
    line[*len] = '\0';
    return line;
}

void tt_access_peer(const struct sockaddr *sa, int salen, char *buf, size_t len)
{
    buf[0] = '\0';
    if (sa == NULL)
        return;
    if (sa->sa_family == AF_INET6 && salen >= (int)sizeof(struct sockaddr_in6))
        evutil_inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                         buf, len);
    else if (sa->sa_family == AF_INET && salen >= (int)sizeof(struct sockaddr_in) &&
             len >= 16) {
        /* dotted quad by hand: evutil_inet_ntop goes through snprintf */
        const unsigned char *a = (const unsigned char *)
            &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        char *o = buf;
        for (int i = 0; i < 4; i++) {
            unsigned v = a[i];
            if (i)
                *o++ = '.';
            if (v >= 100)
                *o++ = (char)('0' + v / 100);
            if (v >= 10)
                *o++ = (char)('0' + v / 10 % 10);
            *o++ = (char)('0' + v % 10);
        }
        *o = '\0';
    }
}
