/* libkvreuse_transport: block checksums of registered memory, computed where the bytes are (on the GPU
 * for vram). Part of kvreuse_transport.h, which includes it; include that header. */
#ifndef KVREUSE_TRANSPORT_CHECKSUMS_H
#define KVREUSE_TRANSPORT_CHECKSUMS_H

#ifndef KVREUSE_TRANSPORT_H
#error "kvreuse_transport_checksums.h is part of kvreuse_transport.h: include that header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Checksums of groups of pieces of this agent's registered memory: piece i is length[i] bytes at
 * offset[i] of region regions[region_index[i]], counted into out_sums[group[i]] (group < group_count) as
 * that group's ordinal[i]-th piece. A group's checksum is 64 bits and order-sensitive (native/kernels/
 * checksum.cu): the same pieces in the same ordinals give the same sum on either kind of memory and at
 * any alignment, so two processes agree exactly when every byte of every piece is the same.
 *
 * vram regions (all on one GPU): computed by the checksum kernel on that GPU; the call returns when it
 * completed, and only the sums are copied to the host. dram regions: computed on the host by the same
 * function. The regions are held for the call (a deregistration meanwhile answers BUSY).
 *
 * Errors: INVALID_PARAM (NULL arrays, piece_count outside 1..KVT_MAX_DESCRIPTORS, group_count 0, an
 * index or group out of range, a piece past its region's end, a region that is not a live region of the
 * agent, vram and dram or two GPUs in one call), NOT_SUPPORTED when vram is unavailable (the reason),
 * NO_MEMORY, BACKEND (the driver's answer). Nothing is written to out_sums on an error.
 */
KVT_API kvt_status kvt_mem_checksums(uint32_t agent, uint32_t piece_count, const uint32_t *region_index,
                                     const uint64_t *offset, const uint64_t *length, const uint32_t *group,
                                     const uint32_t *ordinal, uint32_t region_count, const uint32_t *regions,
                                     uint32_t group_count, uint64_t *out_sums);

/**
 * Where a block's rows are in this agent's registered memory, route by route (one side of a transfer
 * template): row k (0 <= k < rows[r]) of route r of block b is row_bytes[r] bytes at offset
 *     base[r] + b * block_stride[r] + k * row_stride[r]
 * of region regions[region_index[r]].
 */
typedef struct kvt_block_routes {
    uint32_t route_count;
    const uint32_t *region_index; /* route r's region: an index into regions */
    const uint64_t *base;
    const uint64_t *block_stride;
    const uint32_t *rows;
    const uint64_t *row_bytes;
    const uint64_t *row_stride;
    uint32_t region_count;
    const uint32_t *regions; /* region ids of this agent */
} kvt_block_routes;

/**
 * The checksum of each block of `blocks` over `routes`: out_sums[i] is what kvt_mem_checksums gives for
 * block blocks[i]'s rows as one group, route by route and row by row, their ordinals 0, 1, 2, ... So a
 * side that sums by pieces and one that sums by routes agree on the same bytes.
 *
 * Nothing is expanded per row on the host: for vram, the checksum kernel reads the routes and the blocks
 * and cuts the rows into tiles itself (one launch; the call returns when it completed, and only the sums
 * are copied to the host); dram is summed on the host by the same function. The regions are held for
 * the call (a deregistration meanwhile answers BUSY).
 *
 * Errors: INVALID_PARAM (NULL routes or arrays, route_count or block_count outside 1..KVT_MAX_DESCRIPTORS,
 * region_count 0, a route's region index out of range or 0 rows or row bytes, a route whose segment of the
 * largest block ends past its region (the detail names the route, the block and the region), more than
 * 2^32 - 1 rows a block, a region that is not a live region of the agent, vram and dram or two GPUs in one
 * call), NOT_SUPPORTED when vram is unavailable (the reason), NO_MEMORY, BACKEND (the driver's answer).
 * Nothing is written to out_sums on an error.
 */
KVT_API kvt_status kvt_mem_block_checksums(uint32_t agent, const kvt_block_routes *routes, uint32_t block_count,
                                           const uint32_t *blocks, uint64_t *out_sums);

#ifdef __cplusplus
}
#endif

#endif
