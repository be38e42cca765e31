/*
 * The agent daemon's state, shared by devplugin.c (the loop, sockets, registration, health,
 * metrics) and devplugin_rediscover.c (re-reading the GPUs and advertising a changed model);
 * not part of the public API in include/gpusched/devplugin.h.
 */
#ifndef GPUSCHED_AGENT_DEVPLUGIN_AGENT_H
#define GPUSCHED_AGENT_DEVPLUGIN_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpusched/compiler.h"
#include "gpusched/devplugin.h"
#include "gpusched/exporter.h"
#include "gpusched/grpc.h"
#include "gpusched/kmigplan.h"

#include "devplugin_int.h"

/** Longest socket path (sockaddr_un.sun_path minus the NUL). */
#define SOCKET_PATH_MAX 107
/**
 * Wait between a rediscovery's withdrawal step and its new lists, ms. Kubelet reads each
 * resource's stream on its own goroutine, so lists sent on two sockets at once may be taken in
 * either order; a pause between the steps makes the withdrawal land first.
 */
#define WITHDRAW_SETTLE_MS 200

/** One advertised resource at run time. */
struct res_rt {
    struct gs_dp_agent *a;                          /**< back pointer for handlers */
    uint32_t index;                                 /**< position in the model */
    struct gs_grpc_server *srv;                     /**< NULL while the socket is down */
    char path[GS_DP_PATH_LEN + GS_DP_ENDPOINT_LEN]; /**< socket file */
    dev_t dev;                                      /**< identity of the file we bound */
    ino_t ino;                                      /**< … (0 when down) */
    uint64_t gpu_mask;                              /**< GPUs holding devices of the resource */
    struct gs_grpc_stream **streams;                /**< open ListAndWatch streams */
    size_t n_streams;                               /**< entries used */
    size_t cap_streams;                             /**< entries allocated */
    bool reg_ok; /**< a Register of the current socket succeeded, with reg_kubelet */
    struct gs__dp_file_id reg_kubelet; /**< the kubelet.sock that Register went to */
    bool said_fail;                    /**< "cannot serve" logged since the last success */
};

struct gs_dp_agent {
    struct gs_dp_config cfg;                /**< copy of the caller's */
    struct gs_gpu_backend *backend;         /**< borrowed */
    struct gs_dp_model model;               /**< what we advertise */
    struct gs_clock clock;                  /**< monotonic */
    struct gs_health *health;               /**< per-GPU health machine */
    enum gs_health_state *state;            /**< per GPU: what the streams were last sent */
    struct res_rt res[GS_DP_RESOURCES_MAX]; /**< per resource */
    char node_name[256];                    /**< Hostname label */
    gs_dp_log_fn log;                       /**< log sink */
    void *log_ctx;                          /**< its context */
    int wake_fd;                            /**< eventfd: stop and worker completions */
    atomic_int stop;                        /**< set by gs_dp_agent_stop */
    int ino_fd;                             /**< inotify instance */
    int wd;                                 /**< watch on the plugin dir; -1 when lost */
    char kubelet_sock[GS_DP_PATH_LEN + 16]; /**< <dir>/kubelet.sock */
    int64_t next_register_ms;               /**< earliest next Register batch */
    int64_t register_backoff_ms;            /**< wait after the next failure */
    bool said_no_kubelet;                   /**< "waiting for kubelet.sock" logged */
    struct gs__dp_worker *reg_worker;       /**< Register calls */
    struct gs__dp_worker *pr_worker;        /**< PodResources List calls */
    struct gs__dp_reg_job reg_job;          /**< the Register batch (owned; lent to the worker) */
    struct gs__dp_podres_job *pr_job;       /**< the List job (owned; lent to the worker) */
    int pr_last_status;                     /**< status of the last List, -1 before any */
    struct gs_exporter *exporter;           /**< NULL when metrics are off */
    uint16_t metrics_port;                  /**< bound port */
    struct gs_exporter_gpu *xgpus;          /**< per GPU: exporter snapshot rows */
    struct gs_exporter_attr *attr;          /**< last attribution table */
    struct gs_exporter_podval *podval;      /**< per-pod values of the last refresh */
    uint32_t n_podval;                      /**< entries used in podval */
    bool said_podval_limit;                 /**< "too many pod values" logged */
    uint32_t n_attr;                        /**< rows used */
    int64_t next_event_ms;                  /**< next backend event poll */
    int64_t next_refresh_ms;                /**< next metrics refresh */
    int64_t next_recover_ms;                /**< next re-watch / socket retry; INT64_MAX none */
    bool ran;                               /**< gs_dp_agent_run was entered */
    bool have_pending;                      /**< a rediscovered model waits for its turn */
    bool said_mig_off;                      /**< "ignoring the MIG plan" logged (mig.dynamic off) */
    bool mig_rediscover;        /**< a plan changed the GPUs: rediscover at the next turn */
    char event_err[256];        /**< last backend event error logged ("" none) */
    uint64_t event_err_repeats; /**< the same error since, not logged again */
    struct gs__dp_kube *kube;   /**< the Kubernetes side; NULL without a config */
    char *inventory;            /**< the inventory last handed to kube (owned) */
    char *mig_last_id; /**< the id of the last MIG plan carried out or refused (owned); NULL */
    uint64_t assign_as_assigned; /**< Allocates on the assigned GPUs */
    uint64_t assign_mismatch;    /**< Allocates of other GPUs */
    uint64_t assign_fallbacks;   /**< preferred answers off the assignment */
    int64_t client_log_ms;       /**< last refill of the client log budget; 0 never */
    int64_t client_log_tokens;   /**< client lines that may be logged now */
    uint64_t client_log_dropped; /**< client lines left out since the last one */
    int64_t next_rediscover_ms;  /**< next re-read of the GPUs; INT64_MAX off */
    struct gs_dp_model pending;  /**< … that model (owned while have_pending) */
    enum gs_dp_res_change pending_change[GS_DP_RESOURCES_MAX]; /**< … per position */
    int64_t advertise_at_ms;                                   /**< when pending is advertised */
    char rediscover_err[512]; /**< last rediscovery failure logged ("" none) */
    uint64_t rediscoveries;   /**< models advertised after a change */
};

