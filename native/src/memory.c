/* Memory: kvreuse-owned allocations and registration of caller memory as regions. */
#include "agent.h"

#include "file_regions.h"
#include "jobs.h"
#include "memory.h"
#include "services/cuda_memory.h"
#include "services/mapping.h"
#include "services/status.h"
#include "services/stretch.h"
#include "vram_holds.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static const char *kind_name(uint32_t kind) { return kind == KVT_MEM_DRAM ? "dram" : "vram"; }

/* Memory work runs on the calling thread when the backend allows it (`on_any_thread`: then the caller
 * never waits for a progress thread busy with other work), else on the progress thread. */
static kvt_status memory_call(kvt_agent *agent, bool on_any_thread,
                              kvt_status (*call)(kvt_agent *, void *, char *, size_t), void *arg) {
    if (!on_any_thread) return kvt_command_call(&agent->commands, call, arg);
    char detail[512] = "";
    kvt_status status = call(agent, arg, detail, sizeof detail);
    if (status != KVT_OK) return kvt_fail(status, "%s", detail);
    return status;
}

static kvt_status allocation_call(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t),
                                  void *arg) {
    return memory_call(agent, agent->backend->allocation_on_any_thread, call, arg);
}

static kvt_status registration_call(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t),
                                    void *arg) {
    return memory_call(agent, agent->backend->registration_on_any_thread, call, arg);
}

/* ---- allocation ------------------------------------------------------------------------------------ */

typedef struct {
    kvt_allocation *allocation;
} alloc_call_args;

static kvt_status alloc_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    alloc_call_args *args = arg;
    return agent->backend->alloc(agent, args->allocation, detail, detail_size);
}

/*
 * Page work on a large range (backing, locking, unlocking, dropping pages) holds the process's
 * address-space lock while it runs, and every page fault or mapping of another thread — the JavaScript
 * thread's included — waits for it. Done one slice at a time, such a wait lasts one slice, not the whole
 * range (measured on 400 MiB at load 16: a 1 MiB mmap of another thread waited up to 121–169 ms behind
 * whole-range work, 28–60 ms behind 2 MiB slices).
 */
#define PAGE_WORK_SLICE_BYTES (2ull << 20)

/* Runs `work` over [address, +length) a slice at a time; stops at the first failure (errno set). */
static int page_work_sliced(uint64_t address, uint64_t length, int (*work)(void *, size_t, int), int advice) {
    for (uint64_t at = 0; at < length; at += PAGE_WORK_SLICE_BYTES) {
        size_t span = (size_t)(length - at < PAGE_WORK_SLICE_BYTES ? length - at : PAGE_WORK_SLICE_BYTES);
        int result;
        do result = work((void *)(uintptr_t)(address + at), span, advice);
        while (result != 0 && errno == EINTR);
        if (result != 0) return result;
        kvt_stretch_check();
    }
    return 0;
}

static int lock_pages(void *address, size_t length, int unused) {
    (void)unused;
    return mlock(address, length);
}

static int unlock_pages(void *address, size_t length, int unused) {
    (void)unused;
    return munlock(address, length);
}

/* Unlocks (when locked), drops the pages of, and frees an allocation no longer in the agent's table. The
 * pages of an allocation over one slice are dropped slice by slice first, so the unmap that frees it has
 * none left to tear down; for one slice or less that would only double the unmap's work (and its TLB
 * shootdown), which adds up when a drain frees its banks. */
static void release_allocation(kvt_agent *agent, kvt_allocation *allocation) {
    if (allocation->kind == KVT_MEM_VRAM && allocation->imported) {
        kvt_vram_close(allocation->device, allocation->address);
        return;
    }
    if (allocation->kind == KVT_MEM_VRAM) {
        kvt_vram_free_owned(agent, allocation);
        return;
    }
    if (allocation->locked) page_work_sliced(allocation->address, allocation->length, unlock_pages, 0);
    if (allocation->length > PAGE_WORK_SLICE_BYTES)
        page_work_sliced(allocation->address, allocation->length, madvise, MADV_DONTNEED);
    agent->backend->free_allocation(agent, allocation);
}

static kvt_status free_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    release_allocation(agent, arg);
    return KVT_OK;
}

