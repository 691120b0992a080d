/* A reader that moves a peer's vram through CUDA IPC checks the peer's liveness table, since the peer never sees the
 * move (vram_xfer.c): a region the peer withdrew before the launch moves nothing, READ or WRITE; one withdrawn while
 * the work ran ends the op NOT_FOUND with no byte counted, and a region still registered beside it moves; a reader
 * that cannot open the table is refused. The owner's free of its vram waits until no reader in another process has it
 * open, and its withdrawal until no reader's WRITE into it is in flight (vram_holds.c). Two regions of one allocation
 * share the reader's one mapping of it, as the driver gives it. Fake driver: its events are held, so that the
 * withdrawal comes while the work runs; the owner's free and the shared mapping also run on the machine's driver
 * (KVT_TEST_CUDA_REAL=1, tools/gpu-check). */
#include "cuda_pulls.h"
#include "services/util.h" /* kvt_crc32 */

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define HALF (PULL_BYTES / 2)

static uint64_t gathers(void) {
    return ((uint64_t(*)(const char *))(uintptr_t)fake_symbol("fake_cuda_launches"))("kvt_gather");
}

static void hold_events(int hold) { ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(hold); }

/* Posts a READ or WRITE between the reader's `local` at `local_offset` and the peer's `remote` at 0, of HALF bytes,
 * with metadata the peer has since outdated, and checks that it ends NOT_FOUND without a launch. */
static void stale_post_moves_nothing(uint32_t reader, uint32_t direction, uint32_t peer, uint64_t generation,
                                     uint32_t local, uint64_t local_offset, uint32_t remote) {
    uint64_t op = 0, launched = gathers(), bytes = 1;
    CHECK_OK(post_one(reader, direction, peer, generation, local, local_offset, remote, 0, HALF, &op));
    int32_t ended = wait_op(reader, op, &bytes);
    CHECK(ended == KVT_ERR_NOT_FOUND && bytes == 0,
          "a %s of a withdrawn region ends NOT_FOUND with 0 bytes, not %s (%llu)",
          direction == KVT_XFER_READ ? "READ" : "WRITE", kvt_status_name(ended), (unsigned long long)bytes);
    CHECK(gathers() == launched, "nothing was launched for it");
    CHECK_OK(kvt_xfer_release(reader, op));
}

/* Two agents of this process: two READs from two regions of the source run while the source withdraws the first.
 * The first ends NOT_FOUND, the second with its bytes; then a READ and a WRITE of the withdrawn region, with the
 * reader's metadata not reloaded, move nothing, and the source's memory keeps its bytes. */
static void withdrawn_in_one_process(void) {
    vram_pair pair = open_vram_pair(89, 0);
    uint64_t other_vram = 0, ops[2] = {0, 0}, bytes = 0;
    uint32_t other = 0;
    CHECK_OK(kvt_mem_alloc_vram(pair.source, 0, PULL_BYTES, &other_vram));
    vram_fill_pattern(other_vram, PULL_BYTES, 97);
    CHECK_OK(kvt_mem_register(pair.source, other_vram, PULL_BYTES, KVT_MEM_VRAM, 0, &other));
    uint32_t peer = load_peer(pair.reader, pair.source, &pair.generation);
    CHECK(peer == pair.peer, "the source is the same peer, at a new generation");
    wait_wired_up(pair.reader, peer); /* a new connection, to the worker the deregistration below fences */
    hold_events(1);
    unsigned long since = 0;
    CHECK_OK(
        post_one(pair.reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, 0, pair.remote, 0, HALF, &ops[0]));
    CHECK_OK(
        post_one(pair.reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, HALF, other, 0, HALF, &ops[1]));
    wait_until(pair.reader, queried_while_held, &since, "a held event to be asked", WAIT_DEADLINE_MS);
    CHECK_OK(kvt_mem_deregister(pair.source, pair.remote)); /* the reader's ops do not hold the source's region */
    hold_events(0);
    int32_t ended = wait_op(pair.reader, ops[0], &bytes);
    CHECK(ended == KVT_ERR_NOT_FOUND && bytes == 0,
          "the READ of the region withdrawn while it ran ends NOT_FOUND with 0 bytes, not %s (%llu)",
          kvt_status_name(ended), (unsigned long long)bytes);
    CHECK(wait_op(pair.reader, ops[1], &bytes) == KVT_OK && bytes == HALF, "the READ of the other region ends KVT_OK");
    CHECK(holds_pattern(pair.local_vram + HALF, HALF, 0, 97), "with the other region's bytes");
    for (int i = 0; i < 2; i++) CHECK_OK(kvt_xfer_release(pair.reader, ops[i]));

    stale_post_moves_nothing(pair.reader, KVT_XFER_READ, pair.peer, pair.generation, pair.local, 0, pair.remote);
    vram_fill_pattern(pair.local_vram, PULL_BYTES, 101);
    stale_post_moves_nothing(pair.reader, KVT_XFER_WRITE, pair.peer, pair.generation, pair.local, 0, pair.remote);
    CHECK(holds_pattern(pair.remote_vram, PULL_BYTES, 0, 89), "the WRITE left the withdrawn memory as it was");

    CHECK_OK(kvt_peer_unload(pair.reader, pair.peer));
    CHECK_OK(kvt_mem_deregister(pair.source, other));
    CHECK_OK(kvt_mem_free(pair.source, other_vram));
    CHECK_OK(kvt_mem_deregister(pair.reader, pair.local));
    CHECK_OK(kvt_mem_free(pair.reader, pair.local_vram));
    CHECK_OK(kvt_mem_free(pair.source, pair.remote_vram));
    CHECK_OK(kvt_agent_destroy(pair.reader));
    CHECK_OK(kvt_agent_destroy(pair.source));
}

