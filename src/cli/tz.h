/*
 * `--tz` of the report commands: UTC, a fixed offset, or an IANA time zone name
 * ("Europe/Berlin") read from the C library's tz database (Debian's tzdata package), with the
 * zone's offset worked out per time so that DST applies to each printed time on its own.
 *
 * Uses the process's TZ environment variable and tzset(3): the CLI is one thread when it
 * reports, and the core and the usage library never read the process's zone.
 */
#ifndef GPUSCHED_CLI_TZ_H
#define GPUSCHED_CLI_TZ_H

#include <stddef.h>
#include <stdint.h>

/** A parsed --tz value. Plain value; holds no resource. */
struct gs__cli_tz {
    char name[128];     /**< the IANA name, "" for UTC or a fixed offset */
    int32_t offset_min; /**< a fixed offset, minutes east of UTC (name ""); 0 for UTC */
};

/**
 * Reads a --tz value: "UTC", "Z", "+HH:MM" / "-HH:MM" (gs_usage_parse_tz()), or an IANA zone
 * name such as "Europe/Berlin" or "America/New_York", which must be a TZif file of the tz
 * database (under $TZDIR, else /usr/share/zoneinfo). A name sets the process's TZ to it.
 * @param s    the value; borrowed.
 * @param tz   receives it.
 * @param msg  receives why not on failure (cap bytes), e.g. "unknown time zone 'Mars/Olympus'
 *             (no /usr/share/zoneinfo/Mars/Olympus; install tzdata, or give UTC or +01:00)".
 * @return GS_OK; GS_EPARSE (neither form; a name with "..", a leading '/' or characters a zone
 *         name has not; a file that is missing or not a TZif file).
 */
int gs__cli_tz_parse(const char *s, struct gs__cli_tz *tz, char *msg, size_t cap);

/**
 * The offset from UTC of a parsed zone at a time, for gs_usage_report_options.tz_offset_at.
 * @param ms   Unix ms.
 * @param ctx  a struct gs__cli_tz * from gs__cli_tz_parse(); borrowed.
 * @return minutes east of UTC at that instant (the zone's DST rule applied; a historical offset
 *         of whole seconds is truncated to minutes); the fixed offset without a name.
 */
int32_t gs__cli_tz_offset_at(int64_t ms, void *ctx);

#endif /* GPUSCHED_CLI_TZ_H */
