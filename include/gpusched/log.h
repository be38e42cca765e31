/*
 * One logging interface for every layer that logs (the gRPC server, the node agent, the
 * Kubernetes scheduler and the commands): a library never writes to a stream itself, it formats
 * one line and hands it to a sink, a function pointer and its context chosen by whoever embeds
 * it; the commands pick one of the two stderr sinks below. Part of the utility layer (src/util).
 *
 * A line is at most GS_LOG_LINE_MAX - 1 bytes (longer text is cut) and carries no line end; the
 * sink adds what its medium needs.
 *
 * Thread-safety: gs_log()/gs_vlog() keep no state and may run concurrently; a sink called from
 * several threads must be safe for that (the two below are: each writes its line with one
 * stdio call, which locks the stream).
 */
#ifndef GPUSCHED_LOG_H
#define GPUSCHED_LOG_H

#include <stdarg.h>

#include "gpusched/compiler.h"

/** Longest line handed to a sink, bytes, its NUL included. */
#define GS_LOG_LINE_MAX 2048

/**
 * A log sink: receives one line (NUL-terminated, no line end, borrowed for the call).
 * @param ctx  the context registered with the sink.
 */
typedef void (*gs_log_fn)(void *ctx, const char *line);

/**
 * Formats one line and hands it to fn(ctx, line). A NULL fn drops the line (logging off).
 * @param fmt  printf format; the text is cut to GS_LOG_LINE_MAX - 1 bytes.
 */
void gs_log(gs_log_fn fn, void *ctx, const char *fmt, ...) GS_PRINTF(3, 4);

/** As gs_log() with a va_list (consumed). */
void gs_vlog(gs_log_fn fn, void *ctx, const char *fmt, va_list ap) GS_PRINTF(3, 0);

/** A sink that writes "LINE\n" to stderr; ctx is unused. */
void gs_log_stderr_plain(void *ctx, const char *line);

/**
 * A sink that writes "2026-12-01T22:47:43.123Z PREFIX LINE\n" to stderr: the UTC wall-clock time
 * to the millisecond, then ctx as a NUL-terminated prefix (a level such as "info", or "agent:");
 * a NULL ctx writes "TIME LINE\n".
 */
void gs_log_stderr_stamped(void *ctx, const char *line);

#endif /* GPUSCHED_LOG_H */
