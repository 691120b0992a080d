/* A peer process that dies: operations against it end with KVT_ERR_REMOTE_DISCONNECT (or complete,
 * when they finished first) and never hang. The source runs in a forked child that is SIGKILLed. */
#include "harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int to_child;
    uint8_t *blob;
    uint64_t length;
} child_source;

/* Forks a process whose agent registers `length` bytes (from kvt_mem_alloc, or malloc when
 * `caller_memory`) and sends its metadata back; it then waits to be killed. */
static child_source spawn_source(uint64_t length, bool caller_memory) {
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        uint32_t agent = make_agent("doomed-source");
        uint64_t address = 0;
        if (caller_memory)
            address = (uint64_t)(uintptr_t)calloc(1, length);
        else
            CHECK_OK(kvt_mem_alloc(agent, length, 0, &address));
        fill_pattern((uint8_t *)(uintptr_t)address, length, 21);
        uint32_t region;
        CHECK_OK(kvt_mem_register(agent, address, length, KVT_MEM_DRAM, 0, &region));
        uint64_t blob_length = 0;
        CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &blob_length));
        uint8_t *blob = malloc(blob_length);
        CHECK_OK(kvt_agent_metadata(agent, blob, blob_length, &blob_length));
        CHECK(write(up[1], &blob_length, sizeof blob_length) == sizeof blob_length, "write");
        CHECK(write(up[1], blob, blob_length) == (ssize_t)blob_length, "write");
        char byte;
        while (read(down[0], &byte, 1) != 0) { /* until the parent kills us */
        }
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    child_source child = {.pid = pid, .to_child = down[1]};
    CHECK(read(up[0], &child.length, sizeof child.length) == sizeof child.length, "read blob length");
    child.blob = malloc(child.length);
    for (uint64_t got = 0; got < child.length;) {
        ssize_t n = read(up[0], child.blob + got, child.length - got);
        CHECK(n > 0, "read blob");
        got += (uint64_t)n;
    }
    close(up[0]);
    return child;
}

static void kill_source(child_source *child) {
    kill(child->pid, SIGKILL);
    waitpid(child->pid, NULL, 0);
    close(child->to_child);
}

static void read_from_a_killed_source(bool caller_memory) {
    uint64_t length = 8u << 20;
    child_source child = spawn_source(length, caller_memory);
    uint32_t reader = make_agent("survivor");
    uint8_t *memory;
    uint32_t region = alloc_region(reader, length, &memory);
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(reader, child.blob, child.length, &peer, &generation));
    const uint32_t remote_region = 1; /* the child's first and only region */

    /* A pull racing the kill ends one way or the other, never hangs. */
    uint64_t op;
    CHECK_OK(post_one(reader, KVT_XFER_READ, peer, generation, region, 0, remote_region, 0, length, &op));
    kill_source(&child);
    int32_t status = wait_op(reader, op, NULL);
    CHECK(status == KVT_OK || status == KVT_ERR_REMOTE_DISCONNECT, "racing pull ended with %s",
          kvt_status_name(status));
    CHECK_OK(kvt_xfer_release(reader, op));

    /* After the kill, every pull ends with REMOTE_DISCONNECT (posts may already be refused). */
    for (int i = 0; i < 2; i++) {
        kvt_status posted = post_one(reader, KVT_XFER_READ, peer, generation, region, 0, remote_region, 0, length, &op);
        if (posted == KVT_ERR_REMOTE_DISCONNECT) continue;
        CHECK_OK(posted);
        CHECK(wait_op(reader, op, NULL) == KVT_ERR_REMOTE_DISCONNECT, "pull from a dead source");
        CHECK_OK(kvt_xfer_release(reader, op));
    }
    uint32_t state;
    CHECK_OK(kvt_peer_info(reader, peer, NULL, &state, NULL));
    CHECK(state == KVT_PEER_DISCONNECTED, "the peer shows as disconnected (state %u)", state);
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_notify_send(reader, peer, generation, (const uint8_t *)"x", 1));
    /* Loading the dead process's metadata again is refused. */
    CHECK_OK(kvt_peer_unload(reader, peer));
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_peer_load(reader, child.blob, child.length, &peer, &generation));
    CHECK_DETAIL("is gone");
    free(child.blob);
    free_region(reader, region, memory);
    CHECK_OK(kvt_agent_destroy(reader));
}

static void killed_source_with_kvreuse_memory(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process (test_xfer covers a destroyed source)");
    read_from_a_killed_source(false);
}

static void killed_source_with_caller_memory(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process (test_xfer covers a destroyed source)");
    read_from_a_killed_source(true);
}

TEST_MAIN("disconnect", TEST(killed_source_with_kvreuse_memory), TEST(killed_source_with_caller_memory))
