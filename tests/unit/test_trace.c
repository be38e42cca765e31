/*
 * Tests of the trace readers (include/gpusched/trace.h): values of every field, both pod list
 * layouts, CRLF, byte-order mark, RFC 4180 quoting, and every error with the exact line,
 * column and field it must name. Errors are also checked to leave the output empty; the tests
 * run under ASan, which catches a leak on any error path.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, close, unlink */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/trace.h"

#define NODE_HDR "sn,cpu_milli,memory_mib,gpu,model\n"
#define POD_HDR                                                                                    \
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"            \
    "deletion_time,scheduled_time\n"
#define MG_HDR "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"

/* ---- helpers ---------------------------------------------------------------------------- */

static void check_diag(const struct gs_diag *d, const char *input, uint64_t line, uint32_t column,
                       const char *field, const char *msg_part)
{
    if (d->line != line || d->column != column || strcmp(d->field, field) != 0 ||
        strstr(d->msg, msg_part) == NULL) {
        char text[700];
        gs_diag_format(d, text, sizeof text);
        print_message("input: [%.200s]\ngot:   %s\nwant:  line %llu col %u field '%s' msg ~ '%s'\n",
                      input, text, (unsigned long long)line, column, field, msg_part);
    }
    assert_int_equal(d->line, line);
    assert_int_equal(d->column, column);
    assert_string_equal(d->field, field);
    assert_non_null(strstr(d->msg, msg_part));
}

/* Parses a pod list that must fail with GS_EPARSE at the given place. */
static void pods_fail_n(const char *csv, size_t len, uint64_t line, uint32_t column,
                        const char *field, const char *msg_part)
{
    struct gs_trace_pods pods;
    struct gs_diag d;

    memset(&pods, 0x5a, sizeof pods); /* the reader must not rely on a zeroed output */
    int rc = gs_trace_parse_pods(csv, len, "t.csv", &pods, &d);
    if (rc != GS_EPARSE)
        print_message("input: [%.200s]\n", csv);
    assert_int_equal(rc, GS_EPARSE);
    assert_int_equal(pods.n, 0);
    assert_null(pods.v);
    assert_string_equal(d.file, "t.csv");
    check_diag(&d, csv, line, column, field, msg_part);
}

static void pods_fail(const char *csv, uint64_t line, uint32_t column, const char *field,
                      const char *msg_part)
{
    pods_fail_n(csv, strlen(csv), line, column, field, msg_part);
}

static void nodes_fail(const char *csv, uint64_t line, uint32_t column, const char *field,
                       const char *msg_part)
{
    struct gs_trace_nodes nodes;
    struct gs_diag d;

    memset(&nodes, 0x5a, sizeof nodes);
    int rc = gs_trace_parse_nodes(csv, strlen(csv), "n.csv", &nodes, &d);
    if (rc != GS_EPARSE)
        print_message("input: [%.200s]\n", csv);
    assert_int_equal(rc, GS_EPARSE);
    assert_int_equal(nodes.n, 0);
    assert_null(nodes.v);
    assert_string_equal(d.file, "n.csv");
    check_diag(&d, csv, line, column, field, msg_part);
}

static void pods_ok(const char *csv, struct gs_trace_pods *pods)
{
    struct gs_diag d;
    int rc = gs_trace_parse_pods(csv, strlen(csv), "t.csv", pods, &d);
    if (rc != GS_OK) {
        char text[700];
        gs_diag_format(&d, text, sizeof text);
        print_message("input: [%.200s]\nerror: %s\n", csv, text);
    }
    assert_int_equal(rc, GS_OK);
}

static void nodes_ok(const char *csv, struct gs_trace_nodes *nodes)
{
    struct gs_diag d;
    int rc = gs_trace_parse_nodes(csv, strlen(csv), "n.csv", nodes, &d);
    if (rc != GS_OK) {
        char text[700];
        gs_diag_format(&d, text, sizeof text);
        print_message("input: [%.200s]\nerror: %s\n", csv, text);
    }
    assert_int_equal(rc, GS_OK);
}

/* ---- node lists ------------------------------------------------------------------------- */

static void test_nodes_reads_every_field(void **state)
{
    (void)state;
    struct gs_trace_nodes nodes;
    nodes_ok(NODE_HDR "openb-node-0000,64000,262144,2,P100\n"
                      "openb-node-0001,96000,786432,8,G2\n"
                      "openb-node-1500,32000,65536,0,\n",
             &nodes);
    assert_int_equal(nodes.n, 3);
    assert_string_equal(nodes.v[0].name, "openb-node-0000");
    assert_int_equal(nodes.v[0].cpu_milli, 64000);
    assert_int_equal(nodes.v[0].mem_mib, 262144);
    assert_int_equal(nodes.v[0].gpu_count, 2);
    assert_string_equal(nodes.v[0].model, "P100");
    assert_string_equal(nodes.v[1].model, "G2");
    assert_int_equal(nodes.v[1].gpu_count, 8);
    assert_int_equal(nodes.v[2].gpu_count, 0);
    assert_string_equal(nodes.v[2].model, "");
    gs_trace_nodes_fini(&nodes);
    assert_int_equal(nodes.n, 0);
    assert_null(nodes.v);
    gs_trace_nodes_fini(&nodes); /* twice is harmless */
    gs_trace_nodes_fini(NULL);
}

