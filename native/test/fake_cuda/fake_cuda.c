/* A fake CUDA driver for the tests (built as build/fake_cuda/libcuda.so.1, named by KVT_CUDA_LIBRARY): the entry
 * points the library resolves, over host memory, so that the layer above the driver — loading, refusals, registration
 * checks, handle exchange, streams and events — is tested on machines with no GPU. It never stands for a GPU run: it
 * proves nothing about the driver or the device.
 *
 * Device memory is a memfd per allocation, kept open (so another process can open it through an IPC handle, which
 * names the process and the fd: /proc/<pid>/fd/<fd>; nothing is left behind when a process dies); copies are memmove
 * on the calling thread, so every stream's work is complete when it is posted and every event is reached when
 * recorded. As the driver: a handle opened again in a process answers the mapping it has, counted (each open closed
 * once), and what allocates, opens, copies or launches needs a context current on the calling thread. Built with
 * FAKE_CUDA_OLD, it lacks cuIpcOpenMemHandle_v2, like a driver older than the library needs.
 *
 * Environment: FAKE_CUDA_DEVICES (GPUs, default 1) and FAKE_CUDA_INIT_ERROR (cuInit's answer), read by cuInit;
 * FAKE_CUDA_REFUSE_UNKNOWN (cuPointerGetAttributes). Tests make the kinds of memory the library must refuse with
 * fake_cuda_alloc (dlsym). */
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The prototypes the library's table expects: each definition below must match its entry. */
#define FAKE_DECLARE(field, symbol, result, parameters) result symbol parameters;
KVT_CUDA_FUNCTIONS(FAKE_DECLARE)
#undef FAKE_DECLARE

enum {
    FAKE_INVALID_CONTEXT = 201,
    FAKE_INVALID_HANDLE = 400,
    FAKE_NOT_FOUND = 500,
    FAKE_OUT_OF_MEMORY = 2,
    FAKE_HOST_MEMORY_ALREADY_REGISTERED = 712,
    FAKE_HOST_MEMORY_NOT_REGISTERED = 713,
};

/* What fake_cuda_alloc makes: the kinds a registration must tell apart. */
enum { FAKE_HOST = 1, FAKE_DEVICE = 2, FAKE_MANAGED = 3, FAKE_VMM = 4 };

typedef struct {
    CUdeviceptr base;
    size_t size;
    int device, kind;
    bool opened;     /* mapped from another process's IPC handle */
    int opens;       /* of an opened one: how many opens it answered, each to be closed (as the driver counts) */
    uint64_t serial; /* of this process's allocation: which one it is; of an opened one: the serial it has there */
    int32_t pid;     /* of an opened one: the process that allocated it */
    bool registered; /* host memory of the caller's, page-locked by cuMemHostRegister (not this fake's mapping) */
    int fd;          /* the memfd of an allocation of this process */
} fake_allocation;

typedef struct {
    char magic[8];
    int32_t pid, fd;
    uint64_t size, serial;
    int32_t device;
} fake_ipc_handle;
_Static_assert(sizeof(fake_ipc_handle) <= sizeof(CUipcMemHandle), "the handle fits");

#define FAKE_MAX_ALLOCATIONS 4096
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_allocation allocations[FAKE_MAX_ALLOCATIONS];
static int devices = -1; /* until cuInit */
static __thread int current_device = -1;

static int env_int(const char *name, int fallback) {
    const char *value = getenv(name);
    return value && value[0] ? atoi(value) : fallback;
}

CUresult cuInit(unsigned int flags) {
    if (flags != 0) return KVT_CUDA_ERROR_INVALID_VALUE;
    CUresult error = env_int("FAKE_CUDA_INIT_ERROR", 0);
    if (error != KVT_CUDA_SUCCESS) return error;
    devices = env_int("FAKE_CUDA_DEVICES", 1);
    return devices > 0 ? KVT_CUDA_SUCCESS : KVT_CUDA_ERROR_NO_DEVICE;
}

CUresult cuDriverGetVersion(int *version) {
    *version = 13000;
    return KVT_CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
    *count = devices < 0 ? 0 : devices;
    return KVT_CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal < 0 || ordinal >= devices) return KVT_CUDA_ERROR_INVALID_VALUE;
    *device = ordinal;
    return KVT_CUDA_SUCCESS;
}

/* A context is its device's ordinal + 1. */
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    if (device < 0 || device >= devices) return KVT_CUDA_ERROR_INVALID_VALUE;
    *context = (CUcontext)(uintptr_t)(device + 1);
    return KVT_CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
    current_device = (int)(uintptr_t)context - 1;
    return KVT_CUDA_SUCCESS;
}

