/*
 * Unit tests of the report's --tz over the C library's tz database (src/cli/tz.h): IANA zones
 * with DST per printed time, across the 2026 changes worked out by hand from the EU and US
 * rules, and a clear error for an unknown zone.
 *
 * 2026's changes: the EU changes at 01:00 UTC on the last Sundays of March and October (Directive
 * 2000/84/EC); 2026-01-01 is a Thursday, so 2026-03-01 (59 days later, 59 mod 7 = 3) is a
 * Sunday and the last Sunday of March is the 29th; 2026-10-01 (273 days later, 273 mod 7 = 0)
 * a Thursday, its last Sunday the 25th. The US changes at 02:00 local on the second Sunday of
 * March (the 8th: 07:00 UTC at EST) and the first Sunday of November (the 1st: 06:00 UTC at
 * EDT) (Energy Policy Act of 2005).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/tz.h"
#include "gpusched/err.h"
#include "gpusched/usage.h"
#include "gpusched/usage_report.h"

#define H_MS INT64_C(3600000)
#define DAY_MS (INT64_C(86400) * 1000)

/* Formats the UTC time `utc` (RFC 3339) in zone tz as the report prints it. */
static void in_zone(struct gs__cli_tz *tz, const char *utc, char *buf, size_t cap)
{
    int64_t ms;
    assert_int_equal(gs_usage_parse_time(utc, &ms), GS_OK);
    gs_usage_format_time_tz(ms, gs__cli_tz_offset_at(ms, tz), buf, cap);
}

static void zone(const char *name, struct gs__cli_tz *tz)
{
    char msg[700];
    if (gs__cli_tz_parse(name, tz, msg, sizeof(msg)) != GS_OK)
        fail_msg("%s: %s (tzdata is a dependency: scripts/install-deps.sh)", name, msg);
    assert_string_equal(tz->name, name);
}

static void test_berlin_changes_at_01_utc_on_the_last_sundays(void **state)
{
    (void)state;
    /* 2026-03-29T01:00:00Z by hand: 20,454 days to 2026-01-01 (56 x 365 + 14 leap days), plus
     * 31 + 28 + 28 = 20,541 days, plus an hour. */
    int64_t ms;
    assert_int_equal(gs_usage_parse_time("2026-03-29T01:00:00Z", &ms), GS_OK);
    assert_int_equal(ms, INT64_C(20541) * DAY_MS + H_MS);
    struct gs__cli_tz tz;
    zone("Europe/Berlin", &tz);
    assert_int_equal(gs__cli_tz_offset_at(ms - 1000, &tz), 60);
    assert_int_equal(gs__cli_tz_offset_at(ms, &tz), 120);
    char buf[40];
    in_zone(&tz, "2026-03-29T00:59:59Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-03-29T01:59:59+01:00");
    in_zone(&tz, "2026-03-29T01:00:00Z", buf, sizeof(buf)); /* 02:00 CET does not exist */
    assert_string_equal(buf, "2026-03-29T03:00:00+02:00");
    in_zone(&tz, "2026-10-25T00:59:59Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-10-25T02:59:59+02:00");
    in_zone(&tz, "2026-10-25T01:00:00Z", buf, sizeof(buf)); /* 02:00-03:00 happens twice */
    assert_string_equal(buf, "2026-10-25T02:00:00+01:00");
    in_zone(&tz, "2026-12-01T00:00:00Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-12-01T01:00:00+01:00");
    /* What it prints parses back to the same instant. */
    in_zone(&tz, "2026-10-25T01:30:00Z", buf, sizeof(buf));
    assert_int_equal(gs_usage_parse_time(buf, &ms), GS_OK);
    /* 20,541 + 2 (March 30, 31) + 30 + 31 + 30 + 31 + 31 + 30 + 25 = 20,751 days, 01:30Z */
    assert_int_equal(ms, INT64_C(20751) * DAY_MS + 90 * INT64_C(60000));
}

