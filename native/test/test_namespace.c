/* A peer in another pid namespace (a pod next to this one, as `unshare --pid --fork --mount-proc`
 * starts it): it is a live peer, reached through its network address (its kvreuse-owned banks still mapped through
 * shared memory), read, written and verified; killed, its operations end with KVT_ERR_REMOTE_DISCONNECT — reported
 * by the transport, since its pid means nothing here. */
#include "cuda_pulls.h" /* register_planes */
#include "harness.h"

#include <signal.h>

#define LENGTH (8u << 20)
#define SEED 5u

typedef struct {
    source_process source;
    uint32_t reader, region, peer;
    uint8_t *memory;
    uint64_t generation;
} namespace_pair;

/* Starts a source in a new pid namespace (and a new IPC namespace with `own_ipc`) and loads it into a reader here;
 * false when skipped. */
static bool pair_open_in(namespace_pair *p, bool caller_memory, bool own_ipc) {
    source_options options = {.length = LENGTH,
                              .caller_memory = caller_memory,
                              .new_pid_namespace = true,
                              .new_ipc_namespace = own_ipc,
                              .seed = SEED};
    if (!source_spawn(&options, &p->source)) return false;
    p->reader = make_agent("root-namespace-reader");
    p->region = alloc_region(p->reader, LENGTH, &p->memory);
    CHECK_OK(kvt_peer_load(p->reader, p->source.blob, p->source.length, &p->peer, &p->generation));
    return true;
}

static bool pair_open(namespace_pair *p, bool caller_memory) { return pair_open_in(p, caller_memory, false); }

static void pair_close(namespace_pair *p) {
    source_end(&p->source);
    CHECK_OK(kvt_peer_unload(p->reader, p->peer));
    free_region(p->reader, p->region, p->memory);
    CHECK_OK(kvt_agent_destroy(p->reader));
}

static void read_and_verify(const namespace_pair *p) {
    memset(p->memory, 0, LENGTH);
    uint64_t op;
    CHECK_OK(post_one(p->reader, KVT_XFER_READ, p->peer, p->generation, p->region, 0, 1, 0, LENGTH, &op));
    CHECK(wait_op(p->reader, op, NULL) == KVT_OK, "the read from the other namespace ended OK");
    CHECK_OK(kvt_xfer_release(p->reader, op));
    CHECK(check_pattern(p->memory, LENGTH, SEED), "the bytes read are the source's");
}

#define REACHED "in another pid namespace, reached through its network address"

/* The default transports: kvreuse-owned memory is mapped through shared memory and read directly. */
static void another_namespace_read_through_shared_memory(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    namespace_pair p;
    if (!pair_open(&p, false)) return;
    CHECK(peer_transport_mentions(p.reader, p.peer, REACHED), "the peer is reached through its network address");
    CHECK(peer_transport_mentions(p.reader, p.peer, "mapped through shared memory"), "the region is mapped here");
    read_and_verify(&p);
    pair_close(&p);
}

/* A container's process (its own pid and IPC namespaces): shared memory cannot map its banks across IPC namespaces,
 * so they are read through UCX requests to its network address, and verified. */
static void a_container_with_its_own_ipc_namespace_is_read_over_the_network(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    namespace_pair p;
    if (!pair_open_in(&p, false, true)) return;
    CHECK(peer_transport_mentions(p.reader, p.peer, REACHED), "the peer is reached through its network address");
    CHECK(peer_transport_mentions(p.reader, p.peer, "gets and puts through UCX"), "its bank is not mapped here");
    read_and_verify(&p);
    pair_close(&p);
}

/* The default transports and caller memory: UCX requests through the peer's network address, whose answers come
 * back (over shared memory UCX 1.13 delivered none: a read never completed). A WRITE of the whole region, read back. */
static void caller_memory_in_another_namespace_moves_over_the_network(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    namespace_pair p;
    if (!pair_open(&p, true)) return;
    CHECK(peer_transport_mentions(p.reader, p.peer, REACHED), "the peer is reached through its network address");
    CHECK(peer_transport_mentions(p.reader, p.peer, "gets and puts through UCX"),
          "the region is read through UCX requests");
    read_and_verify(&p);
    fill_pattern(p.memory, LENGTH, SEED + 1);
    uint64_t op;
    CHECK_OK(post_one(p.reader, KVT_XFER_WRITE, p.peer, p.generation, p.region, 0, 1, 0, LENGTH, &op));
    CHECK(wait_op(p.reader, op, NULL) == KVT_OK, "the WRITE into the other namespace ended OK");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    memset(p.memory, 0, LENGTH);
    CHECK_OK(post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.region, 0, 1, 0, LENGTH, &op));
    CHECK(wait_op(p.reader, op, NULL) == KVT_OK, "the read back ended OK");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK(check_pattern(p.memory, LENGTH, SEED + 1), "the bytes read back are those written");
    pair_close(&p);
}

/* A peer the pid check cannot judge: a read the stopped source cannot serve is in flight when the source is killed;
 * the transport's error ends it, and the peer is disconnected. Caller memory with the default transports (through the
 * peer's network address); kvreuse-owned memory over tcp alone (else it is mapped and copied directly). */
