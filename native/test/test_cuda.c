/* The CUDA memory domain: the driver loaded at run time, KVT_CAP_VRAM and its reason, vram allocations and
 * the driver's checks of registered vram. The driver loads once per process, so each case runs in a child
 * process that names its driver (KVT_CUDA_LIBRARY): none, or the fake driver of test/fake_cuda/ over host
 * memory, which isolates the layer above the driver and never stands for a run on a GPU. With
 * KVT_TEST_CUDA_REAL=1 (tools/gpu-check) the cases that need no fake run on the machine's own driver. */
#include "harness.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    const char *library; /* KVT_CUDA_LIBRARY */
    const char *devices; /* FAKE_CUDA_DEVICES, or NULL */
    const char *init_error;
} driver_setup;

/* Runs `body` in a child process set up as `setup` says; fails when the child fails. */
static void in_child(driver_setup setup, void (*body)(void)) {
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0, "fork failed");
    if (child == 0) {
        /* Without a library: the driver the environment names (the machine's own, unless a dry run names one). */
        if (setup.library) setenv("KVT_CUDA_LIBRARY", setup.library, 1);
        if (setup.devices) setenv("FAKE_CUDA_DEVICES", setup.devices, 1);
        if (setup.init_error) setenv("FAKE_CUDA_INIT_ERROR", setup.init_error, 1);
        body();
        fflush(NULL);
        exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child process failed (status 0x%x)", status);
}

static bool real_driver(void) {
    const char *real = getenv("KVT_TEST_CUDA_REAL");
    return real && strcmp(real, "1") == 0;
}

/* The fake driver's file, or NULL with the case skipped (always on a real driver). */
static const char *fake_driver(const char *variable) {
    if (real_driver()) {
        test_skip_reason = "runs on the fake CUDA driver only (KVT_TEST_CUDA_REAL=1)";
        return NULL;
    }
    const char *path = getenv(variable);
    if (!path || !path[0]) test_skip_reason = "the fake CUDA driver was not built (make test builds it)";
    return path && path[0] ? path : NULL;
}

static uint64_t vram_capability(void) {
    uint64_t values[KVT_CAP_COUNT];
    uint32_t n = 0;
    CHECK_OK(kvt_capabilities(values, KVT_CAP_COUNT, &n));
    return values[KVT_CAP_VRAM];
}

static void check_vram_refused(const char *reason) {
    CHECK(vram_capability() == 0, "KVT_CAP_VRAM is 0");
    const char *detail = kvt_capability_detail(KVT_CAP_VRAM);
    CHECK(strncmp(detail, "no: ", 4) == 0 && strstr(detail, reason), "the reason '%s' names '%s'", detail, reason);
    uint32_t agent = make_agent("no-vram");
    uint64_t address = 0;
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED, kvt_mem_alloc_vram(agent, 0, 4096, &address));
    CHECK_DETAIL(reason);
    uint8_t host[64];
    uint32_t region = 0;
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 kvt_mem_register(agent, (uint64_t)(uintptr_t)host, sizeof host, KVT_MEM_VRAM, 0, &region));
    CHECK_DETAIL(reason);
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED, kvt_mem_write_vram(agent, (uint64_t)(uintptr_t)host, host, sizeof host));
    CHECK_DETAIL(reason);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void refused_without_driver_library(void) { check_vram_refused("no driver library"); }

static void no_driver_library(void) {
    in_child((driver_setup){.library = "/nonexistent/libcuda.so.1"}, refused_without_driver_library);
}

static void refused_as_too_old(void) {
    check_vram_refused("driver too old");
    CHECK(strstr(kvt_capability_detail(KVT_CAP_VRAM), "cuIpcOpenMemHandle_v2"), "names the missing entry point");
}

static void driver_too_old(void) {
    const char *old = fake_driver("KVT_TEST_FAKE_CUDA_OLD");
    if (old) in_child((driver_setup){.library = old}, refused_as_too_old);
}

static void refused_without_device(void) { check_vram_refused("no device"); }

static void no_device(void) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = "0"}, refused_without_device);
}

static void refused_as_failed(void) {
    check_vram_refused("the driver failed");
    CHECK(strstr(kvt_capability_detail(KVT_CAP_VRAM), "cuInit"), "names the call that failed");
}

static void driver_fails(void) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .init_error = "999"}, refused_as_failed);
}

