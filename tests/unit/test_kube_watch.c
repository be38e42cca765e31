/*
 * Tests of the watch-stream framing parser (include/gpusched/kube.h): the events of a stream
 * come out the same, in order, whatever the pieces it is fed in (every split point, every
 * byte alone, all at once); whitespace or nothing between events; braces and escaped quotes
 * inside strings; ERROR events with their Status; and each failure (an over-long event, bad
 * JSON, stray bytes, a missing or unknown type, a stream cut inside an event) with its message
 * and its stickiness until reset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/kube.h"

/* What a feed delivered, flattened to one line per event: "TYPE name rv". */
struct seen {
    char text[4096];
    int n;
    int stop_after; /* stop the feed (GS_ECONFLICT) after this many events; 0 = never */
    long code;
    char reason[64];
};

static int record(void *ud, const struct gs_kube_watch_event *ev)
{
    struct seen *s = ud;
    const char *name =
        json_string_value(json_object_get(json_object_get(ev->object, "metadata"), "name"));
    size_t len = strlen(s->text);
    (void)snprintf(s->text + len, sizeof s->text - len, "%s %s %s\n",
                   gs_kube_event_type_name(ev->type), name != NULL ? name : "-",
                   ev->resource_version != NULL ? ev->resource_version : "-");
    if (ev->type == GS_KUBE_EVENT_ERROR) {
        s->code = ev->status_code;
        (void)snprintf(s->reason, sizeof s->reason, "%s", ev->reason);
    }
    s->n++;
    return s->stop_after > 0 && s->n >= s->stop_after ? GS_ECONFLICT : GS_OK;
}

