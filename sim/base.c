/*
 * The ground floor of tokentap-sim: what every other file may use and which
 * itself calls none of them.  The process-wide state and the counters
 * behind GET /stats (sim_srv), the clock, the per-path request count, the
 * token words ("tok0 ", "think0 "), the request header lookup and the
 * OpenAI error types.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sim/sim.h"

struct sim_server sim_srv;

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sim_count_path(const char *path, size_t len)
{
    int i;

    if (len >= sizeof(sim_srv.paths[0].path))
        len = sizeof(sim_srv.paths[0].path) - 1;
    for (i = 0; i < sim_srv.npaths; i++) {
        if (strlen(sim_srv.paths[i].path) == len &&
            memcmp(sim_srv.paths[i].path, path, len) == 0) {
            sim_srv.paths[i].n++;
            return;
        }
    }
    if (sim_srv.npaths == SIM_MAX_PATHS)
        return;   /* a test server; 64 distinct paths is plenty */
    memcpy(sim_srv.paths[i].path, path, len);
    sim_srv.paths[i].path[len] = '\0';
    sim_srv.paths[i].n = 1;
    sim_srv.npaths++;
}

void sim_words(struct evbuffer *b, int reasoning, int from, int n)
{
    int i;
    for (i = from; i < from + n; i++)
        evbuffer_add_printf(b, reasoning ? "think%d " : "tok%d ", i);
}

char *sim_words_str(int reasoning, int from, int n)
{
    struct evbuffer *b = evbuffer_new();
    size_t len;
    char *s;

    if (!b)
        return NULL;
    sim_words(b, reasoning, from, n);
    len = evbuffer_get_length(b);
    s = malloc(len + 1);
    if (s) {
        evbuffer_remove(b, s, len);
        s[len] = '\0';
    }
    evbuffer_free(b);
    return s;
}

const char *sim_req_header(const struct sim_req *q, const char *name)
{
    int i;
    for (i = 0; i < q->nhdrs; i++)
        if (strcasecmp(q->hdrs[i].name, name) == 0)
            return q->hdrs[i].value;
    return NULL;
}

const char *sim_error_type(int status)
{
    return status == 404 ? "not_found_error" :
           status == 401 ? "authentication_error" :
           status == 429 ? "rate_limit_error" :
           status >= 500 ? "server_error" : "invalid_request_error";
}
