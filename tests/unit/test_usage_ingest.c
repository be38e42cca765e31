/*
 * Unit tests of the Prometheus range-query parser and the mapping of its samples to pods
 * (usage_ingest.h), and of the store's keyed utilisation samples (migration 2). Bodies are
 * written here by hand in Prometheus' documented format; the values expected are worked out
 * beside each assertion. The HTTP path runs against a real Prometheus in
 * tests/integration/usage_ingest.sh.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>

#include "gpusched/err.h"
#include "gpusched/tenant.h"
#include "gpusched/usage.h"
#include "gpusched/usage_ingest.h"

#define H_MS INT64_C(3600000)
#define MIN_MS INT64_C(60000)
/* 2026-12-01T00:00:00Z = 1796083200 s (20,788 days after the epoch). */
#define T0_MS (INT64_C(1796083200) * 1000)

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    (void)snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs_ingest_test.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

/* Removes the stores (and their -wal, -shm files) and the directory. */
static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[384];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        (void)snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
        (void)unlink(path);
    }
    (void)closedir(d);
    return rmdir(tmpdir);
}

/* Parses a body that must be refused; returns the message. */
static const char *refused(const char *body, int want)
{
    static char msg[512];
    struct gs_prom_matrix *m = (struct gs_prom_matrix *)1;
    int err = gs_prom_parse_range(body, strlen(body), &m, msg, sizeof(msg));
    if (err != want)
        fail_msg("%s: got %d (%s), want %d", body, err, msg, want);
    assert_null(m);
    return msg;
}

static void test_parse_a_matrix(void **state)
{
    (void)state;
    const char *body =
        "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
        "{\"metric\":{\"__name__\":\"DCGM_FI_DEV_GPU_UTIL\",\"gpu\":\"0\",\"pod\":\"\"},"
        "\"values\":[[1796083200,\"50\"],[1796083260.5,\"NaN\"],[1796083320,\"+Inf\"]]},"
        "{\"metric\":{},\"values\":[]}]},\"warnings\":[\"w\"]}";
    struct gs_prom_matrix *m;
    char msg[256];
    assert_int_equal(gs_prom_parse_range(body, strlen(body), &m, msg, sizeof(msg)), GS_OK);
    assert_int_equal(m->nseries, 2);
    assert_int_equal(m->nsamples, 3);
    const struct gs_prom_series *s = &m->series[0];
    assert_int_equal(s->n, 3);
    assert_true(s->t_ms[0] == T0_MS);
    assert_true(s->t_ms[1] == T0_MS + 60500); /* 60.5 s later */
    assert_true(s->value[0] == 50.0);
    assert_true(isnan(s->value[1]));
    assert_true(isinf(s->value[2]) && s->value[2] > 0);
    assert_string_equal(gs_prom_label(s, "gpu"), "0");
    assert_null(gs_prom_label(s, "pod")); /* empty: none, as in PromQL */
    assert_null(gs_prom_label(s, "UUID"));
    assert_int_equal(m->series[1].n, 0);
    gs_prom_matrix_free(m);
}

