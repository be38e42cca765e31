/*
 * The accounting store (include/gpusched/usage.h): one SQLite file in WAL mode, a schema brought
 * up by numbered migrations (PRAGMA user_version), writes batched in transactions with a
 * heartbeat per commit, and the recovery of intervals a crashed writer left open.
 *
 * Every SQLite error becomes a message that names the file; nothing here aborts on outside
 * input (a foreign, newer or corrupt file is refused with a sentence).
 */
#define _DEFAULT_SOURCE /* flock(2), pread, ftruncate */
#include "gpusched/usage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "gpusched/charge.h"
#include "gpusched/err.h"

/* The application id we put in gs_meta; a database without it is not ours. */
#define USAGE_APP "gpusched-usage"

/*
 * Migrations, in order: migration k brings user_version from k-1 to k. Never edit one that has
 * shipped; add the next. Each runs in one transaction with its user_version bump.
 */
static const char *const migrations[] = {
    /* 1: the first schema. */
    "CREATE TABLE gs_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT INTO gs_meta VALUES('application', '" USAGE_APP "');"
    "CREATE TABLE allocation("
    "  id INTEGER PRIMARY KEY,"
    "  pod_uid TEXT NOT NULL, namespace TEXT, name TEXT, queue TEXT, queue_path TEXT,"
    "  team TEXT, priority_class TEXT, node TEXT, model TEXT,"
    "  num_gpu INTEGER NOT NULL, gpus_charged REAL NOT NULL,"
    "  queued_ms INTEGER, start_ms INTEGER NOT NULL, end_ms INTEGER, end_reason TEXT,"
    "  evicted_by TEXT, UNIQUE(pod_uid, start_ms));"
    "CREATE INDEX allocation_start ON allocation(start_ms);"
    "CREATE TABLE allocation_gpu("
    "  allocation_id INTEGER NOT NULL, gpu_index INTEGER NOT NULL, gpu_uuid TEXT,"
    "  sharing TEXT NOT NULL, gpu_milli INTEGER NOT NULL, mem_mib INTEGER NOT NULL,"
    "  mig_profile TEXT, mig_instance INTEGER, replica_slot INTEGER, charged REAL NOT NULL,"
    "  PRIMARY KEY(allocation_id, gpu_index)) WITHOUT ROWID;"
    "CREATE TABLE capacity("
    "  id INTEGER PRIMARY KEY, node TEXT NOT NULL, model TEXT, gpu_index INTEGER NOT NULL,"
    "  gpu_uuid TEXT, healthy INTEGER NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER,"
    "  end_reason TEXT);"
    "CREATE TABLE quota_snapshot("
    "  t_ms INTEGER NOT NULL, queue TEXT NOT NULL, queue_path TEXT, gpu_quota_milli INTEGER,"
    "  gpu_limit_milli INTEGER, gpu_fair_milli INTEGER, gpu_allocated_milli INTEGER);"
    "CREATE INDEX quota_snapshot_t ON quota_snapshot(t_ms);"
    "CREATE TABLE util_sample("
    "  t_ms INTEGER NOT NULL, pod_uid TEXT NOT NULL, node TEXT, gpu_index INTEGER,"
    "  util_pct REAL NOT NULL);"
    "CREATE INDEX util_sample_pod ON util_sample(pod_uid, t_ms);"
    "CREATE TABLE heartbeat(id INTEGER PRIMARY KEY CHECK (id = 1), t_ms INTEGER NOT NULL,"
    "  batches INTEGER NOT NULL);",
    /* 2: one utilisation sample per pod, node, GPU and time, so that ingesting a period
     * twice (report ingest) replaces rather than doubles; duplicates of older stores keep
     * their first row. */
    "DELETE FROM util_sample WHERE rowid NOT IN (SELECT min(rowid) FROM util_sample"
    "  GROUP BY pod_uid, node, gpu_index, t_ms);"
    "CREATE UNIQUE INDEX util_sample_key ON util_sample(pod_uid, node, gpu_index, t_ms);",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == GS_USAGE_SCHEMA_VERSION,
               "one migration per schema version");

