/* Owner safety against stale readers (UCX): a reader keeps reading or writing through the remote key of
 * metadata it loaded while the owner deregisters, unmaps and maps new memory at the same address. UCX 1.13
 * answers software gets and puts (caller memory; everything over tcp) at whatever address the request
 * names, so without the owner's fence this crashed the owner (a read of unmapped memory) or overwrote
 * its new memory (a write). Each ordering is forced: the reader's request waiting at the owner while it
 * deregisters (the owner's serving worker held), and the request issued only after (the reader's issue
 * paused), over shared memory and over tcp. */
#include "agent.h" /* kvt_test_hold_serving */
#include "harness.h"

#include <sys/mman.h>

#define LENGTH (1u << 20) /* one UCX request */
#define OLD_SEED 41u
#define NEW_SEED 42u

typedef enum { OVER_SHARED_MEMORY, OVER_TCP } transport;
typedef enum { WITHDRAW_UNMAPS, WITHDRAW_REMAPS } withdrawal;

typedef struct {
    transport over;
    uint32_t owner, reader, owner_region, local_region, peer;
    uint64_t generation;
    uint8_t *owner_memory, *local_memory;
} stale_pair;

/* The reader reads the owner's region whole, and finds the pattern of `seed`. */
static void reader_reads(stale_pair *p, uint64_t seed) {
    uint64_t op;
    CHECK_OK(post_one(p->reader, KVT_XFER_READ, p->peer, p->generation, p->local_region, 0, p->owner_region, 0, LENGTH,
                      &op));
    CHECK(wait_op(p->reader, op, NULL) == KVT_OK, "a read of the owner's region");
    CHECK_OK(kvt_xfer_release(p->reader, op));
    CHECK(check_pattern(p->local_memory, LENGTH, seed), "the read found the pattern of seed %llu",
          (unsigned long long)seed);
}

/* The owner registers caller memory (served through UCX's software path on either transport); the
 * reader loads its metadata and reads it once, so the connection is wired up. */
static void pair_open(stale_pair *p, transport over) {
    *p = (stale_pair){.over = over};
    if (over == OVER_TCP) setenv("UCX_TLS", "tcp", 1);
    p->owner = make_agent("stale-owner");
    p->reader = make_agent("stale-reader");
    unsetenv("UCX_TLS");
    p->owner_memory = mmap(NULL, LENGTH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p->owner_memory != MAP_FAILED, "mmap");
    fill_pattern(p->owner_memory, LENGTH, OLD_SEED);
    CHECK_OK(
        kvt_mem_register(p->owner, (uint64_t)(uintptr_t)p->owner_memory, LENGTH, KVT_MEM_DRAM, 0, &p->owner_region));
    p->local_region = alloc_region(p->reader, LENGTH, &p->local_memory);
    p->peer = load_peer(p->reader, p->owner, &p->generation);
    CHECK(!peer_transport_mentions(p->reader, p->peer, "mapped through shared memory"),
          "caller memory goes through UCX requests");
    reader_reads(p, OLD_SEED);
}

/* The owner withdraws its memory: deregisters it, unmaps it and — for a write to land on — maps new
 * memory with new content at the same address. */
static void owner_withdraws(stale_pair *p, withdrawal how) {
    CHECK_OK(kvt_mem_deregister(p->owner, p->owner_region));
    CHECK(munmap(p->owner_memory, LENGTH) == 0, "munmap");
    if (how == WITHDRAW_UNMAPS) {
        p->owner_memory = NULL;
        return;
    }
    uint8_t *again =
        mmap(p->owner_memory, LENGTH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(again == p->owner_memory, "new memory at the old address");
    fill_pattern(again, LENGTH, NEW_SEED);
}

typedef struct {
    uint32_t agent, peer;
} peer_wait;

static bool peer_disconnected(void *context) {
    const peer_wait *wait = context;
    uint32_t state = 0;
    CHECK_OK(kvt_peer_info(wait->agent, wait->peer, NULL, &state, NULL));
    return state == KVT_PEER_DISCONNECTED;
}

/* How the stale operation ends: over tcp the owner's fence resets the connection; over shared memory
 * nothing answers it, and the reader's cancel ends it. */
static void stale_op_ends(stale_pair *p, uint64_t op) {
    if (p->over == OVER_TCP) {
        int32_t status = wait_op(p->reader, op, NULL);
        CHECK(status == KVT_ERR_REMOTE_DISCONNECT, "the stale operation ended %s, not REMOTE_DISCONNECT",
              kvt_status_name(status));
    } else {
        CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(p->reader, op));
        int32_t status = wait_op(p->reader, op, NULL);
        CHECK(status == KVT_ERR_CANCELED, "the stale operation ended %s, not CANCELED", kvt_status_name(status));
    }
    CHECK_OK(kvt_xfer_release(p->reader, op));
}

