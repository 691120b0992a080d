/*
 * libkvreuse_transport — the native transport every kvreuse byte moves through.
 *
 * Agents, explicit memory registration, metadata exchange, bounds-checked batched one-sided
 * READ/WRITE, notifications, counters and fault injection, over two backends:
 *   - KVT_BACKEND_LOOPBACK: agents in one process, bytes moved with memcpy. Always built.
 *   - KVT_BACKEND_UCX:      UCX ucp (shared memory, CMA, TCP, RDMA). Built when UCX headers exist.
 *
 * Conventions
 *   - Every call returns a kvt_status (int32_t): KVT_OK (0), KVT_IN_PROGRESS (1) or a negative
 *     KVT_ERR_* code. Out-parameters are written only when the call returns KVT_OK unless said
 *     otherwise. A failing call records a human-readable detail (naming the region, descriptor index,
 *     bounds and value) readable on the SAME thread with kvt_last_error_detail().
 *   - Handles are opaque integers, never pointers: agents are process-wide uint32 ids; regions and
 *     peers are uint32 ids and operations uint64 ids, each scoped to their agent. Ids are never
 *     reused, so a stale or doubly-closed handle yields KVT_ERR_NOT_FOUND, never a crash.
 *   - Memory addresses are passed as uint64_t.
 *   - All calls are thread-safe. The library never calls back into the caller: completions and
 *     notifications are queued and announced through a per-agent wake-up file descriptor.
 *   - kvt_agent_shutdown / kvt_agent_destroy first let the calls already running on the agent finish;
 *     calls made while they decide wait for the outcome (they then proceed, or answer KVT_ERR_NOT_FOUND).
 *   - No call waits on a peer without bound: closing an endpoint and shutting an agent down have
 *     deadlines, loading a peer does not wait for it (UCX wires the endpoint up later), and
 *     kvt_agent_create_begin / kvt_agent_shutdown do not wait at all.
 *
 * Threading model
 *   Each agent owns one progress thread, started by kvt_agent_create (or kvt_agent_create_begin), ended
 *   by kvt_agent_shutdown (or destroy) and joined by kvt_agent_destroy. For the UCX backend that
 *   thread alone owns the ucp workers (UCS_THREAD_MODE_SINGLE): it creates and closes endpoints,
 *   unpacks remote keys, issues gets and puts, sends and receives active messages, and keeps the workers progressing for as long as the
 *   agent lives — also when the agent has no operation of its own, because readers of this agent's
 *   memory stall when its worker does not progress. When idle it sleeps on the worker's event fd
 *   (UCP_FEATURE_WAKEUP) instead of spinning. API calls validate their arguments on the calling
 *   thread, then hand work to the progress thread through a queue; calls that need an answer from
 *   the backend (registration, allocation, peer load, notification send) wait for it. Each agent has
 *   its own ucp context, so nothing UCX is shared between threads.
 *   Endpoints use UCP_ERR_HANDLING_MODE_PEER; where UCX opens a memory-mapping transport (posix, sysv, xpmem), the
 *   library sets UCX's MM_ERROR_HANDLING=y (unless UCX_MM_ERROR_HANDLING is set) so that shared-memory transports
 *   stay usable under it, and ADAPTIVE_PROGRESS=n (unless
 *   UCX_ADAPTIVE_PROGRESS is set) so that a peer in another network namespace, whose shared-memory wake-ups do not
 *   reach this one, is still served. Because UCX 1.13 does not detect a killed peer on shared memory, metadata carries the process identity
 *   (pid, pid namespace, kernel boot id, start time) and peers with operations in flight that share this process's
 *   host and pid namespace are checked every 100 ms: a dead peer's endpoint is force-closed, so its operations end
 *   with KVT_ERR_REMOTE_DISCONNECT. A peer on this host in another pid namespace (a container beside this one) is
 *   reached through the network address its metadata carries (its banks still mapped), as UCX 1.13 brings nothing
 *   back from it over shared memory (without a network transport, a post that would wait for it is NOT_SUPPORTED);
 *   it, or a peer on another host, is live until the transport reports otherwise: an endpoint UCX reports as failed
 *   is force-closed at once, with the same outcome.
 *   Each UCX get or put moves at most KVT_MAX_REQUEST_BYTES; an operation that stops (cancelled, or a request failed)
 *   with requests outstanding asks UCX to cancel them and, when still outstanding 200 ms later, force-closes the endpoint.
 *   A peer region that a shared-memory transport maps into this process (kvt_mem_alloc banks on the
 *   same host: UCX attaches them while unpacking the remote key, ucp_rkey_ptr) is read and written
 *   by the progress thread's own copy, with no UCX request per descriptor; other regions go through
 *   ucp_get_nbx / ucp_put_nbx. kvt_peer_transport says which regions take which path.
 *   The loopback backend uses the same thread and queue; its copies run on the progress thread in
 *   bounded chunks so cancellation and other agents' work interleave.
 *   No thread is created per operation; thousands of concurrent operations per agent are fine.
 *
 * Completion delivery (designed for Node.js)
 *   kvt_agent_wake_fd() returns the read end of a non-blocking pipe. The library writes one byte when the agent goes
 *   from "nothing pending" to "completions, notifications or peer reports pending", and again after every
 *   kvt_agent_poll / kvt_notify_poll / kvt_peer_events_poll call that leaves something pending. The consumer reads
 *   and discards the bytes (Node: new net.Socket({ fd, readable: true, writable: false })), then calls
 *   kvt_agent_poll, which returns every completed operation at once into caller arrays and whether kvt_notify_poll
 *   (notifications) or kvt_peer_events_poll (heartbeat reports, see "Heartbeat") has any. kvt_agent_wait blocks
 *   instead.
 *   The three polls never wait for the progress thread: completions and notifications are queued under a
 *   lock of their own, held only to queue or dequeue one, and kvt_peer_events_poll takes the agent's lock
 *   only when a report is pending. The wake-up byte is written after the progress thread released its locks.
 *   An operation is its own completion record, allocated at kvt_xfer_post (which refuses with
 *   KVT_ERR_NO_MEMORY when it cannot): delivering a completion allocates nothing and cannot fail.
 *
 * Trust model of one-sided READ/WRITE
 *   A READ or WRITE is executed by the initiator alone; the remote agent's code does not see it and cannot refuse it.
 *   The remote side's memory is protected by what it chose to register (only registered regions are advertised, and
 *   every descriptor is bounds-checked against those advertised bounds before any byte moves) and, in the layers
 *   above, by pins that stop the owner from reusing blocks while a reader holds them.
 *   Stale readers (metadata loaded before a deregistration): UCX answers software gets and puts (caller memory, tcp)
 *   at whatever address the request names, so a UCX agent serves readers from a worker of its own — the one its
 *   metadata advertises — and kvt_mem_deregister of a region that exported metadata named replaces that worker before
 *   it returns (a "fence"): requests of readers holding older metadata then reach nothing, and the caller may free or
 *   reuse the memory. Such readers must load the newer metadata (over tcp their operations end
 *   KVT_ERR_REMOTE_DISCONNECT; over shared memory their requests go unanswered until cancelled). A reader that maps a
 *   kvt_mem_alloc bank through shared memory copies to and from its own mapping, which keeps the old segment alive.
 *   Outside this model: an initiator that is not this library (malicious or buggy) holding a remote key, and a stale
 *   blob loaded after the owner freed a /dev/shm bank whose descriptor number it reused.
 */
