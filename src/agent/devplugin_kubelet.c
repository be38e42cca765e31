/*
 * The device plugin's calls to kubelet, made on helper threads (internal contract in
 * devplugin_int.h).
 *
 * Why threads in a single-loop agent: kubelet's Register handler dials back into the plugin's
 * socket and waits for the HTTP/2 handshake and GetDevicePluginOptions before it answers
 * (kubelet devicemanager server.go), so a Register made from the loop that serves that socket
 * would wait on itself until kubelet's 10 s dial timeout. PodResources List cannot deadlock,
 * but a slow kubelet would hold up ListAndWatch updates past their 1 s bound. Each worker
 * runs one job at a time with gsrpc's blocking client and reports on an eventfd the loop
 * polls; jobs are plain structs the loop owns, so no state is shared beyond the hand-over
 * under the worker's mutex.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/err.h"
#include "gpusched/grpc.h"

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "devplugin_int.h"
#include "podresources/v1/api.pb-c.h"

#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/** Deadline of one Register call, ms (kubelet's own dial-back timeout is 10 s). */
#define REGISTER_TIMEOUT_MS 5000
/** Deadline of one PodResources List call, ms. */
#define LIST_TIMEOUT_MS 2000

struct gs__dp_worker {
    pthread_t thread;   /**< the worker */
    pthread_mutex_t mu; /**< guards the fields below */
    pthread_cond_t cv;  /**< signalled on submit and on stop */
    gs__dp_job_fn fn;   /**< what a job runs */
    int notify_fd;      /**< eventfd bumped after each job; borrowed */
    void *queued;       /**< submitted, not started */
    void *running;      /**< being run */
    void *done;         /**< finished, not taken */
    bool stop;          /**< the thread should exit */
};

static void *worker_main(void *arg)
{
    struct gs__dp_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->queued == NULL && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->queued == NULL)
            break;
        w->running = w->queued;
        w->queued = NULL;
        void *job = w->running;
        pthread_mutex_unlock(&w->mu);
        w->fn(job);
        pthread_mutex_lock(&w->mu);
        w->running = NULL;
        w->done = job;
        uint64_t one = 1;
        /* An eventfd write only fails when the counter would overflow; then it is readable. */
        if (write(w->notify_fd, &one, sizeof one) < 0) {
            /* nothing to do: the loop sees the fd readable either way */
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int gs__dp_worker_new(int notify_fd, gs__dp_job_fn fn, struct gs__dp_worker **out)
{
    *out = NULL;
    struct gs__dp_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return GS_ENOMEM;
    w->fn = fn;
    w->notify_fd = notify_fd;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return GS_EIO;
    }
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        free(w);
        return GS_EIO;
    }
    if (gs__dp_thread_start(&w->thread, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return GS_EIO;
    }
    *out = w;
    return GS_OK;
}

bool gs__dp_worker_busy(struct gs__dp_worker *w)
{
    pthread_mutex_lock(&w->mu);
    bool busy = w->queued != NULL || w->running != NULL || w->done != NULL;
    pthread_mutex_unlock(&w->mu);
    return busy;
}

