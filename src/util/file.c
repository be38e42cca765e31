/*
 * Bounded whole-file reads with diagnostics, and mkdir -p. See src/util/file.h.
 */
#define _GNU_SOURCE /* syscall(SYS_getdents64) for the signal handler; fileno, strerror_r */

#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"

static void say_errno(struct gs_diag *d, const char *what, int e)
{
    char why[128];
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    /* _GNU_SOURCE (needed above) gives glibc's strerror_r: it returns the text, which may be a
     * static string rather than why. */
    const char *text = strerror_r(e, why, sizeof why);
    if (text != why)
        (void)snprintf(why, sizeof why, "%s", text ? text : "");
    if (!why[0])
        (void)snprintf(why, sizeof why, "error %d", e);
#else
    if (strerror_r(e, why, sizeof why) != 0)
        (void)snprintf(why, sizeof why, "error %d", e);
#endif
    if (d)
        (void)snprintf(d->msg, sizeof d->msg, "%s: %s", what, why);
}

int gs__read_file(const char *path, size_t max_bytes, char **buf, size_t *len, struct gs_diag *diag)
{
    *buf = NULL;
    *len = 0;
    if (diag) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", path);
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        say_errno(diag, "cannot open", errno);
        return GS_EIO;
    }
    int rc = GS_EIO;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > max_bytes) {
        if (diag)
            (void)snprintf(diag->msg, sizeof diag->msg, "file is %lld bytes, over the limit of %zu",
                           (long long)st.st_size, max_bytes);
        goto out;
    }
    char *b = malloc(max_bytes + 2);
    if (b == NULL) {
        rc = GS_ENOMEM;
        if (diag)
            (void)snprintf(diag->msg, sizeof diag->msg, "out of memory");
        goto out;
    }
    size_t n = fread(b, 1, max_bytes + 1, f);
    if (ferror(f)) {
        say_errno(diag, "cannot read", errno);
        free(b);
        goto out;
    }
    if (n > max_bytes) {
        if (diag)
            (void)snprintf(diag->msg, sizeof diag->msg, "file is over the limit of %zu bytes",
                           max_bytes);
        free(b);
        goto out;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    rc = GS_OK;
out:
    (void)fclose(f);
    return rc;
}

int gs__mkdir_p(const char *dir)
{
    size_t n = strlen(dir);
    if (n == 0) {
        errno = ENOENT;
        return -1;
    }
    char *path = malloc(n + 1);
    if (path == NULL)
        return -1;
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            free(path);
            return -1;
        }
        *p = '/';
    }
    int rc = 0;
    struct stat st;
    if (mkdir(path, 0777) != 0) {
        if (errno != EEXIST)
            rc = -1;
        else if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            rc = -1;
        }
    }
    free(path);
    return rc;
}

int gs__mkstemp_shared(char *tmpl)
{
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return -1;
    mode_t mask = umask(0);
    (void)umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
        int e = errno;
        (void)close(fd);
        (void)unlink(tmpl);
        errno = e;
        return -1;
    }
    return fd;
}

/*
 * The stage of the run in progress, for the signal handler: a descriptor of the directory, its
 * path, and the gnuplot child to stop first. A handler may only make async-signal-safe calls,
 * and POSIX has no safe way to list a directory, so the handler reads the entries with the raw
 * getdents64 system call and removes them with unlinkat().
 */
static volatile sig_atomic_t stage_fd = -1;
static volatile sig_atomic_t child_pid = 0;
/* Plot processes of this one (gs__stage_child_add()); 0 = free slot. */
#define STAGE_CHILDREN_MAX 32
static volatile sig_atomic_t child_pids[STAGE_CHILDREN_MAX];
static char stage_path[4096];
static struct sigaction saved_int, saved_term, saved_hup;
static int handlers_set;

struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static void empty_dir_fd(int fd)
{
    char buf[4096] GS_ALIGNED(8);
    for (int rounds = 0; rounds < 64; rounds++) {
        (void)lseek(fd, 0, SEEK_SET);
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            return;
        int removed = 0;
        for (long off = 0; off < n;) {
            const struct dirent64_raw *de = (const void *)(buf + off);
            off += de->d_reclen;
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            removed |= unlinkat(fd, de->d_name, 0) == 0;
        }
        if (!removed)
            return;
    }
}

static void on_signal(int sig)
{
    int saved_errno = errno;
    pid_t pid = (pid_t)child_pid;
    if (pid > 0) {
        (void)kill(pid, SIGTERM);
        (void)waitpid(pid, NULL, 0);
    }
    /* Plot processes stop their own gnuplot on SIGTERM (they inherit this handler) and must be
     * gone before the stage they write into is removed. */
    for (int k = 0; k < STAGE_CHILDREN_MAX; k++)
        if ((pid = (pid_t)child_pids[k]) > 0)
            (void)kill(pid, SIGTERM);
    for (int k = 0; k < STAGE_CHILDREN_MAX; k++)
        if ((pid = (pid_t)child_pids[k]) > 0)
            (void)waitpid(pid, NULL, 0);
    int fd = (int)stage_fd;
    if (fd >= 0) {
        empty_dir_fd(fd);
        (void)rmdir(stage_path);
    }
    /* Die of the same signal, so the shell sees what happened. */
    (void)signal(sig, SIG_DFL);
    (void)raise(sig);
    errno = saved_errno;
}

static void catch_signal(int sig, struct sigaction *saved)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    (void)sigfillset(&sa.sa_mask);
    (void)sigaction(sig, NULL, saved);
    /* A signal ignored when we started (nohup, a background job) stays ignored. */
    if (saved->sa_handler != SIG_IGN)
        (void)sigaction(sig, &sa, NULL);
}

void gs__stage_child(pid_t pid)
{
    child_pid = pid;
}

bool gs__stage_child_add(pid_t pid)
{
    for (int k = 0; k < STAGE_CHILDREN_MAX; k++)
        if (child_pids[k] == 0) {
            child_pids[k] = pid;
            return true;
        }
    return false;
}

void gs__stage_child_del(pid_t pid)
{
    for (int k = 0; k < STAGE_CHILDREN_MAX; k++)
        if (child_pids[k] == pid)
            child_pids[k] = 0;
}

void gs__stage_children_forget(void)
{
    for (int k = 0; k < STAGE_CHILDREN_MAX; k++)
        child_pids[k] = 0;
}

/* Removes every `.gpusched-*` directory that an interrupted run left in `dir`. */
static void remove_stale_stages(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, ".gpusched-", 10) != 0)
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (fd < 0)
            continue;
        empty_dir_fd(fd);
        (void)close(fd);
        (void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    }
    (void)closedir(d);
}