static void ipc_move_of_a_region_withdrawn_in_this_process(void) { on_fake_driver("1", withdrawn_in_one_process); }

/* The source process withdraws its region while a READ through its IPC handle runs. A READ posted then moves
 * nothing and ends NOT_FOUND, while the handle stays open for the running one; that one ends NOT_FOUND with no
 * byte counted, and the handle is closed with it, not opened again by the next READ, which moves nothing. */
static void withdrawn_by_another_process(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 103}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("vram-withdrawn-reader", 0, &source, PULL_BYTES);
    wait_wired_up(r.agent, r.peer); /* before the source fences the worker it connected to */
    pull_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 103);
    CHECK(open_handles() == 1, "the pull opened the source's handle");
    hold_events(1);
    unsigned long since = 0;
    uint64_t op = 0, bytes = 0;
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, HALF, &op));
    wait_until(r.agent, queried_while_held, &since, "a held event to be asked", WAIT_DEADLINE_MS);
    source_withdraw(&source);
    stale_post_moves_nothing(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, HALF, r.remote);
    CHECK(open_handles() == 1, "the handle stays open while the running READ uses it");
    hold_events(0);
    int32_t ended = wait_op(r.agent, op, &bytes);
    CHECK(ended == KVT_ERR_NOT_FOUND && bytes == 0,
          "the READ of the region withdrawn while it ran ends NOT_FOUND with 0 bytes, not %s (%llu)",
          kvt_status_name(ended), (unsigned long long)bytes);
    CHECK_OK(kvt_xfer_release(r.agent, op));
    CHECK(open_handles() == 0, "the withdrawn region's handle was closed once no READ used it");
    unsigned long (*handles_opened)(void) = (unsigned long (*)(void))(uintptr_t)fake_symbol("fake_cuda_handles_opened");
    unsigned long opened = handles_opened();
    stale_post_moves_nothing(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote);
    CHECK(handles_opened() == opened, "and it was not opened again");
    close_vram_reader(&r);
    source_end(&source);
}

static void ipc_move_of_a_region_withdrawn_by_another_process(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_fake_driver("1", withdrawn_by_another_process);
}

/* The source process is pid 1 of a new pid namespace (a container beside this one): its /proc/<pid>/fd cannot be
 * named from here, so neither its liveness table nor its IPC handles are used: a READ of its vram moves host-staged
 * (through its network address), every byte checked, with no handle opened; a WRITE, which staging does not move, is
 * refused at post, saying why. */
static void source_in_another_pid_namespace(void) {
    source_process source;
    if (!source_spawn(
            &(source_options){.length = PULL_BYTES, .vram_memory = true, .new_pid_namespace = true, .seed = 107},
            &source))
        return;
    vram_reader r = open_vram_reader("vram-contained-reader", 0, &source, PULL_BYTES);
    pull_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 107);
    uint64_t op = 0;
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 post_one(r.agent, KVT_XFER_WRITE, r.peer, r.generation, r.local, 0, r.remote, 0, HALF, &op));
    CHECK_DETAIL("is in another pid namespace, so the move goes host-staged, but a host-staged move is a READ");
    CHECK(open_handles() == 0, "no IPC handle was opened");
    close_vram_reader(&r);
    source_end(&source);
}