static void usable_with_two_devices(void) {
    CHECK(vram_capability() == 1, "KVT_CAP_VRAM is 1");
    const char *detail = kvt_capability_detail(KVT_CAP_VRAM);
    CHECK(strstr(detail, "yes: CUDA driver 13.0") && strstr(detail, "2 GPU(s)"), "the detail '%s'", detail);
}

static void driver_and_devices(void) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = "2"}, usable_with_two_devices);
}

/* Runs `body` over the driver under test: the fake with `devices` GPUs, or with KVT_TEST_CUDA_REAL=1 the
 * machine's own. */
static void on_driver_under_test(const char *devices, void (*body)(void)) {
    if (real_driver()) {
        in_child((driver_setup){0}, body);
        return;
    }
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = devices}, body);
}

/* kvt_mem_write_vram into the allocation at `address`: inside it only; on the fake the bytes are there. */
static void check_write_vram(uint32_t agent, uint64_t address, uint64_t length) {
    uint8_t bytes[4096];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 31 + 7);
    CHECK_OK(kvt_mem_write_vram(agent, address + length - sizeof bytes, bytes, sizeof bytes));
    if (!real_driver())
        CHECK(memcmp((const void *)(uintptr_t)(address + length - sizeof bytes), bytes, sizeof bytes) == 0,
              "the fake's memory holds the bytes written");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_write_vram(agent, address + length - 8, bytes, 16));
    CHECK_DETAIL("not inside a vram allocation");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_write_vram(agent, (uint64_t)(uintptr_t)bytes, bytes, 16));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_write_vram(agent, address, NULL, 16));
}

static void alloc_register_free(void) {
    uint32_t agent = make_agent("vram-banks");
    uint64_t address = 0;
    CHECK(vram_capability() == 1, "vram is available: %s", kvt_capability_detail(KVT_CAP_VRAM));
    uint32_t count = kvt_cuda_device_count(), last = count - 1;
    char missing[32];
    snprintf(missing, sizeof missing, "no GPU %u", count);
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc_vram(agent, count, 4096, &address));
    CHECK_DETAIL(missing);
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_alloc_vram(agent, last, 0, &address));
    CHECK_OK(kvt_mem_alloc_vram(agent, last, 1 << 20, &address));
    CHECK(counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 1 << 20, "the allocation is counted");
    check_write_vram(agent, address, 1 << 20);
    uint32_t region = 0, overlapping = 0;
    CHECK_OK(kvt_mem_register(agent, address, 1 << 20, KVT_MEM_VRAM, last, &region));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_mem_register(agent, address + 4096, 4096, KVT_MEM_VRAM, last, &overlapping));
    CHECK_DETAIL("overlaps");
    uint64_t length = 0;
    uint32_t kind = 0, device = 0;
    CHECK_OK(kvt_region_info(agent, region, NULL, &length, &kind, &device));
    CHECK(length == 1 << 20 && kind == KVT_MEM_VRAM && device == last, "the region is vram on the last GPU");
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free(agent, address));
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_register(agent, address + 4096, 8192, KVT_MEM_VRAM, last, &region)); /* part of one allocation */
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent));
}

static void vram_banks(void) { on_driver_under_test("2", alloc_register_free); }

typedef int (*fake_alloc_fn)(int kind, int device, size_t size, uint64_t *pointer);
typedef int (*fake_free_fn)(uint64_t pointer);
enum { FAKE_HOST = 1, FAKE_DEVICE = 2, FAKE_MANAGED = 3, FAKE_VMM = 4 };

/* Registers `length` bytes at `offset` into fresh memory of `fake_kind` on `on_device` as vram of
 * `device`; expects `expected` with `reason` in the detail. */