#ifndef KVREUSE_TRANSPORT_H
#define KVREUSE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KVT_BUILDING_LIBRARY) && defined(__GNUC__)
#define KVT_API __attribute__((visibility("default")))
#else
#define KVT_API
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Version                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

#define KVT_VERSION_MAJOR 0
#define KVT_VERSION_MINOR 5
#define KVT_VERSION_PATCH 0

/** The library's version (may differ from the header's KVT_VERSION_* if mismatched). Any out pointer may be NULL. */
KVT_API int32_t kvt_version(uint32_t *major, uint32_t *minor, uint32_t *patch);
/** "major.minor.patch" plus the backends built, e.g. "0.1.0 (loopback, ucx 1.13.1)". Static storage. */
KVT_API const char *kvt_version_string(void);

/* ---------------------------------------------------------------------------------------------- */
/* Status codes                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

typedef int32_t kvt_status;

enum {
    KVT_OK = 0,
    KVT_IN_PROGRESS = 1,
    KVT_ERR_INVALID_PARAM = -1,     /* a bad argument; the detail names it and its value */
    KVT_ERR_BACKEND = -2,           /* the backend (UCX, the OS) failed; the detail says how */
    KVT_ERR_NOT_FOUND = -3,         /* unknown handle, or a peer generation that is no longer current */
    KVT_ERR_MISMATCH = -4,          /* a metadata blob from another backend, or older than the one loaded */
    KVT_ERR_NOT_ALLOWED = -5,       /* the call is not allowed in this state (duplicate name, mlock limit, …) */
    KVT_ERR_BUSY = -6,              /* the object is still in use (registrations, operations) */
    KVT_ERR_NOT_SUPPORTED = -7,     /* not supported by this build/backend (e.g. vram); the detail says why */
    KVT_ERR_REMOTE_DISCONNECT = -8, /* the peer went away (process killed, agent destroyed) */
    KVT_ERR_CANCELED = -9,          /* the operation was canceled */
    KVT_ERR_TIMEOUT = -10,          /* a wait ran out of time */
    KVT_ERR_NO_MEMORY = -11,        /* the library could not allocate its own bookkeeping */
};
/** Number of error codes (KVT_ERR_INVALID_PARAM .. KVT_ERR_NO_MEMORY). */
#define KVT_ERROR_CODE_COUNT 11

/** Human-readable description of a status, e.g. "resource busy". Static storage; unknown codes too. */
KVT_API const char *kvt_strerror(kvt_status status);
/** The code's name, e.g. "KVT_ERR_BUSY", or "KVT_UNKNOWN_STATUS". Static storage. */
KVT_API const char *kvt_status_name(kvt_status status);
/**
 * Detail of the last failing call made by the calling thread (e.g. "descriptor 17: remote offset
 * 1048576 + length 131072 exceeds region 3 length 1048576 of peer 'decode-0'"), or "" after a call
 * that succeeded. Valid until the thread's next kvt_* call but kvt_thread_cpu_ns and kvt_thread_usage. Thread-local.
 */
KVT_API const char *kvt_last_error_detail(void);

/**
 * CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID; 0 when it cannot be
 * read). Read around a call, it tells a call that worked from one whose thread waited or was preempted.
 */
KVT_API uint64_t kvt_thread_cpu_ns(void);

/**
 * The calling thread's usage so far, read around a call to tell why it took long: values[0] its CPU
 * time in ns (CLOCK_THREAD_CPUTIME_ID), values[1] how often it blocked (voluntary context switches: a lock, a condition, a system
 * call that slept), values[2] how often it was preempted (involuntary context switches: runnable, but
 * another thread had the core), values[3] how long it waited for a core in ns (runnable on a run queue,
 * after a preemption or a wake-up: /proc/thread-self/schedstat; UINT64_MAX when the kernel does not report
 * it). Writes the first min(capacity, 4) of them; values[3], a file read, only when asked for.
 * KVT_ERR_INVALID_PARAM for a NULL `values`; KVT_ERR_BACKEND when the kernel does not report the first three
 * (getrusage RUSAGE_THREAD).
 */
KVT_API int32_t kvt_thread_usage(uint64_t *values, uint32_t capacity);

/* ---------------------------------------------------------------------------------------------- */
/* Capabilities and limits                                                                          */
/* ---------------------------------------------------------------------------------------------- */

enum {
    KVT_BACKEND_LOOPBACK = 1,
    KVT_BACKEND_UCX = 2,
};

enum {
    KVT_CAP_BACKENDS = 0,         /* bit mask of (1 << KVT_BACKEND_*) usable: ucx if built in and libucp.so.0 loads */
    KVT_CAP_VRAM = 1,             /* 1 if a CUDA driver (libcuda.so.1, loaded at run time) and a GPU answer, else 0 */
    KVT_CAP_MAX_DESCRIPTORS = 2,  /* most descriptors in one kvt_xfer_post batch */
    KVT_CAP_MAX_NOTIFICATION = 3, /* most bytes in one notification */
    KVT_CAP_MAX_NAME = 4,         /* most bytes in an agent name (without the terminating NUL) */
    KVT_CAP_MAX_REGIONS = 5,      /* most live registrations per agent */
    KVT_CAP_MAX_PENDING_NOTIFICATIONS = 6, /* received notifications queued per agent before drops */
    KVT_CAP_COUNT = 7,
};

#define KVT_MAX_DESCRIPTORS (1u << 20)
#define KVT_MAX_NOTIFICATION 4096u
#define KVT_MAX_NAME 255u
/* The longest UCX option value kvt_agent_create_ucx_begin takes (a device or transport list). */
#define KVT_MAX_UCX_OPTION 255u
#define KVT_MAX_REGIONS 65536u
#define KVT_MAX_PENDING_NOTIFICATIONS 65536u
/* UCX: the most bytes one get or put request moves. Merged descriptors are issued in pieces of at most
 * this, so what a stopped operation leaves in flight is bounded, and a cancel that waits for it ends. */
#define KVT_MAX_REQUEST_BYTES (1u << 20)

/**
 * Fills values[i] for i < min(capacity, KVT_CAP_COUNT) with capability KVT_CAP_i and sets
 * *out_count to the number written. Newer libraries may append capabilities.
 */