static const char STREAM[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"11\"},\"spec\":{\"note\":\"} { \\\" [\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"12\"},"
    "\"x\":[{},[],\"\\\\\"]}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"20\"}}"
    "}"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"21\"}}}"
    "\r\n"
    "  \t\n";

static const char WANT[] = "ADDED a 11\nMODIFIED a 12\nBOOKMARK - 20\nDELETED a 21\n";

static struct gs_kube_watch_parser *parser(size_t max)
{
    struct gs_kube_watch_parser *p = NULL;
    assert_int_equal(gs_kube_watch_parser_new(max, &p), GS_OK);
    assert_non_null(p);
    return p;
}

static void whole_stream_at_once(void **state)
{
    (void)state;
    struct gs_kube_watch_parser *p = parser(0);
    struct seen s = {0};
    assert_int_equal(gs_kube_watch_parser_feed(p, STREAM, strlen(STREAM), record, &s), GS_OK);
    assert_int_equal(gs_kube_watch_parser_finish(p), GS_OK);
    assert_string_equal(s.text, WANT);
    assert_string_equal(gs_kube_watch_parser_error(p), "");
    gs_kube_watch_parser_free(p);
}

static void split_at_every_byte_boundary(void **state)
{
    (void)state;
    size_t n = strlen(STREAM);
    for (size_t cut = 0; cut <= n; cut++) {
        struct gs_kube_watch_parser *p = parser(0);
        struct seen s = {0};
        assert_int_equal(gs_kube_watch_parser_feed(p, STREAM, cut, record, &s), GS_OK);
        assert_int_equal(gs_kube_watch_parser_feed(p, STREAM + cut, n - cut, record, &s), GS_OK);
        assert_int_equal(gs_kube_watch_parser_finish(p), GS_OK);
        if (strcmp(s.text, WANT) != 0)
            fail_msg("cut at %zu: got\n%s", cut, s.text);
        gs_kube_watch_parser_free(p);
    }
    /* Three pieces, every pair of cuts. */
    for (size_t a = 0; a <= n; a += 7)
        for (size_t b = a; b <= n; b += 5) {
            struct gs_kube_watch_parser *p = parser(0);
            struct seen s = {0};
            assert_int_equal(gs_kube_watch_parser_feed(p, STREAM, a, record, &s), GS_OK);
            assert_int_equal(gs_kube_watch_parser_feed(p, STREAM + a, b - a, record, &s), GS_OK);
            assert_int_equal(gs_kube_watch_parser_feed(p, STREAM + b, n - b, record, &s), GS_OK);
            assert_string_equal(s.text, WANT);
            gs_kube_watch_parser_free(p);
        }
}

static void one_byte_at_a_time(void **state)
{
    (void)state;
    struct gs_kube_watch_parser *p = parser(0);
    struct seen s = {0};
    for (size_t i = 0; STREAM[i] != '\0'; i++)
        assert_int_equal(gs_kube_watch_parser_feed(p, STREAM + i, 1, record, &s), GS_OK);
    assert_int_equal(gs_kube_watch_parser_feed(p, NULL, 0, record, &s), GS_OK);
    assert_string_equal(s.text, WANT);
    gs_kube_watch_parser_free(p);
}

static void error_event_carries_its_status(void **state)
{
    (void)state;
    static const char ev[] =
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
        "\"status\":\"Failure\",\"message\":\"too old resource version: 5 (120)\","
        "\"reason\":\"Expired\",\"code\":410}}\n";
    struct gs_kube_watch_parser *p = parser(0);
    struct seen s = {0};
    assert_int_equal(gs_kube_watch_parser_feed(p, ev, strlen(ev), record, &s), GS_OK);
    assert_string_equal(s.text, "ERROR - -\n");
    assert_int_equal(s.code, 410);
    assert_string_equal(s.reason, "Expired");
    gs_kube_watch_parser_free(p);
}

static void oversize_event_is_an_error_not_memory(void **state)
{
    (void)state;
    /* Bound 58: an event of exactly 58 bytes fits, one of 59 does not. */
    static const char ok[] =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"abcdefgh\"}}}";
    assert_int_equal(strlen(ok), 58);
    struct gs_kube_watch_parser *p = parser(58);
    struct seen s = {0};
    assert_int_equal(gs_kube_watch_parser_feed(p, ok, strlen(ok), record, &s), GS_OK);
    assert_int_equal(s.n, 1);
    /* A second event of 59 bytes, fed in pieces: refused when it passes 58. */
    static const char open[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"abcdefghi";
    assert_int_equal(gs_kube_watch_parser_feed(p, open, 40, record, &s), GS_OK);
    assert_int_equal(gs_kube_watch_parser_feed(p, open + 40, strlen(open) - 40, record, &s), GS_OK);
    assert_int_equal(strlen(open), 55);
    assert_int_equal(gs_kube_watch_parser_feed(p, "\"}}}", 4, record, &s), GS_ELIMIT);
    assert_string_equal(gs_kube_watch_parser_error(p), "byte 58: event longer than 58 bytes");
    /* Sticky until reset. */
    assert_int_equal(gs_kube_watch_parser_feed(p, ok, strlen(ok), record, &s), GS_ELIMIT);
    assert_int_equal(gs_kube_watch_parser_finish(p), GS_ELIMIT);
    gs_kube_watch_parser_reset(p);
    assert_string_equal(gs_kube_watch_parser_error(p), "");
    assert_int_equal(gs_kube_watch_parser_feed(p, ok, strlen(ok), record, &s), GS_OK);
    assert_int_equal(s.n, 2);
    gs_kube_watch_parser_free(p);

    /* The default bound is 16 MiB: a 17 MiB string inside an event is refused. */
    p = parser(0);
    size_t n = (size_t)17 << 20;
    char *huge = malloc(n);
    assert_non_null(huge);
    memcpy(huge, "{\"type\":\"ADDED\",\"object\":{\"a\":\"", 31);
    memset(huge + 31, 'x', n - 31);
    assert_int_equal(gs_kube_watch_parser_feed(p, huge, n, record, &s), GS_ELIMIT);
    assert_string_equal(gs_kube_watch_parser_error(p), "byte 0: event longer than 16777216 bytes");
    free(huge);
    gs_kube_watch_parser_free(p);
}

/* Feeds text that must fail and checks the code and the message. */
static void feed_fails(const char *text, int rc, const char *msg)
{
    struct gs_kube_watch_parser *p = parser(0);
    struct seen s = {0};
    int got = gs_kube_watch_parser_feed(p, text, strlen(text), record, &s);
    if (got == GS_OK)
        got = gs_kube_watch_parser_finish(p);
    if (got != rc || strcmp(gs_kube_watch_parser_error(p), msg) != 0)
        fail_msg("input %s\ngot %s '%s'\nwant %s '%s'", text, gs_errname(got),
                 gs_kube_watch_parser_error(p), gs_errname(rc), msg);
    gs_kube_watch_parser_free(p);
}

static void bad_streams_are_named(void **state)
{
    (void)state;
    feed_fails("{\"type\":\"ADDED\",\"object\":{}}\n[1]", GS_EPARSE,
               "byte 29: expected '{' to start an event, found byte 0x5b");
    feed_fails("{\"type\":\"ADDED\",\"object\":{}}}", GS_EPARSE,
               "byte 28: expected '{' to start an event, found byte 0x7d");
    feed_fails("{\"type\":\"ADDED\",\"object\":{\"a\":tru}}", GS_EPARSE,
               "byte 0: bad JSON in event: invalid token near 'tru' (after 33 bytes of it)");
    feed_fails("{\"object\":{}}", GS_EPARSE, "byte 0: event has no \"type\"");
    feed_fails("\n{\"type\":\"RENAMED\",\"object\":{}}", GS_EPARSE,
               "byte 1: unknown event type RENAMED");
    feed_fails("{\"type\":7,\"object\":{}}", GS_EPARSE,
               "byte 0: unknown event type (not a string)");
    feed_fails("{\"type\":\"DELETED\",\"object\":[]}", GS_EPARSE,
               "byte 0: DELETED event has no \"object\" object");
    feed_fails("{\"type\":\"DELETED\"}", GS_EPARSE,
               "byte 0: DELETED event has no \"object\" object");
    feed_fails("{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":", GS_EPARSE,
               "byte 29: stream ends inside an event");
    /* A brace inside a string does not end the event; the cut is then inside it. */
    feed_fails("{\"type\":\"ADDED\",\"object\":{\"a\":\"}}\"", GS_EPARSE,
               "byte 0: stream ends inside an event");
}

static void callback_stop_keeps_the_parser_usable(void **state)
{
    (void)state;
    struct gs_kube_watch_parser *p = parser(0);
    struct seen s = {.stop_after = 1};
    assert_int_equal(gs_kube_watch_parser_feed(p, STREAM, strlen(STREAM), record, &s),
                     GS_ECONFLICT);
    assert_int_equal(s.n, 1);
    assert_string_equal(gs_kube_watch_parser_error(p), "");
    s.stop_after = 0;
    static const char ev[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}";
    assert_int_equal(gs_kube_watch_parser_feed(p, ev, strlen(ev), record, &s), GS_OK);
    assert_string_equal(s.text, "ADDED a 11\nADDED b -\n");
    gs_kube_watch_parser_free(p);
    assert_int_equal(gs_kube_watch_parser_new(0, NULL), GS_EINVAL);
    gs_kube_watch_parser_free(NULL);
}

/* Bytes a real kube-apiserver (v1.37.2) sent for a watch of configmaps, kept in the fuzz corpus
 * (after the fuzzer's one-byte split seed): create, label, delete, and the two bookmarks the
 * server sent as timeoutSeconds ended the watch. */
static void real_apiserver_stream_in_every_split(void **state)
{
    (void)state;
    const char *src = getenv("GS_SOURCE_DIR");
    char path[1024];
    (void)snprintf(path, sizeof path, "%s/tests/fuzz/corpus/watch/real_apiserver_configmaps",
                   src != NULL ? src : ".");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf, f);
    assert_int_equal(fclose(f), 0);
    assert_true(n > 1 && n < sizeof buf);
    const char *text = buf + 1;
    n--;
    char want[4096] = "";
    for (size_t cut = 0; cut <= n; cut++) {
        struct gs_kube_watch_parser *p = parser(0);
        struct seen s = {0};
        assert_int_equal(gs_kube_watch_parser_feed(p, text, cut, record, &s), GS_OK);
        assert_int_equal(gs_kube_watch_parser_feed(p, text + cut, n - cut, record, &s), GS_OK);
        assert_int_equal(gs_kube_watch_parser_finish(p), GS_OK);
        if (cut == 0) {
            assert_string_equal(s.text, "ADDED gs-fuzz-seed 1020\nMODIFIED gs-fuzz-seed 1021\n"
                                        "DELETED gs-fuzz-seed 1022\nBOOKMARK - 1022\n"
                                        "BOOKMARK - 1022\n");
            (void)snprintf(want, sizeof want, "%s", s.text);
        } else {
            assert_string_equal(s.text, want);
        }
        gs_kube_watch_parser_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_stream_at_once),
        cmocka_unit_test(split_at_every_byte_boundary),
        cmocka_unit_test(one_byte_at_a_time),
        cmocka_unit_test(error_event_carries_its_status),
        cmocka_unit_test(oversize_event_is_an_error_not_memory),
        cmocka_unit_test(bad_streams_are_named),
        cmocka_unit_test(callback_stop_keeps_the_parser_usable),
        cmocka_unit_test(real_apiserver_stream_in_every_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
