/*
 * Bounded whole-file reads with diagnostics, and mkdir -p. See src/util/file.h.
 */
#define _POSIX_C_SOURCE 200809L /* fileno, fstat, strerror_r (XSI form) */

#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpusched/err.h"

static void say_errno(struct gs_diag *d, const char *what, int e)
{
    char why[128];
    if (strerror_r(e, why, sizeof why) != 0)
        (void)snprintf(why, sizeof why, "error %d", e);
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

struct named {
    const char *name;
    uint32_t idx;
};

static int cmp_named(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

int gs__sort_nodes_by_name(const struct gs_trace_node *nodes, uint32_t n, uint32_t *order)
{
    struct named *v = malloc(((size_t)n + 1) * sizeof(*v));
    if (!v)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        v[i] = (struct named){nodes[i].name, i};
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_named);
    for (uint32_t i = 0; i < n; i++)
        order[i] = v[i].idx;
    free(v);
    return GS_OK;
}

char *gs__stage_open(const char *dir)
{
    size_t n = strlen(dir) + 32;
    char *stage = malloc(n);
    if (!stage)
        return NULL;
    (void)snprintf(stage, n, "%s/.gpusched-XXXXXX", dir);
    if (!mkdtemp(stage)) {
        free(stage);
        return NULL;
    }
    return stage;
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
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
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

int gs__stage_commit(const char *stage, const char *dir, char *err, size_t cap)
{
    int rc = each_file(stage, dir, move_file, err, cap);
    gs__stage_discard(stage);
    return rc;
}

void gs__stage_discard(const char *stage)
{
    if (!stage)
        return;
    (void)each_file(stage, NULL, remove_file, NULL, 0);
    (void)rmdir(stage);
}
