/*
 * Unit tests of the utility layer (src/util): the heap, the log interface, name checks and the
 * YAML walker. The
 * diagnostic's formatting is tested with the trace reader that fills it (test_trace.c).
 *
 * Expected values are worked by hand: the heap's pop order is the sorted order of what was
 * pushed, written out below; log lines are the printf text the test spells in full.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/log.h"
#include "gpusched/names.h"
#include "util/file.h"
#include "util/heap.h"
#include "util/yaml.h"

/* A record with a key and a payload, so that a copy that loses bytes would show. */
struct rec {
    int64_t key;
    uint32_t tag;
};

static bool rec_before(const void *a, const void *b, void *ctx)
{
    const struct rec *x = a, *y = b;
    int *calls = ctx;
    if (calls != NULL)
        (*calls)++;
    if (x->key != y->key)
        return x->key < y->key;
    return x->tag < y->tag;
}

static void test_heap_pops_in_order_of_before(void **state)
{
    (void)state;
    struct gs_heap h;
    int calls = 0;
    gs__heap_init(&h, sizeof(struct rec), rec_before, &calls);
    assert_null(gs__heap_top(&h));
    /* Pushed: keys 5 3 8 1 3 9 0 with tags 0..6. Sorted by (key, tag):
     * (0,6) (1,3) (3,1) (3,4) (5,0) (8,2) (9,5). */
    const int64_t keys[] = {5, 3, 8, 1, 3, 9, 0};
    for (uint32_t i = 0; i < 7; i++)
        assert_int_equal(gs__heap_push(&h, &(struct rec){keys[i], i}), GS_OK);
    assert_int_equal(gs__heap_len(&h), 7);
    assert_true(calls > 0); /* ctx reaches the relation */
    const struct rec want[] = {{0, 6}, {1, 3}, {3, 1}, {3, 4}, {5, 0}, {8, 2}, {9, 5}};
    for (uint32_t i = 0; i < 7; i++) {
        const struct rec *top = gs__heap_top(&h);
        assert_non_null(top);
        assert_int_equal(top->key, want[i].key);
        struct rec got;
        assert_true(gs__heap_pop(&h, &got));
        assert_int_equal(got.key, want[i].key);
        assert_int_equal(got.tag, want[i].tag);
    }
    struct rec untouched = {42, 42};
    assert_false(gs__heap_pop(&h, &untouched));
    assert_int_equal(untouched.key, 42);
    gs__heap_fini(&h);
    gs__heap_fini(NULL);
}

static void test_heap_grows_past_its_first_allocation(void **state)
{
    (void)state;
    struct gs_heap h;
    gs__heap_init(&h, sizeof(struct rec), rec_before, NULL);
    /* 1000 keys pushed in decreasing order 999..0 come out as 0..999; interleaved pops after
     * every third push check the hole-sifting on a partly filled array. */
    for (int64_t k = 999; k >= 0; k--)
        assert_int_equal(gs__heap_push(&h, &(struct rec){k, 0}), GS_OK);
    for (int64_t k = 0; k < 1000; k++) {
        struct rec got;
        assert_true(gs__heap_pop(&h, &got));
        assert_int_equal(got.key, k);
    }
    /* Push 10, 20, 30, pop (10), push 5, pop (5), pop (20), push 25, pop (25), pop (30). */
    const int64_t script[] = {10, 20, 30, -1, 5, -1, -1, 25, -1, -1};
    const int64_t popped[] = {10, 5, 20, 25, 30};
    uint32_t np = 0;
    for (uint32_t i = 0; i < 10; i++) {
        if (script[i] >= 0) {
            assert_int_equal(gs__heap_push(&h, &(struct rec){script[i], 0}), GS_OK);
        } else {
            struct rec got;
            assert_true(gs__heap_pop(&h, &got));
            assert_int_equal(got.key, popped[np++]);
        }
    }
    assert_int_equal(gs__heap_len(&h), 0);
    gs__heap_fini(&h);
}