static void test_nodes_columns_found_by_header_name(void **state)
{
    (void)state;
    struct gs_trace_nodes nodes;
    nodes_ok("model,gpu,sn,memory_mib,cpu_milli\nT4,2,n1,1024,8000\n", &nodes);
    assert_int_equal(nodes.n, 1);
    assert_string_equal(nodes.v[0].name, "n1");
    assert_string_equal(nodes.v[0].model, "T4");
    assert_int_equal(nodes.v[0].gpu_count, 2);
    assert_int_equal(nodes.v[0].mem_mib, 1024);
    assert_int_equal(nodes.v[0].cpu_milli, 8000);
    gs_trace_nodes_fini(&nodes);
}

static void test_nodes_crlf_bom_and_no_final_line_end(void **state)
{
    (void)state;
    struct gs_trace_nodes nodes;
    nodes_ok("\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu,model\r\nn1,1000,2048,1,A10\r\nn2,1,2,0,",
             &nodes);
    assert_int_equal(nodes.n, 2);
    assert_string_equal(nodes.v[0].name, "n1");
    assert_string_equal(nodes.v[0].model, "A10");
    assert_string_equal(nodes.v[1].name, "n2");
    assert_string_equal(nodes.v[1].model, "");
    gs_trace_nodes_fini(&nodes);
}

static void test_nodes_gpu_limit_is_16(void **state)
{
    (void)state;
    struct gs_trace_nodes nodes;
    nodes_ok(NODE_HDR "n1,1,1,16,G2\n", &nodes);
    assert_int_equal(nodes.v[0].gpu_count, 16);
    gs_trace_nodes_fini(&nodes);
    nodes_fail(NODE_HDR "n1,1,1,16,G2\nn2,1,1,17,G2\n", 3, 4, "gpu", "at most 16");
}

static void test_nodes_gpu_node_without_model_fails(void **state)
{
    (void)state;
    nodes_fail(NODE_HDR "n1,1,1,2,\n", 2, 5, "model", "needs a GPU model");
    nodes_fail(NODE_HDR "n1,1,1,2,\"\"\n", 2, 5, "model", "needs a GPU model");
}

static void test_nodes_model_without_gpus_fails(void **state)
{
    (void)state;
    nodes_fail(NODE_HDR "n1,1,1,0,T4\n", 2, 5, "model", "without GPUs");
}

static void test_nodes_duplicate_name_fails(void **state)
{
    (void)state;
    nodes_fail(NODE_HDR "a,1,1,0,\nb,1,1,0,\na,1,1,0,\n", 4, 1, "sn",
               "duplicate node name 'a' (first on line 2)");
}

static void test_nodes_many_distinct_names_are_accepted(void **state)
{
    (void)state;
    /* Enough nodes to grow the name set several times. */
    size_t cap = 5000 * 32 + 64, len = 0;
    char *csv = malloc(cap);
    assert_non_null(csv);
    len += (size_t)snprintf(csv + len, cap - len, NODE_HDR);
    for (int i = 0; i < 5000; i++)
        len += (size_t)snprintf(csv + len, cap - len, "node-%05d,1,1,1,T4\n", i);
    struct gs_trace_nodes nodes;
    nodes_ok(csv, &nodes);
    assert_int_equal(nodes.n, 5000);
    assert_string_equal(nodes.v[4999].name, "node-04999");
    gs_trace_nodes_fini(&nodes);
    /* And a duplicate far apart is still found. */
    (void)snprintf(csv + len, cap - len, "node-00007,1,1,1,T4\n");
    nodes_fail(csv, 5002, 1, "sn", "first on line 9");
    free(csv);
}

static void test_nodes_empty_name_fails(void **state)
{
    (void)state;
    nodes_fail(NODE_HDR ",1,1,0,\n", 2, 1, "sn", "empty node name");
}

static void test_nodes_header_errors(void **state)
{
    (void)state;
    nodes_fail("sn,cpu_milli,memory_mib,gpu,model,rack\nn,1,1,0,,r\n", 1, 6, "rack",
               "unknown column 'rack'");
    nodes_fail("sn,cpu_milli,sn,memory_mib,gpu,model\n", 1, 3, "sn",
               "duplicate column 'sn' (also column 1)");
    nodes_fail("sn,cpu_milli,memory_mib,model\nn,1,1,\n", 1, 0, "gpu",
               "missing required column 'gpu'");
    /* Names are exact: no case folding, no trimming. */
    nodes_fail("SN,cpu_milli,memory_mib,gpu,model\n", 1, 1, "SN", "unknown column");
    nodes_fail("sn ,cpu_milli,memory_mib,gpu,model\n", 1, 1, "sn ", "unknown column");
    /* A trailing comma is an unnamed column. */
    nodes_fail("sn,cpu_milli,memory_mib,gpu,model,\n", 1, 6, "", "unknown column ''");
}

static void test_nodes_empty_file_and_header_only_fail(void **state)
{
    (void)state;
    nodes_fail("", 1, 1, "", "empty file: no header");
    nodes_fail("\xEF\xBB\xBF", 1, 1, "", "empty file: no header");
    nodes_fail("\n\r\n\n", 1, 1, "", "empty file: no header");
    nodes_fail(NODE_HDR, 2, 1, "", "no rows after the header");
    nodes_fail(NODE_HDR "\n\n", 2, 1, "", "no rows after the header");
}

/* ---- pod lists -------------------------------------------------------------------------- */

