/*
 * What the commands that drive the Kubernetes translation (scheduler, whatif) share: one
 * loader and one message for an API server configuration that cannot be read, and one
 * configuration of the translation, so that a what-if schedules as the scheduler does.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cmd.h"
#include "gpusched/kube.h"
#include "gpusched/kworld.h"

void gs__cli_kworld_config(struct gs_kworld_config *wc, const char *scheduler_name,
                           const char *default_queue, const char *policy, bool kai_preemptible,
                           int32_t kai_threshold)
{
    *wc = (struct gs_kworld_config){.scheduler_name = scheduler_name,
                                    .default_queue = default_queue,
                                    .policy = policy,
                                    .preemption = true,
                                    .reclaim = true,
                                    .kai_preemptible = kai_preemptible,
                                    .kai_preemptible_threshold = kai_threshold};
}

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
