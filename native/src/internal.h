/* Internal declarations shared by the library's sources. */
#ifndef KVT_INTERNAL_H
#define KVT_INTERNAL_H

#include "kvreuse_transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#define KVT_STRINGIFY_(x) #x
#define KVT_STRINGIFY(x) KVT_STRINGIFY_(x)

#ifndef KVT_HAVE_UCX
#define KVT_HAVE_UCX 0
#endif
#if KVT_HAVE_UCX
#include <ucp/api/ucp.h>
#define UCP_API_VERSION_TEXT KVT_STRINGIFY(UCP_API_MAJOR) "." KVT_STRINGIFY(UCP_API_MINOR)
#endif

/* ---- errors (status.c) ---------------------------------------------------------------------- */

/* Records the calling thread's error detail (printf-style) and returns `code`. */
kvt_status kvt_fail(kvt_status code, const char *format, ...) __attribute__((format(printf, 2, 3)));
void kvt_detail_clear(void);
bool kvt_is_error_code(kvt_status status);

/* ---- utilities (util.c) ---------------------------------------------------------------------- */

uint64_t kvt_now_ns(void);
uint32_t kvt_crc32(const uint8_t *data, size_t length);
uint64_t kvt_random64(void);

/* ---- notification headers (notify_header.c) ----------------------------------------------------- */

#define KVT_NOTIFY_HEADER_FIXED 6u /* u32 magic + u16 name length */
/* Writes the header naming `sender` (at most KVT_MAX_NAME bytes) into `buffer`; returns its size. */
size_t kvt_notify_header_write(uint8_t *buffer, const char *sender);
/* Whether `header` is a well-formed header, with its sender (printable ASCII) copied out. */
bool kvt_notify_header_parse(const uint8_t *header, size_t header_length, char sender[KVT_MAX_NAME + 1]);

/* ---- copies (copy.c) -------------------------------------------------------------------------- */

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

/* uint64 key → pointer map (open addressing, keys != 0). */
typedef struct {
    uint64_t *keys;
    void **values;
    size_t capacity; /* power of two or 0 */
    size_t size;
} kvt_map;
void *kvt_map_get(const kvt_map *map, uint64_t key);
bool kvt_map_put(kvt_map *map, uint64_t key, void *value); /* false when out of memory */
void kvt_map_remove(kvt_map *map, uint64_t key);
void kvt_map_free(kvt_map *map);

/* ---- mappings (mapping.c) ------------------------------------------------------------------------ */

/* What backs `address` as /proc/self/maps names it ("/dev/shm/ucx_shm_posix_… (deleted)" for UCX's posix
 * segments, "/SYSV00000000 (deleted)" for SysV shared memory, "anonymous memory"), and whether the mapping
 * is shared with other processes. False (and "no mapping") when nothing is mapped there. */
bool kvt_mapping_describe(uint64_t address, char *out, size_t size, bool *out_shared);
/* Whether [address, +length) lies in one shared mapping of the file (device, inode) at `file_offset`; else
 * false with why not in `why`. */
bool kvt_mapping_of_file(uint64_t address, uint64_t length, uint64_t device, uint64_t inode, uint64_t file_offset,
                         char *why, size_t why_size);
/* Bytes free in /dev/shm (0 when it cannot be asked). */
uint64_t kvt_shm_free_bytes(void);

/* ---- liveness (liveness.c) ----------------------------------------------------------------------- */

/* Identifies a process: pid, pid namespace (inode of /proc/<pid>/ns/pid; 0 unknown), kernel boot id
 * (all zero: unknown) and start time (so a reused pid is not it). */
typedef struct {
    uint64_t pid;
    uint64_t pid_namespace;
    uint8_t boot_id[16];
    uint64_t start_time;
} kvt_process_identity;
void kvt_process_identity_self(kvt_process_identity *out);
/* Whether a process can be judged by its pid from here: same host (boot id) and same pid namespace. */
bool kvt_process_checkable(const kvt_process_identity *identity);

/* ---- objects ---------------------------------------------------------------------------------- */

typedef struct kvt_agent kvt_agent;

typedef struct kvt_allocation {
    uint64_t address, length;
    void *backend; /* UCX: ucp_mem_h of the UCP_MEM_MAP_ALLOCATE mapping */
    bool locked;
    bool populating; /* kvt_mem_alloc_begin: its pages are being backed on the progress thread */
} kvt_allocation;

