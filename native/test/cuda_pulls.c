/* What test_cuda's cases share (cuda_pulls.h). */
#include "cuda_pulls.h"

#include "services/cuda_driver.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs `body` in a child process set up as `setup` says; fails when the child fails. */
void in_child(driver_setup setup, void (*body)(void)) {
    /* Without a library: the driver the environment names (the machine's own, unless a dry run names one). */
    const char *const variables[] = {
        "KVT_CUDA_LIBRARY", setup.library, "FAKE_CUDA_DEVICES", setup.devices, "FAKE_CUDA_INIT_ERROR",
        setup.init_error,   NULL};
    run_in_child(variables, body);
}

bool real_driver(void) {
    const char *real = getenv("KVT_TEST_CUDA_REAL");
    return real && strcmp(real, "1") == 0;
}

/* The fake driver's file, or NULL with the case skipped (always on a real driver). */
const char *fake_driver(const char *variable) {
    if (real_driver()) {
        test_skip_reason = "runs on the fake CUDA driver only (KVT_TEST_CUDA_REAL=1)";
        return NULL;
    }
    const char *path = getenv(variable);
    if (!path || !path[0]) test_skip_reason = "the fake CUDA driver was not built (make test builds it)";
    return path && path[0] ? path : NULL;
}

void on_fake_driver(const char *devices, void (*body)(void)) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = devices}, body);
}

void on_driver_under_test(const char *devices, void (*body)(void)) {
    if (real_driver())
        in_child((driver_setup){0}, body);
    else
        on_fake_driver(devices, body);
}

/* Whether [address, +length) of vram holds the bytes [from, from + length) of the pattern of `seed`. */
bool holds_pattern(uint64_t address, uint64_t length, uint64_t from, uint64_t seed) {
    uint8_t *expected = malloc(from + length), *got = malloc(length);
    CHECK(expected && got, "out of memory");
    fill_pattern(expected, from + length, seed);
    CHECK(kvt_cuda.MemcpyDtoHAsync(got, address, length, NULL) == KVT_CUDA_SUCCESS, "download");
    CHECK(kvt_cuda.StreamSynchronize(NULL) == KVT_CUDA_SUCCESS, "synchronize");
    bool same = memcmp(got, expected + from, length) == 0;
    free(expected);
    free(got);
    return same;
}

/* Three pieces of the peer's region `remote` into this agent's `local`, in another order; the READ must
 * end KVT_OK with every byte where it belongs. */
void pull_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                 uint64_t local_address, uint64_t seed) {
    const uint32_t zero[3] = {0, 0, 0};
    const uint64_t local_offset[3] = {0, 65536, 131072 + 5}, remote_offset[3] = {131072 + 5, 0, 65536},
                   length[3] = {65536, 65536, 65536 - 5};
    uint64_t op = 0;
    CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, 3, zero, local_offset, zero, remote_offset, length,
                           1, &local, 1, &remote, NULL, 0, &op));
    wait_completions_ok(reader, 1, 3 * 65536 - 5, true);
    for (int i = 0; i < 3; i++)
        CHECK(holds_pattern(local_address + local_offset[i], length[i], remote_offset[i], seed), "piece %d moved", i);
}

/* Two pieces larger than a gather tile and one smaller, at odd offsets, swapped between the halves. */
void pull_large_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                       uint64_t local_address, uint64_t seed) {
    const uint32_t zero[2] = {0, 0};
    const uint64_t first = (160u << 10) + 3, second = PULL_BYTES - first;
    const uint64_t local_offset[2] = {second, 0}, remote_offset[2] = {0, first}, length[2] = {first, second};
    uint64_t op = 0;
    CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, 2, zero, local_offset, zero, remote_offset, length,
                           1, &local, 1, &remote, NULL, 0, &op));
    wait_completions_ok(reader, 1, PULL_BYTES, true);
    for (int i = 0; i < 2; i++)
        CHECK(holds_pattern(local_address + local_offset[i], length[i], remote_offset[i], seed), "piece %d moved", i);
}

/* 200 pieces of 1 KiB in reverse order, non-contiguous on both sides (so none merge): more than the piece
 * buffer's first 64, twice (the second reuses what the first grew). */
