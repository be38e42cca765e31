/*
 * Formatting of the readers' diagnostic (contract in include/gpusched/diag.h).
 */
#include "gpusched/diag.h"

#include "gpusched/compiler.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

/* Appends to a bounded buffer as snprintf would, keeping the total that was wanted. */
GS_PRINTF(4, 5)
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    size_t at = *len < cap ? *len : cap;
    va_start(ap, fmt);
    int k = vsnprintf(buf ? buf + at : NULL, cap - at, fmt, ap);
    va_end(ap);
    if (k > 0)
        *len += (size_t)k;
}

int gs_diag_format(const struct gs_diag *d, char *buf, size_t cap)
{
    size_t len = 0;
    bool where = false;

    if (buf == NULL)
        cap = 0;
    if (cap > 0)
        buf[0] = '\0';
    if (d->file[0] != '\0' || d->line > 0) {
        append(buf, cap, &len, "%s", d->file[0] != '\0' ? d->file : "<input>");
        where = true;
    }
    if (d->line > 0) {
        append(buf, cap, &len, ":%" PRIu64, d->line);
        if (d->column > 0)
            append(buf, cap, &len, ":%" PRIu32, d->column);
    }
    if (where)
        append(buf, cap, &len, ": ");
    if (d->field[0] != '\0')
        append(buf, cap, &len, "field '%s': ", d->field);
    append(buf, cap, &len, "%s", d->msg);
    return len > INT32_MAX ? INT32_MAX : (int)len;
}