char *gs__stage_open(const char *dir)
{
    remove_stale_stages(dir);
    size_t n = strlen(dir) + 32;
    if (n > sizeof stage_path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    char *stage = malloc(n);
    if (!stage)
        return NULL;
    (void)snprintf(stage, n, "%s/.gpusched-XXXXXX", dir);
    if (!mkdtemp(stage)) {
        free(stage);
        return NULL;
    }
    int fd = open(stage, O_RDONLY | O_DIRECTORY);
    if (fd >= 0 && stage_fd < 0) {
        memcpy(stage_path, stage, strlen(stage) + 1);
        stage_fd = fd;
        if (!handlers_set) {
            catch_signal(SIGINT, &saved_int);
            catch_signal(SIGTERM, &saved_term);
            catch_signal(SIGHUP, &saved_hup);
            handlers_set = 1;
        }
    } else if (fd >= 0) {
        (void)close(fd);
    }
    return stage;
}

/* Forgets the stage for the signal handler and puts the old handlers back. */
static void stage_release(const char *stage)
{
    if (stage_fd < 0 || strcmp(stage, stage_path) != 0)
        return;
    if (handlers_set) {
        (void)sigaction(SIGINT, &saved_int, NULL);
        (void)sigaction(SIGTERM, &saved_term, NULL);
        (void)sigaction(SIGHUP, &saved_hup, NULL);
        handlers_set = 0;
    }
    int fd = (int)stage_fd;
    stage_fd = -1;
    (void)close(fd);
}

/* Calls fn(stage/name, dir/name) for each regular file in stage; stops at the first failure. */
static int each_file(const char *stage, const char *dir, int (*fn)(const char *, const char *),
                     char *err, size_t cap)
{
    DIR *d = opendir(stage);
    if (!d) {
        if (err)
            (void)snprintf(err, cap, "%s: %s", stage, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        /* The manifest moves last, on its own (gs__stage_commit). */
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            (dir && strcmp(de->d_name, GS_MANIFEST) == 0))
            continue;
        size_t a = strlen(stage) + strlen(de->d_name) + 2;
        size_t b = (dir ? strlen(dir) : 0) + strlen(de->d_name) + 2;
        char *from = malloc(a), *to = malloc(b);
        if (!from || !to) {
            rc = -1;
        } else {
            (void)snprintf(from, a, "%s/%s", stage, de->d_name);
            (void)snprintf(to, b, "%s/%s", dir ? dir : "", de->d_name);
            if (fn(from, to) != 0) {
                if (err)
                    (void)snprintf(err, cap, "%s: %s", to, strerror(errno));
                rc = -1;
            }
        }
        free(from);
        free(to);
    }
    (void)closedir(d);
    return rc;
}

static int move_file(const char *from, const char *to)
{
    return rename(from, to);
}

static int remove_file(const char *from, const char *to)
{
    (void)to;
    (void)unlink(from);
    return 0;
}

/* A set of plain file names, read from a manifest or a directory; bounded. */
#define NAMES_MAX 4096
struct names {
    char *v[NAMES_MAX];
    size_t n;
};

static int names_has(const struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return 1;
    return 0;
}

static void names_fini(struct names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

static int names_add(struct names *s, const char *name, size_t len)
{
    if (s->n == NAMES_MAX)
        return 0; /* a longer list is not ours: keep what was read */
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, name, len);
    c[len] = '\0';
    s->v[s->n++] = c;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files of the stage (the new set), sorted. */
static int stage_names(const char *stage, struct names *s)
{
    DIR *d = opendir(stage);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && strcmp(de->d_name, GS_MANIFEST) != 0)
            rc = names_add(s, de->d_name, strlen(de->d_name));
    (void)closedir(d);
    if (s->n > 1)
        qsort(s->v, s->n, sizeof(s->v[0]), cmp_str);
    return rc;
}

/* The names an earlier run's manifest lists; none when there is no manifest. */
static void manifest_names(const char *dir, struct names *s)
{
    char path[4200];
    (void)snprintf(path, sizeof path, "%s/%s", dir, GS_MANIFEST);
    char *buf = NULL;
    size_t len = 0;
    if (gs__read_file(path, 1 << 20, &buf, &len, NULL) != GS_OK)
        return;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        /* Only plain names: a manifest never makes us remove anything outside `dir`. */
        if (n > 0 && line[0] != '#' && line[0] != '.' && !memchr(line, '/', n))
            if (names_add(s, line, n) != 0)
                break;
        line += n + (nl ? 1 : 0);
    }
    free(buf);
}

/* Appends name to a comma-separated list of cap bytes; "..." once it is full. */
static void list_add(char *list, size_t cap, const char *name)
{
    size_t used = strlen(list);
    if (used >= 3 && strcmp(list + used - 3, "...") == 0)
        return;
    int w = snprintf(list + used, cap - used, "%s%s", used ? ", " : "", name);
    if (w < 0 || (size_t)w >= cap - used) {
        list[used] = '\0';
        if (cap - used > 5)
            (void)snprintf(list + used, cap - used, "%s...", used ? ", " : "");
    }
}

