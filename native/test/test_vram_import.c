/* Another process's vram served by this one: kvt_mem_open_vram_ipc opens an engine's CUDA IPC handle, its
 * regions export the engine's handle (the opened mapping cannot be exported again), a reader in a third
 * process pulls the engine's bytes through them, and kvt_mem_free closes the mapping. The case runs in a
 * child process over the fake CUDA driver of test/fake_cuda/ (which isolates the layer above the driver and
 * never stands for a run on a GPU), or with KVT_TEST_CUDA_REAL=1 (tools/gpu-check) on the machine's own
 * driver, where the fake's count of open handles is not asked. */
#include "cuda_pulls.h"
#include "harness.h"
#include "services/cuda_driver.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ALLOCATION_BYTES = 3 << 16, REGION_OFFSET = 4096, REGION_BYTES = 1 << 16, SEED = 71 };

/* The engine: allocates vram, fills [REGION_OFFSET, +REGION_BYTES) with the pattern, sends its IPC handle up
 * and waits to be killed. Forked before the parent uses the driver (CUDA does not survive a fork). */
static void __attribute__((noreturn)) run_engine(int up) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint32_t agent = make_agent("engine");
    uint64_t vram = 0;
    CHECK_OK(kvt_mem_alloc_vram(agent, 0, ALLOCATION_BYTES, &vram));
    vram_fill_pattern(vram + REGION_OFFSET, REGION_BYTES, SEED);
    uint8_t handle[KVT_VRAM_IPC_HANDLE_BYTES];
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_mem_vram_ipc_handle(agent, vram + 4096, handle));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_vram_ipc_handle(agent, vram, NULL));
    CHECK_OK(kvt_mem_vram_ipc_handle(agent, vram, handle));
    CHECK(write(up, handle, sizeof handle) == (ssize_t)sizeof handle, "the handle sent");
    for (;;) pause();
}

/* The reader: loads the sidecar's metadata, pulls its region and checks the bytes are the engine's. */
static void __attribute__((noreturn)) run_reader(int down, int up) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint64_t length = 0;
    uint8_t *blob = receive_metadata(down, &length);
    uint32_t reader = make_agent("imported-reader"), local = 0, peer = 0, remote = 0, regions = 0;
    uint64_t local_vram = 0, generation = 0, op = 0;
    CHECK_OK(kvt_mem_alloc_vram(reader, 0, REGION_BYTES, &local_vram));
    CHECK_OK(kvt_mem_register(reader, local_vram, REGION_BYTES, KVT_MEM_VRAM, 0, &local));
    CHECK_OK(kvt_peer_load(reader, blob, length, &peer, &generation));
    CHECK_OK(kvt_peer_regions(reader, peer, 1, &remote, NULL, NULL, NULL, NULL, &regions));
    CHECK_OK(post_one(reader, KVT_XFER_READ, peer, generation, local, 0, remote, 0, REGION_BYTES, &op));
    wait_completions_ok(reader, 1, REGION_BYTES, true);
    CHECK(holds_pattern(local_vram, REGION_BYTES, 0, SEED),
          "the pulled bytes are the engine's, at the region's offset in its allocation");
    CHECK_OK(kvt_peer_unload(reader, peer));
    CHECK_OK(kvt_mem_deregister(reader, local));
    CHECK_OK(kvt_mem_free(reader, local_vram));
    CHECK_OK(kvt_agent_destroy(reader));
    free(blob);
    CHECK(write(up, "x", 1) == 1, "pulled");
    fflush(NULL);
    _exit(0);
}

/* What kvt_mem_open_vram_ipc refuses, leaving nothing open: a handle of this process's own allocation
 * included (the driver refuses it, as the real one does). */
