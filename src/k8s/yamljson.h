/*
 * YAML or JSON text into a jansson value (internal to src/k8s and the commands that read
 * Kubernetes objects from files).
 */
#ifndef GPUSCHED_K8S_YAMLJSON_H
#define GPUSCHED_K8S_YAMLJSON_H

#include <jansson.h>
#include <stddef.h>

/**
 * Parses one YAML document (JSON included) into a new jansson value.
 * @param file  the name used in messages; may be NULL.
 * @param out   receives a new reference (caller decrefs); an empty document gives JSON null.
 * @param err   receives "FILE:LINE:COL: what" on failure.
 * Read with the shared YAML walker (src/util/yaml.h) under this reader's limits: 1 GiB of text,
 * 10^8 nodes, nesting to 64 levels, no aliases, tags allowed (a tagged scalar stays a string).
 * @return 0, or -1 (bad YAML, an alias, nesting past 64 levels, two documents, too big, out of
 *         memory).
 */
int gs_yaml_to_json(const char *file, const char *text, size_t len, json_t **out, char *err,
                    size_t cap);

#endif /* GPUSCHED_K8S_YAMLJSON_H */
