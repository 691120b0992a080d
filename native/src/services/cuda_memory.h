/* Device memory as the CUDA driver describes it (cuda_memory.c): the driver's checks of memory registered
 * as vram, the release of vram allocations, and the export and opening of their CUDA IPC handles. */
#ifndef KVT_CUDA_MEMORY_H
#define KVT_CUDA_MEMORY_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether [address, +length) may be registered as vram of `device`: the whole range must be device memory
 * of that device inside one allocation the driver made with cuMemAlloc (exportable as a CUDA IPC handle),
 * or, `imported`, inside a mapping opened from another process's IPC handle (the driver describes the
 * mapping's range in this process; it is not exportable itself, its regions export the handle).
 * NOT_SUPPORTED when vram is unavailable here, or for memory of the virtual memory API; INVALID_PARAM for
 * an unknown device, host or managed memory, memory of another device, or a range past its allocation. */
kvt_status kvt_vram_check_register(const char *call, uint64_t address, uint64_t length, uint32_t device, bool imported);

/* Frees a vram allocation (any thread): the driver's memory at `address` on `device`. */
void kvt_vram_release(uint32_t device, uint64_t address);

/* What a vram region's metadata carries in place of a remote key: the CUDA IPC handle of the allocation
 * it lies in, where that allocation starts in the exporting process, and its GPU. */
typedef struct {
    uint8_t handle[64]; /* CUipcMemHandle */
    uint64_t allocation_base;
    uint32_t device, reserved;
} kvt_vram_key;

/* (any thread) Makes the key of a region inside the allocation `handle` names, which starts at
 * `allocation_base` in this process, into *out_key (malloc'd, *out_length bytes); NO_MEMORY (detail). */
kvt_status kvt_vram_key_make(const uint8_t handle[64], uint64_t allocation_base, uint32_t device, uint8_t **out_key,
                             uint32_t *out_length, char *detail, size_t detail_size);
/* (any thread) Makes the key of vram [address, ...) on `device` into *out_key (malloc'd, *out_length
 * bytes); BACKEND with the driver's answer in `detail` when it cannot be exported. */
kvt_status kvt_vram_export(uint32_t device, uint64_t address, uint8_t **out_key, uint32_t *out_length, char *detail,
                           size_t detail_size);
/* Opens a peer's key in this process (cuIpcOpenMemHandle, GPU key->device); *out_base is where the
 * peer's allocation is mapped here. BACKEND naming `call` when the driver refuses. */
kvt_status kvt_vram_open(const char *call, const kvt_vram_key *key, uint64_t *out_base);
/* Closes what kvt_vram_open opened. */
void kvt_vram_close(uint32_t device, uint64_t base);

#endif