static void check_register(uint32_t agent, int fake_kind, int on_device, uint64_t offset, uint64_t length,
                           uint32_t device, kvt_status expected, const char *reason) {
    void *driver = dlopen(getenv("KVT_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(driver, "the fake driver is loaded");
    fake_alloc_fn fake_alloc = (fake_alloc_fn)(uintptr_t)dlsym(driver, "fake_cuda_alloc");
    fake_free_fn fake_free = (fake_free_fn)(uintptr_t)dlsym(driver, "cuMemFree_v2");
    uint64_t pointer = 0;
    CHECK(fake_alloc(fake_kind, on_device, 1 << 16, &pointer) == 0, "the fake allocates");
    uint32_t region = 0;
    CHECK_STATUS(expected, kvt_mem_register(agent, pointer + offset, length, KVT_MEM_VRAM, device, &region));
    CHECK_DETAIL(reason);
    CHECK(fake_free(pointer) == 0, "the fake frees");
    dlclose(driver);
}

/* Host memory (a stack array) registered as vram is refused. */
static void check_host_memory_refused(uint32_t agent) {
    uint8_t host[256];
    uint32_t region = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_mem_register(agent, (uint64_t)(uintptr_t)host, sizeof host, KVT_MEM_VRAM, 0, &region));
    CHECK_DETAIL("host memory named as vram");
}

static void refuse_what_is_not_device_memory(void) {
    uint32_t agent = make_agent("vram-refusals");
    check_host_memory_refused(agent);
    check_register(agent, FAKE_HOST, 0, 0, 4096, 0, KVT_ERR_INVALID_PARAM, "register it as dram");
    check_register(agent, FAKE_MANAGED, 0, 0, 4096, 0, KVT_ERR_INVALID_PARAM, "managed");
    check_register(agent, FAKE_VMM, 0, 0, 4096, 0, KVT_ERR_NOT_SUPPORTED, "virtual memory API");
    check_register(agent, FAKE_DEVICE, 0, 0, 4096, 1, KVT_ERR_INVALID_PARAM, "memory of GPU 0, not of GPU 1");
    check_register(agent, FAKE_DEVICE, 0, 4096, 1 << 16, 0, KVT_ERR_INVALID_PARAM, "not inside one allocation");
    check_register(agent, FAKE_DEVICE, 0, 0, 4096, 5, KVT_ERR_INVALID_PARAM, "no GPU 5");
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 0, "nothing registered");
    CHECK_OK(kvt_agent_destroy(agent));
}

static void register_refusals(void) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = "2"}, refuse_what_is_not_device_memory);
}

/* A driver that answers INVALID_VALUE for the attributes of memory it does not know. */
static void refuse_host_memory_on_a_strict_driver(void) {
    setenv("FAKE_CUDA_REFUSE_UNKNOWN", "1", 1);
    uint32_t agent = make_agent("vram-strict");
    check_host_memory_refused(agent);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void strict_driver(void) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = "1"}, refuse_host_memory_on_a_strict_driver);
}

