/* The CUDA memory domain: the driver loaded at run time, KVT_CAP_VRAM and its reason, vram allocations and
 * the driver's checks of registered vram. The driver loads once per process, so each case runs in a child
 * process that names its driver (KVT_CUDA_LIBRARY): none, or the fake driver of test/fake_cuda/ over host
 * memory, which isolates the layer above the driver and never stands for a run on a GPU. With
 * KVT_TEST_CUDA_REAL=1 (tools/gpu-check) the cases that need no fake run on the machine's own driver. */
#include "agent.h" /* kvt_test_forge_staged_requests */
#include "cuda_pulls.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

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

static void no_device(void) { on_fake_driver("0", refused_without_device); }

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

static void driver_and_devices(void) { on_fake_driver("2", usable_with_two_devices); }

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

static void register_refusals(void) { on_fake_driver("2", refuse_what_is_not_device_memory); }

/* A driver that answers INVALID_VALUE for the attributes of memory it does not know. */
static void refuse_host_memory_on_a_strict_driver(void) {
    setenv("FAKE_CUDA_REFUSE_UNKNOWN", "1", 1);
    uint32_t agent = make_agent("vram-strict");
    check_host_memory_refused(agent);
    CHECK_OK(kvt_agent_destroy(agent));
}

static void strict_driver(void) { on_fake_driver("1", refuse_host_memory_on_a_strict_driver); }

static void pull_into_dram(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t remote, uint64_t seed);

static void pull_within_the_process(void) {
    vram_pair pair = open_vram_pair(41, 0);
    uint32_t reader = pair.reader, peer = pair.peer, remote = pair.remote, local = pair.local;
    uint64_t generation = pair.generation, op = 0;
    uint8_t *memory = NULL;
    uint32_t dram = alloc_region(reader, PULL_BYTES, &memory);
    /* Mixed: host-staged, which moves READs only (on ucx; vram_staged_pull_from_another_process READs so). */
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 post_one(reader, KVT_XFER_WRITE, peer, generation, dram, 0, remote, 0, 64, &op));
    CHECK_DETAIL("dram and vram regions in one operation");
    CHECK_DETAIL(test_backend == KVT_BACKEND_UCX ? "is a READ" : "need the ucx backend");
    if (test_backend == KVT_BACKEND_UCX) pull_into_dram(reader, peer, generation, remote, 41); /* staged at once */
    uint32_t mixed = 0, planes = 0, one = 0;
    CHECK_OK(register_planes(reader, peer, generation, dram, remote, &mixed));
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 kvt_xfer_post_blocks(reader, mixed, KVT_XFER_WRITE, 1, &one, &one, NULL, 0, &op));
    CHECK_DETAIL("kvt_xfer_post_blocks: dram and vram regions in one operation");
    CHECK_OK(kvt_template_release(reader, mixed));
    pull_pieces(reader, peer, generation, local, remote, pair.local_vram, 41);
    unsigned long (*events_made)(void) =
        real_driver() ? NULL : (unsigned long (*)(void))(uintptr_t)fake_symbol("fake_cuda_events_made");
    unsigned long made = events_made ? events_made() : 0;
    pull_by_template(reader, peer, generation, local, remote, pair.local_vram, 41);
    CHECK(!events_made || events_made() == made, "a pull after a completed one records its event (%lu made)",
          events_made ? events_made() - made : 0);
    pull_many_pieces(reader, peer, generation, local, remote, pair.local_vram, 41);
    pull_large_pieces(reader, peer, generation, local, remote, pair.local_vram, 41);
    if (!real_driver()) {
        uint32_t pieces = 0;
        uint64_t largest = 0;
        ((last_launch_fn)(uintptr_t)fake_symbol("fake_cuda_last_launch"))("kvt_gather", &pieces, &largest);
        CHECK(pieces == 3 && largest == KVT_KERNEL_TILE_BYTES,
              "the piece above a tile went as two tiles, the other as one (%u pieces, the largest %llu bytes)", pieces,
              (unsigned long long)largest);
    }
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

/* Two pulls whose stream work the fake holds back: both stay in progress, a cancel included, until the
 * work completes; then the canceled one ends CANCELED and the other KVT_OK with its bytes. */
