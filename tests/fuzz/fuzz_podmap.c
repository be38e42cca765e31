/*
 * libFuzzer target for the cgroup path parser (gs_podmap_parse_cgroup(), what the agent reads
 * from /proc/<pid>/cgroup to find a GPU process's pod). Besides the sanitizers' checks it
 * asserts what the parser promises: GS_OK with a non-empty pod UID of hex digits and dashes
 * and a container ID of hex digits (or empty), both NUL-terminated inside their buffers; or
 * GS_ENOENT with the entry zeroed. The same bytes parsed twice give the same answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/podmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static int only(const char *s, const char *set)
{
    return strspn(s, set) == strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_podmap_entry e, again;
    int rc = gs_podmap_parse_cgroup((const char *)data, size, &e);
    check(rc == GS_OK || rc == GS_ENOENT);
    check(memchr(e.pod_uid, '\0', sizeof e.pod_uid) != NULL);
    check(memchr(e.container_id, '\0', sizeof e.container_id) != NULL);
    if (rc == GS_OK) {
        check(e.pod_uid[0] != '\0' && only(e.pod_uid, "0123456789abcdefABCDEF-"));
        check(only(e.container_id, "0123456789abcdefABCDEF"));
    } else {
        check(e.pod_uid[0] == '\0' && e.container_id[0] == '\0');
    }
    check(gs_podmap_parse_cgroup((const char *)data, size, &again) == rc);
    check(memcmp(&e, &again, sizeof e) == 0);
    return 0;
}
