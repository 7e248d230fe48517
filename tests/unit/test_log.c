/*
 * Unit tests for proxy/log.c's line builder (shared by the log and the
 * access log): logfmt quoting, JSON escaping, invalid UTF-8, numbers, and
 * lines cut at the buffer's end that stay well formed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "proxy/log.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logfmt_quoting),
        cmocka_unit_test(test_json_escapes_and_utf8),
        cmocka_unit_test(test_long_value_is_cut_well_formed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
