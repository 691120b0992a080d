/* Loads UCX for the ucx backend: dlopen of libucp.so.0 and dlsym of every function ucx.c calls, once
 * per process, on the first agent creation with the ucx backend (or kvt_capabilities). */
#define KVT_UCX_API_LOADER
#include "backends/ucx/ucx_api.h"
#include "backend.h"
#include "services/status.h"

#include <dlfcn.h>
#include <stdio.h>

kvt_ucx_functions kvt_ucx;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* empty once loaded */

static void load(void) {
    /* RTLD_GLOBAL: UCX's transport modules, which it loads itself, see UCX as when it was linked. */
    void *library = dlopen(KVT_UCX_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
    if (!library) {
        snprintf(load_error, sizeof load_error, "UCX's %s could not be loaded (%s)", KVT_UCX_LIBRARY, dlerror());
        return;
    }
    struct {
        const char *name;
        void **slot;
    } const functions[] = {
#define KVT_UCX_ENTRY(name) {#name, (void **)&kvt_ucx.name},
        KVT_UCX_FUNCTIONS(KVT_UCX_ENTRY)
#undef KVT_UCX_ENTRY
    };
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        *functions[i].slot = dlsym(library, functions[i].name);
        if (!*functions[i].slot) {
            snprintf(load_error, sizeof load_error, "UCX's %s has no %s (%s); UCX 1.13 or later is needed",
                     KVT_UCX_LIBRARY, functions[i].name, dlerror());
            return;
        }
    }
}

const char *kvt_ucx_unavailable(void) {
    pthread_once(&load_once, load);
    return load_error[0] ? load_error : NULL;
}
