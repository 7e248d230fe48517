/*
 * Unit tests of proxy/server/sdnotify.c and proxy/server/ready.c: what reaches a real
 * NOTIFY_SOCKET (an abstract AF_UNIX datagram socket of the test) from
 * READY=1, STATUS=, RELOADING=1, STOPPING=1 and the watchdog, in
 * particular that an event loop that does not run stops the WATCHDOG=1
 * pings while the status keeps coming; that a receiver that does not read
 * never stops the caller (the messages wait, in order, and the exit waits
 * for them a bounded time); and the ready file's content.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "metrics/agg.h"
#include "proxy/server/ready.h"
#include "proxy/server/sdnotify.h"

static int nsock = -1;

/* an abstract socket named after our pid; NOTIFY_SOCKET names it */
static int setup(void **state)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char name[64];
    int n;

    (void)state;
    n = snprintf(name, sizeof(name), "tokentap-unit-%ld", (long)getpid());
    memcpy(sa.sun_path + 1, name, (size_t)n);
    nsock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(nsock >= 0);
    assert_int_equal(bind(nsock, (struct sockaddr *)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)), 0);
    char env[80];
    snprintf(env, sizeof(env), "@%s", name);
    setenv("NOTIFY_SOCKET", env, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close(nsock);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    return 0;
}

