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
#include <stddef.h>
#include <stdint.h>

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

/** How a command writes its log lines (--log-format). */
enum gs_log_format {
    GS_LOG_FORMAT_TEXT = 0, /**< "TIME LEVEL MESSAGE" (gs_log_stderr_stamped) */
    GS_LOG_FORMAT_JSON = 1, /**< one JSON object per line (gs_log_stderr_json) */
};

/**
 * Reads a --log-format value.
 * @param name  "text" or "json" (exactly; borrowed); NULL is refused.
 * @param out   receives the format; unchanged on failure.
 * @return GS_OK, or GS_EINVAL for any other name.
 */
int gs_log_format_parse(const char *name, enum gs_log_format *out);

/**
 * Longest JSON line gs_log_json_format() writes, its NUL included: every byte of a
 * GS_LOG_LINE_MAX message escaped to six ("\u00XX"), as are the three lifted values and a
 * level and component of 127 bytes, plus the fixed fields. A buffer this large always takes
 * the whole object.
 */
#define GS_LOG_JSON_MAX (6 * GS_LOG_LINE_MAX + 6 * 5 * 128 + 256)

/**
 * The keys lifted from a message into fields of their own: the first "KEY=VALUE" token
 * (KEY at the message's start or after a space or '(', VALUE up to the next space, ',', ';'
 * or ')', a trailing ':' or '.' cut off, at most 127 bytes) for each of pod (as "NS/NAME"),
 * node and queue. A message that names none has none of those fields.
 */
#define GS_LOG_JSON_KEYS                                                                           \
    {                                                                                              \
        "pod", "node", "queue"                                                                     \
    }

/**
 * Formats one log line as a JSON object (RFC 8259) without a line end:
 * {"ts":"2026-12-01T22:47:43.123Z","level":LEVEL,"component":COMPONENT,"msg":MSG,
 *  "pod":...,"node":...,"queue":...} where ts is wall_ms in UTC to the millisecond, component
 * is left out when NULL, and the last three follow GS_LOG_JSON_KEYS. Strings are escaped as
 * RFC 8259 asks (quote, backslash, control characters); a byte that does not begin a valid
 * UTF-8 sequence (as a message cut at GS_LOG_LINE_MAX may end) becomes U+FFFD, so the
 * output is always valid UTF-8.
 * @param buf        receives the object, NUL-terminated (cap >= 1).
 * @param cap        bytes at buf; GS_LOG_JSON_MAX always suffices for a message of at most
 *                   GS_LOG_LINE_MAX - 1 bytes and a level and component of at most 127.
 * @param wall_ms    the time of the line, milliseconds since the Unix epoch (>= 0).
 * @param level      "info", "warn", "error"...; NULL writes "info". Borrowed.
 * @param component  the program part ("scheduler", "agent"); NULL: no such field. Borrowed.
 * @param msg        the message text (NUL-terminated). Borrowed.
 * @return GS_OK; GS_ERANGE when the object did not fit in cap (buf then holds "" and nothing
 *         half-written); GS_EINVAL for a NULL buf or msg or a zero cap.
 */
int gs_log_json_format(char *buf, size_t cap, int64_t wall_ms, const char *level,
                       const char *component, const char *msg);

/** Where gs_log_stderr_json() takes the level and component of its lines; borrowed. */
struct gs_log_json_sink {
    const char *level;     /**< "info", "warn", "error"; NULL: "info" */
    const char *component; /**< "scheduler", "agent"; NULL: no component field */
};

/**
 * A sink that writes one gs_log_json_format() object and "\n" to stderr, stamped with the
 * wall clock (CLOCK_REALTIME); ctx is a struct gs_log_json_sink (NULL: level info, no
 * component). One stdio call per line, as the other sinks.
 */
void gs_log_stderr_json(void *ctx, const char *line);

#endif /* GPUSCHED_LOG_H */