static void pulls_wait_for_their_stream(void) {
    vram_pair pair = open_vram_pair(47, 0);
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

static void vram_pull_waits_for_its_stream(void) { on_fake_driver("1", pulls_wait_for_their_stream); }

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
    pull_large_pieces(reader, peer, generation, local, remote, local_vram, 43);
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

/* The reader process of killed_reader (reader_fork): loads the source's metadata, pulls from its vram (opening its
 * IPC handle) and WRITEs 32 KiB back, says so, and waits to be killed, holding the handle. */
static void reader_holding_the_handle(int down, int up, bool unused) {
    (void)unused;
    vram_reader r = reader_open(down, "vram-killed-reader", 0);
    pull_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 59);
    uint64_t op = 0; /* and a WRITE into the source's last 32 KiB, through the same handle */
    vram_fill_pattern(r.local_vram, 32768, 67);
    CHECK_OK(
        post_one(r.agent, KVT_XFER_WRITE, r.peer, r.generation, r.local, 0, r.remote, PULL_BYTES - 32768, 32768, &op));
    wait_completions_ok(r.agent, 1, 32768, true);
    CHECK(write(up, "x", 1) == 1, "pulled");
}

/* This process is the source: a reader process pulls from its vram and is SIGKILLed holding the IPC handle.
 * The source's memory keeps its bytes, its region is not held by the dead reader (it deregisters at once),
 * and a new reader pulls the same bytes before that. The reader is forked before this process uses the
 * driver (CUDA does not survive a fork). */
static void killed_reader_holding_handles(void) {
    reader_process killed = reader_fork(reader_holding_the_handle, false);
    uint32_t source = make_agent("vram-kept-source"), remote = 0;
    uint64_t remote_vram = 0;
    CHECK_OK(kvt_mem_alloc_vram(source, 0, PULL_BYTES, &remote_vram));
    vram_fill_pattern(remote_vram, PULL_BYTES, 59);
    CHECK_OK(kvt_mem_register(source, remote_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &remote));
    send_metadata(source, killed.down);
    reader_await(&killed, 'x');
    reader_end(&killed);
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
}

static void vram_source_outlives_a_killed_reader(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_driver_under_test("1", killed_reader_holding_handles);
}

/* ---- host-staged pulls ---- */

#define STAGED_BYTES ((18u << 20) + 4096u) /* five chunks of 4 MiB: more than the four a pull has in flight */

/* The whole source region in two descriptors (its halves, swapped), through every chunk slot and again. */
static void pull_chunks(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                        uint64_t local_address, uint64_t seed) {
    const uint32_t zero[2] = {0, 0};
    const uint64_t half = STAGED_BYTES / 2, local_offset[2] = {half, 0}, remote_offset[2] = {0, half},
                   length[2] = {half, half};
    uint64_t op = 0;
    CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, 2, zero, local_offset, zero, remote_offset, length,
                           1, &local, 1, &remote, NULL, 0, &op));
    wait_completions_ok(reader, 1, STAGED_BYTES, true);
    CHECK(holds_pattern(local_address + half, half, 0, seed) && holds_pattern(local_address, half, half, seed),
          "every chunk landed where it belongs");
}

/* A READ of the source's vram (from 4 KiB on) into dram of this agent: staged, copied up by the host. */
static void pull_into_dram(uint32_t reader, uint32_t peer, uint64_t generation, uint32_t remote, uint64_t seed) {
    const uint64_t skip = 4096, length = PULL_BYTES - skip;
    uint8_t *memory = NULL, *expected = malloc(PULL_BYTES);
    uint32_t dram = alloc_region(reader, PULL_BYTES, &memory);
    uint64_t op = 0;
    CHECK_OK(post_one(reader, KVT_XFER_READ, peer, generation, dram, 0, remote, skip, length, &op));
    wait_completions_ok(reader, 1, length, true);
    fill_pattern(expected, PULL_BYTES, seed);
    CHECK(memcmp(memory, expected + skip, length) == 0, "the vram's bytes are in the dram region");
    free(expected);
    free_region(reader, dram, memory);
}

/* A reader that stages (KVT_AGENT_VRAM_STAGED) pulls the source process's vram: by descriptors in chunks, many
 * small pieces, by template and into dram, every byte checked, and never opens the source's IPC handle. */
