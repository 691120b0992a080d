/* The owner's liveness table of the regions readers on its host reach without it (file-backed and vram
 * regions), and readers' direct mappings of file-backed regions (file_regions.c). */
#ifndef KVT_FILE_REGIONS_H
#define KVT_FILE_REGIONS_H

#include "kvreuse_transport.h"

#include "memory.h"
#include "peer.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;

/* The owner's liveness table: a sealed memfd of a header (magic, incarnation) and one 8-byte slot per live
 * region that has one, holding the region's id while it is registered and 0 once it was withdrawn. */
typedef struct kvt_liveness_table kvt_liveness_table;
/* Whether `region` has a slot: a file-backed region (readers map its file) or a vram region (readers open
 * its CUDA IPC handle): memory a reader on this host reaches without the owner's help. */
bool kvt_region_has_liveness_slot(const kvt_region *region);
/* Creates the agent's table unless it has one (config_lock held); BACKEND naming `call` and the failing call. */
kvt_status kvt_liveness_table_ensure(kvt_agent *agent, const char *call);
/* Its fd number, or KVT_NO_FILE_FD when the agent has no table (agent->lock held). */
uint32_t kvt_liveness_table_fd(const kvt_agent *agent);
void kvt_liveness_table_free(kvt_agent *agent);
/* Marks `region` (its id assigned) live in a free slot / withdrawn (agent->lock held). */
void kvt_liveness_mark_live_locked(kvt_agent *agent, kvt_region *region);
void kvt_liveness_mark_withdrawn_locked(kvt_agent *agent, const kvt_region *region);
/* Checks `fd` and `file_offset` against the range and duplicates the fd into region->file_fd. */
kvt_status kvt_file_region_prepare(kvt_region *region, int32_t fd, uint64_t file_offset);

/* (P, before the backend connects) Maps the peer's liveness table read-only into conn->liveness when its process is
 * on this host, in this pid namespace, this process may open its fds (/proc/<pid>/fd) and the table names the
 * peer's incarnation; else leaves it NULL. When the peer has vram, its file stays open in conn->liveness_file, for
 * holds. */
void kvt_liveness_map(kvt_conn *conn);
/* (P) Unmaps the table and closes its file, which ends every hold this process had on it: called once no mapping
 * of the peer's vram is open. */
void kvt_liveness_unmap(kvt_conn *conn);
/* What a reader holds of an owner's vram region: its allocation open here, or a WRITE into it in flight. */
typedef enum { KVT_HOLD_MAPPING, KVT_HOLD_WRITE } kvt_hold_kind;
/* (P, a reader) Holds the peer's vram `region` before this process opens its allocation (KVT_HOLD_MAPPING) or
 * launches a WRITE into it (KVT_HOLD_WRITE), until kvt_liveness_let_go: the owner's free of that allocation, or its
 * withdrawal of the region, waits for it (kvt_liveness_claim). NOT_FOUND (no detail) when the owner is freeing or
 * withdrawing it; BACKEND when the hold cannot be taken. A hold taken does not say the region is live: check it
 * after. Holds of one process on one byte do not add up: one let-go ends them all. */
kvt_status kvt_liveness_hold(const kvt_conn *conn, const kvt_remote_region *region, kvt_hold_kind kind);
void kvt_liveness_let_go(const kvt_conn *conn, const kvt_remote_region *region, kvt_hold_kind kind);
/* (an owner) Claims [address, +length) of its vram against readers' holds of `kind`: true when no reader in another
 * process holds a region in it (then none can begin to until kvt_liveness_unclaim), or the agent has no table (no
 * reader ever could). */
bool kvt_liveness_claim(kvt_agent *agent, kvt_hold_kind kind, uint64_t address, uint64_t length);
void kvt_liveness_unclaim(kvt_agent *agent, kvt_hold_kind kind, uint64_t address, uint64_t length);
/* (P) Whether the peer's `region` still holds its slot in the mapped table. A caller checking bytes it moved
 * makes a full fence first, so that every byte was moved before the slot is read. */
bool kvt_remote_region_live(const kvt_conn *conn, const kvt_remote_region *region);
/* (P) Maps the peer's file-backed regions for READs when its liveness table is mapped (kvt_liveness_map) and this
 * process may open their fds; regions it cannot map stay on UCX. */
void kvt_file_regions_map(kvt_conn *conn);
/* (P) Unmaps the file-backed regions' views. */
void kvt_file_regions_unmap(kvt_conn *conn);
/* (P) After copies out of file-backed regions of `conn`: a full fence, then whether each region's slot still
 * holds its id — the owner withdrew none of them before every byte copied was read. */
bool kvt_file_reads_live(kvt_agent *agent, const kvt_conn *conn, const kvt_remote_region *const *regions,
                         unsigned count);
/* Test hook: a held agent's progress thread waits between the copies and that check. */
kvt_status kvt_test_hold_file_check(uint32_t agent_id, bool hold);
/* Test hook: whether the progress thread is waiting there. */
kvt_status kvt_test_file_check_waiting(uint32_t agent_id, bool *out_waiting);

#endif