/* The owner is whole and serves again: its new memory holds what it wrote there, and a reader that
 * reloads the owner's metadata reads it. */
static void owner_serves_again(stale_pair *p) {
    if (!p->owner_memory) {
        p->owner_memory = mmap(NULL, LENGTH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p->owner_memory != MAP_FAILED, "mmap");
        fill_pattern(p->owner_memory, LENGTH, NEW_SEED);
    }
    CHECK(check_pattern(p->owner_memory, LENGTH, NEW_SEED), "the owner's new memory is untouched");
    CHECK_OK(
        kvt_mem_register(p->owner, (uint64_t)(uintptr_t)p->owner_memory, LENGTH, KVT_MEM_DRAM, 0, &p->owner_region));
    uint32_t peer = load_peer(p->reader, p->owner, &p->generation);
    CHECK(peer == p->peer, "the same peer, reloaded");
    reader_reads(p, NEW_SEED);
}

static void pair_close(stale_pair *p) {
    CHECK_OK(kvt_peer_unload(p->reader, p->peer));
    free_region(p->reader, p->local_region, p->local_memory);
    CHECK_OK(kvt_mem_deregister(p->owner, p->owner_region));
    munmap(p->owner_memory, LENGTH);
    CHECK_OK(kvt_agent_destroy(p->reader));
    CHECK_OK(kvt_agent_destroy(p->owner));
}

/* The reader's request has reached the owner, unanswered (the owner's serving worker is held), when the
 * owner deregisters; the owner then unmaps or remaps the memory and serves again. */
static void request_waiting_at_the_owner(transport over, uint32_t direction, withdrawal how) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback reads check the owner's live regions under its lock (test_xfer)");
    stale_pair p;
    pair_open(&p, over);
    uint64_t issued = counter(p.reader, KVT_COUNTER_REQUESTS_ISSUED), op;
    CHECK_OK(kvt_test_hold_serving(p.owner, true));
    CHECK_OK(post_one(p.reader, direction, p.peer, p.generation, p.local_region, 0, p.owner_region, 0, LENGTH, &op));
    wait_counter_at_least(p.reader, KVT_COUNTER_REQUESTS_ISSUED, issued + 1);
    owner_withdraws(&p, how);
    CHECK_OK(kvt_test_hold_serving(p.owner, false));
    stale_op_ends(&p, op);
    owner_serves_again(&p);
    pair_close(&p);
}

/* The reader posts before the owner deregisters but issues its request only after the owner withdrew
 * the memory (and, over tcp, after it saw the connection reset). */
static void request_issued_after_the_owner_withdrew(transport over, uint32_t direction, withdrawal how) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback reads check the owner's live regions under its lock (test_xfer)");
    stale_pair p;
    pair_open(&p, over);
    uint64_t issued = counter(p.reader, KVT_COUNTER_REQUESTS_ISSUED), op;
    CHECK_OK(kvt_fault_pause_issue(p.reader, 0));
    CHECK_OK(post_one(p.reader, direction, p.peer, p.generation, p.local_region, 0, p.owner_region, 0, LENGTH, &op));
    owner_withdraws(&p, how);
    if (over == OVER_TCP) {
        peer_wait wait = {.agent = p.reader, .peer = p.peer};
        wait_until(0, peer_disconnected, &wait, "the reader to see the owner's connection reset", WAIT_DEADLINE_MS);
    }
    CHECK_OK(kvt_fault_clear(p.reader));
    if (over == OVER_SHARED_MEMORY) wait_counter_at_least(p.reader, KVT_COUNTER_REQUESTS_ISSUED, issued + 1);
    stale_op_ends(&p, op);
    CHECK(counter(p.reader, KVT_COUNTER_REQUESTS_ISSUED) == issued + (over == OVER_SHARED_MEMORY ? 1u : 0u),
          "over shared memory the stale request went out; over tcp the reset connection refused it");
    owner_serves_again(&p);
    pair_close(&p);
}

