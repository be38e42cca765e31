/*
 * Internal interface between the device plugin's files (devplugin_*.c); not part of the public
 * API in include/gpusched/devplugin.h.
 */
#ifndef GPUSCHED_AGENT_DEVPLUGIN_INT_H
#define GPUSCHED_AGENT_DEVPLUGIN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/devplugin.h"
#include "gpusched/exporter.h"

/**
 * The preferred-allocation choice on resolved devices (the policy documented at
 * gs_dp_handle_preferred).
 * @param avail   n_avail distinct device positions of r kubelet offers, must devices excluded.
 * @param must    n_must distinct positions already chosen (must_include that r knows).
 * @param want    how many more devices to choose.
 * @param out     receives up to want positions, in choice order; capacity >= want.
 * @param n_out   receives how many were chosen (< want only when avail runs out).
 * @return GS_OK; GS_ENOMEM (scratch space).
 */
int gs__dp_prefer(const struct gs_dp_model *m, const struct gs_dp_resource *r,
                  const uint32_t *avail, uint32_t n_avail, const uint32_t *must, uint32_t n_must,
                  uint32_t want, uint32_t *out, uint32_t *n_out);

/**
 * The name of a claim's entry k in log lines and mismatch reasons: its GPU index ("6"), or for a
 * MIG instance GPU, profile and start slot ("6:1g.18gb@3").
 * @param buf  receives the name; cap bytes (GS_GPU_PROFILE_LEN + 32 always suffice).
 */
void gs__dp_claim_unit_name(const struct gs_dp_claim *cl, uint32_t k, char *buf, size_t cap);

/** Every entry of a claim named as by gs__dp_claim_unit_name, comma-joined; cut to cap bytes. */
void gs__dp_claim_units(const struct gs_dp_claim *cl, char *buf, size_t cap);

/* ---- helper threads for blocking calls to kubelet (devplugin_kubelet.c) ------------------ */

/**
 * Which file a path names: device, inode and the time of its last status change (ns), so that
 * a socket deleted and created again is told apart even where the inode number is reused.
 */
struct gs__dp_file_id {
    uint64_t dev;     /**< st_dev */
    uint64_t ino;     /**< st_ino; 0 for "no file" */
    int64_t ctime_ns; /**< st_ctim in ns */
};

/** The identity of the file at path (stat, following links). @return false when none. */
bool gs__dp_file_id_of(const char *path, struct gs__dp_file_id *out);

/** Whether two identities name the same file (both present). */
bool gs__dp_file_id_same(const struct gs__dp_file_id *x, const struct gs__dp_file_id *y);

/** One Register call to make. */
struct gs__dp_reg_item {
    char resource[GS_DP_RESOURCE_NAME_LEN]; /**< resource_name */
    char endpoint[GS_DP_ENDPOINT_LEN];      /**< socket file name */
    uint32_t index;                         /**< the agent's resource index */
    struct gs__dp_file_id sock;             /**< our socket file as it was at submission */
    bool stale;        /**< result: not sent, kubelet.sock was no longer the job's kubelet_id */
    int status;        /**< result: gRPC status (14 when unreachable or stale) */
    char message[256]; /**< result: grpc-message or transport reason */
};

/**
 * A batch of Register calls, run in order on the registration thread, all to one kubelet: the
 * kubelet.sock file kubelet_id names. Just before each call the thread checks that the path
 * still names that file and marks the item stale instead of calling when not, so that a
 * Register is never counted for one kubelet after reaching another.
 */
struct gs__dp_reg_job {
    char kubelet_socket[GS_DP_PATH_LEN + 16];          /**< <plugin dir>/kubelet.sock */
    struct gs__dp_file_id kubelet_id;                  /**< the kubelet.sock the batch is for */
    uint32_t n;                                        /**< items used */
    struct gs__dp_reg_item items[GS_DP_RESOURCES_MAX]; /**< calls */
};

/** One PodResources List call and its result. */
struct gs__dp_podres_job {
    char socket[GS_DP_PATH_LEN]; /**< kubelet's pod-resources socket */
    uint32_t n_resources;        /**< names of the resources that count */
    char resources[GS_DP_RESOURCES_MAX][GS_DP_RESOURCE_NAME_LEN]; /**< our resource names */
    int status;                                                   /**< result: gRPC status; 0 OK */
    char message[256];                                            /**< result: why it failed */
    uint32_t n_attr;                                              /**< result rows used */
    struct gs_exporter_attr attr[GS_EXPORTER_ATTR_MAX]; /**< result: one row per device ID */
    bool truncated; /**< result: more rows than GS_EXPORTER_ATTR_MAX */
};

/** A thread that runs one job at a time and signals completion on an eventfd. */
struct gs__dp_worker;

/** The work a worker does, on its thread. */
typedef void (*gs__dp_job_fn)(void *job);

/**
 * Starts a worker thread.
 * @param notify_fd  an eventfd the worker adds 1 to after each job (borrowed).
 * @return GS_OK; GS_ENOMEM; GS_EIO (thread creation failed).
 */
int gs__dp_worker_new(int notify_fd, gs__dp_job_fn fn, struct gs__dp_worker **out);