KVT_API kvt_status kvt_capabilities(uint64_t *values, uint32_t capacity, uint32_t *out_count);
/**
 * Why capability `cap` has the value it has, in words (static storage), e.g. for KVT_CAP_VRAM
 * "no: no driver library: libcuda.so.1 could not be loaded (...)", "no: no device: ...", "no: driver too
 * old: ... has no entry point cuXxx ..." or "yes: CUDA driver 13.0 (...), 1 GPU(s)"; NULL for an unknown
 * capability. The environment variable KVT_CUDA_LIBRARY names another driver file (for tests).
 */
KVT_API const char *kvt_capability_detail(uint32_t cap);

/* ---------------------------------------------------------------------------------------------- */
/* Agents                                                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* Flags of kvt_agent_create / kvt_agent_create_begin. */
enum {
    /* The agent's moves that involve vram go host-staged (the ucx backend: the source copies into pinned
     * bounce buffers, UCX carries them, the destination copies up) even where CUDA IPC could move them: to
     * test and measure staging on one node. Without it, staging is chosen when the peer is on another host or in
     * another pid namespace, or when an operation mixes dram and vram regions. */
    KVT_AGENT_VRAM_STAGED = 1u << 0,
};

/**
 * Creates an agent named `name` (NUL-terminated, 1..KVT_MAX_NAME printable ASCII bytes without
 * spaces, unique among the live agents of this process) on `backend` (KVT_BACKEND_*). `flags` is a
 * mask of KVT_AGENT_* (0 for none). Starts the agent's progress thread. Each agent gets a random 64-bit incarnation.
 * Errors: INVALID_PARAM (name, flags), NOT_SUPPORTED (backend not built), NOT_ALLOWED (duplicate
 * name), BACKEND (UCX context/worker creation failed).
 * Waits for the backend to start (UCX: tens of milliseconds); kvt_agent_create_begin does not.
 */
KVT_API kvt_status kvt_agent_create(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent);

/**
 * Creates an agent like kvt_agent_create, without waiting for its backend to start: refuses what kvt_agent_create
 * refuses before starting it, else returns KVT_IN_PROGRESS with the agent id. The progress thread starts the backend,
 * then writes a byte to the wake-up pipe (kvt_agent_wake_fd answers at once) and kvt_agent_start_status answers the
 * outcome. Until it started, only kvt_agent_wake_fd, kvt_agent_start_status, kvt_agent_shutdown (after the start),
 * kvt_agent_shutdown_status and kvt_agent_destroy find the agent (the others answer KVT_ERR_NOT_FOUND); an agent
 * whose start failed must still be destroyed (kvt_agent_destroy: only a join).
 */
KVT_API kvt_status kvt_agent_create_begin(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent);

/**
 * Creates a UCX agent like kvt_agent_create_begin(name, KVT_BACKEND_UCX, 0, out_agent), confined to the
 * network devices `net_devices` (UCX's NET_DEVICES, e.g. "lo" or "mlx5_0:1,eth1") and the transports
 * `transports` (UCX's TLS, e.g. "sm,self" or "tcp"); NULL or "" leaves that choice to UCX's own
 * configuration (its UCX_NET_DEVICES / UCX_TLS environment variables, else every device and transport).
 * Each value is at most KVT_MAX_UCX_OPTION printable ASCII bytes without spaces. Errors as
 * kvt_agent_create_begin, and INVALID_PARAM for a value too long or not printable; a device or transport
 * UCX refuses fails the start (kvt_agent_start_status: BACKEND, with UCX's reason).
 */
KVT_API kvt_status kvt_agent_create_ucx_begin(const char *name, const char *net_devices, const char *transports,
                                              uint32_t *out_agent);

/**
 * Whether an agent of kvt_agent_create_begin started: KVT_IN_PROGRESS while its backend starts, KVT_OK
 * once it did, or the error it failed with (e.g. BACKEND, the detail saying what UCX refused). Not
 * counted as a failing call.
 */
KVT_API kvt_status kvt_agent_start_status(uint32_t agent);

/* The shutdown deadline kvt_agent_destroy uses when no kvt_agent_shutdown came first, and the most
 * kvt_agent_shutdown accepts. */
#define KVT_DEFAULT_SHUTDOWN_MS 2000u
#define KVT_MAX_SHUTDOWN_MS 3600000u

/**
 * Begins shutting the agent down without waiting (for callers that must not block, e.g. Node's thread).
 * Refuses with KVT_ERR_BUSY (nothing changed) while registrations, allocations or operations (posted
 * and not yet released, terminal or not) remain; the detail says how many of each. INVALID_PARAM for
 * deadline_ms > KVT_MAX_SHUTDOWN_MS.
 * Returns KVT_IN_PROGRESS once accepted (again, with the first deadline kept, when a shutdown was
 * accepted before). From then on every call on the agent answers KVT_ERR_NOT_FOUND except
 * kvt_agent_shutdown, kvt_agent_shutdown_status and kvt_agent_destroy; loopback peers see it gone.
 * The progress thread forgets the peers, drops queued notifications and closes each endpoint
 * gracefully (UCX: flushes what it still carries, then closes it) until `deadline_ms` from now, then
 * force-closes the endpoints of peers that did not acknowledge (a stopped or unreachable peer never
 * does), gives those force-closes at most a second to finish, and stops the backend. When it is done
 * it writes a byte to the wake-up pipe, and kvt_agent_shutdown_status answers its outcome. Call
 * kvt_agent_destroy then: it only joins the finished thread and frees the agent.
 */
KVT_API kvt_status kvt_agent_shutdown(uint32_t agent, uint32_t deadline_ms);

/**
 * The outcome of the agent's shutdown: KVT_IN_PROGRESS while it runs; KVT_OK when every endpoint closed gracefully
 * or its peer was gone (failed, its process ended); KVT_ERR_TIMEOUT when the deadline passed first, the detail naming
 * the deadline (in ms, as asked for) and the peers whose endpoints were force-closed (the shutdown is complete either
 * way). NOT_ALLOWED when no shutdown was begun; NOT_FOUND once destroyed. The outcome is not counted as a failing call.
 */
KVT_API kvt_status kvt_agent_shutdown_status(uint32_t agent);

/**
 * Destroys the agent: shuts it down (kvt_agent_shutdown with KVT_DEFAULT_SHUTDOWN_MS unless a
 * shutdown was begun), waits for the shutdown to finish — bounded by its deadline plus the second
 * force-closes may take, and immediate after kvt_agent_shutdown_status answered something other
 * than KVT_IN_PROGRESS — then joins the progress thread and frees the agent and its wake-up pipe.
 * Refuses like kvt_agent_shutdown when no shutdown was begun (BUSY: nothing changed).
 */
KVT_API kvt_status kvt_agent_destroy(uint32_t agent);

/**
 * The read end of the agent's wake-up pipe (see "Completion delivery" above). Owned by the library:
 * do not close it; it stays valid until kvt_agent_destroy.
 */
