/*
 * Unit tests for proxy/base/log.c's line builder (shared by the log and the
 * access log): logfmt quoting, JSON escaping, invalid UTF-8, numbers, and
 * lines cut at the buffer's end that stay well formed; the access log's
 * client address as inet_ntop writes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "proxy/http/access.h"
#include "proxy/base/log.h"

/* 2026-05-01T12:00:00.123Z */
#define WALL 1777636800123000000LL

static const char *line_of(struct tt_logline *l)
{
    tt_logline_end(l);
    l->buf[l->len] = '\0';      /* tests only: the buffer has room left */
    return l->buf;
}

static void test_logfmt_quoting(void **state)
{
    struct tt_logline l;
    (void)state;

    tt_logline_begin(&l, TT_LOG_LOGFMT, WALL);
    tt_logline_str(&l, "plain", "openai.chat");
    tt_logline_str(&l, "empty", "");
    tt_logline_str(&l, "blank", "a b");
    tt_logline_str(&l, "eq", "k=v");
    tt_logline_str(&l, "quote", "say \"hi\"\n");
    tt_logline_int(&l, "status", 200);
    tt_logline_ms(&l, "ttft_ms", 12.5);
    tt_logline_ms(&l, "whole_ms", 3.0);
    assert_string_equal(line_of(&l),
        "ts=2026-05-01T12:00:00.123Z plain=openai.chat empty=\"\" blank=\"a b\" "
        "eq=\"k=v\" quote=\"say \\\"hi\\\"\\n\" status=200 ttft_ms=12.5 whole_ms=3\n");
}

static void test_json_escapes_and_utf8(void **state)
{
    struct tt_logline l;
    cJSON *o;
    (void)state;

    tt_logline_begin(&l, TT_LOG_JSON, WALL);
    tt_logline_str(&l, "model", "m\xc3\xa9t\x01");   /* valid UTF-8, a control */
    tt_logline_strn(&l, "bad", "a\xff" "b", 3);      /* invalid byte */
    tt_logline_int(&l, "n", -7);
    assert_string_equal(line_of(&l),
        "{\"ts\":\"2026-05-01T12:00:00.123Z\",\"model\":\"m\xc3\xa9t\\u0001\","
        "\"bad\":\"a\xEF\xBF\xBD" "b\",\"n\":-7}\n");
    o = cJSON_Parse(l.buf);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "bad")->valuestring, "a\xEF\xBF\xBD" "b");
    cJSON_Delete(o);
}

/* a value longer than the line: cut, still one parseable line */
static void test_long_value_is_cut_well_formed(void **state)
{
    static char big[3 * TT_LOGLINE_MAX];
    struct tt_logline l;
    cJSON *o;
    (void)state;

    memset(big, '"', sizeof(big) - 1);      /* every byte escapes to two */
    tt_logline_begin(&l, TT_LOG_JSON, WALL);
    tt_logline_str(&l, "path", big);
    tt_logline_int(&l, "status", 200);
    line_of(&l);
    assert_true(l.len <= TT_LOGLINE_MAX);
    assert_int_equal(l.buf[l.len - 1], '\n');
    o = cJSON_Parse(l.buf);
    assert_non_null(o);
    assert_true(strlen(cJSON_GetObjectItem(o, "path")->valuestring) > 900);
    cJSON_Delete(o);

    tt_logline_begin(&l, TT_LOG_LOGFMT, 0);
    tt_logline_str(&l, "path", big);
    line_of(&l);
    assert_true(l.len <= TT_LOGLINE_MAX);
    assert_memory_equal(l.buf, "path=\"\\\"", 8);
    assert_string_equal(l.buf + l.len - 2, "\"\n");
    assert_true(l.buf[l.len - 3] == '"' && l.buf[l.len - 4] == '\\');
}

/* tt_access_peer's dotted quad is inet_ntop's, for every value of every
 * octet's width; IPv6 as inet_ntop; a unix socket or no address gives "" */
static void test_access_peer_text(void **state)
{
    (void)state;
    char got[64], want[64];
    struct sockaddr_in a4 = { .sin_family = AF_INET };
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
    struct sockaddr un = { .sa_family = AF_UNIX };

    for (unsigned v = 0; v < 256; v++) {
        unsigned char *b = (unsigned char *)&a4.sin_addr;
        b[0] = (unsigned char)v;
        b[1] = (unsigned char)(255 - v);
        b[2] = (unsigned char)(v * 7);
        b[3] = (unsigned char)(v / 3);
        tt_access_peer((struct sockaddr *)&a4, sizeof(a4), got, sizeof(got));
        inet_ntop(AF_INET, &a4.sin_addr, want, sizeof(want));
        assert_string_equal(got, want);
    }
    inet_pton(AF_INET6, "2001:db8::1:0:0:1", &a6.sin6_addr);
    tt_access_peer((struct sockaddr *)&a6, sizeof(a6), got, sizeof(got));
    assert_string_equal(got, "2001:db8::1:0:0:1");
    tt_access_peer(&un, sizeof(un), got, sizeof(got));
    assert_string_equal(got, "");
    tt_access_peer(NULL, 0, got, sizeof(got));
    assert_string_equal(got, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logfmt_quoting),
        cmocka_unit_test(test_access_peer_text),
        cmocka_unit_test(test_json_escapes_and_utf8),
        cmocka_unit_test(test_long_value_is_cut_well_formed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