typedef struct kvt_region {
    uint32_t id, kind, device;
    uint64_t address, length;
    uint32_t busy; /* references from non-terminal operations */
    void *backend; /* UCX: ucp_mem_h */
    bool backend_borrowed; /* the handle belongs to an allocation */
    uint8_t *rkey; /* packed remote key (may be empty) */
    uint32_t rkey_length;
    int file_fd; /* kvt_mem_register_fd: the library's duplicate of the file's fd, else -1 */
    uint64_t file_offset;
    uint32_t liveness_slot; /* its slot in the agent's liveness table (file-backed regions) */
} kvt_region;

/* One region a peer advertised. */
typedef struct kvt_remote_region {
    uint32_t id, kind, device;
    uint64_t address, length;
    uint8_t *rkey;
    uint32_t rkey_length;
    void *backend; /* UCX: ucp_rkey_h */
    uint8_t *mapped; /* UCX: where this process maps the whole region through shared memory, or NULL */
    /* A file-backed region (kvt_mem_register_fd): the fd number in the peer's process (KVT_NO_FILE_FD when
     * none), the region's offset in that file and its slot in the peer's liveness table. */
    uint32_t file_fd;
    uint64_t file_offset;
    uint32_t liveness_slot;
    uint8_t *file_view;     /* UCX: where this process maps the region's file for READs (file_regions.c), or NULL */
    void *file_mapping;     /* the mapping file_view lies in (page-aligned), and its length */
    uint64_t file_mapping_length;
} kvt_remote_region;

#define KVT_NO_FILE_FD UINT32_MAX

/* A peer's parsed metadata blob. */
typedef struct kvt_metadata {
    uint32_t backend;
    char name[KVT_MAX_NAME + 1];
    uint64_t incarnation, generation;
    uint8_t *worker_address;
    uint32_t worker_address_length;
    kvt_process_identity process;
    uint32_t liveness_fd; /* the fd number of its liveness table in its process, KVT_NO_FILE_FD when none */
    uint32_t region_count;
    kvt_remote_region *regions;
} kvt_metadata;

/*
 * A connection to one incarnation of a peer: its metadata plus backend state (UCX endpoint and
 * unpacked keys). Reference-counted under the agent lock by the peer that uses it and by every
 * non-terminal operation; when unreferenced it moves to the agent's dead list and the progress
 * thread closes it.
 */
typedef struct kvt_conn {
    kvt_metadata meta;
    uint32_t refs;
    _Atomic bool failed; /* the peer went away, or its endpoint was force-closed: reload to use it again */
    _Atomic bool probed, answered; /* heartbeat: a probe was sent on it / an answer came back on it */
    void *backend;       /* UCX: the endpoint (ucx.c) */
    int process_fd;      /* a pidfd of the peer's process once a check opened it (liveness.c), else -1 */
    const _Atomic uint64_t *liveness; /* the peer's liveness table, mapped read-only (file_regions.c), or NULL */
    bool process_fd_tried;
    struct kvt_conn *next_dead;
} kvt_conn;

/* True only when the peer's process shares this process's host (boot id) and pid namespace and no
 * process with that pid and start time is alive (a zombie counts as gone). Peers elsewhere are never
 * judged gone here: the transport reports them. Progress thread only. */
bool kvt_conn_process_gone(kvt_conn *conn);
/* Closes what kvt_conn_process_gone opened for `conn`. */
void kvt_conn_forget_process(kvt_conn *conn);

/* A peer's heartbeat state (heartbeat.c), under the agent lock. */
typedef struct {
    bool watched;
    bool awaiting;     /* a probe is unanswered */
    bool unresponsive; /* the last transition reported */
    uint32_t missed;   /* probe ticks since the first unanswered probe */
    uint64_t silent_since_ns; /* when the first unanswered probe was sent */
    uint64_t transitions, reported; /* odd: UNRESPONSIVE; reports polled so far */
    uint64_t unresponsive_silence_ns, responsive_silence_ns; /* of the latest transition of each kind */
} kvt_peer_heartbeat;

typedef struct kvt_peer {
    uint32_t id;
    char name[KVT_MAX_NAME + 1];
    uint64_t generation;
    uint32_t state; /* KVT_PEER_* (DISCONNECTED is derived from conn->failed) */
    uint32_t busy;  /* non-terminal operations */
    kvt_conn *conn; /* NULL once invalidated */
    kvt_peer_heartbeat heartbeat;
} kvt_peer;

enum kvt_command_kind {
    KVT_CMD_POST,     /* op */
    KVT_CMD_CALL,     /* run `call(agent, arg)` on the progress thread and report its status */
    KVT_CMD_STOP,     /* shut down: close the connections (by agent->shutdown_deadline_ns), stop the backend */
};