/* Whether [address, +length) of vram holds the bytes [from, from + length) of the pattern of `seed`. */
static bool holds_pattern(uint64_t address, uint64_t length, uint64_t from, uint64_t seed) {
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

#define PULL_BYTES (256u << 10)

/* Three pieces of the peer's region `remote` into this agent's `local`, in another order; the READ must
 * end KVT_OK with every byte where it belongs. */
static void pull_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
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

/* 200 pieces of 1 KiB in reverse order, non-contiguous on both sides (so none merge): more than the piece
 * buffer's first 64, twice (the second reuses what the first grew). */
static void pull_many_pieces(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
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

/* A template of two planes (routes) over PULL_BYTES, four blocks of 32 KiB in each plane's half, two rows
 * of 4 KiB per block and plane: what a KV layout's layers and planes make of one block. */
#define PLANE_BYTES (PULL_BYTES / 2)
#define BLOCK_STRIDE (32u << 10)
#define ROW_STRIDE (16u << 10)
#define ROW_BYTES 4096u

static kvt_status register_planes(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
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
static void pull_by_template(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
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

/* Two agents of this process, each with PULL_BYTES of vram registered (the source's holding the pattern of
 * `seed`), the source loaded as the reader's peer. */
typedef struct {
    uint32_t source, reader, remote, local, peer;
    uint64_t remote_vram, local_vram, generation;
} vram_pair;

static vram_pair open_vram_pair(uint64_t seed) {
    vram_pair pair = {.source = make_agent("vram-source"), .reader = make_agent("vram-reader")};
    CHECK_OK(kvt_mem_alloc_vram(pair.source, 0, PULL_BYTES, &pair.remote_vram));
    vram_fill_pattern(pair.remote_vram, PULL_BYTES, seed);
    CHECK_OK(kvt_mem_alloc_vram(pair.reader, 0, PULL_BYTES, &pair.local_vram));
    CHECK_OK(kvt_mem_register(pair.source, pair.remote_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &pair.remote));
    CHECK_OK(kvt_mem_register(pair.reader, pair.local_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &pair.local));
    pair.peer = load_peer(pair.reader, pair.source, &pair.generation);
    return pair;
}

static void close_vram_pair(const vram_pair *pair) {
    CHECK_OK(kvt_peer_unload(pair->reader, pair->peer));
    CHECK_OK(kvt_mem_deregister(pair->reader, pair->local));
    CHECK_OK(kvt_mem_deregister(pair->source, pair->remote));
    CHECK_OK(kvt_mem_free(pair->reader, pair->local_vram));
    CHECK_OK(kvt_mem_free(pair->source, pair->remote_vram));
    CHECK_OK(kvt_agent_destroy(pair->reader));
    CHECK_OK(kvt_agent_destroy(pair->source));
}

static void pull_within_the_process(void) {
    vram_pair pair = open_vram_pair(41);
    uint32_t reader = pair.reader, peer = pair.peer, remote = pair.remote, local = pair.local;
    uint64_t generation = pair.generation, op = 0;
    uint8_t *memory = NULL;
    uint32_t dram = alloc_region(reader, PULL_BYTES, &memory);
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED, post_one(reader, KVT_XFER_READ, peer, generation, dram, 0, remote, 0, 64, &op));
    CHECK_DETAIL("dram and vram regions in one operation");
    uint32_t mixed = 0, planes = 0, one = 0;
    CHECK_OK(register_planes(reader, peer, generation, dram, remote, &mixed));
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 kvt_xfer_post_blocks(reader, mixed, KVT_XFER_READ, 1, &one, &one, NULL, 0, &op));
    CHECK_DETAIL("kvt_xfer_post_blocks: dram and vram regions in one operation");
    CHECK_OK(kvt_template_release(reader, mixed));
    pull_pieces(reader, peer, generation, local, remote, pair.local_vram, 41);
    pull_by_template(reader, peer, generation, local, remote, pair.local_vram, 41);
    pull_many_pieces(reader, peer, generation, local, remote, pair.local_vram, 41);
    /* WRITEs the other way: 8 KiB by descriptor, then local block 0 into the peer's block 3 by template. */
    vram_fill_pattern(pair.local_vram, PULL_BYTES, 61);
    CHECK_OK(post_one(reader, KVT_XFER_WRITE, peer, generation, local, 0, remote, 4096, 8192, &op));
    wait_completions_ok(reader, 1, 8192, true);
    CHECK(holds_pattern(pair.remote_vram + 4096, 8192, 0, 61), "the WRITE's bytes are in the peer's vram");
    const uint32_t three = 3;
    CHECK_OK(register_planes(reader, peer, generation, local, remote, &planes));
    CHECK_OK(kvt_xfer_post_blocks(reader, planes, KVT_XFER_WRITE, 1, &one, &three, NULL, 0, &op));
    wait_completions_ok(reader, 1, 2 * 2 * ROW_BYTES, true);
    CHECK(holds_pattern(pair.remote_vram + PLANE_BYTES + ROW_STRIDE + 3 * BLOCK_STRIDE, ROW_BYTES,
                        PLANE_BYTES + ROW_STRIDE, 61),
          "the template WRITE put plane 1 row 1 of block 0 into the peer's block 3");
    CHECK_OK(kvt_template_release(reader, planes));
    free_region(reader, dram, memory);
    close_vram_pair(&pair);
}

static void vram_pull_in_one_process(void) { on_driver_under_test("1", pull_within_the_process); }

typedef void (*hold_fn)(int hold);
typedef unsigned long (*held_queries_fn)(void);

static void *fake_symbol(const char *name) {
    void *driver = dlopen(getenv("KVT_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(driver, "the fake driver is loaded");
    void *symbol = dlsym(driver, name);
    dlclose(driver); /* still loaded: the library holds it */
    CHECK(symbol, "the fake driver has %s", name);
    return symbol;
}

static bool queried_while_held(void *context) {
    unsigned long *since = context;
    return ((held_queries_fn)(uintptr_t)fake_symbol("fake_cuda_held_queries"))() > *since;
}

static int32_t op_status(uint32_t agent, uint64_t op) {
    int32_t status = 0;
    CHECK_OK(kvt_xfer_status(agent, op, &status, NULL, NULL));
    return status;
}

/* Two pulls whose stream work the fake holds back: both stay in progress, a cancel included, until the
 * work completes; then the canceled one ends CANCELED and the other KVT_OK with its bytes. */
static void pulls_wait_for_their_stream(void) {
    vram_pair pair = open_vram_pair(47);
    uint32_t reader = pair.reader;
    uint64_t ops[2] = {0, 0};
    ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(1);
    unsigned long since = 0;
    for (int i = 0; i < 2; i++)
        CHECK_OK(post_one(reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, 0, pair.remote, 0, PULL_BYTES,
                          &ops[i]));
    wait_until(reader, queried_while_held, &since, "a held event to be asked", WAIT_DEADLINE_MS);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(reader, ops[0])); /* accepted; it ends later */
    since = ((held_queries_fn)(uintptr_t)fake_symbol("fake_cuda_held_queries"))();
    wait_until(reader, queried_while_held, &since, "a held event to be asked after the cancel", WAIT_DEADLINE_MS);
    CHECK(op_status(reader, ops[0]) == KVT_IN_PROGRESS && op_status(reader, ops[1]) == KVT_IN_PROGRESS,
          "nothing ends while its stream's work runs, a canceled pull neither");
    ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(0);
    uint64_t bytes = 0;
    CHECK(wait_op(reader, ops[0], NULL) == KVT_ERR_CANCELED, "the canceled pull ends CANCELED");
    CHECK(wait_op(reader, ops[1], &bytes) == KVT_OK && bytes == PULL_BYTES, "the other ends with its bytes");
    CHECK(holds_pattern(pair.local_vram, PULL_BYTES, 0, 47), "the bytes are the source's");
    for (int i = 0; i < 2; i++) CHECK_OK(kvt_xfer_release(reader, ops[i]));
    close_vram_pair(&pair);
}

static void vram_pull_waits_for_its_stream(void) {
    const char *fake = fake_driver("KVT_TEST_FAKE_CUDA");
    if (fake) in_child((driver_setup){.library = fake, .devices = "1"}, pulls_wait_for_their_stream);
}

typedef int (*open_handles_fn)(void);

/* The fake's count of open IPC handles, or -1 on a real driver (which does not tell). */
static int open_handles(void) {
    void *driver = real_driver() ? NULL : dlopen(getenv("KVT_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    if (!driver) return -1;
    int open = ((open_handles_fn)(uintptr_t)dlsym(driver, "fake_cuda_open_handles"))();
    dlclose(driver);
    return open;
}

static bool handles_closed(void *context) {
    (void)context;
    return open_handles() <= 0;
}

static void pull_from_the_source_process(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 43}, &source),
          "the source process starts");
    uint32_t reader = make_agent("vram-ipc-reader");
    uint64_t local_vram = 0, generation = 0;
    CHECK_OK(kvt_mem_alloc_vram(reader, 0, PULL_BYTES, &local_vram));
    uint32_t local = 0, peer = 0, remote = 0, regions = 0;
    CHECK_OK(kvt_mem_register(reader, local_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &local));
    CHECK_OK(kvt_peer_load(reader, source.blob, source.length, &peer, &generation));
    CHECK_OK(kvt_peer_regions(reader, peer, 1, &remote, NULL, NULL, NULL, NULL, &regions));
    CHECK(open_handles() <= 0, "no handle is opened before a pull needs it");
    pull_pieces(reader, peer, generation, local, remote, local_vram, 43);
    pull_pieces(reader, peer, generation, local, remote, local_vram, 43);
    pull_by_template(reader, peer, generation, local, remote, local_vram, 43);
    CHECK(open_handles() < 0 || open_handles() == 1, "the peer's handle is opened once for its metadata");
    CHECK_OK(kvt_peer_unload(reader, peer));
    wait_until(reader, handles_closed, NULL, "unloading the peer closes its handle", WAIT_DEADLINE_MS);
    CHECK_OK(kvt_mem_deregister(reader, local));
    CHECK_OK(kvt_mem_free(reader, local_vram));
    CHECK_OK(kvt_agent_destroy(reader));
    source_end(&source);
}

static void vram_pull_from_another_process(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_driver_under_test("1", pull_from_the_source_process);
}

/* The reader process of killed_reader: loads the source's metadata (from `from_source`), pulls from its vram
 * (opening its IPC handle) and WRITEs 32 KiB back, says so on `to_source` and waits to be killed, holding
 * the handle. */
static void reader_holding_the_handle(int from_source, int to_source) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint64_t length = 0;
    CHECK(read(from_source, &length, sizeof length) == (ssize_t)sizeof length, "the blob's length");
    uint8_t *blob = malloc(length);
    for (uint64_t got = 0; got < length;) {
        ssize_t n = read(from_source, blob + got, length - got);
        CHECK(n > 0, "the blob");
        got += (uint64_t)n;
    }
    uint32_t reader = make_agent("vram-killed-reader"), local = 0, peer = 0, remote = 0, regions = 0;
    uint64_t local_vram = 0, generation = 0;
    CHECK_OK(kvt_mem_alloc_vram(reader, 0, PULL_BYTES, &local_vram));
    CHECK_OK(kvt_mem_register(reader, local_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &local));
    CHECK_OK(kvt_peer_load(reader, blob, length, &peer, &generation));
    CHECK_OK(kvt_peer_regions(reader, peer, 1, &remote, NULL, NULL, NULL, NULL, &regions));
    pull_pieces(reader, peer, generation, local, remote, local_vram, 59);
    uint64_t op = 0; /* and a WRITE into the source's last 32 KiB, through the same handle */
    vram_fill_pattern(local_vram, 32768, 67);
    CHECK_OK(post_one(reader, KVT_XFER_WRITE, peer, generation, local, 0, remote, PULL_BYTES - 32768, 32768, &op));
    wait_completions_ok(reader, 1, 32768, true);
    CHECK(write(to_source, "x", 1) == 1, "pulled");
    for (;;) pause();
}

/* This process is the source: a reader process pulls from its vram and is SIGKILLed holding the IPC handle.
 * The source's memory keeps its bytes, its region is not held by the dead reader (it deregisters at once),
 * and a new reader pulls the same bytes before that. The reader is forked before this process uses the
 * driver (CUDA does not survive a fork). */
static void killed_reader_holding_handles(void) {
    int down[2], up[2];
    CHECK(pipe(down) == 0 && pipe(up) == 0, "pipe");
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) reader_holding_the_handle(down[0], up[1]);
    uint32_t source = make_agent("vram-kept-source"), remote = 0;
    uint64_t remote_vram = 0, length = 0;
    CHECK_OK(kvt_mem_alloc_vram(source, 0, PULL_BYTES, &remote_vram));
    vram_fill_pattern(remote_vram, PULL_BYTES, 59);
    CHECK_OK(kvt_mem_register(source, remote_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &remote));
    CHECK_OK(kvt_agent_metadata(source, NULL, 0, &length));
    uint8_t *blob = malloc(length);
    CHECK_OK(kvt_agent_metadata(source, blob, length, &length));
    CHECK(write(down[1], &length, sizeof length) == (ssize_t)sizeof length &&
              write(down[1], blob, length) == (ssize_t)length,
          "the blob sent");
    char pulled = 0;
    CHECK(read(up[0], &pulled, 1) == 1, "the reader pulled and holds the handle");
    CHECK(kill(child, SIGKILL) == 0 && waitpid(child, NULL, 0) == child, "the reader killed");
    CHECK(holds_pattern(remote_vram, PULL_BYTES - 32768, 0, 59) &&
              holds_pattern(remote_vram + PULL_BYTES - 32768, 32768, 0, 67),
          "the source's bytes are intact, with what the reader wrote");
    uint32_t reader = make_agent("vram-next-reader"), local = 0, peer = 0;
    uint64_t local_vram = 0, generation = 0;
    CHECK_OK(kvt_mem_alloc_vram(reader, 0, PULL_BYTES, &local_vram));
    CHECK_OK(kvt_mem_register(reader, local_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &local));
    peer = load_peer(reader, source, &generation);
    pull_pieces(reader, peer, generation, local, remote, local_vram, 59);
    CHECK_OK(kvt_peer_unload(reader, peer));
    CHECK_OK(kvt_mem_deregister(source, remote));
    CHECK_OK(kvt_mem_free(source, remote_vram));
    CHECK_OK(kvt_mem_deregister(reader, local));
    CHECK_OK(kvt_mem_free(reader, local_vram));
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
    free(blob);
}