KVT_API kvt_status kvt_agent_wake_fd(uint32_t agent, int32_t *out_fd);

#define KVT_PENDING_COMPLETIONS 1u   /* kvt_agent_poll's *out_pending: more than `capacity` completions, */
#define KVT_PENDING_NOTIFICATIONS 2u /* notifications for kvt_notify_poll, */
#define KVT_PENDING_PEER_EVENTS 4u   /* reports for kvt_peer_events_poll, still queued after the poll */
/**
 * Dequeues up to `capacity` operations that became terminal since they were last reported, writing
 * op_ids[i], statuses[i] (KVT_OK or a KVT_ERR_*) and bytes_done[i] for i < *out_count. Each
 * operation is reported exactly once (an operation released before being polled is not reported).
 * The operations still need kvt_xfer_release. Any of the three arrays may be NULL when capacity is 0.
 * *out_pending (may be NULL): the KVT_PENDING_* bits as the poll re-armed the wake-up edge (a set bit
 * means a byte was written too: ignoring the bits loses no wake-up). */
KVT_API kvt_status kvt_agent_poll(uint32_t agent, uint32_t capacity, uint64_t *op_ids, int32_t *statuses,
                                  uint64_t *bytes_done, uint32_t *out_count, uint32_t *out_pending);

/**
 * Blocks the caller until a completion, notification or peer report is pending for the agent, `timeout_ms`
 * elapses, or kvt_agent_destroy is called on the agent. Returns KVT_OK when something is pending,
 * KVT_ERR_TIMEOUT otherwise (an ordinary answer, not counted in the error counters). Does not dequeue.
 */
KVT_API kvt_status kvt_agent_wait(uint32_t agent, uint32_t timeout_ms);

/* ---------------------------------------------------------------------------------------------- */
/* Heartbeat: peers that answer nothing                                                             */
/* ---------------------------------------------------------------------------------------------- */

/*
 * Every interval, the agent probes each loaded peer that has operations in flight or is watched (kvt_peer_watch:
 * the layers above watch the peers they hold pins on): UCX sends an active message that the peer's progress thread
 * answers (it runs as long as the peer lives, even idle); loopback hands the probe to the target agent's progress
 * thread. A peer that answers nothing for `misses` intervals in a row is reported unresponsive, and responsive when
 * it answers again (the kinds below say why). This covers what UCX's keepalive does not: a stopped process
 * (SIGSTOP), or one whose progress thread no longer runs, on tcp and on shared memory alike. Idle, unwatched peers
 * are not probed. A probe lost for lack of memory counts as unanswered. A peer is judged by its misses only once it
 * has answered a probe on its current connection: UCX 1.13 delivers no answer from a peer in another pid namespace
 * over shared memory (the one-way limit that keeps gets of its caller memory from completing), so such a peer is
 * not reported silent (and its endpoint is force-closed when unloaded).
 *
 * A report changes nothing by itself: the peer stays KVT_PEER_READY and its operations keep going (a peer that
 * resumes finishes them). The layers above decide: cancel its operations (terminal within about a second, see
 * kvt_xfer_cancel), quarantine, route around it. Reports are announced through the wake-up pipe like
 * completions and read with kvt_peer_events_poll, each transition exactly once and in order. A peer that is
 * unloaded takes its unread reports with it.
 */

#define KVT_HEARTBEAT_DEFAULT_INTERVAL_MS 500u
#define KVT_HEARTBEAT_DEFAULT_MISSES 3u
#define KVT_HEARTBEAT_MIN_INTERVAL_MS 10u
#define KVT_HEARTBEAT_MAX_INTERVAL_MS 60000u
#define KVT_HEARTBEAT_MAX_MISSES 1000u

/**
 * Sets the agent's probe interval (KVT_HEARTBEAT_MIN_INTERVAL_MS..KVT_HEARTBEAT_MAX_INTERVAL_MS) and how
 * many intervals without an answer make a peer unresponsive (1..KVT_HEARTBEAT_MAX_MISSES). New agents use
 * KVT_HEARTBEAT_DEFAULT_INTERVAL_MS and KVT_HEARTBEAT_DEFAULT_MISSES. Applies from the next probe on;
 * peers already reported keep their state. INVALID_PARAM (nothing changes) names a value out of range.
 */
KVT_API kvt_status kvt_agent_set_heartbeat(uint32_t agent, uint32_t interval_ms, uint32_t misses);

/**
 * Watches a peer (`watched` 1) or stops watching it (0): a watched peer is probed even while no operation
 * of this agent uses it. Watching survives reloads of the peer's metadata; an invalidated peer is not
 * probed. INVALID_PARAM for `watched` other than 0 or 1.
 */
KVT_API kvt_status kvt_peer_watch(uint32_t agent, uint32_t peer, uint32_t watched);

enum {
    KVT_PEER_EVENT_UNRESPONSIVE = 1,  /* answered nothing for `misses` intervals */
    KVT_PEER_EVENT_RESPONSIVE = 2,    /* answered a probe after an unresponsive report */
    KVT_PEER_EVENT_DISCONNECTED = 3,  /* the transport failed its connection (a process elsewhere died, a close) */
    KVT_PEER_EVENT_RELOADED = 4,      /* loaded again after an unresponsive report: a new connection, judged anew */
    KVT_PEER_EVENT_PROCESS_ENDED = 5, /* its process ended (seen through its pidfd: same host and pid namespace) */
};

/**
 * Dequeues up to `capacity` peer reports, oldest first per peer: peer_ids[i], kinds[i] (KVT_PEER_EVENT_*: odd kinds
 * make the peer unresponsive, even ones responsive) and silence_ms[i] for i < *out_count. silence_ms is how long the
 * peer had answered nothing, counted from the first probe it left unanswered: when it was reported unresponsive, or
 * (RESPONSIVE) when its answer arrived; 0 when no probe awaited an answer. Each transition is reported exactly once;
 * reports left over (capacity too small) re-signal the wake-up pipe. A peer that flaps several times between two polls
 * has each transition reported; the kinds and silences of all but its latest two are those of the latest two of the
 * same parity. Any array may be NULL when capacity is 0.
 */
KVT_API kvt_status kvt_peer_events_poll(uint32_t agent, uint32_t capacity, uint32_t *peer_ids, uint32_t *kinds,
                                        uint64_t *silence_ms, uint32_t *out_count);

/* ---------------------------------------------------------------------------------------------- */
/* Memory: allocation of kvreuse-owned banks and registration of any memory                         */
/* ---------------------------------------------------------------------------------------------- */

enum {
    KVT_MEM_DRAM = 0,
    KVT_MEM_VRAM = 1,
};

enum {
    KVT_ALLOC_MLOCK = 1u << 0, /* lock the pages in RAM (NOT_ALLOWED with the limit when RLIMIT_MEMLOCK refuses) */
};