static void test_parse_refuses_bad_bodies_naming_the_field(void **state)
{
    (void)state;
    assert_non_null(strstr(refused("", GS_EPARSE), "not JSON"));
    assert_non_null(strstr(refused("{\"status\":", GS_EPARSE), "not JSON: line 1"));
    assert_non_null(strstr(refused("[1]", GS_EPARSE), "expected an object, got an array"));
    assert_non_null(strstr(refused("{}", GS_EPARSE), "status: expected"));
    assert_non_null(strstr(refused("{\"status\":\"maybe\"}", GS_EPARSE), "got \"maybe\""));
    assert_non_null(strstr(refused("{\"status\":\"success\"}", GS_EPARSE), "data: expected an "
                                                                           "object, got nothing"));
    assert_non_null(strstr(
        refused("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}",
                GS_EPARSE),
        "data.resultType: expected \"matrix\", got \"vector\""));
    assert_non_null(strstr(
        refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":{}}}",
                GS_EPARSE),
        "data.result: expected an array, got an object"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"values\":[]},7]}}",
                                   GS_EPARSE),
                           "data.result[1]: expected an object, got a number"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"values\":[]}]}}",
                                   GS_EPARSE),
                           "data.result[0].metric: expected an object of labels, got nothing"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{\"gpu\":0},\"values\":[]}]}}",
                                   GS_EPARSE),
                           "data.result[0].metric.gpu: expected a string, got a number"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"value\":[1,\"2\"]}]}}",
                                   GS_EPARSE),
                           "data.result[0].values: expected an array"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"values\":[[1,\"2\"],[3]]}]}}",
                                   GS_EPARSE),
                           "data.result[0].values[1]: expected [time, \"value\"]"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"values\":[[\"1\",\"2\"]]}]}}",
                                   GS_EPARSE),
                           "data.result[0].values[0][0]: expected a time in Unix seconds, got a "
                           "string"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"values\":[[1e300,\"2\"]]}]}}",
                                   GS_EPARSE),
                           "values[0][0]: expected a time in Unix seconds, got a number out of "
                           "range"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"values\":[[1,12]]}]}}",
                                   GS_EPARSE),
                           "data.result[0].values[0][1]: expected a number as a string, got a "
                           "number"));
    assert_non_null(strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                                   "\"result\":[{\"metric\":{},\"values\":[[1,\"12x\"]]}]}}",
                                   GS_EPARSE),
                           "a string that is not a number"));
    assert_non_null(
        strstr(refused("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                       "\"result\":[{\"metric\":{\"a\":\"x\\u0000y\"},\"values\":[]}]}}",
                       GS_EPARSE),
               "not JSON: line 1"));
    /* The server's own refusal, its errorType and error passed on. */
    const char *e = refused("{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"1:5: "
                            "parse error: unclosed left parenthesis\"}",
                            GS_EREJECTED);
    assert_non_null(strstr(e, "bad_data: 1:5: parse error: unclosed left parenthesis"));
}

/* ---- the mapping -------------------------------------------------------------------------- */

static struct gs_usage_store *open_store(const char *name)
{
    char path[128], msg[512];
    (void)snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    (void)unlink(path);
    struct gs_usage_store *s;
    if (gs_usage_open(path, NULL, &s, msg, sizeof(msg)) != GS_OK)
        fail_msg("open %s: %s", path, msg);
    return s;
}

static void interval(struct gs_usage_store *s, const char *name, struct gs_usage_gpu g,
                     int64_t start, int64_t end)
{
    struct gs_usage_interval iv = {.pod_uid = name,
                                   .ns = "ns",
                                   .name = name,
                                   .node = "n1",
                                   .start_ms = start,
                                   .queued_ms = start};
    int64_t id;
    assert_int_equal(gs_usage_begin_interval(s, &iv, &g, 1, &id), GS_OK);
    assert_int_equal(gs_usage_end_interval(s, id, end, GS_USAGE_END_FINISHED, NULL), GS_OK);
}

static struct gs_prom_matrix *matrix(const char *body)
{
    struct gs_prom_matrix *m;
    char msg[256];
    if (gs_prom_parse_range(body, strlen(body), &m, msg, sizeof(msg)) != GS_OK)
        fail_msg("%s", msg);
    return m;
}