typedef struct kvt_command {
    enum kvt_command_kind kind;
    struct kvt_op *op;
    kvt_status (*call)(kvt_agent *agent, void *arg, char *detail, size_t detail_size);
    void *arg;
    /* Synchronous commands: the caller waits on agent->command_done until `done`. */
    bool sync, done;
    kvt_status result;
    char detail[512];
    struct kvt_command *next;
} kvt_command;

typedef struct kvt_desc {
    uint64_t local_address, remote_address, length;
    uint32_t local_slot, remote_slot; /* index into the op's local regions / conn->meta.regions */
} kvt_desc;

enum kvt_op_phase {
    KVT_PHASE_QUEUED,   /* posted, not yet seen by the progress thread */
    KVT_PHASE_MOVING,   /* descriptors being issued / in flight */
    KVT_PHASE_MOVED,    /* the backend finished moving (or failed); op->error says which */
    KVT_PHASE_NOTIFYING,
    KVT_PHASE_HELD,     /* backend done; held by a completion delay */
    KVT_PHASE_TERMINAL,
};

struct kvt_expansion;

typedef struct kvt_op {
    uint64_t id;
    uint32_t direction;
    kvt_peer *peer;
    kvt_conn *conn;
    uint32_t count;
    kvt_desc *descs;
    /* A template post (template.c): descs is a window the progress thread refills from the template's
     * segments as it issues them (kvt_op_more); NULL for an explicit post. */
    struct kvt_expansion *expansion;
    uint32_t local_count;
    kvt_region **locals;
    uint8_t notification[KVT_MAX_NOTIFICATION];
    uint32_t notification_length;
    uint64_t bytes_total;
    /* Bytes and destination span both reach kvt_streaming_threshold(): direct copies use
     * non-temporal stores (the destination would not stay in the cache; regular stores also read it). */
    bool streaming;
    _Atomic uint64_t bytes_done; /* written by the progress thread only (kvt_op_add_bytes_done) */
    int32_t status; /* KVT_IN_PROGRESS until terminal; under the agent lock */
    /* Owned by the progress thread. */
    enum kvt_op_phase phase;
    uint32_t next;        /* next descriptor to issue */
    uint64_t next_offset; /* bytes of descs[next] already issued (loopback chunking) */
    uint64_t bytes_issued; /* UCX: bytes handed to requests or copied so far */
    uint32_t outstanding; /* backend requests in flight */
    uint64_t outstanding_bytes;
    void *requests;            /* UCX: the outstanding requests, linked through their request space */
    uint64_t stop_deadline_ns; /* UCX: stopping with requests outstanding; when to force-close (0: not yet) */
    bool flushed;         /* WRITE: remote completion confirmed (UCX) */
    kvt_status error;     /* first error, KVT_OK if none */
    _Atomic bool cancel_requested;
    uint64_t backend_done_ns;
    kvt_status backend_status;
    struct kvt_op *next_active;
    kvt_command command; /* the KVT_CMD_POST that hands it to the progress thread */
    /* The op is its own completion record: once terminal it is linked on the agent's completion queue
     * (under the agent's delivery_lock) until polled or released, so delivering it cannot fail. */
    bool completion_queued;
    struct kvt_op *completion_prev, *completion_next;
} kvt_op;

/* ---- the agent ------------------------------------------------------------------------------- */

typedef struct kvt_backend kvt_backend;

typedef struct kvt_fault {
    uint32_t remaining; /* 0 = disarmed; the call that brings it to 0 fails */
    kvt_status code;
} kvt_fault;

typedef struct kvt_notification {
    char sender[KVT_MAX_NAME + 1];
    uint32_t length;
    uint8_t data[];
} kvt_notification;

struct kvt_agent {
    uint32_t id;
    char name[KVT_MAX_NAME + 1];
    uint32_t backend_kind;
    const kvt_backend *backend;
    void *backend_state;
    uint64_t incarnation;
    kvt_process_identity process;

    /* Registry bookkeeping (agents_lock in agent.c). */
    uint32_t api_refs;
    bool ready;   /* started (and not shutting down): visible to every call and to loopback peers */
    _Atomic bool closing; /* a shutdown is deciding: new API calls wait for its outcome */
    bool shutting_down;   /* a shutdown was accepted: only its status and destroy find the agent */
    bool destroying;      /* a destroy owns the agent: nothing finds it */
    bool thread_started;  /* the progress thread exists (to join) */

