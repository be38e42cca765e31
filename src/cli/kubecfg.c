/*
 * The API server configuration of the commands that talk to one (scheduler, whatif): one
 * loader and one message for a configuration that cannot be read.
 */
#include <stdio.h>

#include "cli/cmd.h"
#include "gpusched/kube.h"

int gs__cli_kube_config(const char *cmd, const char *kubeconfig, struct gs_kube_config *cfg)
{
    struct gs_kube_diag diag;
    int rc = kubeconfig ? gs_kube_config_load_file(kubeconfig, cfg, &diag)
                        : gs_kube_config_load_default(cfg, &diag);
    if (rc == 0)
        return 0;
    char msg[800];
    (void)gs_kube_diag_format(&diag, msg, sizeof(msg));
    (void)fprintf(stderr, "gpusched %s: %s\n", cmd, msg);
    return 2;
}
