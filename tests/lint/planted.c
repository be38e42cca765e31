/* A file with planted faults that `make lint` must reject; tests/lint/selftest.sh checks that
 * clang-tidy, with the repository's .clang-tidy, fails on it and names each fault's check.
 * It is never compiled into anything. Each fault is of a kind the tree once had. */
#include <stdio.h>
#include <stdlib.h>

int planted_unchecked_write(FILE *f);
int planted_use_after_free(void);

/* cert-err33-c: a write whose result nobody looks at. */
int planted_unchecked_write(FILE *f)
{
    fprintf(f, "lost if the disk is full\n");
    return 0;
}

/* clang-analyzer-unix.Malloc: memory read after it is freed. */
int planted_use_after_free(void)
{
    int *p = malloc(sizeof *p);
    if (p == NULL)
        return -1;
    *p = 1;
    free(p);
    return *p;
}
