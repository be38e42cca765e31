/*
 * File helpers of the utility layer (src/util, below every other), shared by the readers of
 * outside input (queue configuration, fake GPU node, agent configuration) and the commands that
 * write results. Internal: not part of the public API. Only what the C library does not give in
 * one call.
 */
#ifndef GPUSCHED_UTIL_FILE_H
#define GPUSCHED_UTIL_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpusched/diag.h" /* struct gs_diag */

/**
 * Reads a whole file into memory, refusing files over a bound.
 * @param path       file to read.
 * @param max_bytes  largest accepted size; one byte more is read so that a file that grew, or
 *                   a pipe, is still caught.
 * @param buf        receives a malloc'd buffer of *len bytes plus a NUL (caller frees); NULL on
 *                   failure.
 * @param diag       on failure gets the file name and "cannot open: REASON", "cannot read:
 *                   REASON" or "file is N bytes, over the limit of M"; may be NULL.
 * @return GS_OK; GS_EIO (open, read, too big); GS_ENOMEM.
 */
int gs__read_file(const char *path, size_t max_bytes, char **buf, size_t *len,
                  struct gs_diag *diag);

/**
 * Creates a directory and its missing parents (mkdir -p), mode 0777 less the umask.
 * @return 0, or -1 with errno set (an existing non-directory gives ENOTDIR).
 */
int gs__mkdir_p(const char *dir);

/** The file naming the files of the last result set in an output directory, one per line. */
#define GS_MANIFEST "MANIFEST"

/**
 * Creates a staging directory inside `dir` (`dir/.gpusched-XXXXXX`) where a command writes its
 * whole set of results before gs__stage_commit() moves them into place, so a failure part way
 * leaves the previous set as it was. First removes the `.gpusched-*` stages that interrupted
 * runs left in `dir` (so two runs must not write into one directory at once). Until the stage is
 * committed or discarded, SIGINT, SIGTERM and SIGHUP (unless ignored at the time) stop the
 * gnuplot child named by gs__stage_child(), remove the stage and end the process with the same
 * signal. One stage at a time per process has this protection.
 * @return a malloc'd path (caller frees), or NULL with errno set.
 */
char *gs__stage_open(const char *dir);

/** Names the child process (gnuplot) the signal handler stops first; 0 for none. */
void gs__stage_child(pid_t pid);

/**
 * Adds a child process that writes into the stage (a plot drawn in parallel): on a signal the
 * handler sends it SIGTERM and waits for it before removing the stage. At most 32 at once.
 * @return true; false when 32 are named already (the caller should wait for one first).
 */
bool gs__stage_child_add(pid_t pid);

/** Forgets a child named by gs__stage_child_add() (after waiting for it). */
void gs__stage_child_del(pid_t pid);

/** In a child just forked: forgets the parent's children (they are not its own). */
void gs__stage_children_forget(void);

/** What gs__stage_commit() found in `dir`. Plain value record. */
struct gs__stage_report {
    bool had_set;            /**< `dir` held an earlier set (its MANIFEST) */
    uint32_t replaced;       /**< files of the earlier set this set wrote again */
    uint32_t removed;        /**< files of the earlier set this set does not write: removed */
    char removed_names[512]; /**< their names, comma-separated (cut short with "..."), or "" */
    char unvouched[512];     /**< other regular files no manifest vouched for (left in place),
                                  comma-separated, or "" */
};

/**
 * Commits the stage as one result set: writes `MANIFEST` (the stage's file names, sorted) into
 * it, moves every other file into `dir` (rename, replacing files of the same name), removes the
 * regular files that the previous `dir/MANIFEST` listed and this set does not hold, moves the
 * manifest in last, and removes `stage`. The stage is on the same file system, so each move is
 * atomic.
 * @param rep  receives what was replaced, removed and left (see struct gs__stage_report); may be
 *             NULL.
 * @return 0, or -1 with a message in err (files not yet moved stay in the stage, then removed).
 */
int gs__stage_commit(const char *stage, const char *dir, char *err, size_t cap,
                     struct gs__stage_report *rep);

/**
 * mkstemp(), then gives the file the mode an ordinary open would: 0666 less the umask (mkstemp
 * alone makes it 0600 whatever the umask). Reads the umask by setting it and back, so call it
 * only while no other thread creates files.
 * @return the open descriptor, or -1 with errno set (no file left behind).
 */
int gs__mkstemp_shared(char *tmpl);

/** Removes a staging directory and every file in it. NULL is a no-op. */
void gs__stage_discard(const char *stage);

#endif /* GPUSCHED_UTIL_FILE_H */
