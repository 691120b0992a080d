/* libkvreuse_transport: transfer templates, planned once per peer generation and posted by block
 * lists. Part of kvreuse_transport.h, which includes it; include that header. */
#ifndef KVREUSE_TRANSPORT_TEMPLATES_H
#define KVREUSE_TRANSPORT_TEMPLATES_H

#ifndef KVREUSE_TRANSPORT_H
#error "kvreuse_transport_templates.h is part of kvreuse_transport.h: include that header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Transfer templates: plan once per peer generation, post by block lists                          */
/* ---------------------------------------------------------------------------------------------- */

/**
 * A transfer template's route table: `route_count` (1..KVT_MAX_DESCRIPTORS) routes as parallel arrays
 * (entry r of each array describes route r), the rank-pair slice of the TransferTemplate
 * `buildTransferTemplate` (@kvreuse/descriptors) builds, in local/remote terms. For route r and a block
 * pair (local block lb, remote block rb), rows k = 0 .. rows[r] - 1 each move row_bytes[r] bytes between
 *     local:  region local_regions[local_index[r]],
 *             offset local_base[r]  + lb * local_block_stride[r]  + k * local_row_stride[r]
 *     remote: region remote_regions[remote_index[r]],
 *             offset remote_base[r] + rb * remote_block_stride[r] + k * remote_row_stride[r]
 * Valid blocks are 0 .. local_block_limit - 1 and 0 .. remote_block_limit - 1.
 */
typedef struct kvt_template_routes {
    uint32_t route_count;
    const uint32_t *local_index;  /* route r's local region: an index into local_regions */
    const uint32_t *remote_index; /* route r's remote region: an index into remote_regions */
    const uint64_t *local_base;
    const uint64_t *remote_base;
    const uint64_t *local_block_stride;
    const uint64_t *remote_block_stride;
    const uint32_t *rows;
    const uint64_t *row_bytes;
    const uint64_t *local_row_stride;
    const uint64_t *remote_row_stride;
    uint32_t local_region_count;
    const uint32_t *local_regions; /* region ids of this agent */
    uint32_t remote_region_count;
    const uint32_t *remote_regions; /* region ids the peer advertised */
    uint32_t local_block_limit;
    uint32_t remote_block_limit;
} kvt_template_routes;

/**
 * Registers a transfer template of the routes in `routes` against `peer` at `peer_generation`
 * (KVT_PEER_READY, else KVT_ERR_NOT_FOUND) and returns its id (unique in the agent, never reused).
 *
 * Every route is bounds-checked once here, at the largest block of each side: one route past the end of
 * its region (or overflowing 64 bits) refuses the template with KVT_ERR_INVALID_PARAM, the detail naming
 * the route, the side, the region and the bound. The table and its arrays are copied.
 *
 * The template dies with the peer generation: once the peer is reloaded or invalidated, posting on it
 * answers KVT_ERR_NOT_FOUND (register it again against the new generation), as does a post after one
 * of its local regions was deregistered.
 */
KVT_API kvt_status kvt_template_register(uint32_t agent, uint32_t peer, uint64_t peer_generation,
                                         const kvt_template_routes *routes, uint32_t *out_template);

/**
 * Posts `count` (1..KVT_MAX_DESCRIPTORS) block pairs on a template as ONE operation: pair i moves every
 * route's segment of local block local_blocks[i] and remote block remote_blocks[i], in `direction`
 * (KVT_XFER_READ: remote → local; KVT_XFER_WRITE: local → remote). Each block is checked against the
 * template's limits, O(count), before anything moves (KVT_ERR_INVALID_PARAM naming the index); the
 * lists are copied. Between vram regions the post is a vram operation as for kvt_xfer_post (refused
 * KVT_ERR_NOT_SUPPORTED otherwise, with the rule): the progress thread uploads the template's routes and the
 * block pairs, one entry each, and one launch of the route gather kernel expands them on the GPU, every piece
 * at once. Otherwise the operation's pieces are never built as a whole: the progress thread expands the
 * segments into a small window of descriptors as it issues them (neighbours contiguous on both sides
 * merged, as kvt_xfer_post merges them), within KVT_MAX_REQUEST_BYTES per UCX request, and stops
 * between pieces when cancelled. Routes on one local and one remote region go block by block (every
 * route of a block pair, then the next pair); others route by route. Otherwise exactly kvt_xfer_post:
 * the same paths (direct copy through a shared mapping, or ucp_get_nbx / ucp_put_nbx), notification,
 * status, cancel, poll and release.
 */
KVT_API kvt_status kvt_xfer_post_blocks(uint32_t agent, uint32_t template_id, uint32_t direction, uint32_t count,
                                        const uint32_t *local_blocks, const uint32_t *remote_blocks,
                                        const uint8_t *notification, uint32_t notification_length, uint64_t *out_op);

/**
 * Releases a template and its id. Operations already posted on it run to their end (they hold their
 * own reference). A destroyed agent releases its templates.
 */
KVT_API kvt_status kvt_template_release(uint32_t agent, uint32_t template_id);

#ifdef __cplusplus
}
#endif

#endif /* KVREUSE_TRANSPORT_TEMPLATES_H */
