/* The twin of planted.c with each fault fixed: tests/lint/selftest.sh checks that clang-tidy,
 * with the repository's .clang-tidy, passes it, so the gate fails on faults, not on everything. */
#include <stdio.h>
#include <stdlib.h>

int planted_unchecked_write(FILE *f);
int planted_use_after_free(void);

int planted_unchecked_write(FILE *f)
{
    return fprintf(f, "checked\n") < 0 ? -1 : 0;
}

int planted_use_after_free(void)
{
    int *p = malloc(sizeof *p);
    if (p == NULL)
        return -1;
    *p = 1;
    int v = *p;
    free(p);
    return v;
}
