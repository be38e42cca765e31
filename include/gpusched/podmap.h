/*
 * Which pod a process belongs to, from the cgroup kubelet put it in (issue 9: per-pod GPU
 * values that add up need each GPU process's pod).
 *
 * Kubelet names a pod's cgroup after the pod's UID and the container runtime names the
 * container's cgroup after the container ID. /proc/<pid>/cgroup lists the process's cgroups,
 * one "hierarchy-id:controllers:path" line per hierarchy (cgroup v1) or the single line
 * "0::path" (cgroup v2). The paths this module understands:
 *
 *   cgroupfs driver  /kubepods/burstable/pod<uid>/<container-id>
 *                    /kubepods/pod<uid>/<container-id>           (Guaranteed QoS)
 *   systemd driver   /kubepods.slice/kubepods-burstable.slice/
 *                        kubepods-burstable-pod<uid, "-" written "_">.slice/
 *                        cri-containerd-<id>.scope | docker-<id>.scope | crio-<id>.scope
 *
 * with any prefix before the kubepods part (a kubelet --cgroup-root, "/.." segments where the
 * reader sits in its own cgroup namespace). A process in the pod's cgroup itself, outside any
 * container's, gets its pod UID and an empty container ID.
 *
 * The parser (gs_podmap_parse_cgroup) is pure and takes any bytes: long lines, no newline,
 * NUL bytes, binary. What does not match is "not a pod process" (GS_ENOENT), never a crash
 * or a partial answer. The reader (gs_podmap_read_pid) is the only I/O.
 */
#ifndef GPUSCHED_PODMAP_H
#define GPUSCHED_PODMAP_H

#include <stddef.h>
#include <stdint.h>

#include "gpusched/exporter.h"
#include "gpusched/gpu.h"

/** Buffer size of a pod UID, NUL included (a UID is 36 characters; longer ones are refused). */
#define GS_PODMAP_UID_LEN 64
/** Buffer size of a container ID, NUL included (runtimes use 64 hex digits). */
#define GS_PODMAP_CID_LEN 72
/** Most bytes of /proc/<pid>/cgroup read; the rest is ignored (a real file is far smaller). */
#define GS_PODMAP_FILE_MAX ((size_t)64 * 1024)

/** A process's pod. Plain value record. */
struct gs_podmap_entry {
    char pod_uid[GS_PODMAP_UID_LEN];      /**< "0c6d2f5e-…" (dashes, whatever the driver) */
    char container_id[GS_PODMAP_CID_LEN]; /**< hex digits as the runtime wrote them, no
                                               "containerd://" prefix; "" when the process
                                               sits in the pod's own cgroup */
};

/**
 * Reads the pod of one process from the text of its /proc/<pid>/cgroup. The first line whose
 * path names a pod wins (under cgroup v1 every hierarchy names the same one).
 * @param text  len bytes, borrowed; need not be NUL-terminated; may hold NUL bytes.
 * @param out   receives the pod on GS_OK; zeroed otherwise.
 * @return GS_OK; GS_ENOENT (no line names a pod: a host process, a malformed or hostile file);
 *         GS_EINVAL (text NULL with len > 0, or out NULL). Pure; thread-safe.
 */
int gs_podmap_parse_cgroup(const char *text, size_t len, struct gs_podmap_entry *out);

/**
 * Reads <proc_root>/<pid>/cgroup (at most GS_PODMAP_FILE_MAX bytes) and parses it.
 * @param proc_root  "/proc" on a node (the agent needs hostPID to see pods' processes);
 *                   a directory of the same shape in tests. Borrowed.
 * @param out        as gs_podmap_parse_cgroup().
 * @return GS_OK; GS_ENOENT (no such process, or not a pod's); GS_EIO (the file cannot be
 *         read otherwise, e.g. permission); GS_ENOMEM; GS_EINVAL (NULL, a path too long).
 *         Thread-safe.
 */
int gs_podmap_read_pid(const char *proc_root, uint32_t pid, struct gs_podmap_entry *out);

/**
 * The per-pod values of a metrics snapshot (gs_exporter_podval): for each GPU with a sample,
 * its processes (gs_gpu_processes), each mapped to its pod (gs_podmap_read_pid under
 * proc_root) and summed per (GPU, MIG GPU instance, pod UID, container ID). A process outside
 * any pod (a host daemon, one that exited meanwhile) counts in no pod value; its use stays in
 * the device's series. Sets each GPU's have_procs: true when its processes were read (even
 * none), false when the backend cannot read them or the GPU has no sample. Pod names are left
 * "" (the cgroup tells the UID only; on Kubernetes the agent then names them from its watch
 * of the node's pods, podnames.h). The agent's GPU loop calls it once per refresh.
 * @param b          backend (borrowed; the caller's thread owns it).
 * @param proc_root  "/proc" or a test tree (borrowed).
 * @param gpus       n_gpus snapshot rows (positions are the values' gpu); have_procs written.
 * @param out        caller storage of cap values; [0, *n_out) filled.
 * @param n_out      receives the values filled; a node with more than cap (pod, GPU) pairs
 *                   keeps the first cap, and the call says so with GS_ELIMIT.
 * @return GS_OK; GS_ELIMIT (values past cap left out; the rest filled); GS_EINVAL (NULL).
 */
int gs_podmap_collect(struct gs_gpu_backend *b, const char *proc_root, struct gs_exporter_gpu *gpus,
                      uint32_t n_gpus, struct gs_exporter_podval *out, uint32_t cap,
                      uint32_t *n_out);

#endif /* GPUSCHED_PODMAP_H */
