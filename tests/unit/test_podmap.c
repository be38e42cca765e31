/*
 * Tests of the process-to-pod mapping (include/gpusched/podmap.h): each cgroup path form that
 * kubelet and the runtimes write (cgroupfs and systemd drivers, cgroup v1 and v2, containerd,
 * Docker and CRI-O, a reader in its own cgroup namespace), host processes, and hostile input
 * (no newline, NUL bytes, a line of 1 MiB, UIDs and IDs with wrong characters or lengths);
 * then the reader on a fake /proc tree.
 */
#define _POSIX_C_SOURCE 200809L

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
#include "gpusched/podmap.h"

#define UID "0c6d2f5e-6a8b-4c1d-9e2f-3a4b5c6d7e8f"
#define UID_ "0c6d2f5e_6a8b_4c1d_9e2f_3a4b5c6d7e8f"
#define CID "4f9a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"

static int parse(const char *text, struct gs_podmap_entry *e)
{
    return gs_podmap_parse_cgroup(text, strlen(text), e);
}

static void test_podmap_reads_every_kubelet_cgroup_form(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *cid; /* expected container ID */
    } cases[] = {
        /* cgroup v2, systemd driver, containerd */
        {"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
         ".slice/cri-containerd-" CID ".scope\n",
         CID},
        /* Guaranteed QoS (no QoS slice), Docker */
        {"0::/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" CID ".scope\n", CID},
        /* BestEffort, CRI-O, read from inside a cgroup namespace ("/.." prefix) */
        {"0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/crio-" CID
         ".scope\n",
         CID},
        /* cgroup v1, cgroupfs driver: every hierarchy names the pod; the first wins */
        {"12:memory:/kubepods/burstable/pod" UID "/" CID "\n"
         "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID "\n"
         "1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n",
         CID},
        /* cgroupfs, Guaranteed, cgroup v2, no final newline */
        {"0::/kubepods/pod" UID "/" CID, CID},
        /* a host line first (v1 hybrid), then the pod */
        {"0::/init.scope\n5:devices:/kubepods/besteffort/pod" UID "/" CID "\n", CID},
        /* kubelet --cgroup-root=/k8s.slice */
        {"0::/k8s.slice/kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-" CID ".scope\n",
         CID},
        /* the pod's own cgroup, no container (the pod sandbox's parent) */
        {"0::/kubepods/burstable/pod" UID "\n", ""},
        /* crio's monitor: a pod's cgroup, but not one of its containers */
        {"0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-conmon-" CID ".scope\n", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_podmap_entry e;
        int rc = parse(cases[i].text, &e);
        if (rc != GS_OK || strcmp(e.pod_uid, UID) != 0 || strcmp(e.container_id, cases[i].cid) != 0)
            print_message("case %zu: rc %d uid '%s' cid '%s'\n", i, rc, e.pod_uid, e.container_id);
        assert_int_equal(rc, GS_OK);
        assert_string_equal(e.pod_uid, UID);
        assert_string_equal(e.container_id, cases[i].cid);
    }
}