static fake_allocation *find_locked(CUdeviceptr pointer) {
    for (size_t i = 0; i < FAKE_MAX_ALLOCATIONS; i++)
        if (allocations[i].base && allocations[i].base <= pointer &&
            pointer < allocations[i].base + allocations[i].size)
            return &allocations[i];
    return NULL;
}

static fake_allocation *free_slot_locked(void) {
    for (size_t i = 0; i < FAKE_MAX_ALLOCATIONS; i++)
        if (!allocations[i].base) return &allocations[i];
    return NULL;
}

/* Maps `size` bytes of `fd`; NULL when it cannot. */
static void *map_fd(int fd, size_t size) {
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return memory == MAP_FAILED ? NULL : memory;
}

static unsigned long allocations_made, handles_opened; /* under lock */

static CUresult allocate(int kind, int device, size_t size, CUdeviceptr *pointer) {
    if (size == 0) return KVT_CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("kvt-fake-cuda", MFD_CLOEXEC);
    void *memory = fd >= 0 && ftruncate(fd, (off_t)size) == 0 ? map_fd(fd, size) : NULL;
    pthread_mutex_lock(&lock);
    fake_allocation *slot = memory ? free_slot_locked() : NULL;
    if (slot) {
        allocations_made++;
        *slot = (fake_allocation){.base = (CUdeviceptr)(uintptr_t)memory,
                                  .size = size,
                                  .device = device,
                                  .kind = kind,
                                  .fd = fd,
                                  .serial = allocations_made};
        *pointer = slot->base;
    }
    pthread_mutex_unlock(&lock);
    if (slot) return KVT_CUDA_SUCCESS;
    if (memory) munmap(memory, size);
    if (fd >= 0) close(fd);
    return FAKE_OUT_OF_MEMORY;
}

CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t size) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    return allocate(FAKE_DEVICE, current_device, size, pointer);
}

/* Pinned host memory: host memory the driver knows (of the current device's context). */
CUresult cuMemHostAlloc(void **pointer, size_t size, unsigned int flags) {
    (void)flags;
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    CUdeviceptr base = 0;
    CUresult result = allocate(FAKE_HOST, current_device, size, &base);
    if (result == KVT_CUDA_SUCCESS) *pointer = (void *)(uintptr_t)base;
    return result;
}

/* Not a driver entry point: memory of `kind` (FAKE_*) on `device`, for the tests' refusals. */
CUresult fake_cuda_alloc(int kind, int device, size_t size, CUdeviceptr *pointer);
CUresult fake_cuda_alloc(int kind, int device, size_t size, CUdeviceptr *pointer) {
    return allocate(kind, device, size, pointer);
}

/* Unmaps and forgets `pointer`, which must start an allocation that `opened` says how it was made. */
static CUresult release(CUdeviceptr pointer, bool opened) {
    pthread_mutex_lock(&lock);
    fake_allocation *allocation = find_locked(pointer);
    CUresult result = KVT_CUDA_ERROR_INVALID_VALUE;
    if (allocation && allocation->base == pointer && allocation->opened == opened && !allocation->registered &&
        (!opened || --allocation->opens == 0)) {
        munmap((void *)(uintptr_t)allocation->base, allocation->size);
        if (!opened) close(allocation->fd);
        memset(allocation, 0, sizeof *allocation);
        result = KVT_CUDA_SUCCESS;
    } else if (allocation && opened && allocation->base == pointer && allocation->opens > 0) {
        result = KVT_CUDA_SUCCESS; /* still open for another open */
    }
    pthread_mutex_unlock(&lock);
    return result;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) { return release(pointer, false); }

CUresult cuMemFreeHost(void *pointer) { return release((CUdeviceptr)(uintptr_t)pointer, false); }

/* Host memory of the caller's that the driver then knows as pinned; a range overlapping memory it knows is
 * refused, as the driver refuses one registered already. */
