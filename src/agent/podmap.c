/*
 * A process's pod from its cgroup path (contract in include/gpusched/podmap.h).
 *
 * The parser walks the text line by line and each line's path segment by segment, with no
 * copy and no allocation: a segment is a (pointer, length) pair inside the caller's bytes, so
 * a line of any length costs one pass and nothing is ever written past a fixed buffer. A pod
 * segment is recognised only under an ancestor segment that contains "kubepods" (which every
 * kubelet cgroup driver writes), so a host cgroup that happens to be called "pod..." is not
 * taken for a pod. The UID must be hex digits and dashes, the container ID hex digits; any
 * other byte (NUL included) makes the segment not match.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/podmap.h"

#include "gpusched/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** A run of bytes inside the parsed text. */
struct span {
    const char *p; /**< first byte */
    size_t n;      /**< bytes */
};

static bool has_prefix(struct span s, const char *pre)
{
    size_t k = strlen(pre);
    return s.n >= k && memcmp(s.p, pre, k) == 0;
}

static bool has_suffix(struct span s, const char *suf)
{
    size_t k = strlen(suf);
    return s.n >= k && memcmp(s.p + s.n - k, suf, k) == 0;
}

static bool contains(struct span s, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; k <= s.n && i <= s.n - k; i++)
        if (memcmp(s.p + i, needle, k) == 0)
            return true;
    return false;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/*
 * Copies a UID into out, '_' (the systemd driver's spelling of '-') as '-'. Refuses an empty
 * or too long UID and any byte other than hex digits, '-' and '_'.
 */
static bool take_uid(struct span s, char *out)
{
    if (s.n == 0 || s.n >= GS_PODMAP_UID_LEN)
        return false;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (c == '_')
            c = '-';
        if (!is_hex(c) && c != '-')
            return false;
        out[i] = c;
    }
    out[s.n] = '\0';
    return true;
}

/* The UID of a pod segment: "pod<uid>" (cgroupfs) or "...-pod<uid>.slice" (systemd). */
static bool pod_segment(struct span s, char *uid)
{
    if (has_suffix(s, ".slice")) {
        s.n -= strlen(".slice");
        /* The last "-pod" before the suffix: kubepods-burstable-pod<uid>.slice. */
        for (size_t i = s.n; i >= 4; i--) {
            struct span tail = {s.p + i - 4, 4};
            if (memcmp(tail.p, "-pod", 4) == 0) {
                struct span u = {s.p + i, s.n - i};
                return contains((struct span){s.p, i}, "kubepods") && take_uid(u, uid);
            }
        }
        return false;
    }
    if (!has_prefix(s, "pod"))
        return false;
    struct span u = {s.p + 3, s.n - 3};
    return take_uid(u, uid);
}

/*
 * The container ID of the segment under a pod: "<hex>" (cgroupfs), or "<runtime>-<hex>.scope"
 * (systemd: cri-containerd-, docker-, crio-). Anything else is no container ("" in out).
 */
static void container_segment(struct span s, char *cid)
{
    cid[0] = '\0';
    if (has_suffix(s, ".scope")) {
        s.n -= strlen(".scope");
        size_t i = s.n;
        while (i > 0 && s.p[i - 1] != '-')
            i--;
        if (i == 0)
            return;
        struct span rt = {s.p, i - 1};
        if (!(rt.n == strlen("cri-containerd") && has_prefix(rt, "cri-containerd")) &&
            !(rt.n == strlen("docker") && has_prefix(rt, "docker")) &&
            !(rt.n == strlen("crio") && has_prefix(rt, "crio")))
            return;
        s = (struct span){s.p + i, s.n - i};
    }
    if (s.n == 0 || s.n >= GS_PODMAP_CID_LEN)
        return;
    for (size_t k = 0; k < s.n; k++)
        if (!is_hex(s.p[k]))
            return;
    memcpy(cid, s.p, s.n);
    cid[s.n] = '\0';
}

/* One cgroup path: its segments in order, the pod one under a kubepods ancestor. */
static bool parse_path(struct span path, struct gs_podmap_entry *out)
{
    bool under_kubepods = false;
    bool have_pod = false;
    size_t i = 0;
    while (i < path.n) {
        size_t j = i;
        while (j < path.n && path.p[j] != '/')
            j++;
        struct span seg = {path.p + i, j - i};
        i = j + 1;
        if (seg.n == 0)
            continue;
        if (have_pod) {
            container_segment(seg, out->container_id);
            return true;
        }
        if (under_kubepods && pod_segment(seg, out->pod_uid)) {
            have_pod = true;
            continue;
        }
        if (contains(seg, "kubepods")) {
            /* A systemd pod slice carries "kubepods" itself: kubepods-pod<uid>.slice. */
            if (pod_segment(seg, out->pod_uid)) {
                have_pod = true;
                continue;
            }
            under_kubepods = true;
        }
    }
    return have_pod;
}

int gs_podmap_parse_cgroup(const char *text, size_t len, struct gs_podmap_entry *out)
{
    if (out == NULL || (text == NULL && len > 0))
        return GS_EINVAL;
    memset(out, 0, sizeof *out);
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        struct span line = {text + i, j - i};
        i = j + 1;
        /* "hierarchy-id:controllers:path": the path follows the second colon. */
        const char *c1 = memchr(line.p, ':', line.n);
        if (c1 == NULL)
            continue;
        size_t rest = line.n - (size_t)(c1 + 1 - line.p);
        const char *c2 = memchr(c1 + 1, ':', rest);
        if (c2 == NULL)
            continue;
        struct span path = {c2 + 1, line.n - (size_t)(c2 + 1 - line.p)};
        if (path.n == 0 || path.p[0] != '/')
            continue;
        if (parse_path(path, out))
            return GS_OK;
        memset(out, 0, sizeof *out);
    }
    return GS_ENOENT;
}

int gs_podmap_read_pid(const char *proc_root, uint32_t pid, struct gs_podmap_entry *out)
{
    if (proc_root == NULL || out == NULL)
        return GS_EINVAL;
    memset(out, 0, sizeof *out);
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%u/cgroup", proc_root, (unsigned)pid);
    if (n < 0 || (size_t)n >= sizeof path)
        return GS_EINVAL;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT || errno == ESRCH || errno == ENOTDIR ? GS_ENOENT : GS_EIO;
    char *buf = malloc(GS_PODMAP_FILE_MAX);
    int rc = GS_ENOMEM;
    if (buf != NULL) {
        size_t len = fread(buf, 1, GS_PODMAP_FILE_MAX, f);
        /* A process that exits while read gives a short or failed read: "not a pod". */
        rc = ferror(f) ? GS_ENOENT : gs_podmap_parse_cgroup(buf, len, out);
    }
    free(buf);
    (void)fclose(f);
    return rc;
}