/*
 * Backs every page of a fresh allocation now (MADV_POPULATE_WRITE), so that memory the system cannot
 * provide — a full /dev/shm (or UCX_POSIX_DIR) under UCX's posix segments, or no memory left — is refused here, instead of
 * raising SIGBUS (or waking the OOM killer) at the first touch in whatever code touches it first.
 * Kernels before 5.14 do not know the advice (EINVAL): there the pages are left to their first touch.
 */
static kvt_status prefault(const kvt_allocation *allocation) {
    int result = page_work_sliced(allocation->address, allocation->length, madvise, MADV_POPULATE_WRITE);
    if (result == 0 || errno == EINVAL) return KVT_OK;
    int error = errno;
    char backing[256];
    bool shared;
    kvt_mapping_describe(allocation->address, backing, sizeof backing, &shared);
    char room[KVT_SHARED_MEMORY_DESCRIPTION_SIZE] = "";
    if (allocation->shared_memory.sysv || allocation->shared_memory.posix)
        kvt_shared_memory_describe(allocation->shared_memory, room, sizeof room);
    return kvt_fail(error == EFAULT || error == ENOMEM ? KVT_ERR_NO_MEMORY : KVT_ERR_BACKEND,
                    "kvt_mem_alloc: the system cannot back %llu bytes (%s; prefaulting failed: %s)%s%s",
                    (unsigned long long)allocation->length, backing, strerror(error), room[0] ? "; " : "", room);
}

/* Backs the pages of a fresh allocation and locks them when asked (sets allocation->locked). */
static kvt_status populate(kvt_allocation *allocation, uint32_t flags) {
    kvt_status status = prefault(allocation);
    if (status != KVT_OK || !(flags & KVT_ALLOC_MLOCK)) return status;
    if (page_work_sliced(allocation->address, allocation->length, lock_pages, 0) != 0) {
        int error = errno;
        struct rlimit limit = {0};
        getrlimit(RLIMIT_MEMLOCK, &limit);
        return kvt_fail(error == ENOMEM || error == EPERM ? KVT_ERR_NOT_ALLOWED : KVT_ERR_BACKEND,
                        "kvt_mem_alloc: mlock of %llu bytes failed: %s (RLIMIT_MEMLOCK soft limit %llu bytes)",
                        (unsigned long long)allocation->length, strerror(error), (unsigned long long)limit.rlim_cur);
    }
    allocation->locked = true;
    return KVT_OK;
}

static kvt_status check_alloc_params(uint64_t length, uint32_t flags, const uint64_t *out_address) {
    if (!out_address) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc: out_address is NULL");
    if (length == 0) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc: length must be > 0");
    /* No mapping is that large; UCX's rounding to whole pages would wrap it to a tiny segment first. */
    if (length > (uint64_t)PTRDIFF_MAX)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc: length %llu is larger than any mapping (at most %lld)",
                        (unsigned long long)length, (long long)PTRDIFF_MAX);
    if (flags & ~(uint32_t)KVT_ALLOC_MLOCK)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc: unknown flags 0x%x (KVT_ALLOC_MLOCK = 0x%x)", flags,
                        KVT_ALLOC_MLOCK);
    return KVT_OK;
}

kvt_status kvt_allocation_record_locked(kvt_agent *agent, const kvt_allocation *allocation) {
    if (agent->allocation_count == agent->allocation_capacity) {
        uint32_t capacity = agent->allocation_capacity ? agent->allocation_capacity * 2 : 8;
        kvt_allocation *grown = realloc(agent->allocations, capacity * sizeof *grown);
        if (!grown) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_mem_alloc: out of memory for bookkeeping");
        agent->allocations = grown;
        agent->allocation_capacity = capacity;
    }
    agent->allocations[agent->allocation_count++] = *allocation;
    kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_ALLOCATIONS, 1);
    kvt_counter_add(&agent->counters, KVT_COUNTER_ALLOCATED_BYTES, (int64_t)allocation->length);
    return KVT_OK;
}

static uint32_t find_allocation_locked(const kvt_agent *agent, uint64_t address) {
    for (uint32_t i = 0; i < agent->allocation_count; i++)
        if (agent->allocations[i].address == address) return i;
    return agent->allocation_count;
}