/**
 * Allocates `length` bytes (> 0) of page-aligned DRAM owned by the agent, in the form its backend moves fastest (UCX:
 * ucp_mem_map with UCP_MEM_MAP_ALLOCATE, a shared-memory segment that readers on the same host copy from directly).
 * Contents are unspecified. The memory is not registered: call kvt_mem_register on exactly [address, address + length)
 * to reuse the backend mapping at no extra cost (a sub-range is mapped anew, like caller memory). `flags` is a mask of
 * KVT_ALLOC_*. Measured with UCX 1.13 on one host: other processes read such memory ~10x faster than caller memory
 * (malloc, framework banks), which they can only read through active messages answered by this agent's progress thread.
 * Every page is backed before the call returns (prefaulted with MADV_POPULATE_WRITE on the calling thread, ~0.25 ms
 * per MiB here; kernels before 5.14 leave pages to their first touch), so memory the system cannot provide is refused
 * here, not at a later first touch. Errors: INVALID_PARAM (length 0 or above PTRDIFF_MAX, flags), NO_MEMORY when no
 * shared memory can hold `length` bytes (UCX tries SysV shared memory, then /dev/shm or UCX_POSIX_DIR: a length above
 * both kernel.shmmax and the bytes free there is refused before UCX writes any of it; its fallback to private memory is
 * refused, since readers could not map it) or the pages cannot be backed — the detail names the size, the backing and
 * the bytes free in that directory (or that statvfs could not ask it, and why) —, NOT_ALLOWED (mlock limit), BACKEND.
 * A refusal leaves nothing allocated.
 */
KVT_API kvt_status kvt_mem_alloc(uint32_t agent, uint64_t length, uint32_t flags, uint64_t *out_address);

/* Vram: kvt_mem_alloc_vram, kvt_mem_write_vram, kvt_mem_open_vram_ipc, kvt_mem_vram_ipc_handle
 * (kvreuse_transport_vram.h). */

/**
 * Memory jobs: kvt_mem_alloc_begin, kvt_mem_free_begin and kvt_mem_deregister_begin do what their synchronous twin
 * does, without the part that takes long (backing pages, fencing readers, unmapping) on the calling thread, for callers
 * that must not block (e.g. Node's thread). Each refuses at once what its twin refuses before that part, with nothing
 * changed; else it returns KVT_IN_PROGRESS and a job id (unique in the agent). The progress thread does the work in the
 * order the jobs were begun, writes a byte to the wake-up pipe once the jobs it took together (those begun by then) all
 * ended, and kvt_mem_job_status answers the outcome once. A shutdown accepted while a job runs waits for it (the job
 * runs first); a destroy frees unanswered outcomes.
 */

/**
 * The outcome of the memory job `job`: KVT_IN_PROGRESS while it runs, else KVT_OK or the error its
 * synchronous twin would have answered (with its detail), answered once: NOT_FOUND afterwards and for
 * an id no *_begin call returned. The outcome is not counted as a failing call.
 */
KVT_API kvt_status kvt_mem_job_status(uint32_t agent, uint64_t job);

/**
 * A memory job allocating like kvt_mem_alloc: writes the address and counts the allocation at once;
 * the progress thread backs every page (and locks them with KVT_ALLOC_MLOCK). Until the outcome the
 * allocation can be neither registered nor freed (BUSY), and the agent does not shut down (BUSY). A
 * refused allocation is freed and uncounted before its outcome is announced.
 */
KVT_API kvt_status kvt_mem_alloc_begin(uint32_t agent, uint64_t length, uint32_t flags, uint64_t *out_address,
                                       uint64_t *out_job);

/**
 * Frees an allocation made by kvt_mem_alloc or kvt_mem_alloc_vram on this agent (`address` must be its
 * start), or closes a mapping kvt_mem_open_vram_ipc opened (the other process's memory stays its own).
 * Refuses KVT_ERR_BUSY while a registration lies inside it; KVT_ERR_NOT_FOUND for unknown addresses.
 */
KVT_API kvt_status kvt_mem_free(uint32_t agent, uint64_t address);

/**
 * A memory job freeing like kvt_mem_free: the allocation leaves the agent's table (and counters) at
 * once; the progress thread unlocks and unmaps it, and the outcome (always KVT_OK) says it is gone.
 */
KVT_API kvt_status kvt_mem_free_begin(uint32_t agent, uint64_t address, uint64_t *out_job);

/**
 * Registers [address, address + length) of memory kind `kind` (KVT_MEM_*) on `device` with the
 * agent and returns the region id (unique in the agent, never reused). The caller keeps ownership
 * of the memory and must keep it valid until kvt_mem_deregister succeeds; from then on no peer reaches
 * it through this agent (see "Stale readers" above).
 * Refuses: INVALID_PARAM for address 0, length 0, an address range that wraps, a dram range with a
 * page that is not mapped in this process, an unknown kind, or dram with device != 0; INVALID_PARAM naming the other region when the range overlaps a region
 * already registered on the same (kind, device) on this agent; NOT_ALLOWED past KVT_MAX_REGIONS; BACKEND
 * when the backend cannot map it.
 * Vram is checked with the CUDA driver: the whole range must be device memory of GPU `device` inside one
 * cuMemAlloc/cudaMalloc allocation, or inside a mapping kvt_mem_open_vram_ipc opened (its region carries
 * the owner's handle). NOT_SUPPORTED (with the reason) when KVT_CAP_VRAM is 0, and for memory
 * of the virtual memory API or a memory pool (it cannot be exported as a CUDA IPC handle); INVALID_PARAM
 * for a device the driver does not count, memory the driver does not know (host memory named as vram),
 * pinned host memory, managed memory, memory of another device, and a range past the end of its
 * allocation. A vram region is exported in the metadata with the CUDA IPC handle of its allocation (BACKEND
 * when the driver cannot export it) and a slot in the agent's liveness table, which readers moving it
 * through that handle check and kvt_mem_deregister clears before it returns (BACKEND when the table cannot
 * be made); see kvt_xfer_post for how vram moves.
 * Bumps the agent's metadata generation.
 */
KVT_API kvt_status kvt_mem_register(uint32_t agent, uint64_t address, uint64_t length, uint32_t kind, uint32_t device,
                                    uint32_t *out_region);

/**
 * Registers [address, address + length) like kvt_mem_register (dram, device 0), for memory that is a
 * shared mapping of a file: `file_offset` is the offset in the file open as `fd` (a memfd, a /dev/shm
 * file) of the byte at `address`. The library keeps its own duplicate of `fd` until the region is
 * deregistered (the caller may close its own). Readers on the same host and in the same pid namespace
 * map the file through /proc/<pid>/fd and copy READs themselves, at memory speed, instead of asking this
 * agent's worker for 8 KiB fragments; WRITEs into the region, and readers elsewhere, still go through
 * UCX. Such readers check the agent's liveness table after every copy: kvt_mem_deregister clears the
 * region's entry before it returns, so a read that overlapped the withdrawal fails (NOT_FOUND) and never
 * reports bytes the caller may already have rewritten.
 * Refuses what kvt_mem_register refuses, and INVALID_PARAM naming what is wrong when `fd` is not an open
 * regular file, when [file_offset, + length) is not inside it, or when the range is not one shared mapping
 * of that file at that offset in this process. BACKEND when the liveness table cannot be made.
 */
