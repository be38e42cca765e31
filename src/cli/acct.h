/*
 * `gpusched replay --accounting FILE`: the replay's engine events into the usage store
 * (usage.h) through the recorder. Internal to the CLI.
 */
#ifndef GPUSCHED_CLI_ACCT_H
#define GPUSCHED_CLI_ACCT_H

#include <stdint.h>

#include "gpusched/qconfig.h"
#include "gpusched/replay.h"

struct gs__replay_acct;

/**
 * Opens (creates) the store at `path` and a recorder whose times are start_ms + replay time, and
 * points cfg's taps at it.
 * @param qc   the queue configuration (PriorityClass names of the pods); borrowed, outlives it.
 * @param msg  receives a sentence naming the file on failure.
 * @return GS_OK; the store's errors (gs_usage_open()); GS_ENOMEM.
 */
int gs__replay_acct_open(const char *path, int64_t start_ms, const struct gs_qconfig *qc,
                         struct gs_replay_config *cfg, struct gs__replay_acct **out, char *msg,
                         size_t cap);

/**
 * Ends the recording at replay time end_ms, commits and closes the store, frees `a`.
 * @param intervals  receives the number of allocation intervals in the file; may be NULL.
 * @return GS_OK, or the first error of the recording (msg says it).
 */
int gs__replay_acct_close(struct gs__replay_acct *a, int64_t end_ms, uint64_t *intervals, char *msg,
                          size_t cap);

#endif /* GPUSCHED_CLI_ACCT_H */