/** Whether a job is queued or running (its result not yet taken). */
bool gs__dp_worker_busy(struct gs__dp_worker *w);

/**
 * Hands a job (borrowed until taken back) to an idle worker.
 * @return GS_OK; GS_EEXIST when the worker is busy.
 */
int gs__dp_worker_submit(struct gs__dp_worker *w, void *job);

/** The finished job, or NULL while none is finished; the worker is idle afterwards. */
void *gs__dp_worker_take(struct gs__dp_worker *w);

/** Waits for a running job to end, stops and frees the thread. NULL is a no-op. */
void gs__dp_worker_free(struct gs__dp_worker *w);

/** Job function of the registration worker: runs every Register of a gs__dp_reg_job. */
void gs__dp_register_job(void *job);

/** Job function of the attribution worker: runs a gs__dp_podres_job. */
void gs__dp_podres_job(void *job);

/* ---- the Kubernetes side (devplugin_kube.c) ------------------------------------------------ */

struct gs_kube_config;
struct gs_dp_assign;

/**
 * A thread with its own API client that keeps the Node annotation gpusched.io/gpus equal to
 * the last inventory handed to gs__dp_kube_publish (PATCHing only when the Node, as its watch
 * shows it, differs), and keeps the assignment table current from a watch of the pods bound
 * to the node (fieldSelector spec.nodeName).
 */
struct gs__dp_kube;

/**
 * Makes the client and starts the thread.
 * @param cfg   borrowed for the call (the client copies what it needs).
 * @param node  the Node's name; copied.
 * @param log   receives log lines, from the Kubernetes thread; ctx is passed to it.
 * @return GS_OK; GS_EINVAL; GS_EIO (libcurl or the thread could not start); GS_ENOMEM.
 */
int gs__dp_kube_new(const struct gs_kube_config *cfg, const char *node, gs_dp_log_fn log,
                    void *log_ctx, struct gs__dp_kube **out);

/** Hands over the inventory text to publish (copied). Thread-safe. @return GS_OK; GS_ENOMEM. */
int gs__dp_kube_publish(struct gs__dp_kube *k, const char *inventory);

/** The assignment table, locked: call gs__dp_kube_unlock when done. */
struct gs_dp_assign *gs__dp_kube_lock(struct gs__dp_kube *k);

/** Releases the lock taken by gs__dp_kube_lock. */
void gs__dp_kube_unlock(struct gs__dp_kube *k);

/**
 * Names the per-pod values v[0, n) from the pods bound to the node as the watch last told them
 * (gs_podnames_fill under the thread's mutex); values of pods it does not know keep their UID
 * only. @return the number of values named. Thread-safe against the Kubernetes thread.
 */
uint32_t gs__dp_kube_name_pods(struct gs__dp_kube *k, struct gs_exporter_podval *v, uint32_t n);

/**
 * Asks for pod "namespace/name" to be annotated gpusched.io/allocated-gpus = given (PATCHed by
 * the Kubernetes thread; a later mark of the same pod replaces one not yet written). Thread-safe.
 * @return GS_OK; GS_ELIMIT (too many marks waiting: the mark is dropped); GS_EINVAL.
 */
int gs__dp_kube_mark(struct gs__dp_kube *k, const char *pod, uint32_t given);

/** Times the Node annotation was written (PATCH answered 2xx). Thread-safe. */
uint64_t gs__dp_kube_patches(struct gs__dp_kube *k);

/**
 * The Node's gpusched.io/mig-plan text when it changed since the last call (malloc'd, the
 * caller frees it); NULL when there is none or it was taken already.
 */
char *gs__dp_kube_take_plan(struct gs__dp_kube *k);

/** Asks for gpusched.io/mig-plan-status = text on the Node (written by the thread). */
int gs__dp_kube_plan_status(struct gs__dp_kube *k, const char *text);

/**
 * Whether a live pod bound to the node has MIG instance (gpu, profile, start) in its
 * gpusched.io/assigned-gpus; `pod` receives which ("pod uid U"), cap bytes.
 */
bool gs__dp_kube_mig_used(struct gs__dp_kube *k, uint32_t gpu, const char *profile, uint32_t start,
                          char *pod, size_t cap);

/**
 * Stops the thread (within about 200 ms; up to 5 s while a request to a hung API server is in
 * flight) and frees everything. NULL is a no-op.
 */
void gs__dp_kube_free(struct gs__dp_kube *k);

/*
 * pthread_create() for the agent's helper threads (the registration and pod-resources
 * workers, the Kubernetes watcher): the thread starts with every signal blocked, so SIGTERM
 * and the like reach the thread that runs gs_dp_agent_run() and stops it from its handler.
 * (A signal delivered to a worker blocked in pthread_cond_wait may wait there until the
 * worker wakes: ThreadSanitizer's runtime does so, and the agent ignored SIGTERM once in about
 * eight runs of agent_devplugin_grpcio.) The caller's mask is left as it was.
 * @return pthread_create()'s result.
 */
int gs__dp_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif /* GPUSCHED_AGENT_DEVPLUGIN_INT_H */
