/*
 * A small gRPC server on top of gsrpc for the real-peer test (tests/rpc/test_grpc_peer.py,
 * which talks to it with Python's grpcio). It serves:
 *   /gs.test.Echo/Unary    echoes the request bytes
 *   /gs.test.Echo/Fail     request: 1 status byte + message text; answers with that status
 *   /gs.test.Echo/Stream   request: count and size (big-endian 32-bit each); streams count
 *                          messages of size bytes (byte i of message k is (31 i + k) mod 256).
 *                          The first goes out from the handler, the rest from the main loop as
 *                          the queue drains, as the node agent pushes ListAndWatch updates.
 *                          count 0xffffffff sends one message and holds the stream open.
 *   /gs.test.Echo/Stats    text counters: "open=N opened=N finished=N cancelled=N
 *                          disconnected=N conns=N failed=N" and the server's defence
 *                          counters (struct gs_grpc_server_stats): accepted refused evicted
 *                          handshake_timeout idle_timeout reset_output refused_body
 *                          body_timeout out_bytes request_bytes
 *   /v1beta1.DevicePlugin/...  the five device plugin methods over eight fake devices.
 * Usage: echo_server [--LIMIT VALUE]... SOCKET_PATH, where LIMIT is a field of struct
 * gs_grpc_server_limits with '_' written '-' (--handshake-timeout-ms 300); the rest keep
 * their defaults. Prints "ready" once listening; exits 0 on SIGTERM/SIGINT after freeing
 * everything (so ASan's leak check covers shutdown with open streams).
 */
#define _POSIX_C_SOURCE 200809L /* sigaction */

#include <errno.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "gpusched/err.h"
#include "gpusched/grpc.h"

#define MAX_STREAMS 512
#define N_DEVICES 8
/** Keep at most this much queued per stream before pushing more (back-pressure). */
#define PUSH_HIGH_WATER_BYTES (2u * 1024u * 1024u)

/** One open streaming call of /gs.test.Echo/Stream or ListAndWatch. */
struct active {
    struct gs_grpc_stream *stream; /**< handle, valid until its close callback */
    uint32_t next;                 /**< index of the next message to send */
    uint32_t count;                /**< messages to send; UINT32_MAX: hold open */
    uint32_t size;                 /**< bytes per message */
};

static struct {
    struct gs_grpc_server *srv;
    struct active streams[MAX_STREAMS];
    int n_streams;
    int opened, finished, cancelled, disconnected;
} g;

static atomic_bool g_stop;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&g_stop, true);
    gs_grpc_server_wake(g.srv);
}

static void log_line(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "echo_server: %s\n", line);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void h_unary(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    (void)user;
    gs_grpc_reply_bytes(reply, req, len);
}

static void h_fail(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    char msg[256];
    (void)user;
    if (len < 1) {
        gs_grpc_reply_error(reply, GS_GRPC_INVALID_ARGUMENT, "empty request");
        return;
    }
    size_t n = len - 1 < sizeof msg - 1 ? len - 1 : sizeof msg - 1;
    memcpy(msg, req + 1, n);
    msg[n] = '\0';
    if (gs_grpc_reply_error(reply, req[0], msg) != GS_OK)
        gs_grpc_reply_error(reply, GS_GRPC_INVALID_ARGUMENT, "status out of range");
}

static void h_stats(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    struct gs_grpc_server_stats st;
    char text[1024];
    (void)user;
    (void)req;
    (void)len;
    gs_grpc_server_stats(g.srv, &st);
    int n = snprintf(
        text, sizeof text,
        "open=%d opened=%d finished=%d cancelled=%d disconnected=%d conns=%zu "
        "failed=%llu accepted=%llu refused=%llu evicted=%llu handshake_timeout=%llu "
        "idle_timeout=%llu reset_output=%llu refused_body=%llu body_timeout=%llu "
        "out_bytes=%zu request_bytes=%zu",
        g.n_streams, g.opened, g.finished, g.cancelled, g.disconnected, st.connections,
        (unsigned long long)st.connections_failed, (unsigned long long)st.connections_accepted,
        (unsigned long long)st.connections_refused, (unsigned long long)st.connections_evicted,
        (unsigned long long)st.connections_handshake_timeout,
        (unsigned long long)st.connections_idle_timeout,
        (unsigned long long)st.streams_reset_output, (unsigned long long)st.requests_refused_body,
        (unsigned long long)st.requests_body_timeout, st.out_bytes, st.request_bytes);
    gs_grpc_reply_bytes(reply, text, (size_t)n);
}