CUresult cuMemHostRegister_v2(void *pointer, size_t size, unsigned int flags) {
    (void)flags;
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    if (!pointer || size == 0) return KVT_CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)pointer;
    pthread_mutex_lock(&lock);
    bool overlaps = false;
    for (size_t i = 0; i < FAKE_MAX_ALLOCATIONS; i++)
        overlaps |= allocations[i].base && allocations[i].base < base + size &&
                    base < allocations[i].base + allocations[i].size;
    fake_allocation *slot = overlaps ? NULL : free_slot_locked();
    if (slot)
        *slot = (fake_allocation){
            .base = base, .size = size, .device = current_device, .kind = FAKE_HOST, .registered = true, .fd = -1};
    pthread_mutex_unlock(&lock);
    return slot ? KVT_CUDA_SUCCESS : overlaps ? FAKE_HOST_MEMORY_ALREADY_REGISTERED : FAKE_OUT_OF_MEMORY;
}

CUresult cuMemHostUnregister(void *pointer) {
    pthread_mutex_lock(&lock);
    fake_allocation *allocation = find_locked((CUdeviceptr)(uintptr_t)pointer);
    CUresult result = FAKE_HOST_MEMORY_NOT_REGISTERED;
    if (allocation && allocation->base == (CUdeviceptr)(uintptr_t)pointer && allocation->registered) {
        memset(allocation, 0, sizeof *allocation);
        result = KVT_CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

/* One attribute of `allocation` (NULL: not memory the driver knows) into `data`, as the driver's types. */
static CUresult attribute(const fake_allocation *allocation, int which, void *data) {
    unsigned int memory_type = !allocation                     ? 0
                               : allocation->kind == FAKE_HOST ? KVT_CU_MEMORYTYPE_HOST
                                                               : KVT_CU_MEMORYTYPE_DEVICE;
    switch (which) {
    case KVT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = memory_type;
        return KVT_CUDA_SUCCESS;
    case KVT_CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = allocation && allocation->kind == FAKE_MANAGED;
        return KVT_CUDA_SUCCESS;
    case KVT_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = allocation ? allocation->device : -2;
        return KVT_CUDA_SUCCESS;
    case KVT_CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(bool *)data = allocation && allocation->kind == FAKE_DEVICE;
        return KVT_CUDA_SUCCESS;
    case KVT_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = allocation ? allocation->base : 0;
        return KVT_CUDA_SUCCESS;
    case KVT_CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = allocation ? allocation->size : 0;
        return KVT_CUDA_SUCCESS;
    default:
        return KVT_CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuPointerGetAttribute(void *data, int which, CUdeviceptr pointer) {
    pthread_mutex_lock(&lock);
    const fake_allocation *allocation = find_locked(pointer);
    CUresult result = allocation ? attribute(allocation, which, data) : KVT_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return result;
}

/* Like the driver: a pointer it does not know gets zero values, not an error (FAKE_CUDA_REFUSE_UNKNOWN=1:
 * INVALID_VALUE, as some drivers answer). */
CUresult cuPointerGetAttributes(unsigned int count, int *which, void **data, CUdeviceptr pointer) {
    pthread_mutex_lock(&lock);
    const fake_allocation *allocation = find_locked(pointer);
    CUresult result =
        !allocation && env_int("FAKE_CUDA_REFUSE_UNKNOWN", 0) ? KVT_CUDA_ERROR_INVALID_VALUE : KVT_CUDA_SUCCESS;
    for (unsigned int i = 0; i < count && result == KVT_CUDA_SUCCESS; i++)
        result = attribute(allocation, which[i], data[i]);
    pthread_mutex_unlock(&lock);
    return result;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr pointer) {
    pthread_mutex_lock(&lock);
    const fake_allocation *allocation = find_locked(pointer);
    if (allocation) {
        if (base) *base = allocation->base;
        if (size) *size = allocation->size;
    }
    pthread_mutex_unlock(&lock);
    return allocation ? KVT_CUDA_SUCCESS : FAKE_NOT_FOUND;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr pointer) {
    pthread_mutex_lock(&lock);
    const fake_allocation *allocation = find_locked(pointer);
    CUresult result = KVT_CUDA_ERROR_INVALID_VALUE;
    if (allocation && allocation->kind == FAKE_DEVICE && !allocation->opened) {
        fake_ipc_handle fake;
        memset(&fake, 0, sizeof fake); /* padding included: the handle travels in metadata, checksummed */
        memcpy(fake.magic, "kvtfake", 8);
        fake.pid = (int32_t)getpid();
        fake.fd = allocation->fd;
        fake.size = allocation->size;
        fake.device = allocation->device;
        fake.serial = allocation->serial;
        memset(handle, 0, sizeof *handle);
        memcpy(handle, &fake, sizeof fake);
        result = KVT_CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

#ifndef FAKE_CUDA_OLD
/* This process's mapping of the allocation `handle` names, when it has one open. */
static fake_allocation *opened_locked(const fake_ipc_handle *handle) {
    for (size_t i = 0; i < FAKE_MAX_ALLOCATIONS; i++)
        if (allocations[i].base && allocations[i].opened && allocations[i].pid == handle->pid &&
            allocations[i].serial == handle->serial)
            return &allocations[i];
    return NULL;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pointer, CUipcMemHandle handle, unsigned int flags) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    fake_ipc_handle fake;
    memcpy(&fake, &handle, sizeof fake);
    if (memcmp(fake.magic, "kvtfake", 8) != 0 || (flags & ~KVT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0)
        return KVT_CUDA_ERROR_INVALID_VALUE;
    if (fake.pid == (int32_t)getpid()) return FAKE_INVALID_CONTEXT; /* as the driver answers */
    pthread_mutex_lock(&lock);
    fake_allocation *open_already = opened_locked(&fake);
    if (open_already) { /* as the driver: the mapping it made, counted */
        open_already->opens++;
        handles_opened++;
        *pointer = open_already->base;
    }
    pthread_mutex_unlock(&lock);
    if (open_already) return KVT_CUDA_SUCCESS;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)fake.pid, (int)fake.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    void *memory = fd >= 0 ? map_fd(fd, fake.size) : NULL;
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&lock);
    fake_allocation *slot = memory ? free_slot_locked() : NULL;
    if (slot) {
        *slot = (fake_allocation){.base = (CUdeviceptr)(uintptr_t)memory,
                                  .size = fake.size,
                                  .device = fake.device,
                                  .kind = FAKE_DEVICE,
                                  .opened = true,
                                  .opens = 1,
                                  .serial = fake.serial,
                                  .pid = fake.pid,
                                  .fd = -1};
        *pointer = slot->base;
        handles_opened++;
    }
    pthread_mutex_unlock(&lock);
    if (slot) return KVT_CUDA_SUCCESS;
    if (memory) munmap(memory, fake.size);
    return FAKE_INVALID_HANDLE;
}
#endif

CUresult cuIpcCloseMemHandle(CUdeviceptr pointer) { return release(pointer, true); }

/* Not a driver entry point: how many allocations of device or pinned memory this process made, and how many of
 * them are live, for the tests. */
void fake_cuda_allocations(unsigned long *made, int *live);
void fake_cuda_allocations(unsigned long *made, int *live) {
    pthread_mutex_lock(&lock);
    *made = allocations_made;
    *live = 0;
    for (size_t i = 0; i < FAKE_MAX_ALLOCATIONS; i++) *live += allocations[i].base && !allocations[i].opened;
    pthread_mutex_unlock(&lock);
}

/* Not a driver entry point: how many times this process opened an IPC handle, for the tests. */
unsigned long fake_cuda_handles_opened(void);
unsigned long fake_cuda_handles_opened(void) {
    pthread_mutex_lock(&lock);
    unsigned long opened = handles_opened;
    pthread_mutex_unlock(&lock);
    return opened;
}

/* Not a driver entry point: how many IPC handles this process has open, for the tests. */
int fake_cuda_open_handles(void);
int fake_cuda_open_handles(void) {
    pthread_mutex_lock(&lock);
    int open = 0;
    for (size_t i = 0; i < FAKE_MAX_ALLOCATIONS; i++) open += allocations[i].base && allocations[i].opened;
    pthread_mutex_unlock(&lock);
    return open;
}

/* Streams and events: work completes when posted, so both are tokens. */
CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    (void)flags;
    *stream = malloc(1);
    return *stream ? KVT_CUDA_SUCCESS : FAKE_OUT_OF_MEMORY;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
    free(stream);
    return KVT_CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
    (void)stream;
    return KVT_CUDA_SUCCESS;
}

static _Atomic unsigned long events_made;

/* Not a driver entry point: how many events were made, for the tests. */
unsigned long fake_cuda_events_made(void);
unsigned long fake_cuda_events_made(void) { return atomic_load(&events_made); }

CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    (void)flags;
    *event = malloc(1);
    if (*event) atomic_fetch_add(&events_made, 1);
    return *event ? KVT_CUDA_SUCCESS : FAKE_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
    (void)stream;
    return event ? KVT_CUDA_SUCCESS : FAKE_INVALID_HANDLE;
}

/* While held (fake_cuda_hold_events), every event reads as not reached: the stream's work "runs on". */
static _Atomic int events_held;
static _Atomic unsigned long held_queries;

void fake_cuda_hold_events(int hold);
void fake_cuda_hold_events(int hold) { atomic_store(&events_held, hold); }

/* Not a driver entry point: how many queries found an event held, for the tests. */
unsigned long fake_cuda_held_queries(void);
unsigned long fake_cuda_held_queries(void) { return atomic_load(&held_queries); }

CUresult cuEventQuery(CUevent event) {
    if (!event) return FAKE_INVALID_HANDLE;
    if (!atomic_load(&events_held)) return KVT_CUDA_SUCCESS;
    atomic_fetch_add(&held_queries, 1);
    return KVT_CUDA_ERROR_NOT_READY;
}

CUresult cuEventDestroy_v2(CUevent event) {
    free(event);
    return KVT_CUDA_SUCCESS;
}

static _Atomic unsigned long copies_made;

/* Not a driver entry point: how many copies (cuMemcpy*Async) were asked, for the tests. */
unsigned long fake_cuda_copies(void);
unsigned long fake_cuda_copies(void) { return atomic_load(&copies_made); }

/* Copies between memory this process maps; both ends must lie in one allocation each, as on a GPU. */
static CUresult copy(void *destination, const void *source, size_t size, bool device_destination, bool device_source) {
    atomic_fetch_add(&copies_made, 1);
    pthread_mutex_lock(&lock);
    const fake_allocation *to = find_locked((CUdeviceptr)(uintptr_t)destination);
    const fake_allocation *from = find_locked((CUdeviceptr)(uintptr_t)source);
    bool inside = (!device_destination || (to && (uintptr_t)destination + size <= to->base + to->size)) &&
                  (!device_source || (from && (uintptr_t)source + size <= from->base + from->size));
    pthread_mutex_unlock(&lock);
    if (!inside) return KVT_CUDA_ERROR_INVALID_VALUE;
    memmove(destination, source, size);
    return KVT_CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr destination, CUdeviceptr source, size_t size, CUstream stream) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    (void)stream;
    return copy((void *)(uintptr_t)destination, (const void *)(uintptr_t)source, size, true, true);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr destination, const void *source, size_t size, CUstream stream) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    (void)stream;
    return copy((void *)(uintptr_t)destination, source, size, true, false);
}