enum stmt_id {
    ST_BEGIN_IV,
    ST_BEGIN_GPU,
    ST_END_IV,
    ST_BEGIN_CAP,
    ST_END_CAP,
    ST_QUOTA,
    ST_UTIL,
    ST_HEARTBEAT,
    ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN_IV] = "INSERT INTO allocation(pod_uid, namespace, name, queue, queue_path, team,"
                    " priority_class, node, model, num_gpu, gpus_charged, queued_ms, start_ms)"
                    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [ST_BEGIN_GPU] = "INSERT INTO allocation_gpu VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_END_IV] = "UPDATE allocation SET end_ms = ?2, end_reason = ?3, evicted_by = ?4"
                  " WHERE id = ?1 AND end_ms IS NULL AND start_ms <= ?2",
    [ST_BEGIN_CAP] = "INSERT INTO capacity(node, model, gpu_index, gpu_uuid, healthy, start_ms)"
                     " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_END_CAP] = "UPDATE capacity SET end_ms = MAX(start_ms, ?2), end_reason = ?3"
                   " WHERE id = ?1 AND end_ms IS NULL",
    [ST_QUOTA] = "INSERT INTO quota_snapshot VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_UTIL] = "INSERT INTO util_sample VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(pod_uid, node,"
                " gpu_index, t_ms) DO UPDATE SET util_pct = excluded.util_pct",
    [ST_HEARTBEAT] = "INSERT INTO heartbeat VALUES(1, ?1, 1) ON CONFLICT(id) DO UPDATE SET"
                     " t_ms = MAX(t_ms, ?1), batches = batches + 1",
};

struct gs_usage_store {
    sqlite3 *db;
    char *path;                 /* for messages */
    sqlite3_stmt *st[ST_COUNT]; /* prepared once (writers only) */
    bool in_batch;              /* a transaction is open */
    uint32_t batch_events;      /* events in the open batch */
    uint32_t batch_events_max;  /* commit at this many */
    int64_t batch_ms;           /* or this much event time after the last commit */
    int64_t last_commit_ms;     /* event time of the last commit; INT64_MIN before any */
    int64_t last_event_ms;      /* latest event time seen (heartbeat of the next commit) */
    int lock_fd;                /* FILE-writer.lock, flock(LOCK_EX) held (writers); -1 none */
    char *lock_path;            /* its path, owned; NULL without */
    char msg[512];              /* last error */
};

static const char *const end_names[] = {
    [GS_USAGE_END_OPEN] = "open",
    [GS_USAGE_END_FINISHED] = "finished",
    [GS_USAGE_END_PREEMPTED] = "evicted-preemption",
    [GS_USAGE_END_RECLAIMED] = "evicted-reclaim",
    [GS_USAGE_END_GANG] = "evicted-gang",
    [GS_USAGE_END_DELETED] = "deleted",
    [GS_USAGE_END_NODE_LOST] = "node-lost",
    [GS_USAGE_END_RECOVERED] = "recovered",
};

const char *gs_usage_end_name(enum gs_usage_end r)
{
    if ((unsigned)r >= sizeof(end_names) / sizeof(end_names[0]))
        return "?";
    return end_names[r];
}

static const char *const sharing_names[] = {"milli", "timeslice", "mig"};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
set_msg(struct gs_usage_store *s, const char *fmt, ...)
{
    char tail[400];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(tail, sizeof(tail), fmt, ap);
    va_end(ap);
    (void)snprintf(s->msg, sizeof(s->msg), "%s: %s", s->path, tail);
}

/*
 * Takes the single-writer lock: FILE-writer.lock beside the store, flock(LOCK_EX) without
 * waiting, the holder's pid written into it. The kernel drops the lock when the holder exits,
 * however it exits, so a crashed writer never leaves a lock held (only the file, which the next
 * writer takes over). A clean close unlinks the file while still holding the lock; a writer
 * that locked a file unlinked meanwhile (its inode no longer the path's) tries again on the new
 * one, so two writers never hold locks on two different files of one path.
 * GS_OK; GS_ECONFLICT (another process holds it: the message names the lock file and the
 * holder's pid); GS_EIO (cannot create or lock the file); GS_ENOMEM.
 */