/* Sends the next message of a /gs.test.Echo/Stream call. */
static int push_one(struct active *a)
{
    uint8_t *p = malloc(a->size ? a->size : 1);
    uint8_t block[256];
    if (p == NULL)
        return GS_ENOMEM;
    /* 31 is odd, so the pattern repeats every 256 bytes: copy one period at a time (byte by
     * byte, megabyte messages are slow under the sanitizers). */
    for (uint32_t i = 0; i < sizeof block; i++)
        block[i] = (uint8_t)(31u * i + a->next);
    for (uint32_t i = 0; i < a->size; i += sizeof block)
        memcpy(p + i, block, a->size - i < sizeof block ? a->size - i : sizeof block);
    int rc = gs_grpc_stream_send(a->stream, p, a->size);
    free(p);
    if (rc == GS_OK)
        a->next++;
    return rc;
}

static struct active *track(struct gs_grpc_stream *s, uint32_t count, uint32_t size)
{
    if (g.n_streams == MAX_STREAMS) {
        gs_grpc_stream_finish(s, GS_GRPC_RESOURCE_EXHAUSTED, "too many streams");
        return NULL;
    }
    struct active *a = &g.streams[g.n_streams++];
    a->stream = s;
    a->next = 0;
    a->count = count;
    a->size = size;
    g.opened++;
    return a;
}

static void h_stream_open(void *user, const uint8_t *req, size_t len, struct gs_grpc_stream *s)
{
    (void)user;
    if (len != 8) {
        gs_grpc_stream_finish(s, GS_GRPC_INVALID_ARGUMENT, "want count and size, 8 bytes");
        return;
    }
    uint32_t size = be32(req + 4);
    if (size > GS_GRPC_MAX_MESSAGE_BYTES) {
        gs_grpc_stream_finish(s, GS_GRPC_INVALID_ARGUMENT, "size over 4 MiB");
        return;
    }
    struct active *a = track(s, be32(req), size);
    if (a && a->count > 0 && push_one(a) != GS_OK)
        gs_grpc_stream_finish(s, GS_GRPC_INTERNAL, "send failed");
}

static void h_stream_close(void *user, struct gs_grpc_stream *s, int reason)
{
    (void)user;
    for (int i = 0; i < g.n_streams; i++) {
        if (g.streams[i].stream == s) {
            g.streams[i] = g.streams[--g.n_streams];
            break;
        }
    }
    if (reason == GS_GRPC_CLOSE_FINISHED)
        g.finished++;
    else if (reason == GS_GRPC_CLOSE_CANCELLED)
        g.cancelled++;
    else
        g.disconnected++;
}

/* Pushes pending messages of every stream while its queue is short; finishes complete ones. */
static void push_pending(void)
{
    for (int i = 0; i < g.n_streams; i++) {
        struct active *a = &g.streams[i];
        if (a->count == UINT32_MAX || a->next > a->count)
            continue;
        while (a->next < a->count &&
               gs_grpc_stream_queued_bytes(a->stream) < PUSH_HIGH_WATER_BYTES) {
            if (push_one(a) != GS_OK)
                break;
        }
        if (a->next == a->count) {
            gs_grpc_stream_finish(a->stream, GS_GRPC_OK, NULL);
            a->next++; /* finished: nothing more to push */
        }
    }
}

/* ---- device plugin ------------------------------------------------------------------------ */

static void h_options(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    (void)user;
    (void)req;
    (void)len;
    o.get_preferred_allocation_available = 1;
    gs_grpc_reply_message(reply, &o.base);
}

static void h_list_and_watch(void *user, const uint8_t *req, size_t len, struct gs_grpc_stream *s)
{
    V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__Device dev[N_DEVICES], *devp[N_DEVICES];
    V1beta1__TopologyInfo topo[N_DEVICES];
    V1beta1__NUMANode numa[N_DEVICES], *numap[N_DEVICES];
    char ids[N_DEVICES][16];
    (void)user;
    (void)req;
    (void)len;
    if (track(s, UINT32_MAX, 0) == NULL)
        return;
    for (int i = 0; i < N_DEVICES; i++) {
        v1beta1__device__init(&dev[i]);
        v1beta1__topology_info__init(&topo[i]);
        v1beta1__numanode__init(&numa[i]);
        snprintf(ids[i], sizeof ids[i], "GPU-%d", i);
        numa[i].id = i / 4;
        numap[i] = &numa[i];
        topo[i].n_nodes = 1;
        topo[i].nodes = &numap[i];
        dev[i].id = ids[i];
        dev[i].health = "Healthy";
        dev[i].topology = &topo[i];
        devp[i] = &dev[i];
    }
    r.n_devices = N_DEVICES;
    r.devices = devp;
    if (gs_grpc_stream_send_message(s, &r.base) != GS_OK)
        gs_grpc_stream_finish(s, GS_GRPC_INTERNAL, "send failed");
}