static void refusals(uint32_t agent) {
    uint8_t handle[KVT_VRAM_IPC_HANDLE_BYTES] = {0};
    uint64_t address = 0, length = 0, own = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_open_vram_ipc(agent, 0, NULL, &address, &length));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_open_vram_ipc(agent, 7, handle, &address, &length));
    CHECK_DETAIL("there is no GPU 7");
    CHECK_STATUS(KVT_ERR_BACKEND, kvt_mem_open_vram_ipc(agent, 0, handle, &address, &length));
    CHECK_DETAIL("cannot be opened");
    CHECK_OK(kvt_mem_alloc_vram(agent, 0, 4096, &own));
    CHECK_OK(kvt_mem_vram_ipc_handle(agent, own, handle));
    CHECK_STATUS(KVT_ERR_BACKEND, kvt_mem_open_vram_ipc(agent, 0, handle, &address, &length));
    CHECK_OK(kvt_mem_free(agent, own));
    CHECK(open_handles() <= 0 && address == 0 && length == 0, "a refusal opens nothing");
}

/* Sends the agent's metadata to the reader and waits for its pull. */
static void serve_reader(uint32_t agent, pid_t reader, int down, int up) {
    send_metadata(agent, down);
    char pulled = 0;
    CHECK(read(up, &pulled, 1) == 1 && pulled == 'x', "the reader pulled the engine's bytes");
    int status = 0;
    CHECK(waitpid(reader, &status, 0) == reader && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the reader ended");
}

/* This process is the sidecar: it opens the engine's handle, serves a region inside it (to a reader process
 * on UCX), and once the engine is killed deregisters and closes the mapping. */
static void sidecar(void) {
    bool with_reader = test_backend == KVT_BACKEND_UCX; /* loopback peers live in one process */
    int engine_up[2], down[2], up[2];
    CHECK(pipe(engine_up) == 0 && pipe(down) == 0 && pipe(up) == 0, "pipe");
    fflush(NULL);
    pid_t engine = fork();
    CHECK(engine >= 0, "fork");
    if (engine == 0) run_engine(engine_up[1]);
    pid_t reader = with_reader ? fork() : 0;
    CHECK(reader >= 0, "fork");
    if (with_reader && reader == 0) run_reader(down[0], up[1]);
    CUipcMemHandle handle;
    CHECK(read(engine_up[0], &handle, sizeof handle) == (ssize_t)sizeof handle, "the engine's handle");
    uint32_t agent = make_agent("sidecar"), region = 0;
    refusals(agent);
    uint64_t address = 0, length = 0;
    CHECK_OK(kvt_mem_open_vram_ipc(agent, 0, (const uint8_t *)&handle, &address, &length));
    CHECK(length >= ALLOCATION_BYTES && (open_handles() < 0 || open_handles() == 1),
          "the engine's whole allocation is mapped here (a driver may round its size up)");
    uint8_t again[KVT_VRAM_IPC_HANDLE_BYTES];
    CHECK_OK(kvt_mem_vram_ipc_handle(agent, address, again));
    CHECK(memcmp(again, &handle, sizeof again) == 0, "the mapping's handle is the engine's");
    CHECK(holds_pattern(address + REGION_OFFSET, REGION_BYTES, 0, SEED), "the mapping holds the engine's bytes");
    CHECK_OK(kvt_mem_register(agent, address + REGION_OFFSET, REGION_BYTES, KVT_MEM_VRAM, 0, &region));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_mem_free(agent, address));
    if (with_reader) serve_reader(agent, reader, down[1], up[0]);
    CHECK(kill(engine, SIGKILL) == 0 && waitpid(engine, NULL, 0) == engine, "the engine killed");
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent)); /* the free's close runs on the progress thread: done before this returns */
    CHECK(open_handles() <= 0, "freeing closed the mapping");
}

static void engine_memory_served(void) {
    const char *fake = getenv("KVT_TEST_FAKE_CUDA");
    if (!real_driver() && (!fake || !fake[0])) {
        test_skip_reason = "the fake CUDA driver was not built (make test builds it)";
        return;
    }
    /* On a real driver, the machine's own: nothing to name. */
    const char *variables[] = {"KVT_CUDA_LIBRARY", real_driver() ? NULL : fake, "FAKE_CUDA_DEVICES",
                               real_driver() ? NULL : "1", NULL};
    run_in_child(variables, sidecar);
}

TEST_MAIN("vram_import", TEST(engine_memory_served))