static int writer_lock(struct gs_usage_store *s)
{
    size_t n = strlen(s->path) + sizeof("-writer.lock");
    char *lp = malloc(n);
    if (!lp)
        return GS_ENOMEM;
    (void)snprintf(lp, n, "%s-writer.lock", s->path);
    int err = GS_EIO;
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            set_msg(s, "cannot open the writer lock %s: %s", lp, strerror(errno));
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EWOULDBLOCK) {
                char pid[24] = "";
                ssize_t r = pread(fd, pid, sizeof(pid) - 1, 0);
                pid[r > 0 ? r : 0] = '\0';
                pid[strcspn(pid, "\n")] = '\0';
                set_msg(s,
                        "another writer holds %s (pid %s): a store has one writer (a second "
                        "scheduler or replay must write its own file; reports only read)",
                        lp, pid[0] ? pid : "unknown");
                err = GS_ECONFLICT;
            } else {
                set_msg(s, "cannot lock %s: %s", lp, strerror(e));
            }
            (void)close(fd);
            break;
        }
        struct stat held, named;
        if (fstat(fd, &held) != 0 || stat(lp, &named) != 0 || held.st_ino != named.st_ino ||
            held.st_dev != named.st_dev) {
            (void)close(fd); /* unlinked by the writer that held it: take the new file */
            continue;
        }
        char pid[24];
        int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        /* The pid only goes into a refused writer's message; failing to write it is no error. */
        if (ftruncate(fd, 0) == 0)
            (void)!pwrite(fd, pid, (size_t)len, 0);
        s->lock_fd = fd;
        s->lock_path = lp;
        return GS_OK;
    }
    if (err == GS_EIO && !s->msg[0])
        set_msg(s, "cannot take the writer lock %s: it keeps being replaced", lp);
    free(lp);
    return err;
}

/* Drops the single-writer lock, unlinking its file first (while it is still held). */
static void writer_unlock(struct gs_usage_store *s)
{
    if (s->lock_fd < 0)
        return;
    (void)unlink(s->lock_path);
    (void)close(s->lock_fd);
    s->lock_fd = -1;
    free(s->lock_path);
    s->lock_path = NULL;
}

/* A SQLite failure: the message names the file and what SQLite said. */
static int db_fail(struct gs_usage_store *s, const char *what)
{
    int rc = sqlite3_errcode(s->db);
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
        set_msg(s, "%s: the file is not a SQLite database or is corrupt (%s)", what,
                sqlite3_errmsg(s->db));
    else
        set_msg(s, "%s: %s", what, sqlite3_errmsg(s->db));
    return rc == SQLITE_NOMEM ? GS_ENOMEM : GS_EIO;
}

static int exec(struct gs_usage_store *s, const char *sql, const char *what)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(s, what);
    return GS_OK;
}

/* Reads one integer from a query with no parameters. */
static int query_int(struct gs_usage_store *s, const char *sql, int64_t *v, bool *found)
{
    sqlite3_stmt *st = NULL;
    *v = 0;
    if (found)
        *found = false;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, "reading the schema");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int64(st, 0);
        if (found)
            *found = true;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_fail(s, "reading the schema");
    return GS_OK;
}

