/* Host-staged moves of the ucx backend, for vram a peer cannot reach through CUDA IPC (another host, dram and
 * vram in one operation, or KVT_AGENT_VRAM_STAGED). The destination owns the operation: it asks the source
 * for chunks by active message, at most STAGE_SLOTS in flight, each into a pinned bounce buffer of its own
 * (ucx_staged_pull.c). The source answers each request inside its handler (ucx_stage_source.c): it checks
 * every piece against its live regions, copies them into a pinned bounce buffer of its own (from vram on its
 * stream for that GPU, waited for there) and sends the buffer back by rendezvous. The destination receives
 * it into the chunk's bounce buffer and copies it up into its vram on its stream, an event telling the
 * progress thread when that work completed. On one host the source writes the chunk into the destination's
 * bounce buffer in place instead (a sealed memfd the request names, opened through /proc, ucx_stage_targets.c),
 * and the answer carries no bytes: the chunk crosses no UCX transport, only PCIe down and up. A chunk of many
 * vram pieces on one GPU crosses PCIe as one copy: it moves through a GPU chunk buffer, and one kvt_gather
 * launch packs or unpacks its pieces there
 * (ucx_stage_gather.c) instead of a copy call per piece. The agent's bounce buffers, GPU chunk buffers and
 * streams (ucx_stage_buffers.c) are freed when the agent stops. */
#ifndef KVT_UCX_STAGING_H
#define KVT_UCX_STAGING_H

#include "backends/ucx/ucx_state.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"

#define STAGE_CHUNK_BYTES (4u << 20) /* bytes of one chunk, and of every bounce buffer */
#define STAGE_SLOTS 4u               /* chunks in flight per operation */
#define STAGE_MAX_PIECES 256u        /* pieces in one chunk */
#define STAGE_PINNED_BUFFERS 16u     /* pinned bounce buffers an agent keeps at most; beyond, pageable ones */
#define STAGE_MAX_GPUS 64u
/* Vram pieces (on one GPU) from which a chunk moves through a GPU chunk buffer and one kvt_gather launch rather
 * than a copy call per piece: the chunk's copy, the table's and the launch are three calls, fewer than four. */
#define STAGE_GATHER_MIN_PIECES 4u
#define STAGE_GPU_CHUNKS 16u /* GPU chunk buffers an agent keeps at most; beyond, copies per piece */
/* The gather table of one chunk: its pieces cut into tiles. */
#define STAGE_MAX_TILES (STAGE_MAX_PIECES + STAGE_CHUNK_BYTES / KVT_KERNEL_TILE_BYTES)
#define STAGE_TABLE_BYTES (STAGE_MAX_TILES * sizeof(kvt_gather_piece))

/* The destination's bounce buffer of a chunk, for a source on its host to write in place: a file its process
 * (`pid` in the pid namespace `pid_namespace` of the host `boot_id`) has open as `fd`, whose header holds `token`.
 * fd KVT_NO_FILE_FD: none, the bytes come back in the answer. */
typedef struct {
    uint8_t boot_id[16];
    uint64_t pid_namespace, pid, token;
    uint32_t fd, reserved;
} stage_buffer_ref;
/* The request (destination to source): this header, then `count` pieces. */
typedef struct {
    uint64_t op;
    uint32_t slot, count;
    stage_buffer_ref buffer;
} stage_request_header;
typedef struct {
    uint64_t address, length; /* in the source's address space */
} stage_piece;
/* The answer (source to destination): this header, then the chunk's bytes (none unless status is KVT_OK and the
 * chunk was not written in place). Native byte order, little-endian on every platform the library is built for. */
typedef struct {
    uint64_t op;
    uint32_t slot;
    int32_t status;
    uint32_t in_place; /* 1: the chunk is in the bounce buffer the request named */
    uint32_t reserved;
} stage_reply_header;

/* A bounce buffer that a source on the host may write in place is a sealed memfd (size sealed) of this header, the
 * chunk at STAGE_BUFFER_HEADER_BYTES, then its gather table. The token, drawn at random anew for each request that
 * names the buffer, proves to the source asked that the file is that buffer, and only while that request is open. */
#define STAGE_BUFFER_MAGIC "KVTBOUNC"
typedef struct {
    char magic[8];
    uint64_t token;
} stage_buffer_header;
#define STAGE_BUFFER_HEADER_BYTES 4096u
#define STAGE_BUFFER_FILE_BYTES (STAGE_BUFFER_HEADER_BYTES + STAGE_CHUNK_BYTES + STAGE_TABLE_BYTES)

typedef struct ucx_bounce {
    uint8_t *host;  /* STAGE_CHUNK_BYTES of chunk, then STAGE_TABLE_BYTES for its gather table */
    ucp_mem_h memh; /* its UCX registration, or NULL (UCX then registers it per transfer) */
    bool pinned;    /* cuMemHostAlloc's, or a memfd's pages pinned by cuMemHostRegister; else malloc's */
    /* The memfd (STAGE_BUFFER_FILE_BYTES, mapped whole at `file`; host is its chunk), or -1 */
    int fd;
    uint8_t *file;
    /* A source may still write it in place (a request naming it went unanswered): never used again */
    bool retired;
    bool busy;
    bool answering;           /* a source's answer from it is with UCX (counted in staging->answers) */
    stage_reply_header reply; /* that answer's header */
    struct ucx_staging *staging;
    struct ucx_bounce *next;
} ucx_bounce;

/* Device memory on one GPU for a chunk on its way between vram pieces and a bounce buffer. */
typedef struct ucx_gpu_chunk {
    CUdeviceptr address; /* STAGE_CHUNK_BYTES of chunk, then STAGE_TABLE_BYTES of gather table */
    uint32_t device;
    bool busy;
    struct ucx_gpu_chunk *next;
} ucx_gpu_chunk;