static void test_podmap_host_and_hostile_input_is_not_a_pod(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "",
        "\n\n\n",
        "0::/user.slice/user-1000.slice/session-2.scope\n",
        "0::/system.slice/containerd.service\n",
        "0::/\n",
        /* "pod<uid>" not under a kubepods ancestor */
        "0::/system.slice/pod" UID "/" CID "\n",
        /* UID with a character that is not hex or a dash */
        "0::/kubepods/pod0c6d2f5e-zzzz/" CID "\n",
        /* empty UID */
        "0::/kubepods/pod/" CID "\n",
        "0::/kubepods.slice/kubepods-pod.slice/docker-" CID ".scope\n",
        /* UID of 64 characters (one past the buffer) */
        "0::/kubepods/pod0123456789012345678901234567890123456789012345678901234567890123/x\n",
        /* no colons, one colon, a path that does not start with / */
        "kubepods/pod" UID "\n",
        "0:/kubepods/pod" UID "\n",
        "0::kubepods/pod" UID "\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_podmap_entry e;
        memset(&e, 'x', sizeof e);
        int rc = parse(cases[i], &e);
        if (rc != GS_ENOENT)
            print_message("case %zu: rc %d uid '%s'\n", i, rc, e.pod_uid);
        assert_int_equal(rc, GS_ENOENT);
        assert_string_equal(e.pod_uid, "");
        assert_string_equal(e.container_id, "");
    }
    /* ".." after the pod is no container: the pod, an empty container ID. */
    struct gs_podmap_entry e;
    assert_int_equal(parse("0::/kubepods/pod" UID "/../" CID "\n", &e), GS_OK);
    assert_string_equal(e.pod_uid, UID);
    assert_string_equal(e.container_id, "");

    /* NUL bytes: the text is taken by length; a NUL inside the UID spoils that line only. */
    static const char nul[] = "0::/kubepods/pod0c6d\0"
                              "2f5e/" CID "\n"
                              "0::/kubepods/pod" UID "/" CID "\n";
    assert_int_equal(gs_podmap_parse_cgroup(nul, sizeof nul - 1, &e), GS_OK);
    assert_string_equal(e.pod_uid, UID);
    static const char nul_only[] = "0::/kubepods/pod0c6d\0"
                                   "2f5e/" CID "\n";
    assert_int_equal(gs_podmap_parse_cgroup(nul_only, sizeof nul_only - 1, &e), GS_ENOENT);

    /* A container ID longer than the buffer is no container, the pod still counts. */
    char longid[200];
    (void)snprintf(longid, sizeof longid, "0::/kubepods/pod%s/%s%s\n", UID, CID, CID);
    assert_int_equal(parse(longid, &e), GS_OK);
    assert_string_equal(e.container_id, "");

    /* One line of 1 MiB of "/kubepods" segments, then the real one: found, nothing overrun. */
    size_t big = (size_t)1 << 20;
    char *text = malloc(big + 200);
    assert_non_null(text);
    memcpy(text, "0::", 3);
    size_t n = 3;
    while (n + 9 < big) {
        memcpy(text + n, "/kubepods", 9);
        n += 9;
    }
    n += (size_t)snprintf(text + n, 200, "/pod%s/%s", UID, CID);
    assert_int_equal(gs_podmap_parse_cgroup(text, n, &e), GS_OK);
    assert_string_equal(e.pod_uid, UID);
    assert_string_equal(e.container_id, CID);
    /* 1 MiB of binary without a newline. */
    for (size_t i = 0; i < big; i++)
        text[i] = (char)(i * 131 + 7);
    assert_int_equal(gs_podmap_parse_cgroup(text, big, &e), GS_ENOENT);
    free(text);

    assert_int_equal(gs_podmap_parse_cgroup(NULL, 0, &e), GS_ENOENT);
    assert_int_equal(gs_podmap_parse_cgroup(NULL, 3, &e), GS_EINVAL);
    assert_int_equal(gs_podmap_parse_cgroup("x", 1, NULL), GS_EINVAL);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void test_podmap_reads_a_fake_proc_tree(void **state)
{
    (void)state;
    char root[] = "/tmp/test_podmap_XXXXXX";
    assert_non_null(mkdtemp(root));
    char path[256];
    (void)snprintf(path, sizeof path, "%s/4101", root);
    assert_int_equal(mkdir(path, 0700), 0);
    (void)snprintf(path, sizeof path, "%s/4101/cgroup", root);
    write_file(path, "0::/kubepods/besteffort/pod" UID "/" CID "\n");
    (void)snprintf(path, sizeof path, "%s/1", root);
    assert_int_equal(mkdir(path, 0700), 0);
    (void)snprintf(path, sizeof path, "%s/1/cgroup", root);
    write_file(path, "0::/init.scope\n");

    struct gs_podmap_entry e;
    assert_int_equal(gs_podmap_read_pid(root, 4101, &e), GS_OK);
    assert_string_equal(e.pod_uid, UID);
    assert_string_equal(e.container_id, CID);
    assert_int_equal(gs_podmap_read_pid(root, 1, &e), GS_ENOENT);
    assert_int_equal(gs_podmap_read_pid(root, 999999, &e), GS_ENOENT); /* exited */
    assert_int_equal(gs_podmap_read_pid(NULL, 1, &e), GS_EINVAL);

    (void)snprintf(path, sizeof path, "%s/4101/cgroup", root);
    assert_int_equal(unlink(path), 0);
    (void)snprintf(path, sizeof path, "%s/1/cgroup", root);
    assert_int_equal(unlink(path), 0);
    (void)snprintf(path, sizeof path, "%s/4101", root);
    assert_int_equal(rmdir(path), 0);
    (void)snprintf(path, sizeof path, "%s/1", root);
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rmdir(root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_podmap_reads_every_kubelet_cgroup_form),
        cmocka_unit_test(test_podmap_host_and_hostile_input_is_not_a_pod),
        cmocka_unit_test(test_podmap_reads_a_fake_proc_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
