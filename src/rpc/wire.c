/*
 * The byte-level pieces of gRPC that do not depend on HTTP/2 state: bounded buffers, the
 * length-prefixed message framing, percent coding of grpc-message, grpc-status and
 * grpc-timeout values, the status mappings of the gRPC protocol documents, and protobuf-c
 * pack/unpack helpers. Everything here is pure and is what the fuzz driver
 * tests/fuzz/fuzz_grpc_frame.c exercises.
 */
#include "rpc_int.h"

#include "gpusched/err.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

/* ---- bounded buffer ------------------------------------------------------------------------ */

void gs__buf_init(struct gs__buf *b, size_t max_bytes)
{
    memset(b, 0, sizeof *b);
    b->max_bytes = max_bytes;
}

void gs__buf_fini(struct gs__buf *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}

int gs__buf_append(struct gs__buf *b, const void *p, size_t n)
{
    size_t live = b->len - b->off;

    if (n == 0)
        return GS_OK;
    if (n > b->max_bytes - live)
        return GS_ELIMIT;
    if (n > b->cap - b->len) {
        /* Reclaim consumed space first; grow only when the live bytes need it. */
        if (b->off > 0) {
            memmove(b->data, b->data + b->off, live);
            b->len = live;
            b->off = 0;
        }
        if (n > b->cap - b->len) {
            size_t want = live + n;
            size_t ncap = b->cap ? b->cap : 256;
            while (ncap < want)
                ncap = ncap > SIZE_MAX / 2 ? want : ncap * 2;
            if (ncap > b->max_bytes && want <= b->max_bytes)
                ncap = b->max_bytes;
            uint8_t *nd = realloc(b->data, ncap);
            if (nd == NULL)
                return GS_ENOMEM;
            b->data = nd;
            b->cap = ncap;
        }
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return GS_OK;
}

void gs__buf_consume(struct gs__buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}

/* ---- message framing ----------------------------------------------------------------------- */

int gs__grpc_frame_parse(const uint8_t *data, size_t len, size_t max_msg_bytes,
                         struct gs__grpc_frame *out)
{
    memset(out, 0, sizeof *out);
    if (len < GS__GRPC_PREFIX_BYTES)
        return GS_OK;
    if (data[0] > 1)
        return GS_EPARSE;
    uint32_t n = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 |
                 (uint32_t)data[4];
    if (n > max_msg_bytes)
        return GS_ERANGE;
    out->have_prefix = true;
    out->compressed = data[0] == 1;
    out->msg_len = n;
    if (len - GS__GRPC_PREFIX_BYTES < n)
        return GS_OK;
    out->complete = true;
    out->msg = n ? data + GS__GRPC_PREFIX_BYTES : NULL;
    out->frame_bytes = GS__GRPC_PREFIX_BYTES + (size_t)n;
    return GS_OK;
}

void gs__grpc_frame_prefix(uint8_t out[GS__GRPC_PREFIX_BYTES], bool compressed, uint32_t msg_len)
{
    out[0] = compressed ? 1 : 0;
    out[1] = (uint8_t)(msg_len >> 24);
    out[2] = (uint8_t)(msg_len >> 16);
    out[3] = (uint8_t)(msg_len >> 8);
    out[4] = (uint8_t)msg_len;
}

/* ---- grpc-message, grpc-status, grpc-timeout ---------------------------------------------- */

int gs__grpc_percent_encode(const char *in, size_t in_len, char **out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n =
        in_len < GS_GRPC_MAX_STATUS_MESSAGE_BYTES ? in_len : GS_GRPC_MAX_STATUS_MESSAGE_BYTES;
    char *s = malloc(3 * n + 1);
    size_t k = 0;

    *out = NULL;
    if (s == NULL)
        return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c < 0x20 || c > 0x7e || c == '%') {
            s[k++] = '%';
            s[k++] = hex[c >> 4];
            s[k++] = hex[c & 15];
        } else {
            s[k++] = (char)c;
        }
    }
    s[k] = '\0';
    *out = s;
    return GS_OK;
}

