/*
 * Internals of the gRPC layer shared by its files, its unit tests and its fuzz drivers:
 * bounded byte buffers, the gRPC length-prefixed message framing, grpc-message percent
 * coding, status mappings, and hooks that drive a server connection from memory instead of a
 * socket. Not part of the public API (include/gpusched/grpc.h).
 */
#ifndef GPUSCHED_RPC_INT_H
#define GPUSCHED_RPC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/grpc.h"

/* ---- bounded buffer ------------------------------------------------------------------------ */

/**
 * A byte queue with a hard maximum: bytes are appended at the end and consumed from the
 * front. The live bytes are data[off, len).
 */
struct gs__buf {
    uint8_t *data;    /**< malloc'd storage, NULL until the first append */
    size_t off;       /**< start of the live bytes */
    size_t len;       /**< end of the live bytes */
    size_t cap;       /**< allocated bytes */
    size_t max_bytes; /**< most live bytes ever held */
};

/** Initialises an empty buffer that will never hold more than max_bytes live bytes. */
void gs__buf_init(struct gs__buf *b, size_t max_bytes);

/** Frees the storage; the buffer is empty and reusable afterwards. */
void gs__buf_fini(struct gs__buf *b);

/**
 * Appends n bytes (p may be NULL when n is 0).
 * @return GS_OK; GS_ELIMIT when the live bytes would pass max_bytes; GS_ENOMEM. On failure
 *         the buffer is unchanged.
 */
int gs__buf_append(struct gs__buf *b, const void *p, size_t n);

/** Drops n live bytes from the front (n <= gs__buf_size). */
void gs__buf_consume(struct gs__buf *b, size_t n);

/** Number of live bytes. */
static inline size_t gs__buf_size(const struct gs__buf *b)
{
    return b->len - b->off;
}

/** Pointer to the first live byte (NULL when the buffer never held any). */
static inline const uint8_t *gs__buf_head(const struct gs__buf *b)
{
    return b->data ? b->data + b->off : NULL;
}

/* ---- message framing ----------------------------------------------------------------------- */

/** Bytes of the prefix of every gRPC message: compressed flag + 32-bit big-endian length. */
#define GS__GRPC_PREFIX_BYTES 5

/** A message found at the start of a byte string by gs__grpc_frame_parse. */
struct gs__grpc_frame {
    bool have_prefix;   /**< the 5-byte prefix is complete (flag and length are valid) */
    bool complete;      /**< the whole message is present */
    bool compressed;    /**< the compressed flag is 1 */
    uint32_t msg_len;   /**< declared message length, bytes (valid with have_prefix) */
    const uint8_t *msg; /**< the message bytes (valid with complete; NULL when msg_len 0) */
    size_t frame_bytes; /**< prefix + message, bytes (valid with complete) */
};

/**
 * Looks at the first gRPC message in data[0, len), which may hold only part of it.
 * @param max_msg_bytes  largest acceptable message length.
 * @param out            filled on GS_OK; zeroed on error.
 * @return GS_OK (see out->complete); GS_EPARSE when the flag byte is neither 0 nor 1;
 *         GS_ERANGE when the declared length is over max_msg_bytes.
 */
int gs__grpc_frame_parse(const uint8_t *data, size_t len, size_t max_msg_bytes,
                         struct gs__grpc_frame *out);

/** Writes the 5-byte prefix of a message of msg_len bytes. */
void gs__grpc_frame_prefix(uint8_t out[GS__GRPC_PREFIX_BYTES], bool compressed, uint32_t msg_len);

/* ---- grpc-message, grpc-status, grpc-timeout ---------------------------------------------- */

/**
 * Percent-encodes a status message for the grpc-message header: bytes outside 0x20..0x7e and
 * '%' become "%XX" (PROTOCOL-HTTP2.md). At most GS_GRPC_MAX_STATUS_MESSAGE_BYTES input bytes
 * are encoded.
 * @param out  receives a malloc'd NUL-terminated string.
 * @return GS_OK; GS_ENOMEM (*out NULL).
 */
int gs__grpc_percent_encode(const char *in, size_t in_len, char **out);

/**
 * Decodes a grpc-message value: "%XX" with two hex digits becomes that byte, everything else
 * (including malformed escapes) is kept as it is, so decoding never fails. At most
 * GS_GRPC_MAX_STATUS_MESSAGE_BYTES output bytes are kept.
 * @param out  receives a malloc'd NUL-terminated string (embedded NUL bytes end it early).
 * @return GS_OK; GS_ENOMEM (*out NULL).
 */
int gs__grpc_percent_decode(const char *in, size_t in_len, char **out);

/**
 * Parses a grpc-status value: 1 to 9 ASCII digits.
 * @return the value, or -1 when the text is not such a number.
 */
int gs__grpc_status_parse(const char *v, size_t len);

/** Formats a grpc-timeout value for timeout_ms > 0 ("250m", or "100000S" when large). */
void gs__grpc_timeout_format(int timeout_ms, char out[16]);

/** gRPC status for a stream reset with an HTTP/2 error code (PROTOCOL-HTTP2.md table). */
int gs__grpc_status_from_h2(uint32_t h2_error);

/** gRPC status for a non-200 HTTP status without grpc-status (http-grpc-status-mapping.md). */
int gs__grpc_status_from_http(int http_status);

/** True when a content-type value is "application/grpc" or starts with "application/grpc+"
 * or "application/grpc;". */
bool gs__grpc_content_type_ok(const char *v, size_t len);

/* ---- server hooks for tests and fuzzing --------------------------------------------------- */

/** One server connection (server.c). */
struct gs__grpc_conn;

/**
 * Adds a connection to the server that is driven from memory: bytes from the "client" are
 * passed in with gs__grpc_conn_feed, and what the server writes is appended to *capture
 * (bounded by its max; excess is dropped) or thrown away when capture is NULL.
 * @param capture  borrowed until gs__grpc_conn_close; may be NULL.
 * @return GS_OK; GS_ENOMEM; GS_ELIMIT at the server's max_connections (no eviction here).
 */
int gs__grpc_server_mem_conn(struct gs_grpc_server *srv, struct gs__buf *capture,
                             struct gs__grpc_conn **out);

/**
 * Feeds bytes to a memory connection as if read from its socket, lets the server write its
 * answers and runs pending close callbacks.
 * @return GS_OK; GS_EPARSE when the connection has failed (garbage, protocol error) or was
 *         closed by the server; it stays allocated until gs__grpc_conn_close.
 */
int gs__grpc_conn_feed(struct gs__grpc_conn *conn, const uint8_t *data, size_t len);

/** Closes a memory connection (streams get GS_GRPC_CLOSE_DISCONNECTED) and frees it. */
void gs__grpc_conn_close(struct gs__grpc_conn *conn);

/* ---- client hook for tests ---------------------------------------------------------------- */

/**
 * gs_grpc_client_unary with the request body sent verbatim (no framing added) and a chosen
 * content-type, so tests can send malformed framing or wrong media types.
 * @param content_type  NULL sends no content-type header.
 */
int gs__grpc_client_unary_raw(struct gs_grpc_client *c, const char *method, const void *body,
                              size_t body_len, const char *content_type, int timeout_ms,
                              struct gs_grpc_result *out);

#endif /* GPUSCHED_RPC_INT_H */