void pull_many_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                      uint64_t local_address, uint64_t seed) {
    enum { PIECES = 200, PIECE = 1024 };
    uint32_t zero[PIECES] = {0};
    uint64_t local_offset[PIECES], remote_offset[PIECES], length[PIECES];
    for (uint32_t i = 0; i < PIECES; i++) {
        local_offset[i] = (uint64_t)(PIECES - 1 - i) * (PIECE + 256);
        remote_offset[i] = (uint64_t)i * (PIECE + 256) + 7;
        length[i] = PIECE;
    }
    for (int round = 0; round < 2; round++) {
        uint64_t op = 0;
        CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, PIECES, zero, local_offset, zero, remote_offset,
                               length, 1, &local, 1, &remote, NULL, 0, &op));
        wait_completions_ok(reader, 1, PIECES * PIECE, true);
    }
    for (uint32_t i = 0; i < PIECES; i++)
        CHECK(holds_pattern(local_address + local_offset[i], PIECE, remote_offset[i], seed), "piece %u moved", i);
}

kvt_status register_planes(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                           uint32_t *out_template) {
    const uint32_t zero[2] = {0, 0}, rows[2] = {2, 2};
    const uint64_t base[2] = {0, PLANE_BYTES}, block_stride[2] = {BLOCK_STRIDE, BLOCK_STRIDE},
                   row_bytes[2] = {ROW_BYTES, ROW_BYTES}, row_stride[2] = {ROW_STRIDE, ROW_STRIDE};
    const kvt_template_routes routes = {.route_count = 2,
                                        .local_index = zero,
                                        .remote_index = zero,
                                        .local_base = base,
                                        .remote_base = base,
                                        .local_block_stride = block_stride,
                                        .remote_block_stride = block_stride,
                                        .rows = rows,
                                        .row_bytes = row_bytes,
                                        .local_row_stride = row_stride,
                                        .remote_row_stride = row_stride,
                                        .local_region_count = 1,
                                        .local_regions = &local,
                                        .remote_region_count = 1,
                                        .remote_regions = &remote,
                                        .local_block_limit = 4,
                                        .remote_block_limit = 4};
    return kvt_template_register(reader, peer, generation, &routes, out_template);
}

/* Four blocks by template (16 pieces: blocks x planes x rows), in another order; every piece must land. */
void pull_by_template(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                      uint64_t local_address, uint64_t seed) {
    uint32_t template_id = 0;
    CHECK_OK(register_planes(reader, peer, generation, local, remote, &template_id));
    const uint32_t local_blocks[4] = {0, 1, 2, 3}, remote_blocks[4] = {3, 1, 0, 2};
    uint64_t op = 0;
    CHECK_OK(kvt_xfer_post_blocks(reader, template_id, KVT_XFER_READ, 4, local_blocks, remote_blocks, NULL, 0, &op));
    wait_completions_ok(reader, 1, 4 * 2 * 2 * ROW_BYTES, true);
    for (uint32_t b = 0; b < 4; b++)
        for (uint64_t plane = 0; plane < 2; plane++)
            for (uint64_t row = 0; row < 2; row++) {
                uint64_t at = plane * PLANE_BYTES + row * ROW_STRIDE;
                CHECK(holds_pattern(local_address + at + local_blocks[b] * BLOCK_STRIDE, ROW_BYTES,
                                    at + remote_blocks[b] * BLOCK_STRIDE, seed),
                      "block %u plane %u row %u moved", b, (unsigned)plane, (unsigned)row);
            }
    CHECK_OK(kvt_template_release(reader, template_id));
}

vram_pair open_vram_pair(uint64_t seed, uint32_t reader_flags) {
    vram_pair pair = {.source = make_agent("vram-source")};
    CHECK_OK(kvt_agent_create("vram-reader", test_backend, reader_flags, &pair.reader));
    CHECK_OK(kvt_mem_alloc_vram(pair.source, 0, PULL_BYTES, &pair.remote_vram));
    vram_fill_pattern(pair.remote_vram, PULL_BYTES, seed);
    CHECK_OK(kvt_mem_alloc_vram(pair.reader, 0, PULL_BYTES, &pair.local_vram));
    CHECK_OK(kvt_mem_register(pair.source, pair.remote_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &pair.remote));
    CHECK_OK(kvt_mem_register(pair.reader, pair.local_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &pair.local));
    pair.peer = load_peer(pair.reader, pair.source, &pair.generation);
    return pair;
}