static void forget_allocation_locked(kvt_agent *agent, uint32_t index) {
    kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_ALLOCATIONS, -1);
    kvt_counter_add(&agent->counters, KVT_COUNTER_ALLOCATED_BYTES, -(int64_t)agent->allocations[index].length);
    agent->allocations[index] = agent->allocations[--agent->allocation_count];
}

kvt_status kvt_mem_alloc(uint32_t agent_id, uint64_t length, uint32_t flags, uint64_t *out_address) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_alloc", &agent);
    if (status != KVT_OK) return status;
    status = check_alloc_params(length, flags, out_address);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);

    pthread_mutex_lock(&agent->config_lock);
    kvt_allocation allocation = {.length = length};
    alloc_call_args args = {.allocation = &allocation};
    status = allocation_call(agent, alloc_call, &args);
    if (status == KVT_OK) {
        status = populate(&allocation, flags);
        if (status != KVT_OK) allocation_call(agent, free_call, &allocation);
    }
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        status = kvt_allocation_record_locked(agent, &allocation);
        if (status == KVT_OK) *out_address = allocation.address;
        pthread_mutex_unlock(&agent->lock);
        if (status != KVT_OK) allocation_call(agent, free_call, &allocation);
    }
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

/* A *_begin call that takes something out of service at once (`take`: refuses, or moves it from the
 * agent's tables into the job, config_lock held) and leaves the slow rest to `work` on the progress thread. */
static kvt_status begin_withdrawal(uint32_t agent_id, const char *call,
                                   kvt_status (*take)(kvt_agent *, const char *, const void *, kvt_mem_job *),
                                   const void *key, kvt_status (*work)(kvt_agent *, kvt_mem_job *, char *, size_t),
                                   uint64_t *out_job) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, call, &agent);
    if (status != KVT_OK) return status;
    if (!out_job) return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM, "%s: out_job is NULL", call));
    kvt_mem_job *job = NULL;
    status = kvt_job_new(call, &job);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);
    pthread_mutex_lock(&agent->config_lock);
    status = take(agent, call, key, job);
    if (status == KVT_OK) {
        *out_job = kvt_job_start(agent, job, work);
        status = KVT_IN_PROGRESS;
    } else {
        free(job);
    }
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

/* ---- allocation off the calling thread ------------------------------------------------------------- */

/* Backs the pages, then settles the allocation in the table. A refused allocation is freed before its
 * outcome is announced, so nothing of it is left by then. */
static kvt_status populate_work(kvt_agent *agent, kvt_mem_job *job, char *detail, size_t detail_size) {
    uint64_t address = job->subject.populate.address;
    pthread_mutex_lock(&agent->lock);
    kvt_allocation allocation = agent->allocations[find_allocation_locked(agent, address)];
    pthread_mutex_unlock(&agent->lock);
    kvt_status status = populate(&allocation, job->subject.populate.flags);
    if (status != KVT_OK) {
        snprintf(detail, detail_size, "%s", kvt_last_error_detail());
        agent->backend->free_allocation(agent, &allocation);
    }
    pthread_mutex_lock(&agent->lock);
    uint32_t index = find_allocation_locked(agent, address);
    if (status == KVT_OK) {
        agent->allocations[index].populating = false;
        agent->allocations[index].locked = allocation.locked;
    } else {
        forget_allocation_locked(agent, index);
    }
    pthread_mutex_unlock(&agent->lock);
    return status;
}