static void staged_pull_from_the_source_process(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = STAGED_BYTES, .vram_memory = true, .seed = 71}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("vram-staged-reader", KVT_AGENT_VRAM_STAGED, &source, STAGED_BYTES);
    pull_chunks(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 71);
    pull_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 71);
    pull_many_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 71);
    pull_by_template(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 71);
    pull_into_dram(r.agent, r.peer, r.generation, r.remote, 71);
    uint64_t op = 0;
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 post_one(r.agent, KVT_XFER_WRITE, r.peer, r.generation, r.local, 0, r.remote, 0, 64, &op));
    CHECK_DETAIL("stages its vram moves (KVT_AGENT_VRAM_STAGED), so the move goes host-staged, but a host-staged "
                 "move is a READ");
    CHECK(open_handles() <= 0, "no CUDA IPC handle was opened");
    close_vram_reader(&r);
    source_end(&source);
}

static void vram_staged_pull_from_another_process(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX between processes");
    on_driver_under_test("1", staged_pull_from_the_source_process);
}

/* One staged READ into vram of GPUs 0 and 1 is refused at post. */
static void refuse_two_gpus(const vram_pair *pair) {
    uint64_t other = 0, op = 0;
    uint32_t regions[2] = {pair->local, 0};
    CHECK_OK(kvt_mem_alloc_vram(pair->reader, 1, 4096, &other));
    CHECK_OK(kvt_mem_register(pair->reader, other, 4096, KVT_MEM_VRAM, 1, &regions[1]));
    const uint32_t local_index[2] = {0, 1}, zero[2] = {0, 0};
    const uint64_t offset[2] = {0, 0}, length[2] = {4096, 4096};
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 kvt_xfer_post(pair->reader, KVT_XFER_READ, pair->peer, pair->generation, 2, local_index, offset, zero,
                               offset, length, 2, regions, 1, &pair->remote, NULL, 0, &op));
    CHECK_DETAIL("a host-staged READ lands in the memory of one GPU");
    CHECK_OK(kvt_mem_deregister(pair->reader, regions[1]));
    CHECK_OK(kvt_mem_free(pair->reader, other));
}

/* A staged pull whose copy up the fake holds back: canceled, it stays in progress, its region BUSY, until that
 * work completed; then it ends CANCELED and the next pull moves every byte. Refused: into two GPUs, and on
 * loopback. */
static void staged_pulls_wait_for_their_stream(void) {
    vram_pair pair = open_vram_pair(73, KVT_AGENT_VRAM_STAGED);
    uint32_t reader = pair.reader;
    uint64_t op = 0;
    if (test_backend != KVT_BACKEND_UCX) {
        CHECK_STATUS(KVT_ERR_NOT_SUPPORTED, post_one(reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, 0,
                                                     pair.remote, 0, PULL_BYTES, &op));
        CHECK_DETAIL("host-staged moves need the ucx backend");
        close_vram_pair(&pair);
        return;
    }
    refuse_two_gpus(&pair);
    ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(1);
    unsigned long since = 0;
    CHECK_OK(
        post_one(reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, 0, pair.remote, 0, PULL_BYTES, &op));
    wait_until(reader, queried_while_held, &since, "a held event to be asked", WAIT_DEADLINE_MS);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(reader, op));
    since = ((held_queries_fn)(uintptr_t)fake_symbol("fake_cuda_held_queries"))();
    wait_until(reader, queried_while_held, &since, "a held event to be asked after the cancel", WAIT_DEADLINE_MS);
    CHECK(op_status(reader, op) == KVT_IN_PROGRESS, "a canceled staged pull waits for its copy up");
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_deregister(reader, pair.local));
    ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(0);
    CHECK(wait_op(reader, op, NULL) == KVT_ERR_CANCELED, "the canceled pull ends CANCELED");
    CHECK_OK(kvt_xfer_release(reader, op));
    CHECK_OK(
        post_one(reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, 0, pair.remote, 0, PULL_BYTES, &op));
    wait_completions_ok(reader, 1, PULL_BYTES, true);
    CHECK(holds_pattern(pair.local_vram, PULL_BYTES, 0, 73), "the next pull moved the source's bytes");
    close_vram_pair(&pair);
}

static void vram_staged_pull_waits_for_its_stream(void) { on_fake_driver("2", staged_pulls_wait_for_their_stream); }

/* The source process stops before it answers, then is killed: the staged pull ends REMOTE_DISCONNECT. */
static void staged_pull_from_a_killed_source(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 79}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("vram-staged-orphan", KVT_AGENT_VRAM_STAGED, &source, PULL_BYTES);
    source_signal(&source, SIGSTOP);
    source_wait_stopped(&source);
    uint64_t op = 0;
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, PULL_BYTES, &op));
    source_end(&source);
    int32_t ended = wait_op(r.agent, op, NULL);
    CHECK(ended == KVT_ERR_REMOTE_DISCONNECT, "the pull ends REMOTE_DISCONNECT, not %s", kvt_status_name(ended));
    CHECK_OK(kvt_xfer_release(r.agent, op));
    close_vram_reader(&r);
}