void close_vram_pair(const vram_pair *pair) {
    CHECK_OK(kvt_peer_unload(pair->reader, pair->peer));
    CHECK_OK(kvt_mem_deregister(pair->reader, pair->local));
    CHECK_OK(kvt_mem_deregister(pair->source, pair->remote));
    CHECK_OK(kvt_mem_free(pair->reader, pair->local_vram));
    CHECK_OK(kvt_mem_free(pair->source, pair->remote_vram));
    CHECK_OK(kvt_agent_destroy(pair->reader));
    CHECK_OK(kvt_agent_destroy(pair->source));
}

vram_reader open_vram_reader(const char *name, uint32_t flags, const source_process *source, uint64_t length) {
    vram_reader reader = {0};
    uint32_t regions = 0;
    CHECK_OK(kvt_agent_create(name, test_backend, flags, &reader.agent));
    CHECK_OK(kvt_mem_alloc_vram(reader.agent, 0, length, &reader.local_vram));
    CHECK_OK(kvt_mem_register(reader.agent, reader.local_vram, length, KVT_MEM_VRAM, 0, &reader.local));
    CHECK_OK(kvt_peer_load(reader.agent, source->blob, source->length, &reader.peer, &reader.generation));
    CHECK_OK(kvt_peer_regions(reader.agent, reader.peer, 1, &reader.remote, NULL, NULL, NULL, NULL, &regions));
    return reader;
}

void close_vram_reader(const vram_reader *reader) {
    CHECK_OK(kvt_peer_unload(reader->agent, reader->peer));
    CHECK_OK(kvt_mem_deregister(reader->agent, reader->local));
    CHECK_OK(kvt_mem_free(reader->agent, reader->local_vram));
    CHECK_OK(kvt_agent_destroy(reader->agent));
}

reader_process reader_fork(void (*body)(int down, int up, bool argument), bool argument) {
    int down[2], up[2];
    CHECK(pipe(down) == 0 && pipe(up) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(down[1]);
        close(up[0]);
        body(down[0], up[1], argument);
        for (;;) pause();
    }
    close(down[0]);
    close(up[1]);
    return (reader_process){.pid = pid, .down = down[1], .up = up[0]};
}

vram_reader reader_open(int down, const char *name, uint32_t flags) {
    source_process source = {0};
    source.blob = receive_metadata(down, &source.length);
    vram_reader reader = open_vram_reader(name, flags, &source, PULL_BYTES);
    free(source.blob);
    wait_wired_up(reader.agent, reader.peer); /* before its owner fences the worker it connected to */
    return reader;
}

void reader_await(const reader_process *reader, char said) {
    char byte = 0;
    CHECK(read(reader->up, &byte, 1) == 1 && byte == said, "the reader said '%c' (got '%c')", said, byte);
}

void reader_end(const reader_process *reader) {
    kill(reader->pid, SIGKILL);
    CHECK(waitpid(reader->pid, NULL, 0) == reader->pid, "the reader reaped");
    close(reader->down);
    close(reader->up);
}

int live_allocations(void) {
    if (real_driver()) return -1;
    unsigned long made = 0;
    int live = 0;
    ((allocations_fn)(uintptr_t)fake_symbol("fake_cuda_allocations"))(&made, &live);
    return live;
}

void *fake_symbol(const char *name) {
    void *driver = dlopen(getenv("KVT_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(driver, "the fake driver is loaded");
    void *symbol = dlsym(driver, name);
    dlclose(driver); /* still loaded: the library holds it */
    CHECK(symbol, "the fake driver has %s", name);
    return symbol;
}

bool queried_while_held(void *context) {
    unsigned long *since = context;
    return ((held_queries_fn)(uintptr_t)fake_symbol("fake_cuda_held_queries"))() > *since;
}

int32_t op_status(uint32_t agent, uint64_t op) {
    int32_t status = 0;
    CHECK_OK(kvt_xfer_status(agent, op, &status, NULL, NULL));
    return status;
}

/* The fake's count of open IPC handles, or -1 on a real driver (which does not tell). */
int open_handles(void) {
    void *driver = real_driver() ? NULL : dlopen(getenv("KVT_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    if (!driver) return -1;
    int open = ((open_handles_fn)(uintptr_t)dlsym(driver, "fake_cuda_open_handles"))();
    dlclose(driver);
    return open;
}

bool handles_closed(void *context) {
    (void)context;
    return open_handles() <= 0;
}