static void a_source_in_another_pid_namespace_moves_host_staged(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_fake_driver("1", source_in_another_pid_namespace);
}

/* The same with UCX held to shared memory on both sides (UCX_TLS=sm,self): no network address to reach the source by,
 * and UCX 1.13 brings nothing back from it over shared memory, so a staged READ, which waits for its chunks, is
 * refused at post, saying why, instead of hanging until canceled. */
static void source_in_another_pid_namespace_without_a_network(void) {
    setenv("UCX_TLS", "sm,self", 1);
    source_process source;
    bool spawned = source_spawn(
        &(source_options){.length = PULL_BYTES, .vram_memory = true, .new_pid_namespace = true, .seed = 113}, &source);
    vram_reader r = spawned ? open_vram_reader("vram-unreachable-reader", 0, &source, PULL_BYTES) : (vram_reader){0};
    unsetenv("UCX_TLS");
    if (!spawned) return;
    uint64_t op = 0;
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                 post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, HALF, &op));
    CHECK_DETAIL("is in another pid namespace, so the move goes host-staged, but UCX brings nothing back from it");
    close_vram_reader(&r);
    source_end(&source);
}

static void a_source_in_another_pid_namespace_without_a_network_is_refused(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_fake_driver("1", source_in_another_pid_namespace_without_a_network);
}

/* Rewrites the liveness table's fd in a ucx metadata blob (the layout in metadata.c) and seals it again. */
static void forge_liveness_fd(uint8_t *blob, uint64_t length, uint32_t fd) {
    uint64_t at = 4 + 2 + 2 + 8 + 8;
    at += 2 + (blob[at] | (uint64_t)blob[at + 1] << 8); /* the name */
    for (int address = 0; address < 2; address++) {     /* the worker's address and its network address */
        uint32_t n = 0;
        memcpy(&n, blob + at, 4);
        at += 4 + n;
    }
    at += 8 + 16 + 8 + 8; /* pid, boot id, start time, pid namespace */
    CHECK(at + 4 <= length - 4, "the blob holds its liveness table's fd");
    memcpy(blob + at, &fd, 4);
    uint32_t crc = kvt_crc32(blob, length - 4);
    memcpy(blob + length - 4, &crc, 4);
}

/* A source in this pid namespace whose liveness table this process cannot open (its blob names an fd the source does
 * not have, as a table of another user's process would fail to open): a move through its IPC handles is refused at
 * post, saying why, with no handle opened. */
static void source_with_a_table_out_of_reach(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 109}, &source),
          "the source process starts");
    forge_liveness_fd(source.blob, source.length, 1u << 20);
    vram_reader r = open_vram_reader("vram-unchecked-reader", 0, &source, PULL_BYTES);
    const uint32_t directions[2] = {KVT_XFER_READ, KVT_XFER_WRITE};
    for (int i = 0; i < 2; i++) {
        uint64_t op = 0;
        CHECK_STATUS(KVT_ERR_NOT_SUPPORTED,
                     post_one(r.agent, directions[i], r.peer, r.generation, r.local, 0, r.remote, 0, HALF, &op));
        CHECK_DETAIL("has a liveness table this process cannot open");
    }
    CHECK(open_handles() == 0, "no IPC handle was opened");
    close_vram_reader(&r);
    source_end(&source);
}

static void ipc_needs_the_liveness_table(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_fake_driver("1", source_with_a_table_out_of_reach);
}

/* An idle reader (reader_fork): READs the owner's region through its IPC handle, says so, and lives on with the
 * peer loaded until killed. */
static void pull_then_idle(int down, int up, bool unused) {
    (void)unused;
    vram_reader r = reader_open(down, "vram-idle-reader", 0);
    uint64_t op = 0;
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, PULL_BYTES, &op));
    wait_completions_ok(r.agent, 1, PULL_BYTES, true);
    CHECK(holds_pattern(r.local_vram, PULL_BYTES, 0, 151), "the reader pulled the owner's bytes");
    CHECK(write(up, "p", 1) == 1, "pulled");
}

typedef struct {
    uint32_t agent;
    int live; /* the fake's live allocations before the free (-1 on a real driver, which does not tell) */
} owner_free;

static bool free_waits(void *context) {
    return counter(((const owner_free *)context)->agent, KVT_COUNTER_DEFERRED_VRAM_FREES) == 1;
}