static void vram_staged_pull_from_a_killed_source(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX between processes");
    on_fake_driver("1", staged_pull_from_a_killed_source);
}

/* A staging source answers only for bytes inside its live regions. An honest post is checked against its
 * metadata first, so these requests are forged: bytes wholly past the region's end, then across it. Each
 * pull ends NOT_FOUND with nothing landed, and the source goes on serving honest pulls. */
static void forged_requests_to_a_staging_source(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 83}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("vram-staged-forger", KVT_AGENT_VRAM_STAGED, &source, PULL_BYTES);
    vram_fill_pattern(r.local_vram, PULL_BYTES, 5);
    const uint64_t shifts[2] = {PULL_BYTES, PULL_BYTES - 2048};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(kvt_test_forge_staged_requests(r.agent, shifts[i]));
        uint64_t op = 0;
        CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, 4096, &op));
        int32_t ended = wait_op(r.agent, op, NULL);
        CHECK(ended == KVT_ERR_NOT_FOUND, "a request for bytes %llu past the piece ends NOT_FOUND, not %s",
              (unsigned long long)shifts[i], kvt_status_name(ended));
        CHECK_OK(kvt_xfer_release(r.agent, op));
        CHECK(holds_pattern(r.local_vram, PULL_BYTES, 0, 5), "nothing landed in the reader's vram");
    }
    CHECK_OK(kvt_test_forge_staged_requests(r.agent, 0));
    pull_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 83);
    close_vram_reader(&r);
    source_end(&source);
}

static void vram_staged_source_refuses_forged_requests(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX between processes");
    on_driver_under_test("1", forged_requests_to_a_staging_source);
}

/* Posts a staged READ of the first half of the source's region, cancels it once its request went to UCX, and
 * checks that it ends CANCELED with nothing of the source's bytes in the reader's memory. */
static void cancel_unanswered_pull(const vram_reader *reader, uint64_t seed) {
    const uint64_t half = PULL_BYTES / 2;
    uint64_t op = 0, asked = counter(reader->agent, KVT_COUNTER_REQUESTS_ISSUED);
    CHECK_OK(post_one(reader->agent, KVT_XFER_READ, reader->peer, reader->generation, reader->local, 0, reader->remote,
                      0, half, &op));
    wait_counter_at_least(reader->agent, KVT_COUNTER_REQUESTS_ISSUED, asked + 1);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(reader->agent, op));
    int32_t ended = wait_op(reader->agent, op, NULL);
    CHECK(ended == KVT_ERR_CANCELED, "the unanswered pull ends CANCELED, not %s", kvt_status_name(ended));
    CHECK_OK(kvt_xfer_release(reader->agent, op));
    CHECK(!holds_pattern(reader->local_vram, half, 0, seed), "nothing of the withdrawn region arrived");
}

/* A withdrawn region is never served: the source fences its serving worker when it deregisters (ucx_fence),
 * so requests sent with its old metadata reach nothing. A reader connected before, and one that connects
 * with that metadata only now (its request never leaves: the worker it names is gone), each cancel their
 * unanswered pull, and it ends CANCELED. */
static void staged_pull_of_a_withdrawn_region(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 83}, &source),
          "the source process starts");
    vram_reader connected = open_vram_reader("vram-staged-connected", KVT_AGENT_VRAM_STAGED, &source, PULL_BYTES);
    uint64_t op = 0;
    CHECK_OK(post_one(connected.agent, KVT_XFER_READ, connected.peer, connected.generation, connected.local,
                      PULL_BYTES / 2, connected.remote, PULL_BYTES / 2, PULL_BYTES / 2, &op));
    wait_completions_ok(connected.agent, 1, PULL_BYTES / 2, true);
    source_withdraw(&source);
    cancel_unanswered_pull(&connected, 83);
    vram_reader late = open_vram_reader("vram-staged-late", KVT_AGENT_VRAM_STAGED, &source, PULL_BYTES);
    cancel_unanswered_pull(&late, 83);
    close_vram_reader(&late);
    close_vram_reader(&connected);
    source_end(&source);
}