static void test_pods_full_layout_reads_every_field(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok(POD_HDR "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                    "openb-pod-0001,6000,12288,1,460,,BE,Pending,427061,12902960,\n"
                    "openb-pod-0002,88000,327680,8,1000,G2,Burstable,Failed,5,,7\n"
                    "openb-pod-0003,4000,0,0,0,,Guaranteed,Succeeded,,,\n",
            &pods);
    assert_int_equal(pods.n, 4);
    assert_int_equal(pods.has_times, 1);

    const struct gs_trace_pod *p = &pods.v[0];
    assert_string_equal(p->name, "openb-pod-0000");
    assert_int_equal(p->cpu_milli, 12000);
    assert_int_equal(p->mem_mib, 16384);
    assert_int_equal(p->num_gpu, 1);
    assert_int_equal(p->gpu_milli, 1000);
    assert_string_equal(p->gpu_spec, "");
    assert_string_equal(p->qos, "LS");
    assert_string_equal(p->phase, "Running");
    assert_int_equal(p->creation_time_s, 0);
    assert_int_equal(p->deletion_time_s, 12537496);
    assert_int_equal(p->scheduled_time_s, 0);

    p = &pods.v[1];
    assert_int_equal(p->gpu_milli, 460);
    assert_string_equal(p->qos, "BE");
    assert_string_equal(p->phase, "Pending");
    assert_int_equal(p->creation_time_s, 427061);
    assert_int_equal(p->scheduled_time_s, -1); /* empty: never scheduled */

    p = &pods.v[2];
    assert_int_equal(p->num_gpu, 8);
    assert_string_equal(p->gpu_spec, "G2");
    assert_int_equal(p->deletion_time_s, -1);
    assert_int_equal(p->scheduled_time_s, 7);

    p = &pods.v[3];
    assert_int_equal(p->num_gpu, 0);
    assert_int_equal(p->gpu_milli, 0);
    assert_int_equal(p->mem_mib, 0);
    assert_int_equal(p->creation_time_s, -1);
    gs_trace_pods_fini(&pods);
    assert_int_equal(pods.n, 0);
    assert_null(pods.v);
    gs_trace_pods_fini(NULL);
}

static void test_pods_multigpu_layout_has_no_times(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok(MG_HDR "openb-pod-0000,12000,16384,1,1000\nopenb-pod-9000,64000,65536,4,1000\n", &pods);
    assert_int_equal(pods.n, 2);
    assert_int_equal(pods.has_times, 0);
    assert_int_equal(pods.v[1].num_gpu, 4);
    assert_string_equal(pods.v[1].gpu_spec, "");
    assert_string_equal(pods.v[1].qos, "");
    assert_string_equal(pods.v[1].phase, "");
    assert_int_equal(pods.v[1].creation_time_s, -1);
    assert_int_equal(pods.v[1].deletion_time_s, -1);
    assert_int_equal(pods.v[1].scheduled_time_s, -1);
    gs_trace_pods_fini(&pods);
}

static void test_pods_some_time_columns_do_not_set_has_times(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\np,1,1,0,0,42\n", &pods);
    assert_int_equal(pods.has_times, 0);
    assert_int_equal(pods.v[0].creation_time_s, 42);
    assert_int_equal(pods.v[0].scheduled_time_s, -1);
    gs_trace_pods_fini(&pods);
}

static void test_pods_quoted_fields(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok(POD_HDR "\"pod,with,commas\",\"1000\",2,1,500,\"V100M16|V100M32\",LS,Running,1,2,3\n"
                    "\"say \"\"hi\"\"\",1,2,0,0,,\"\",,,,\n"
                    "\"two\nlines\",1,2,0,0,,,,,,\n",
            &pods);
    assert_int_equal(pods.n, 3);
    assert_string_equal(pods.v[0].name, "pod,with,commas");
    assert_int_equal(pods.v[0].cpu_milli, 1000);
    assert_string_equal(pods.v[0].gpu_spec, "V100M16|V100M32");
    assert_string_equal(pods.v[1].name, "say \"hi\"");
    assert_string_equal(pods.v[1].qos, "");
    assert_string_equal(pods.v[2].name, "two\nlines");
    gs_trace_pods_fini(&pods);
}

static void test_pods_crlf_and_bom(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok("\xEF\xBB\xBF"
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\r\n"
            "a,1,2,1,250,\"T4|P100\"\r\n"
            "b,3,4,2,1000,\r\n"
            "\r\n",
            &pods);
    assert_int_equal(pods.n, 2);
    assert_string_equal(pods.v[0].name, "a"); /* the BOM is not part of the first name */
    assert_string_equal(pods.v[0].gpu_spec, "T4|P100");
    assert_string_equal(pods.v[1].gpu_spec, "");
    assert_int_equal(pods.v[1].num_gpu, 2);
    gs_trace_pods_fini(&pods);
}

static void test_pods_trailing_blank_lines_are_fine(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok(MG_HDR "a,1,2,0,0\n\n\n\r\n", &pods);
    assert_int_equal(pods.n, 1);
    gs_trace_pods_fini(&pods);
}

static void test_pods_limits_at_the_edge_are_accepted(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok(MG_HDR "a,9223372036854775807,007,16,1000\nb,0,0,1,1\n", &pods);
    assert_int_equal(pods.v[0].cpu_milli, INT64_MAX);
    assert_int_equal(pods.v[0].mem_mib, 7);
    assert_int_equal(pods.v[0].num_gpu, 16);
    assert_int_equal(pods.v[1].gpu_milli, 1);
    gs_trace_pods_fini(&pods);
}

static void test_pods_row_field_count_errors(void **state)
{
    (void)state;
    pods_fail(MG_HDR "a,1,2,1,1000\nb,1,2,1\n", 3, 5, "gpu_milli",
              "missing column: the row has 4 fields, the header 5");
    pods_fail(MG_HDR "a,1,2,1,1000\nb,1,2,1,1000,9\n", 3, 6, "",
              "extra column: the row has 6 fields, the header 5");
    /* A quoted empty line is a row of one empty field, not a blank line. */
    pods_fail(MG_HDR "\"\"\n", 2, 2, "cpu_milli", "missing column");
}

