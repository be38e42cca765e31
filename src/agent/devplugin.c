/*
 * The node agent's device plugin daemon (contract in include/gpusched/devplugin.h; the
 * kubelet side in docs/kubernetes-contracts.md section 3.1).
 *
 * One thread runs one poll() loop over: the gRPC servers (one UNIX socket per advertised
 * resource), an inotify watch on the device-plugin directory, an eventfd that stop requests
 * and the two helper threads (devplugin_kubelet.c) write to, and timers kept as deadlines on
 * the monotonic clock (backend event poll, health probes, metrics refresh, registration
 * retries, re-watching a directory that went away). Handlers answer from the pure functions
 * of devplugin_rpc.c, so the loop only moves bytes and state.
 *
 * Kubelet restarts are detected by state, not by trusting single events: any change in the
 * directory leads to checking that each of our socket files is still the one we bound (same
 * device and inode) and re-creating those that are not; a new kubelet.sock (IN_CREATE or
 * IN_MOVED_TO) asks for registration now. Registration is by identity: each resource remembers
 * the kubelet.sock file (device, inode, change time) its current socket was last registered
 * with, and needs a Register exactly when that is not the file the path names now; the
 * registration thread checks the file again just before each call. So a kubelet restart
 * during a Register in flight is never mistaken for success, and a kubelet is registered with
 * once whatever order inotify reports its socket and the deletion of ours in.
 *
 * Health: backend events go into the gs_health machine; after every loop round the GPUs'
 * states are compared with what the streams were last sent, and every resource with a device
 * on a changed GPU sends its full list to all its open ListAndWatch streams.
 *
 * Rediscovery (devplugin_rediscover.c, sharing this file's state through devplugin_agent.h) is
 * one more timer of the loop: it re-reads the GPUs and, on a changed MIG layout, swaps the model
 * in two steps; socket positions stay, so the servers' callbacks keep their res_rt.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/devplugin.h"

#include "gpusched/compiler.h"
#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/exporter.h"
#include "gpusched/grpc.h"
#include "gpusched/podmap.h"

#include "devplugin_agent.h"
#include "devplugin_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/** Period of polling the backend for XID/ECC events, ms. */
#define EVENT_POLL_MS 100
/** Most backend events handled per poll (the rest wait for the next one). */
#define EVENTS_PER_POLL 256
/** First and largest wait between failed registrations, ms. */
#define REGISTER_BACKOFF_MIN_MS 100
#define REGISTER_BACKOFF_MAX_MS 5000
/** Wait before asking again when kubelet.sock does not exist, ms (inotify usually wins). */
#define REGISTER_NO_KUBELET_MS 1000
/** Period of re-watching a vanished directory and re-creating sockets that failed, ms. */
#define RECOVER_MS 100
/** Longest single poll() wait, ms. */
#define POLL_MAX_MS 1000

/*
 * Copies src to dst[cap] with every byte below 0x20 and 0x7f written as \xNN, so that text a
 * client chose (a device ID with a line feed) cannot forge a log line (issue 9).
 */
static void escape_line(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p != '\0' && k + 5 < cap; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            dst[k++] = '\\';
            dst[k++] = 'x';
            dst[k++] = hex[*p >> 4];
            dst[k++] = hex[*p & 15];
        } else {
            dst[k++] = (char)*p;
        }
    }
    dst[k] = '\0';
}

void gs__dp_logf(struct gs_dp_agent *a, const char *fmt, ...)
{
    char line[2048], safe[4 * sizeof line];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    escape_line(safe, sizeof safe, line);
    (a->log != NULL ? a->log : gs_log_stderr_plain)(a->log_ctx, safe);
}

/*
 * Lines a local client can cause (refused calls, connections it opens, closes or breaks, its
 * streams) go through a budget: CLIENT_LOG_BURST lines, refilled at CLIENT_LOG_PER_S a second;
 * past it lines are counted, and the count is logged once the budget allows again. Before, a
 * refused client could write 73 MB of log in 10 s (issue 9).
 */
#define CLIENT_LOG_BURST 50
#define CLIENT_LOG_PER_S 10

GS_PRINTF(2, 3)
static void client_logf(struct gs_dp_agent *a, const char *fmt, ...)
{
    int64_t now = gs__dp_now_ms(a);
    if (a->client_log_ms == 0) {
        a->client_log_tokens = CLIENT_LOG_BURST;
        a->client_log_ms = now;
    }
    int64_t refill = (now - a->client_log_ms) * CLIENT_LOG_PER_S / 1000;
    if (refill > 0) {
        a->client_log_tokens += refill;
        if (a->client_log_tokens > CLIENT_LOG_BURST)
            a->client_log_tokens = CLIENT_LOG_BURST;
        a->client_log_ms = now;
    }
    if (a->client_log_tokens <= 0) {
        a->client_log_dropped++;
        return;
    }
    a->client_log_tokens--;
    if (a->client_log_dropped > 0) {
        gs__dp_logf(a, "(%" PRIu64 " more lines about clients left out: too many)",
                    a->client_log_dropped);
        a->client_log_dropped = 0;
    }
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    gs__dp_logf(a, "%s", line);
}

/*
 * Copies a string into dst[cap], truncating. Used where source and destination are parts of
 * one struct, which snprintf's restrict check cannot tell apart.
 */
void gs__dp_scopy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memmove(dst, src, n);
    dst[n] = '\0';
}

/* dst = "<dir>/<name>"; false when it does not fit in cap or in a socket address. */
bool gs__dp_join_path(char *dst, size_t cap, const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    if (dl + 1 + nl >= cap || dl + 1 + nl > SOCKET_PATH_MAX)
        return false;
    memmove(dst, dir, dl);
    dst[dl] = '/';
    memmove(dst + dl + 1, name, nl);
    dst[dl + 1 + nl] = '\0';
    return true;
}

int64_t gs__dp_now_ms(struct gs_dp_agent *a)
{
    return a->clock.now_ms(a->clock.ctx);
}

/* ---- ListAndWatch streams ------------------------------------------------------------------ */

/* The view's claim callback: the assignment table, under the Kubernetes side's lock. */
static int claim_of(void *ctx, const char *resource, uint32_t count, struct gs_dp_claim *out)
{
    struct gs_dp_agent *a = ctx;
    struct gs_dp_assign *t = gs__dp_kube_lock(a->kube);
    int rc = gs_dp_assign_match(t, resource, count, out);
    gs__dp_kube_unlock(a->kube);
    return rc;
}

static void publish_metrics(struct gs_dp_agent *a);