/* The stored value of a pod's sample at t, or -1 when there is none. */
static double stored(struct gs_usage_store *s, const char *uid, int64_t t)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(gs_usage_db(s),
                                        "SELECT util_pct FROM util_sample WHERE pod_uid = ?1 AND "
                                        "t_ms = ?2",
                                        -1, &st, NULL),
                     SQLITE_OK);
    (void)sqlite3_bind_text(st, 1, uid, -1, SQLITE_STATIC);
    (void)sqlite3_bind_int64(st, 2, t);
    double v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_double(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

/*
 * A time-sliced GPU of 4 replicas (each charged 1/4), held by x and y over [T0, T0 + 1 h), then
 * by y alone over [T0 + 1 h, T0 + 2 h). Its unlabelled series at 80 % at T0 + 30 min (two
 * holders: skipped) and at T0 + 90 min (y alone: 80 % for y); y's own series at T0 + 30 min,
 * 80 % (the GPU's value): 80 x 0.25 / (0.25 + 0.25) = 40 %.
 */
static void test_holders_change_over_time_and_share_by_replica(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_store("ts.db");
    struct gs_usage_gpu ts = {.gpu_index = 2,
                              .sharing = GS_GPU_SHARE_TIMESLICE,
                              .replicas = 4,
                              .mig_instance = -1,
                              .replica_slot = 0};
    interval(s, "x", ts, T0_MS, T0_MS + H_MS);
    ts.replica_slot = 1;
    interval(s, "y", ts, T0_MS, T0_MS + 2 * H_MS);
    assert_int_equal(gs_usage_commit(s, T0_MS + 2 * H_MS), GS_OK);
    /* T0 + 30 min = 1796085000 s, T0 + 90 min = 1796088600 s. */
    struct gs_prom_matrix *m =
        matrix("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
               "{\"metric\":{\"gpu\":\"2\",\"Hostname\":\"n1\",\"UUID\":\"GPU-z\"},"
               "\"values\":[[1796085000,\"80\"],[1796088600,\"80\"]]},"
               "{\"metric\":{\"gpu\":\"2\",\"node\":\"n1\",\"namespace\":\"ns\",\"pod\":\"y\"},"
               "\"values\":[[1796085000,\"80\"],[1796085060,\"101\"]]},"
               "{\"metric\":{\"gpu\":\"2\"},\"values\":[[1796085000,\"80\"]]},"
               "{\"metric\":{\"gpu\":\"9\",\"Hostname\":\"n1\"},\"values\":[[1796085000,\"5\"]]}"
               "]}}");
    struct gs_usage_ingest_stats st = {0};
    char msg[256];
    assert_int_equal(gs_usage_ingest_matrix(s, m, T0_MS, T0_MS + 2 * H_MS, &st, msg, sizeof(msg)),
                     GS_OK);
    assert_int_equal(gs_usage_commit(s, INT64_MIN), GS_OK);
    assert_int_equal(st.series, 4);
    assert_int_equal(st.samples, 6);
    assert_int_equal(st.written, 2);
    assert_int_equal(st.skipped_shared, 1);    /* the GPU's series at +30 min */
    assert_int_equal(st.skipped_value, 1);     /* 101 % */
    assert_int_equal(st.skipped_no_gpu, 1);    /* gpu label, no node, no UUID */
    assert_int_equal(st.skipped_no_holder, 1); /* GPU 9: nobody */
    assert_true(stored(s, "y", T0_MS + 30 * MIN_MS) == 40.0);
    assert_true(stored(s, "y", T0_MS + 90 * MIN_MS) == 80.0);
    assert_true(stored(s, "x", T0_MS + 30 * MIN_MS) == -1);
    /* Outside [from, to): not counted, not written. */
    memset(&st, 0, sizeof(st));
    assert_int_equal(
        gs_usage_ingest_matrix(s, m, T0_MS + H_MS, T0_MS + 2 * H_MS, &st, msg, sizeof(msg)), GS_OK);
    assert_int_equal(st.samples, 1);
    assert_int_equal(st.written, 1);
    gs_prom_matrix_free(m);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

/* The key (pod, node, GPU, time): a second write replaces; migration 2 drops old duplicates. */
static void test_samples_are_keyed_and_migration_2_drops_duplicates(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_store("keyed.db");
    assert_int_equal(gs_usage_add_util(s, T0_MS, "p", "n1", 0, 30), GS_OK);
    assert_int_equal(gs_usage_add_util(s, T0_MS, "p", "n1", 0, 70), GS_OK);
    assert_int_equal(gs_usage_add_util(s, T0_MS, "p", "n1", 1, 10), GS_OK); /* another GPU */
    assert_int_equal(gs_usage_commit(s, T0_MS), GS_OK);
    sqlite3 *db = gs_usage_db(s);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(db, "SELECT count(*), sum(util_pct) FROM util_sample", -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);
    assert_true(sqlite3_column_double(st, 1) == 80.0); /* 70 (replaced 30) + 10 */
    sqlite3_finalize(st);
    /* Back to a version-1 store holding a duplicate, as one written before the key. */
    assert_int_equal(sqlite3_exec(db,
                                  "DROP INDEX util_sample_key; INSERT INTO util_sample "
                                  "VALUES(1796083200000, 'p', 'n1', 0, 99); PRAGMA "
                                  "user_version = 1",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(gs_usage_close(s), GS_OK);
    char path[128], msg[512];
    (void)snprintf(path, sizeof(path), "%s/keyed.db", tmpdir);
    /* existing_only (report ingest, compact) migrates it. */
    struct gs_usage_options eo = {.existing_only = true};
    assert_int_equal(gs_usage_open(path, &eo, &s, msg, sizeof(msg)), GS_OK);
    db = gs_usage_db(s);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*), sum(util_pct), (SELECT user_version "
                                        "FROM pragma_user_version) FROM util_sample",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);    /* the duplicate dropped ... */
    assert_true(sqlite3_column_double(st, 1) == 80.0); /* ... the first row kept */
    assert_int_equal(sqlite3_column_int(st, 2), GS_USAGE_SCHEMA_VERSION);
    sqlite3_finalize(st);
    assert_int_equal(gs_usage_close(s), GS_OK);
    /* existing_only creates nothing: no file stays no file, an empty one stays empty. */
    (void)snprintf(path, sizeof(path), "%s/none.db", tmpdir);
    assert_int_equal(gs_usage_open(path, &eo, &s, msg, sizeof(msg)), GS_ENOENT);
    assert_int_equal(access(path, F_OK), -1);
    (void)snprintf(path, sizeof(path), "%s/empty.db", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gs_usage_open(path, &eo, &s, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, "not a gpusched accounting database (empty)"));
    f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fgetc(f), EOF);
    assert_int_equal(fclose(f), 0);
}

static void test_query_refuses_bad_urls_before_any_request(void **state)
{
    (void)state;
    struct gs_prom_matrix *m;
    char msg[256];
    struct gs_prom_range q = {"localhost:9090", "up", T0_MS, T0_MS, 60000, 1000};
    assert_int_equal(gs_prom_query_range(&q, &m, msg, sizeof(msg)), GS_EINVAL);
    assert_non_null(strstr(msg, "localhost:9090: not a Prometheus URL"));
    q.base_url = "http://127.0.0.1:1";
    q.step_ms = 500; /* under 1 s */
    assert_int_equal(gs_prom_query_range(&q, &m, msg, sizeof(msg)), GS_EINVAL);
    q.step_ms = 1000;
    q.end_ms = T0_MS + 11000 * INT64_C(1000); /* 11,001 steps */
    assert_int_equal(gs_prom_query_range(&q, &m, msg, sizeof(msg)), GS_EINVAL);
    assert_null(m);
}

/* ---- the text exposition format (report ingest --agent) ---------------------------------- */

/* A scrape as the node agent writes it (exporter.h): the GPU's own series and one per pod on
 * it, each pod series with the GPU's value. */
static const char agent_scrape[] =
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",device=\"nvidia0\",modelName=\"H200\","
    "Hostname=\"n1\"} 60\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",device=\"nvidia0\",modelName=\"H200\","
    "Hostname=\"n1\",container=\"c\",namespace=\"ns\",pod=\"half\"} 60\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",device=\"nvidia0\",modelName=\"H200\","
    "Hostname=\"n1\",container=\"c\",namespace=\"ns\",pod=\"quarter\",} 60\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-a1\",Hostname=\"n1\",namespace=\"ns\","
    "pod=\"whole\"} 30\n"
    "\n"
    "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
    "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a0\",Hostname=\"n1\"} 40960\n"
    "gpusched_gpu_health{gpu=\"0\",UUID=\"GPU-a0\",reason=\"none\"} 1\r\n";

/*
 * A scrape of an agent that measures per process (issue 9): GPU 0 held by half (500 milli) and
 * quarter (250 milli), each pod's series carries its own processes' 45 % and 15 % under its
 * pod_uid (the device's 60 % is their sum). They are written as measured: 45 % and 15 %, not
 * split by charge (which would give 60 x 0.5 / 0.75 = 40 and 20). A pod_uid no interval has is
 * skipped as another pod's; the device's own series on the shared GPU as shared.
 */
static const char measured_scrape[] =
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",Hostname=\"n1\"} 60\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",Hostname=\"n1\",pod_uid=\"half\","
    "container_id=\"ab12\"} 45\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",Hostname=\"n1\",container=\"c\","
    "namespace=\"ns\",pod=\"quarter\",pod_uid=\"quarter\"} 15\n"
    "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a0\",Hostname=\"n1\",pod_uid=\"gone\","
    "container_id=\"\"} 3\n";

static void test_measured_pod_series_are_taken_as_they_are(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_store("measured.db");
    struct gs_usage_gpu g = {.gpu_uuid = "GPU-a0",
                             .gpu_index = 0,
                             .sharing = GS_GPU_SHARE_MILLI,
                             .gpu_milli = 500,
                             .mig_instance = -1,
                             .replica_slot = -1};
    interval(s, "half", g, T0_MS, T0_MS + H_MS);
    g.gpu_milli = 250;
    interval(s, "quarter", g, T0_MS, T0_MS + H_MS);
    assert_int_equal(gs_usage_commit(s, T0_MS + H_MS), GS_OK);
    char path[128], msg[512];
    (void)snprintf(path, sizeof(path), "%s/measured.prom", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(measured_scrape, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    struct gs_usage_agent_options o = {path, NULL, T0_MS + 30 * MIN_MS, 0};
    struct gs_usage_ingest_stats st;
    int64_t t = 0;
    assert_int_equal(gs_usage_ingest_agent(s, &o, &st, &t, msg, sizeof(msg)), GS_OK);
    assert_int_equal(st.series, 4);
    assert_int_equal(st.written, 2);
    assert_int_equal(st.skipped_shared, 1);
    assert_int_equal(st.skipped_other_pod, 1);
    assert_true(stored(s, "half", t) == 45.0);
    assert_true(stored(s, "quarter", t) == 15.0);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

static struct gs_prom_matrix *text(const char *body, const char *metric, int64_t t)
{
    struct gs_prom_matrix *m;
    char msg[256];
    if (gs_prom_parse_text(body, strlen(body), metric, t, &m, msg, sizeof(msg)) != GS_OK)
        fail_msg("%s", msg);
    return m;
}

static const char *text_refused(const char *body)
{
    static char msg[512];
    struct gs_prom_matrix *m = (struct gs_prom_matrix *)1;
    int err = gs_prom_parse_text(body, strlen(body), NULL, 0, &m, msg, sizeof(msg));
    if (err != GS_EPARSE)
        fail_msg("%s: got %d (%s), want GS_EPARSE", body, err, msg);
    assert_null(m);
    return msg;
}

static void test_parse_text_exposition(void **state)
{
    (void)state;
    /* All series: 4 utilisation, 1 memory, 1 health; comments and the blank line skipped. */
    struct gs_prom_matrix *m = text(agent_scrape, NULL, T0_MS);
    assert_int_equal(m->nseries, 6);
    assert_int_equal(m->nsamples, 6);
    gs_prom_matrix_free(m);
    m = text(agent_scrape, "DCGM_FI_DEV_GPU_UTIL", T0_MS);
    assert_int_equal(m->nseries, 4);
    assert_int_equal(m->series[2].nlabels, 8); /* the trailing comma ends no label */
    assert_string_equal(gs_prom_label(&m->series[2], "pod"), "quarter");
    assert_null(gs_prom_label(&m->series[0], "pod"));
    assert_true(m->series[1].value[0] == 60.0 && m->series[1].t_ms[0] == T0_MS);
    gs_prom_matrix_free(m);
    /* Escapes, special values, a timestamp, spaces and tabs between the parts. */
    m = text("a{l=\"x\\\\y\\\"z\\nw\"} NaN\n"
             "b +Inf 1796083260000\n"
             "c{ k = \"v\" }\t-1.5e3  \n",
             NULL, T0_MS);
    assert_int_equal(m->nseries, 3);
    assert_string_equal(gs_prom_label(&m->series[0], "l"), "x\\y\"z\nw");
    assert_true(isnan(m->series[0].value[0]));
    assert_true(isinf(m->series[1].value[0]) && m->series[1].value[0] > 0);
    assert_true(m->series[1].t_ms[0] == T0_MS + MIN_MS); /* its own timestamp */
    assert_true(m->series[2].value[0] == -1500.0);
    gs_prom_matrix_free(m);
    /* Empty: no series. */
    m = text("# only a comment\n", NULL, T0_MS);
    assert_int_equal(m->nseries, 0);
    gs_prom_matrix_free(m);
    /* Refusals name the line. */
    assert_non_null(strstr(text_refused("a 1\nb{x=\"1\"} high\n"),
                           "line 2: b: expected a number as the value, got 'high'"));
    assert_non_null(strstr(text_refused("a 1\n\n9bad 1\n"), "line 3: expected a metric name"));
    assert_non_null(strstr(text_refused("a{x=\"1\",x=\"2\"} 1\n"), "line 1: label x given twice"));
    assert_non_null(
        strstr(text_refused("a{x=1} 1\n"), "line 1: label x: expected a double-quoted"));
    assert_non_null(
        strstr(text_refused("a{x=\"1} 1\n"), "line 1: label x: its value is not closed"));
    assert_non_null(strstr(text_refused("a{x=\"\\t\"} 1\n"), "line 1: label x: unknown escape"));
    assert_non_null(strstr(text_refused("a{x=\"1\" y=\"2\"} 1\n"), "expected ',' or '}'"));
    assert_non_null(strstr(text_refused("a 1 12.5\n"), "line 1: a: expected a timestamp in ms"));
    assert_non_null(strstr(text_refused("a 1 2 3\n"), "line 1: a: text after the timestamp"));
    assert_non_null(strstr(text_refused("a\n"), "line 1: a: expected a number"));
    assert_non_null(strstr(text_refused("a 0x10\n"), "expected a number"));
    assert_non_null(strstr(text_refused("a{x=\"1\"}1\n"), "expected a space before the value"));
}

/*
 * One scrape of the agent, from a file, at T0 + 30 min: GPU 0 held by half (500 milli) and
 * quarter (250 milli), GPU 1 by whole. The pod series repeat the GPU's 60 %, so half is written
 * 60 x 0.5 / 0.75 = 40 % and quarter 60 x 0.25 / 0.75 = 20 % (they add up to the GPU's 60);
 * whole, alone, its 30 %. The GPU's own series on a GPU two pods hold is skipped.
 */
static void test_agent_scrape_from_a_file_is_shared_by_charge(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_store("agent.db");
    struct gs_usage_gpu g = {.gpu_uuid = "GPU-a0",
                             .gpu_index = 0,
                             .sharing = GS_GPU_SHARE_MILLI,
                             .gpu_milli = 500,
                             .mig_instance = -1,
                             .replica_slot = -1};
    interval(s, "half", g, T0_MS, T0_MS + H_MS);
    g.gpu_milli = 250;
    interval(s, "quarter", g, T0_MS, T0_MS + H_MS);
    g.gpu_uuid = "GPU-a1";
    g.gpu_index = 1;
    g.gpu_milli = 1000;
    interval(s, "whole", g, T0_MS, T0_MS + H_MS);
    assert_int_equal(gs_usage_commit(s, T0_MS + H_MS), GS_OK);
    char path[128], msg[512];
    (void)snprintf(path, sizeof(path), "%s/scrape.prom", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(agent_scrape, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    struct gs_usage_agent_options o = {path, NULL, T0_MS + 30 * MIN_MS, 0};
    struct gs_usage_ingest_stats st;
    int64_t t = 0;
    assert_int_equal(gs_usage_ingest_agent(s, &o, &st, &t, msg, sizeof(msg)), GS_OK);
    assert_true(t == T0_MS + 30 * MIN_MS);
    assert_int_equal(st.series, 4);
    assert_int_equal(st.written, 3);
    assert_int_equal(st.skipped_shared, 1);
    assert_true(fabs(stored(s, "half", t) - 40.0) < 1e-9);
    assert_true(fabs(stored(s, "quarter", t) - 20.0) < 1e-9);
    assert_true(stored(s, "whole", t) == 30.0);
    /* A bad line: nothing written, the file and the line named. */
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(
        fputs("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu=} 2\n", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gs_usage_ingest_agent(s, &o, &st, &t, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "line 2: label gpu: expected a double-quoted value"));
    /* A missing file; a URL nobody answers (port 9 of loopback: discard, closed here). */
    o.source = "/nonexistent/scrape.prom";
    assert_int_equal(gs_usage_ingest_agent(s, &o, &st, &t, msg, sizeof(msg)), GS_EIO);
    assert_non_null(strstr(msg, "/nonexistent/scrape.prom: cannot read"));
    o.source = "http://127.0.0.1:9/metrics";
    o.timeout_ms = 2000;
    int err = gs_usage_ingest_agent(s, &o, &st, &t, msg, sizeof(msg));
    assert_true(err == GS_EIO || err == GS_ETIMEDOUT);
    assert_non_null(strstr(msg, "http://127.0.0.1:9/metrics"));
    assert_int_equal(gs_usage_close(s), GS_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_a_matrix),
        cmocka_unit_test(test_parse_refuses_bad_bodies_naming_the_field),
        cmocka_unit_test(test_holders_change_over_time_and_share_by_replica),
        cmocka_unit_test(test_samples_are_keyed_and_migration_2_drops_duplicates),
        cmocka_unit_test(test_query_refuses_bad_urls_before_any_request),
        cmocka_unit_test(test_parse_text_exposition),
        cmocka_unit_test(test_agent_scrape_from_a_file_is_shared_by_charge),
        cmocka_unit_test(test_measured_pod_series_are_taken_as_they_are),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