kvt_status kvt_mem_alloc_begin(uint32_t agent_id, uint64_t length, uint32_t flags, uint64_t *out_address,
                               uint64_t *out_job) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_alloc_begin", &agent);
    if (status != KVT_OK) return status;
    status = check_alloc_params(length, flags, out_address);
    if (status == KVT_OK && !out_job) status = kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_alloc_begin: out_job is NULL");
    kvt_mem_job *job = NULL;
    if (status == KVT_OK) status = kvt_job_new("kvt_mem_alloc_begin", &job);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);

    pthread_mutex_lock(&agent->config_lock);
    kvt_allocation allocation = {.length = length, .populating = true};
    alloc_call_args args = {.allocation = &allocation};
    status = allocation_call(agent, alloc_call, &args);
    if (status == KVT_OK) {
        pthread_mutex_lock(&agent->lock);
        status = kvt_allocation_record_locked(agent, &allocation);
        pthread_mutex_unlock(&agent->lock);
        if (status != KVT_OK) allocation_call(agent, free_call, &allocation);
    }
    if (status == KVT_OK) {
        *out_address = allocation.address;
        job->subject.populate.address = allocation.address;
        job->subject.populate.flags = flags;
        *out_job = kvt_job_start(agent, job, populate_work);
        status = KVT_IN_PROGRESS;
    } else {
        free(job);
    }
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

/* ---- free ------------------------------------------------------------------------------------------ */

/* Takes the allocation at `address` out of the agent's table into *out, or refuses: NOT_FOUND, or BUSY
 * while it is being populated or a region lies inside it (agent->lock held). */
static kvt_status withdraw_allocation_locked(kvt_agent *agent, const char *call, uint64_t address,
                                             kvt_allocation *out) {
    uint32_t index = find_allocation_locked(agent, address);
    if (index == agent->allocation_count)
        return kvt_fail(KVT_ERR_NOT_FOUND, "%s: 0x%llx is not the start of an allocation of agent '%s'", call,
                        (unsigned long long)address, agent->name);
    const kvt_allocation *allocation = &agent->allocations[index];
    if (allocation->populating)
        return kvt_fail(KVT_ERR_BUSY, "%s: allocation 0x%llx (%llu bytes) is still being populated", call,
                        (unsigned long long)address, (unsigned long long)allocation->length);
    for (uint32_t i = 0; i < agent->region_count; i++) {
        const kvt_region *region = agent->regions[i];
        if (region->address < allocation->address + allocation->length &&
            allocation->address < region->address + region->length)
            return kvt_fail(KVT_ERR_BUSY,
                            "%s: region %u [0x%llx, +%llu) is still registered inside allocation 0x%llx (%llu bytes)",
                            call, region->id, (unsigned long long)region->address, (unsigned long long)region->length,
                            (unsigned long long)allocation->address, (unsigned long long)allocation->length);
    }
    *out = *allocation;
    forget_allocation_locked(agent, index);
    return KVT_OK;
}

static kvt_status release_work(kvt_agent *agent, kvt_mem_job *job, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    release_allocation(agent, &job->subject.allocation);
    return KVT_OK;
}

kvt_status kvt_mem_free(uint32_t agent_id, uint64_t address) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_free", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->config_lock);
    pthread_mutex_lock(&agent->lock);
    kvt_allocation allocation;
    status = withdraw_allocation_locked(agent, "kvt_mem_free", address, &allocation);
    pthread_mutex_unlock(&agent->lock);
    if (status == KVT_OK) {
        /* Nobody can reach the allocation through this agent any more: no need to wait for the unmap, which
         * takes tens of milliseconds for hundreds of megabytes of touched pages (measured: 29 ms, 409.6 MB). */
        kvt_command_call_async(&agent->commands, free_call, &allocation, sizeof allocation);
    }
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

/* Moves the allocation at *(uint64_t *)key out of the agent's table into the job, or refuses. */
static kvt_status take_allocation(kvt_agent *agent, const char *call, const void *key, kvt_mem_job *job) {
    pthread_mutex_lock(&agent->lock);
    kvt_status status = withdraw_allocation_locked(agent, call, *(const uint64_t *)key, &job->subject.allocation);
    pthread_mutex_unlock(&agent->lock);
    return status;
}

kvt_status kvt_mem_free_begin(uint32_t agent_id, uint64_t address, uint64_t *out_job) {
    return begin_withdrawal(agent_id, "kvt_mem_free_begin", take_allocation, &address, release_work, out_job);
}

/* ---- registration ---------------------------------------------------------------------------------- */

typedef struct {
    kvt_region *region;
    const kvt_allocation *exact;
    const kvt_allocation *imported; /* the imported vram allocation the region lies in, if any */
} map_call_args;