static void vram_source_outlives_a_killed_reader(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_driver_under_test("1", killed_reader_holding_handles);
}

/* Device memory for the kernel tests, through the driver's own calls. */
static CUdeviceptr device_alloc(size_t bytes) {
    CUdeviceptr pointer = 0;
    CHECK(kvt_cuda.MemAlloc(&pointer, bytes) == KVT_CUDA_SUCCESS, "cuMemAlloc of %zu bytes", bytes);
    return pointer;
}

static void upload(CUdeviceptr to, const void *from, size_t bytes, CUstream stream) {
    CHECK(kvt_cuda.MemcpyHtoDAsync(to, from, bytes, stream) == KVT_CUDA_SUCCESS, "upload");
    CHECK(kvt_cuda.StreamSynchronize(stream) == KVT_CUDA_SUCCESS, "synchronize");
}

static void download(void *to, CUdeviceptr from, size_t bytes, CUstream stream) {
    CHECK(kvt_cuda.MemcpyDtoHAsync(to, from, bytes, stream) == KVT_CUDA_SUCCESS, "download");
    CHECK(kvt_cuda.StreamSynchronize(stream) == KVT_CUDA_SUCCESS, "synchronize");
}

#define KERNEL_BYTES (1u << 20)
#define KERNEL_PIECES 96u