static void test_pods_number_errors(void **state)
{
    (void)state;
    pods_fail(MG_HDR "a,12abc,2,0,0\n", 2, 2, "cpu_milli", "not a whole number: '12abc'");
    pods_fail(MG_HDR "a,1,1.5,0,0\n", 2, 3, "memory_mib", "not a whole number: '1.5'");
    pods_fail(MG_HDR "a, 12,2,0,0\n", 2, 2, "cpu_milli", "not a whole number: ' 12'");
    pods_fail(MG_HDR "a,12 ,2,0,0\n", 2, 2, "cpu_milli", "not a whole number: '12 '");
    pods_fail(MG_HDR "a,+5,2,0,0\n", 2, 2, "cpu_milli", "not a whole number: '+5'");
    pods_fail(MG_HDR "a,-,2,0,0\n", 2, 2, "cpu_milli", "not a whole number: '-'");
    pods_fail(MG_HDR "a,,2,0,0\n", 2, 2, "cpu_milli", "empty value");
    pods_fail(MG_HDR "a,1,2,,0\n", 2, 4, "num_gpu", "empty value");
    pods_fail(MG_HDR "a,1,-5,0,0\n", 2, 3, "memory_mib", "negative value -5");
    pods_fail(MG_HDR "a,9223372036854775808,2,0,0\n", 2, 2, "cpu_milli", "out of range");
    pods_fail(MG_HDR "a,1,99999999999999999999999,0,0\n", 2, 3, "memory_mib", "out of range");
    pods_fail(POD_HDR "a,1,2,0,0,,LS,Running,1,2,-3\n", 2, 11, "scheduled_time",
              "negative value -3");
    pods_fail(POD_HDR "a,1,2,0,0,,LS,Running,x,2,3\n", 2, 9, "creation_time", "not a whole number");
}

static void test_pods_gpu_request_errors(void **state)
{
    (void)state;
    pods_fail(MG_HDR "a,1,2,1,1001\n", 2, 5, "gpu_milli", "1001 milli-GPU per GPU is over 1000");
    pods_fail(MG_HDR "a,1,2,2,500\n", 2, 5, "gpu_milli", "a shared GPU (500 milli) with num_gpu 2");
    pods_fail(MG_HDR "a,1,2,17,1000\n", 2, 4, "num_gpu", "17 GPUs in one request; at most 16");
    pods_fail(MG_HDR "a,1,2,99999999999,1000\n", 2, 4, "num_gpu", "at most 16");
    pods_fail(MG_HDR "a,1,2,2,0\n", 2, 5, "gpu_milli", "0 milli-GPU per GPU for a request of 2");
    pods_fail(MG_HDR "a,1,2,0,300\n", 2, 5, "gpu_milli", "300 milli-GPU but num_gpu is 0");
}

static void test_pods_empty_name_fails(void **state)
{
    (void)state;
    pods_fail(MG_HDR ",1,2,0,0\n", 2, 1, "name", "empty pod name");
    pods_fail(MG_HDR "\"\",1,2,0,0\n", 2, 1, "name", "empty pod name");
}

static void test_pods_header_names_are_checked(void **state)
{
    (void)state;
    pods_fail("name,cpu_milli,memory_mib,num_gpu,gpu_milli,cpu_milli\n", 1, 6, "cpu_milli",
              "duplicate column 'cpu_milli' (also column 2)");
    pods_fail("name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", 1, 0, "gpu_milli",
              "missing required column 'gpu_milli'");
    /* Twelve columns: all eleven names and a repeat, past the largest layout. */
    pods_fail("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
              "deletion_time,scheduled_time,qos\n",
              1, 12, "qos", "duplicate column 'qos'");
    /* A repeated unknown column is ignored like the first: only known names must be unique. */
    struct gs_trace_pods pods;
    pods_ok("name,cpu_milli,memory_mib,num_gpu,gpu_milli,team,team\np,1,1,0,0,a,b\n", &pods);
    assert_string_equal(pods.ignored_columns, "team, team");
    gs_trace_pods_fini(&pods);
}

/* A user's own columns in a pod list are ignored wherever they stand, and named for a note. */
static void test_pods_unknown_columns_are_ignored(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok("owner,name,cpu_milli,memory_mib,gpu,num_gpu,gpu_milli,note\n"
            "alice,p0,1000,2048,x,2,1000,\"a, b\"\n"
            "bob,p1,500,1024,y,1,250,c\n",
            &pods);
    assert_int_equal(pods.n, 2);
    assert_string_equal(pods.ignored_columns, "owner, gpu, note");
    assert_string_equal(pods.v[0].name, "p0");
    assert_int_equal(pods.v[0].cpu_milli, 1000);
    assert_int_equal(pods.v[0].mem_mib, 2048);
    assert_int_equal(pods.v[0].num_gpu, 2);
    assert_int_equal(pods.v[1].gpu_milli, 250);
    gs_trace_pods_fini(&pods);
    /* A list of only known columns ignores nothing. */
    pods_ok(MG_HDR "p,1,1,0,0\n", &pods);
    assert_string_equal(pods.ignored_columns, "");
    gs_trace_pods_fini(&pods);
    /* The row still needs as many fields as the header names, the ignored ones counted. */
    pods_fail("name,cpu_milli,memory_mib,num_gpu,gpu_milli,team\np,1,1,0,0\n", 2, 6, "",
              "missing column: the row has 5 fields, the header 6");
    /* At most 64 columns: the 65th is refused at its column. */
    char wide[1024] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli";
    for (int c = 6; c <= 65; c++)
        (void)snprintf(wide + strlen(wide), sizeof wide - strlen(wide), ",c%d", c);
    (void)snprintf(wide + strlen(wide), sizeof wide - strlen(wide), "\n");
    pods_fail(wide, 1, 65, "c65", "too many columns: at most 64");
    /* Node lists keep their fixed layout: an unknown column is still an error there. */
    nodes_fail("sn,cpu_milli,memory_mib,gpu,model,rack\n", 1, 6, "rack", "unknown column 'rack'");
}