static kvt_status map_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    map_call_args *args = arg;
    kvt_region *region = args->region;
    if (args->imported) /* the exporting process's own handle: readers open it and offset from its start here */
        return kvt_vram_key_make(args->imported->ipc_handle, args->imported->address, region->device, &region->rkey,
                                 &region->rkey_length, detail, detail_size);
    if (region->kind == KVT_MEM_VRAM) /* the CUDA driver's: its IPC handle stands for a backend mapping */
        return kvt_vram_export(region->device, region->address, &region->rkey, &region->rkey_length, detail,
                               detail_size);
    return agent->backend->map(agent, args->region, args->exact, detail, detail_size);
}

static kvt_status unmap_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    agent->backend->unmap(agent, arg);
    return KVT_OK;
}

static kvt_status fence_call(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)arg;
    (void)detail;
    (void)detail_size;
    agent->backend->fence(agent);
    pthread_mutex_lock(&agent->lock);
    agent->fences++;
    kvt_counter_add(&agent->counters, KVT_COUNTER_READER_FENCES, 1);
    pthread_mutex_unlock(&agent->lock);
    return KVT_OK;
}

static void region_free(kvt_region *region) {
    if (region->file_fd >= 0) close(region->file_fd);
    free(region->rkey);
    free(region);
}

/* Whether every page of [address, +length) is mapped in this process: mincore answers ENOMEM for a
 * range with an unmapped page (asked in chunks, so its vector stays small). */
static bool range_mapped(uint64_t address, uint64_t length, uint64_t *out_unmapped) {
    static const uint64_t chunk_pages = 4096;
    unsigned char vector[4096];
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = address & ~(page - 1), end = address + length;
    for (uint64_t at = start; at < end; at += chunk_pages * page) {
        uint64_t span = end - at < chunk_pages * page ? end - at : chunk_pages * page;
        if (mincore((void *)(uintptr_t)at, span, vector) != 0 && errno == ENOMEM) {
            *out_unmapped = at;
            return false;
        }
    }
    return true;
}

static kvt_status check_register_params(const char *call, uint64_t address, uint64_t length, uint32_t kind,
                                        uint32_t device, const uint32_t *out_region) {
    if (!out_region) return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: out_region is NULL", call);
    if (address == 0) return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: address is 0", call);
    if (length == 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: length is 0 (address 0x%llx)", call, (unsigned long long)address);
    if (address + length < address)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: [0x%llx, +%llu) wraps around the address space", call,
                        (unsigned long long)address, (unsigned long long)length);
    uint64_t unmapped = 0;
    if (kind == KVT_MEM_DRAM && !range_mapped(address, length, &unmapped))
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "%s: [0x%llx, +%llu) is not mapped in this process (no mapping in the chunk at "
                        "0x%llx); register memory this process allocated",
                        call, (unsigned long long)address, (unsigned long long)length, (unsigned long long)unmapped);
    if (kind == KVT_MEM_VRAM) return KVT_OK; /* the driver's checks: register_range, once it knows the allocation */
    if (kind != KVT_MEM_DRAM)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: unknown memory kind %u (dram = 0, vram = 1)", call, kind);
    if (device != 0) return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: dram must use device 0 (got %u)", call, device);
    return KVT_OK;
}

/* Overlap, limits and the register fault; finds the allocation the range is exactly, if any. */
static kvt_status check_register_locked(kvt_agent *agent, const char *call, uint64_t address, uint64_t length,
                                        uint32_t kind, uint32_t device, const kvt_allocation **exact) {
    for (uint32_t i = 0; i < agent->region_count; i++) {
        const kvt_region *region = agent->regions[i];
        if (region->kind == kind && region->device == device && region->address < address + length &&
            address < region->address + region->length)
            return kvt_fail(KVT_ERR_INVALID_PARAM,
                            "%s: [0x%llx, +%llu) overlaps region %u [0x%llx, +%llu) already registered "
                            "on %s device %u",
                            call, (unsigned long long)address, (unsigned long long)length, region->id,
                            (unsigned long long)region->address, (unsigned long long)region->length, kind_name(kind),
                            device);
    }
    if (agent->region_count >= KVT_MAX_REGIONS)
        return kvt_fail(KVT_ERR_NOT_ALLOWED, "%s: agent '%s' already has the maximum of %u regions", call, agent->name,
                        KVT_MAX_REGIONS);
    *exact = NULL;
    for (uint32_t i = 0; i < agent->allocation_count; i++) {
        const kvt_allocation *allocation = &agent->allocations[i];
        if (allocation->populating && allocation->address < address + length &&
            address < allocation->address + allocation->length)
            return kvt_fail(KVT_ERR_BUSY,
                            "%s: [0x%llx, +%llu) lies in allocation 0x%llx (%llu bytes), still being "
                            "populated",
                            call, (unsigned long long)address, (unsigned long long)length,
                            (unsigned long long)allocation->address, (unsigned long long)allocation->length);
        if (allocation->address == address && allocation->length == length) *exact = allocation;
    }
    kvt_status fault = kvt_fault_take_locked(&agent->faults, KVT_FAULT_REGISTER);
    if (fault != KVT_OK) return kvt_fail(fault, "%s: injected fault (register) on agent '%s'", call, agent->name);
    return KVT_OK;
}