/** Writes one log line (printf format; control bytes escaped) to the agent's sink. */
void gs__dp_logf(struct gs_dp_agent *a, const char *fmt, ...) GS_PRINTF(2, 3);

/** The agent's monotonic clock, ms. */
int64_t gs__dp_now_ms(struct gs_dp_agent *a);

/** Copies src into dst[cap], truncating; source and destination may overlap. */
void gs__dp_scopy(char *dst, size_t cap, const char *src);

/** dst = "<dir>/<name>"; false when it does not fit in cap or in a socket address. */
bool gs__dp_join_path(char *dst, size_t cap, const char *dir, const char *name);

/** Sends resource r's full device list to each of its open ListAndWatch streams. */
void gs__dp_broadcast(struct res_rt *r);

/** Closes r's socket (its streams end; the file is removed). */
void gs__dp_res_stop(struct res_rt *r);

/**
 * Serves r's socket and asks for its Register; on failure r stays down and recover() retries.
 * @return GS_OK; the server's error.
 */
int gs__dp_res_start(struct gs_dp_agent *a, struct res_rt *r);

/** Hands the inventory to the Kubernetes side when it differs from the last one. */
void gs__dp_publish_inventory(struct gs_dp_agent *a);

/**
 * Sets position i's runtime facts from a->model: back pointer, index, socket path, GPU mask.
 * @return GS_OK; GS_EINVAL when the socket path is too long.
 */
int gs__dp_res_layout(struct gs_dp_agent *a, uint32_t i);

/**
 * Rediscovery timer (devplugin_rediscover.c): reads every GPU again; on a changed MIG layout
 * sends the withdrawal step at once and schedules the new model (advertise_at_ms).
 */
void gs__dp_rediscover(struct gs_dp_agent *a);

/** Step two of a rediscovery: advertises a->pending (new lists, sockets, inventory). */
void gs__dp_advertise_pending(struct gs_dp_agent *a);

/**
 * Dynamic MIG (devplugin_migplan.c): carries out a new plan from the Node when mig.dynamic is
 * on (else says once that plans are ignored), and rediscovers the GPUs after one changed them.
 */
void gs__dp_migplan_turn(struct gs_dp_agent *a);

#endif /* GPUSCHED_AGENT_DEVPLUGIN_AGENT_H */