static void vram_staged_pull_of_a_withdrawn_region(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX between processes");
    on_driver_under_test("1", staged_pull_of_a_withdrawn_region);
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
    /* The table holds the gather's pieces, then the checksum's (the larger). */
    CUdeviceptr buffer = device_alloc(KERNEL_BYTES), table = device_alloc(KERNEL_PIECES * sizeof(kvt_checksum_piece));
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
        sums_of[p] = (kvt_checksum_piece){
            .address = pieces[p].destination, .bytes = pieces[p].bytes, .group = p % 4, .ordinal = p / 4};
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

/* kvt_mem_checksums(region, 4 pieces in 2 groups, at odd offsets, the last more than a tile) of `agent`. */
static kvt_status checksums_of(uint32_t agent, uint32_t region, uint64_t shift, uint64_t sums[2]) {
    const uint32_t zero[4] = {0, 0, 0, 0}, group[4] = {0, 1, 0, 1}, ordinal[4] = {0, 0, 1, 1};
    const uint64_t offset[4] = {3 + shift, 4096, 70001, 70400}, length[4] = {5000, 65536, 333, 180000};
    return kvt_mem_checksums(agent, 4, zero, offset, length, group, ordinal, 1, &region, 2, sums);
}

/* The fake's allocations: how many were made, how many are live. */
static void fake_allocations(unsigned long *made, int *live) {
    ((allocations_fn)(uintptr_t)fake_symbol("fake_cuda_allocations"))(made, live);
}

/* The same bytes in vram (the kernel) and in dram (the host) give the same sums, the host function's. */
static void sums_where_the_bytes_are(void) {
    unsigned long made = 0;
    int live_before = 0, live = 0;
    CHECK_OK(kvt_cuda_use_device("test_cuda", 0)); /* the driver loaded */
    if (!real_driver()) fake_allocations(&made, &live_before);
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
    if (!real_driver()) {
        uint32_t tiles = 0;
        uint64_t largest = 0;
        ((last_launch_fn)(uintptr_t)fake_symbol("fake_cuda_last_launch"))("kvt_block_checksum", &tiles, &largest);
        CHECK(tiles == 5 && largest == KVT_KERNEL_TILE_BYTES,
              "the piece above a tile was summed as two tiles, the others whole (%u tiles, the largest %llu bytes)",
              tiles, (unsigned long long)largest);
        uint64_t again[2] = {0, 0};
        unsigned long made_before_again = 0;
        fake_allocations(&made_before_again, &live);
        CHECK_OK(checksums_of(agent, on_gpu, 0, again));
        fake_allocations(&made, &live);
        CHECK(made == made_before_again && memcmp(again, gpu, sizeof gpu) == 0,
              "a second call allocates nothing (%lu allocations) and sums alike", made - made_before_again);
    }
    CHECK_OK(checksums_of(agent, on_host, 0, host));
    /* The pieces uncut: the sums of a piece cut into tiles are the whole piece's. */
    const kvt_checksum_piece pieces[4] = {
        {.address = (uint64_t)(uintptr_t)memory + 3, .bytes = 5000, .group = 0, .ordinal = 0},
        {.address = (uint64_t)(uintptr_t)memory + 4096, .bytes = 65536, .group = 1, .ordinal = 0},
        {.address = (uint64_t)(uintptr_t)memory + 70001, .bytes = 333, .group = 0, .ordinal = 1},
        {.address = (uint64_t)(uintptr_t)memory + 70400, .bytes = 180000, .group = 1, .ordinal = 1}};
    kvt_block_checksum_on_host(pieces, 4, expected);
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
    if (!real_driver()) {
        fake_allocations(&made, &live);
        CHECK(live == live_before, "the agent's checksum memory went with it (%d allocations live, %d before)", live,
              live_before);
    }
}

static void block_checksums(void) { on_driver_under_test("1", sums_where_the_bytes_are); }

TEST_MAIN("cuda", TEST(no_driver_library), TEST(driver_too_old), TEST(no_device), TEST(driver_fails),
          TEST(driver_and_devices), TEST(vram_banks), TEST(register_refusals), TEST(strict_driver),
          TEST(vram_pull_in_one_process), TEST(vram_pull_from_another_process), TEST(vram_pull_waits_for_its_stream),
          TEST(kernels), TEST(block_checksums), TEST(vram_source_outlives_a_killed_reader),
          TEST(vram_staged_pull_from_another_process), TEST(vram_staged_pull_waits_for_its_stream),
          TEST(vram_staged_pull_from_a_killed_source), TEST(vram_staged_source_refuses_forged_requests),
          TEST(vram_staged_pull_of_a_withdrawn_region))