CUresult cuMemcpyDtoHAsync_v2(void *destination, CUdeviceptr source, size_t size, CUstream stream) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    (void)stream;
    return copy(destination, (const void *)(uintptr_t)source, size, false, true);
}

/* Modules: the library's own PTX (recognised by its entry points) runs as host code over host memory: the
 * kernels' source compiled for the host (kernels_on_host.cpp). */
bool fake_cuda_run_kernel(const char *name, unsigned int blocks, unsigned int threads, void **parameters);

typedef struct {
    const char *name;
} fake_function;
/* The kernels, by their kind (the index of their shapes below). */
static const fake_function fake_kernels[] = {
    {"kvt_gather"}, {"kvt_block_checksum"}, {"kvt_gather_routes"}, {"kvt_block_checksum_routes"}};
enum { GATHER, CHECKSUM, GATHER_ROUTES, CHECKSUM_ROUTES };
enum { KERNEL_KINDS = sizeof fake_kernels / sizeof fake_kernels[0] };

static const fake_function *fake_kernel_named(const char *name) {
    for (int kind = 0; kind < KERNEL_KINDS; kind++)
        if (strcmp(name, fake_kernels[kind].name) == 0) return &fake_kernels[kind];
    return NULL;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    const char *ptx = image;
    if (!strstr(ptx, ".entry kvt_gather") && !strstr(ptx, ".entry kvt_block_checksum"))
        return KVT_CUDA_ERROR_INVALID_VALUE;
    *module = (CUmodule)(uintptr_t)image;
    return KVT_CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    char entry[64];
    snprintf(entry, sizeof entry, ".entry %s(", name);
    if (!strstr((const char *)module, entry)) return FAKE_NOT_FOUND;
    const fake_function *kernel = fake_kernel_named(name);
    if (!kernel) return FAKE_NOT_FOUND;
    *function = (CUfunction)(uintptr_t)kernel;
    return KVT_CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) { return module ? KVT_CUDA_SUCCESS : FAKE_INVALID_HANDLE; }

