/* Operations over vram (vram_xfer.c): a READ from a peer's vram on this host into this agent's vram, or a
 * WRITE the other way, moves by the gather kernel on this agent's GPU, through the peer's CUDA IPC
 * handles; the progress thread learns its end from a CUDA event. */
#ifndef KVT_VRAM_XFER_H
#define KVT_VRAM_XFER_H

#include "kvreuse_transport.h"

#include "memory.h"
#include "peer.h"
#include "xfer.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* At post by `call` (agent->lock held): whether the regions make the op a vram op (*out_vram), or
 * NOT_SUPPORTED naming why not: vram moves only between vram regions (every local and remote one), with
 * a peer on this host. `remote_slots` may name a slot more than once (a template's, per route). */
kvt_status kvt_vram_classify(const char *call, const kvt_agent *agent, const kvt_conn *conn, kvt_region *const *locals,
                             uint32_t local_count, const uint32_t *remote_slots, uint32_t remote_count, bool *out_vram);

/* (P) Moves a vram op forward: the first call opens the peer's handles (once per loaded metadata),
 * uploads the piece table (every descriptor of the op; a template post's expanded whole) and launches the gather and an event on the op's own stream; later calls ask
 * the event. The op becomes KVT_PHASE_MOVED only once the stream's work completed (a cancel waits for it). */
void kvt_vram_advance(kvt_agent *agent, kvt_op *op);

/* (P) at the progress thread's end: frees the agent's stream and piece table (no vram op is in flight). */
void kvt_vram_agent_stop(kvt_agent *agent);

#endif