    /* The start of the backend on the progress thread (agent->lock). */
    bool announce_start; /* kvt_agent_create_begin: the start is announced on the wake-up pipe */
    bool start_done;
    kvt_status start_status;
    char start_detail[512];

    /* The shutdown (agent->lock): its deadline, and its outcome once the progress thread finished it. */
    uint64_t shutdown_deadline_ns;
    bool shutdown_done;
    kvt_status shutdown_status;
    char shutdown_detail[1024];
    kvt_command stop_command;

    /* Lock order: config_lock, region_lock, lock, then at most one leaf lock (delivery_lock, command_lock,
     * blocks_lock). The progress thread takes `lock` for bookkeeping only, never across a backend call or a
     * read of /proc: whatever it holds, a caller may be waiting for. */
    /* Serialises calls that change registrations, allocations and peers. */
    pthread_mutex_t config_lock;
    /* Protects everything below unless noted. */
    pthread_mutex_t lock;
    pthread_cond_t command_done;
    pthread_cond_t pending_cond; /* completions or notifications became pending */
    /* Held for reading while another agent's loopback copy touches this agent's regions. */
    pthread_rwlock_t region_lock;
    /* What the consumer polls after a wake-up — completions, notifications — and the wake-up edge: a leaf
     * lock, taken inside `lock` or alone. kvt_agent_poll and kvt_notify_poll take only this one, so they never
     * wait for `lock`, which the progress thread takes while it works (and may be preempted holding: a poll
     * waited 5.7 ms for it on a quiet 2-core machine). */
    pthread_mutex_t delivery_lock;
    kvt_op *completions_first, *completions_last; /* terminal ops not yet polled, oldest first */
    size_t completion_count;
    kvt_notification **notifications; /* ring */
    size_t notification_head, notification_count;
    bool wake_signaled; /* a byte was written to the wake-up pipe since the last poll */

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
    uint64_t next_mem_job_id;
    kvt_region **regions;
    uint32_t region_count, region_capacity;
    kvt_peer **peers;
    uint32_t peer_count, peer_capacity;
    kvt_map ops;
    kvt_conn *dead_conns;
    _Atomic bool dead_conns_pending; /* lets the progress thread skip the lock when there are none */

    int wake_pipe[2];
    uint32_t blocked_waits; /* kvt_agent_wait callers between their checks (for kvt_agent_blocked_waits) */

    /* Commands queued for the progress thread, under command_lock: a leaf lock, taken inside `lock` by
     * kvt_command_submit_locked and alone by the progress thread, which so takes its commands without
     * `lock`. */
    pthread_mutex_t command_lock;
    kvt_command *commands, *commands_tail;
    _Atomic bool commands_pending;
    /* A caller waits on a queued command (it holds the JavaScript thread): the round of operations in
     * progress stops after the operation it is at, rather than after every operation's slice. */
    _Atomic bool caller_waiting;
    _Atomic bool sleeping; /* the progress thread may be in backend->sleep: a queued command must kick it */
    int command_fd; /* eventfd the progress thread sleeps on */
    pthread_t thread;
    _Atomic bool abandoned; /* the library is being unloaded: the progress thread returns at once */

    uint32_t heartbeat_interval_ms, heartbeat_misses;
    /* Heartbeat transitions not yet polled; changed under `lock`, read without it by a re-arm of the wake-up
     * and by kvt_peer_events_poll, which takes `lock` only when there is one. */
    _Atomic uint64_t peer_events_pending;
    _Atomic uint64_t next_heartbeat_ns; /* the next probe round (0: at once); progress thread, reset by settings */
    bool heartbeat_probing; /* progress thread: the last round probed a peer */
    _Atomic bool heartbeat_woken; /* kvt_heartbeat_wake */

    kvt_fault faults[KVT_FAULT_ALLOCATION + 1];
    _Atomic bool progress_stalled; /* kvt_fault_stall_progress */
    _Atomic uint32_t delay_ms; /* kvt_fault_delay_completions: read by the progress thread without the lock */
    _Atomic uint64_t issue_limit; /* kvt_fault_pause_issue: bytes of each operation the backend may issue */
    struct kvt_liveness_table *liveness; /* file_regions.c: NULL until the first file-backed registration */
    _Atomic int file_check_hold;  /* kvt_test_hold_file_check: 0 off, 1 held, 2 the progress thread waits */
    _Atomic bool serving_held;    /* kvt_test_hold_serving: UCX does not progress the serving worker */

    _Atomic uint64_t counters[KVT_COUNTER_COUNT];