KVT_API kvt_status kvt_mem_register_fd(uint32_t agent, uint64_t address, uint64_t length, int32_t fd,
                                       uint64_t file_offset, uint32_t *out_region);

/**
 * Deregisters a region. Refuses KVT_ERR_BUSY (naming an operation) while any non-terminal operation of THIS agent
 * references it. Bumps the agent's metadata generation. Peers that loaded older metadata still hold the region's bounds
 * and remote key: loopback peers then fail with KVT_ERR_REMOTE_DISCONNECT; for UCX, when exported metadata named the
 * region, the agent's serving worker is replaced before this returns (see "Stale readers" above; ~55-70 ms here, once
 * per export), so no peer's request reaches the memory afterwards and every reader of this agent must load its newer
 * metadata. A UCX peer that attached a kvt_mem_alloc bank through shared memory keeps its own view of the old segment.
 * A vram region's WRITEs through CUDA IPC that readers launched before have landed when this returns
 * (kvreuse_transport_vram.h). The layers above still stop readers (pins, drain, peer invalidation) before memory is
 * deregistered, so none sees its reads fail.
 */
KVT_API kvt_status kvt_mem_deregister(uint32_t agent, uint32_t region);

/**
 * A memory job deregistering like kvt_mem_deregister: the region leaves the agent's table, metadata
 * and counters at once (the metadata generation is bumped, no new operation may name it, and the
 * allocation it lies in may be freed: that unmap runs after this job); the progress thread then fences
 * readers (UCX, when exported metadata named it) and unmaps it. The outcome is always KVT_OK.
 */
KVT_API kvt_status kvt_mem_deregister_begin(uint32_t agent, uint32_t region, uint64_t *out_job);

/** Address, length, kind and device of a live region. Any out pointer may be NULL. */
KVT_API kvt_status kvt_region_info(uint32_t agent, uint32_t region, uint64_t *out_address, uint64_t *out_length,
                                   uint32_t *out_kind, uint32_t *out_device);

/* ---------------------------------------------------------------------------------------------- */
/* Metadata and peers                                                                               */
/* ---------------------------------------------------------------------------------------------- */

/**
 * Exports the agent's metadata blob: magic, format version, backend, agent name, incarnation,
 * metadata generation (bumped by every register/deregister), worker address, process identity, and
 * every live region (id, kind, device, base address, length, packed remote key), then a CRC-32.
 * Region ids start at 1 and increase in registration order.
 * With buffer == NULL (or capacity too small) the required size is written to *out_length; the
 * call then returns KVT_OK for buffer == NULL and KVT_ERR_INVALID_PARAM for a too-small buffer.
 */
KVT_API kvt_status kvt_agent_metadata(uint32_t agent, uint8_t *buffer, uint64_t capacity, uint64_t *out_length);

/**
 * Loads a peer's metadata blob into the agent and returns the peer id and its current generation.
 * A malformed, truncated or corrupted blob is refused with INVALID_PARAM (never read out of bounds);
 * a blob of another backend with MISMATCH.
 * Loading a blob whose agent name is already loaded updates that same peer id: a blob from a new
 * incarnation, or from the same incarnation with a higher metadata generation, replaces the old one
 * (the peer generation is bumped, so operations prepared against the old one are refused); the same
 * metadata generation again is a no-op (unless the peer was invalidated: then it is reloaded);
 * an older metadata generation of the same incarnation is refused with MISMATCH.
 * UCX: connects an endpoint (UCP_ERR_HANDLING_MODE_PEER) and unpacks the remote keys.
 */
KVT_API kvt_status kvt_peer_load(uint32_t agent, const uint8_t *blob, uint64_t length, uint32_t *out_peer,
                                 uint64_t *out_generation);

/**
 * kvt_peer_load as a job, for callers that must not block (e.g. Node's thread): refuses at once, with
 * nothing changed, what kvt_peer_load refuses before connecting (a malformed blob: INVALID_PARAM; another
 * backend: MISMATCH; NO_MEMORY), else copies what it needs of `blob` (the caller may reuse it at once) and
 * returns KVT_IN_PROGRESS and a job id. The progress thread compares, connects and installs the peer in
 * the order jobs were begun (after the memory jobs begun before it), writes a byte to the wake-up pipe
 * as for memory jobs, and kvt_peer_load_status answers the outcome once.
 */
KVT_API kvt_status kvt_peer_load_begin(uint32_t agent, const uint8_t *blob, uint64_t length, uint64_t *out_job);

/**
 * The outcome of a kvt_peer_load_begin job: KVT_IN_PROGRESS while it runs, else KVT_OK with the peer id
 * and its generation written (either out pointer may be NULL), or the error kvt_peer_load would have
 * answered (MISMATCH for an older generation, BACKEND when UCX cannot connect), with its detail. Answered
 * once, like kvt_mem_job_status (which shares the agent's job ids); not counted as a failing call.
 */
KVT_API kvt_status kvt_peer_load_status(uint32_t agent, uint64_t job, uint32_t *out_peer, uint64_t *out_generation);

/** Peer id of a loaded peer named `name`, and its current generation (either out pointer may be NULL). */
KVT_API kvt_status kvt_peer_find(uint32_t agent, const char *name, uint32_t *out_peer, uint64_t *out_generation);

enum {
    KVT_PEER_READY = 0,        /* loaded and usable */
    KVT_PEER_INVALIDATED = 1,  /* kvt_peer_invalidate was called; reload to use it again */
    KVT_PEER_DISCONNECTED = 2, /* the peer went away, or its endpoint was force-closed to end a cancelled
                                  operation: load its metadata again (the same blob reconnects a live peer) */
};

/**
 * The agent name of a loaded peer, NUL-terminated, into `name` (capacity at least KVT_MAX_NAME + 1 always
 * suffices; a smaller one that does not hold the name is INVALID_PARAM).
 */
KVT_API kvt_status kvt_peer_name(uint32_t agent, uint32_t peer, char *name, uint32_t capacity);

/** Generation, state (KVT_PEER_*) and number of advertised regions of a peer. Any out pointer may be NULL. */
KVT_API kvt_status kvt_peer_info(uint32_t agent, uint32_t peer, uint64_t *out_generation, uint32_t *out_state,
                                 uint32_t *out_region_count);

/**
 * The regions a loaded peer advertises, in blob order: for i < min(capacity, *out_count) writes
 * ids[i], addresses[i], lengths[i], kinds[i], devices[i] (any array may be NULL). *out_count is the
 * number of regions advertised (0 once the peer is invalidated).
 */
