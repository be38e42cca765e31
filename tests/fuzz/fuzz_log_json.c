/*
 * libFuzzer target for the JSON log line (gs_log_json_format(), src/util/log.c), which escapes
 * a message that may carry outside text (API server answers, object names) and lifts its pod=,
 * node= and queue= tokens. Besides the sanitizers' checks it asserts what the header promises:
 * with a GS_LOG_JSON_MAX buffer every message of at most GS_LOG_LINE_MAX - 1 bytes formats
 * (GS_OK); the line is one JSON object that jansson parses (jansson refuses invalid UTF-8, so
 * this checks that too); msg is a string as long as the input or longer (U+FFFD is three bytes
 * for one); and each lifted field is a string found in msg. A broken promise aborts, which the
 * fuzzer reports as a crash.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char msg[GS_LOG_LINE_MAX];
    static char out[GS_LOG_JSON_MAX];
    size_t n = size < sizeof(msg) - 1 ? size : sizeof(msg) - 1;
    memcpy(msg, data, n);
    msg[n] = '\0';
    n = strlen(msg); /* a NUL in the input ends the message, as it ends a C string */
    check(gs_log_json_format(out, sizeof(out), 1764705600123LL, "info", "scheduler", msg) == GS_OK);
    json_error_t err;
    json_t *obj = json_loads(out, 0, &err);
    check(obj != NULL && json_is_object(obj));
    check(json_is_string(json_object_get(obj, "ts")));
    check(json_is_string(json_object_get(obj, "level")));
    json_t *m = json_object_get(obj, "msg");
    check(json_is_string(m) && json_string_length(m) >= n);
    static const char *const keys[] = GS_LOG_JSON_KEYS;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        json_t *v = json_object_get(obj, keys[k]);
        if (v == NULL)
            continue;
        check(json_is_string(v) && json_string_length(v) > 0 &&
              json_string_length(v) <= (size_t)127 * 3);
        check(strstr(json_string_value(m), json_string_value(v)) != NULL);
    }
    json_decref(obj);
    return 0;
}
