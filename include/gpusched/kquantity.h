/*
 * Kubernetes resource quantities ("500m", "16Gi", "1.5", "2e3") and RFC 3339 times, as the API
 * writes them (k8s.io/apimachinery/pkg/api/resource Quantity; metav1.Time).
 *
 * A quantity is a signed decimal number (digits, an optional fraction, an optional exponent
 * `e`/`E`) followed by at most one suffix: the decimal SI suffixes n u m "" k M G T P E or the
 * binary suffixes Ki Mi Gi Ti Pi Ei. Conversions round as the caller asks: requests round up
 * (a pod asking 0.1 milli-core asks 1), capacities round down.
 */
#ifndef GPUSCHED_KQUANTITY_H
#define GPUSCHED_KQUANTITY_H

#include <stdbool.h>
#include <stdint.h>

/**
 * Converts a quantity to a whole number of `unit`s.
 * @param s      the quantity text, NUL-terminated; leading and trailing blanks are refused.
 * @param unit   the unit as a multiple of the base (1e-3 for milli-cores, 1048576.0 for MiB,
 *               1.0 for counts).
 * @param round_up  true: ceiling (requests); false: floor (capacity).
 * @param out    receives the value.
 * @return 0; -1 when the text is not a quantity, is negative, or does not fit in int64.
 */
int gs_kquantity(const char *s, double unit, bool round_up, int64_t *out);

/**
 * Parses an RFC 3339 time ("2026-12-01T20:03:27Z", fractions and offsets allowed) into
 * milliseconds since the Unix epoch.
 * @return 0; -1 for text that is not such a time.
 */
int gs_ktime_ms(const char *s, int64_t *out);

#endif /* GPUSCHED_KQUANTITY_H */
