/* libkvreuse_transport: GPU memory an agent allocates, fills, opens from another process or hands out,
 * through the CUDA driver loaded at run time. Part of kvreuse_transport.h, which includes it; include that
 * header. */
#ifndef KVREUSE_TRANSPORT_VRAM_H
#define KVREUSE_TRANSPORT_VRAM_H

#ifndef KVREUSE_TRANSPORT_H
#error "kvreuse_transport_vram.h is part of kvreuse_transport.h: include that header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Readers in other processes of this host move a vram region through its CUDA IPC handle, unseen by its owner, so
 * they hold it (read locks on the owner's liveness table's file; a reader's process that ends lets go of all):
 * - while a WRITE of theirs into it is in flight, from before its launch until its work completed:
 *   kvt_mem_deregister of the region returns once no WRITE launched before is in flight, waiting at most 1 s
 *   (counted meanwhile in KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES; a reader that holds longer is stopped or hung,
 *   and its WRITE may land later);
 * - while they have its allocation open: kvt_mem_free of a kvt_mem_alloc_vram allocation takes it out of the agent
 *   at once, but the driver frees it only once no reader has it open (CUDA leaves a free before every importer
 *   closed it undefined). A reader closes a withdrawn region within about 100 ms. Until then the allocation counts
 *   in KVT_COUNTER_DEFERRED_VRAM_FREES; the agent's shutdown waits for it until its deadline, then frees it and
 *   answers KVT_ERR_TIMEOUT saying so.
 */

/**
 * Allocates `length` bytes (> 0) of device memory on GPU `device` (cuMemAlloc in the device's primary
 * context, through the CUDA driver loaded at run time), owned by the agent and freed by kvt_mem_free.
 * Contents are unspecified; the memory is not registered (kvt_mem_register it as KVT_MEM_VRAM on `device`).
 * Errors: INVALID_PARAM (length, out_address, a device the driver does not count), NOT_SUPPORTED when
 * KVT_CAP_VRAM is 0 (the detail says why), NO_MEMORY when the device has no room, BACKEND for another
 * refusal of the driver (named). A refusal leaves nothing allocated.
 */
KVT_API kvt_status kvt_mem_alloc_vram(uint32_t agent, uint32_t device, uint64_t length, uint64_t *out_address);

/**
 * Copies `length` bytes (> 0) of host memory at `source` up to vram at `address`, which must lie inside a
 * vram allocation of this agent (kvt_mem_alloc_vram) or a mapping it opened (kvt_mem_open_vram_ipc: another
 * process's memory, written as it is), and returns once the copy completed. It fills memory kvreuse owns
 * (the demo's KV content) without a CUDA toolkit; it is not a transfer and not ordered with the agent's
 * operations, nor with the owner of an opened mapping: do not write where either is reading or writing.
 * Errors: INVALID_PARAM (source, length, a range outside the agent's vram allocations), NOT_SUPPORTED when
 * KVT_CAP_VRAM is 0, BACKEND when the driver refuses the copy (named).
 */
KVT_API kvt_status kvt_mem_write_vram(uint32_t agent, uint64_t address, const uint8_t *source, uint64_t length);

/** The size of a CUDA IPC memory handle (CUipcMemHandle), as kvt_mem_open_vram_ipc takes it. */
#define KVT_VRAM_IPC_HANDLE_BYTES 64u

/**
 * Opens another process's vram — `handle` is the KVT_VRAM_IPC_HANDLE_BYTES bytes that process's
 * cuIpcGetMemHandle made of one of its cuMemAlloc allocations on GPU `device` — in this process
 * (cuIpcOpenMemHandle, peer access enabled lazily) and records the mapping as a vram allocation of the
 * agent: *out_address is where the whole allocation starts here, *out_length its size. The other process
 * stays its owner; the agent never frees it. Register ranges inside it as KVT_MEM_VRAM on `device`: their
 * metadata carries `handle` itself (a mapping opened from a handle cannot be exported again), so readers
 * open the owner's allocation and find the range at the same offset from its start. kvt_mem_free closes
 * the mapping (cuIpcCloseMemHandle) once no registration lies inside it.
 * Errors: INVALID_PARAM (a NULL pointer, a device the driver does not count), NOT_SUPPORTED when
 * KVT_CAP_VRAM is 0, BACKEND when the driver refuses the handle (named: not a handle, its process gone,
 * a handle of this process, another GPU). A refusal leaves nothing open.
 */
KVT_API kvt_status kvt_mem_open_vram_ipc(uint32_t agent, uint32_t device, const uint8_t *handle, uint64_t *out_address,
                                         uint64_t *out_length);

/**
 * Writes the KVT_VRAM_IPC_HANDLE_BYTES bytes of the CUDA IPC handle of the agent's vram allocation starting
 * at `address` into `out_handle` (cuIpcGetMemHandle; for a mapping kvt_mem_open_vram_ipc opened, the
 * owner's handle it was opened with): what another process's kvt_mem_open_vram_ipc takes, e.g. a test
 * engine handing its KV memory to a sidecar. Errors: INVALID_PARAM (out_handle), NOT_FOUND when no vram
 * allocation of the agent starts at `address`, BACKEND when the driver refuses (named). A handle handed out
 * this way is not a reader's hold (above): keep the allocation until the process that opened it closed it.
 */
KVT_API kvt_status kvt_mem_vram_ipc_handle(uint32_t agent, uint64_t address, uint8_t *out_handle);

#ifdef __cplusplus
}
#endif

#endif