static void test_new_york_changes_at_02_local(void **state)
{
    (void)state;
    struct gs__cli_tz tz;
    zone("America/New_York", &tz);
    char buf[40];
    in_zone(&tz, "2026-03-08T06:59:59Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-03-08T01:59:59-05:00");
    in_zone(&tz, "2026-03-08T07:00:00Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-03-08T03:00:00-04:00");
    in_zone(&tz, "2026-11-01T05:59:59Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-01T01:59:59-04:00");
    in_zone(&tz, "2026-11-01T06:00:00Z", buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-01T01:00:00-05:00");
    /* Before the epoch too: 1969-07-21T02:56:00Z (Apollo 11's first step) was 22:56 EDT. */
    in_zone(&tz, "1969-07-21T02:56:00Z", buf, sizeof(buf));
    assert_string_equal(buf, "1969-07-20T22:56:00-04:00");
}

static void test_fixed_offsets_and_bad_zones(void **state)
{
    (void)state;
    struct gs__cli_tz tz;
    char msg[700];
    assert_int_equal(gs__cli_tz_parse("UTC", &tz, msg, sizeof(msg)), GS_OK);
    assert_string_equal(tz.name, "");
    assert_int_equal(gs__cli_tz_offset_at(0, &tz), 0);
    assert_int_equal(gs__cli_tz_parse("+05:30", &tz, msg, sizeof(msg)), GS_OK);
    assert_int_equal(gs__cli_tz_offset_at(0, &tz), 330);
    assert_int_equal(gs__cli_tz_parse("-03:00", &tz, msg, sizeof(msg)), GS_OK);
    assert_int_equal(gs__cli_tz_offset_at(INT64_C(20541) * DAY_MS, &tz), -180);
    assert_int_equal(gs__cli_tz_parse("Mars/Olympus", &tz, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, "unknown time zone 'Mars/Olympus'"));
    assert_non_null(strstr(msg, "tzdata"));
    assert_int_equal(gs__cli_tz_parse("Europe", &tz, msg, sizeof(msg)), GS_EPARSE); /* a dir */
    assert_non_null(strstr(msg, "unknown time zone 'Europe'"));
    assert_int_equal(gs__cli_tz_parse("../../etc/passwd", &tz, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, "got '../../etc/passwd'"));
    assert_int_equal(gs__cli_tz_parse("/etc/localtime", &tz, msg, sizeof(msg)), GS_EPARSE);
    assert_int_equal(gs__cli_tz_parse("+25:00", &tz, msg, sizeof(msg)), GS_EPARSE);
    assert_int_equal(gs__cli_tz_parse("", &tz, msg, sizeof(msg)), GS_EPARSE);
}

/* A report over the spring change: its two ends get their own offsets. */
static void test_report_ends_get_their_own_dst_offset(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs_usage_tz.XXXXXX", path[64], msg[600];
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof(path), "%s/tz.db", dir);
    struct gs_usage_store *s;
    assert_int_equal(gs_usage_open(path, NULL, &s, msg, sizeof(msg)), GS_OK);
    int64_t from, to, id;
    assert_int_equal(gs_usage_parse_time("2026-03-28T23:00:00Z", &from), GS_OK);
    to = from + 3 * H_MS; /* 02:00Z */
    struct gs_usage_capacity c = {"n1", "H200", 0, NULL, true, from};
    assert_int_equal(gs_usage_begin_capacity(s, &c, &id), GS_OK);
    assert_int_equal(gs_usage_end_capacity(s, id, to, "removed"), GS_OK);
    assert_int_equal(gs_usage_commit(s, to), GS_OK);
    assert_int_equal(gs_usage_close(s), GS_OK);
    struct gs_usage_options ro = {.read_only = true};
    assert_int_equal(gs_usage_open(path, &ro, &s, msg, sizeof(msg)), GS_OK);
    struct gs__cli_tz tz;
    zone("Europe/Berlin", &tz);
    struct gs_usage_report_options o = {from, to, GS_USAGE_BY_TEAM, 0, 0, 0};
    o.tz_offset_at = gs__cli_tz_offset_at;
    o.tz_ctx = &tz;
    struct gs_usage_report *r;
    assert_int_equal(gs_usage_report_build(s, &o, &r, msg, sizeof(msg)), GS_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(gs_usage_report_write(r, GS_USAGE_TABLE, f), GS_OK);
    assert_int_equal(fclose(f), 0);
    /* 23:00Z is midnight CET; 02:00Z is 04:00 CEST: three hours that read as four. */
    const char *want = "usage 2026-03-29T00:00:00+01:00 to 2026-03-29T04:00:00+02:00 (3.0 h)";
    if (strncmp(text, want, strlen(want)) != 0)
        fail_msg("got: %.120s", text);
    free(text);
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
    const char *const files[] = {"tz.db", "tz.db-wal", "tz.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char file[96];
        (void)snprintf(file, sizeof(file), "%s/%s", dir, files[i]);
        (void)unlink(file); /* the WAL files are gone after a clean close */
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_berlin_changes_at_01_utc_on_the_last_sundays),
        cmocka_unit_test(test_new_york_changes_at_02_local),
        cmocka_unit_test(test_fixed_offsets_and_bad_zones),
        cmocka_unit_test(test_report_ends_get_their_own_dst_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
