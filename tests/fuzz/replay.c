/*
 * Replays fuzz corpora without libFuzzer, so any compiler runs them in the normal test run:
 * every regular file in the directories (or the files) named on the command line is passed to
 * LLVMFuzzerTestOneInput once. Fails when a path cannot be read or when no input was found,
 * so a wrong corpus path does not pass quietly.
 */
#define _POSIX_C_SOURCE 200809L /* opendir, readdir, stat */

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file; returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            uint8_t *nbuf = realloc(buf, ncap);
            if (nbuf == NULL) {
                (void)fprintf(stderr, "%s: out of memory\n", path);
                goto out;
            }
            buf = nbuf;
            cap = ncap;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    if (ferror(f)) {
        perror(path);
        goto out;
    }
    LLVMFuzzerTestOneInput(buf, len);
    rc = 0;
out:
    free(buf);
    (void)fclose(f);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned long runs = 0;
    int failed = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            failed = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= replay_file(argv[i]) != 0;
            runs++;
            continue;
        }
        DIR *dir = opendir(argv[i]);
        if (dir == NULL) {
            perror(argv[i]);
            failed = 1;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            char path[4096];
            if (snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name) >= (int)sizeof path)
                continue;
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            failed |= replay_file(path) != 0;
            runs++;
        }
        closedir(dir);
    }
    printf("replayed %lu input(s)\n", runs);
    if (runs == 0) {
        (void)fprintf(stderr, "no inputs found\n");
        return 1;
    }
    return failed;
}
