/*
 * Inside src/usage: the plain HTTP GET under `report ingest --agent` (prom.c).
 */
#ifndef GPUSCHED_USAGE_PROM_INT_H
#define GPUSCHED_USAGE_PROM_INT_H

#include <stddef.h>

/**
 * GETs url with libcurl as gs_prom_query_range() does (no proxy, no redirects, a body of at
 * most 512 MiB).
 * @param body  receives the body, NUL-terminated, owned by the caller (free()); NULL on failure.
 * @param len   receives its length.
 * @return GS_OK; GS_EINVAL (bad URL); GS_EIO; GS_ETIMEDOUT; GS_EHTTP (a status other than 200);
 *         GS_ENOMEM; msg names the URL.
 */
int gs__prom_get(const char *url, long timeout_ms, char **body, size_t *len, char *msg, size_t cap);

#endif /* GPUSCHED_USAGE_PROM_INT_H */