/* the next datagram within <ms>, NUL-terminated in <buf>; 0 or -1 */
static int next_msg(char *buf, size_t len, int ms)
{
    struct pollfd p = { nsock, POLLIN, 0 };
    ssize_t n;

    if (poll(&p, 1, ms) != 1)
        return -1;
    n = recv(nsock, buf, len - 1, 0);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

static int has_line(const char *msg, const char *line)
{
    size_t n = strlen(line);
    const char *p = msg;

    while ((p = strstr(p, line)) != NULL) {
        if ((p == msg || p[-1] == '\n') && (p[n] == '\0' || p[n] == '\n'))
            return 1;
        p += n;
    }
    return 0;
}

/* one pass of <base>'s loop: whatever is due */
static void run_once(struct event_base *base)
{
    event_base_loop(base, EVLOOP_ONCE);
}

static void test_ready_status_reload_stopping(void **state)
{
    struct tt_agg_opts o = { 0 };
    struct tt_agg *agg = tt_agg_new(&o);
    struct event_base *base = event_base_new();
    struct tt_sd *sd;
    char msg[512];

    (void)state;
    unsetenv("WATCHDOG_USEC");
    tt_agg_inflight(agg, +1);
    tt_agg_inflight(agg, +1);
    tt_agg_inflight(agg, -1);
    sd = tt_sd_new(base, agg);
    assert_non_null(sd);
    tt_sd_ready(sd, "listening on 127.0.0.1:1");
    assert_int_equal(next_msg(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "READY=1"));
    assert_true(has_line(msg, "STATUS=listening on 127.0.0.1:1"));

    tt_sd_reloading(sd);
    assert_int_equal(next_msg(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "RELOADING=1"));
    assert_non_null(strstr(msg, "MONOTONIC_USEC="));
    tt_sd_reloaded(sd);
    assert_int_equal(next_msg(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "READY=1"));
    /* two started, one finished */
    assert_true(has_line(msg, "STATUS=2 requests, 1 in flight"));

    tt_sd_stopping(sd);
    assert_int_equal(next_msg(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "STOPPING=1"));

    tt_sd_free(sd);
    event_base_free(base);
    tt_agg_free(agg);
}

static void *run_loop(void *arg)
{
    event_base_loop(arg, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static void test_stuck_loop_stops_watchdog(void **state)
{
    struct tt_agg_opts o = { 0 };
    struct tt_agg *agg = tt_agg_new(&o);
    struct event_base *main_base = event_base_new();
    struct event_base *worker = event_base_new();
    struct tt_sd *sd;
    pthread_t th;
    char msg[512];
    int statuses = 0, pinged = 0, i;

    (void)state;
    setenv("WATCHDOG_USEC", "80000", 1);    /* check every 20 ms */
    sd = tt_sd_new(main_base, agg);
    assert_non_null(sd);
    assert_int_equal(tt_sd_watch_loop(sd, main_base), 0);
    assert_int_equal(tt_sd_watch_loop(sd, worker), 0);
    tt_sd_ready(sd, "up");
    assert_int_equal(next_msg(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "READY=1"));

    /* <worker> never runs: five checks, none may ping */
    while (statuses < 5) {
        run_once(main_base);
        while (next_msg(msg, sizeof(msg), 0) == 0) {
            assert_non_null(strstr(msg, "STATUS="));
            assert_false(has_line(msg, "WATCHDOG=1"));
            statuses++;
        }
    }

    /* it runs now: the pings resume */
    assert_int_equal(pthread_create(&th, NULL, run_loop, worker), 0);
    for (i = 0; i < 2000 && !pinged; i++) {
        run_once(main_base);
        while (next_msg(msg, sizeof(msg), 0) == 0)
            pinged |= has_line(msg, "WATCHDOG=1");
    }
    assert_true(pinged);
    event_base_loopbreak(worker);
    pthread_join(th, NULL);

    tt_sd_free(sd);
    event_base_free(worker);
    event_base_free(main_base);
    tt_agg_free(agg);
}

/* fill our socket's receive queue with junk until the kernel refuses more:
 * from now on a blocking send to it waits until we read */
static int fill_queue(void)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), n = 0;

    assert_true(s >= 0);
    assert_int_equal(getsockname(nsock, (struct sockaddr *)&ss, &len), 0);
    while (sendto(s, "JUNK=1", 6, 0, (struct sockaddr *)&ss, len) == 6)
        n++;
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    close(s);
    return n;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* the next message that is not our junk */
static int next_note(char *buf, size_t len, int ms)
{
    while (next_msg(buf, len, ms) == 0)
        if (!has_line(buf, "JUNK=1"))
            return 0;
    return -1;
}

static void test_stuck_reader_never_blocks(void **state)
{
    struct tt_agg_opts o = { 0 };
    struct tt_agg *agg = tt_agg_new(&o);
    struct event_base *base = event_base_new();
    struct tt_sd *sd;
    char msg[512];
    double t0;
    int i, statuses = 0;

    (void)state;
    setenv("WATCHDOG_USEC", "80000", 1);    /* a status every 20 ms */
    sd = tt_sd_new(base, agg);
    assert_non_null(sd);
    assert_int_equal(tt_sd_watch_loop(sd, base), 0);
    assert_true(fill_queue() > 0);
    /* every call returns although nothing can be delivered (sd_notify()
     * called here would block in the first one); alarm(): a hang fails */
    alarm(20);
    tt_sd_ready(sd, "up");
    for (i = 0; i < 60; i++)        /* 60 ticks: far more than the queue */
        run_once(base);
    tt_sd_reloading(sd);
    run_once(base);
    tt_sd_reloaded(sd);
    run_once(base);

    /* the reader catches up: the state messages in order, the ticks merged */
    assert_int_equal(next_note(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "READY=1"));
    assert_true(has_line(msg, "STATUS=up"));
    for (;;) {
        assert_int_equal(next_note(msg, sizeof(msg), 2000), 0);
        if (!has_line(msg, "STATUS=0 requests, 0 in flight"))
            break;
        statuses++;
    }
    assert_true(has_line(msg, "RELOADING=1"));
    assert_int_equal(statuses, 1);      /* one waiting tick, replaced 59 times */
    do
        assert_int_equal(next_note(msg, sizeof(msg), 2000), 0);
    while (!has_line(msg, "READY=1"));
    assert_true(has_line(msg, "STATUS=0 requests, 0 in flight"));

    /* stuck again at exit: STOPPING=1 cannot go, tt_sd_free() waits about a
     * second for it, then returns */
    fill_queue();
    tt_sd_stopping(sd);
    t0 = now_s();
    tt_sd_free(sd);
    assert_true(now_s() - t0 >= 0.9);
    assert_true(now_s() - t0 < 10);
    alarm(0);
    /* the sender left behind delivers once we read, then ends by itself */
    do
        assert_int_equal(next_note(msg, sizeof(msg), 2000), 0);
    while (!has_line(msg, "STOPPING=1"));
    event_base_free(base);
    tt_agg_free(agg);
}

/* a reader stuck for good and more messages than the queue holds: every
 * call still returns, and what waits stays bounded (32; the rest dropped) */
static void test_stuck_reader_queue_is_bounded(void **state)
{
    struct tt_agg_opts o = { 0 };
    struct tt_agg *agg = tt_agg_new(&o);
    struct event_base *base = event_base_new();
    struct tt_sd *sd;
    char msg[512];
    int i, reloading = 0;

    (void)state;
    unsetenv("WATCHDOG_USEC");
    sd = tt_sd_new(base, agg);
    assert_non_null(sd);
    assert_true(fill_queue() > 0);
    alarm(20);
    tt_sd_ready(sd, "up");
    for (i = 0; i < 40; i++)        /* state messages: never merged */
        tt_sd_reloading(sd);
    alarm(0);
    /* READY=1 (taken by the sender, or still queued) and 31 or 32 of the
     * 40: the queue's 32 places, the others dropped */
    assert_int_equal(next_note(msg, sizeof(msg), 2000), 0);
    assert_true(has_line(msg, "READY=1"));
    while (next_note(msg, sizeof(msg), 300) == 0) {
        assert_true(has_line(msg, "RELOADING=1"));
        reloading++;
    }
    assert_true(reloading >= 31 && reloading <= 32);
    tt_sd_free(sd);
    event_base_free(base);
    tt_agg_free(agg);
}

static void test_ready_file(void **state)
{
    char dir[] = "/tmp/tt-ready-XXXXXX", path[128], tmp[160], buf[512], err[256];
    struct tt_ready_kv kv[2] = { { "listen", "127.0.0.1:8080" }, { "admin", NULL } };
    struct stat st;
    cJSON *j;
    FILE *f;
    size_t n;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/ready.json", dir);
    assert_int_equal(tt_ready_write(path, kv, 2, err, sizeof(err)), 0);
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    j = cJSON_Parse(buf);
    assert_non_null(j);
    assert_int_equal((int)cJSON_GetObjectItem(j, "pid")->valuedouble, (int)getpid());
    assert_string_equal(cJSON_GetObjectItem(j, "listen")->valuestring, "127.0.0.1:8080");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "admin")));
    cJSON_Delete(j);
    /* the temporary name is gone (renamed) */
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    assert_int_not_equal(stat(tmp, &st), 0);
    unlink(path);

    /* a directory that does not exist: an error naming the file */
    snprintf(path, sizeof(path), "%s/no/such/ready.json", dir);
    assert_int_equal(tt_ready_write(path, kv, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "ready.json"));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ready_status_reload_stopping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stuck_loop_stops_watchdog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stuck_reader_never_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stuck_reader_queue_is_bounded, setup, teardown),
        cmocka_unit_test(test_ready_file),
    };
    evthread_use_pthreads();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