/* Each ordering, with a read into memory the owner unmaps and a write into memory it maps anew, over each transport. */
#define STALE_CASES(X)                                                                                                 \
    X(read_waiting_at_an_owner_that_unmaps_over_shared_memory, request_waiting_at_the_owner, OVER_SHARED_MEMORY, READ) \
    X(read_waiting_at_an_owner_that_unmaps_over_tcp, request_waiting_at_the_owner, OVER_TCP, READ)                     \
    X(write_waiting_at_an_owner_that_remaps_over_shared_memory, request_waiting_at_the_owner, OVER_SHARED_MEMORY,      \
      WRITE)                                                                                                           \
    X(write_waiting_at_an_owner_that_remaps_over_tcp, request_waiting_at_the_owner, OVER_TCP, WRITE)                   \
    X(read_issued_after_an_unmap_over_shared_memory, request_issued_after_the_owner_withdrew, OVER_SHARED_MEMORY,      \
      READ)                                                                                                            \
    X(read_issued_after_an_unmap_over_tcp, request_issued_after_the_owner_withdrew, OVER_TCP, READ)                    \
    X(write_issued_after_a_remap_over_shared_memory, request_issued_after_the_owner_withdrew, OVER_SHARED_MEMORY,      \
      WRITE)                                                                                                           \
    X(write_issued_after_a_remap_over_tcp, request_issued_after_the_owner_withdrew, OVER_TCP, WRITE)
#define READ KVT_XFER_READ, WITHDRAW_UNMAPS
#define WRITE KVT_XFER_WRITE, WITHDRAW_REMAPS
#define DEFINE_CASE(name, scenario, over, ...)                                                                         \
    static void name(void) { scenario(over, __VA_ARGS__); }
STALE_CASES(DEFINE_CASE)
#define LIST_CASE(name, ...) TEST(name),

/* A bank the reader maps through shared memory (kvt_mem_alloc, same host) is copied by the reader itself:
 * after the owner freed it and allocated a new bank, a stale write lands in the old segment, which the
 * reader's mapping alone keeps alive, and never in the owner's new bank. */
static void mapped_bank_write_after_free_stays_in_the_old_segment(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "only UCX maps a peer's bank");
    uint32_t owner = make_agent("stale-bank-owner"), reader = make_agent("stale-bank-reader");
    uint8_t *bank, *local;
    uint32_t bank_region = alloc_region(owner, LENGTH, &bank), local_region = alloc_region(reader, LENGTH, &local);
    uint64_t generation;
    uint32_t peer = load_peer(reader, owner, &generation);
    CHECK(peer_transport_mentions(reader, peer, "mapped through shared memory"), "the bank is mapped");
    free_region(owner, bank_region, bank);
    uint8_t *fresh;
    uint32_t fresh_region = alloc_region(owner, LENGTH, &fresh);
    fill_pattern(fresh, LENGTH, NEW_SEED);
    fill_pattern(local, LENGTH, OLD_SEED);
    uint64_t op;
    CHECK_OK(post_one(reader, KVT_XFER_WRITE, peer, generation, local_region, 0, bank_region, 0, LENGTH, &op));
    CHECK(wait_op(reader, op, NULL) == KVT_OK, "the stale write went to the reader's mapping");
    CHECK_OK(kvt_xfer_release(reader, op));
    CHECK(check_pattern(fresh, LENGTH, NEW_SEED), "the owner's new bank is untouched");
    CHECK_OK(kvt_peer_unload(reader, peer));
    free_region(reader, local_region, local);
    free_region(owner, fresh_region, fresh);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(owner));
}

TEST_MAIN("stale_readers", STALE_CASES(LIST_CASE) TEST(mapped_bank_write_after_free_stays_in_the_old_segment))
