/*
 * Listener guards and over-cap refusals (see listen.h).
 */
#include "proxy/server/listen.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "metrics/request.h"
#include "proxy/http/linger.h"
#include "proxy/base/log.h"
#include "proxy/base/ratelimit.h"

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 1000u
#define MAX_GUARDS     300          /* 256 workers + admin, with room */

struct tt_listen_guard {
    struct evconnlistener *l;       /* borrowed */
    struct event          *timer;   /* owned: resumes accepting */
    const char            *name;    /* static */
    unsigned               backoff_ms;
    uint64_t               resumed_ns;
    unsigned long          pauses;
};

/* the error callback only gets the listener's accept argument, which is
 * not ours for evhttp's listener: find the guard by listener instead
 * (errors are rare, a locked scan is cheap) */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tt_listen_guard *reg[MAX_GUARDS];

/* one line a second for every listener together */
static struct tt_ratelimit accept_rl;

static struct tt_listen_guard *find(struct evconnlistener *l)
{
    struct tt_listen_guard *g = NULL;
    pthread_mutex_lock(&reg_mu);
    for (unsigned i = 0; i < MAX_GUARDS && g == NULL; i++)
        if (reg[i] != NULL && reg[i]->l == l)
            g = reg[i];
    pthread_mutex_unlock(&reg_mu);
    return g;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct tt_listen_guard *g = arg;
    (void)fd;
    (void)what;
    g->resumed_ns = tt_now_mono();
    evconnlistener_enable(g->l);
}

static void on_error(struct evconnlistener *l, void *arg)
{
    int e = EVUTIL_SOCKET_ERROR();
    struct tt_listen_guard *g = find(l);
    uint64_t now = tt_now_mono(), held;
    (void)arg;

    if (g == NULL) {
        /* not guarded: cannot happen, but never spin */
        evconnlistener_disable(l);
        tt_log_error("accept: %s; listener stopped", evutil_socket_error_to_string(e));
        return;
    }
    /* a failure long after the last resume starts the backoff over */
    if (g->backoff_ms == 0 || now - g->resumed_ns > 2 * TT_RATELIMIT_1S)
        g->backoff_ms = BACKOFF_MIN_MS;
    else if (g->backoff_ms < BACKOFF_MAX_MS)
        g->backoff_ms = g->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                           : g->backoff_ms * 2;
    evconnlistener_disable(l);
    struct timeval tv = { g->backoff_ms / 1000, (g->backoff_ms % 1000) * 1000 };
    evtimer_add(g->timer, &tv);
    g->pauses++;
    if (tt_ratelimit_ok(&accept_rl, now, TT_RATELIMIT_1S, &held))
        tt_log_warn("accept on %s: %s; not accepting for %u ms "
                    "(%llu similar warnings suppressed)", g->name,
                    evutil_socket_error_to_string(e), g->backoff_ms,
                    (unsigned long long)held);
}

struct tt_listen_guard *tt_listen_guard_new(struct evconnlistener *l,
                                            struct event_base *base,
                                            const char *name)
{
    struct tt_listen_guard *g = calloc(1, sizeof(*g));
    unsigned i;

    if (g == NULL)
        return NULL;
    g->l = l;
    g->name = name;
    g->timer = evtimer_new(base, on_resume, g);
    if (g->timer == NULL) {
        free(g);
        return NULL;
    }
    pthread_mutex_lock(&reg_mu);
    for (i = 0; i < MAX_GUARDS && reg[i] != NULL; i++)
        ;
    if (i < MAX_GUARDS)
        reg[i] = g;
    pthread_mutex_unlock(&reg_mu);
    if (i == MAX_GUARDS) {
        event_free(g->timer);
        free(g);
        return NULL;
    }
    evconnlistener_set_error_cb(l, on_error);
    return g;
}

unsigned long tt_listen_guard_pauses(const struct tt_listen_guard *g)
{
    return g ? g->pauses : 0;
}

void tt_listen_guard_free(struct tt_listen_guard *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&reg_mu);
    for (unsigned i = 0; i < MAX_GUARDS; i++)
        if (reg[i] == g)
            reg[i] = NULL;
    pthread_mutex_unlock(&reg_mu);
    event_free(g->timer);
    free(g);
}

static void answer_503(evutil_socket_t fd, const char *msg)
{
    char resp[512], body[256];
    int blen, n;

    blen = snprintf(body, sizeof(body),
                    "{\"error\":{\"message\":\"%s\",\"type\":\"proxy_error\","
                    "\"code\":\"over_capacity\"}}\n", msg);
    n = snprintf(resp, sizeof(resp),
                 "HTTP/1.1 503 Service Unavailable\r\n"
                 "Content-Type: application/json\r\n"
                 "Content-Length: %d\r\n"
                 "Retry-After: 1\r\n"
                 "Connection: close\r\n"
                 "\r\n%s", blen, body);
    if (n > 0 && (size_t)n < sizeof(resp) &&
        send(fd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        /* the client is gone or its window is full: closing is all */
    }
}

void tt_listen_refuse(struct tt_linger *lg, evutil_socket_t fd, int plain,
                      const char *msg)
{
    if (!plain) {
        evutil_closesocket(fd);
        return;
    }
    answer_503(fd, msg);
    /* the client may be sending its request: a plain close would answer
     * that with a reset, which can destroy the 503 before it is read */
    tt_linger_close(lg, fd);
}

int tt_listen_addr_taken(const struct sockaddr *sa, unsigned salen)
{
    int one = 1, fd, rc, e;

    if ((sa->sa_family == AF_INET && ((const struct sockaddr_in *)sa)->sin_port == 0) ||
        (sa->sa_family == AF_INET6 && ((const struct sockaddr_in6 *)sa)->sin6_port == 0))
        return 0;               /* port 0: the kernel picks a free one */
    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* as the real listener (dual-stack as it is); TIME_WAIT no conflict */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    rc = bind(fd, sa, (socklen_t)salen);
    e = errno;
    close(fd);
    if (rc == 0)
        return 0;
    errno = e;
    return e == EADDRINUSE ? 1 : -1;
}