/* What became of a claim: logged, counted, and for Allocate its GPUs handed out. */
static void on_claim(void *ctx, const struct gs_dp_claim_outcome *o)
{
    struct gs_dp_agent *a = ctx;
    const struct gs_dp_claim *c = o->claim;
    if (c == NULL) {
        /* Slices no assignment asks for: the GPU of the slices kubelet handed (the safe choice:
         * kubelet accounted them, and nothing says another GPU is meant). */
        gs__dp_logf(a, "Allocate of %s: warning: %s; giving the GPUs of these slices", o->ids,
                    o->why);
        return;
    }
    char gpus[GS_DP_ASSIGN_GPUS_MAX * (GS_GPU_PROFILE_LEN + 32)];
    gs__dp_claim_units(c, gpus, sizeof gpus);
    if (!o->allocate) {
        if (o->honoured) {
            gs__dp_logf(a, "GetPreferredAllocation for pod %s: the scheduler's GPUs %s (%s)",
                        c->pod, gpus, o->ids);
        } else {
            a->assign_fallbacks++;
            gs__dp_logf(a,
                        "GetPreferredAllocation for pod %s: not the scheduler's GPUs %s: %s; "
                        "proposing %s",
                        c->pod, gpus, o->why, o->ids);
        }
        publish_metrics(a);
        return;
    }
    if (o->honoured) {
        a->assign_as_assigned++;
        gs__dp_logf(a, "Allocate for pod %s: %s, the GPUs %s the scheduler assigned", c->pod,
                    o->ids, gpus);
    } else if (o->gave_assigned) {
        a->assign_mismatch++;
        gs__dp_logf(a,
                    "Allocate for pod %s: mismatch: %s; giving the assigned GPUs %s (kubelet's %s)",
                    c->pod, o->why, gpus, o->ids);
    } else {
        a->assign_mismatch++;
        gs__dp_logf(a, "Allocate for pod %s: mismatch: %s; following kubelet (%s)", c->pod, o->why,
                    o->ids);
    }
    struct gs_dp_assign *t = gs__dp_kube_lock(a->kube);
    uint32_t given = 0;
    int rc = gs_dp_assign_consume(t, c->uid, c->n_gpus, &given);
    gs__dp_kube_unlock(a->kube);
    /* On the pod too, so that a restarted agent does not claim these GPUs again. */
    if (rc == GS_OK && gs__dp_kube_mark(a->kube, c->pod, given) != GS_OK)
        gs__dp_logf(a, "Allocate for pod %s: too many pod annotations waiting; %s not written",
                    c->pod, GS_DP_ALLOCATED_ANNOTATION);
    publish_metrics(a);
}

static struct gs_dp_view view_of(struct res_rt *r)
{
    struct gs_dp_view v = {&r->a->cfg, &r->a->model, r->index, r->a->state, NULL, NULL, NULL};
    if (r->a->kube != NULL) {
        v.claim = claim_of;
        v.on_claim = on_claim;
        v.claim_ctx = r->a;
    }
    return v;
}

static void stream_drop(struct res_rt *r, struct gs_grpc_stream *s)
{
    for (size_t i = 0; i < r->n_streams; i++)
        if (r->streams[i] == s) {
            r->streams[i] = r->streams[--r->n_streams];
            return;
        }
}

/* Sends bytes to one stream; a peer that stopped reading loses its stream. */
static void stream_push(struct res_rt *r, struct gs_grpc_stream *s, const uint8_t *data, size_t len)
{
    int rc = gs_grpc_stream_send(s, data, len);
    if (rc == GS_ELIMIT) {
        gs__dp_logf(r->a, "%s: ListAndWatch peer is not reading; ending its stream",
                    r->a->model.resources[r->index].name);
        (void)gs_grpc_stream_finish(s, GS_GRPC_RESOURCE_EXHAUSTED, "peer not reading");
    }
    /* GS_EIO: the stream is already gone and its close callback comes next. */
}

void gs__dp_broadcast(struct res_rt *r)
{
    if (r->n_streams == 0)
        return;
    struct gs_dp_view v = view_of(r);
    struct gs_dp_answer ans;
    if (gs_dp_handle_list(&v, &ans) != GS_OK || ans.status != GS_GRPC_OK) {
        gs__dp_logf(r->a, "%s: cannot build the device list", r->a->model.resources[r->index].name);
        gs_dp_answer_fini(&ans);
        return;
    }
    /* A push may end a stream, which only takes effect in a later run_once: safe to loop. */
    for (size_t i = 0; i < r->n_streams; i++)
        stream_push(r, r->streams[i], ans.data, ans.len);
    gs_dp_answer_fini(&ans);
}

