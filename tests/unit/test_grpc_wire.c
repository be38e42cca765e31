/*
 * Tests of the byte-level gRPC pieces (src/rpc/wire.c): the bounded buffer, message framing,
 * grpc-message percent coding, grpc-status/grpc-timeout values, the status mappings, and the
 * protobuf-c helpers on the generated device plugin messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "gpusched/err.h"
#include "gpusched/grpc.h"
#include "podresources/v1/api.pb-c.h"
#include "rpc/rpc_int.h"

static void test_buf_enforces_its_maximum_and_reuses_consumed_space(void **state)
{
    struct gs__buf b;
    (void)state;
    gs__buf_init(&b, 8);
    assert_int_equal(gs__buf_append(&b, "abcdef", 6), GS_OK);
    assert_int_equal(gs__buf_append(&b, "xyz", 3), GS_ELIMIT);
    assert_int_equal(gs__buf_size(&b), 6); /* unchanged on failure */
    gs__buf_consume(&b, 4);
    assert_int_equal(gs__buf_size(&b), 2);
    assert_int_equal(gs__buf_append(&b, "123456", 6), GS_OK);
    assert_memory_equal(gs__buf_head(&b), "ef123456", 8);
    assert_true(b.cap <= 8);
    gs__buf_consume(&b, 8);
    assert_int_equal(gs__buf_size(&b), 0);
    assert_int_equal(gs__buf_append(&b, NULL, 0), GS_OK);
    gs__buf_fini(&b);
    assert_null(b.data);
}

static void test_frame_parse_handles_partial_complete_and_bad_prefixes(void **state)
{
    struct gs__grpc_frame f;
    uint8_t buf[16] = {0, 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 0};
    (void)state;

    assert_int_equal(gs__grpc_frame_parse(buf, 4, 100, &f), GS_OK);
    assert_false(f.have_prefix);
    assert_false(f.complete);
    assert_int_equal(gs__grpc_frame_parse(buf, 6, 100, &f), GS_OK);
    assert_true(f.have_prefix);
    assert_false(f.complete);
    assert_int_equal(f.msg_len, 3);
    assert_int_equal(gs__grpc_frame_parse(buf, 13, 100, &f), GS_OK);
    assert_true(f.complete);
    assert_false(f.compressed);
    assert_int_equal(f.frame_bytes, 8);
    assert_memory_equal(f.msg, "abc", 3);
    /* An empty message (a protobuf Empty) is complete with a NULL payload. */
    assert_int_equal(gs__grpc_frame_parse(buf + 8, 5, 100, &f), GS_OK);
    assert_true(f.complete);
    assert_null(f.msg);
    assert_int_equal(f.frame_bytes, 5);

    buf[0] = 1;
    assert_int_equal(gs__grpc_frame_parse(buf, 8, 100, &f), GS_OK);
    assert_true(f.compressed);
    buf[0] = 2;
    assert_int_equal(gs__grpc_frame_parse(buf, 8, 100, &f), GS_EPARSE);
    assert_false(f.complete);
    buf[0] = 0;
    assert_int_equal(gs__grpc_frame_parse(buf, 8, 2, &f), GS_ERANGE);

    uint8_t p[5];
    gs__grpc_frame_prefix(p, false, 0x01020304u);
    assert_memory_equal(p, "\x00\x01\x02\x03\x04", 5);
    gs__grpc_frame_prefix(p, true, GS_GRPC_MAX_MESSAGE_BYTES);
    assert_int_equal(gs__grpc_frame_parse(p, 5, GS_GRPC_MAX_MESSAGE_BYTES, &f), GS_OK);
    assert_int_equal(f.msg_len, GS_GRPC_MAX_MESSAGE_BYTES);
    assert_true(f.compressed);
}

