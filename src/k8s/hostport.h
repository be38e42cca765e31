/*
 * "HOST:PORT" listen addresses of the scheduler's servers (/metrics and the webhook), read one
 * way for both. Internal to src/k8s.
 */
#ifndef GPUSCHED_K8S_HOSTPORT_H
#define GPUSCHED_K8S_HOSTPORT_H

#include <netdb.h>

/**
 * Resolves a listen address: a numeric host ("127.0.0.1", "0.0.0.0", "[::1]", "[::]") and a
 * port 0..65535 (0: the system picks one).
 * @param addr  the text; borrowed.
 * @param out   receives a getaddrinfo() list (release with freeaddrinfo()); its first entry is
 *              the address to bind, SOCK_STREAM.
 * @return GS_OK; GS_EINVAL (no colon, empty host or port, a name rather than a number, a port
 *         out of range).
 */
int gs__hostport_resolve(const char *addr, struct addrinfo **out);

#endif /* GPUSCHED_K8S_HOSTPORT_H */