static int migrate(struct gs_usage_store *s, bool read_only, bool existing_only)
{
    int64_t version, tables, ours;
    bool found;
    int err = query_int(s, "PRAGMA user_version", &version, NULL);
    if (!err)
        err = query_int(s, "SELECT count(*) FROM sqlite_schema", &tables, NULL);
    if (err)
        return err;
    if (version == 0 && tables > 0) {
        set_msg(s,
                "not a gpusched accounting database (it has %lld tables of another "
                "application and no schema version)",
                (long long)tables);
        return GS_EPARSE;
    }
    if (version > 0) {
        err = query_int(s,
                        "SELECT count(*) FROM sqlite_schema WHERE name = 'gs_meta' AND "
                        "type = 'table'",
                        &ours, NULL);
        if (!err && ours)
            err = query_int(s,
                            "SELECT 1 FROM gs_meta WHERE key = 'application' AND "
                            "value = '" USAGE_APP "'",
                            &ours, &found);
        if (err)
            return err;
        if (!ours || !found) {
            set_msg(s,
                    "not a gpusched accounting database (schema version %lld of another "
                    "application)",
                    (long long)version);
            return GS_EPARSE;
        }
        if (version > GS_USAGE_SCHEMA_VERSION) {
            set_msg(s,
                    "schema version %lld is newer than this gpusched knows (%d): use a newer "
                    "gpusched",
                    (long long)version, GS_USAGE_SCHEMA_VERSION);
            return GS_EPARSE;
        }
    }
    if ((read_only || existing_only) && version == 0) {
        set_msg(s, "not a gpusched accounting database (empty)");
        return GS_EPARSE;
    }
    if (read_only) {
        if (version < GS_USAGE_SCHEMA_READ_MIN) {
            set_msg(s,
                    "schema version %lld is older than this gpusched reads (%d): 'gpusched "
                    "report compact' or 'report ingest' on it migrates it",
                    (long long)version, GS_USAGE_SCHEMA_READ_MIN);
            return GS_EPARSE;
        }
        return GS_OK;
    }
    for (int64_t v = version; v < GS_USAGE_SCHEMA_VERSION; v++) {
        char bump[64];
        (void)snprintf(bump, sizeof(bump), "PRAGMA user_version = %lld", (long long)v + 1);
        if ((err = exec(s, "BEGIN IMMEDIATE", "migrating the schema")) != GS_OK)
            return err;
        if ((err = exec(s, migrations[v], "migrating the schema")) != GS_OK ||
            (err = exec(s, bump, "migrating the schema")) != GS_OK ||
            (err = exec(s, "COMMIT", "migrating the schema")) != GS_OK) {
            (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return err;
        }
    }
    return GS_OK;
}

int gs_usage_open(const char *path, const struct gs_usage_options *opt, struct gs_usage_store **out,
                  char *msg, size_t cap)
{
    struct gs_usage_options def = {0};
    if (!opt)
        opt = &def;
    *out = NULL;
    if (msg && cap)
        msg[0] = '\0';
    struct gs_usage_store *s = calloc(1, sizeof(*s));
    if (!s)
        return GS_ENOMEM;
    s->lock_fd = -1;
    int err = GS_ENOMEM;
    s->path = malloc(strlen(path) + 1);
    if (!s->path)
        goto out;
    memcpy(s->path, path, strlen(path) + 1);
    s->batch_events_max = opt->batch_events ? opt->batch_events : 1000;
    s->batch_ms = opt->batch_ms > 0 ? opt->batch_ms : 1000;
    s->last_commit_ms = INT64_MIN;
    s->last_event_ms = INT64_MIN;
    if (!opt->read_only && !opt->alongside_writer && (err = writer_lock(s)) != GS_OK)
        goto out;
    /* NOMUTEX: a store is used from one thread (usage.h), so SQLite's own locks are waste. */
    int flags =
        SQLITE_OPEN_NOMUTEX | (opt->read_only       ? SQLITE_OPEN_READONLY
                               : opt->existing_only ? SQLITE_OPEN_READWRITE
                                                    : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (!s->db) {
            err = GS_ENOMEM;
            goto out;
        }
        struct stat sb;
        int e = sqlite3_system_errno(s->db); /* the OS's reason, 0 when there is none */
        bool existing = opt->read_only || opt->existing_only;
        if (existing && rc == SQLITE_CANTOPEN && stat(path, &sb) != 0 && errno == ENOENT)
            set_msg(s, "no such file (a store is written by 'gpusched replay --accounting FILE', "
                       "'gpusched scheduler --accounting FILE' or 'gpusched accountant')");
        else
            set_msg(s, "cannot open: %s%s%s", sqlite3_errmsg(s->db), e ? ": " : "",
                    e ? strerror(e) : "");
        err = existing && rc == SQLITE_CANTOPEN ? GS_ENOENT : GS_EIO;
        goto out;
    }
    (void)sqlite3_extended_result_codes(s->db, 0);
    (void)sqlite3_busy_timeout(s->db, 5000);
    if ((err = migrate(s, opt->read_only, opt->existing_only)) != GS_OK)
        goto out;
    if (!opt->read_only) {
        /* WAL: readers (reports) never block the writer; synchronous FULL: a commit that
         * returned survives a power cut, not only a crash of the process (NORMAL, on request,
         * only the crash). */
        sqlite3_stmt *st = NULL;
        const char *mode = NULL;
        if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            mode = (const char *)sqlite3_column_text(st, 0);
        if (!mode || strcmp(mode, "wal") != 0) {
            err = db_fail(s, "switching to WAL mode");
            sqlite3_finalize(st);
            goto out;
        }
        sqlite3_finalize(st);
        if ((err = exec(
                 s, opt->relaxed_sync ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL",
                 "setting durability")) != GS_OK)
            goto out;
        for (int i = 0; i < ST_COUNT; i++) {
            if (sqlite3_prepare_v2(s->db, stmt_sql[i], -1, &s->st[i], NULL) != SQLITE_OK) {
                err = db_fail(s, "preparing statements");
                goto out;
            }
        }
        int64_t hb;
        bool found;
        if ((err = query_int(s, "SELECT t_ms FROM heartbeat WHERE id = 1", &hb, &found)) != GS_OK)
            goto out;
        if (found)
            s->last_commit_ms = s->last_event_ms = hb;
    }
    *out = s;
    return GS_OK;
out:
    if (msg && cap)
        (void)snprintf(msg, cap, "%s", s->msg[0] ? s->msg : gs_strerror(err));
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    sqlite3_close(s->db);
    writer_unlock(s);
    free(s->path);
    free(s);
    return err;
}

const char *gs_usage_errmsg(const struct gs_usage_store *s)
{
    return s->msg;
}

void *gs_usage_db(struct gs_usage_store *s)
{
    return s->db;
}

/* Opens the batch's transaction before the first write of a batch. */
static int batch_begin(struct gs_usage_store *s)
{
    if (s->in_batch)
        return GS_OK;
    if (!s->st[0]) {
        set_msg(s, "opened read-only");
        return GS_EINVAL;
    }
    int err = exec(s, "BEGIN IMMEDIATE", "starting a batch");
    if (!err)
        s->in_batch = true;
    return err;
}

/* Runs a prepared write statement once and resets it. */
static int step_done(struct gs_usage_store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    int err = GS_OK;
    if (rc != SQLITE_DONE) {
        if (sqlite3_errcode(s->db) == SQLITE_CONSTRAINT) {
            set_msg(s, "%s: %s", what, sqlite3_errmsg(s->db));
            err = GS_EEXIST;
        } else {
            err = db_fail(s, what);
        }
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return err;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        (void)sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        (void)sqlite3_bind_null(st, i);
}

int gs_usage_charge_gpus(const struct gs_usage_gpu *gpus, uint32_t n, uint32_t *bad, double *out)
{
    *out = 0;
    if (n > GS_NODE_GPUS_MAX)
        return GS_EINVAL;
    double total = 0;
    for (uint32_t k = 0; k < n; k++) {
        const struct gs_usage_gpu *g = &gpus[k];
        struct gs_charge_grant cg = {g->sharing,    g->gpu_milli,      g->mem_mib, g->gpu_mem_mib,
                                     g->mig_slices, g->gpu_mig_slices, g->replicas};
        double share;
        if (gs_charge_share(&cg, &share) != GS_OK || g->sharing > GS_GPU_SHARE_MIG) {
            if (bad)
                *bad = k;
            return GS_EINVAL;
        }
        total += share;
    }
    *out = total;
    return GS_OK;
}

int gs_usage_begin_interval(struct gs_usage_store *s, const struct gs_usage_interval *iv,
                            const struct gs_usage_gpu *gpus, uint32_t n, int64_t *id)
{
    if (!iv->pod_uid || !iv->pod_uid[0] || n > GS_NODE_GPUS_MAX) {
        set_msg(s, "interval: %s", n > GS_NODE_GPUS_MAX ? "too many GPUs" : "empty pod uid");
        return GS_EINVAL;
    }
    double total;
    uint32_t bad = 0;
    if (gs_usage_charge_gpus(gpus, n, &bad, &total) != GS_OK) {
        set_msg(s, "interval of pod %s: GPU %u: a grant that cannot be charged", iv->pod_uid,
                gpus[bad].gpu_index);
        return GS_EINVAL;
    }
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_BEGIN_IV];
    bind_text(st, 1, iv->pod_uid);
    bind_text(st, 2, iv->ns);
    bind_text(st, 3, iv->name);
    bind_text(st, 4, iv->queue);
    bind_text(st, 5, iv->queue_path);
    bind_text(st, 6, iv->team);
    bind_text(st, 7, iv->priority_class);
    bind_text(st, 8, iv->node);
    bind_text(st, 9, iv->model);
    (void)sqlite3_bind_int64(st, 10, n);
    (void)sqlite3_bind_double(st, 11, total);
    (void)sqlite3_bind_int64(st, 12, iv->queued_ms);
    (void)sqlite3_bind_int64(st, 13, iv->start_ms);
    if ((err = step_done(s, st, "recording an interval")) != GS_OK)
        return err;
    int64_t row = sqlite3_last_insert_rowid(s->db);
    st = s->st[ST_BEGIN_GPU];
    for (uint32_t k = 0; k < n; k++) {
        const struct gs_usage_gpu *g = &gpus[k];
        (void)sqlite3_bind_int64(st, 1, row);
        (void)sqlite3_bind_int64(st, 2, g->gpu_index);
        bind_text(st, 3, g->gpu_uuid);
        bind_text(st, 4, sharing_names[g->sharing]);
        (void)sqlite3_bind_int64(st, 5, g->gpu_milli);
        (void)sqlite3_bind_int64(st, 6, g->mem_mib);
        bind_text(st, 7, g->mig_profile);
        if (g->mig_instance >= 0)
            (void)sqlite3_bind_int64(st, 8, g->mig_instance);
        if (g->replica_slot >= 0)
            (void)sqlite3_bind_int64(st, 9, g->replica_slot);
        double share;
        (void)gs_usage_charge_gpus(g, 1, NULL, &share); /* checked above with the rest */
        (void)sqlite3_bind_double(st, 10, share);
        if ((err = step_done(s, st, "recording an interval's GPUs")) != GS_OK)
            return err;
    }
    if (iv->start_ms > s->last_event_ms)
        s->last_event_ms = iv->start_ms;
    *id = row;
    return GS_OK;
}

int gs_usage_end_interval(struct gs_usage_store *s, int64_t id, int64_t end_ms,
                          enum gs_usage_end reason, const char *by_uid)
{
    if (reason == GS_USAGE_END_OPEN || (unsigned)reason > GS_USAGE_END_RECOVERED) {
        set_msg(s, "interval %lld: not an end reason", (long long)id);
        return GS_EINVAL;
    }
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_END_IV];
    (void)sqlite3_bind_int64(st, 1, id);
    (void)sqlite3_bind_int64(st, 2, end_ms);
    bind_text(st, 3, gs_usage_end_name(reason));
    bind_text(st, 4, by_uid);
    if ((err = step_done(s, st, "ending an interval")) != GS_OK)
        return err;
    if (sqlite3_changes(s->db) == 0) {
        int64_t start;
        bool found;
        char sql[96];
        (void)snprintf(sql, sizeof(sql),
                       "SELECT start_ms FROM allocation WHERE id = %lld AND "
                       "end_ms IS NULL",
                       (long long)id);
        if ((err = query_int(s, sql, &start, &found)) != GS_OK)
            return err;
        set_msg(s, "interval %lld: %s", (long long)id,
                found ? "ends before it starts" : "no such open interval");
        return found ? GS_EINVAL : GS_ENOENT;
    }
    if (end_ms > s->last_event_ms)
        s->last_event_ms = end_ms;
    return GS_OK;
}