/* The shape of the last launch of each kernel: its pieces (tiles of kvt_gather_routes) and the largest of
 * them; and how many launches each had. */
static _Atomic uint32_t last_pieces[KERNEL_KINDS];
static _Atomic uint64_t last_largest[KERNEL_KINDS];
static _Atomic uint64_t launches[KERNEL_KINDS];

/* Not a driver entry point: the shape of the last launch of the kernel `name`, for the tests. */
void fake_cuda_last_launch(const char *name, uint32_t *pieces, uint64_t *largest);
void fake_cuda_last_launch(const char *name, uint32_t *pieces, uint64_t *largest) {
    long kind = fake_kernel_named(name) - fake_kernels;
    *pieces = atomic_load(&last_pieces[kind]);
    *largest = atomic_load(&last_largest[kind]);
}

/* Not a driver entry point: how many times the kernel `name` was launched, for the tests. */
uint64_t fake_cuda_launches(const char *name);
uint64_t fake_cuda_launches(const char *name) { return atomic_load(&launches[fake_kernel_named(name) - fake_kernels]); }

/* The bytes of entry p of a launch's table (a piece, or a route's tile) of kernel kind `kind`. */
static uint64_t entry_bytes(long kind, const void *table, uint32_t p) {
    switch (kind) {
    case GATHER:
        return ((const kvt_gather_piece *)table)[p].bytes;
    case CHECKSUM:
        return ((const kvt_checksum_piece *)table)[p].bytes;
    case GATHER_ROUTES:
        return (uint64_t)((const kvt_gather_route *)table)[p].rows_per_tile *
               ((const kvt_gather_route *)table)[p].chunk_bytes;
    default:
        return (uint64_t)((const kvt_checksum_route *)table)[p].rows_per_tile *
               ((const kvt_checksum_route *)table)[p].chunk_bytes;
    }
}