KVT_API kvt_status kvt_peer_regions(uint32_t agent, uint32_t peer, uint32_t capacity, uint32_t *ids,
                                    uint64_t *addresses, uint64_t *lengths, uint32_t *kinds, uint32_t *devices,
                                    uint32_t *out_count);

/**
 * Describes the path to a loaded peer in words: for UCX the endpoint's lanes and transports as
 * ucp_ep_print_info prints them (e.g. "... rma_bw#0: posix/memory ..."), for loopback one line.
 * Copies at most capacity - 1 bytes plus a NUL into `text`; *out_length is the full length (so a
 * second call with a larger buffer gets all of it). NOT_FOUND for an invalidated or unknown peer.
 */
KVT_API kvt_status kvt_peer_transport(uint32_t agent, uint32_t peer, char *text, uint32_t capacity,
                                      uint32_t *out_length);

/**
 * Invalidates a peer: bumps its generation and marks it KVT_PEER_INVALIDATED, so every later post or
 * notification naming it fails with KVT_ERR_NOT_FOUND until its metadata is loaded again.
 * Operations already posted run to their end.
 */
KVT_API kvt_status kvt_peer_invalidate(uint32_t agent, uint32_t peer);

/** Forgets a peer (closing its endpoint). Refuses KVT_ERR_BUSY while non-terminal operations use it. */
KVT_API kvt_status kvt_peer_unload(uint32_t agent, uint32_t peer);

/* ---------------------------------------------------------------------------------------------- */
/* Transfers                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

enum {
    KVT_XFER_READ = 0,  /* remote → local */
    KVT_XFER_WRITE = 1, /* local → remote */
};

/**
 * Posts one batch of `count` descriptors (1..KVT_MAX_DESCRIPTORS) as ONE operation against `peer`, which must be
 * KVT_PEER_READY at generation `peer_generation` (else KVT_ERR_NOT_FOUND; REMOTE_DISCONNECT: its connection failed).
 *
 * Descriptor i moves length[i] bytes between
 *     local:  region local_regions[local_index[i]],   offset local_offset[i]
 *     remote: region remote_regions[remote_index[i]], offset remote_offset[i]
 * where local_regions[0..local_region_count) are this agent's region ids and
 * remote_regions[0..remote_region_count) are region ids the peer advertised in its metadata.
 * These are the parallel arrays `planTransfer` (@kvreuse/descriptors) produces; the library copies
 * them, so the caller may reuse the arrays as soon as the call returns.
 *
 * Every descriptor is checked before any byte moves: indices within the tables, regions live
 * (local) / advertised (remote), length > 0, offset + length within the local region and within the
 * bounds the peer advertised. One bad descriptor refuses the whole batch with KVT_ERR_INVALID_PARAM
 * (the detail names the descriptor index, region, offset, length and bound) and nothing moves.
 *
 * `notification` (notification_length bytes, 0..KVT_MAX_NOTIFICATION; NULL when 0) is sent to the
 * peer after every byte has moved successfully; the operation completes after it was sent.
 * On KVT_OK the operation is in progress (or already terminal) and *out_op holds its id; it
 * references every region it names until it is terminal. Watch it with kvt_agent_poll or
 * kvt_xfer_status; release it with kvt_xfer_release once terminal.
 *
 * Vram: an operation naming a vram region moves one of two ways.
 * - Through CUDA IPC, when every local and remote region is vram, the peer is on this host (same kernel
 *   boot id) and the agent was not created with KVT_AGENT_VRAM_STAGED. Its descriptors become one table in
 *   device memory (pieces cut into tiles on the host, or, for descriptors of four tiles or more each, one
 *   route a descriptor, cut on the GPU), moved by a gather kernel on the agent's CUDA stream (made on its
 *   first vram operation, on the GPU of that operation's first local region; vram of another GPU is then
 *   refused), out of (READ) or into (WRITE) the peer's allocations opened through their CUDA IPC handles
 *   (once per loaded metadata of the peer, closed when it is unloaded or replaced; used as they are when the
 *   peer lives in this process). The peer never sees such a move, so the reader checks the peer's liveness
 *   table: a region withdrawn before the launch moves nothing, one withdrawn before the work completed
 *   ends the operation NOT_FOUND with no byte counted (reload the peer's metadata); a peer whose table this process
 *   cannot open (another user's, or hidden by /proc) is refused NOT_SUPPORTED.
 * - Host-staged otherwise (a peer on another host or in another pid namespace, dram and vram regions in one operation,
 *   or KVT_AGENT_VRAM_STAGED): READs only, on the ucx backend, with every local vram region on one GPU, from a peer
 *   whose answers reach this agent (else NOT_SUPPORTED saying which rule it breaks). It asks the peer for chunks of at most 4 MiB,
 *   several in flight; the peer checks each piece against its live regions, copies it into pinned bounce
 *   buffers and sends them back; each chunk lands in a pinned bounce buffer of this agent and is copied up
 *   into the local vram on the agent's stream for that GPU. A peer on this host (and pid namespace) able to
 *   open this agent's bounce buffer (a sealed memfd) writes the chunk into it in place, sending no bytes. A piece the peer no longer has ends the
 *   operation NOT_FOUND (reload the peer's metadata).
 * Either way the progress thread learns the end of the GPU's work from CUDA events: the operation is
 * terminal only once its stream work and its UCX requests completed (then a WRITE's notification is
 * sent), and a cancel waits for them. Template posts (kvt_xfer_post_blocks) move the same way.
 */
KVT_API kvt_status kvt_xfer_post(uint32_t agent, uint32_t direction, uint32_t peer, uint64_t peer_generation,
                                 uint32_t count, const uint32_t *local_index, const uint64_t *local_offset,
                                 const uint32_t *remote_index, const uint64_t *remote_offset, const uint64_t *length,
                                 uint32_t local_region_count, const uint32_t *local_regions,
                                 uint32_t remote_region_count, const uint32_t *remote_regions,
                                 const uint8_t *notification, uint32_t notification_length, uint64_t *out_op);

/**
 * Status of an operation: *out_status is KVT_IN_PROGRESS, KVT_OK (done) or the KVT_ERR_* it ended
 * with; bytes done so far and the batch's total bytes. Any out pointer may be NULL.
 * While in progress, bytes done is updated once per progress round (up to 16 MiB of an operation on
 * UCX, 8 MiB on loopback), not per descriptor; a terminal operation reports every byte it moved.
 */
KVT_API kvt_status kvt_xfer_status(uint32_t agent, uint64_t op, int32_t *out_status, uint64_t *out_bytes_done,
                                   uint64_t *out_bytes_total);