static void test_percent_coding_follows_the_grpc_message_rules(void **state)
{
    char *s;
    (void)state;

    assert_int_equal(gs__grpc_percent_encode("plain text ~!", 13, &s), GS_OK);
    assert_string_equal(s, "plain text ~!");
    free(s);
    assert_int_equal(gs__grpc_percent_encode("50% \xc3\xbc\n", 7, &s), GS_OK);
    assert_string_equal(s, "50%25 %C3%BC%0A");
    free(s);
    assert_int_equal(gs__grpc_percent_decode("50%25 %C3%bc%0A", 15, &s), GS_OK);
    assert_string_equal(s, "50% \xc3\xbc\n");
    free(s);
    /* Malformed escapes are kept as they are: decoding never fails. */
    assert_int_equal(gs__grpc_percent_decode("%zz%4%", 6, &s), GS_OK);
    assert_string_equal(s, "%zz%4%");
    free(s);

    /* Both directions stop at the documented maximum. */
    size_t n = GS_GRPC_MAX_STATUS_MESSAGE_BYTES + 100;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'x', n);
    assert_int_equal(gs__grpc_percent_encode(big, n, &s), GS_OK);
    assert_int_equal(strlen(s), GS_GRPC_MAX_STATUS_MESSAGE_BYTES);
    free(s);
    assert_int_equal(gs__grpc_percent_decode(big, n, &s), GS_OK);
    assert_int_equal(strlen(s), GS_GRPC_MAX_STATUS_MESSAGE_BYTES);
    free(s);
    free(big);
}

static void test_status_timeout_and_content_type_values(void **state)
{
    char t[16];
    (void)state;

    assert_int_equal(gs__grpc_status_parse("0", 1), 0);
    assert_int_equal(gs__grpc_status_parse("12", 2), 12);
    assert_int_equal(gs__grpc_status_parse("", 0), -1);
    assert_int_equal(gs__grpc_status_parse("1x", 2), -1);
    assert_int_equal(gs__grpc_status_parse("-1", 2), -1);
    assert_int_equal(gs__grpc_status_parse("1234567890", 10), -1);

    gs__grpc_timeout_format(250, t);
    assert_string_equal(t, "250m");
    gs__grpc_timeout_format(99999999, t);
    assert_string_equal(t, "99999999m");
    gs__grpc_timeout_format(100000001, t);
    assert_string_equal(t, "100001S");

    assert_true(gs__grpc_content_type_ok("application/grpc", 16));
    assert_true(gs__grpc_content_type_ok("application/grpc+proto", 22));
    assert_true(gs__grpc_content_type_ok("application/grpc; charset=x", 27));
    assert_false(gs__grpc_content_type_ok("application/grpcweb", 19));
    assert_false(gs__grpc_content_type_ok("application/json", 16));
    assert_false(gs__grpc_content_type_ok("application/grp", 15));
}

static void test_status_names_and_mappings(void **state)
{
    (void)state;
    assert_string_equal(gs_grpc_status_name(GS_GRPC_OK), "OK");
    assert_string_equal(gs_grpc_status_name(GS_GRPC_UNIMPLEMENTED), "UNIMPLEMENTED");
    assert_string_equal(gs_grpc_status_name(GS_GRPC_UNAUTHENTICATED), "UNAUTHENTICATED");
    assert_string_equal(gs_grpc_status_name(17), "UNKNOWN_STATUS");
    assert_string_equal(gs_grpc_status_name(-1), "UNKNOWN_STATUS");

    assert_int_equal(gs__grpc_status_from_h2(0x8), GS_GRPC_CANCELLED);
    assert_int_equal(gs__grpc_status_from_h2(0x7), GS_GRPC_UNAVAILABLE);
    assert_int_equal(gs__grpc_status_from_h2(0xb), GS_GRPC_RESOURCE_EXHAUSTED);
    assert_int_equal(gs__grpc_status_from_h2(0x1), GS_GRPC_INTERNAL);
    assert_int_equal(gs__grpc_status_from_http(404), GS_GRPC_UNIMPLEMENTED);
    assert_int_equal(gs__grpc_status_from_http(503), GS_GRPC_UNAVAILABLE);
    assert_int_equal(gs__grpc_status_from_http(415), GS_GRPC_UNKNOWN);
}

