/* The agent: its parts, on the services' floor and above (agent.c runs its progress thread). */
#ifndef KVT_AGENT_H
#define KVT_AGENT_H

#include "backend.h"
#include "kvreuse_transport.h"
#include "liveness.h"
#include "memory.h"
#include "peer.h"
#include "services/commands.h"
#include "services/counters.h"
#include "services/delivery.h"
#include "services/entry.h"
#include "services/faults.h"
#include "services/util.h"
#include "xfer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the agent's progress thread is called (at most 15 bytes: the kernel keeps no more). */
#define KVT_PROGRESS_THREAD_NAME "kvt-progress"

struct kvt_agent {
    kvt_registration entry; /* first: the services reach the agent's parts through it (entry.h) */
    char name[KVT_MAX_NAME + 1];
    /* UCX's NET_DEVICES and TLS for this agent (kvt_agent_create_ucx_begin); empty: UCX's own configuration. */
    char ucx_net_devices[KVT_MAX_UCX_OPTION + 1];
    char ucx_transports[KVT_MAX_UCX_OPTION + 1];
    uint32_t backend_kind;
    const kvt_backend *backend;
    void *backend_state;
    void *vram_state; /* (P) vram_xfer.c: the agent's CUDA stream and reusable piece table, or NULL */
    /* (P) vram_holds.c: its own vram allocations freed whose driver free waits for readers, and when to retry. */
    struct kvt_vram_free *vram_frees;
    uint64_t vram_frees_retry_ns;
    bool vram_staged; /* KVT_AGENT_VRAM_STAGED: its vram moves go host-staged even where CUDA IPC could */
    kvt_process_identity process;

    /* The start of the backend on the progress thread (agent->lock). */
    bool announce_start; /* kvt_agent_create_begin: the start is announced on the wake-up pipe */
    bool start_done;
    kvt_status start_status;
    char start_detail[512];

    /* The shutdown (agent->lock): its deadline, and its outcome once the progress thread finished it. */
    uint64_t shutdown_deadline_ns;
    uint32_t shutdown_deadline_ms; /* as asked for: the outcome's detail names it */
    bool shutdown_done;
    kvt_status shutdown_status;
    char shutdown_detail[1024];
    kvt_command stop_command;

    /* Lock order: config_lock, region_lock, lock, then at most one leaf lock (delivery.lock, commands.lock,
     * blocks_lock). The progress thread takes `lock` for bookkeeping only, never across a backend call or a
     * read of /proc: whatever it holds, a caller may be waiting for. */
    /* Serialises calls that change registrations, allocations and peers. */
    pthread_mutex_t config_lock;
    /* Protects everything below unless noted. */
    pthread_mutex_t lock;
    /* Held for reading while another agent's loopback copy touches this agent's regions. */
    pthread_rwlock_t region_lock;
    kvt_counter_set counters;
    kvt_command_queue commands;
    kvt_delivery delivery;
    kvt_faults faults;

    uint64_t metadata_generation;
    /* Highest region id in metadata exported since the backend last fenced (0: none): deregistering a
     * region at or below it needs a fence, since readers may hold its remote key. */
    uint32_t exported_region_high;
    /* Fences the backend made so far: a withdrawal whose fence another made after it was withdrawn needs none. */
    uint64_t fences;
    uint32_t next_region_id, next_peer_id;
    uint64_t next_op_id;

    kvt_allocation *allocations;
    uint32_t allocation_count, allocation_capacity;
    struct kvt_mem_job *mem_jobs; /* memory jobs (kvt_mem_*_begin) not yet answered, oldest first */
    bool jobs_ended;              /* (P) a job of the commands being run ended: their batch wakes the consumer once */
    uint64_t next_mem_job_id;
    kvt_region **regions;
    uint32_t region_count, region_capacity;
    kvt_peer **peers;
    uint32_t peer_count, peer_capacity;
    kvt_map ops;
    kvt_conn *dead_conns;
    _Atomic bool dead_conns_pending; /* lets the progress thread skip the lock when there are none */

    uint32_t heartbeat_interval_ms, heartbeat_misses;
    _Atomic uint64_t next_heartbeat_ns; /* the next probe round (0: at once); progress thread, reset by settings */
    bool heartbeat_probing;             /* progress thread: the last round probed a peer */
    _Atomic bool heartbeat_woken;       /* kvt_heartbeat_wake */

    struct kvt_liveness_table *liveness;   /* file_regions.c: NULL until the first file-backed registration */
    _Atomic int file_check_hold;           /* kvt_test_hold_file_check: 0 off, 1 held, 2 the progress thread waits */
    _Atomic bool serving_held;             /* kvt_test_hold_serving: UCX does not progress the serving worker */
    _Atomic uint64_t staged_forgery;       /* kvt_test_forge_staged_requests: bytes added to asked addresses */
    _Atomic int32_t staged_fd_forgery;     /* kvt_test_forge_staged_buffers: the fd named (-1: the buffer's own) */
    _Atomic uint64_t staged_token_forgery; /* and the token named (0: the one drawn for the request) */
    _Atomic int poster_cpu;                /* the CPU the last post ran on (-1: none yet), xfer.c */

    /* Warm blocks for operations (blocks.c), under blocks_lock: a leaf lock, nothing else is taken
     * while it is held. */
    pthread_mutex_t blocks_lock;
    struct kvt_block *blocks_cached;
    uint32_t blocks_cached_count;
    size_t blocks_cached_bytes;
    _Atomic size_t blocks_wanted;       /* a block of this many bytes for the progress thread to prepare (0: none) */
    struct kvt_block *blocks_preparing; /* progress thread: the block being written, and how far */
    size_t blocks_prepared;

    /* The stream, tables and sums kvt_mem_checksums reuses on a GPU (checksums.c), under checksum_lock: a lock
     * of its own, held across the GPU's work and with no other lock of the agent. */
    pthread_mutex_t checksum_lock;
    struct kvt_checksum_gpu *checksum_gpu;

    /* Registered transfer templates by id (template.c); under `lock`. */
    kvt_map templates;
    uint32_t next_template_id;

    /* Progress thread only. */
    kvt_op *active;       /* ops in QUEUED..NOTIFYING, in the order posted */
    kvt_op **active_tail; /* the link the next posted op goes to (&active when there is none) */
    kvt_op *held;         /* ops in HELD */
};

_Static_assert(offsetof(struct kvt_agent, entry) == 0, "the services find an agent's parts through its entry");

/* Test hook (UCX): stops (hold) or resumes progressing the agent's serving worker, so requests of readers of
 * its memory wait unanswered — a test can then have them in flight while the agent deregisters. */
kvt_status kvt_test_hold_serving(uint32_t agent_id, bool hold);

/* Test hook (UCX): from now on, the agent's host-staged READs ask their sources for the bytes `shift` past
 * the pieces they posted (0: where they are), as a forged request would: the sources must refuse what lies
 * outside their live regions. */
kvt_status kvt_test_forge_staged_requests(uint32_t agent_id, uint64_t shift);

/* Test hook (UCX): from now on, the agent's host-staged READs that ask a source on this host to write in place
 * name the fd `fd` (-1: their bounce buffer's own) and the token `token` (0: the one drawn for the request;
 * KVT_TEST_REPLAYED_TOKEN: the one the buffer held for its request before), as a forged request would: sources must
 * write nothing but a sealed bounce buffer whose header holds the token named. */
#define KVT_TEST_REPLAYED_TOKEN UINT64_MAX
kvt_status kvt_test_forge_staged_buffers(uint32_t agent_id, int32_t fd, uint64_t token);

#endif