static void test_pods_empty_file_and_header_only_fail(void **state)
{
    (void)state;
    pods_fail("", 1, 1, "", "empty file: no header");
    pods_fail(MG_HDR, 2, 1, "", "no rows after the header");
    pods_fail(POD_HDR "\r\n", 2, 1, "", "no rows after the header");
}

static void test_pods_quoting_errors(void **state)
{
    (void)state;
    pods_fail(MG_HDR "po\"d,1,2,0,0\n", 2, 1, "name", "bad quoting");
    pods_fail(MG_HDR "\"pod\"x,1,2,0,0\n", 2, 1, "name", "bad quoting");
    pods_fail(MG_HDR "a,1,2,0,0\nb,1,\"2\" ,0,0\n", 3, 3, "memory_mib", "bad quoting");
    /* The line of a quoting error is the line of the bad byte. */
    pods_fail(MG_HDR "\"a\nb\"c,1,2,0,0\n", 3, 1, "name", "bad quoting");
    pods_fail(MG_HDR "a,1,2,0,0\n\"b,1,2,0,0\n", 3, 1, "name",
              "quoted field not closed at the end of the file");
    pods_fail("\"name,cpu_milli", 1, 1, "", "quoted field not closed");
}

static void test_pods_blank_line_in_the_middle_fails(void **state)
{
    (void)state;
    pods_fail(MG_HDR "a,1,2,0,0\n\nb,1,2,0,0\n", 3, 0, "", "blank line");
    pods_fail(MG_HDR "a,1,2,0,0\r\n\r\nb,1,2,0,0\r\n", 3, 0, "", "blank line");
    pods_fail("\n" MG_HDR "a,1,2,0,0\n", 1, 0, "", "blank line");
}

static void test_pods_nul_byte_fails(void **state)
{
    (void)state;
    static const char csv[] = MG_HDR "a,1,2,0,0\nb\0c,1,2,0,0\n";
    pods_fail_n(csv, sizeof csv - 1, 3, 1, "name", "NUL byte");
}

static void test_pods_line_numbers_count_crlf_and_quoted_line_breaks(void **state)
{
    (void)state;
    /* CRLF: the bad row is the fourth line. */
    pods_fail(MG_HDR "a,1,2,0,0\r\nb,1,2,0,0\r\nc,x,2,0,0\r\n", 4, 2, "cpu_milli",
              "not a whole number");
    /* A record spanning lines 2-4 pushes the next record to line 5. */
    pods_fail(MG_HDR "\"a\r\nb\nc\",1,2,0,0\nd,1,2,0,x\n", 5, 5, "gpu_milli", "not a whole number");
    /* An error inside a multi-line record names the line it starts on. */
    pods_fail(MG_HDR "ok,1,2,0,0\n\"a\nb\",1,2,0,x\n", 3, 5, "gpu_milli", "not a whole number");
    /* A bare CR ends a record and a line (old Mac line ends), so b is on line 3. */
    pods_fail(MG_HDR "a,1,2,0,0\rb,1,2,0,x\n", 3, 5, "gpu_milli", "not a whole number");
}

static void test_pods_long_lines(void **state)
{
    (void)state;
    static const char tail[] = ",1,2,0,0\n";
    const size_t tail_len = sizeof tail - 1;
    size_t hdr = strlen(MG_HDR), name_max = GS_TRACE_LINE_MAX - (tail_len - 1);
    size_t cap = hdr + (size_t)10 * 1024 * 1024 + 64;
    char *csv = malloc(cap);
    assert_non_null(csv);

    /* A line of exactly GS_TRACE_LINE_MAX bytes (line end not counted) is accepted. */
    memcpy(csv, MG_HDR, hdr); /* not a string: parsed by length */
    memset(csv + hdr, 'n', name_max);
    memcpy(csv + hdr + name_max, tail, tail_len);
    struct gs_trace_pods pods;
    struct gs_diag d;
    assert_int_equal(gs_trace_parse_pods(csv, hdr + name_max + tail_len, "t.csv", &pods, &d),
                     GS_OK);
    assert_int_equal(strlen(pods.v[0].name), name_max);
    gs_trace_pods_fini(&pods);
    /* With CRLF too. */
    memcpy(csv + hdr + name_max, ",1,2,0,0\r\n", 10);
    assert_int_equal(gs_trace_parse_pods(csv, hdr + name_max + 10, "t.csv", &pods, &d), GS_OK);
    gs_trace_pods_fini(&pods);

    /* One byte more is not. */
    memset(csv + hdr, 'n', name_max + 1);
    memcpy(csv + hdr + name_max + 1, tail, tail_len);
    pods_fail_n(csv, hdr + name_max + 1 + tail_len, 2, 0, "", "line longer than 65536 bytes");

    /* A 10 MiB line fails the same way. */
    memset(csv + hdr, 'n', (size_t)10 * 1024 * 1024);
    pods_fail_n(csv, hdr + (size_t)10 * 1024 * 1024, 2, 0, "", "line longer than 65536 bytes");

    /* An unclosed quote makes a record of many short lines; its size is bounded too. */
    size_t len = hdr;
    csv[len++] = '"';
    for (int i = 0; i < 200; i++) {
        memset(csv + len, 'q', 999);
        len += 999;
        csv[len++] = '\n';
    }
    pods_fail_n(csv, len, 2, 0, "", "record longer than 65536 bytes");
    /* Line ends alone inside quotes count too. */
    len = hdr;
    csv[len++] = '"';
    memset(csv + len, '\n', 70000);
    len += 70000;
    pods_fail_n(csv, len, 2, 0, "", "record longer than 65536 bytes");
    free(csv);
}