/**
 * Requests cancellation. Returns KVT_OK when the operation is already terminal (nothing changes) and
 * KVT_IN_PROGRESS when the request was accepted: the operation becomes terminal (normally with
 * KVT_ERR_CANCELED) only once the backend confirms that nothing of it is still in flight, and is
 * then reported by kvt_agent_poll like any other completion. That takes at most about a second
 * whatever the peer does (stopped, unreachable, slow): UCX requests still outstanding 200 ms after
 * the cancel are ended by force-closing the peer's endpoint, which also ends the peer's other
 * operations (KVT_ERR_REMOTE_DISCONNECT) and leaves it KVT_PEER_DISCONNECTED until it is loaded again.
 * Once terminal, the operation's memory is quiescent: deregistration succeeds.
 */
KVT_API kvt_status kvt_xfer_cancel(uint32_t agent, uint64_t op);

/** Releases a terminal operation and its id. Refuses KVT_ERR_BUSY while it is in progress. */
KVT_API kvt_status kvt_xfer_release(uint32_t agent, uint64_t op);

/* ---------------------------------------------------------------------------------------------- */
/* Notifications                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

/**
 * Sends `length` bytes (1..KVT_MAX_NOTIFICATION) to a KVT_PEER_READY peer at `peer_generation`.
 * Never waits for the progress thread: UCX queues a copy for it, which sends it as an eager active
 * message; loopback delivers it from the calling thread. A failure after the call returned (the
 * connection failed meanwhile) is only counted, under its status. Messages to one peer arrive in order.
 * The receiver sees the sender's agent name. Errors: INVALID_PARAM (size), NOT_FOUND
 * (peer/generation), REMOTE_DISCONNECT (the connection had failed), NO_MEMORY.
 */
KVT_API kvt_status kvt_notify_send(uint32_t agent, uint32_t peer, uint64_t peer_generation, const uint8_t *data,
                                   uint32_t length);

/**
 * Dequeues the oldest received notification, if any: *out_got is 1 and the sender's name
 * (NUL-terminated) and payload are copied out, or *out_got is 0. `sender` needs room for
 * KVT_MAX_NAME + 1 bytes and `data` for KVT_MAX_NOTIFICATION bytes when their capacities are smaller
 * than the message (INVALID_PARAM, the message stays queued). Received messages that are malformed
 * (bad framing or sizes) or arrive while KVT_MAX_PENDING_NOTIFICATIONS are queued are dropped and
 * counted (KVT_COUNTER_NOTIFICATIONS_DROPPED).
 */
KVT_API kvt_status kvt_notify_poll(uint32_t agent, char *sender, uint32_t sender_capacity, uint8_t *data,
                                   uint32_t data_capacity, uint32_t *out_length, uint32_t *out_got);

/* ---------------------------------------------------------------------------------------------- */
/* Counters                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

enum {
    KVT_COUNTER_LIVE_AGENTS = 0, /* process-wide only (0 per agent) */
    KVT_COUNTER_LIVE_REGISTRATIONS = 1,
    KVT_COUNTER_REGISTERED_BYTES = 2,
    KVT_COUNTER_LIVE_ALLOCATIONS = 3,
    KVT_COUNTER_ALLOCATED_BYTES = 4,
    KVT_COUNTER_LIVE_PEERS = 5,
    KVT_COUNTER_LIVE_OPERATIONS = 6,         /* posted and not yet released */
    KVT_COUNTER_INFLIGHT_OPERATIONS = 7,     /* not yet terminal */
    KVT_COUNTER_OPERATIONS_POSTED = 8,       /* cumulative */
    KVT_COUNTER_BYTES_MOVED = 9,             /* cumulative, by operations this side initiated */
    KVT_COUNTER_NOTIFICATIONS_SENT = 10,     /* cumulative */
    KVT_COUNTER_NOTIFICATIONS_RECEIVED = 11, /* cumulative */
    KVT_COUNTER_PENDING_NOTIFICATIONS = 12,  /* received, not yet polled */
    KVT_COUNTER_NOTIFICATIONS_DROPPED = 13,  /* cumulative */
    /* KVT_COUNTER_ERRORS_FIRST + (-code - 1): cumulative count of the agent's failing calls (not those
     * naming no agent) and of operations that ended with that KVT_ERR_* code (e.g. + 5 for KVT_ERR_BUSY). */
    KVT_COUNTER_ERRORS_FIRST = 14,
    /* Requests the backend issued for gets and puts (UCX: ucp_get_nbx / ucp_put_nbx calls, each at most
     * KVT_MAX_REQUEST_BYTES, and the active messages asking a source for host-staged chunks; direct copies
     * and loopback issue none), cumulative; and the gets and puts in flight. */
    KVT_COUNTER_REQUESTS_ISSUED = KVT_COUNTER_ERRORS_FIRST + KVT_ERROR_CODE_COUNT,
    KVT_COUNTER_INFLIGHT_REQUESTS,
    KVT_COUNTER_HEARTBEATS_SENT,     /* probes this agent sent to its peers, cumulative */
    KVT_COUNTER_HEARTBEATS_ANSWERED, /* probes of other agents this agent answered, cumulative */
    KVT_COUNTER_UNRESPONSIVE_PEERS,  /* loaded peers reported UNRESPONSIVE and not (yet) RESPONSIVE again */
    KVT_COUNTER_HEARTBEAT_ANSWERS,   /* answers to this agent's probes received from loaded peers, cumulative */
    KVT_COUNTER_READER_FENCES, /* times readers of exported metadata were fenced off (UCX: serving worker replaced), cumulative */
    KVT_COUNTER_FILE_READ_BYTES, /* bytes this agent READ by copying a peer's file-backed region it mapped, cumulative */
    KVT_COUNTER_INLINE_OPERATIONS, /* small READs the posting thread copied itself (no progress-thread round trip), cumulative */
    KVT_COUNTER_DEFERRED_VRAM_FREES, /* own vram allocations kvt_mem_free took whose driver free waits for readers (kvt_mem_free) */
    KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES, /* vram deregistrations waiting now for readers' WRITEs in flight */
    KVT_COUNTER_COUNT,
};

/**
 * Reads counters: process-wide when agent == 0, else that agent's. Fills values[i] for
 * i < min(capacity, KVT_COUNTER_COUNT) and sets *out_count. Newer libraries may append counters.
 * Process-wide cumulative counters include agents already destroyed.
 */
KVT_API kvt_status kvt_counters(uint32_t agent, uint64_t *values, uint32_t capacity, uint32_t *out_count);
/** Name of counter `index` in snake case (e.g. "live_registrations", "errors.KVT_ERR_BUSY"), or NULL. */
KVT_API const char *kvt_counter_name(uint32_t index);

#include "kvreuse_sidecar.h"
#include "kvreuse_sidecar_client.h"
#include "kvreuse_transport_checksums.h"
#include "kvreuse_transport_faults.h"
#include "kvreuse_transport_templates.h"
#include "kvreuse_transport_vram.h"

#ifdef __cplusplus
}
#endif

#endif /* KVREUSE_TRANSPORT_H */
