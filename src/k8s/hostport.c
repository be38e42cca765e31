/*
 * Listen addresses "HOST:PORT" (contract in hostport.h), shared by schedmetrics.c and
 * webhook_http.c.
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo */

#include "hostport.h"

#include "gpusched/err.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int gs__hostport_resolve(const char *addr, struct addrinfo **out)
{
    *out = NULL;
    if (!addr)
        return GS_EINVAL;
    const char *colon = strrchr(addr, ':');
    char host[128];
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host) || !colon[1])
        return GS_EINVAL;
    size_t hl = (size_t)(colon - addr);
    const char *h = addr;
    if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || port > 65535 || colon[1] == '-' || colon[1] == '+')
        return GS_EINVAL;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, out) != 0 || *out == NULL) {
        *out = NULL;
        return GS_EINVAL;
    }
    return GS_OK;
}