/* ---- files and diagnostics -------------------------------------------------------------- */

static void test_read_from_file(void **state)
{
    (void)state;
    char path[] = "/tmp/gs_test_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_true(fputs(NODE_HDR "n1,1000,2048,1,T4\nn2,1000,2048,x,T4\n", f) >= 0);
    assert_int_equal(fclose(f), 0);

    struct gs_trace_nodes nodes;
    struct gs_diag d;
    assert_int_equal(gs_trace_read_nodes(path, &nodes, &d), GS_EPARSE);
    assert_string_equal(d.file, path);
    check_diag(&d, path, 3, 4, "gpu", "not a whole number: 'x'");
    assert_null(nodes.v);

    f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(MG_HDR "p1,1000,2048,1,500\n", f) >= 0);
    assert_int_equal(fclose(f), 0);
    struct gs_trace_pods pods;
    assert_int_equal(gs_trace_read_pods(path, &pods, NULL), GS_OK);
    assert_int_equal(pods.n, 1);
    assert_int_equal(pods.v[0].gpu_milli, 500);
    gs_trace_pods_fini(&pods);
    unlink(path);
}

static void test_read_missing_file_is_an_io_error(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    struct gs_diag d;
    assert_int_equal(gs_trace_read_pods("/nonexistent/x.csv", &pods, &d), GS_EIO);
    assert_int_equal(pods.n, 0);
    assert_null(pods.v);
    assert_string_equal(d.file, "/nonexistent/x.csv");
    check_diag(&d, "", 0, 0, "", "cannot open: No such file or directory");

    /* A directory opens but cannot be read. */
    assert_int_equal(gs_trace_read_pods("/tmp", &pods, &d), GS_EIO);
    check_diag(&d, "", 0, 0, "", "cannot read");
}

static void test_diag_format(void **state)
{
    (void)state;
    struct gs_diag d = {.file = "f.csv",
                        .line = 3,
                        .column = 2,
                        .field = "cpu_milli",
                        .msg = "not a whole number: 'x'"};
    char buf[300];
    const char *full = "f.csv:3:2: field 'cpu_milli': not a whole number: 'x'";
    assert_int_equal(gs_diag_format(&d, buf, sizeof buf), (int)strlen(full));
    assert_string_equal(buf, full);

    /* Truncated output, full length returned. */
    assert_int_equal(gs_diag_format(&d, buf, 6), (int)strlen(full));
    assert_string_equal(buf, "f.csv");
    assert_int_equal(gs_diag_format(&d, NULL, 0), (int)strlen(full));

    d.column = 0;
    d.field[0] = '\0';
    gs_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "f.csv:3: not a whole number: 'x'");

    d.line = 0;
    (void)snprintf(d.msg, sizeof d.msg, "empty file: no header");
    gs_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "f.csv: empty file: no header");

    (void)snprintf(d.field, sizeof d.field, "gpu");
    gs_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "f.csv: field 'gpu': empty file: no header");

    d.file[0] = '\0';
    d.field[0] = '\0';
    gs_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "empty file: no header");

    d.line = 7;
    gs_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "<input>:7: empty file: no header");
}

static void test_parse_formats_a_whole_diagnostic(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    struct gs_diag d;
    static const char csv[] = MG_HDR "a,1,2,2,500\n";
    char buf[300];
    assert_int_equal(gs_trace_parse_pods(csv, sizeof csv - 1, "pods.csv", &pods, &d), GS_EPARSE);
    gs_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "pods.csv:2:5: field 'gpu_milli': a shared GPU (500 milli) with "
                             "num_gpu 2; sharing is for one GPU only");
}

/* The published trace, when the checkout has it (data/ is filled separately). */
static void test_reads_the_published_openb_trace(void **state)
{
    (void)state;
    const char *root = getenv("GS_SOURCE_DIR");
    char path[4096];
    struct gs_diag d;
    char text[700];

    if (root == NULL)
        skip();
    (void)snprintf(path, sizeof path, "%s/data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv",
                   root);
    if (access(path, R_OK) != 0)
        skip();
    struct gs_trace_nodes nodes;
    int rc = gs_trace_read_nodes(path, &nodes, &d);
    if (rc != GS_OK) {
        gs_diag_format(&d, text, sizeof text);
        print_message("%s\n", text);
    }
    assert_int_equal(rc, GS_OK);
    assert_int_equal(nodes.n, 1213);
    uint64_t gpus = 0;
    for (uint32_t i = 0; i < nodes.n; i++)
        gpus += nodes.v[i].gpu_count;
    assert_int_equal(gpus, 6212);
    gs_trace_nodes_fini(&nodes);

    (void)snprintf(path, sizeof path, "%s/data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv",
                   root);
    if (access(path, R_OK) != 0)
        skip();
    struct gs_trace_pods pods;
    rc = gs_trace_read_pods(path, &pods, &d);
    if (rc != GS_OK) {
        gs_diag_format(&d, text, sizeof text);
        print_message("%s\n", text);
    }
    assert_int_equal(rc, GS_OK);
    assert_int_equal(pods.n, 8152);
    assert_int_equal(pods.has_times, 1);
    uint32_t cpu_only = 0, pending = 0;
    for (uint32_t i = 0; i < pods.n; i++) {
        cpu_only += pods.v[i].num_gpu == 0;
        pending += pods.v[i].scheduled_time_s == -1;
    }
    assert_int_equal(cpu_only, 1088);
    assert_int_equal(pending, 897);
    gs_trace_pods_fini(&pods);
}

