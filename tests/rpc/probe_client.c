/*
 * Command-line driver of the gsrpc client for the real-peer test (tests/rpc/test_grpc_peer.py),
 * which runs it against a Python grpcio server playing kubelet. Commands:
 *   probe_client unary SOCKET METHOD HEX|- TIMEOUT_MS
 *   probe_client stream SOCKET METHOD HEX|- TIMEOUT_MS
 *   probe_client register SOCKET VERSION ENDPOINT RESOURCE TIMEOUT_MS
 *   probe_client list SOCKET TIMEOUT_MS
 * Output, one item per line: for a message "msg len=N fnv=XXXXXXXX", then at the end
 * "status=N" and "message=TEXT"; `list` also prints "pod NS/NAME CONTAINER RESOURCE IDS".
 * FNV-1a (32-bit) of the bytes lets the test check large messages without printing them.
 * Exit status 0 when a result was printed, 2 for usage errors, 1 for library errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "gpusched/err.h"
#include "gpusched/grpc.h"
#include "podresources/v1/api.pb-c.h"

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

/* Decodes a hex string ("-" is empty) into a new buffer. Returns 0 or -1. */
static int unhex(const char *s, uint8_t **out, size_t *len)
{
    size_t n = strcmp(s, "-") == 0 ? 0 : strlen(s);
    if (n % 2)
        return -1;
    uint8_t *p = malloc(n / 2 + 1);
    if (p == NULL)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            free(p);
            return -1;
        }
        p[i] = (uint8_t)v;
    }
    *out = p;
    *len = n / 2;
    return 0;
}

static void print_end(const struct gs_grpc_result *r)
{
    printf("status=%d\nmessage=%s\n", r->status, r->message ? r->message : "");
}

static void print_msg(const struct gs_grpc_result *r)
{
    printf("msg len=%zu fnv=%08x\n", r->len, fnv1a(r->data, r->len));
}

static int cmd_unary(const char *sock, const char *method, const char *hex, int timeout_ms)
{
    uint8_t *req;
    size_t len;
    struct gs_grpc_result r;

    if (unhex(hex, &req, &len) != 0)
        return 2;
    int rc = gs_grpc_call_unary(sock, method, req, len, timeout_ms, &r);
    free(req);
    if (rc != GS_OK) {
        fprintf(stderr, "probe_client: %s\n", gs_strerror(rc));
        return 1;
    }
    if (r.status == GS_GRPC_OK)
        print_msg(&r);
    print_end(&r);
    gs_grpc_result_fini(&r);
    return 0;
}

static int cmd_stream(const char *sock, const char *method, const char *hex, int timeout_ms)
{
    struct gs_grpc_client *c;
    uint8_t *req;
    size_t len;
    int rc;

    if (unhex(hex, &req, &len) != 0)
        return 2;
    rc = gs_grpc_client_new(sock, &c);
    if (rc == GS_OK)
        rc = gs_grpc_client_stream_start(c, method, req, len, timeout_ms);
    free(req);
    for (;;) {
        struct gs_grpc_result r;
        enum gs_grpc_read what;
        if (rc == GS_OK)
            rc = gs_grpc_client_stream_read(c, timeout_ms, &r, &what);
        if (rc != GS_OK) {
            fprintf(stderr, "probe_client: %s\n", gs_strerror(rc));
            gs_grpc_client_free(c);
            return 1;
        }
        if (what == GS_GRPC_READ_TIMEOUT) {
            printf("timeout\n");
            gs_grpc_client_stream_cancel(c);
            break;
        }
        if (what == GS_GRPC_READ_MESSAGE) {
            print_msg(&r);
        } else {
            print_end(&r);
            gs_grpc_result_fini(&r);
            break;
        }
        gs_grpc_result_fini(&r);
    }
    gs_grpc_client_free(c);
    return 0;
}

/* Registers like the node agent does: RegisterRequest to kubelet's Registration service. */
static int cmd_register(const char *sock, const char *version, const char *endpoint,
                        const char *resource, int timeout_ms)
{
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    V1beta1__DevicePluginOptions opt = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    struct gs_grpc_result r;
    uint8_t *buf;
    size_t len;

    req.version = (char *)version;
    req.endpoint = (char *)endpoint;
    req.resource_name = (char *)resource;
    opt.get_preferred_allocation_available = 1;
    req.options = &opt;
    if (gs_grpc_pack(&req.base, &buf, &len) != GS_OK)
        return 1;
    int rc = gs_grpc_call_unary(sock, "/v1beta1.Registration/Register", buf, len, timeout_ms, &r);
    free(buf);
    if (rc != GS_OK)
        return 1;
    print_end(&r);
    gs_grpc_result_fini(&r);
    return 0;
}

/* Lists pod resources like the exporter does, printing one line per container resource. */
static int cmd_list(const char *sock, int timeout_ms)
{
    V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    struct gs_grpc_result r;
    ProtobufCMessage *m;
    uint8_t *buf;
    size_t len;

    if (gs_grpc_pack(&req.base, &buf, &len) != GS_OK)
        return 1;
    int rc = gs_grpc_call_unary(sock, "/v1.PodResourcesLister/List", buf, len, timeout_ms, &r);
    free(buf);
    if (rc != GS_OK)
        return 1;
    if (r.status == GS_GRPC_OK) {
        if (gs_grpc_unpack(&v1__list_pod_resources_response__descriptor, r.data, r.len, &m) !=
            GS_OK) {
            printf("undecodable\n");
        } else {
            V1__ListPodResourcesResponse *l = (V1__ListPodResourcesResponse *)m;
            for (size_t i = 0; i < l->n_pod_resources; i++) {
                V1__PodResources *p = l->pod_resources[i];
                for (size_t j = 0; j < p->n_containers; j++) {
                    V1__ContainerResources *c = p->containers[j];
                    for (size_t k = 0; k < c->n_devices; k++) {
                        printf("pod %s/%s %s %s ", p->namespace_, p->name, c->name,
                               c->devices[k]->resource_name);
                        for (size_t d = 0; d < c->devices[k]->n_device_ids; d++)
                            printf("%s%s", d ? "," : "", c->devices[k]->device_ids[d]);
                        printf("\n");
                    }
                }
            }
            protobuf_c_message_free_unpacked(m, NULL);
        }
    }
    print_end(&r);
    gs_grpc_result_fini(&r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "unary") == 0)
        return cmd_unary(argv[2], argv[3], argv[4], atoi(argv[5]));
    if (argc == 6 && strcmp(argv[1], "stream") == 0)
        return cmd_stream(argv[2], argv[3], argv[4], atoi(argv[5]));
    if (argc == 7 && strcmp(argv[1], "register") == 0)
        return cmd_register(argv[2], argv[3], argv[4], argv[5], atoi(argv[6]));
    if (argc == 4 && strcmp(argv[1], "list") == 0)
        return cmd_list(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: probe_client unary|stream SOCKET METHOD HEX TIMEOUT_MS\n"
                    "       probe_client register SOCKET VERSION ENDPOINT RESOURCE TIMEOUT_MS\n"
                    "       probe_client list SOCKET TIMEOUT_MS\n");
    return 2;
}