static bool freed(void *context) {
    const owner_free *owner = context;
    return counter(owner->agent, KVT_COUNTER_DEFERRED_VRAM_FREES) == 0 &&
           (owner->live < 0 || live_allocations() == owner->live - 1);
}

/* The owner's vram region (pattern 151), pulled by `reader`, which is then stopped (all its threads: it cannot close
 * anything meanwhile) while the owner deregisters the region and frees the allocation. The free waits: the
 * allocation stays in the driver (the fake's count; a real driver is asked nothing). */
static owner_free free_while_held(uint32_t owner, const reader_process *reader) {
    uint64_t vram = 0;
    uint32_t region = 0;
    CHECK_OK(kvt_mem_alloc_vram(owner, 0, PULL_BYTES, &vram));
    vram_fill_pattern(vram, PULL_BYTES, 151);
    CHECK_OK(kvt_mem_register(owner, vram, PULL_BYTES, KVT_MEM_VRAM, 0, &region));
    send_metadata(owner, reader->down);
    reader_await(reader, 'p');
    CHECK(kill(reader->pid, SIGSTOP) == 0, "the reader stopped");
    process_wait_stopped(reader->pid);
    owner_free result = {.agent = owner, .live = live_allocations()};
    CHECK_OK(kvt_mem_deregister(owner, region));
    CHECK_OK(kvt_mem_free(owner, vram));
    wait_until(owner, free_waits, &result, "the free to wait for the reader", WAIT_DEADLINE_MS);
    CHECK(result.live < 0 || live_allocations() == result.live,
          "the allocation the reader has open is not freed under it");
    return result;
}

static bool shutdown_reported(void *context) {
    return kvt_agent_shutdown_status(*(const uint32_t *)context) != KVT_IN_PROGRESS;
}

/* The third reader stays stopped: the owner's shutdown frees the allocation at its deadline, saying so. Not on a real
 * driver, where that free under a reader is what CUDA leaves undefined. */
static void shutdown_frees_what_a_stopped_reader_holds(uint32_t owner, const reader_process *stuck) {
    owner_free waiting = free_while_held(owner, stuck);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_agent_shutdown(owner, 300));
    wait_until(0, shutdown_reported, &owner, "the owner's shutdown", WAIT_DEADLINE_MS);
    CHECK_STATUS(KVT_ERR_TIMEOUT, kvt_agent_shutdown_status(owner));
    CHECK_DETAIL("still had its vram");
    CHECK(live_allocations() == waiting.live - 1, "the shutdown freed the allocation at its deadline");
}

/* Readers hold the owner's vram in turn. Resumed, the first finds the region withdrawn and closes it, idle as it is,
 * and the free completes; the second is killed, which ends its hold, and the free completes. */
static void frees_wait_for_readers(void) {
    reader_process resumed = reader_fork(pull_then_idle, false), killed = reader_fork(pull_then_idle, false),
                   stuck = reader_fork(pull_then_idle, false);
    uint32_t owner = make_agent("vram-owner");
    owner_free waiting = free_while_held(owner, &resumed);
    CHECK(kill(resumed.pid, SIGCONT) == 0, "the reader resumed");
    wait_until(owner, freed, &waiting, "the free once the resumed reader closed the region", WAIT_DEADLINE_MS);
    waiting = free_while_held(owner, &killed);
    reader_end(&killed);
    wait_until(owner, freed, &waiting, "the free once the reader was killed", WAIT_DEADLINE_MS);
    if (!real_driver()) shutdown_frees_what_a_stopped_reader_holds(owner, &stuck);
    CHECK_OK(kvt_agent_destroy(owner));
    reader_end(&resumed);
    reader_end(&stuck);
}

/* Also on the machine's driver (KVT_TEST_CUDA_REAL=1, tools/gpu-check), without the fake's counts. */
static void an_owners_free_waits_for_its_readers(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_driver_under_test("1", frees_wait_for_readers);
}

/* In a reader process: reader_open, with the owner's two regions in `remotes`. */
static vram_reader reader_of_two(int down, const char *name, uint32_t remotes[2]) {
    vram_reader r = reader_open(down, name, 0);
    uint32_t regions = 0;
    CHECK_OK(kvt_peer_regions(r.agent, r.peer, 2, remotes, NULL, NULL, NULL, NULL, &regions));
    CHECK(regions == 2, "the owner has two regions (%u)", regions);
    return r;
}

/* The halves reader (reader_fork): READs both regions of the owner, the halves of one allocation, which the driver
 * maps once for both (one open per region, counted); says so; once the first is withdrawn, READs the second again and
 * finds the first withdrawn; says so, and stays idle. */