static void test_pack_and_unpack_device_plugin_messages(void **state)
{
    V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest *cs[1] = {&c};
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    char *ids[2] = {"GPU-0", "GPU-1"};
    uint8_t *buf;
    size_t len;
    ProtobufCMessage *m;
    (void)state;

    c.n_devices_ids = 2;
    c.devices_ids = ids;
    req.n_container_requests = 1;
    req.container_requests = cs;
    assert_int_equal(gs_grpc_pack(&req.base, &buf, &len), GS_OK);
    /* field 1 (container_requests, L) holding field 1 (devices_ids, L) twice */
    assert_int_equal(len, 16);
    assert_memory_equal(buf, "\x0a\x0e\x0a\x05GPU-0\x0a\x05GPU-1", 16);
    assert_int_equal(gs_grpc_unpack(&v1beta1__allocate_request__descriptor, buf, len, &m), GS_OK);
    V1beta1__AllocateRequest *back = (V1beta1__AllocateRequest *)m;
    assert_int_equal(back->n_container_requests, 1);
    assert_int_equal(back->container_requests[0]->n_devices_ids, 2);
    assert_string_equal(back->container_requests[0]->devices_ids[1], "GPU-1");
    protobuf_c_message_free_unpacked(m, NULL);
    free(buf);

    /* An empty message packs to nothing and unpacks from nothing. */
    V1beta1__Empty e = V1BETA1__EMPTY__INIT;
    assert_int_equal(gs_grpc_pack(&e.base, &buf, &len), GS_OK);
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_int_equal(gs_grpc_unpack(&v1beta1__empty__descriptor, NULL, 0, &m), GS_OK);
    protobuf_c_message_free_unpacked(m, NULL);

    /* Truncated bytes do not decode. */
    assert_int_equal(gs_grpc_unpack(&v1beta1__allocate_request__descriptor, "\x0a\x0e\x0a", 3, &m),
                     GS_EPARSE);
    assert_null(m);
}

static void test_podresources_field_numbers_match_the_contract(void **state)
{
    /* ListPodResourcesResponse{pod_resources=1{name=1,namespace=2,containers=3{name=1,
     * devices=2{resource_name=1,device_ids=2}}}} written by hand from the field numbers. */
    static const uint8_t wire[] = {0x0a, 0x23, 0x0a, 0x01, 'p',  0x12, 0x02, 'n',  's', 0x1a,
                                   0x1a, 0x0a, 0x01, 'c',  0x12, 0x15, 0x0a, 0x0e, 'n', 'v',
                                   'i',  'd',  'i',  'a',  '.',  'c',  'o',  'm',  '/', 'g',
                                   'p',  'u',  0x12, 0x03, 'G',  '-',  '0'};
    ProtobufCMessage *m;
    (void)state;
    assert_int_equal(
        gs_grpc_unpack(&v1__list_pod_resources_response__descriptor, wire, sizeof wire, &m), GS_OK);
    V1__ListPodResourcesResponse *r = (V1__ListPodResourcesResponse *)m;
    assert_int_equal(r->n_pod_resources, 1);
    assert_string_equal(r->pod_resources[0]->name, "p");
    assert_string_equal(r->pod_resources[0]->namespace_, "ns");
    V1__ContainerResources *c = r->pod_resources[0]->containers[0];
    assert_string_equal(c->name, "c");
    assert_string_equal(c->devices[0]->resource_name, "nvidia.com/gpu");
    assert_string_equal(c->devices[0]->device_ids[0], "G-0");
    protobuf_c_message_free_unpacked(m, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_enforces_its_maximum_and_reuses_consumed_space),
        cmocka_unit_test(test_frame_parse_handles_partial_complete_and_bad_prefixes),
        cmocka_unit_test(test_percent_coding_follows_the_grpc_message_rules),
        cmocka_unit_test(test_status_timeout_and_content_type_values),
        cmocka_unit_test(test_status_names_and_mappings),
        cmocka_unit_test(test_pack_and_unpack_device_plugin_messages),
        cmocka_unit_test(test_podresources_field_numbers_match_the_contract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
