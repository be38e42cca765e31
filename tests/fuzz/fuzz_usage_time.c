/*
 * libFuzzer target for the report's time parser (gs_usage_parse_time(), the --from, --to and
 * --start-time values). Besides the sanitizers' checks it asserts a round trip: a time that
 * parses, formatted as RFC 3339 UTC and parsed again, gives the same instant cut to the whole
 * second, and the formatted text is exactly 20 characters ("YYYY-MM-DDTHH:MM:SSZ"). A broken
 * promise aborts, which the fuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/usage_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[64];
    if (size >= sizeof(buf))
        return 0; /* the parser reads short command-line values */
    memcpy(buf, data, size);
    buf[size] = '\0';
    int64_t ms;
    int rc = gs_usage_parse_time(buf, &ms);
    check(rc == GS_OK || rc == GS_EPARSE);
    if (rc != GS_OK)
        return 0;
    char text[40];
    gs_usage_format_time(ms, text, sizeof(text));
    int64_t again;
    /* Years 0000..9999 with an offset can fall outside them; those need not round-trip. */
    if (text[0] == '-' || strlen(text) != 20)
        return 0;
    check(gs_usage_parse_time(text, &again) == GS_OK);
    int64_t floor_s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    check(again == floor_s * 1000);
    return 0;
}
