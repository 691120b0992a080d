/* Loads the CUDA driver: dlopen of libcuda.so.1 (or $KVT_CUDA_LIBRARY) and dlsym of every entry point
 * the library calls, cuInit and a device count, once per process, on first use of the vram kind or of
 * kvt_capabilities. The library never links the driver, so it loads on machines without one. */
#include "services/cuda_driver.h"
#include "services/status.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

kvt_cuda_functions kvt_cuda;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[640]; /* empty once loaded */
static uint32_t device_count;
static int driver_version;

#define KVT_CUDA_MAX_DEVICES 64
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext contexts[KVT_CUDA_MAX_DEVICES];

const char *kvt_cuda_error_text(CUresult error, char *out, size_t size) {
    const char *name = NULL, *text = NULL;
    if (kvt_cuda.GetErrorName) kvt_cuda.GetErrorName(error, &name);
    if (kvt_cuda.GetErrorString) kvt_cuda.GetErrorString(error, &text);
    snprintf(out, size, "%s (%d): %s", name ? name : "CUDA error", error, text ? text : "no description");
    return out;
}

static const char *library_path(void) {
    const char *path = getenv(KVT_CUDA_LIBRARY_ENV);
    return path && path[0] ? path : KVT_CUDA_LIBRARY;
}

static bool resolve(void *library, const char *path) {
    struct {
        const char *name;
        void **slot;
    } const functions[] = {
#define KVT_CUDA_ENTRY(field, symbol, result, parameters) {#symbol, (void **)&kvt_cuda.field},
        KVT_CUDA_FUNCTIONS(KVT_CUDA_ENTRY)
#undef KVT_CUDA_ENTRY
    };
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        *functions[i].slot = dlsym(library, functions[i].name);
        if (!*functions[i].slot) {
            snprintf(load_error, sizeof load_error,
                     "driver too old: the CUDA driver %s has no entry point %s; a driver for CUDA 11.3 or later "
                     "is needed",
                     path, functions[i].name);
            return false;
        }
    }
    return true;
}

static void count_devices(const char *path) {
    char text[256];
    CUresult result = kvt_cuda.Init(0);
    if (result == KVT_CUDA_ERROR_NO_DEVICE) {
        snprintf(load_error, sizeof load_error, "no device: the CUDA driver %s sees no GPU (cuInit: %s)", path,
                 kvt_cuda_error_text(result, text, sizeof text));
        return;
    }
    if (result != KVT_CUDA_SUCCESS) {
        snprintf(load_error, sizeof load_error, "the driver failed: cuInit of %s answered %s", path,
                 kvt_cuda_error_text(result, text, sizeof text));
        return;
    }
    int count = 0;
    result = kvt_cuda.DeviceGetCount(&count);
    if (result != KVT_CUDA_SUCCESS || count <= 0) {
        snprintf(load_error, sizeof load_error, "no device: the CUDA driver %s counts %d GPU(s)%s%s", path,
                 result == KVT_CUDA_SUCCESS ? count : 0, result == KVT_CUDA_SUCCESS ? "" : "; cuDeviceGetCount: ",
                 result == KVT_CUDA_SUCCESS ? "" : kvt_cuda_error_text(result, text, sizeof text));
        return;
    }
    device_count = count > KVT_CUDA_MAX_DEVICES ? KVT_CUDA_MAX_DEVICES : (uint32_t)count;
    if (kvt_cuda.DriverGetVersion(&driver_version) != KVT_CUDA_SUCCESS) driver_version = 0;
}

static void load(void) {
    const char *path = library_path();
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(load_error, sizeof load_error,
                 "no driver library: %s could not be loaded (%s); install the NVIDIA driver on a machine with a GPU",
                 path, dlerror());
        return;
    }
    if (resolve(library, path)) count_devices(path);
    /* Refused: the table stays as resolved (cuGetErrorString may describe later failures); never unloaded. */
}

const char *kvt_cuda_unavailable(void) {
    pthread_once(&load_once, load);
    return load_error[0] ? load_error : NULL;
}

uint32_t kvt_cuda_device_count(void) { return kvt_cuda_unavailable() ? 0 : device_count; }

int kvt_cuda_driver_version(void) { return kvt_cuda_unavailable() ? 0 : driver_version; }

kvt_status kvt_cuda_use_device(const char *call, uint32_t device) {
    const char *unavailable = kvt_cuda_unavailable();
    if (unavailable) return kvt_fail(KVT_ERR_NOT_SUPPORTED, "%s: vram is unavailable: %s", call, unavailable);
    if (device >= device_count)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: there is no GPU %u (the CUDA driver counts %u)", call, device,
                        device_count);
    char text[256];
    pthread_mutex_lock(&contexts_lock);
    CUresult result = KVT_CUDA_SUCCESS;
    if (!contexts[device]) {
        CUdevice handle = 0;
        result = kvt_cuda.DeviceGet(&handle, (int)device);
        if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.DevicePrimaryCtxRetain(&contexts[device], handle);
    }
    CUcontext context = contexts[device];
    pthread_mutex_unlock(&contexts_lock);
    if (result == KVT_CUDA_SUCCESS) result = kvt_cuda.CtxSetCurrent(context);
    if (result != KVT_CUDA_SUCCESS)
        return kvt_fail(KVT_ERR_BACKEND, "%s: GPU %u's primary context cannot be used: %s", call, device,
                        kvt_cuda_error_text(result, text, sizeof text));
    return KVT_OK;
}