/* Whether [address, +length) lies in an imported vram allocation of the agent, copied into *out (takes
 * agent->lock; the caller's config_lock keeps the allocation in the table). */
static bool imported_allocation(kvt_agent *agent, uint64_t address, uint64_t length, kvt_allocation *out) {
    bool found = false;
    pthread_mutex_lock(&agent->lock);
    for (uint32_t i = 0; i < agent->allocation_count && !found; i++) {
        const kvt_allocation *allocation = &agent->allocations[i];
        uint64_t offset = address - allocation->address;
        found = allocation->imported && address >= allocation->address && offset < allocation->length &&
                length <= allocation->length - offset;
        if (found) *out = *allocation;
    }
    pthread_mutex_unlock(&agent->lock);
    return found;
}

/* Where a file-backed registration's file is (kvt_mem_register_fd). */
typedef struct {
    bool present;
    int32_t fd;
    uint64_t offset;
} file_backing;

static kvt_status register_range(uint32_t agent_id, const char *call, uint64_t address, uint64_t length, uint32_t kind,
                                 uint32_t device, file_backing file, uint32_t *out_region) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, call, &agent);
    if (status != KVT_OK) return status;
    status = check_register_params(call, address, length, kind, device, out_region);
    if (status != KVT_OK) return kvt_agent_finish(agent, status);

    pthread_mutex_lock(&agent->config_lock); /* allocations cannot change until we are done */
    kvt_allocation imported;
    bool is_imported = kind == KVT_MEM_VRAM && imported_allocation(agent, address, length, &imported);
    if (kind == KVT_MEM_VRAM) status = kvt_vram_check_register(call, address, length, device, is_imported);
    /* Readers on this host reach a file's pages or a GPU allocation without the owner: they check its table. */
    if (status == KVT_OK && (file.present || kind == KVT_MEM_VRAM)) status = kvt_liveness_table_ensure(agent, call);
    const kvt_allocation *exact = NULL;
    /* Growing moves the region table, which other agents' loopback reads walk holding region_lock. */
    pthread_rwlock_wrlock(&agent->region_lock);
    pthread_mutex_lock(&agent->lock);
    if (status == KVT_OK) status = check_register_locked(agent, call, address, length, kind, device, &exact);
    /* A copy: an allocation refused on the progress thread leaves the table (moving another entry). */
    kvt_allocation exact_copy;
    if (status == KVT_OK && exact) {
        exact_copy = *exact;
        exact = &exact_copy;
    }
    if (status == KVT_OK && agent->region_count == agent->region_capacity) {
        uint32_t capacity = agent->region_capacity ? agent->region_capacity * 2 : 16;
        kvt_region **grown = realloc(agent->regions, capacity * sizeof *grown);
        if (!grown)
            status = kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call);
        else {
            agent->regions = grown;
            agent->region_capacity = capacity;
        }
    }
    pthread_mutex_unlock(&agent->lock);
    pthread_rwlock_unlock(&agent->region_lock);

    kvt_region *region = NULL;
    if (status == KVT_OK) {
        region = calloc(1, sizeof *region);
        if (!region) status = kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call);
    }
    if (status == KVT_OK) {
        *region = (kvt_region){.kind = kind, .device = device, .address = address, .length = length, .file_fd = -1};
        if (file.present) status = kvt_file_region_prepare(region, file.fd, file.offset);
        map_call_args args = {.region = region, .exact = exact, .imported = is_imported ? &imported : NULL};
        if (status == KVT_OK) status = registration_call(agent, map_call, &args);
        if (status != KVT_OK) {
            region_free(region);
            region = NULL;
        }
    }
    if (status == KVT_OK) {
        pthread_rwlock_wrlock(&agent->region_lock);
        pthread_mutex_lock(&agent->lock);
        region->id = agent->next_region_id++;
        if (kvt_region_has_liveness_slot(region)) kvt_liveness_mark_live_locked(agent, region);
        agent->regions[agent->region_count++] = region;
        agent->metadata_generation++;
        kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_REGISTRATIONS, 1);
        kvt_counter_add(&agent->counters, KVT_COUNTER_REGISTERED_BYTES, (int64_t)length);
        *out_region = region->id;
        pthread_mutex_unlock(&agent->lock);
        pthread_rwlock_unlock(&agent->region_lock);
    }
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