    /* Warm blocks for operations (blocks.c), under blocks_lock: a leaf lock, nothing else is taken
     * while it is held. */
    pthread_mutex_t blocks_lock;
    struct kvt_block *blocks_cached;
    uint32_t blocks_cached_count;
    size_t blocks_cached_bytes;
    _Atomic size_t blocks_wanted; /* a block of this many bytes for the progress thread to prepare (0: none) */
    struct kvt_block *blocks_preparing; /* progress thread: the block being written, and how far */
    size_t blocks_prepared;

    /* Registered transfer templates by id (template.c); under `lock`. */
    kvt_map templates;
    uint32_t next_template_id;

    /* Progress thread only. */
    kvt_op *active;  /* ops in QUEUED..NOTIFYING, in the order posted */
    kvt_op **active_tail; /* the link the next posted op goes to (&active when there is none) */
    kvt_op *held;    /* ops in HELD */
};

/* ---- backends -------------------------------------------------------------------------------- */

/* Functions marked (P) run on the agent's progress thread only. */
struct kvt_backend {
    /* (P) at thread start / end. */
    kvt_status (*start)(kvt_agent *agent, char *detail, size_t detail_size);
    void (*stop)(kvt_agent *agent);
    /* (P) memory. */
    kvt_status (*alloc)(kvt_agent *agent, kvt_allocation *allocation, char *detail, size_t detail_size);
    void (*free_allocation)(kvt_agent *agent, kvt_allocation *allocation);
    kvt_status (*map)(kvt_agent *agent, kvt_region *region, const kvt_allocation *exact, char *detail,
                      size_t detail_size);
    void (*unmap)(kvt_agent *agent, kvt_region *region);
    /* (P) stops serving requests of readers that may hold metadata exported so far (NULL: the backend
     * checks every remote access against the live regions itself, as loopback does). */
    void (*fence)(kvt_agent *agent);
    /* Worker address for the metadata blob (any thread; stable after start). */
    const uint8_t *(*address)(kvt_agent *agent, uint32_t *length);
    /* (P) connections. */
    kvt_status (*connect)(kvt_agent *agent, kvt_conn *conn, char *detail, size_t detail_size);
    void (*disconnect)(kvt_agent *agent, kvt_conn *conn);
    /* (P) agent shutdown, after every connection was disconnected: whether closes are still finishing.
     * At `deadline_ns` it force-closes what is left, naming those peers in `forced`, and answers false.
     * NULL when disconnect finishes at once. */
    bool (*closing)(kvt_agent *agent, uint64_t deadline_ns, char *forced, size_t forced_size);
    /* (P) moves a KVT_PHASE_MOVING op forward; sets op->error on failure and op->phase = KVT_PHASE_MOVED
     * once nothing of it is in flight any more (all moved, failed, or canceled: op->cancel_requested). */
    void (*advance)(kvt_agent *agent, kvt_op *op);
    /* (P) sends a notification. With op != NULL it may answer KVT_IN_PROGRESS and report the end through
     * kvt_op_notified; with op == NULL it copies `data` if it needs it after returning. */
    kvt_status (*notify)(kvt_agent *agent, kvt_conn *conn, kvt_op *op, const uint8_t *data, uint32_t length);
    /* (P) sends a heartbeat probe to the connection's peer; its answer reaches kvt_heartbeat_answered on this
     * agent's progress thread with `peer_id`. Nothing when it cannot be sent (it counts as unanswered). */
    void (*probe)(kvt_agent *agent, kvt_conn *conn, uint32_t peer_id);
    /* (P) writes a description of the path to the peer (UCX: the endpoint's lanes). */
    void (*describe)(kvt_agent *agent, kvt_conn *conn, FILE *out);
    /* Whether alloc/free_allocation/map/unmap may run on any thread (no progress-thread round trip). */
    bool memory_on_any_thread;
    /* (P) one round of backend progress; true if anything happened. */
    bool (*progress)(kvt_agent *agent);
    /* (P) blocks until the backend or command fd has events or timeout_ms passes. */
    void (*sleep)(kvt_agent *agent, int timeout_ms);
};

extern const kvt_backend kvt_loopback_backend;
#if KVT_HAVE_UCX
extern const kvt_backend kvt_ucx_backend;
/* Loads UCX on the first call (ucx_api.c): NULL once it is loaded, else why it could not be (static). */
const char *kvt_ucx_unavailable(void);
#endif

/* ---- agent helpers (agent.c) ------------------------------------------------------------------- */