int gs__dp_worker_submit(struct gs__dp_worker *w, void *job)
{
    pthread_mutex_lock(&w->mu);
    int rc = GS_EEXIST;
    if (w->queued == NULL && w->running == NULL && w->done == NULL) {
        w->queued = job;
        pthread_cond_signal(&w->cv);
        rc = GS_OK;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void *gs__dp_worker_take(struct gs__dp_worker *w)
{
    pthread_mutex_lock(&w->mu);
    void *job = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->mu);
    return job;
}

void gs__dp_worker_free(struct gs__dp_worker *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    w->queued = NULL;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* ---- jobs ------------------------------------------------------------------------------- */

bool gs__dp_file_id_of(const char *path, struct gs__dp_file_id *out)
{
    struct stat st;
    memset(out, 0, sizeof *out);
    if (stat(path, &st) != 0)
        return false;
    out->dev = (uint64_t)st.st_dev;
    out->ino = (uint64_t)st.st_ino;
    out->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + (int64_t)st.st_ctim.tv_nsec;
    return true;
}

bool gs__dp_file_id_same(const struct gs__dp_file_id *x, const struct gs__dp_file_id *y)
{
    return x->ino != 0 && x->dev == y->dev && x->ino == y->ino && x->ctime_ns == y->ctime_ns;
}

void gs__dp_register_job(void *arg)
{
    struct gs__dp_reg_job *job = arg;
    for (uint32_t i = 0; i < job->n; i++) {
        struct gs__dp_reg_item *it = &job->items[i];
        it->stale = false;
        /* The batch is for one kubelet.sock: a new kubelet gets its own batch. */
        struct gs__dp_file_id now;
        if (!gs__dp_file_id_of(job->kubelet_socket, &now) ||
            !gs__dp_file_id_same(&now, &job->kubelet_id)) {
            it->stale = true;
            it->status = GS_GRPC_UNAVAILABLE;
            (void)snprintf(it->message, sizeof it->message, "kubelet.sock was replaced");
            continue;
        }
        V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
        V1beta1__DevicePluginOptions opt = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        opt.pre_start_required = 1;
        opt.get_preferred_allocation_available = 1;
        req.version = (char *)"v1beta1";
        req.endpoint = it->endpoint;
        req.resource_name = it->resource;
        req.options = &opt;
        struct gs_grpc_result res;
        int rc = gs_grpc_call_message(job->kubelet_socket, "/v1beta1.Registration/Register",
                                      &req.base, REGISTER_TIMEOUT_MS, &res);
        if (rc != GS_OK) {
            it->status = GS_GRPC_INTERNAL;
            (void)snprintf(it->message, sizeof it->message, "%s", gs_strerror(rc));
        } else {
            it->status = res.status;
            (void)snprintf(it->message, sizeof it->message, "%s",
                           res.message != NULL ? res.message : "");
        }
        gs_grpc_result_fini(&res);
    }
}

static bool ours(const struct gs__dp_podres_job *job, const char *resource)
{
    for (uint32_t i = 0; i < job->n_resources; i++)
        if (strcmp(job->resources[i], resource) == 0)
            return true;
    return false;
}

void gs__dp_podres_job(void *arg)
{
    struct gs__dp_podres_job *job = arg;
    job->n_attr = 0;
    job->truncated = false;
    job->message[0] = '\0';
    V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    struct gs_grpc_result res;
    int rc = gs_grpc_call_message(job->socket, "/v1.PodResourcesLister/List", &req.base,
                                  LIST_TIMEOUT_MS, &res);
    if (rc != GS_OK) {
        job->status = GS_GRPC_INTERNAL;
        (void)snprintf(job->message, sizeof job->message, "%s", gs_strerror(rc));
        return;
    }
    job->status = res.status;
    if (res.status != GS_GRPC_OK) {
        (void)snprintf(job->message, sizeof job->message, "%s",
                       res.message != NULL ? res.message : "");
        gs_grpc_result_fini(&res);
        return;
    }
    ProtobufCMessage *m = NULL;
    if (gs_grpc_unpack(&v1__list_pod_resources_response__descriptor, res.data, res.len, &m) !=
        GS_OK) {
        job->status = GS_GRPC_INTERNAL;
        (void)snprintf(job->message, sizeof job->message,
                       "kubelet's answer is not a ListPodResourcesResponse");
        gs_grpc_result_fini(&res);
        return;
    }
    V1__ListPodResourcesResponse *l = (V1__ListPodResourcesResponse *)m;
    for (size_t p = 0; p < l->n_pod_resources; p++) {
        const V1__PodResources *pod = l->pod_resources[p];
        for (size_t c = 0; c < pod->n_containers; c++) {
            const V1__ContainerResources *ctr = pod->containers[c];
            for (size_t d = 0; d < ctr->n_devices; d++) {
                const V1__ContainerDevices *cd = ctr->devices[d];
                if (!ours(job, cd->resource_name))
                    continue;
                for (size_t k = 0; k < cd->n_device_ids; k++) {
                    if (job->n_attr == GS_EXPORTER_ATTR_MAX) {
                        job->truncated = true;
                        continue;
                    }
                    struct gs_exporter_attr *a = &job->attr[job->n_attr++];
                    (void)snprintf(a->device_id, sizeof a->device_id, "%s", cd->device_ids[k]);
                    (void)snprintf(a->pod, sizeof a->pod, "%s", pod->name);
                    (void)snprintf(a->namespace_name, sizeof a->namespace_name, "%s",
                                   pod->namespace_);
                    (void)snprintf(a->container, sizeof a->container, "%s", ctr->name);
                }
            }
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    gs_grpc_result_fini(&res);
}