/* Value of a hex digit, or -1. */
static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int gs__grpc_percent_decode(const char *in, size_t in_len, char **out)
{
    size_t cap =
        in_len < GS_GRPC_MAX_STATUS_MESSAGE_BYTES ? in_len : GS_GRPC_MAX_STATUS_MESSAGE_BYTES;
    char *s = malloc(cap + 1);
    size_t k = 0;

    *out = NULL;
    if (s == NULL)
        return GS_ENOMEM;
    for (size_t i = 0; i < in_len && k < cap; i++) {
        int hi, lo;
        if (in[i] == '%' && i + 2 < in_len && (hi = hexval(in[i + 1])) >= 0 &&
            (lo = hexval(in[i + 2])) >= 0) {
            s[k++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            s[k++] = in[i];
        }
    }
    s[k] = '\0';
    *out = s;
    return GS_OK;
}

int gs__grpc_status_parse(const char *v, size_t len)
{
    int n = 0;

    if (len == 0 || len > 9)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        n = n * 10 + (v[i] - '0');
    }
    return n;
}

void gs__grpc_timeout_format(int timeout_ms, char out[16])
{
    /* The value has at most 8 digits; milliseconds fit up to about 27 hours. */
    const char *digits = "0123456789";
    char tmp[16];
    int n = timeout_ms > 0 ? timeout_ms : 1;
    char unit = 'm';
    size_t k = 0, j = 0;

    if (n > 99999999) {
        n = n / 1000 + (n % 1000 != 0);
        unit = 'S';
    }
    do {
        tmp[k++] = digits[n % 10];
        n /= 10;
    } while (n > 0);
    while (k > 0)
        out[j++] = tmp[--k];
    out[j++] = unit;
    out[j] = '\0';
}

int gs__grpc_status_from_h2(uint32_t h2_error)
{
    switch (h2_error) {
    case NGHTTP2_REFUSED_STREAM:
        return GS_GRPC_UNAVAILABLE;
    case NGHTTP2_CANCEL:
        return GS_GRPC_CANCELLED;
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return GS_GRPC_RESOURCE_EXHAUSTED;
    case NGHTTP2_INADEQUATE_SECURITY:
        return GS_GRPC_PERMISSION_DENIED;
    default:
        return GS_GRPC_INTERNAL;
    }
}

int gs__grpc_status_from_http(int http_status)
{
    switch (http_status) {
    case 400:
        return GS_GRPC_INTERNAL;
    case 401:
        return GS_GRPC_UNAUTHENTICATED;
    case 403:
        return GS_GRPC_PERMISSION_DENIED;
    case 404:
        return GS_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return GS_GRPC_UNAVAILABLE;
    default:
        return GS_GRPC_UNKNOWN;
    }
}

bool gs__grpc_content_type_ok(const char *v, size_t len)
{
    static const char base[] = "application/grpc";
    size_t n = sizeof base - 1;

    if (len < n || memcmp(v, base, n) != 0)
        return false;
    return len == n || v[n] == '+' || v[n] == ';';
}

const char *gs_grpc_status_name(int status)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (status < 0 || status >= (int)(sizeof names / sizeof names[0]))
        return "UNKNOWN_STATUS";
    return names[status];
}

/* ---- protobuf-c helpers ------------------------------------------------------------------- */

int gs_grpc_pack(const ProtobufCMessage *msg, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);

    *out = NULL;
    *len = 0;
    if (n > GS_GRPC_MAX_MESSAGE_BYTES)
        return GS_ERANGE;
    if (n == 0)
        return GS_OK;
    uint8_t *p = malloc(n);
    if (p == NULL)
        return GS_ENOMEM;
    size_t k = protobuf_c_message_pack(msg, p);
    if (k != n) {
        /* protobuf-c packs exactly get_packed_size bytes; anything else is its bug. */
        free(p);
        return GS_EINVAL;
    }
    *out = p;
    *len = n;
    return GS_OK;
}

int gs_grpc_unpack(const ProtobufCMessageDescriptor *desc, const void *data, size_t len,
                   ProtobufCMessage **out)
{
    static const uint8_t none[1];

    *out = protobuf_c_message_unpack(desc, NULL, len, len ? data : none);
    return *out ? GS_OK : GS_EPARSE;
}
