/*
 * Object names as Kubernetes checks them, for every layer that accepts one from outside (queue
 * and PriorityClass names in the queue configuration, the engine, the scheduler). Part of the
 * utility layer (src/util).
 *
 * A DNS-1123 subdomain (Kubernetes apimachinery IsDNS1123Subdomain, which checks the names of
 * PriorityClasses, Namespaces' objects and most others): 1 to 253 characters, each a lower-case
 * ASCII letter, a digit, '-' or '.', starting and ending with a letter or digit, and, since it
 * is a dotted list of RFC 1123 labels, every dot-separated label also starting and ending with a
 * letter or digit ("a.-b", "a..b" are refused). Kubernetes' own regular expression is
 * [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*
 * https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names
 *
 * Thread-safety: pure functions.
 */
#ifndef GPUSCHED_NAMES_H
#define GPUSCHED_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/** Longest DNS-1123 subdomain, characters (bytes). */
#define GS_NAME_SUBDOMAIN_MAX 253u

/**
 * Checks a name against the DNS-1123 subdomain rule above.
 * @param s    the name's bytes (borrowed; need not be NUL-terminated; a NUL byte is refused).
 * @param len  bytes at s.
 * @param why  on a refusal receives one sentence without trailing period naming the first
 *             problem: "empty name", "name is N characters, over the limit of 253", "character
 *             'X' (byte 0xNN) at position P is not allowed: a name is lower-case letters,
 *             digits, '-' and '.'", "a name must start with a lower-case letter or a digit",
 *             "a name must end with a lower-case letter or a digit", or "each '.'-separated part
 *             of a name must start and end with a lower-case letter or a digit (position P)"
 *             (positions 1-based); may be NULL.
 * @param cap  bytes at why.
 * @return true when the name is valid.
 */
bool gs_name_is_dns1123_subdomain(const char *s, size_t len, char *why, size_t cap);

#endif /* GPUSCHED_NAMES_H */
