/*
 * Helpers shared by the GPU backends (gpu_nvml.c, gpu_fake.c); not part of the public API.
 */
#ifndef GPUSCHED_AGENT_GPU_INTERNAL_H
#define GPUSCHED_AGENT_GPU_INTERNAL_H

#include "gpusched/compiler.h"
#include "gpusched/gpu.h"

/**
 * Records a formatted sentence as b's last error (truncated to fit).
 * @return err, so that `return gs__gpu_fail(b, GS_EIO, "...")` reads naturally.
 */
int gs__gpu_fail(struct gs_gpu_backend *b, int err, const char *fmt, ...) GS_PRINTF(3, 4);

/**
 * Copies src into dst[cap] always NUL-terminated, truncating.
 * @return true when it fitted without truncation.
 */
bool gs__strlcpy(char *dst, const char *src, size_t cap);

#endif /* GPUSCHED_AGENT_GPU_INTERNAL_H */