int gs_usage_begin_capacity(struct gs_usage_store *s, const struct gs_usage_capacity *c,
                            int64_t *id)
{
    if (!c->node || !c->node[0]) {
        set_msg(s, "capacity: empty node name");
        return GS_EINVAL;
    }
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_BEGIN_CAP];
    bind_text(st, 1, c->node);
    bind_text(st, 2, c->model);
    (void)sqlite3_bind_int64(st, 3, c->gpu_index);
    bind_text(st, 4, c->gpu_uuid);
    (void)sqlite3_bind_int64(st, 5, c->healthy);
    (void)sqlite3_bind_int64(st, 6, c->start_ms);
    if ((err = step_done(s, st, "recording capacity")) != GS_OK)
        return err;
    *id = sqlite3_last_insert_rowid(s->db);
    if (c->start_ms > s->last_event_ms)
        s->last_event_ms = c->start_ms;
    return GS_OK;
}

int gs_usage_end_capacity(struct gs_usage_store *s, int64_t id, int64_t end_ms, const char *reason)
{
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_END_CAP];
    (void)sqlite3_bind_int64(st, 1, id);
    (void)sqlite3_bind_int64(st, 2, end_ms);
    bind_text(st, 3, reason);
    if ((err = step_done(s, st, "ending capacity")) != GS_OK)
        return err;
    if (sqlite3_changes(s->db) == 0) {
        set_msg(s, "capacity interval %lld: no such open interval", (long long)id);
        return GS_ENOENT;
    }
    return GS_OK;
}

