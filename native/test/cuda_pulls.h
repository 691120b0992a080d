/* What test_cuda's cases share (linked into every test beside the harness): child processes over the driver
 * under test, vram pulls whose bytes are checked, a pair of vram agents in one process, the fake driver's
 * hooks. */
#ifndef KVT_TEST_CUDA_PULLS_H
#define KVT_TEST_CUDA_PULLS_H

#include "harness.h"

#include <stdint.h>

typedef struct {
    const char *library; /* KVT_CUDA_LIBRARY */
    const char *devices; /* FAKE_CUDA_DEVICES, or NULL */
    const char *init_error;
} driver_setup;

#define PULL_BYTES (256u << 10)
/* A template of two planes (routes) over PULL_BYTES, four blocks of 32 KiB in each plane's half, two rows
 * of 4 KiB per block and plane: what a KV layout's layers and planes make of one block. */
#define PLANE_BYTES (PULL_BYTES / 2)
#define BLOCK_STRIDE (32u << 10)
#define ROW_STRIDE (16u << 10)
#define ROW_BYTES 4096u

typedef struct {
    uint32_t source, reader, remote, local, peer;
    uint64_t remote_vram, local_vram, generation;
} vram_pair;

typedef void (*hold_fn)(int hold);
typedef unsigned long (*held_queries_fn)(void);
typedef int (*open_handles_fn)(void);
typedef void (*last_launch_fn)(const char *kernel, uint32_t *pieces, uint64_t *largest);
typedef void (*allocations_fn)(unsigned long *made, int *live);

/* Runs `body` in a child process set up as `setup` says; fails when the child fails. */
void in_child(driver_setup setup, void (*body)(void));

/* Whether the machine's own driver is under test (KVT_TEST_CUDA_REAL=1). */
bool real_driver(void);

/* The fake driver's file, or NULL with the case skipped (always on a real driver). */
const char *fake_driver(const char *variable);

/* Runs `body` in a child process on the fake driver with `devices` GPUs (skipped on a real driver, and when the fake
 * was not built). */
void on_fake_driver(const char *devices, void (*body)(void));

/* Runs `body` in a child process on the machine's driver (KVT_TEST_CUDA_REAL=1), else on the fake one with
 * `devices` GPUs (skipped when it was not built). */
void on_driver_under_test(const char *devices, void (*body)(void));

/* Whether [address, +length) of vram holds the bytes [from, from + length) of the pattern of `seed`. */
bool holds_pattern(uint64_t address, uint64_t length, uint64_t from, uint64_t seed);

/* Three pieces of the peer's region `remote` into this agent's `local`, in another order; the READ must
 * end KVT_OK with every byte where it belongs. */
void pull_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                 uint64_t local_address, uint64_t seed);

/* A piece of 160 KiB + 3 bytes and one of the rest of PULL_BYTES, swapped between the halves: the first
 * is more than one gather tile (KVT_KERNEL_TILE_BYTES). */
void pull_large_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                       uint64_t local_address, uint64_t seed);

/* 200 pieces of 1 KiB in reverse order, non-contiguous on both sides (so none merge): more than the piece
 * buffer's first 64, twice (the second reuses what the first grew). */
void pull_many_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                      uint64_t local_address, uint64_t seed);

/* The template of two planes above, between `local` and the peer's `remote`. */
kvt_status register_planes(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                           uint32_t *out_template);

/* Four blocks by template (16 pieces: blocks x planes x rows), in another order; every piece must land. */
void pull_by_template(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                      uint64_t local_address, uint64_t seed);

/* Two agents of this process, each with PULL_BYTES of vram registered (the source's holding the pattern of
 * `seed`), the source loaded as the reader's peer; the reader created with `reader_flags` (KVT_AGENT_*). */
vram_pair open_vram_pair(uint64_t seed, uint32_t reader_flags);

void close_vram_pair(const vram_pair *pair);

/* A reader agent of this process (created with `flags`, KVT_AGENT_*) with `length` bytes of vram registered and
 * a source process's metadata loaded. */
typedef struct {
    uint32_t agent, local, peer, remote;
    uint64_t local_vram, generation;
} vram_reader;

vram_reader open_vram_reader(const char *name, uint32_t flags, const source_process *source, uint64_t length);

void close_vram_reader(const vram_reader *reader);

/* A reader in a process of its own, forked before this process uses the driver (CUDA does not survive a fork):
 * there `body(down, up, argument)` runs, and then the process waits to be killed (it is killed with this one). */
typedef struct {
    int pid;
    int down, up; /* this process's ends of the pipes to and from it */
} reader_process;
reader_process reader_fork(void (*body)(int down, int up, bool argument), bool argument);
/* In a reader process: receives a source's metadata down `down` and opens a reader of PULL_BYTES of vram
 * (open_vram_reader), its connection wired up (wait_wired_up). */
vram_reader reader_open(int down, const char *name, uint32_t flags);
/* Reads the byte the reader says next, which must be `said`. */
void reader_await(const reader_process *reader, char said);
/* Kills the reader, reaps it and closes the pipes. */
void reader_end(const reader_process *reader);

/* The fake driver's count of live allocations of this process: device memory and host memory it pinned; -1 on a
 * real driver (which does not tell). */
int live_allocations(void);

/* A symbol of the fake driver the library loaded (the test fails without it). */
void *fake_symbol(const char *name);

/* A wait_condition: the fake counted more queries of held events than *(unsigned long *)context. */
bool queried_while_held(void *context);

/* The fake's count of open IPC handles, or -1 on a real driver (which does not tell). */
int open_handles(void);

/* A wait_condition: no IPC handle open. */
bool handles_closed(void *context);

int32_t op_status(uint32_t agent, uint64_t op);

#endif
