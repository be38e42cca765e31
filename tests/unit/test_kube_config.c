/*
 * Tests of the Kubernetes client's configuration loaders (include/gpusched/kube.h): a full
 * kubeconfig with inline data, one with kubeconfig-relative files and a token file, the
 * in-cluster service account, the $KUBECONFIG choice, and every refusal with the exact file,
 * line, column, field and message it must name. Files live in a fresh temporary directory.
 * Under ASan a leak on any error path fails the test.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/kube.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text)
{
    char path[512];
    (void)snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static const char *tmp_path(const char *name)
{
    static char path[512];
    (void)snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static int setup(void **state)
{
    (void)state;
    (void)snprintf(tmpdir, sizeof tmpdir, "/tmp/test_kube_config.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {"kc",  "ca.crt",   "c.crt",     "c.key",
                                        "tok", "sa/token", "sa/ca.crt", "sa/namespace"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        (void)unlink(tmp_path(names[i]));
    (void)rmdir(tmp_path("sa"));
    (void)rmdir(tmpdir);
    return 0;
}

/* "PEM1" "PEM2" "KEY3" in base64. */
#define B64_CA "UEVNMQ=="
#define B64_CERT "UEVNMg=="
#define B64_KEY "S0VZMw=="

#define CTX                                                                                        \
    "apiVersion: v1\n"                                                                             \
    "kind: Config\n"                                                                               \
    "current-context: dev\n"                                                                       \
    "contexts:\n"                                                                                  \
    "- name: other\n"                                                                              \
    "  context: {cluster: nowhere, user: nobody}\n"                                                \
    "- name: dev\n"                                                                                \
    "  context:\n"                                                                                 \
    "    cluster: c1\n"                                                                            \
    "    user: u1\n"                                                                               \
    "    namespace: team-a\n"

static void loads_inline_data_and_token(void **state)
{
    (void)state;
    write_file("kc", CTX "clusters:\n"
                         "- name: c1\n"
                         "  cluster:\n"
                         "    server: https://10.0.0.1:6443/\n"
                         "    certificate-authority-data: " B64_CA "\n"
                         "users:\n"
                         "- name: u1\n"
                         "  user:\n"
                         "    client-certificate-data: " B64_CERT "\n"
                         "    client-key-data: |\n"
                         "      S0VZ\n"
                         "      Mw==\n"
                         "    token: abc.def\n"
                         "    extensions: [{name: ignored}]\n");
    struct gs_kube_config cfg;
    struct gs_kube_diag d;
    assert_int_equal(gs_kube_config_load_file(tmp_path("kc"), &cfg, &d), GS_OK);
    assert_string_equal(cfg.server, "https://10.0.0.1:6443");
    assert_int_equal(cfg.ca_len, 4);
    assert_memory_equal(cfg.ca_data, "PEM1", 4);
    assert_int_equal(cfg.cert_len, 4);
    assert_memory_equal(cfg.cert_data, "PEM2", 4);
    assert_int_equal(cfg.key_len, 4);
    assert_memory_equal(cfg.key_data, "KEY3", 4);
    assert_string_equal(cfg.token, "abc.def");
    assert_null(cfg.token_file);
    assert_null(cfg.ca_file);
    assert_string_equal(cfg.namespace_, "team-a");
    assert_false(cfg.insecure_skip_tls_verify);
    gs_kube_config_fini(&cfg);
    gs_kube_config_fini(&cfg); /* a zeroed record is a no-op */
}

static void resolves_paths_against_the_kubeconfig_directory(void **state)
{
    (void)state;
    write_file("ca.crt", "x");
    write_file("c.crt", "x");
    write_file("c.key", "x");
    write_file("tok", "  rotated-token\n\n");
    write_file("kc", CTX "clusters:\n"
                         "- name: c1\n"
                         "  cluster:\n"
                         "    server: https://k:6443\n"
                         "    certificate-authority: ca.crt\n"
                         "users:\n"
                         "- name: u1\n"
                         "  user:\n"
                         "    client-certificate: ./c.crt\n"
                         "    client-key: c.key\n"
                         "    token: initial\n"
                         "    tokenFile: tok\n");
    struct gs_kube_config cfg;
    struct gs_kube_diag d;
    assert_int_equal(gs_kube_config_load_file(tmp_path("kc"), &cfg, &d), GS_OK);
    char want[512];
    (void)snprintf(want, sizeof want, "%s/ca.crt", tmpdir);
    assert_string_equal(cfg.ca_file, want);
    (void)snprintf(want, sizeof want, "%s/./c.crt", tmpdir);
    assert_string_equal(cfg.cert_file, want);
    (void)snprintf(want, sizeof want, "%s/c.key", tmpdir);
    assert_string_equal(cfg.key_file, want);
    (void)snprintf(want, sizeof want, "%s/tok", tmpdir);
    assert_string_equal(cfg.token_file, want);
    assert_string_equal(cfg.token, "rotated-token"); /* the file wins, trimmed */
    gs_kube_config_fini(&cfg);
}