/* An agent's staging resources, made on first use. */
typedef struct ucx_staging {
    ucx_bounce *buffers; /* every bounce buffer of the agent, busy or not */
    uint32_t pinned;
    ucx_gpu_chunk *gpu_chunks; /* every GPU chunk buffer of the agent, busy or not */
    uint32_t gpu_chunk_count;
    CUstream streams[STAGE_MAX_GPUS]; /* one per GPU the agent staged for */
    struct ucx_staged_pull *pulls;    /* the staged operations in flight, which answers look up */
    /* Answers this agent (as a source) has in flight: until they end, its progress thread does not sleep,
     * since a rendezvous send may need several rounds of the serving worker (fragments, acknowledgements)
     * and an idle worker is polled only every IDLE_PROGRESS_MS. */
    uint32_t answers;
    struct ucx_stage_target *targets; /* destinations' bounce buffers this agent (as a source) writes in place */
    uint64_t target_uses;
    uint64_t next_target_sweep_ns; /* when ucx_stage_targets_sweep next looks at them */
} ucx_staging;

/* ---- ucx_stage_buffers.c ---- */
/* The agent's staging resources (NULL when out of memory). */
ucx_staging *ucx_staging_of(ucx_state *state);
/* A free bounce buffer of STAGE_CHUNK_BYTES, made when none is free (pinned while fewer than
 * STAGE_PINNED_BUFFERS are, and the driver allows); NULL when out of memory. */
ucx_bounce *ucx_bounce_take(ucx_state *state);
void ucx_bounce_give(ucx_bounce *bounce);
/* A free GPU chunk buffer on `device` (current), made when none is free; NULL when the agent has
 * STAGE_GPU_CHUNKS or the GPU has no memory for one (the chunk's pieces then move a copy call each). */
ucx_gpu_chunk *ucx_gpu_chunk_take(ucx_state *state, uint32_t device);
void ucx_gpu_chunk_give(ucx_gpu_chunk *chunk);
/* GPU `device` made current, and the agent's stream for it in *out. */
kvt_status ucx_stage_stream(ucx_state *state, const char *call, uint32_t device, CUstream *out);
/* After the serving worker was destroyed (a fence): the answers it carried will never complete; their
 * buffers are free again. */
void ucx_staging_forget_answers(ucx_state *state);
/* At the agent's stop, after its workers were destroyed: frees the buffers and streams. */
void ucx_staging_free(ucx_state *state);

/* ---- ucx_stage_gather.c ---- */
/* A vram piece of a chunk: its address, and where it lies in the chunk. */
typedef struct {
    uint64_t vram, at, length;
} stage_gpu_piece;
/* Moves `count` pieces (at most STAGE_MAX_PIECES) between their vram and `chunk` with one kvt_gather launch on
 * `stream` (its GPU current): into the chunk (`packing`: a source's) or out of it (a destination's). The table goes
 * up from the tail of `bounce`, which stays as it is until the stream's work is done. */
kvt_status ucx_stage_gather(const char *call, ucx_bounce *bounce, const ucx_gpu_chunk *chunk,
                            const stage_gpu_piece *pieces, uint32_t count, bool packing, CUstream stream);

/* ---- ucx_stage_targets.c ---- */
/* A destination's bounce buffer this agent (as a source) opened to write chunks into in place. */
typedef struct ucx_stage_target {
    uint64_t pid;
    uint32_t fd;
    uint64_t device, inode; /* the file's, to tell whether the fd still names it */
    uint8_t *file;          /* the whole file, mapped shared; NULL: a free entry */
    uint64_t used;          /* when last written (staging->target_uses) */
} ucx_stage_target;
#define STAGE_TARGETS 32u /* kept open at most; the least recently used is closed for another */
#define STAGE_TARGET_SWEEP_NS 1000000000ull
/* Where to write the chunk of a request naming `ref` in place: the chunk of that bounce buffer (opened on first use
 * and kept while the fd names that file), when its header holds the request's token now; NULL when it cannot be (no
 * buffer named, another host or pid namespace, no such fd, not a sealed file of STAGE_BUFFER_FILE_BYTES with the
 * magic, another token, or the driver refuses to pin it): then the bytes go back in the answer. */
uint8_t *ucx_stage_target_of(ucx_state *state, const kvt_process_identity *self, const stage_buffer_ref *ref);
/* (P) At most every STAGE_TARGET_SWEEP_NS: closes each target whose destination's fd no longer names its file (the
 * destination's agent stopped, or its process is gone), so that no dead destination's buffer stays pinned here. */
void ucx_stage_targets_sweep(ucx_state *state, uint64_t now_ns);
/* Closes every target (at the agent's stop). */
void ucx_stage_targets_free(ucx_state *state);

/* ---- ucx_stage_source.c ---- */
/* The serving worker's handler of KVT_AM_STAGE_REQUEST. */
ucs_status_t ucx_on_stage_request(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                  const ucp_am_recv_param_t *param);

/* ---- ucx_staged_pull.c ---- */
/* Test hook: as a destination, bytes of staged chunks sources on this host wrote into the agent's bounce buffers in
 * place and the bounce buffers it retired (a request naming one went unanswered), so far; as a source, the
 * destinations' bounce buffers it keeps open now. NOT_SUPPORTED on loopback. */
typedef struct {
    uint64_t in_place_bytes, retired, targets;
} kvt_staged_counts;
kvt_status kvt_test_staged_counts(uint32_t agent_id, kvt_staged_counts *out);
/* The initiator worker's handler of KVT_AM_STAGE_DATA. */
ucs_status_t ucx_on_stage_data(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param);
/* The backend's advance_staged. */
void ucx_advance_staged(kvt_agent *agent, kvt_op *op);

#endif