int gs_usage_add_quota(struct gs_usage_store *s, const struct gs_usage_quota *q)
{
    if (!q->queue || !q->queue[0]) {
        set_msg(s, "quota snapshot: empty queue name");
        return GS_EINVAL;
    }
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_QUOTA];
    (void)sqlite3_bind_int64(st, 1, q->t_ms);
    bind_text(st, 2, q->queue);
    bind_text(st, 3, q->queue_path);
    (void)sqlite3_bind_int64(st, 4, q->gpu_quota_milli == GS_UNLIMITED ? -1 : q->gpu_quota_milli);
    (void)sqlite3_bind_int64(st, 5, q->gpu_limit_milli == GS_UNLIMITED ? -1 : q->gpu_limit_milli);
    (void)sqlite3_bind_int64(st, 6, q->gpu_fair_milli);
    (void)sqlite3_bind_int64(st, 7, q->gpu_allocated_milli);
    return step_done(s, st, "recording a quota snapshot");
}

int gs_usage_add_util(struct gs_usage_store *s, int64_t t_ms, const char *pod_uid, const char *node,
                      uint32_t gpu_index, double util_pct)
{
    if (!pod_uid || !pod_uid[0] || !(util_pct >= 0 && util_pct <= 100)) {
        set_msg(s, "utilisation sample: %s",
                !pod_uid || !pod_uid[0] ? "empty pod uid" : "utilisation outside 0..100");
        return GS_EINVAL;
    }
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_UTIL];
    (void)sqlite3_bind_int64(st, 1, t_ms);
    bind_text(st, 2, pod_uid);
    bind_text(st, 3, node);
    (void)sqlite3_bind_int64(st, 4, gpu_index);
    (void)sqlite3_bind_double(st, 5, util_pct);
    return step_done(s, st, "recording a utilisation sample");
}

