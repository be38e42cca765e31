/*
 * Small command-line helpers shared by the subcommands: `--name=value` as well as `--name value`,
 * and policy names in any case. See src/cli/cmd.h.
 */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

#include "cli/cmd.h"
#include "gpusched/sched.h"

int gs__cli_split(const char *arg, char *name, size_t cap, const char **value)
{
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    if (!eq || (size_t)(eq - arg) >= cap)
        return 0;
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = '\0';
    *value = eq + 1;
    return 1;
}

int gs__cli_policy_find(const char *name)
{
    char low[32];
    size_t n = strlen(name);
    if (n >= sizeof(low))
        return -1;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    return gs_policy_find(low);
}
