/*
 * Internal to the Kubernetes translation (kworld*.c): what of KAI-Scheduler's Queue
 * (scheduling.run.ai/v2) the translation does not read, so that it can say so once per queue
 * (gs_kworld_config.on_warning) instead of dropping it in silence.
 */
#ifndef GPUSCHED_K8S_KWORLD_KAI_H
#define GPUSCHED_K8S_KWORLD_KAI_H

#include <jansson.h>
#include <stddef.h>

/**
 * Lists the fields of a KAI Queue's spec that gpusched ignores: everything but parentQueue and
 * resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight} (for example spec.priority,
 * spec.displayName, spec.preemptMinRuntime, spec.resources.gpu.foo), as paths from the object
 * ("spec.priority"), in the object's key order, separated by ", ".
 * @param spec  the Queue's spec; borrowed; NULL or not an object: nothing is ignored.
 * @param buf   receives the list, NUL-terminated ("" when none); a list longer than cap - 1
 *              bytes ends in "..." within cap (cap >= 4).
 * @param cap   bytes of buf.
 * @return the number of fields ignored (0: buf is "").
 */
unsigned gs__kai_queue_ignored(const json_t *spec, char *buf, size_t cap);

#endif /* GPUSCHED_K8S_KWORLD_KAI_H */