struct captured {
    char line[GS_LOG_LINE_MAX + 8];
    size_t len;
    int calls;
};

static void capture(void *ctx, const char *line)
{
    struct captured *c = ctx;
    c->len = strlen(line);
    memcpy(c->line, line, c->len + 1);
    c->calls++;
}

static void test_log_formats_one_line_for_the_sink(void **state)
{
    (void)state;
    struct captured c = {.calls = 0};
    gs_log(capture, &c, "%s: cannot serve on %s: %d", "kubelet", "/run/x.sock", -5);
    assert_int_equal(c.calls, 1);
    assert_string_equal(c.line, "kubelet: cannot serve on /run/x.sock: -5");
    gs_log(NULL, &c, "dropped %d", 1); /* logging off: the sink is not called */
    assert_int_equal(c.calls, 1);
}

static void test_log_cuts_long_lines_to_the_limit(void **state)
{
    (void)state;
    static char big[GS_LOG_LINE_MAX * 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct captured c = {.calls = 0};
    gs_log(capture, &c, "%s", big);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.len, GS_LOG_LINE_MAX - 1);
}

/* 1764705600123 ms is 2025-12-02T20:00:00.123Z (python3: datetime.fromtimestamp(1764705600.123,
 * timezone.utc)); the fields lifted are the message's own pod= and node= tokens. */
static void test_log_json_lifts_pod_node_and_queue_from_the_message(void **state)
{
    (void)state;
    char out[GS_LOG_JSON_MAX];
    assert_int_equal(gs_log_json_format(out, sizeof out, 1764705600123LL, "info", "scheduler",
                                        "bound pod=team-a/p1 node=n1 cycle=3 gpus={\"gpus\":[]}"),
                     GS_OK);
    assert_string_equal(out, "{\"ts\":\"2025-12-02T20:00:00.123Z\",\"level\":\"info\","
                             "\"component\":\"scheduler\",\"msg\":\"bound pod=team-a/p1 node=n1 "
                             "cycle=3 gpus={\\\"gpus\\\":[]}\",\"pod\":\"team-a/p1\","
                             "\"node\":\"n1\"}");
    /* A key inside a word (xpod=), an empty value, and punctuation after a value are not lifted
     * or are cut; a NULL level is info, a NULL component leaves the field out. */
    assert_int_equal(gs_log_json_format(out, sizeof out, 0, NULL, NULL,
                                        "xpod=a pod= (queue=q1) and node=n2: gone."),
                     GS_OK);
    assert_string_equal(out, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"info\","
                             "\"msg\":\"xpod=a pod= (queue=q1) and node=n2: gone.\","
                             "\"node\":\"n2\",\"queue\":\"q1\"}");
}

/* RFC 8259 section 7: quote, backslash and control characters escaped; valid UTF-8 (e-acute,
 * C3 A9) kept; the two bytes of a three-byte sequence cut short (E2 82) each become U+FFFD
 * (EF BF BD), so the line stays valid UTF-8. */
static void test_log_json_escapes_and_keeps_utf8_valid(void **state)
{
    (void)state;
    char out[GS_LOG_JSON_MAX];
    assert_int_equal(gs_log_json_format(out, sizeof out, 1000, "warn", "agent",
                                        "a\"b\\c\nd\te\x01 caf\xC3\xA9 \xE2\x82"),
                     GS_OK);
    assert_string_equal(out, "{\"ts\":\"1970-01-01T00:00:01.000Z\",\"level\":\"warn\","
                             "\"component\":\"agent\",\"msg\":\"a\\\"b\\\\c\\nd\\te\\u0001 "
                             "caf\xC3\xA9 \xEF\xBF\xBD\xEF\xBF\xBD\"}");
    /* An overlong encoding (C0 AF) and a surrogate (ED A0 80) are not valid UTF-8 either. */
    assert_int_equal(gs_log_json_format(out, sizeof out, 0, "info", NULL, "\xC0\xAF\xED\xA0\x80"),
                     GS_OK);
    assert_string_equal(out, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"info\",\"msg\":\""
                             "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"}");
}