static void insecure_without_user_is_fine(void **state)
{
    (void)state;
    write_file("kc", "current-context: a\n"
                     "contexts: [{name: a, context: {cluster: c}}]\n"
                     "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080',"
                     " insecure-skip-tls-verify: true}}]\n");
    struct gs_kube_config cfg;
    assert_int_equal(gs_kube_config_load_file(tmp_path("kc"), &cfg, NULL), GS_OK);
    assert_true(cfg.insecure_skip_tls_verify);
    assert_null(cfg.token);
    assert_null(cfg.namespace_);
    gs_kube_config_fini(&cfg);
}

/* Loads text that must fail, and checks every part of the diagnostic. */
static void fails(const char *text, int rc_want, uint32_t line, uint32_t column, const char *field,
                  const char *msg)
{
    struct gs_kube_config cfg;
    struct gs_kube_diag d;
    write_file("kc", text);
    int rc = gs_kube_config_load_file(tmp_path("kc"), &cfg, &d);
    char got[700];
    gs_kube_diag_format(&d, got, sizeof got);
    if (rc != rc_want || d.line != line || d.column != column || strcmp(d.field, field) != 0 ||
        strcmp(d.msg, msg) != 0 || strcmp(d.file, tmp_path("kc")) != 0)
        fail_msg("input:\n%s\ngot %s: %s\nwant %s: line %u col %u field '%s' msg '%s'", text,
                 gs_errname(rc), got, gs_errname(rc_want), line, column, field, msg);
    assert_null(cfg.server);
    assert_null(cfg.token);
}

#define CL_OK "clusters: [{name: c, cluster: {server: 'https://k'}}]\n"
#define CTX_OK "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"