int gs_usage_count_uid_prefix(struct gs_usage_store *s, const char *prefix, int64_t *n)
{
    *n = 0;
    if (!prefix)
        return GS_EINVAL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT count(*) FROM allocation WHERE substr(pod_uid, 1, ?2) = ?1", -1,
                           &st, NULL) != SQLITE_OK)
        return db_fail(s, "counting intervals");
    (void)sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    (void)sqlite3_bind_int64(st, 2, (sqlite3_int64)strlen(prefix));
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? GS_OK : db_fail(s, "counting intervals");
}

int gs_usage_commit(struct gs_usage_store *s, int64_t now_ms)
{
    if (now_ms > s->last_event_ms)
        s->last_event_ms = now_ms;
    int err = batch_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st[ST_HEARTBEAT];
    (void)sqlite3_bind_int64(st, 1, s->last_event_ms);
    err = step_done(s, st, "writing the heartbeat");
    if (!err)
        err = exec(s, "COMMIT", "committing a batch");
    if (err)
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_batch = false;
    s->batch_events = 0;
    s->last_commit_ms = s->last_event_ms;
    return err;
}

void gs_usage_rollback(struct gs_usage_store *s)
{
    if (s->in_batch)
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_batch = false;
    s->batch_events = 0;
}

int gs_usage_tick(struct gs_usage_store *s, int64_t now_ms, bool *committed)
{
    if (committed)
        *committed = false;
    if (now_ms > s->last_event_ms)
        s->last_event_ms = now_ms;
    s->batch_events++;
    if (s->batch_events < s->batch_events_max && s->last_commit_ms != INT64_MIN &&
        now_ms - s->last_commit_ms < s->batch_ms)
        return GS_OK;
    int err = gs_usage_commit(s, now_ms);
    if (!err && committed)
        *committed = true;
    return err;
}

