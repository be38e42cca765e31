/*
 * libFuzzer target for the gRPC byte-level parsers of src/rpc/wire.c.
 *
 * Framing: the input is read as a sequence of length-prefixed messages twice, once in one
 * piece and once appended to a bounded buffer in chunks whose sizes come from the input
 * itself, taking each message off as soon as it is complete (as the client does with a
 * stream). Both readings must find the same messages and end the same way. grpc-message
 * coding: decoding any text must succeed, and decoding an encoding must give back the
 * original. A broken property aborts, which the fuzzer reports as a crash.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "rpc/rpc_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** Message limit for the fuzzer: small, so that GS_ERANGE is reached. */
#define FUZZ_MAX_MSG 4096u
#define MAX_MSGS 256

static void check(int ok)
{
    if (!ok)
        abort();
}

/* What a reading found: message offsets and lengths, and how it ended. */
struct reading {
    size_t n;
    uint32_t len[MAX_MSGS];
    uint32_t fnv[MAX_MSGS];
    int end_rc; /* GS_OK: ran out of input (incomplete or empty); else the parse error */
};

static uint32_t fnv(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void read_whole(const uint8_t *data, size_t size, struct reading *r)
{
    size_t off = 0;
    memset(r, 0, sizeof *r);
    while (r->n < MAX_MSGS) {
        struct gs__grpc_frame f;
        int rc = gs__grpc_frame_parse(data + off, size - off, FUZZ_MAX_MSG, &f);
        if (rc != GS_OK) {
            check(rc == GS_EPARSE || rc == GS_ERANGE);
            check(!f.complete && !f.have_prefix);
            r->end_rc = rc;
            return;
        }
        if (!f.complete) {
            check(f.have_prefix == (size - off >= GS__GRPC_PREFIX_BYTES));
            return;
        }
        check(f.have_prefix && f.msg_len <= FUZZ_MAX_MSG);
        check(f.frame_bytes == GS__GRPC_PREFIX_BYTES + f.msg_len);
        check(f.frame_bytes <= size - off);
        check((f.msg == NULL) == (f.msg_len == 0));
        check(f.msg == NULL || f.msg == data + off + GS__GRPC_PREFIX_BYTES);
        r->len[r->n] = f.msg_len;
        r->fnv[r->n] = fnv(f.msg, f.msg_len);
        r->n++;
        off += f.frame_bytes;
    }
}

static void read_chunked(const uint8_t *data, size_t size, struct reading *r)
{
    struct gs__buf b;
    size_t off = 0, k = 0;

    memset(r, 0, sizeof *r);
    gs__buf_init(&b, GS__GRPC_PREFIX_BYTES + FUZZ_MAX_MSG + 64);
    /* Stops after MAX_MSGS messages, before looking at the next one, as read_whole does. */
    while (r->n < MAX_MSGS) {
        struct gs__grpc_frame f;
        int rc = gs__grpc_frame_parse(gs__buf_head(&b), gs__buf_size(&b), FUZZ_MAX_MSG, &f);
        if (rc != GS_OK) {
            r->end_rc = rc;
            break;
        }
        if (f.complete) {
            r->len[r->n] = f.msg_len;
            r->fnv[r->n] = fnv(f.msg, f.msg_len);
            r->n++;
            gs__buf_consume(&b, f.frame_bytes);
            continue;
        }
        if (off == size)
            break;
        /* Next chunk: 1..64 bytes, sized by the input, never past what the buffer holds. */
        size_t want = 1 + data[k++ % size] % 64;
        if (want > size - off)
            want = size - off;
        rc = gs__buf_append(&b, data + off, want);
        check(rc == GS_OK); /* a message that fits the limit always fits the buffer */
        off += want;
    }
    gs__buf_fini(&b);
}

static void fuzz_framing(const uint8_t *data, size_t size)
{
    struct reading whole, chunked;
    read_whole(data, size, &whole);
    read_chunked(data, size, &chunked);
    check(whole.n == chunked.n);
    check(whole.end_rc == chunked.end_rc);
    for (size_t i = 0; i < whole.n; i++)
        check(whole.len[i] == chunked.len[i] && whole.fnv[i] == chunked.fnv[i]);

    /* The prefix writer and the parser agree. */
    if (size >= 4) {
        uint8_t p[GS__GRPC_PREFIX_BYTES];
        struct gs__grpc_frame f;
        uint32_t n =
            (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3];
        gs__grpc_frame_prefix(p, data[0] & 1, n);
        int rc = gs__grpc_frame_parse(p, sizeof p, UINT32_MAX, &f);
        check(rc == GS_OK && f.have_prefix && f.msg_len == n && f.compressed == (data[0] & 1));
        check(f.complete == (n == 0));
    }
}

static void fuzz_text(const uint8_t *data, size_t size)
{
    char *dec, *enc, *back;
    const char *text = (const char *)data;

    /* Decoding never fails and never grows the text. */
    check(gs__grpc_percent_decode(text, size, &dec) == GS_OK);
    check(strlen(dec) <= size);
    free(dec);

    /* Encoding is printable ASCII, and decodes back to the (NUL-free, capped) original. */
    size_t n = strnlen(text, size);
    if (n > GS_GRPC_MAX_STATUS_MESSAGE_BYTES)
        n = GS_GRPC_MAX_STATUS_MESSAGE_BYTES;
    check(gs__grpc_percent_encode(text, n, &enc) == GS_OK);
    for (const char *c = enc; *c; c++)
        check(*c >= 0x20 && *c <= 0x7e);
    check(gs__grpc_percent_decode(enc, strlen(enc), &back) == GS_OK);
    check(strlen(back) == n && memcmp(back, text, n) == 0);
    free(enc);
    free(back);

    int st = gs__grpc_status_parse(text, size);
    check(st >= -1);
    (void)gs__grpc_content_type_ok(text, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_framing(data, size);
    fuzz_text(data, size);
    return 0;
}