/* Looks an agent up and pins it against destruction; NOT_FOUND (with detail naming `call`) if absent. */
kvt_status kvt_agent_acquire(uint32_t id, const char *call, kvt_agent **out);
void kvt_agent_release(kvt_agent *agent);
/* Starts an API call on an agent: clears the thread's detail and acquires it (a failure is counted). */
kvt_status kvt_enter(uint32_t id, const char *call, kvt_agent **out);
/* A poll's arguments: INVALID_PARAM "<call>: <requirement>" (counted) unless `arguments_present`,
 * then kvt_enter. */
kvt_status kvt_poll_enter(uint32_t id, const char *call, bool arguments_present, const char *requirement,
                          kvt_agent **out);
/* Counts `status` if it is an error, releases the agent and returns `status`. */
kvt_status kvt_agent_finish(kvt_agent *agent, kvt_status status);
/* Counts `status` when it is an error (for the agent, if any, and process-wide) and returns it. */
kvt_status kvt_count_result(kvt_agent *agent, kvt_status status);
void kvt_counter_add(kvt_agent *agent, uint32_t index, int64_t delta);
/* Queues a command for the progress thread; sync commands wait (agent->lock must be held). */
void kvt_command_submit_locked(kvt_agent *agent, kvt_command *command);
/* Runs `call` on the progress thread and returns its status, copying its detail. Lock not held. */
kvt_status kvt_agent_call(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t), void *arg);
/* Queues `call` with a copy of `arg` for the progress thread and returns at once (its status is dropped);
 * false (nothing queued) when out of memory. */
bool kvt_agent_try_call_async(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t),
                              const void *arg, size_t arg_size);
/* As kvt_agent_try_call_async, but waits for the call instead when out of memory. */
void kvt_agent_call_async(kvt_agent *agent, kvt_status (*call)(kvt_agent *, void *, char *, size_t), const void *arg,
                          size_t arg_size);
/* Wakes the progress thread. */
void kvt_agent_kick(kvt_agent *agent);
/* Something became pending (agent->lock held): wakes kvt_agent_wait callers and arms the wake-up edge. True
 * when a byte is due on the wake-up pipe: the caller writes it with kvt_wake_consumer once it released the
 * lock, so the consumer it wakes does not find the lock held. */
bool kvt_signal_pending_locked(kvt_agent *agent);
/* After a poll: re-arms the wake-up edge; true when something is still pending, so a byte is due again. */
bool kvt_rearm_wake(kvt_agent *agent);
/* Writes a byte to the wake-up pipe (hold no lock of the agent). */
void kvt_wake_consumer(kvt_agent *agent);
/* Frees the memory jobs whose outcome nobody asked for (destroy, after the progress thread ended). */
void kvt_mem_jobs_free(kvt_agent *agent);
/* Consumes a one-shot fault at `point` (agent->lock held): its code, or KVT_OK. */
kvt_status kvt_fault_take_locked(kvt_agent *agent, uint32_t point);
/* Queues a terminal op's completion / takes it off the queue (agent->lock held; takes delivery_lock;
 * allocates nothing). */
void kvt_completion_push_locked(kvt_agent *agent, kvt_op *op);
void kvt_completion_remove_locked(kvt_agent *agent, kvt_op *op);
/* Finds a live agent by name and incarnation and pins it (loopback peers). NULL when gone. */
kvt_agent *kvt_agent_find_live(const char *name, uint64_t incarnation);
/* Queues a received notification (takes agent->lock). */
void kvt_agent_deliver_notification(kvt_agent *agent, const char *sender, const uint8_t *data, uint32_t length);
/* Test hook (UCX): stops (hold) or resumes progressing the agent's serving worker, so requests of readers of
 * its memory wait unanswered — a test can then have them in flight while the agent deregisters. */
kvt_status kvt_test_hold_serving(uint32_t agent_id, bool hold);
/* Test hook: how many kvt_agent_wait callers are blocked on the agent (read under its lock, where a counted
 * caller can only be inside its condition wait), so tests can order a call after a wait has begun. */
kvt_status kvt_agent_blocked_waits(uint32_t agent_id, uint32_t *out_count);

/* ---- peers (peer.c) ------------------------------------------------------------------------------- */

void kvt_conn_unref_locked(kvt_agent *agent, kvt_conn *conn);
/* The agent's peer `id`, or NOT_FOUND naming `call` (agent->lock held). */
kvt_status kvt_peer_lookup_locked(kvt_agent *agent, const char *call, uint32_t id, kvt_peer **out);
void kvt_metadata_free(kvt_metadata *meta);
/* Frees closed connections on the dead list (progress thread). */
void kvt_reap_dead_conns(kvt_agent *agent);
void kvt_peers_free_all(kvt_agent *agent);