int gs_usage_recover(struct gs_usage_store *s, const char *const *running, uint32_t n,
                     uint32_t *closed)
{
    if (closed)
        *closed = 0;
    int64_t hb;
    bool found;
    int err = query_int(s, "SELECT t_ms FROM heartbeat WHERE id = 1", &hb, &found);
    if (err)
        return err;
    if (!found)
        return GS_OK; /* nothing was ever committed, so nothing is open */
    if (s->in_batch && (err = gs_usage_commit(s, s->last_event_ms)) != GS_OK)
        return err;
    if ((err = exec(s,
                    "BEGIN IMMEDIATE; CREATE TEMP TABLE IF NOT EXISTS running(uid TEXT PRIMARY "
                    "KEY); DELETE FROM running;",
                    "recovering open intervals")) != GS_OK)
        return err;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO running VALUES(?1)", -1, &st, NULL) !=
        SQLITE_OK) {
        err = db_fail(s, "recovering open intervals");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        bind_text(st, 1, running[i]);
        if ((err = step_done(s, st, "recovering open intervals")) != GS_OK) {
            sqlite3_finalize(st);
            goto fail;
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    char sql[320];
    (void)snprintf(sql, sizeof(sql),
                   "UPDATE allocation SET end_ms = MAX(start_ms, %lld), end_reason = 'recovered'"
                   " WHERE end_ms IS NULL AND pod_uid NOT IN (SELECT uid FROM running)",
                   (long long)hb);
    if ((err = exec(s, sql, "recovering open intervals")) != GS_OK)
        goto fail;
    if (closed)
        *closed = (uint32_t)sqlite3_changes(s->db);
    /* Capacity is re-opened by the new writer's first sync: close what the old one held. */
    (void)snprintf(sql, sizeof(sql),
                   "UPDATE capacity SET end_ms = MAX(start_ms, %lld), end_reason = 'recovered'"
                   " WHERE end_ms IS NULL",
                   (long long)hb);
    if ((err = exec(s, sql, "recovering open capacity")) != GS_OK ||
        (err = exec(s, "COMMIT", "recovering open intervals")) != GS_OK)
        goto fail;
    return GS_OK;
fail:
    (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

int gs_usage_close(struct gs_usage_store *s)
{
    if (!s)
        return GS_OK;
    int err = GS_OK;
    if (s->in_batch)
        err = gs_usage_commit(s, s->last_event_ms);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    sqlite3_close(s->db);
    writer_unlock(s);
    free(s->path);
    free(s);
    return err;
}
