/*
 * Unit tests of proxy/server/admin.c: the four endpoints, 404, 405 and readyz
 * while draining, over real sockets to an event base in a second thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "metrics/agg.h"
#include "proxy/server/admin.h"

static struct event_base *base;
static struct tt_admin *admin;
static struct tt_agg *agg;
static int port;

static void *loop(void *arg)
{
    (void)arg;
    event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* one request over a fresh connection; returns the whole response */
static char *http(const char *method, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Length: 0\r\n\r\n", method, path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while ((k = read(fd, buf + len, cap - len - 1)) > 0)
        len += (size_t)k;
    buf[len] = '\0';
    close(fd);
    return buf;
}

static void expect(const char *method, const char *path, const char *status,
                   const char *contains)
{
    char *r = http(method, path);
    if (strncmp(r, status, strlen(status)) != 0)
        fail_msg("%s %s: got '%.40s', want '%s'", method, path, r, status);
    if (contains != NULL && strstr(r, contains) == NULL)
        fail_msg("%s %s: no '%s' in response", method, path, contains);
    free(r);
}

static void test_endpoints(void **state)
{
    (void)state;
    expect("GET", "/healthz", "HTTP/1.1 200", "ok");
    expect("GET", "/readyz", "HTTP/1.1 200", "ready");
    expect("GET", "/metrics", "HTTP/1.1 200",
           "Content-Type: text/plain; version=0.0.4; charset=utf-8");
    expect("GET", "/metrics?x=1", "HTTP/1.1 200", "tokentap_build_info{version=");
    expect("GET", "/stats", "HTTP/1.1 200", "\"schema\":\"tokentap.stats/1\"");
    expect("GET", "/stats", "HTTP/1.1 200", "Content-Type: application/json");
    expect("GET", "/nope", "HTTP/1.1 404", NULL);
    expect("GET", "/", "HTTP/1.1 404", NULL);
    expect("POST", "/metrics", "HTTP/1.1 405", "Allow: GET, HEAD");
    expect("DELETE", "/healthz", "HTTP/1.1 405", NULL);
    tt_admin_set_draining(admin, 1);
    expect("GET", "/readyz", "HTTP/1.1 503", "draining");
    expect("GET", "/healthz", "HTTP/1.1 200", NULL);
    tt_admin_set_draining(admin, 0);
    expect("GET", "/readyz", "HTTP/1.1 200", NULL);
}

static void test_bad_address(void **state)
{
    char err[128];
    (void)state;
    assert_null(tt_admin_start(base, "nonsense", agg, err, sizeof(err)));
    assert_non_null(strstr(err, "nonsense"));
    assert_null(tt_admin_start(base, "127.0.0.1:99999", agg, err, sizeof(err)));
}

int main(void)
{
    char err[256];
    pthread_t th;

    evthread_use_pthreads();
    base = event_base_new();
    agg = tt_agg_new(NULL);
    admin = tt_admin_start(base, "127.0.0.1:0", agg, err, sizeof(err));
    if (admin == NULL) {
        fprintf(stderr, "admin: %s\n", err);
        return 1;
    }
    port = tt_admin_port(admin);
    pthread_create(&th, NULL, loop, NULL);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_bad_address),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    event_base_loopbreak(base);
    pthread_join(th, NULL);
    tt_admin_free(admin);
    tt_agg_free(agg);
    event_base_free(base);
    return rc;
}