/* ---- sharing columns (node gpu_mode, pod gpu_mem_mib / mig_profile / timeslice_slots) ---- */

#define MODE_HDR "sn,cpu_milli,memory_mib,gpu,model,gpu_mem_mib,gpu_mode\n"

static void test_nodes_gpu_mode_column_reads_every_mode(void **state)
{
    (void)state;
    struct gs_trace_nodes nodes;
    nodes_ok(MODE_HDR "f,1000,1024,2,A100-40GB,40960,fractions\n"
                      "m,1000,1024,2,A100-40GB,40960,mig:3g.20gb+2g.10gb+2g.10gb\n"
                      "t,1000,1024,2,H100-80GB,81920,replicas:4\n"
                      "w,1000,1024,2,V100M16,,whole\n"
                      "e,1000,1024,1,T4,,\n",
             &nodes);
    assert_int_equal(nodes.has_modes, 1);
    assert_int_equal(nodes.v[0].gpu_mode.sharing, GS_GPU_SHARE_MILLI);
    assert_int_equal(nodes.v[0].gpu_mem_mib, 40960);
    /* 3g.20gb may start at 0 or 4 and 2g.10gb at 0, 2 or 4: in the order written, 3g at 0
     * leaves no room for the second 2g, so the search settles on 3g at 4, 2g at 0 and 2. */
    const struct gs_trace_node *m = &nodes.v[1];
    const struct gs_mig_model *mm = gs_mig_model_find("A100-40GB");
    assert_int_equal(m->gpu_mode.sharing, GS_GPU_SHARE_MIG);
    assert_int_equal(m->gpu_mode.mig_count, 3);
    assert_string_equal(mm->profiles[m->gpu_mode.mig[0].profile].name, "3g.20gb");
    assert_int_equal(m->gpu_mode.mig[0].start, 4);
    assert_string_equal(mm->profiles[m->gpu_mode.mig[1].profile].name, "2g.10gb");
    assert_int_equal(m->gpu_mode.mig[1].start, 0);
    assert_int_equal(m->gpu_mode.mig[2].start, 2);
    assert_int_equal(nodes.v[2].gpu_mode.sharing, GS_GPU_SHARE_TIMESLICE);
    assert_int_equal(nodes.v[2].gpu_mode.replicas, 4);
    assert_int_equal(nodes.v[3].gpu_mode.sharing, GS_GPU_SHARE_WHOLE);
    assert_int_equal(nodes.v[3].gpu_mem_mib, 0);
    assert_int_equal(nodes.v[4].gpu_mode.sharing, GS_GPU_SHARE_MILLI);
    gs_trace_nodes_fini(&nodes);
    nodes_ok(NODE_HDR "n,1,1,1,T4\n", &nodes);
    assert_int_equal(nodes.has_modes, 0);
    gs_trace_nodes_fini(&nodes);
}

static void test_nodes_bad_gpu_mode_names_line_and_field(void **state)
{
    (void)state;
    nodes_fail(MODE_HDR "m,1000,1024,2,A100-40GB,40960,mig:4g.20gb+4g.20gb\n", 2, 7, "gpu_mode",
               "A100-40GB cannot hold this layout");
    nodes_fail(MODE_HDR "m,1000,1024,2,A100,40960,mig:3g.20gb\n", 2, 7, "gpu_mode",
               "model 'A100' has no MIG geometry");
    nodes_fail(MODE_HDR "m,1000,1024,2,A100-40GB,40960,mig:5g.20gb\n", 2, 7, "gpu_mode",
               "no MIG profile '5g.20gb'");
    nodes_fail(MODE_HDR "t,1000,1024,2,H100-80GB,,replicas:0\n", 2, 7, "gpu_mode",
               "replicas:N needs N in 1..255");
    nodes_fail(MODE_HDR "t,1000,1024,2,H100-80GB,,halves\n", 2, 7, "gpu_mode", "unknown mode");
    nodes_fail(MODE_HDR "c,1000,1024,0,,,whole\n", 2, 7, "gpu_mode", "without GPUs");
    nodes_fail(MODE_HDR "m,1000,1024,1,A100-40GB,,mig:3g.20gb@1\n", 2, 7, "gpu_mode", "start slot");
    /* 1g.10gb fits seven times on an H100-80GB: the eighth is the one named. */
    nodes_fail(MODE_HDR "h,1000,1024,1,H100-80GB,,mig:1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+"
                        "1g.10gb+1g.10gb+1g.10gb\n",
               2, 7, "gpu_mode", "instance 7 (1g.10gb at 0): more than 7 instance(s) of 1g.10gb");
}

#define SHARE_HDR                                                                                  \
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_mem_mib,mig_profile,timeslice_slots\n"

