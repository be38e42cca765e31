/*
 * The one diagnostic of the readers of outside text (traces, queue configuration, fake GPU
 * nodes, the device-plugin configuration): where a read failed and why. It belongs to the
 * utility layer (src/util), below every other, so that a reader in any layer can fill it
 * without linking the layer that happened to define it first.
 *
 * Thread-safety: gs_diag_format() keeps no state; separate calls may run concurrently.
 */
#ifndef GPUSCHED_DIAG_H
#define GPUSCHED_DIAG_H

#include <stddef.h>
#include <stdint.h>

/** Where and why a read failed. Caller storage; filled on error. */
struct gs_diag {
    char file[256];  /**< file name as given (truncated if longer) */
    uint64_t line;   /**< 1-based line; 0 when the problem is the whole file */
    uint32_t column; /**< 1-based column (field number or byte column, as the reader says);
                          0 when not about one place on the line */
    char field[32];  /**< name of the field concerned (cut to 31 bytes); "" when none */
    char msg[256];   /**< what is wrong, one sentence without trailing period */
};

/**
 * Formats a diagnostic as "FILE:LINE:COLUMN: field 'F': MSG", leaving out ":LINE" when line is 0,
 * ":COLUMN" when line or column is 0, "field 'F': " when field is "", and "FILE: " when file is
 * "" and line is 0 (with a line, an empty file name is written "<input>").
 * @param d    the diagnostic (borrowed).
 * @param buf  receives the text, NUL-terminated, truncated to cap bytes; may be NULL when cap is 0.
 * @param cap  bytes at buf.
 * @return the length snprintf would have written (capped at INT32_MAX).
 */
int gs_diag_format(const struct gs_diag *d, char *buf, size_t cap);

#endif /* GPUSCHED_DIAG_H */