kvt_status kvt_mem_register(uint32_t agent_id, uint64_t address, uint64_t length, uint32_t kind, uint32_t device,
                            uint32_t *out_region) {
    return register_range(agent_id, "kvt_mem_register", address, length, kind, device, (file_backing){0}, out_region);
}

kvt_status kvt_mem_register_fd(uint32_t agent_id, uint64_t address, uint64_t length, int32_t fd, uint64_t file_offset,
                               uint32_t *out_region) {
    return register_range(agent_id, "kvt_mem_register_fd", address, length, KVT_MEM_DRAM, 0,
                          (file_backing){.present = true, .fd = fd, .offset = file_offset}, out_region);
}

/* An operation that still references the region, for the refusal's detail. */
static uint64_t find_busy_op_locked(const kvt_agent *agent, const kvt_region *region) {
    for (size_t i = 0; i < agent->ops.capacity; i++) {
        const kvt_op *op = agent->ops.values[i];
        if (!op || op->status != KVT_IN_PROGRESS) continue;
        for (uint32_t k = 0; k < op->local_count; k++)
            if (op->locals[k] == region) return op->id;
    }
    return 0;
}

/* Takes the region out of the agent's table, so that no new operation, metadata or peer sees it, or
 * refuses: NOT_FOUND, or BUSY while an operation references it (region_lock written, agent->lock held).
 * *out_fence: whether exported metadata named it, so readers must be fenced before its memory goes;
 * *out_fences: the fences made until now. */
static kvt_status withdraw_region_locked(kvt_agent *agent, const char *call, uint32_t region_id, kvt_region **out,
                                         bool *out_fence, uint64_t *out_fences) {
    uint32_t index = agent->region_count;
    for (uint32_t i = 0; i < agent->region_count; i++)
        if (agent->regions[i]->id == region_id) index = i;
    if (index == agent->region_count)
        return kvt_fail(KVT_ERR_NOT_FOUND, "%s: agent '%s' has no region %u", call, agent->name, region_id);
    kvt_region *region = agent->regions[index];
    if (region->busy > 0) {
        /* None listed: a post on another thread holds it while its descriptors are checked, before it has an id. */
        uint64_t op = find_busy_op_locked(agent, region);
        char example[48] = "a post still being checked";
        if (op) snprintf(example, sizeof example, "e.g. operation %llu", (unsigned long long)op);
        return kvt_fail(KVT_ERR_BUSY, "%s: region %u [0x%llx, +%llu) is referenced by %u operation(s) in progress (%s)",
                        call, region_id, (unsigned long long)region->address, (unsigned long long)region->length,
                        region->busy, example);
    }
    *out_fence = agent->backend->fence && region->id <= agent->exported_region_high;
    /* Before the caller may reuse the memory: readers copying out of the file or through the GPU allocation's
     * IPC handle check this after their copies. */
    if (kvt_region_has_liveness_slot(region)) kvt_liveness_mark_withdrawn_locked(agent, region);
    *out_fences = agent->fences;
    agent->regions[index] = agent->regions[--agent->region_count];
    agent->metadata_generation++;
    kvt_counter_add(&agent->counters, KVT_COUNTER_LIVE_REGISTRATIONS, -1);
    kvt_counter_add(&agent->counters, KVT_COUNTER_REGISTERED_BYTES, -(int64_t)region->length);
    *out = region;
    return KVT_OK;
}