static void test_pods_sharing_columns_become_requests_of_their_kind(void **state)
{
    (void)state;
    struct gs_trace_pods pods;
    pods_ok(SHARE_HDR "mem,1,1,2,100,20480,,\n"
                      "mig,1,1,2,0,,2g.10gb,\n"
                      "ts,1,1,0,0,,,3\n"
                      "plain,1,1,1,500,,,\n",
            &pods);
    assert_int_equal(pods.has_sharing, 1);
    struct gs_pod_req q;
    assert_int_equal(gs_trace_pod_req(&pods.v[0], GS_MODEL_ANY, &q), GS_OK);
    assert_int_equal(gs_req_kind(&q), GS_REQ_MEMORY);
    assert_int_equal(q.num_gpu, 2);
    assert_int_equal(q.gpu_milli, 100);
    assert_int_equal(q.gpu_mem_mib, 20480);
    assert_int_equal(gs_trace_pod_req(&pods.v[1], GS_MODEL_ANY, &q), GS_OK);
    assert_int_equal(gs_req_kind(&q), GS_REQ_MIG);
    assert_int_equal(q.mig_count, 2);
    assert_int_equal(q.num_gpu, 0);
    assert_string_equal(q.mig_profile, "2g.10gb");
    assert_int_equal(gs_trace_pod_req(&pods.v[2], GS_MODEL_ANY, &q), GS_OK);
    assert_int_equal(gs_req_kind(&q), GS_REQ_TIMESLICE);
    assert_int_equal(q.timeslice_slots, 3);
    assert_int_equal(gs_trace_pod_req(&pods.v[3], GS_MODEL_ANY, &q), GS_OK);
    assert_int_equal(gs_req_kind(&q), GS_REQ_MILLI);
    assert_int_equal(q.gpu_milli, 500);
    gs_trace_pods_fini(&pods);
}

static void test_pods_bad_sharing_rows_name_line_and_field(void **state)
{
    (void)state;
    pods_fail(SHARE_HDR "a,1,1,1,0,100,2g.10gb,\n", 2, 0, "gpu_mem_mib", "more than one of");
    pods_fail(SHARE_HDR "a,1,1,0,0,100,,\n", 2, 6, "gpu_mem_mib", "not a valid request");
    pods_fail(SHARE_HDR "a,1,1,1,500,,2g.10gb,\n", 2, 7, "mig_profile", "not a valid request");
    pods_fail(SHARE_HDR "a,1,1,1,0,,,2\n", 2, 8, "timeslice_slots", "not a valid request");
    pods_fail(SHARE_HDR "a,1,1,0,0,,,17\n", 2, 8, "timeslice_slots", "at most 16");
    pods_fail(SHARE_HDR "a,1,1,1,0,0,,\n", 2, 6, "gpu_mem_mib", "leave it empty");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_reads_every_field),
        cmocka_unit_test(test_nodes_columns_found_by_header_name),
        cmocka_unit_test(test_nodes_crlf_bom_and_no_final_line_end),
        cmocka_unit_test(test_nodes_gpu_limit_is_16),
        cmocka_unit_test(test_nodes_gpu_node_without_model_fails),
        cmocka_unit_test(test_nodes_model_without_gpus_fails),
        cmocka_unit_test(test_nodes_duplicate_name_fails),
        cmocka_unit_test(test_nodes_many_distinct_names_are_accepted),
        cmocka_unit_test(test_nodes_empty_name_fails),
        cmocka_unit_test(test_nodes_header_errors),
        cmocka_unit_test(test_nodes_empty_file_and_header_only_fail),
        cmocka_unit_test(test_pods_full_layout_reads_every_field),
        cmocka_unit_test(test_pods_multigpu_layout_has_no_times),
        cmocka_unit_test(test_pods_some_time_columns_do_not_set_has_times),
        cmocka_unit_test(test_pods_quoted_fields),
        cmocka_unit_test(test_pods_crlf_and_bom),
        cmocka_unit_test(test_pods_trailing_blank_lines_are_fine),
        cmocka_unit_test(test_pods_limits_at_the_edge_are_accepted),
        cmocka_unit_test(test_pods_row_field_count_errors),
        cmocka_unit_test(test_pods_number_errors),
        cmocka_unit_test(test_nodes_gpu_mode_column_reads_every_mode),
        cmocka_unit_test(test_nodes_bad_gpu_mode_names_line_and_field),
        cmocka_unit_test(test_pods_sharing_columns_become_requests_of_their_kind),
        cmocka_unit_test(test_pods_bad_sharing_rows_name_line_and_field),
        cmocka_unit_test(test_pods_gpu_request_errors),
        cmocka_unit_test(test_pods_empty_name_fails),
        cmocka_unit_test(test_pods_header_names_are_checked),
        cmocka_unit_test(test_pods_unknown_columns_are_ignored),
        cmocka_unit_test(test_pods_empty_file_and_header_only_fail),
        cmocka_unit_test(test_pods_quoting_errors),
        cmocka_unit_test(test_pods_blank_line_in_the_middle_fails),
        cmocka_unit_test(test_pods_nul_byte_fails),
        cmocka_unit_test(test_pods_line_numbers_count_crlf_and_quoted_line_breaks),
        cmocka_unit_test(test_pods_long_lines),
        cmocka_unit_test(test_read_from_file),
        cmocka_unit_test(test_read_missing_file_is_an_io_error),
        cmocka_unit_test(test_diag_format),
        cmocka_unit_test(test_parse_formats_a_whole_diagnostic),
        cmocka_unit_test(test_reads_the_published_openb_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