static void killed_in_another_namespace(bool caller_memory) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    if (!caller_memory) setenv("UCX_TLS", "tcp", 1);
    namespace_pair p;
    bool opened = pair_open(&p, caller_memory);
    unsetenv("UCX_TLS");
    if (!opened) return;
    CHECK(peer_transport_mentions(p.reader, p.peer, "gets and puts through UCX"),
          "the region is read through UCX requests");
    read_and_verify(&p);

    source_signal(&p.source, SIGSTOP);
    source_wait_stopped(&p.source);
    uint64_t op;
    CHECK_OK(post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.region, 0, 1, 0, LENGTH, &op));
    wait_counter_at_least(p.reader, KVT_COUNTER_INFLIGHT_REQUESTS, 1); /* a request to the stopped source */
    source_signal(&p.source, SIGKILL);
    int32_t status = wait_op(p.reader, op, NULL);
    CHECK(status == KVT_ERR_REMOTE_DISCONNECT, "the read from the killed source ended %s, expected REMOTE_DISCONNECT",
          kvt_status_name(status));
    CHECK_OK(kvt_xfer_release(p.reader, op));
    uint32_t state;
    CHECK_OK(kvt_peer_info(p.reader, p.peer, NULL, &state, NULL));
    CHECK(state == KVT_PEER_DISCONNECTED, "the peer shows as disconnected (state %u)", state);
    CHECK(peer_transport_mentions(p.reader, p.peer, "is closed"), "the failed endpoint was closed");
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT,
                 post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.region, 0, 1, 0, LENGTH, &op));
    pair_close(&p);
}

/* UCX held to shared memory on both sides (UCX_TLS=sm,self): no network address, so the peer is reached over shared
 * memory, from which UCX 1.13 brings nothing back (the path to it says so). Its bank is mapped and read directly; a
 * READ or WRITE of its caller memory, and a template post of it, which would move through UCX requests that could
 * never complete, are refused at post, saying why. */
static void without_a_network_requests_to_another_namespace_are_refused(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    for (int caller_memory = 0; caller_memory < 2; caller_memory++) {
        setenv("UCX_TLS", "sm,self", 1);
        namespace_pair p;
        bool opened = pair_open(&p, caller_memory);
        unsetenv("UCX_TLS");
        if (!opened) return;
        CHECK(!peer_transport_mentions(p.reader, p.peer, REACHED), "no network address to reach the peer by");
        CHECK(peer_transport_mentions(p.reader, p.peer, "UCX brings nothing back from it"), "the path says why");
        if (!caller_memory) {
            read_and_verify(&p);
        } else {
            const uint32_t directions[2] = {KVT_XFER_READ, KVT_XFER_WRITE};
            for (int i = 0; i < 2; i++) {
                uint64_t op;
                CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                             post_one(p.reader, directions[i], p.peer, p.generation, p.region, 0, 1, 0, LENGTH, &op));
                CHECK_DETAIL("is not mapped here, so it moves through UCX requests, and UCX brings nothing back");
            }
            uint32_t template_id = 0, block = 0;
            CHECK_OK(register_planes(p.reader, p.peer, p.generation, p.region, 1, &template_id));
            uint64_t op;
            CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                         kvt_xfer_post_blocks(p.reader, template_id, KVT_XFER_READ, 1, &block, &block, NULL, 0, &op));
            CHECK_DETAIL("kvt_xfer_post_blocks: region 1 of peer 'source-process' is not mapped here");
            CHECK_OK(kvt_template_release(p.reader, template_id));
        }
        pair_close(&p);
    }
}

/* The default transports and caller memory: UCX requests through the peer's network address. With the source
 * stopped they cannot finish; a cancel ends the read all the same (its endpoint force-closed), and the memory
 * deregisters. */
static void cancel_a_read_from_a_stopped_source_in_another_namespace(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    namespace_pair p;
    if (!pair_open(&p, true)) return;
    {
        char d[16384];
        uint32_t n = 0;
        kvt_peer_transport(p.reader, p.peer, d, sizeof d, &n);
        fprintf(stderr, "%s\n", d);
    }
    CHECK(peer_transport_mentions(p.reader, p.peer, "gets and puts through UCX"),
          "the region is read through UCX requests");
    source_signal(&p.source, SIGSTOP);
    source_wait_stopped(&p.source);
    uint64_t op;
    CHECK_OK(post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.region, 0, 1, 0, LENGTH, &op));
    wait_counter_at_least(p.reader, KVT_COUNTER_INFLIGHT_REQUESTS, 1); /* a request to the stopped source */
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(p.reader, op));
    int32_t status = wait_op(p.reader, op, NULL);
    CHECK(status == KVT_ERR_CANCELED, "the cancelled read ended %s, expected CANCELED", kvt_status_name(status));
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK_OK(kvt_mem_deregister(p.reader, p.region));
    CHECK_OK(kvt_mem_register(p.reader, (uint64_t)(uintptr_t)p.memory, LENGTH, KVT_MEM_DRAM, 0, &p.region));
    pair_close(&p);
}

static void killed_in_another_namespace_kvreuse_memory(void) { killed_in_another_namespace(false); }
static void killed_in_another_namespace_caller_memory(void) { killed_in_another_namespace(true); }

TEST_MAIN("namespace", TEST(another_namespace_read_through_shared_memory),
          TEST(caller_memory_in_another_namespace_moves_over_the_network),
          TEST(a_container_with_its_own_ipc_namespace_is_read_over_the_network),
          TEST(without_a_network_requests_to_another_namespace_are_refused),
          TEST(cancel_a_read_from_a_stopped_source_in_another_namespace),
          TEST(killed_in_another_namespace_kvreuse_memory), TEST(killed_in_another_namespace_caller_memory))