/* Keeps the shape of a launch of `kernel` with cuLaunchKernel's `parameters`: a route kernel's pieces are its
 * tiles (its blocks or block pairs times the tiles of one). */
static void record_launch(const fake_function *kernel, void **parameters) {
    long kind = kernel - fake_kernels;
    const void *table = (const void *)(uintptr_t) * (const CUdeviceptr *)parameters[0];
    uint32_t count = *(const uint32_t *)parameters[1];
    uint64_t largest = 0, pieces = count;
    if (kind == GATHER_ROUTES || kind == CHECKSUM_ROUTES)
        pieces = count == 0 ? 0 : *(const uint32_t *)parameters[3] * *(const uint64_t *)parameters[4];
    for (uint32_t p = 0; p < count; p++) {
        uint64_t bytes = entry_bytes(kind, table, p);
        if (bytes > largest) largest = bytes;
    }
    atomic_store(&last_pieces[kind], (uint32_t)pieces);
    atomic_store(&last_largest[kind], largest);
    atomic_fetch_add(&launches[kind], 1);
}

CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                        unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,
                        CUstream stream, void **parameters, void **extra) {
    if (current_device < 0) return FAKE_INVALID_CONTEXT;
    (void)stream;
    if (grid_x == 0 || grid_y != 1 || grid_z != 1 || block_x == 0 || block_y != 1 || block_z != 1 ||
        shared_bytes != 0 || extra)
        return KVT_CUDA_ERROR_INVALID_VALUE;
    const fake_function *kernel = (const fake_function *)(const void *)function;
    if (kernel < fake_kernels || kernel >= fake_kernels + KERNEL_KINDS) return FAKE_INVALID_HANDLE;
    record_launch(kernel, parameters);
    return fake_cuda_run_kernel(kernel->name, grid_x, block_x, parameters) ? KVT_CUDA_SUCCESS : FAKE_INVALID_HANDLE;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    switch (error) {
    case KVT_CUDA_SUCCESS:
        *name = "CUDA_SUCCESS";
        return KVT_CUDA_SUCCESS;
    case KVT_CUDA_ERROR_INVALID_VALUE:
        *name = "CUDA_ERROR_INVALID_VALUE";
        return KVT_CUDA_SUCCESS;
    case KVT_CUDA_ERROR_NO_DEVICE:
        *name = "CUDA_ERROR_NO_DEVICE";
        return KVT_CUDA_SUCCESS;
    case FAKE_INVALID_CONTEXT:
        *name = "CUDA_ERROR_INVALID_CONTEXT";
        return KVT_CUDA_SUCCESS;
    default:
        *name = NULL;
        return KVT_CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuGetErrorString(CUresult error, const char **text) {
    *text = error == KVT_CUDA_SUCCESS ? "no error" : "error reported by the fake CUDA driver (tests only)";
    return KVT_CUDA_SUCCESS;
}