static void on_law_open(void *user, const uint8_t *req, size_t req_len,
                        struct gs_grpc_stream *stream)
{
    (void)req;
    (void)req_len; /* Empty: any bytes decode (unknown fields are skipped) */
    struct res_rt *r = user;
    const char *name = r->a->model.resources[r->index].name;
    struct gs_dp_view v = view_of(r);
    struct gs_dp_answer ans;
    if (gs_dp_handle_list(&v, &ans) != GS_OK || ans.status != GS_GRPC_OK) {
        gs_dp_answer_fini(&ans);
        (void)gs_grpc_stream_finish(stream, GS_GRPC_INTERNAL, "cannot build the device list");
        return;
    }
    if (r->n_streams == r->cap_streams) {
        size_t cap = r->cap_streams ? 2 * r->cap_streams : 4;
        struct gs_grpc_stream **p = realloc(r->streams, cap * sizeof(struct gs_grpc_stream *));
        if (p == NULL) {
            gs_dp_answer_fini(&ans);
            (void)gs_grpc_stream_finish(stream, GS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        r->streams = p;
        r->cap_streams = cap;
    }
    r->streams[r->n_streams++] = stream;
    stream_push(r, stream, ans.data, ans.len);
    gs_dp_answer_fini(&ans);
    client_logf(r->a, "%s: ListAndWatch opened (%zu open), sent %u devices", name, r->n_streams,
                (unsigned)r->a->model.resources[r->index].n_devices);
}

static void on_law_close(void *user, struct gs_grpc_stream *stream, int reason)
{
    struct res_rt *r = user;
    stream_drop(r, stream);
    if (reason != GS_GRPC_CLOSE_SHUTDOWN)
        client_logf(r->a, "%s: ListAndWatch closed (%s; %zu open)",
                    r->a->model.resources[r->index].name,
                    reason == GS_GRPC_CLOSE_CANCELLED      ? "cancelled by the peer"
                    : reason == GS_GRPC_CLOSE_DISCONNECTED ? "peer disconnected"
                                                           : "finished",
                    r->n_streams);
}

/* ---- unary methods ---------------------------------------------------------------------- */

static void reply_answer(struct gs_grpc_reply *reply, int rc, struct gs_dp_answer *ans)
{
    if (rc != GS_OK)
        (void)gs_grpc_reply_error(reply, GS_GRPC_INTERNAL, gs_strerror(rc));
    else if (ans->status != GS_GRPC_OK)
        (void)gs_grpc_reply_error(reply, ans->status, ans->message);
    else if (gs_grpc_reply_bytes(reply, ans->data, ans->len) != GS_OK)
        (void)gs_grpc_reply_error(reply, GS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    gs_dp_answer_fini(ans);
}

static void on_options(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    (void)user;
    (void)req;
    (void)len;
    struct gs_dp_answer ans;
    int rc = gs_dp_handle_options(&ans);
    reply_answer(reply, rc, &ans);
}

static void on_preferred(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    struct res_rt *r = user;
    struct gs_dp_view v = view_of(r);
    struct gs_dp_answer ans;
    int rc = gs_dp_handle_preferred(&v, req, len, &ans);
    if (rc == GS_OK && ans.status != GS_GRPC_OK)
        client_logf(r->a, "%s: GetPreferredAllocation refused: %s",
                    r->a->model.resources[r->index].name, ans.message);
    reply_answer(reply, rc, &ans);
}

static void on_allocate(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    struct res_rt *r = user;
    struct gs_dp_view v = view_of(r);
    struct gs_dp_answer ans;
    int rc = gs_dp_handle_allocate(&v, req, len, &ans);
    if (rc == GS_OK && ans.status != GS_GRPC_OK)
        client_logf(r->a, "%s: Allocate refused: %s: %s", r->a->model.resources[r->index].name,
                    gs_grpc_status_name(ans.status), ans.message);
    reply_answer(reply, rc, &ans);
}

static void on_prestart(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    (void)user;
    struct gs_dp_answer ans;
    int rc = gs_dp_handle_prestart(req, len, &ans);
    reply_answer(reply, rc, &ans);
}

static void on_rpc_log(void *user, const char *line)
{
    struct res_rt *r = user;
    /* The server's lines already start with "grpc: ". */
    const char *tag = strncmp(line, "grpc: ", 6) == 0 ? "" : "grpc: ";
    client_logf(r->a, "%s: %s%s", r->a->model.resources[r->index].name, tag, line);
}

/* ---- sockets ------------------------------------------------------------------------------ */

void gs__dp_res_stop(struct res_rt *r)
{
    gs_grpc_server_free(r->srv); /* close callbacks empty r->streams */
    r->srv = NULL;
    r->ino = 0;
}

/* Creates the server and listens; on failure the resource stays down (srv NULL). */
int gs__dp_res_start(struct gs_dp_agent *a, struct res_rt *r)
{
    const char *name = a->model.resources[r->index].name;
    struct gs_grpc_server *srv = NULL;
    int rc = gs_grpc_server_new(&srv);
    if (rc != GS_OK)
        goto fail;
    gs_grpc_server_set_log(srv, on_rpc_log, r);
    rc = gs_grpc_server_add_unary(srv, "/v1beta1.DevicePlugin/GetDevicePluginOptions", on_options,
                                  r);
    if (rc == GS_OK)
        rc = gs_grpc_server_add_stream(srv, "/v1beta1.DevicePlugin/ListAndWatch", on_law_open,
                                       on_law_close, r);
    if (rc == GS_OK)
        rc = gs_grpc_server_add_unary(srv, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                                      on_preferred, r);
    if (rc == GS_OK)
        rc = gs_grpc_server_add_unary(srv, "/v1beta1.DevicePlugin/Allocate", on_allocate, r);
    if (rc == GS_OK)
        rc = gs_grpc_server_add_unary(srv, "/v1beta1.DevicePlugin/PreStartContainer", on_prestart,
                                      r);
    if (rc == GS_OK)
        rc = gs_grpc_server_listen(srv, r->path);
    struct stat st;
    memset(&st, 0, sizeof st);
    if (rc == GS_OK && stat(r->path, &st) != 0)
        rc = GS_EIO;
    if (rc != GS_OK)
        goto fail;
    r->srv = srv;
    r->dev = st.st_dev;
    r->ino = st.st_ino;
    r->reg_ok = false; /* a new socket: kubelet has to be told of it */
    r->said_fail = false;
    /* A new socket is registered at once, whatever backoff earlier failures left. */
    a->next_register_ms = gs__dp_now_ms(a);
    a->register_backoff_ms = REGISTER_BACKOFF_MIN_MS;
    gs__dp_logf(a, "%s: serving %u devices on %s", name,
                (unsigned)a->model.resources[r->index].n_devices, r->path);
    return GS_OK;
fail:
    gs_grpc_server_free(srv);
    if (!r->said_fail && rc == GS_EEXIST)
        gs__dp_logf(a,
                    "%s: cannot serve on %s: another process serves it (a second agent?) or it is "
                    "not a socket (retrying)",
                    name, r->path);
    else if (!r->said_fail)
        gs__dp_logf(a, "%s: cannot serve on %s: %s (retrying)", name, r->path, gs_strerror(rc));
    r->said_fail = true;
    if (a->next_recover_ms == INT64_MAX)
        a->next_recover_ms = gs__dp_now_ms(a) + RECOVER_MS;
    return rc;
}

/* Whether the socket file at the path is still the one we bound. */
static bool res_socket_ok(const struct res_rt *r)
{
    struct stat st;
    return r->srv != NULL && stat(r->path, &st) == 0 && S_ISSOCK(st.st_mode) &&
           st.st_dev == r->dev && st.st_ino == r->ino;
}

/* Re-creates every socket that is missing or replaced. */
static void check_sockets(struct gs_dp_agent *a)
{
    for (uint32_t i = 0; i < a->model.n_resources; i++) {
        struct res_rt *r = &a->res[i];
        if (res_socket_ok(r))
            continue;
        if (r->srv != NULL)
            gs__dp_logf(a, "%s: socket %s was removed (kubelet restart?); serving again",
                        a->model.resources[i].name, r->path);
        gs__dp_res_stop(r);
        (void)gs__dp_res_start(a, r);
    }
}

/*
 * A (new) kubelet.sock: register now, without the backoff of earlier failures. Which
 * resources need it is decided in maybe_register by the identity of the file, not here, so
 * that the order in which inotify reports deletions and creations does not matter.
 */
static void kubelet_appeared(struct gs_dp_agent *a)
{
    a->next_register_ms = gs__dp_now_ms(a);
    a->register_backoff_ms = REGISTER_BACKOFF_MIN_MS;
    a->said_no_kubelet = false;
}

/*
 * An operator's word that GPUs are fine (after a manual reset, say): the file
 * GS_DP_CLEAR_HEALTH_FILE in the device plugin directory (only root on the node can write
 * there) names them, by index or UUID, or "all"; each Unhealthy one is Healthy again at once
 * (reason cleared, logged by the health machine), and the file is removed.
 */
static void clear_health(struct gs_dp_agent *a)
{
    char path[GS_DP_PATH_LEN + 32];
    if (!gs__dp_join_path(path, sizeof path, a->cfg.plugin_dir, GS_DP_CLEAR_HEALTH_FILE))
        return;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return; /* removed already (by us: the IN_DELETE of our own unlink) */
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    (void)fclose(f);
    (void)unlink(path);
    text[n] = '\0';
    uint32_t cleared = 0, named = 0;
    for (char *save = NULL, *tok = strtok_r(text, " \t\r\n,", &save); tok != NULL;
         tok = strtok_r(NULL, " \t\r\n,", &save)) {
        bool all = strcmp(tok, "all") == 0, found = all;
        for (uint32_t g = 0; g < a->model.n_gpus; g++) {
            char idx[16];
            (void)snprintf(idx, sizeof idx, "%u", (unsigned)g);
            const char *uuid = a->xgpus[g].info.uuid;
            if (all || strcmp(tok, idx) == 0 || (uuid[0] != '\0' && strcmp(tok, uuid) == 0)) {
                found = true;
                named++;
                if (gs_health_clear(a->health, g) == 1)
                    cleared++;
            }
        }
        if (!found)
            gs__dp_logf(a, "%s: no GPU '%s' here; ignored", GS_DP_CLEAR_HEALTH_FILE, tok);
    }
    gs__dp_logf(a, "%s: %u GPU(s) named, %u were Unhealthy and are Healthy now",
                GS_DP_CLEAR_HEALTH_FILE, (unsigned)named, (unsigned)cleared);
}

static int watch_dir(struct gs_dp_agent *a)
{
    a->wd = inotify_add_watch(a->ino_fd, a->cfg.plugin_dir,
                              IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                                  IN_MOVE_SELF | IN_CLOSE_WRITE | IN_ONLYDIR);
    return a->wd >= 0 ? GS_OK : GS_EIO;
}

static void handle_inotify(struct gs_dp_agent *a)
{
    /* Aligned for struct inotify_event, as inotify(7) shows. */
    _Alignas(struct inotify_event) char buf[8192];
    bool sockets = false, kubelet = false, lost = false, clear = false;
    for (;;) {
        ssize_t n = read(a->ino_fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                sockets = kubelet = true;
                continue;
            }
            if (ev->wd != a->wd)
                continue;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                lost = true;
                continue;
            }
            if (ev->len == 0)
                continue;
            if (strcmp(ev->name, "kubelet.sock") == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                kubelet = true;
            if (strcmp(ev->name, GS_DP_CLEAR_HEALTH_FILE) == 0 &&
                (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
                clear = true;
            if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
                sockets = true;
        }
    }
    if (lost && a->wd >= 0) {
        gs__dp_logf(a, "the directory %s went away; waiting for it", a->cfg.plugin_dir);
        (void)inotify_rm_watch(a->ino_fd, a->wd);
        a->wd = -1;
        a->next_recover_ms = gs__dp_now_ms(a);
    }
    if (sockets || kubelet)
        check_sockets(a);
    if (kubelet) {
        gs__dp_logf(a, "kubelet.sock appeared: registering again");
        kubelet_appeared(a);
    }
    if (clear)
        clear_health(a);
}

/* Timer: re-watch a directory that went away, retry sockets that could not be created. */
static void recover(struct gs_dp_agent *a)
{
    a->next_recover_ms = INT64_MAX;
    if (a->wd < 0) {
        if (watch_dir(a) != GS_OK) {
            a->next_recover_ms = gs__dp_now_ms(a) + RECOVER_MS;
            return;
        }
        gs__dp_logf(a, "watching %s again", a->cfg.plugin_dir);
        check_sockets(a);
        if (access(a->kubelet_sock, F_OK) == 0)
            kubelet_appeared(a);
        return;
    }
    check_sockets(a); /* schedules another round itself if a socket still fails */
}

/* ---- registration --------------------------------------------------------------------------- */

/*
 * Whether resource r must be registered with the kubelet whose socket is kid: its socket is up
 * and no Register of this socket has succeeded with this kubelet.sock. Exactly one Register
 * per (kubelet.sock, socket of ours) pair: kubelet keeps every client it was given, and when an
 * older one's stream ends it drops the current one (issue 9), so a second Register to the same
 * kubelet is not harmless.
 */
static bool needs_register(const struct res_rt *r, const struct gs__dp_file_id *kid)
{
    return r->srv != NULL && (!r->reg_ok || !gs__dp_file_id_same(&r->reg_kubelet, kid));
}

static void maybe_register(struct gs_dp_agent *a, int64_t now)
{
    if (now < a->next_register_ms || gs__dp_worker_busy(a->reg_worker))
        return;
    struct gs__dp_file_id kid;
    bool have_kubelet = gs__dp_file_id_of(a->kubelet_sock, &kid);
    struct gs__dp_reg_job *job = &a->reg_job;
    job->n = 0;
    for (uint32_t i = 0; i < a->model.n_resources; i++) {
        struct res_rt *r = &a->res[i];
        if (r->srv == NULL || (have_kubelet && !needs_register(r, &kid)) ||
            (!have_kubelet && r->reg_ok))
            continue;
        struct gs__dp_reg_item *it = &job->items[job->n++];
        memset(it, 0, sizeof *it);
        it->index = i;
        it->sock.dev = (uint64_t)r->dev;
        it->sock.ino = (uint64_t)r->ino;
        gs__dp_scopy(it->resource, sizeof it->resource, a->model.resources[i].name);
        gs__dp_scopy(it->endpoint, sizeof it->endpoint, a->model.resources[i].endpoint);
    }
    if (job->n == 0)
        return;
    if (!have_kubelet) {
        if (!a->said_no_kubelet)
            gs__dp_logf(a, "waiting for kubelet: %s does not exist", a->kubelet_sock);
        a->said_no_kubelet = true;
        a->next_register_ms = now + REGISTER_NO_KUBELET_MS;
        return;
    }
    a->said_no_kubelet = false;
    job->kubelet_id = kid;
    gs__dp_scopy(job->kubelet_socket, sizeof job->kubelet_socket, a->kubelet_sock);
    if (gs__dp_worker_submit(a->reg_worker, job) != GS_OK)
        return;
}

/* Whether some resource may need a Register (for the loop's wait). */
static bool register_pending(const struct gs_dp_agent *a)
{
    struct gs__dp_file_id kid;
    bool have_kubelet = gs__dp_file_id_of(a->kubelet_sock, &kid);
    for (uint32_t i = 0; i < a->model.n_resources; i++)
        if (have_kubelet ? needs_register(&a->res[i], &kid)
                         : a->res[i].srv != NULL && !a->res[i].reg_ok)
            return true;
    return false;
}

static void register_done(struct gs_dp_agent *a, struct gs__dp_reg_job *job)
{
    bool failed = false;
    for (uint32_t i = 0; i < job->n; i++) {
        const struct gs__dp_reg_item *it = &job->items[i];
        struct res_rt *r = &a->res[it->index];
        if (it->stale) {
            continue; /* a new kubelet.sock: its own batch follows at once */
        } else if (it->status == GS_GRPC_OK) {
            /* Counted for the socket it named; a socket made since needs its own Register. */
            if (r->srv != NULL && (uint64_t)r->dev == it->sock.dev &&
                (uint64_t)r->ino == it->sock.ino) {
                r->reg_ok = true;
                r->reg_kubelet = job->kubelet_id;
            }
            gs__dp_logf(a, "%s: registered with kubelet (endpoint %s)", it->resource, it->endpoint);
        } else {
            failed = true;
            gs__dp_logf(a, "%s: Register failed: %s: %s", it->resource,
                        gs_grpc_status_name(it->status), it->message);
        }
    }
    int64_t now = gs__dp_now_ms(a);
    if (failed) {
        a->next_register_ms = now + a->register_backoff_ms;
        a->register_backoff_ms *= 2;
        if (a->register_backoff_ms > REGISTER_BACKOFF_MAX_MS)
            a->register_backoff_ms = REGISTER_BACKOFF_MAX_MS;
    } else {
        a->register_backoff_ms = REGISTER_BACKOFF_MIN_MS;
    }
}

/* ---- health ------------------------------------------------------------------------------ */

static int probe_gpu(void *ctx, uint32_t gpu, uint64_t *resets)
{
    struct gs_dp_agent *a = ctx;
    struct gs_gpu_sample s;
    int rc = gs_gpu_sample(a->backend, gpu, &s);
    if (rc == GS_OK)
        *resets = s.resets;
    return rc;
}

static void on_transition(void *ctx, const struct gs_health_transition *t)
{
    gs__dp_logf((struct gs_dp_agent *)ctx, "health: %s", t->text);
}

static void poll_events(struct gs_dp_agent *a)
{
    for (int i = 0; i < EVENTS_PER_POLL; i++) {
        struct gs_gpu_event ev;
        int rc = gs_gpu_wait_event(a->backend, 0, &ev);
        if (rc == GS_ENOENT)
            break;
        if (rc != GS_OK) {
            /* A driver that keeps failing the wait would log ten lines a second: the first
             * of a run is logged, repeats are counted and told when the text changes. */
            const char *why = gs_gpu_last_error(a->backend);
            if (strcmp(why, a->event_err) == 0) {
                a->event_err_repeats++;
                break;
            }
            if (a->event_err_repeats > 0)
                gs__dp_logf(a, "backend events: the last error repeated %" PRIu64 " more time(s)",
                            a->event_err_repeats);
            gs__dp_logf(a, "backend events: %s: %s", gs_strerror(rc), why);
            gs__dp_scopy(a->event_err, sizeof a->event_err, why);
            a->event_err_repeats = 0;
            break;
        }
        char which[32];
        if (ev.gpu_index == GS_GPU_INDEX_ALL)
            (void)snprintf(which, sizeof which, "all GPUs");
        else
            (void)snprintf(which, sizeof which, "GPU %u", (unsigned)ev.gpu_index);
        if (ev.kind == GS_GPU_EVENT_XID)
            gs__dp_logf(a, "event: %s: XID %" PRIu64 "%s", which, ev.xid,
                        gs_health_xid_ignored(&a->cfg.health, ev.xid) ? " (ignored)" : "");
        else if (ev.kind == GS_GPU_EVENT_LOST)
            gs__dp_logf(a, "event: %s: GPU is lost (the event wait says so)", which);
        else
            gs__dp_logf(a, "event: %s: double-bit ECC error", which);
        if (gs_health_on_event(a->health, &ev) != GS_OK)
            gs__dp_logf(a, "event for %s ignored: no such GPU", which);
    }
}

/*
 * Hands the inventory to the Kubernetes side when it differs from the last one. Not between a
 * rediscovery's two steps: the withdrawal model is no layout of the node; the advertisement
 * 200 ms later publishes the new one.
 */
void gs__dp_publish_inventory(struct gs_dp_agent *a)
{
    if (a->kube == NULL || a->have_pending)
        return;
    char *text = NULL;
    int rc = gs_dp_inventory_json(&a->model, a->state, &text);
    if (rc != GS_OK) {
        gs__dp_logf(a, "inventory: cannot build it: %s", gs_strerror(rc));
        return;
    }
    if (a->inventory != NULL && strcmp(a->inventory, text) == 0) {
        free(text);
        return;
    }
    if (gs__dp_kube_publish(a->kube, text) != GS_OK) {
        gs__dp_logf(a, "inventory: out of memory");
        free(text);
        return;
    }
    free(a->inventory);
    a->inventory = text;
    /* A MIG GPU the core's geometry refuses is published as seen, and the scheduler will keep
     * pods off it: say so here too, with the scheduler's reason, once per change. */
    for (uint32_t g = 0; g < a->model.n_gpus; g++) {
        struct gs_gpu_mode mode;
        char why[200];
        if (gs_dp_gpu_mode(&a->model, g, &mode, why, sizeof why) == GS_OK && why[0] != '\0')
            gs__dp_logf(a, "inventory: GPU %u: %s; the scheduler will not place on it", (unsigned)g,
                        why);
    }
}

/* Sends the full list to every stream of every resource touched by a health change. */
static void publish_health(struct gs_dp_agent *a)
{
    uint64_t changed = 0;
    for (uint32_t g = 0; g < a->model.n_gpus; g++) {
        enum gs_health_state s = gs_health_state(a->health, g);
        if (s != a->state[g]) {
            a->state[g] = s;
            changed |= UINT64_C(1) << g;
        }
    }
    if (changed == 0)
        return;
    for (uint32_t i = 0; i < a->model.n_resources; i++) {
        struct res_rt *r = &a->res[i];
        if (!(r->gpu_mask & changed))
            continue;
        const struct gs_dp_resource *mr = &a->model.resources[i];
        uint32_t bad = 0;
        for (uint32_t d = 0; d < mr->n_devices; d++)
            bad += a->state[mr->devices[d].gpu] != GS_HEALTH_HEALTHY ? 1u : 0u;
        gs__dp_logf(a,
                    "%s: health changed: %u of %u devices Unhealthy; sending the list to %zu "
                    "stream(s)",
                    mr->name, (unsigned)bad, (unsigned)mr->n_devices, r->n_streams);
        gs__dp_broadcast(r);
    }
    gs__dp_publish_inventory(a);
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void publish_metrics(struct gs_dp_agent *a)
{
    if (a->exporter == NULL)
        return;
    struct gs_exporter_snapshot s;
    memset(&s, 0, sizeof s);
    gs__dp_scopy(s.hostname, sizeof s.hostname, a->node_name);
    s.n_gpus = a->model.n_gpus;
    s.gpus = a->xgpus;
    s.n_attr = a->n_attr;
    s.attr = a->attr;
    s.n_podval = a->n_podval;
    s.podval = a->podval;
    s.have_assign = a->kube != NULL;
    s.assign_as_assigned = a->assign_as_assigned;
    s.assign_mismatch = a->assign_mismatch;
    s.assign_fallbacks = a->assign_fallbacks;
    int rc = gs_exporter_update(a->exporter, &s);
    if (rc != GS_OK)
        gs__dp_logf(a, "metrics: cannot update: %s", gs_strerror(rc));
}

/*
 * A GPU lost when the agent started answers again: its facts are read so that the metrics name
 * it. Kubelet's device list was built at start, so a GPU that was left out of it (no UUID
 * then) is advertised only after the agent restarts; the log says so.
 */
static void found_again(struct gs_dp_agent *a, uint32_t g)
{
    struct gs_gpu_info info;
    if (gs_gpu_info(a->backend, g, &info) != GS_OK || info.lost)
        return;
    struct gs_exporter_gpu *x = &a->xgpus[g];
    bool advertised = x->info.uuid[0] != '\0';
    x->info = info;
    if (advertised)
        gs__dp_logf(a, "GPU %u (%s) answers again", (unsigned)g, info.uuid);
    else if (a->cfg.rediscover_ms > 0)
        gs__dp_logf(a, "GPU %u (%s) answers again; the next rediscovery advertises it", (unsigned)g,
                    info.uuid);
    else
        gs__dp_logf(a,
                    "GPU %u (%s) answers again; the agent advertises it after a restart (kubelet's "
                    "device list was built without it)",
                    (unsigned)g, info.uuid);
}

/*
 * Every refresh period: a sample of each GPU, which feeds health too (a GPU that answers no
 * query is Unhealthy even when it sends no XID; one found again after a loss is seen reset),
 * then the metrics snapshot and a PodResources List.
 */
static void refresh_metrics(struct gs_dp_agent *a)
{
    for (uint32_t g = 0; g < a->model.n_gpus; g++) {
        struct gs_exporter_gpu *x = &a->xgpus[g];
        int rc = gs_gpu_sample(a->backend, g, &x->sample);
        x->have_sample = rc == GS_OK;
        /* A MIG device's own values, so that its pods are bounded by it (issue 9). */
        x->n_mig = 0;
        if (rc == GS_OK && x->info.mig_enabled)
            (void)gs_gpu_mig_sample(a->backend, g, x->mig, GS_GPU_MIG_MAX, &x->n_mig);
        (void)gs_health_on_sample(a->health, g, rc, x->sample.resets);
        if (rc == GS_OK && x->info.lost)
            found_again(a, g);
        x->have_health = true;
        x->health = gs_health_state(a->health, g);
        x->health_reason = gs_health_reason_of(a->health, g);
        x->needs_reset = gs_health_needs_reset(a->health, g);
        (void)gs_health_counters(a->health, g, &x->counters);
    }
    if (a->exporter == NULL)
        return;
    /* Per-pod values: each GPU's processes, mapped to pods by their cgroups (issue 9). */
    a->n_podval = 0;
    if (a->podval != NULL && a->cfg.proc_root[0] != '\0') {
        int prc = gs_podmap_collect(a->backend, a->cfg.proc_root, a->xgpus, a->model.n_gpus,
                                    a->podval, GS_EXPORTER_PODVAL_MAX, &a->n_podval);
        if (prc == GS_ELIMIT && !a->said_podval_limit)
            gs__dp_logf(a, "metrics: more than %d pod values on the node; the rest are left out",
                        GS_EXPORTER_PODVAL_MAX);
        a->said_podval_limit = prc == GS_ELIMIT;
        /* The cgroup tells the UID; the API server's pods on this node tell the names. */
        if (a->kube != NULL)
            (void)gs__dp_kube_name_pods(a->kube, a->podval, a->n_podval);
    } else {
        for (uint32_t g = 0; g < a->model.n_gpus; g++)
            a->xgpus[g].have_procs = false;
    }
    publish_metrics(a);
    if (a->cfg.pod_resources_socket[0] != '\0' && !gs__dp_worker_busy(a->pr_worker)) {
        struct gs__dp_podres_job *job = a->pr_job;
        gs__dp_scopy(job->socket, sizeof job->socket, a->cfg.pod_resources_socket);
        job->n_resources = a->model.n_resources;
        for (uint32_t i = 0; i < a->model.n_resources; i++)
            gs__dp_scopy(job->resources[i], sizeof job->resources[i], a->model.resources[i].name);
        (void)gs__dp_worker_submit(a->pr_worker, job);
    }
}

static void podres_done(struct gs_dp_agent *a, struct gs__dp_podres_job *job)
{
    if (job->status != GS_GRPC_OK) {
        if (a->pr_last_status != job->status)
            gs__dp_logf(a, "pod attribution: PodResources List on %s failed: %s: %s", job->socket,
                        gs_grpc_status_name(job->status), job->message);
        a->pr_last_status = job->status;
        return; /* keep the last table: a kubelet restart should not blank the pod labels */
    }
    if (a->pr_last_status != GS_GRPC_OK)
        gs__dp_logf(a, "pod attribution: PodResources List on %s works (%u device IDs)",
                    job->socket, (unsigned)job->n_attr);
    if (job->truncated && a->pr_last_status != GS_GRPC_OK)
        gs__dp_logf(a, "pod attribution: more than %d device IDs; the rest are left out",
                    GS_EXPORTER_ATTR_MAX);
    a->pr_last_status = GS_GRPC_OK;
    memcpy(a->attr, job->attr, job->n_attr * sizeof *a->attr);
    a->n_attr = job->n_attr;
    publish_metrics(a);
}

/* Splits "HOST:PORT" / "[V6]:PORT" / ":PORT" into a numeric host and a port. */
static int parse_addr(const char *s, char *host, size_t cap, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL)
        return GS_EINVAL;
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || p < 0 || p > 65535)
        return GS_EINVAL;
    size_t hl = (size_t)(colon - s);
    const char *h = s;
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
        h = s + 1;
        hl -= 2;
    }
    if (hl >= cap)
        return GS_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (hl == 0)
        (void)snprintf(host, cap, "0.0.0.0");
    else if (strcmp(host, "localhost") == 0)
        (void)snprintf(host, cap, "127.0.0.1");
    *port = (uint16_t)p;
    return GS_OK;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

/*
 * The device node of a GPU is /dev/nvidia<minor>, and the driver's minor number need not be
 * NVML's index (indices follow PCI order, minors the driver's probe order). The driver tells
 * it in /proc/driver/nvidia/gpus/<domain:bus:dev.fn>/information ("Device Minor: N"); where
 * that file is missing (fake GPUs, no driver) the index stands.
 */
static void find_minors(struct gs_dp_agent *a)
{
    for (uint32_t g = 0; g < a->model.n_gpus; g++) {
        const char *pci = a->model.gpus[g].pci_bus_id;
        size_t len = strlen(pci);
        if (len == 0 || len >= GS_GPU_PCI_LEN)
            continue;
        /* NVML writes an 8-digit domain ("00000000:18:00.0"), procfs 4 digits, lower case. */
        const char *colon = strchr(pci, ':');
        if (colon != NULL && colon - pci == 8)
            pci += 4;
        char id[GS_GPU_PCI_LEN];
        size_t i = 0;
        for (; pci[i] != '\0' && i + 1 < sizeof id; i++)
            id[i] = (pci[i] >= 'A' && pci[i] <= 'F') ? (char)(pci[i] - 'A' + 'a') : pci[i];
        id[i] = '\0';
        char path[128];
        (void)snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", id);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        char line[256];
        unsigned minor = 0;
        bool found = false;
        /* The driver's own text; a value out of range is refused below. */
        while (!found && fgets(line, sizeof line, f) != NULL)
            found = sscanf(line, "Device Minor: %u", &minor) == 1; /* NOLINT(cert-err34-c) */
        (void)fclose(f);
        if (found && minor < 1024u) {
            a->model.dev_minor[g] = minor;
            if (minor != g)
                gs__dp_logf(a, "GPU %u is /dev/nvidia%u (driver minor number)", (unsigned)g, minor);
        }
    }
}

static int fail_new(char *err, size_t cap, int rc, const char *fmt, ...) GS_PRINTF(4, 5);

static int fail_new(char *err, size_t cap, int rc, const char *fmt, ...)
{
    if (err != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int gs__dp_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, saved;
    (void)sigfillset(&all);
    (void)pthread_sigmask(SIG_BLOCK, &all, &saved);
    int rc = pthread_create(t, NULL, fn, arg);
    (void)pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return rc;
}

int gs_dp_agent_new(const struct gs_dp_agent_options *opt, struct gs_dp_agent **out, char *err,
                    size_t cap)
{
    struct gs_dp_agent *a = NULL;
    struct gs_gpu_info *infos = NULL;
    int rc = GS_OK;

    if (err != NULL && cap > 0)
        err[0] = '\0';
    if (out == NULL || opt == NULL || opt->cfg == NULL || opt->backend == NULL)
        return fail_new(err, cap, GS_EINVAL, "invalid argument");
    *out = NULL;
    a = calloc(1, sizeof *a);
    if (a == NULL)
        return fail_new(err, cap, GS_ENOMEM, "out of memory");
    a->wake_fd = a->ino_fd = a->wd = -1;
    a->cfg = *opt->cfg;
    a->backend = opt->backend;
    a->clock = gs_clock_monotonic();
    a->log = opt->log;
    a->log_ctx = opt->log_ctx;
    a->pr_last_status = -1;
    a->register_backoff_ms = REGISTER_BACKOFF_MIN_MS;
    a->next_recover_ms = INT64_MAX;
    atomic_init(&a->stop, 0);
    (void)snprintf(a->node_name, sizeof a->node_name, "%s",
                   opt->node_name != NULL ? opt->node_name : "");

    if (!gs__dp_join_path(a->kubelet_sock, sizeof a->kubelet_sock, a->cfg.plugin_dir,
                          "kubelet.sock")) {
        rc = fail_new(err, cap, GS_EINVAL,
                      "device plugin directory %s: socket paths in it "
                      "would be longer than %d bytes",
                      a->cfg.plugin_dir, SOCKET_PATH_MAX);
        goto out;
    }

    uint32_t n = 0;
    rc = gs_gpu_count(a->backend, &n);
    if (rc != GS_OK) {
        rc = fail_new(err, cap, GS_EIO, "cannot count GPUs: %s", gs_gpu_last_error(a->backend));
        goto out;
    }
    infos = calloc(n > 0 ? n : 1, sizeof *infos);
    if (infos == NULL) {
        rc = fail_new(err, cap, GS_ENOMEM, "out of memory");
        goto out;
    }
    /* One GPU that cannot be read does not stop the node: it is not advertised (or, when its
     * UUID is known, advertised Unhealthy), and the others serve (k8s-device-plugin #231). */
    for (uint32_t g = 0; g < n; g++) {
        int irc = gs_gpu_info(a->backend, g, &infos[g]);
        if (irc == GS_OK && !infos[g].lost)
            continue;
        char why[256];
        gs__dp_scopy(why, sizeof why, gs_gpu_last_error(a->backend));
        if (irc != GS_OK) {
            memset(&infos[g], 0, sizeof infos[g]);
            infos[g].index = g;
            infos[g].numa_node = -1;
            infos[g].lost = true;
        }
        infos[g].index = g;
        if (infos[g].uuid[0] == '\0')
            gs__dp_logf(a, "GPU %u is lost at start (%s): not advertised; probing it", (unsigned)g,
                        why);
        else
            gs__dp_logf(a, "GPU %u (%s) is lost at start (%s): advertised Unhealthy; probing it",
                        (unsigned)g, infos[g].uuid, why);
    }
    char merr[512];
    rc = gs_dp_model_build(&a->cfg, infos, n, &a->model, merr, sizeof merr);
    if (rc != GS_OK) {
        rc = fail_new(err, cap, rc == GS_ENOMEM ? GS_ENOMEM : GS_EINVAL, "%s", merr);
        goto out;
    }
    find_minors(a);
    for (uint32_t i = 0; i < a->model.n_resources; i++) {
        if (gs__dp_res_layout(a, i) != GS_OK) {
            rc = fail_new(err, cap, GS_EINVAL, "socket path %s/%s is longer than %d bytes",
                          a->cfg.plugin_dir, a->model.resources[i].endpoint, SOCKET_PATH_MAX);
            goto out;
        }
    }

    struct gs_health_callbacks cb = {.probe = probe_gpu, .log = on_transition, .ctx = a};
    rc = gs_health_new(&a->cfg.health, n, &a->clock, &cb, &a->health);
    if (rc != GS_OK) {
        rc = fail_new(err, cap, rc, "cannot create the health machine: %s", gs_strerror(rc));
        goto out;
    }
    a->state = calloc(n > 0 ? n : 1, sizeof *a->state);
    a->xgpus = calloc(n > 0 ? n : 1, sizeof *a->xgpus);
    a->attr = calloc(GS_EXPORTER_ATTR_MAX, sizeof *a->attr);
    a->podval = calloc(GS_EXPORTER_PODVAL_MAX, sizeof *a->podval);
    a->pr_job = calloc(1, sizeof *a->pr_job);
    if (a->state == NULL || a->xgpus == NULL || a->attr == NULL || a->podval == NULL ||
        a->pr_job == NULL) {
        rc = fail_new(err, cap, GS_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t g = 0; g < n; g++) {
        if (infos[g].lost)
            (void)gs_health_on_sample(a->health, g, GS_EIO, 0);
        a->state[g] = gs_health_state(a->health, g);
        a->xgpus[g].info = infos[g];
    }

    a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->wake_fd < 0) {
        rc = fail_new(err, cap, GS_EIO, "eventfd: %s", strerror(errno));
        goto out;
    }
    if (a->cfg.metrics_addr[0] != '\0') {
        char host[128];
        uint16_t port = 0;
        if (parse_addr(a->cfg.metrics_addr, host, sizeof host, &port) != GS_OK) {
            rc = fail_new(err, cap, GS_EINVAL, "metrics address '%s' is not HOST:PORT",
                          a->cfg.metrics_addr);
            goto out;
        }
        rc = gs_exporter_new(0, &a->exporter);
        if (rc == GS_OK)
            rc = gs_exporter_start(a->exporter, host, port, &a->metrics_port);
        if (rc != GS_OK) {
            const char *why = gs_exporter_error(a->exporter);
            rc = fail_new(err, cap, rc == GS_ENOMEM ? GS_ENOMEM : GS_EIO,
                          "cannot serve metrics on %s: %s", a->cfg.metrics_addr,
                          why[0] != '\0' ? why : gs_strerror(rc));
            goto out;
        }
    }
    if (opt->kube != NULL) {
        if (a->node_name[0] == '\0') {
            rc = fail_new(err, cap, GS_EINVAL,
                          "a Kubernetes configuration needs the node's name (--node-name)");
            goto out;
        }
        rc = gs__dp_kube_new(opt->kube, a->node_name, a->log, a->log_ctx, &a->kube);
        if (rc != GS_OK) {
            rc = fail_new(err, cap, rc, "cannot start the Kubernetes side: %s", gs_strerror(rc));
            goto out;
        }
    }
    *out = a;
    a = NULL;
out:
    free(infos);
    gs_dp_agent_free(a);
    return rc;
}

static void handle_wake(struct gs_dp_agent *a)
{
    uint64_t v;
    while (read(a->wake_fd, &v, sizeof v) > 0) {
    }
    struct gs__dp_reg_job *rj = gs__dp_worker_take(a->reg_worker);
    if (rj != NULL)
        register_done(a, rj);
    struct gs__dp_podres_job *pj = gs__dp_worker_take(a->pr_worker);
    if (pj != NULL)
        podres_done(a, pj);
}

static int64_t min64(int64_t x, int64_t y)
{
    return x < y ? x : y;
}

int gs_dp_agent_run(struct gs_dp_agent *a)
{
    if (a == NULL || a->ran)
        return GS_EINVAL;
    a->ran = true;
    int rc = gs__dp_worker_new(a->wake_fd, gs__dp_register_job, &a->reg_worker);
    if (rc == GS_OK)
        rc = gs__dp_worker_new(a->wake_fd, gs__dp_podres_job, &a->pr_worker);
    if (rc != GS_OK) {
        gs__dp_logf(a, "cannot start helper threads: %s", gs_strerror(rc));
        return rc;
    }
    a->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (a->ino_fd >= 0 && watch_dir(a) != GS_OK && errno == ENOENT) {
        /* A laptop run with --kubelet-dir /tmp/dp: make the directory (its parent must be
         * there) rather than stop; kubelet's own always exists on a node. */
        if (mkdir(a->cfg.plugin_dir, 0755) == 0)
            gs__dp_logf(a, "created the device plugin directory %s (it did not exist)",
                        a->cfg.plugin_dir);
        else
            errno = ENOENT;
    }
    if (a->ino_fd < 0 || (a->wd < 0 && watch_dir(a) != GS_OK)) {
        gs__dp_logf(a, "cannot watch %s: %s", a->cfg.plugin_dir, strerror(errno));
        return GS_EIO;
    }
    for (uint32_t i = 0; i < a->model.n_resources; i++)
        if (gs__dp_res_start(a, &a->res[i]) != GS_OK)
            return GS_EIO;
    if (a->model.n_resources == 0)
        gs__dp_logf(a, "no GPU to advertise: serving metrics only");
    for (uint32_t g = 0; g < a->model.n_gpus; g++)
        if (a->model.gpus[g].mig_enabled && a->cfg.mig_strategy == GS_MIG_STRATEGY_NONE)
            gs__dp_logf(
                a,
                "warning: GPU %u is in MIG mode (%u MIG devices) but flags.migStrategy is none: "
                "it is advertised whole and a container gets no MIG device; set migStrategy "
                "single or mixed to advertise them",
                (unsigned)g, (unsigned)a->model.gpus[g].mig_count);
    if (a->model.n_unmatched > 0)
        gs__dp_logf(a,
                    "note: %u time-slicing device selector(s) match no device on this node "
                    "(first: %s)",
                    (unsigned)a->model.n_unmatched, a->model.unmatched);
    int64_t now = gs__dp_now_ms(a);
    kubelet_appeared(a);
    gs__dp_publish_inventory(a);
    a->next_event_ms = now;
    a->next_refresh_ms = now;
    a->next_rediscover_ms = a->cfg.rediscover_ms > 0 ? now + a->cfg.rediscover_ms : INT64_MAX;

    struct pollfd fds[GS_DP_RESOURCES_MAX + 2];
    int32_t fd_res[GS_DP_RESOURCES_MAX + 2];
    while (!atomic_load(&a->stop)) {
        now = gs__dp_now_ms(a);
        /* Timers first, so handlers below answer from fresh health. */
        if (now >= a->next_event_ms) {
            poll_events(a);
            a->next_event_ms = now + EVENT_POLL_MS;
        }
        if (now >= gs_health_next_due_ms(a->health))
            (void)gs_health_tick(a->health);
        publish_health(a);
        if (now >= a->next_refresh_ms) {
            refresh_metrics(a);
            a->next_refresh_ms = now + a->cfg.refresh_ms;
        }
        if (a->have_pending && now >= a->advertise_at_ms)
            gs__dp_advertise_pending(a);
        if (now >= a->next_rediscover_ms) {
            gs__dp_rediscover(a);
            a->next_rediscover_ms = now + a->cfg.rediscover_ms;
        }
        gs__dp_migplan_turn(a);
        if (now >= a->next_recover_ms)
            recover(a);
        maybe_register(a, now);

        int64_t due = min64(a->next_event_ms, a->next_refresh_ms);
        due = min64(due, gs_health_next_due_ms(a->health));
        due = min64(due, a->next_recover_ms);
        due = min64(due, a->next_rediscover_ms);
        if (a->have_pending)
            due = min64(due, a->advertise_at_ms);
        if (!gs__dp_worker_busy(a->reg_worker) && register_pending(a))
            due = min64(due, a->next_register_ms);
        int64_t wait = due - gs__dp_now_ms(a);
        if (wait < 0)
            wait = 0;
        if (wait > POLL_MAX_MS)
            wait = POLL_MAX_MS;

        nfds_t nf = 0;
        fds[nf] = (struct pollfd){.fd = a->wake_fd, .events = POLLIN};
        fd_res[nf++] = -1;
        fds[nf] = (struct pollfd){.fd = a->ino_fd, .events = POLLIN};
        fd_res[nf++] = -2;
        for (uint32_t i = 0; i < a->model.n_resources; i++) {
            if (a->res[i].srv == NULL)
                continue;
            fds[nf] = (struct pollfd){.fd = gs_grpc_server_fd(a->res[i].srv), .events = POLLIN};
            fd_res[nf++] = (int32_t)i;
        }
        int n = poll(fds, nf, (int)wait);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            gs__dp_logf(a, "poll: %s", strerror(errno));
            return GS_EIO;
        }
        for (nfds_t k = 0; k < nf && n > 0; k++) {
            if (!(fds[k].revents & (POLLIN | POLLERR | POLLHUP)))
                continue;
            if (fd_res[k] == -1) {
                handle_wake(a);
            } else if (fd_res[k] == -2) {
                handle_inotify(a);
            } else {
                struct res_rt *r = &a->res[fd_res[k]];
                /* The server may have been re-created by inotify handling above. */
                if (r->srv != NULL && gs_grpc_server_fd(r->srv) == fds[k].fd)
                    (void)gs_grpc_server_run_once(r->srv, 0);
            }
        }
    }
    gs__dp_logf(a, "stopping");
    return GS_OK;
}

void gs_dp_agent_stop(struct gs_dp_agent *a)
{
    if (a == NULL)
        return;
    atomic_store(&a->stop, 1);
    uint64_t one = 1;
    if (a->wake_fd >= 0) {
        ssize_t n = write(a->wake_fd, &one, sizeof one);
        (void)n; /* a full counter already wakes the loop */
    }
}

uint16_t gs_dp_agent_metrics_port(const struct gs_dp_agent *a)
{
    return a != NULL ? a->metrics_port : 0;
}

const struct gs_dp_model *gs_dp_agent_model(const struct gs_dp_agent *a)
{
    return a != NULL ? &a->model : NULL;
}

void gs_dp_agent_free(struct gs_dp_agent *a)
{
    if (a == NULL)
        return;
    /* Sockets first: a Register in flight then fails fast instead of waiting for kubelet to
     * dial back into a loop that no longer runs. */
    for (uint32_t i = 0; i < GS_DP_RESOURCES_MAX; i++) {
        gs__dp_res_stop(&a->res[i]);
        free(a->res[i].streams);
    }
    gs__dp_kube_free(a->kube); /* first: its log lines may go to the caller's sink */
    free(a->inventory);
    free(a->mig_last_id);
    gs__dp_worker_free(a->reg_worker);
    gs__dp_worker_free(a->pr_worker);
    gs_exporter_free(a->exporter);
    if (a->ino_fd >= 0)
        close(a->ino_fd);
    if (a->wake_fd >= 0)
        close(a->wake_fd);
    gs_health_free(a->health);
    gs_dp_model_fini(&a->model);
    if (a->have_pending)
        gs_dp_model_fini(&a->pending);
    free(a->state);
    free(a->xgpus);
    free(a->attr);
    free(a->podval);
    free(a->pr_job);
    free(a);
}
