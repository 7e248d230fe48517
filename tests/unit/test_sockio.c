/*
 * Unit tests of tt_recv() and tt_send() (proxy/http/io.c), the per-event
 * path's recv/send made as the system calls themselves: every outcome the
 * callers branch on is the one recv(2)/send(2) give on the same socket,
 * with a second thread running (the case they exist for): bytes and
 * counts, a partial send into a full buffer, EAGAIN on an empty socket,
 * 0 at the peer's EOF, and EPIPE without SIGPIPE after the peer is gone;
 * and that they are not cancellation points, which is what they are for
 * (glibc's recv and send act on a pending cancel: the thread would end
 * inside the call).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "proxy/http/io.h"

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
    (void)sig;
    sigpipes++;
}

static void *idle_thread(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

/* a second thread for the whole run, as with the record writer */
static int setup(void **state)
{
    static pthread_t t;
    struct sigaction sa;

    (void)state;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigpipe;
    sigaction(SIGPIPE, &sa, NULL);
    return pthread_create(&t, NULL, idle_thread, NULL) != 0;
}

static void test_bytes_both_ways(void **state)
{
    int sv[2];
    char buf[64];
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(tt_send(sv[0], "data: {\"x\":1}\n\n", 16, MSG_NOSIGNAL), 16);
    assert_int_equal(tt_recv(sv[1], buf, sizeof(buf), 0), 16);
    assert_memory_equal(buf, "data: {\"x\":1}\n\n", 16);
    /* a short buffer takes what fits, the rest stays */
    assert_int_equal(tt_send(sv[1], "abcdef", 6, MSG_NOSIGNAL), 6);
    assert_int_equal(tt_recv(sv[0], buf, 4, 0), 4);
    assert_memory_equal(buf, "abcd", 4);
    assert_int_equal(tt_recv(sv[0], buf, sizeof(buf), 0), 2);
    assert_memory_equal(buf, "ef", 2);
    close(sv[0]);
    close(sv[1]);
}

static void test_empty_eof_and_gone(void **state)
{
    int sv[2];
    char buf[16];
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    errno = 0;
    assert_int_equal(tt_recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    shutdown(sv[0], SHUT_WR);
    assert_int_equal(tt_recv(sv[1], buf, sizeof(buf), 0), 0);
    close(sv[1]);
    sigpipes = 0;
    errno = 0;
    assert_int_equal(tt_send(sv[0], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(sigpipes, 0);
    close(sv[0]);
}

/* into a full buffer: a partial count, then EAGAIN, as send(2) */
static void test_full_buffer(void **state)
{
    int sv[2], size = 4096;
    static char big[1 << 20];
    ssize_t w, total = 0;
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    memset(big, 'e', sizeof(big));
    w = tt_send(sv[0], big, sizeof(big), MSG_NOSIGNAL | MSG_DONTWAIT);
    assert_true(w > 0 && w < (ssize_t)sizeof(big));
    total = w;
    while ((w = tt_send(sv[0], big, sizeof(big), MSG_NOSIGNAL | MSG_DONTWAIT)) > 0)
        total += w;
    assert_int_equal(w, -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    /* every byte the sends counted arrives */
    for (ssize_t got = 0, r; got < total; got += r) {
        r = tt_recv(sv[1], big, sizeof(big), 0);
        assert_true(r > 0);
    }
    assert_int_equal(tt_recv(sv[1], big, sizeof(big), MSG_DONTWAIT), -1);
    close(sv[0]);
    close(sv[1]);
}

/* a thread with a cancel pending calls both and comes back from both */
static int cancel_fd;
static atomic_int cancel_sent, cancel_calls;

static void *cancelled_thread(void *arg)
{
    char c;
    (void)arg;
    while (!atomic_load(&cancel_sent))
        ;                           /* no cancellation point on the way */
    if (tt_recv(cancel_fd, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN)
        atomic_fetch_add(&cancel_calls, 1);
    if (tt_send(cancel_fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
        atomic_fetch_add(&cancel_calls, 1);
    pthread_testcancel();           /* the cancel takes effect here */
    return NULL;
}

static void test_not_cancellation_points(void **state)
{
    int sv[2];
    pthread_t t;
    void *ret = NULL;
    char c;
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cancel_fd = sv[0];
    assert_int_equal(pthread_create(&t, NULL, cancelled_thread, NULL), 0);
    assert_int_equal(pthread_cancel(t), 0);
    atomic_store(&cancel_sent, 1);
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    assert_int_equal(atomic_load(&cancel_calls), 2);
    assert_int_equal(recv(sv[1], &c, 1, MSG_DONTWAIT), 1);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_both_ways),
        cmocka_unit_test(test_empty_eof_and_gone),
        cmocka_unit_test(test_full_buffer),
        cmocka_unit_test(test_not_cancellation_points),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