static void pull_halves_then_idle(int down, int up, bool unused) {
    (void)unused;
    uint32_t halves[2] = {0, 0};
    vram_reader r = reader_of_two(down, "vram-halves-reader", halves);
    uint64_t op = 0, bytes = 0;
    for (uint32_t i = 0; i < 2; i++) {
        CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, i * HALF, halves[i], 0, HALF, &op));
        CHECK(wait_op(r.agent, op, &bytes) == KVT_OK && bytes == HALF, "the READ of half %u ends KVT_OK", i);
        CHECK_OK(kvt_xfer_release(r.agent, op));
    }
    CHECK(holds_pattern(r.local_vram, PULL_BYTES, 0, 167), "the reader pulled both halves");
    CHECK(real_driver() || open_handles() == 1, "one mapping serves both halves (%d)", open_handles());
    CHECK(write(up, "p", 1) == 1, "pulled");
    char withdrawn = 0;
    CHECK(read(down, &withdrawn, 1) == 1 && withdrawn == 'w', "told the first half was withdrawn");
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, halves[0], 0, HALF, &op));
    int32_t ended = wait_op(r.agent, op, &bytes);
    CHECK(ended == KVT_ERR_NOT_FOUND && bytes == 0, "the READ of the withdrawn half ends NOT_FOUND, not %s (%llu)",
          kvt_status_name(ended), (unsigned long long)bytes);
    CHECK_OK(kvt_xfer_release(r.agent, op));
    vram_fill_pattern(r.local_vram, PULL_BYTES, 173);
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, HALF, halves[1], 0, HALF, &op));
    CHECK(wait_op(r.agent, op, &bytes) == KVT_OK && bytes == HALF, "the READ of the other half ends KVT_OK");
    CHECK(holds_pattern(r.local_vram + HALF, HALF, HALF, 167), "through the mapping the withdrawn half also had");
    CHECK_OK(kvt_xfer_release(r.agent, op));
    CHECK(write(up, "r", 1) == 1, "read again");
}

/* The owner registers the halves of one allocation; a reader process pulls both, then the second alone once the
 * first is withdrawn; the owner's free then waits for the reader to close what it has open of the second, and
 * completes. */
static void halves_of_one_allocation(void) {
    reader_process reader = reader_fork(pull_halves_then_idle, false);
    uint32_t owner = make_agent("vram-halves-owner"), halves[2] = {0, 0};
    uint64_t vram = 0;
    CHECK_OK(kvt_mem_alloc_vram(owner, 0, PULL_BYTES, &vram));
    vram_fill_pattern(vram, PULL_BYTES, 167);
    for (uint32_t i = 0; i < 2; i++)
        CHECK_OK(kvt_mem_register(owner, vram + i * HALF, HALF, KVT_MEM_VRAM, 0, &halves[i]));
    send_metadata(owner, reader.down);
    reader_await(&reader, 'p');
    CHECK_OK(kvt_mem_deregister(owner, halves[0]));
    CHECK(write(reader.down, "w", 1) == 1, "the reader told");
    reader_await(&reader, 'r');
    owner_free waiting = {.agent = owner, .live = live_allocations()};
    CHECK_OK(kvt_mem_deregister(owner, halves[1]));
    CHECK_OK(kvt_mem_free(owner, vram));
    wait_until(owner, freed, &waiting, "the free once the reader closed the second half", WAIT_DEADLINE_MS);
    CHECK_OK(kvt_agent_destroy(owner));
    reader_end(&reader);
}

/* Also on the machine's driver (KVT_TEST_CUDA_REAL=1, tools/gpu-check), whose opens of one handle share a mapping. */
static void halves_of_one_allocation_share_its_mapping(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_driver_under_test("1", halves_of_one_allocation);
}

/* The writer (reader_fork): WRITEs the first half of the owner's first region, its events held (the work stays in
 * flight), says so, and lets its events go when told (the region was withdrawn meanwhile: the WRITE ends NOT_FOUND,
 * its bytes landed); then WRITEs into the second region, held, says so, and stays. */