/* Pieces of uneven sizes and alignments from the first half of a buffer to scattered places in the
 * second; `host` gets the same copies done on the host. */
static void plan_pieces(kvt_gather_piece *pieces, uint64_t device_base, uint8_t *host) {
    uint64_t from = 0, to = KERNEL_BYTES / 2;
    for (uint32_t p = 0; p < KERNEL_PIECES; p++) {
        uint64_t bytes = p % 3 == 0 ? 4096 : p % 3 == 1 ? 1000 + p : 16 * (p + 1);
        uint64_t skew = p % 4 == 3 ? 5 : 0; /* unaligned ends take the byte path */
        pieces[p] = (kvt_gather_piece){device_base + from + skew, device_base + to + skew, bytes};
        memmove(host + to + skew, host + from + skew, bytes);
        from += bytes + 32;
        to += (bytes + 48) / 16 * 16 + 16 * (p % 5);
    }
    CHECK(from < KERNEL_BYTES / 2 && to < KERNEL_BYTES, "the pieces fit");
}

static void gather_and_checksum(void) {
    CHECK_OK(kvt_cuda_use_device("test_cuda", 0));
    CUstream stream = NULL;
    CHECK(kvt_cuda.StreamCreate(&stream, KVT_CU_STREAM_NON_BLOCKING) == KVT_CUDA_SUCCESS, "stream");
    uint8_t *host = malloc(KERNEL_BYTES), *back = malloc(KERNEL_BYTES);
    CHECK(host && back, "out of memory");
    fill_pattern(host, KERNEL_BYTES, 31);
    CUdeviceptr buffer = device_alloc(KERNEL_BYTES), table = device_alloc(KERNEL_PIECES * sizeof(kvt_gather_piece));
    upload(buffer, host, KERNEL_BYTES, stream);
    kvt_gather_piece pieces[KERNEL_PIECES];
    plan_pieces(pieces, buffer, host);
    upload(table, pieces, sizeof pieces, stream);
    CHECK_OK(kvt_cuda_gather("test_cuda", 0, table, KERNEL_PIECES, stream));
    download(back, buffer, KERNEL_BYTES, stream);
    CHECK(memcmp(back, host, KERNEL_BYTES) == 0, "every piece landed where the host's copy put it");

    /* Checksums of the destination pieces, 4 groups, against the host's function over the host's copy. */
    kvt_checksum_piece sums_of[KERNEL_PIECES], on_host[KERNEL_PIECES];
    for (uint32_t p = 0; p < KERNEL_PIECES; p++) {
        sums_of[p] = (kvt_checksum_piece){pieces[p].destination, pieces[p].bytes, p % 4, p / 4};
        on_host[p] = sums_of[p];
        on_host[p].address = (uint64_t)(uintptr_t)host + (pieces[p].destination - buffer);
    }
    uint64_t sums[4] = {0}, expected[4] = {0};
    CUdeviceptr device_sums = device_alloc(sizeof sums);
    upload(device_sums, sums, sizeof sums, stream);
    upload(table, sums_of, sizeof sums_of, stream);
    CHECK_OK(kvt_cuda_block_checksum("test_cuda", 0, table, KERNEL_PIECES, device_sums, stream));
    download(sums, device_sums, sizeof sums, stream);
    kvt_block_checksum_on_host(on_host, KERNEL_PIECES, expected);
    CHECK(memcmp(sums, expected, sizeof sums) == 0, "the GPU's checksums are the host's");
    host[on_host[0].address - (uint64_t)(uintptr_t)host] ^= 1;
    uint64_t changed[4] = {0};
    kvt_block_checksum_on_host(on_host, KERNEL_PIECES, changed);
    CHECK(changed[0] != expected[0] && changed[1] == expected[1], "one flipped bit changes its group's checksum");

    CHECK(kvt_cuda.MemFree(device_sums) == KVT_CUDA_SUCCESS && kvt_cuda.MemFree(table) == KVT_CUDA_SUCCESS &&
              kvt_cuda.MemFree(buffer) == KVT_CUDA_SUCCESS,
          "cuMemFree");
    CHECK(kvt_cuda.StreamDestroy(stream) == KVT_CUDA_SUCCESS, "stream destroyed");
    free(host);
    free(back);
}