static void every_bad_kubeconfig_is_named(void **state)
{
    (void)state;
    fails("", GS_EPARSE, 0, 0, "", "the file is empty");
    /* YAML problems come from the shared walker (src/util/yaml.h), with its wording. */
    fails("a: [1,\n", GS_EPARSE, 2, 1, "",
          "malformed YAML: did not find expected node content (while parsing a flow node at line "
          "2, column 1)");
    fails(CTX_OK "---\n" CL_OK, GS_EPARSE, 3, 1, "",
          "a second YAML document; a kubeconfig is one document");
    fails("- a\n- b\n", GS_EPARSE, 1, 1, "", "expected a mapping, found a list");
    fails("kind: Config\n", GS_EPARSE, 0, 0, "current-context", "no current-context is set");
    fails("current-context: [x]\n", GS_EPARSE, 1, 18, "current-context",
          "expected a scalar, found a list");
    fails("current-context: b\ncontexts: [{name: a, context: {cluster: c}}]\n", GS_EPARSE, 1, 18,
          "current-context", "context 'b' is not in contexts");
    fails("current-context: a\ncontexts: {a: 1}\n", GS_EPARSE, 2, 11, "contexts",
          "expected a list, found a mapping");
    fails("current-context: a\ncontexts:\n- name: a\n- name: a\n", GS_EPARSE, 4, 9,
          "contexts[1].name", "duplicate name 'a'");
    fails("current-context: a\ncontexts:\n- context: {}\n", GS_EPARSE, 3, 3, "contexts[0].name",
          "a name is required");
    fails("current-context: a\ncontexts: [{name: a, context: [1]}]\n", GS_EPARSE, 2, 31,
          "contexts[0].context", "expected a mapping, found a list");
    fails("current-context: a\ncontexts: [{name: a, context: {user: u}}]\n", GS_EPARSE, 2, 31,
          "contexts[0].context.cluster", "context 'a' names no cluster");
    fails(CTX_OK, GS_EPARSE, 2, 41, "contexts[0].context.cluster",
          "cluster 'c' is not in clusters");
    fails(CTX_OK "clusters: [{name: c}]\n", GS_EPARSE, 2, 41, "", "cluster 'c' has no server");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: ''}}]\n", GS_EPARSE, 3, 40,
          "clusters[0].cluster.server", "cluster 'c' has no server");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'k:6443'}}]\n", GS_EPARSE, 3, 40,
          "clusters[0].cluster.server", "server 'k:6443' is not an http:// or https:// URL");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k',"
                 " certificate-authority-data: 'a*b='}}]\n",
          GS_EPARSE, 3, 81, "clusters[0].cluster.certificate-authority-data", "not valid base64");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k',"
                 " certificate-authority-data: 'QQ='}}]\n",
          GS_EPARSE, 3, 81, "clusters[0].cluster.certificate-authority-data", "not valid base64");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k',"
                 " certificate-authority-data: '=='}}]\n",
          GS_EPARSE, 3, 81, "clusters[0].cluster.certificate-authority-data", "not valid base64");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k',"
                 " certificate-authority-data: ' '}}]\n",
          GS_EPARSE, 3, 81, "clusters[0].cluster.certificate-authority-data",
          "decoded data is empty");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k',"
                 " insecure-skip-tls-verify: yes}}]\n",
          GS_EPARSE, 3, 79, "clusters[0].cluster.insecure-skip-tls-verify", "not a boolean: 'yes'");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k',"
                 " certificate-authority: /nonexistent/ca.crt}}]\n",
          GS_EPARSE, 3, 76, "clusters[0].cluster.certificate-authority",
          "cannot read '/nonexistent/ca.crt': No such file or directory");
    write_file("ca.crt", "x");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k', certificate-authority: "
                 "ca.crt,\n  certificate-authority-data: " B64_CA "}}]\n",
          GS_EPARSE, 4, 31, "clusters[0].cluster.certificate-authority-data",
          "both certificate-authority and certificate-authority-data are set");
    fails(CTX_OK "clusters: [{name: c, cluster: {server: 'https://k', certificate-authority-data: "
                 "" B64_CA ",\n  insecure-skip-tls-verify: true}}]\n",
          GS_EPARSE, 4, 29, "clusters[0].cluster.insecure-skip-tls-verify",
          "insecure-skip-tls-verify cannot be combined with a certificate authority");
    fails(CTX_OK CL_OK, GS_EPARSE, 2, 50, "contexts[0].context.user", "user 'u' is not in users");
    fails(CTX_OK CL_OK "users: [{name: u, user: {exec: {command: aws}}}]\n", GS_EPARSE, 4, 32,
          "users[0].user.exec", "exec credential plugins are not supported");
    fails(CTX_OK CL_OK "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n", GS_EPARSE, 4, 41,
          "users[0].user.auth-provider", "auth-provider plugins are not supported");
    fails(CTX_OK CL_OK "users: [{name: u, user: {username: a, password: b}}]\n", GS_EPARSE, 4, 36,
          "users[0].user.username", "basic authentication (username/password) is not supported");
    fails(CTX_OK CL_OK "users: [{name: u, user: {client-certificate-data: " B64_CERT "}}]\n",
          GS_EPARSE, 4, 51, "users[0].user.client-certificate-data",
          "client-certificate without client-key");
    fails(CTX_OK CL_OK "users: [{name: u, user: {client-key-data: " B64_KEY "}}]\n", GS_EPARSE, 4,
          43, "users[0].user.client-key-data", "client-key without client-certificate");
    write_file("c.crt", "x");
    fails(CTX_OK CL_OK "users: [{name: u, user: {client-certificate: c.crt,"
                       " client-certificate-data: " B64_CERT ", client-key-data: " B64_KEY "}}]\n",
          GS_EPARSE, 4, 78, "users[0].user.client-certificate-data",
          "both client-certificate and client-certificate-data are set");
    fails(CTX_OK CL_OK "users: [{name: u, user: {token: [a]}}]\n", GS_EPARSE, 4, 33,
          "users[0].user.token", "expected a scalar, found a list");
    write_file("tok", " \n");
    {
        char want[600];
        struct gs_kube_config cfg;
        struct gs_kube_diag d;
        write_file("kc", CTX_OK CL_OK "users: [{name: u, user: {tokenFile: tok}}]\n");
        assert_int_equal(gs_kube_config_load_file(tmp_path("kc"), &cfg, &d), GS_EPARSE);
        assert_string_equal(d.msg, "token file is empty");
        assert_string_equal(d.file, tmp_path("tok"));
        gs_kube_diag_format(&d, want, sizeof want);
        char exp[600];
        (void)snprintf(exp, sizeof exp, "%s/tok: token file is empty", tmpdir);
        assert_string_equal(want, exp);
    }
}