/* (P, liveness.c) At most every 100 ms: calls `on_gone` for each not yet failed connection of an active operation
 * whose process is gone (kvt_conn_process_gone). */
void kvt_liveness_check(kvt_agent *agent, uint64_t *next_check_ns, void (*on_gone)(kvt_agent *, kvt_conn *));

/* ---- file-backed regions (file_regions.c) --------------------------------------------------------- */

/* The owner's liveness table: a sealed memfd of a header (magic, incarnation) and one 8-byte slot per live
 * file-backed region, holding the region's id while it is registered and 0 once it was withdrawn. */
typedef struct kvt_liveness_table kvt_liveness_table;
/* Creates the agent's table unless it has one (config_lock held); BACKEND naming the failing call. */
kvt_status kvt_liveness_table_ensure(kvt_agent *agent);
/* Its fd number, or KVT_NO_FILE_FD when the agent has no table (agent->lock held). */
uint32_t kvt_liveness_table_fd(const kvt_agent *agent);
void kvt_liveness_table_free(kvt_agent *agent);
/* Marks `region` (its id assigned) live in a free slot / withdrawn (agent->lock held). */
void kvt_liveness_mark_live_locked(kvt_agent *agent, kvt_region *region);
void kvt_liveness_mark_withdrawn_locked(kvt_agent *agent, const kvt_region *region);
/* Checks `fd` and `file_offset` against the range and duplicates the fd into region->file_fd. */
kvt_status kvt_file_region_prepare(kvt_region *region, int32_t fd, uint64_t file_offset);

/* (P) Maps the peer's file-backed regions for READs when its process is on this host, in this pid
 * namespace and this process may open its fds (/proc/<pid>/fd); regions it cannot map stay on UCX. */
void kvt_file_regions_map(kvt_conn *conn);
void kvt_file_regions_unmap(kvt_conn *conn);
/* (P) After copies out of file-backed regions of `conn`: a full fence, then whether each region's slot still
 * holds its id — the owner withdrew none of them before every byte copied was read. */
bool kvt_file_reads_live(kvt_agent *agent, const kvt_conn *conn, const kvt_remote_region *const *regions,
                         unsigned count);
/* Test hook: a held agent's progress thread waits between the copies and that check. */
kvt_status kvt_test_hold_file_check(uint32_t agent_id, bool hold);
/* Test hook: whether the progress thread is waiting there. */
kvt_status kvt_test_file_check_waiting(uint32_t agent_id, bool *out_waiting);

/* ---- heartbeat (heartbeat.c) ---------------------------------------------------------------------- */

/* (P) When a round is due: probes every peer with operations in flight or watched, and reports the ones
 * that answered nothing for the agent's miss count. */
void kvt_heartbeat_tick(kvt_agent *agent);
/* Something may start probing (a post, a watch): an idle progress thread runs a round at its next turn. */
void kvt_heartbeat_wake(kvt_agent *agent);
/* (P) Milliseconds until the next round while peers are being probed, else -1. */
int kvt_heartbeat_next_timeout_ms(kvt_agent *agent);
/* (P) A probe of peer `peer_id` was answered. */
void kvt_heartbeat_answered(kvt_agent *agent, uint32_t peer_id);
/* A peer is being forgotten: drops its unread reports and its unresponsive count (agent->lock held). */
void kvt_heartbeat_peer_removed_locked(kvt_agent *agent, kvt_peer *peer);

/* ---- metadata (metadata.c) ------------------------------------------------------------------------ */

kvt_status kvt_metadata_encode_locked(kvt_agent *agent, uint8_t *buffer, uint64_t capacity, uint64_t *out_length);
kvt_status kvt_metadata_parse(const uint8_t *blob, uint64_t length, kvt_metadata *out);

/* ---- operations (xfer.c) ------------------------------------------------------------------------- */

/* Progress thread: takes a posted op (command != NULL), or steps every active and held op (NULL). */
void kvt_ops_run(kvt_agent *agent, kvt_command *posted);
/* Milliseconds until the next held op is due, or -1 for none. */
int kvt_ops_next_timeout_ms(kvt_agent *agent);
/* Backend callback (progress thread): the op's notification was sent, or failed with `status`. */
void kvt_op_notified(kvt_agent *agent, kvt_op *op, kvt_status status);
void kvt_op_backend_finished(kvt_agent *agent, kvt_op *op);
void kvt_op_free(kvt_agent *agent, kvt_op *op);
/* A queued op with room for `desc_capacity` descriptors, `local_count` local regions and (at
 * *out_remote_slots, when given) `remote_slot_count` scratch slots, all in one of the agent's warm blocks;
 * NULL when out of memory. The descriptors are not zeroed. */