static void writes_held(int down, int up, bool unused) {
    (void)unused;
    uint32_t remotes[2] = {0, 0};
    vram_reader r = reader_of_two(down, "vram-writer", remotes);
    vram_fill_pattern(r.local_vram, PULL_BYTES, 157);
    held_queries_fn held_queries = (held_queries_fn)(uintptr_t)fake_symbol("fake_cuda_held_queries");
    for (int i = 0; i < 2; i++) {
        hold_events(1);
        unsigned long since = held_queries();
        uint64_t op = 0;
        CHECK_OK(post_one(r.agent, KVT_XFER_WRITE, r.peer, r.generation, r.local, 0, remotes[i], 0, HALF, &op));
        wait_until(r.agent, queried_while_held, &since, "the WRITE in flight", WAIT_DEADLINE_MS);
        CHECK(write(up, "w", 1) == 1, "in flight");
        if (i == 1) return;
        char go = 0;
        CHECK(read(down, &go, 1) == 1 && go == 'r', "told to let the WRITE end");
        hold_events(0);
        int32_t ended = wait_op(r.agent, op, NULL);
        CHECK(ended == KVT_ERR_NOT_FOUND, "the WRITE whose region was withdrawn while it ran ends NOT_FOUND, not %s",
              kvt_status_name(ended));
        CHECK(write(up, "d", 1) == 1, "ended");
    }
}

typedef struct {
    uint32_t agent, region;
    _Atomic bool returned;
    kvt_status status;
} deregistration;

static void *deregister_region(void *context) {
    deregistration *call = context;
    call->status = kvt_mem_deregister(call->agent, call->region);
    atomic_store(&call->returned, true);
    return NULL;
}

static bool awaiting_writes(void *context) {
    return counter(*(const uint32_t *)context, KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES) == 1;
}

/* The owner deregisters a region while a reader process's WRITE into it through CUDA IPC is in flight: the
 * deregistration waits until that WRITE's work completed (the reader lets its events go) and its bytes are there.
 * A reader stopped with its WRITE in flight delays a deregistration by 1 s at most. */
static void withdrawals_wait_for_writes(void) {
    reader_process writer = reader_fork(writes_held, false);
    uint32_t owner = make_agent("vram-written-owner"), regions[2] = {0, 0};
    uint64_t vram[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(kvt_mem_alloc_vram(owner, 0, PULL_BYTES, &vram[i]));
        vram_fill_pattern(vram[i], PULL_BYTES, 163);
        CHECK_OK(kvt_mem_register(owner, vram[i], PULL_BYTES, KVT_MEM_VRAM, 0, &regions[i]));
    }
    send_metadata(owner, writer.down);
    reader_await(&writer, 'w');
    deregistration call = {.agent = owner, .region = regions[0]};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, deregister_region, &call) == 0, "the deregistration's thread");
    wait_until(owner, awaiting_writes, &owner, "the deregistration to wait for the WRITE in flight", WAIT_DEADLINE_MS);
    CHECK(!atomic_load(&call.returned), "the deregistration waits while the reader's WRITE is in flight");
    CHECK(write(writer.down, "r", 1) == 1, "the reader told to let its WRITE end");
    reader_await(&writer, 'd');
    CHECK(pthread_join(thread, NULL) == 0 && call.status == KVT_OK, "the deregistration returned KVT_OK");
    CHECK(counter(owner, KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES) == 0, "it waits no more");
    CHECK(holds_pattern(vram[0], HALF, 0, 157), "the WRITE landed before it returned");
    reader_await(&writer, 'w');
    CHECK(kill(writer.pid, SIGSTOP) == 0, "the reader stopped with its WRITE in flight");
    process_wait_stopped(writer.pid);
    CHECK_OK(kvt_mem_deregister(owner, regions[1]));
    CHECK(counter(owner, KVT_COUNTER_WITHDRAWALS_AWAITING_WRITES) == 0, "the stopped reader was waited for no more");
    reader_end(&writer);
    for (int i = 0; i < 2; i++) CHECK_OK(kvt_mem_free(owner, vram[i]));
    CHECK_OK(kvt_agent_destroy(owner));
}

static void a_withdrawal_waits_for_the_writes_in_flight(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    on_fake_driver("1", withdrawals_wait_for_writes);
}

TEST_MAIN("vram_withdrawn", TEST(ipc_move_of_a_region_withdrawn_in_this_process),
          TEST(ipc_move_of_a_region_withdrawn_by_another_process),
          TEST(a_source_in_another_pid_namespace_moves_host_staged),
          TEST(a_source_in_another_pid_namespace_without_a_network_is_refused), TEST(ipc_needs_the_liveness_table),
          TEST(an_owners_free_waits_for_its_readers), TEST(halves_of_one_allocation_share_its_mapping),
          TEST(a_withdrawal_waits_for_the_writes_in_flight))
