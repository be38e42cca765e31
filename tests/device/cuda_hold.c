/*
 * cuda_hold: a CUDA process that holds GPU memory for a while, so that tests/device/run.sh can
 * show the agent's per-process read (gs_gpu_processes) of a real process on a real GPU.
 *
 *   cuda_hold [--device N] [--mib M] [--seconds S]      (defaults 0, 64, 10)
 *
 * It loads the driver API from libcuda.so.1 at run time (no CUDA headers or toolkit needed to
 * build: the few entry points are declared here as the CUDA driver API reference gives them),
 * creates a context on device N, allocates M MiB, prints "cuda_hold: pid P holds M MiB on
 * device N" and sleeps S seconds before freeing everything. It changes no GPU setting (no MIG
 * mode, clocks or persistence): a context and an allocation are all it makes.
 *
 * Exit status: 0 done; 2 the driver cannot be loaded or a call failed (the message says which);
 * 64 usage.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The driver API's types as they are passed: CUresult is an int-sized enum, CUdevice an int,
 * CUcontext a pointer, CUdeviceptr a 64-bit integer on 64-bit hosts. */
typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_deviceptr;

typedef cu_result (*cu_init_fn)(unsigned int flags);
typedef cu_result (*cu_device_get_fn)(cu_device *dev, int ordinal);
typedef cu_result (*cu_ctx_create_fn)(cu_context *ctx, unsigned int flags, cu_device dev);
typedef cu_result (*cu_ctx_destroy_fn)(cu_context ctx);
typedef cu_result (*cu_mem_alloc_fn)(cu_deviceptr *ptr, size_t bytes);
typedef cu_result (*cu_mem_free_fn)(cu_deviceptr ptr);

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL)
        (void)fprintf(stderr, "cuda_hold: libcuda.so.1 has no %s\n", name);
    return p;
}

int main(int argc, char **argv)
{
    int device = 0;
    long mib = 64, seconds = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
            mib = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = strtol(argv[++i], NULL, 10);
        else {
            (void)fprintf(stderr, "usage: cuda_hold [--device N] [--mib M] [--seconds S]\n");
            return 64;
        }
    }
    if (device < 0 || mib <= 0 || mib > 1024L * 1024L || seconds < 0) {
        (void)fprintf(stderr, "cuda_hold: device, MiB or seconds out of range\n");
        return 64;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        (void)fprintf(stderr, "cuda_hold: cannot load libcuda.so.1: %s\n", dlerror());
        return 2;
    }
    /* The _v2 entry points are the ones the 64-bit driver API has used since CUDA 3.2. */
    cu_init_fn cu_init = (cu_init_fn)sym(lib, "cuInit");
    cu_device_get_fn cu_device_get = (cu_device_get_fn)sym(lib, "cuDeviceGet");
    cu_ctx_create_fn cu_ctx_create = (cu_ctx_create_fn)sym(lib, "cuCtxCreate_v2");
    cu_ctx_destroy_fn cu_ctx_destroy = (cu_ctx_destroy_fn)sym(lib, "cuCtxDestroy_v2");
    cu_mem_alloc_fn cu_mem_alloc = (cu_mem_alloc_fn)sym(lib, "cuMemAlloc_v2");
    cu_mem_free_fn cu_mem_free = (cu_mem_free_fn)sym(lib, "cuMemFree_v2");
    int rc = 2;
    cu_context ctx = NULL;
    cu_deviceptr ptr = 0;
    cu_device dev = 0;
    cu_result r;
    if (cu_init == NULL || cu_device_get == NULL || cu_ctx_create == NULL ||
        cu_ctx_destroy == NULL || cu_mem_alloc == NULL || cu_mem_free == NULL)
        goto out;
    if ((r = cu_init(0)) != 0) {
        (void)fprintf(stderr, "cuda_hold: cuInit: CUDA error %d\n", r);
        goto out;
    }
    if ((r = cu_device_get(&dev, device)) != 0) {
        (void)fprintf(stderr, "cuda_hold: cuDeviceGet(%d): CUDA error %d\n", device, r);
        goto out;
    }
    if ((r = cu_ctx_create(&ctx, 0, dev)) != 0) {
        (void)fprintf(stderr, "cuda_hold: cuCtxCreate: CUDA error %d\n", r);
        ctx = NULL;
        goto out;
    }
    if ((r = cu_mem_alloc(&ptr, (size_t)mib << 20)) != 0) {
        (void)fprintf(stderr, "cuda_hold: cuMemAlloc(%ld MiB): CUDA error %d\n", mib, r);
        ptr = 0;
        goto out;
    }
    (void)printf("cuda_hold: pid %ld holds %ld MiB on device %d\n", (long)getpid(), mib, device);
    (void)fflush(stdout);
    struct timespec ts = {.tv_sec = (time_t)seconds, .tv_nsec = 0};
    while (nanosleep(&ts, &ts) != 0)
        ;
    rc = 0;
out:
    if (ptr != 0)
        (void)cu_mem_free(ptr);
    if (ctx != NULL)
        (void)cu_ctx_destroy(ctx);
    (void)dlclose(lib);
    return rc;
}