int gs__stage_commit(const char *stage, const char *dir, char *err, size_t cap,
                     struct gs__stage_report *rep)
{
    struct names fresh = {.n = 0}, old = {.n = 0};
    char *mpath = NULL, *dpath = NULL;
    struct gs__stage_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof(*rep));
    char *note = rep->unvouched;
    size_t note_cap = sizeof(rep->unvouched);
    int rc = -1;
    if (stage_names(stage, &fresh) != 0) {
        (void)snprintf(err, cap, "%s: %s", stage, strerror(errno ? errno : ENOMEM));
        goto out;
    }
    /* The manifest goes into the stage first, so the whole set is there before anything moves. */
    size_t plen = strlen(stage) + strlen(dir) + sizeof(GS_MANIFEST) + 512;
    mpath = malloc(plen);
    dpath = malloc(plen);
    if (!mpath || !dpath) {
        (void)snprintf(err, cap, "out of memory");
        goto out;
    }
    (void)snprintf(mpath, plen, "%s/%s", stage, GS_MANIFEST);
    int fd = open(mpath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        (void)snprintf(err, cap, "%s/%s: %s", dir, GS_MANIFEST, strerror(errno));
        if (fd >= 0)
            (void)close(fd);
        goto out;
    }
    (void)fputs("# the files of the last gpusched run into this directory, written last\n", f);
    for (size_t i = 0; i < fresh.n; i++)
        (void)fprintf(f, "%s\n", fresh.v[i]);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        (void)snprintf(err, cap, "%s/%s: write failed", dir, GS_MANIFEST);
        goto out;
    }
    manifest_names(dir, &old);
    (void)snprintf(dpath, plen, "%s/%s", dir, GS_MANIFEST);
    struct stat mst;
    rep->had_set = lstat(dpath, &mst) == 0;
    if (each_file(stage, dir, move_file, err, cap) != 0)
        goto out;
    /* Files of the previous set that this set does not write would pass for its results. */
    for (size_t i = 0; i < old.n; i++) {
        if (names_has(&fresh, old.v[i])) {
            rep->replaced++;
            continue;
        }
        (void)snprintf(dpath, plen, "%s/%s", dir, old.v[i]);
        struct stat st;
        if (lstat(dpath, &st) == 0 && S_ISREG(st.st_mode) && unlink(dpath) == 0) {
            rep->removed++;
            list_add(rep->removed_names, sizeof(rep->removed_names), old.v[i]);
        }
    }
    (void)snprintf(dpath, plen, "%s/%s", dir, GS_MANIFEST);
    if (rename(mpath, dpath) != 0) {
        (void)snprintf(err, cap, "%s: %s", dpath, strerror(errno));
        goto out;
    }
    /* Without an earlier manifest, files we did not write are only named, never removed. */
    DIR *d = opendir(dir);
    size_t used = 0;
    while (d && note && note_cap) {
        struct dirent *de = readdir(d);
        if (!de)
            break;
        if (de->d_name[0] == '.' || strcmp(de->d_name, GS_MANIFEST) == 0 ||
            names_has(&fresh, de->d_name))
            continue;
        (void)snprintf(dpath, plen, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(dpath, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        int w = snprintf(note + used, note_cap - used, "%s%s", used ? ", " : "", de->d_name);
        if (w < 0 || (size_t)w >= note_cap - used) {
            note[used] = '\0';
            break;
        }
        used += (size_t)w;
    }
    if (d)
        (void)closedir(d);
    rc = 0;
out:
    names_fini(&fresh);
    names_fini(&old);
    free(mpath);
    free(dpath);
    gs__stage_discard(stage);
    return rc;
}

void gs__stage_discard(const char *stage)
{
    if (!stage)
        return;
    (void)each_file(stage, NULL, remove_file, NULL, 0);
    (void)rmdir(stage);
    stage_release(stage);
}
