/* Copies between regions: streaming stores and grouped pieces (copy.c). */
#ifndef KVT_COPY_H
#define KVT_COPY_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes beyond which a batch's destination does not stay in the cache (3/4 of the last-level cache). */
uint64_t kvt_streaming_threshold(void);
/* memcpy, or with non-temporal stores when `streaming` (x86-64; memcpy elsewhere). */
void kvt_copy(void *destination, const void *source, size_t length, bool streaming);
/* Pieces of up to this many bytes are copied KVT_COPY_GROUP at a time, one after another, each next
 * piece's first lines prefetched while the one before is copied: a small piece is mostly page starts,
 * where the hardware prefetchers stop. (Interleaving the pieces line by line, or a large span's pages,
 * kept more streams in flight on one machine of this kind and ran 3-4x slower than memcpy on another.) */
#define KVT_COPY_GROUP 4u
#define KVT_COPY_GROUP_MAX_BYTES (64u << 10)
/* Whether a piece may join a group: destination 16-byte aligned, length a multiple of 64, at most the max. */
bool kvt_copy_groupable(const void *destination, size_t length);
/* Streaming copy of `count` (<= KVT_COPY_GROUP) pieces of `length` bytes each, in order, each next one's start prefetched. */
void kvt_copy_group(uint8_t *const *destinations, const uint8_t *const *sources, unsigned count, size_t length);
/* Collects a round's pieces and copies them, grouping alike ones of a streaming op. Pieces added are
 * copied by the time kvt_copier_flush returns (call it before the memory may change hands). */
typedef struct {
    bool streaming;
    unsigned count;
    size_t length;
    uint8_t *destinations[KVT_COPY_GROUP];
    const uint8_t *sources[KVT_COPY_GROUP];
} kvt_copier;
void kvt_copier_add(kvt_copier *copier, uint8_t *destination, const uint8_t *source, size_t length);
void kvt_copier_flush(kvt_copier *copier);
/* Orders the copies before later stores (notifications, completion) are seen by other processes. */
void kvt_copy_fence(void);

#endif