static void kernels(void) { on_driver_under_test("1", gather_and_checksum); }

/* kvt_mem_checksums(region, 3 pieces in 2 groups, at odd offsets) of `agent`. */
static kvt_status checksums_of(uint32_t agent, uint32_t region, uint64_t shift, uint64_t sums[2]) {
    const uint32_t zero[3] = {0, 0, 0}, group[3] = {0, 1, 0}, ordinal[3] = {0, 0, 1};
    const uint64_t offset[3] = {3 + shift, 4096, 70001}, length[3] = {5000, 65536, 333};
    return kvt_mem_checksums(agent, 3, zero, offset, length, group, ordinal, 1, &region, 2, sums);
}

/* The same bytes in vram (the kernel) and in dram (the host) give the same sums, the host function's. */
static void sums_where_the_bytes_are(void) {
    uint32_t agent = make_agent("vram-checksums");
    uint64_t vram = 0;
    uint32_t on_gpu = 0, none = 0;
    CHECK_OK(kvt_mem_alloc_vram(agent, 0, PULL_BYTES, &vram));
    vram_fill_pattern(vram, PULL_BYTES, 53);
    CHECK_OK(kvt_mem_register(agent, vram, PULL_BYTES, KVT_MEM_VRAM, 0, &on_gpu));
    uint8_t *memory = NULL;
    uint32_t on_host = alloc_region(agent, PULL_BYTES, &memory);
    fill_pattern(memory, PULL_BYTES, 53);
    uint64_t gpu[2] = {0, 0}, host[2] = {0, 0}, expected[2] = {0, 0};
    CHECK_OK(checksums_of(agent, on_gpu, 0, gpu));
    CHECK_OK(checksums_of(agent, on_host, 0, host));
    const kvt_checksum_piece pieces[3] = {{(uint64_t)(uintptr_t)memory + 3, 5000, 0, 0},
                                          {(uint64_t)(uintptr_t)memory + 4096, 65536, 1, 0},
                                          {(uint64_t)(uintptr_t)memory + 70001, 333, 0, 1}};
    kvt_block_checksum_on_host(pieces, 3, expected);
    CHECK(memcmp(gpu, expected, sizeof gpu) == 0 && memcmp(host, expected, sizeof host) == 0,
          "vram and dram sums are the host function's");
    uint64_t untouched[2] = {7, 7};
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, checksums_of(agent, on_gpu, PULL_BYTES, untouched));
    CHECK_DETAIL("exceeds region");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, checksums_of(agent, 999, 0, untouched));
    CHECK_DETAIL("is not a live region");
    const uint32_t both[2] = {on_gpu, on_host}, index[1] = {1}, group[1] = {2};
    const uint64_t offset[1] = {0}, length[1] = {1};
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_mem_checksums(agent, 1, index, offset, length, index, index, 2, both, 2, untouched));
    CHECK_DETAIL("different kinds or GPUs");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_mem_checksums(agent, 1, &none, offset, length, group, &none, 1, &on_gpu, 2, untouched));
    CHECK_DETAIL("out of range");
    CHECK(untouched[0] == 7 && untouched[1] == 7, "a refusal writes no sum");
    CHECK_OK(kvt_mem_deregister(agent, on_gpu));
    CHECK_OK(kvt_mem_free(agent, vram));
    free_region(agent, on_host, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void block_checksums(void) { on_driver_under_test("1", sums_where_the_bytes_are); }

TEST_MAIN("cuda", TEST(no_driver_library), TEST(driver_too_old), TEST(no_device), TEST(driver_fails),
          TEST(driver_and_devices), TEST(vram_banks), TEST(register_refusals), TEST(strict_driver),
          TEST(vram_pull_in_one_process), TEST(vram_pull_from_another_process), TEST(vram_pull_waits_for_its_stream),
          TEST(kernels), TEST(block_checksums), TEST(vram_source_outlives_a_killed_reader))