static kvt_status withdraw_region(kvt_agent *agent, const char *call, uint32_t region_id, kvt_region **out,
                                  bool *out_fence, uint64_t *out_fences) {
    pthread_rwlock_wrlock(&agent->region_lock);
    pthread_mutex_lock(&agent->lock);
    kvt_status status = withdraw_region_locked(agent, call, region_id, out, out_fence, out_fences);
    pthread_mutex_unlock(&agent->lock);
    pthread_rwlock_unlock(&agent->region_lock);
    return status;
}

kvt_status kvt_mem_deregister(uint32_t agent_id, uint32_t region_id) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_mem_deregister", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->config_lock);
    kvt_region *region = NULL;
    bool fence = false;
    uint64_t fences;
    status = withdraw_region(agent, "kvt_mem_deregister", region_id, &region, &fence, &fences);
    if (status == KVT_OK) {
        /* Before the memory may go: readers holding metadata that names it are no longer answered, and their
         * WRITEs through its CUDA IPC handle already launched have landed. */
        if (fence) kvt_command_call(&agent->commands, fence_call, NULL);
        if (region->kind == KVT_MEM_VRAM) kvt_vram_await_writes(agent, region);
        if (region->backend && !region->backend_borrowed) registration_call(agent, unmap_call, region);
        region_free(region);
    }
    pthread_mutex_unlock(&agent->config_lock);
    return kvt_agent_finish(agent, status);
}

/* Fences readers when exported metadata named the region, unless a fence came after its withdrawal
 * (deregistrations begun together: the first one's fence covers them all, since every metadata naming
 * them was exported before), waits for readers' WRITEs into its vram in flight, then unmaps and frees it. */
static kvt_status withdrawal_work(kvt_agent *agent, kvt_mem_job *job, char *detail, size_t detail_size) {
    kvt_region *region = job->subject.withdrawal.region;
    pthread_mutex_lock(&agent->lock);
    bool fenced_since = agent->fences != job->subject.withdrawal.fences_before;
    pthread_mutex_unlock(&agent->lock);
    if (job->subject.withdrawal.fence && !fenced_since) fence_call(agent, NULL, detail, detail_size);
    if (region->kind == KVT_MEM_VRAM) kvt_vram_await_writes(agent, region);
    if (region->backend && !region->backend_borrowed) unmap_call(agent, region, detail, detail_size);
    region_free(region);
    return KVT_OK;
}

/* Moves the region *(uint32_t *)key out of the agent's table into the job, or refuses. */
static kvt_status take_region(kvt_agent *agent, const char *call, const void *key, kvt_mem_job *job) {
    return withdraw_region(agent, call, *(const uint32_t *)key, &job->subject.withdrawal.region,
                           &job->subject.withdrawal.fence, &job->subject.withdrawal.fences_before);
}

kvt_status kvt_mem_deregister_begin(uint32_t agent_id, uint32_t region_id, uint64_t *out_job) {
    return begin_withdrawal(agent_id, "kvt_mem_deregister_begin", take_region, &region_id, withdrawal_work, out_job);
}

kvt_status kvt_region_info(uint32_t agent_id, uint32_t region_id, uint64_t *out_address, uint64_t *out_length,
                           uint32_t *out_kind, uint32_t *out_device) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_region_info", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    status = kvt_fail(KVT_ERR_NOT_FOUND, "kvt_region_info: agent '%s' has no region %u", agent->name, region_id);
    for (uint32_t i = 0; i < agent->region_count; i++) {
        const kvt_region *region = agent->regions[i];
        if (region->id != region_id) continue;
        if (out_address) *out_address = region->address;
        if (out_length) *out_length = region->length;
        if (out_kind) *out_kind = region->kind;
        if (out_device) *out_device = region->device;
        kvt_detail_clear();
        status = KVT_OK;
    }
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}
