/* Operations over vram (vram_xfer.c): a READ from a peer's vram on this host into this agent's vram, or a
 * WRITE the other way, moves by the gather kernels on this agent's GPU, through the peer's CUDA IPC
 * handles (a template post and large descriptors cut into tiles on the GPU); the progress thread learns its
 * end from a CUDA event. Other moves with vram go host-staged (the ucx backend: backends/ucx/ucx_staging.c). */
#ifndef KVT_VRAM_XFER_H
#define KVT_VRAM_XFER_H

#include "kvreuse_transport.h"

#include "memory.h"
#include "peer.h"
#include "xfer.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* How an op with vram regions moves (kvt_op.vram). */
enum {
    KVT_VRAM_PATH_NONE = 0,   /* no vram region: the backend's own path */
    KVT_VRAM_PATH_IPC = 1,    /* the gather kernel through the peer's CUDA IPC handles (below) */
    KVT_VRAM_PATH_STAGED = 2, /* through pinned bounce buffers on both sides (the backend's advance_staged) */
};

/* At post by `call` (agent->lock held): sets op->vram to the path of the op's regions, or answers
 * NOT_SUPPORTED naming why it cannot move: IPC when every local and remote region is vram with a peer on
 * this host and the agent does not force staging; else host-staged, which needs a backend that stages, a
 * READ and every local vram region on one GPU. `remote_slots` may name a slot more than once (a
 * template's, per route). */
kvt_status kvt_vram_classify(const char *call, const kvt_agent *agent, const kvt_conn *conn, kvt_op *op,
                             uint32_t local_count, const uint32_t *remote_slots, uint32_t remote_count);

/* (P) Moves a vram op forward; a host-staged one through the backend's advance_staged. An IPC op's first call
 * opens the peer's handles (once per loaded metadata), uploads its table (every descriptor of the op, cut
 * into tiles, or one route each when they are large; a template post's routes and blocks, which the kernel
 * expands) and launches the gather and an event on the agent's stream; later calls ask the event. The op
 * becomes KVT_PHASE_MOVED only once the stream's work completed (a cancel waits for it). */
void kvt_vram_advance(kvt_agent *agent, kvt_op *op);

/* (P) at the progress thread's end: frees the agent's stream and piece table (no vram op is in flight). */
void kvt_vram_agent_stop(kvt_agent *agent);

/* (P) At most every WITHDRAWN_SWEEP_NS: closes this process's mappings of loaded peers' vram regions that their
 * owner withdrew and no op uses, ending its holds on them, so that the owner's free of their allocation
 * (vram_holds.c) waits for no later op or reload here. */
void kvt_vram_sweep_withdrawn(kvt_agent *agent);

#endif