static void h_allocate(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    ProtobufCMessage *m;
    (void)user;
    if (gs_grpc_unpack(&v1beta1__allocate_request__descriptor, req, len, &m) != GS_OK) {
        gs_grpc_reply_error(reply, GS_GRPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        return;
    }
    V1beta1__AllocateRequest *r = (V1beta1__AllocateRequest *)m;
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    size_t n = r->n_container_requests;
    V1beta1__ContainerAllocateResponse *cr = calloc(n ? n : 1, sizeof *cr);
    V1beta1__ContainerAllocateResponse **crp = calloc(n ? n : 1, sizeof *crp);
    V1beta1__ContainerAllocateResponse__EnvsEntry *env = calloc(n ? n : 1, sizeof *env);
    V1beta1__ContainerAllocateResponse__EnvsEntry **envp = calloc(n ? n : 1, sizeof *envp);
    char **vals = calloc(n ? n : 1, sizeof *vals);
    if (!cr || !crp || !env || !envp || !vals) {
        gs_grpc_reply_error(reply, GS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const V1beta1__ContainerAllocateRequest *c = r->container_requests[i];
        size_t total = 1;
        for (size_t j = 0; j < c->n_devices_ids; j++)
            total += strlen(c->devices_ids[j]) + 1;
        vals[i] = calloc(1, total);
        if (vals[i] == NULL) {
            gs_grpc_reply_error(reply, GS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
        for (size_t j = 0; j < c->n_devices_ids; j++) {
            if (j)
                strcat(vals[i], ",");
            strcat(vals[i], c->devices_ids[j]);
        }
        v1beta1__container_allocate_response__init(&cr[i]);
        v1beta1__container_allocate_response__envs_entry__init(&env[i]);
        env[i].key = "NVIDIA_VISIBLE_DEVICES";
        env[i].value = vals[i];
        envp[i] = &env[i];
        cr[i].n_envs = 1;
        cr[i].envs = &envp[i];
        crp[i] = &cr[i];
    }
    resp.n_container_responses = n;
    resp.container_responses = crp;
    gs_grpc_reply_message(reply, &resp.base);
out:
    for (size_t i = 0; vals && i < n; i++)
        free(vals[i]);
    free(vals);
    free(envp);
    free(env);
    free(crp);
    free(cr);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void h_preferred(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    ProtobufCMessage *m;
    (void)user;
    if (gs_grpc_unpack(&v1beta1__preferred_allocation_request__descriptor, req, len, &m) != GS_OK) {
        gs_grpc_reply_error(reply, GS_GRPC_INVALID_ARGUMENT, "cannot decode request");
        return;
    }
    V1beta1__PreferredAllocationRequest *r = (V1beta1__PreferredAllocationRequest *)m;
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse one =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse *onep = &one;
    if (r->n_container_requests >= 1) {
        /* Must-include devices first, then the available ones in order. */
        const V1beta1__ContainerPreferredAllocationRequest *c = r->container_requests[0];
        size_t want = c->allocation_size > 0 ? (size_t)c->allocation_size : 0;
        char **ids = calloc(want ? want : 1, sizeof *ids);
        size_t k = 0;
        for (size_t i = 0; ids && i < c->n_must_include_deviceids && k < want; i++)
            ids[k++] = c->must_include_deviceids[i];
        for (size_t i = 0; ids && i < c->n_available_deviceids && k < want; i++) {
            bool dup = false;
            for (size_t j = 0; j < k; j++)
                dup |= strcmp(ids[j], c->available_deviceids[i]) == 0;
            if (!dup)
                ids[k++] = c->available_deviceids[i];
        }
        one.n_deviceids = k;
        one.deviceids = ids;
        resp.n_container_responses = 1;
        resp.container_responses = &onep;
        gs_grpc_reply_message(reply, &resp.base);
        free(ids);
    } else {
        gs_grpc_reply_message(reply, &resp.base);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void h_prestart(void *user, const uint8_t *req, size_t len, struct gs_grpc_reply *reply)
{
    ProtobufCMessage *m;
    (void)user;
    if (gs_grpc_unpack(&v1beta1__pre_start_container_request__descriptor, req, len, &m) != GS_OK) {
        gs_grpc_reply_error(reply, GS_GRPC_INVALID_ARGUMENT, "cannot decode request");
        return;
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Parses a non-negative decimal option value; false when it is not one. */
static bool parse_u64(const char *text, unsigned long long *out)
{
    char *end;
    errno = 0;
    *out = strtoull(text, &end, 10);
    return text[0] >= '0' && text[0] <= '9' && *end == '\0' && errno == 0;
}

/* Reads --LIMIT VALUE pairs into *l; returns the index of the socket path, or -1. */
static int parse_limits(int argc, char **argv, struct gs_grpc_server_limits *l)
{
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        unsigned long long v;
        const char *name = argv[i] + 2;
        if (!parse_u64(argv[i + 1], &v) || v > INT32_MAX) {
            (void)fprintf(stderr, "echo_server: %s: want a number up to %d, got \"%s\"\n", argv[i],
                          INT32_MAX, argv[i + 1]);
            return -1;
        }
        if (strcmp(name, "handshake-timeout-ms") == 0)
            l->handshake_timeout_ms = (int)v;
        else if (strcmp(name, "idle-timeout-ms") == 0)
            l->idle_timeout_ms = (int)v;
        else if (strcmp(name, "body-timeout-ms") == 0)
            l->body_timeout_ms = (int)v;
        else if (strcmp(name, "max-connections") == 0)
            l->max_connections = (size_t)v;
        else if (strcmp(name, "conn-out-max-bytes") == 0)
            l->conn_out_max_bytes = (size_t)v;
        else if (strcmp(name, "server-out-max-bytes") == 0)
            l->server_out_max_bytes = (size_t)v;
        else if (strcmp(name, "conn-body-max-bytes") == 0)
            l->conn_body_max_bytes = (size_t)v;
        else if (strcmp(name, "server-body-max-bytes") == 0)
            l->server_body_max_bytes = (size_t)v;
        else {
            (void)fprintf(stderr, "echo_server: unknown option %s\n", argv[i]);
            return -1;
        }
    }
    return i + 1 == argc ? i : -1;
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    struct gs_grpc_server_limits limits;
    int rc = 1;

    gs_grpc_server_limits_default(&limits);
    int path_idx = parse_limits(argc, argv, &limits);
    if (path_idx < 0) {
        (void)fprintf(stderr, "usage: echo_server [--LIMIT VALUE]... SOCKET_PATH\n");
        return 2;
    }
    if (gs_grpc_server_new(&g.srv) != GS_OK)
        return 1;
    if (gs_grpc_server_set_limits(g.srv, &limits) != GS_OK) {
        (void)fprintf(stderr, "echo_server: a limit is 0\n");
        gs_grpc_server_free(g.srv);
        return 2;
    }
    gs_grpc_server_set_log(g.srv, log_line, NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int r = 0;
    r |= gs_grpc_server_add_unary(g.srv, "/gs.test.Echo/Unary", h_unary, NULL);
    r |= gs_grpc_server_add_unary(g.srv, "/gs.test.Echo/Fail", h_fail, NULL);
    r |= gs_grpc_server_add_unary(g.srv, "/gs.test.Echo/Stats", h_stats, NULL);
    r |= gs_grpc_server_add_stream(g.srv, "/gs.test.Echo/Stream", h_stream_open, h_stream_close,
                                   NULL);
    r |= gs_grpc_server_add_unary(g.srv, "/v1beta1.DevicePlugin/GetDevicePluginOptions", h_options,
                                  NULL);
    r |= gs_grpc_server_add_stream(g.srv, "/v1beta1.DevicePlugin/ListAndWatch", h_list_and_watch,
                                   h_stream_close, NULL);
    r |= gs_grpc_server_add_unary(g.srv, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                                  h_preferred, NULL);
    r |= gs_grpc_server_add_unary(g.srv, "/v1beta1.DevicePlugin/Allocate", h_allocate, NULL);
    r |= gs_grpc_server_add_unary(g.srv, "/v1beta1.DevicePlugin/PreStartContainer", h_prestart,
                                  NULL);
    if (r != 0) {
        fprintf(stderr, "echo_server: cannot register methods\n");
        goto out;
    }
    int lrc = gs_grpc_server_listen(g.srv, argv[path_idx]);
    if (lrc != GS_OK) {
        fprintf(stderr, "echo_server: listen %s: %s\n", argv[path_idx], gs_strerror(lrc));
        goto out;
    }
    printf("ready\n");
    fflush(stdout);
    while (!atomic_load(&g_stop)) {
        if (gs_grpc_server_run_once(g.srv, 100) != GS_OK) {
            fprintf(stderr, "echo_server: run_once failed\n");
            goto out;
        }
        push_pending();
    }
    rc = 0;
out:
    gs_grpc_server_free(g.srv);
    fprintf(stderr, "echo_server: stopped (open=%d opened=%d finished=%d cancelled=%d)\n",
            g.n_streams, g.opened, g.finished, g.cancelled);
    return rc;
}