static void missing_and_oversized_files_are_io_errors(void **state)
{
    (void)state;
    struct gs_kube_config cfg;
    struct gs_kube_diag d;
    assert_int_equal(gs_kube_config_load_file("/nonexistent/kubeconfig", &cfg, &d), GS_EIO);
    assert_string_equal(d.file, "/nonexistent/kubeconfig");
    assert_string_equal(d.msg, "cannot open: No such file or directory");
    char text[300];
    gs_kube_diag_format(&d, text, sizeof text);
    assert_string_equal(text, "/nonexistent/kubeconfig: cannot open: No such file or directory");

    char *big = malloc((1u << 20) + 10);
    assert_non_null(big);
    memset(big, '#', (1u << 20) + 9);
    big[(1u << 20) + 9] = '\0';
    write_file("kc", big);
    free(big);
    assert_int_equal(gs_kube_config_load_file(tmp_path("kc"), &cfg, &d), GS_EIO);
    assert_string_equal(d.msg, "file is over the limit of 1048576 bytes");
    assert_int_equal(gs_kube_config_load_file(NULL, &cfg, &d), GS_EINVAL);
}

static void in_cluster_reads_the_service_account(void **state)
{
    (void)state;
    struct gs_kube_config cfg;
    struct gs_kube_diag d;
    assert_int_equal(mkdir(tmp_path("sa"), 0700), 0);
    write_file("sa/token", "sa-token\n");
    write_file("sa/ca.crt", "x");
    write_file("sa/namespace", "kube-system");
    (void)unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(gs_kube_config_load_in_cluster(tmp_path("sa"), &cfg, &d), GS_ENOENT);
    assert_string_equal(d.msg, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
                               "(not running in a cluster?)");
    assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1), 0);
    assert_int_equal(setenv("KUBERNETES_SERVICE_PORT", "443", 1), 0);
    assert_int_equal(gs_kube_config_load_in_cluster(tmp_path("sa"), &cfg, &d), GS_OK);
    assert_string_equal(cfg.server, "https://[fd00::1]:443");
    assert_string_equal(cfg.token, "sa-token");
    assert_string_equal(cfg.token_file, tmp_path("sa/token"));
    assert_string_equal(cfg.ca_file, tmp_path("sa/ca.crt"));
    assert_string_equal(cfg.namespace_, "kube-system");
    gs_kube_config_fini(&cfg);
    assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1), 0);
    (void)unlink(tmp_path("sa/ca.crt"));
    assert_int_equal(gs_kube_config_load_in_cluster(tmp_path("sa"), &cfg, &d), GS_EIO);
    char want[600];
    (void)snprintf(want, sizeof want, "cannot read '%s': No such file or directory",
                   tmp_path("sa/ca.crt"));
    assert_string_equal(d.msg, want);
    assert_null(cfg.server);

    /* $KUBECONFIG comes first; only its first path is read. */
    write_file("kc", "current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n" CL_OK);
    char env[600];
    (void)snprintf(env, sizeof env, "%s:/nonexistent/second", tmp_path("kc"));
    assert_int_equal(setenv("KUBECONFIG", env, 1), 0);
    assert_int_equal(gs_kube_config_load_default(&cfg, &d), GS_OK);
    assert_string_equal(cfg.server, "https://k");
    gs_kube_config_fini(&cfg);
    /* Without it, in-cluster (here failing on the real service-account path). */
    assert_int_equal(unsetenv("KUBECONFIG"), 0);
    int rc = gs_kube_config_load_default(&cfg, &d);
    if (rc == GS_OK)
        gs_kube_config_fini(&cfg); /* running in a real pod */
    else
        assert_int_equal(rc, GS_EIO);
    (void)unsetenv("KUBERNETES_SERVICE_HOST");
    (void)unsetenv("KUBERNETES_SERVICE_PORT");
}

static void diag_format_leaves_out_empty_parts(void **state)
{
    (void)state;
    struct gs_kube_diag d = {.line = 3, .column = 7};
    char buf[400];
    (void)snprintf(d.file, sizeof d.file, "kc");
    (void)snprintf(d.field, sizeof d.field, "users[0].user.token");
    (void)snprintf(d.msg, sizeof d.msg, "boom");
    gs_kube_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "kc:3:7: field 'users[0].user.token': boom");
    d.line = 0;
    d.field[0] = '\0';
    gs_kube_diag_format(&d, buf, sizeof buf);
    assert_string_equal(buf, "kc: boom");
    d.file[0] = '\0';
    assert_int_equal(gs_kube_diag_format(&d, buf, 2), 4);
    assert_string_equal(buf, "b");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(loads_inline_data_and_token, setup, teardown),
        cmocka_unit_test_setup_teardown(resolves_paths_against_the_kubeconfig_directory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(insecure_without_user_is_fine, setup, teardown),
        cmocka_unit_test_setup_teardown(every_bad_kubeconfig_is_named, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_and_oversized_files_are_io_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(in_cluster_reads_the_service_account, setup, teardown),
        cmocka_unit_test(diag_format_leaves_out_empty_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