/* The worst message (every byte a control character, six out) and a too-small buffer. */
static void test_log_json_fits_the_worst_line_and_refuses_a_short_buffer(void **state)
{
    (void)state;
    static char msg[GS_LOG_LINE_MAX];
    static char out[GS_LOG_JSON_MAX];
    memset(msg, '\x01', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    assert_int_equal(gs_log_json_format(out, sizeof out, 0, "error", "scheduler", msg), GS_OK);
    /* 2047 x "\u0001" (6 bytes) plus the fields around it. */
    const char *head = "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"error\","
                       "\"component\":\"scheduler\",\"msg\":\"";
    assert_int_equal(strlen(out), strlen(head) + 6 * (GS_LOG_LINE_MAX - 1) + 2);
    char small[40];
    assert_int_equal(gs_log_json_format(small, sizeof small, 0, "info", NULL, "hello"), GS_ERANGE);
    assert_string_equal(small, "");
    assert_int_equal(gs_log_json_format(small, 0, 0, "info", NULL, "x"), GS_EINVAL);
    enum gs_log_format f = GS_LOG_FORMAT_TEXT;
    assert_int_equal(gs_log_format_parse("json", &f), GS_OK);
    assert_int_equal(f, GS_LOG_FORMAT_JSON);
    assert_int_equal(gs_log_format_parse("text", &f), GS_OK);
    assert_int_equal(f, GS_LOG_FORMAT_TEXT);
    assert_int_equal(gs_log_format_parse("JSON", &f), GS_EINVAL);
    assert_int_equal(gs_log_format_parse(NULL, &f), GS_EINVAL);
    assert_int_equal(f, GS_LOG_FORMAT_TEXT);
}

static void test_names_follow_kubernetes_dns1123_subdomains(void **state)
{
    (void)state;
    char why[200];
    /* Accepted, as Kubernetes' IsDNS1123Subdomain accepts them. */
    const char *good[] = {"a", "0", "llm-train", "a.b", "a-1.b-2.c", "9lives", "x--y"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(gs_name_is_dns1123_subdomain(good[i], strlen(good[i]), why, sizeof why));
    /* 253 characters is the limit: "a" x 253 passes, x 254 fails. */
    static char big[GS_NAME_SUBDOMAIN_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    assert_true(gs_name_is_dns1123_subdomain(big, GS_NAME_SUBDOMAIN_MAX, NULL, 0));
    assert_false(gs_name_is_dns1123_subdomain(big, GS_NAME_SUBDOMAIN_MAX + 1, why, sizeof why));
    assert_string_equal(why, "name is 254 characters, over the limit of 253");
    struct {
        const char *name;
        const char *why;
    } bad[] = {
        {"", "empty name"},
        {"A", "character 'A' (byte 0x41) at position 1 is not allowed: a name is lower-case "
              "letters, digits, '-' and '.'"},
        {"ab_c", "character '_' (byte 0x5f) at position 3 is not allowed: a name is lower-case "
                 "letters, digits, '-' and '.'"},
        {"-a", "a name must start with a lower-case letter or a digit"},
        {".a", "a name must start with a lower-case letter or a digit"},
        {"a-", "a name must end with a lower-case letter or a digit"},
        {"a.-b", "each '.'-separated part of a name must start and end with a lower-case letter "
                 "or a digit (position 2)"},
        {"ab-.c", "each '.'-separated part of a name must start and end with a lower-case letter "
                  "or a digit (position 4)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(
            gs_name_is_dns1123_subdomain(bad[i].name, strlen(bad[i].name), why, sizeof why));
        assert_string_equal(why, bad[i].why);
    }
    /* A NUL byte inside the given length is refused, not taken as the end. */
    assert_false(gs_name_is_dns1123_subdomain("a\0b", 3, why, sizeof why));
    assert_string_equal(why, "character '?' (byte 0x00) at position 2 is not allowed: a name is "
                             "lower-case letters, digits, '-' and '.'");
}

/* Records the events of a walk as one line each: "KIND@LINE:COL dDEPTH [text]". */
struct trace {
    char text[1024];
    size_t len;
};

static int trace_event(void *ctx, const struct gs_yaml_event *ev, struct gs_diag *d)
{
    (void)d;
    struct trace *t = ctx;
    static const char *const kinds[] = {"scalar", "seq", "map", "end", "alias"};
    int k = snprintf(t->text + t->len, sizeof t->text - t->len, "%s@%u:%u d%u%s%.*s\n",
                     kinds[ev->kind], ev->at.line, ev->at.col, ev->depth, ev->text ? " " : "",
                     ev->text ? (int)ev->len : 0, ev->text ? ev->text : "");
    if (k > 0)
        t->len += (size_t)k;
    return GS_OK;
}

static const struct gs_yaml_limits small_limits = {.bytes_max = 1024,
                                                   .depth_max = 2,
                                                   .nodes_max = 8,
                                                   .aliases = false,
                                                   .tags = false,
                                                   .what = "a test file"};

static void test_yaml_walk_streams_positioned_events(void **state)
{
    (void)state;
    struct trace t = {.len = 0};
    struct gs_diag d;
    memset(&d, 0, sizeof d);
    /* Line 1 "a: 1", line 2 "b: [x, 'y']": positions are where each node starts, 1-based. */
    const char *text = "a: 1\nb: [x, 'y']\n";
    assert_int_equal(gs__yaml_walk(text, strlen(text), &small_limits, trace_event, &t, &d), GS_OK);
    assert_string_equal(t.text, "map@1:1 d0\n"
                                "scalar@1:1 d1 a\n"
                                "scalar@1:4 d1 1\n"
                                "scalar@2:1 d1 b\n"
                                "seq@2:4 d1\n"
                                "scalar@2:5 d2 x\n"
                                "scalar@2:8 d2 y\n"
                                "end@2:11 d1\n"
                                "end@3:1 d0\n");
}

static void test_yaml_walk_enforces_the_reader_limits(void **state)
{
    (void)state;
    struct {
        const char *text;
        int rc;
        uint64_t line;
        uint32_t col;
        const char *msg;
    } cases[] = {
        /* depth_max 2: the third collection opens at line 1, column 10. */
        {"a: {b: {c: 1}}\n", GS_EPARSE, 1, 8, "nesting deeper than 2 levels"},
        /* nodes_max 8: map, then 4 pairs = 9th node "d" ... the 9th is the value of d. */
        {"a: 1\nb: 2\nc: 3\nd: 4\n", GS_EPARSE, 4, 4,
         "more than 8 YAML nodes (an alias counts each time it is used)"},
        {"a: &x 1\nb: *x\n", GS_EPARSE, 1, 4, "YAML aliases are not accepted"},
        {"a: !!str 1\n", GS_EPARSE, 1, 4,
         "YAML tags are not supported (found 'tag:yaml.org,2002:str')"},
        {"a: 1\n---\nb: 2\n", GS_EPARSE, 2, 1,
         "a second YAML document; a test file is one document"},
        {"a: [1\n", GS_EPARSE, 2, 1,
         "malformed YAML: did not find expected ',' or ']' (while parsing a flow sequence at "
         "line 1, column 4)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct trace t = {.len = 0};
        struct gs_diag d;
        memset(&d, 0, sizeof d);
        int rc =
            gs__yaml_walk(cases[i].text, strlen(cases[i].text), &small_limits, trace_event, &t, &d);
        if (rc != cases[i].rc || d.line != cases[i].line || d.column != cases[i].col ||
            strcmp(d.msg, cases[i].msg) != 0)
            fail_msg("case %zu: rc %d line %llu col %u msg '%s'", i, rc, (unsigned long long)d.line,
                     d.column, d.msg);
    }
    /* bytes_max 1024: one byte more is refused before parsing, for the whole input. */
    static char big[1025];
    memset(big, ' ', sizeof big);
    struct trace t = {.len = 0};
    struct gs_diag d;
    memset(&d, 0, sizeof d);
    assert_int_equal(gs__yaml_walk(big, sizeof big, &small_limits, trace_event, &t, &d), GS_EIO);
    assert_int_equal(d.line, 0);
    assert_string_equal(d.msg, "input is 1025 bytes, over the limit of 1024");
}

static void test_yaml_load_counts_aliases_by_what_they_expand_to(void **state)
{
    (void)state;
    /* With aliases allowed: b refers to a's 3-node list, so the document is map(1) + a(1) +
     * [1,2](3) + b(1) + *a(3) = 9 nodes, over 8; a and b alone (6 nodes) load. */
    struct gs_yaml_limits lim = small_limits;
    lim.aliases = true;
    struct gs_yaml_doc doc;
    struct gs_diag d;
    memset(&d, 0, sizeof d);
    const char *ok = "a: &l [1, 2]\nb: 3\n";
    assert_int_equal(gs__yaml_load(ok, strlen(ok), &lim, &doc, &d), GS_OK);
    const struct gs_yaml_node *a = gs__yaml_map_get(doc.root, "a");
    assert_non_null(a);
    assert_int_equal(a->kind, GS_YAML_SEQ);
    assert_int_equal(a->n, 2);
    assert_int_equal(a->at.line, 1);
    assert_int_equal(a->at.col, 4); /* libyaml starts a node at its properties: the anchor */
    assert_true(gs__yaml_text_is(a->u.items[1], "2"));
    assert_null(gs__yaml_map_get(doc.root, "c"));
    gs__yaml_doc_fini(&doc);
    const char *over = "a: &l [1, 2]\nb: *l\n";
    assert_int_equal(gs__yaml_load(over, strlen(over), &lim, &doc, &d), GS_EPARSE);
    assert_int_equal(d.line, 2);
    assert_int_equal(d.column, 4);
    assert_string_equal(d.msg, "more than 8 YAML nodes (an alias counts each time it is used)");
    assert_null(doc.root);
    gs__yaml_doc_fini(&doc);
    /* An empty document loads with no root. */
    assert_int_equal(gs__yaml_load("", 0, &lim, &doc, &d), GS_OK);
    assert_null(doc.root);
    gs__yaml_doc_fini(&doc);
}

/* A file that is not there: the reason in words, as strerror gives it (glibc's strerror_r under
 * _GNU_SOURCE returns the text rather than 0, which once made it "error 2"). */
static void test_read_file_says_why_it_cannot_open(void **state)
{
    (void)state;
    char *buf = (char *)1;
    size_t len = 7;
    struct gs_diag d;
    memset(&d, 0, sizeof d);
    assert_int_equal(gs__read_file("/nonexistent/gpusched-test", 1024, &buf, &len, &d), GS_EIO);
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_string_equal(d.msg, "cannot open: No such file or directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_pops_in_order_of_before),
        cmocka_unit_test(test_read_file_says_why_it_cannot_open),
        cmocka_unit_test(test_heap_grows_past_its_first_allocation),
        cmocka_unit_test(test_log_formats_one_line_for_the_sink),
        cmocka_unit_test(test_log_cuts_long_lines_to_the_limit),
        cmocka_unit_test(test_log_json_lifts_pod_node_and_queue_from_the_message),
        cmocka_unit_test(test_log_json_escapes_and_keeps_utf8_valid),
        cmocka_unit_test(test_log_json_fits_the_worst_line_and_refuses_a_short_buffer),
        cmocka_unit_test(test_names_follow_kubernetes_dns1123_subdomains),
        cmocka_unit_test(test_yaml_walk_streams_positioned_events),
        cmocka_unit_test(test_yaml_walk_enforces_the_reader_limits),
        cmocka_unit_test(test_yaml_load_counts_aliases_by_what_they_expand_to),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
