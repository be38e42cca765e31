/*
 * Kubernetes object name checks (contract in include/gpusched/names.h).
 */
#include "gpusched/names.h"

#include <stdio.h>

static bool alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool gs_name_is_dns1123_subdomain(const char *s, size_t len, char *why, size_t cap)
{
    if (why == NULL)
        cap = 0;
    if (len == 0) {
        if (cap > 0)
            (void)snprintf(why, cap, "empty name");
        return false;
    }
    if (len > GS_NAME_SUBDOMAIN_MAX) {
        if (cap > 0)
            (void)snprintf(why, cap, "name is %zu characters, over the limit of %u", len,
                           GS_NAME_SUBDOMAIN_MAX);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!alnum_lower(c) && c != '-' && c != '.') {
            unsigned char b = (unsigned char)c;
            if (cap > 0)
                (void)snprintf(why, cap,
                               "character '%c' (byte 0x%02x) at position %zu is not allowed: a "
                               "name is lower-case letters, digits, '-' and '.'",
                               b >= 0x20 && b < 0x7f ? c : '?', (unsigned)b, i + 1);
            return false;
        }
    }
    if (!alnum_lower(s[0])) {
        if (cap > 0)
            (void)snprintf(why, cap, "a name must start with a lower-case letter or a digit");
        return false;
    }
    if (!alnum_lower(s[len - 1])) {
        if (cap > 0)
            (void)snprintf(why, cap, "a name must end with a lower-case letter or a digit");
        return false;
    }
    for (size_t i = 1; i + 1 < len; i++) {
        if (s[i] == '.' && (!alnum_lower(s[i - 1]) || !alnum_lower(s[i + 1]))) {
            if (cap > 0)
                (void)snprintf(why, cap,
                               "each '.'-separated part of a name must start and end with a "
                               "lower-case letter or a digit (position %zu)",
                               i + 1);
            return false;
        }
    }
    return true;
}