kvt_op *kvt_op_new(kvt_agent *agent, uint32_t direction, uint32_t desc_capacity, uint32_t local_count, uint32_t remote_slot_count,
                   const uint8_t *notification, uint32_t notification_length, uint32_t **out_remote_slots);
/* Peer `peer_id` when it is usable at `generation` (agent->lock held): NOT_FOUND when stale, invalidated or
 * unknown, REMOTE_DISCONNECT when its connection failed. */
kvt_status kvt_resolve_peer_locked(kvt_agent *agent, const char *call, uint32_t peer_id, uint64_t generation,
                                   kvt_peer **out);
/* Takes the op's references on its local regions (op->locals), `peer` and the peer's connection, which
 * becomes op->conn (agent->lock held); kvt_op_unhold_locked drops them. While held, the regions cannot be
 * deregistered (BUSY) and the connection's metadata stays. */
void kvt_op_hold_locked(kvt_peer *peer, kvt_op *op);
void kvt_op_unhold_locked(kvt_agent *agent, kvt_op *op);
/* Hands a fully built, held op to the progress thread (agent->lock held): the post fault, its id, the
 * counters. On failure nothing was started (the op is still held). */
kvt_status kvt_op_start_locked(kvt_agent *agent, const char *call, kvt_op *op);

/* ---- warm blocks (blocks.c) ---------------------------------------------------------------------- */

/* Blocks of at least this many bytes are kept for reuse (smaller ones come warm from malloc's heap). */
#define KVT_BLOCK_CACHED_MIN ((size_t)64 << 10)
/* At most this many blocks and bytes are kept per agent (the smallest are freed first). */
#define KVT_BLOCK_CACHE_COUNT 4u
#define KVT_BLOCK_CACHE_BYTES ((size_t)128 << 20)
/* Prepared when the agent starts: an operation of up to ~130,000 descriptors. */
#define KVT_BLOCK_RESERVE_BYTES ((size_t)4 << 20)
/* Bytes the progress thread writes of a block it prepares per round (commands are served between). */
#define KVT_BLOCK_PREPARE_SLICE ((size_t)256 << 10)

void kvt_blocks_init(kvt_agent *agent);
/* `bytes` of memory that is not zeroed (any thread): a cached block when one is large enough, else
 * fresh; NULL when out of memory. A large take asks the progress thread to prepare another of its size. */
void *kvt_block_take(kvt_agent *agent, size_t bytes);
/* Returns a block from kvt_block_take (NULL: nothing) to the cache, or frees it. */
void kvt_block_give(kvt_agent *agent, void *block);
/* (P) Prepares the reserve block, whole (at start, before any call can wait on the progress thread). */
void kvt_blocks_reserve(kvt_agent *agent);
/* (P) Prepares a slice of the block asked for (unless one as large is cached), writing it once so that
 * its pages are in place; cached once whole. True while it works. */
bool kvt_blocks_prepare(kvt_agent *agent);
/* Bytes cached (for tests). */
size_t kvt_blocks_cached_bytes(kvt_agent *agent);
/* Frees every cached block of a destroyed agent. */
void kvt_blocks_free_all(kvt_agent *agent);

/* ---- templates (template.c) ---------------------------------------------------------------------- */

/* (P) Refills op->descs with the next pieces of a template post; false when every piece was issued. */
bool kvt_expansion_refill(kvt_op *op);
void kvt_expansion_free(kvt_agent *agent, struct kvt_expansion *expansion);
/* Frees every registered template of a destroyed agent. */
void kvt_templates_free_all(kvt_agent *agent);

/* (P) Whether the op has a descriptor left to issue at op->descs[op->next] (refilling a template post's window). */
static inline bool kvt_op_more(kvt_op *op) {
    return op->next < op->count || (op->expansion && kvt_expansion_refill(op));
}
/* (P) Adds to op->bytes_done with a plain load and store: the progress thread is its only writer, and a
 * locked add right after a copy stalls until every store of that copy has drained (measured: ~14% of a
 * batch of 4 KiB gets). Backends add once per round, not per descriptor. */
static inline void kvt_op_add_bytes_done(kvt_op *op, uint64_t n) {
    uint64_t done = atomic_load_explicit(&op->bytes_done, memory_order_relaxed);
    atomic_store_explicit(&op->bytes_done, done + n, memory_order_relaxed);
}

#endif
