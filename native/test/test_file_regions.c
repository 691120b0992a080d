/* File-backed caller memory (kvt_mem_register_fd): what registration refuses; on UCX, a reader on the same
 * host maps the file and copies READs itself (counted), WRITEs and readers that cannot open the owner's fds
 * go through UCX, and a withdrawal by the owner is forced before the copy, between the copy and the
 * liveness check (a test hook holds the reader there) and after the check: the first two fail NOT_FOUND
 * with no byte reported, the last one keeps the bytes read before. */
#include "file_regions.h" /* kvt_test_hold_file_check */
#include "harness.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define LENGTH (1u << 20)
#define OLD_SEED 51u
#define NEW_SEED 52u

static void refused(uint32_t agent, uint64_t address, uint64_t length, int fd, uint64_t offset, const char *why) {
    uint32_t region;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register_fd(agent, address, length, fd, offset, &region));
    CHECK_DETAIL(why);
}

#define CHECK_DETAIL_NAMES_THE_CALL()                                                                                  \
    CHECK(strncmp(kvt_last_error_detail(), "kvt_mem_register_fd: ", 21) == 0, "detail '%s' names another call",        \
          kvt_last_error_detail())

/* The refusals kvt_mem_register_fd shares with kvt_mem_register name the call the caller made. */
static void shared_refusals_name_kvt_mem_register_fd(void) {
    uint32_t agent = make_agent("file-shared-refusals");
    int fd;
    uint8_t *memory = file_memory_map(LENGTH, &fd);
    uint64_t address = (uint64_t)(uintptr_t)memory;
    uint32_t region;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register_fd(agent, address, LENGTH, fd, 0, NULL));
    CHECK_DETAIL_NAMES_THE_CALL();
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register_fd(agent, 0, LENGTH, fd, 0, &region));
    CHECK_DETAIL_NAMES_THE_CALL();
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register_fd(agent, address, 0, fd, 0, &region));
    CHECK_DETAIL_NAMES_THE_CALL();
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register_fd(agent, address, UINT64_MAX, fd, 0, &region));
    CHECK_DETAIL_NAMES_THE_CALL();
    CHECK_OK(kvt_mem_register_fd(agent, address, LENGTH, fd, 0, &region));
    uint32_t overlapping;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_register_fd(agent, address, 4096, fd, 0, &overlapping));
    CHECK_DETAIL("overlaps region");
    CHECK_DETAIL_NAMES_THE_CALL();
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_agent_destroy(agent));
    munmap(memory, LENGTH);
    close(fd);
}

static void registration_refuses_what_is_not_a_shared_mapping_of_the_file(void) {
    uint32_t agent = make_agent("file-refusals");
    int fd;
    uint8_t *memory = file_memory_map(LENGTH, &fd);
    uint64_t address = (uint64_t)(uintptr_t)memory;
    refused(agent, address, LENGTH, -1, 0, "fd -1 is not open");
    int pipe_fds[2];
    CHECK(pipe(pipe_fds) == 0, "pipe");
    refused(agent, address, LENGTH, pipe_fds[0], 0, "is not a regular file");
    refused(agent, address, LENGTH, fd, 4096, "exceeds the 1048576 bytes of the file");
    refused(agent, address + 4096, 4096, fd, 0, "maps offset 4096");
    uint8_t *private_view = mmap(NULL, LENGTH, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(private_view != MAP_FAILED, "mmap");
    refused(agent, (uint64_t)(uintptr_t)private_view, LENGTH, fd, 0, "is private");
    uint8_t *anonymous = mmap(NULL, LENGTH, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(anonymous != MAP_FAILED, "mmap");
    refused(agent, (uint64_t)(uintptr_t)anonymous, LENGTH, fd, 0, "is a mapping of anonymous memory");
    int unsealed = memfd_create("unsealed", MFD_CLOEXEC);
    CHECK(unsealed >= 0 && ftruncate(unsealed, LENGTH) == 0, "memfd");
    uint8_t *unsealed_view = mmap(NULL, LENGTH, PROT_READ | PROT_WRITE, MAP_SHARED, unsealed, 0);
    CHECK(unsealed_view != MAP_FAILED, "mmap");
    refused(agent, (uint64_t)(uintptr_t)unsealed_view, LENGTH, unsealed, 0, "not sealed against shrinking");
    CHECK(counter(agent, KVT_COUNTER_LIVE_REGISTRATIONS) == 0, "nothing was registered");
    uint32_t region;
    CHECK_OK(kvt_mem_register_fd(agent, address + 4096, 8192, fd, 4096, &region));
    CHECK_OK(kvt_mem_deregister(agent, region));
    CHECK_OK(kvt_agent_destroy(agent));
    munmap(memory, LENGTH);
    munmap(private_view, LENGTH);
    munmap(anonymous, LENGTH);
    munmap(unsealed_view, LENGTH);
    close(fd);
    close(unsealed);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

/* A source process with file memory, and a reader here with a bank of the same size and the source loaded. */
typedef struct {
    source_process source;
    uint32_t reader, local_region, peer;
    uint64_t generation;
    uint8_t *local;
} source_reader;

/* False (skipped) when the source cannot be started as asked. `reader_tls`: the reader's UCX_TLS, or NULL. */
static bool source_reader_open(source_reader *s, const char *reader_name, bool new_pid_namespace,
                               const char *reader_tls) {
    source_options options = {
        .length = LENGTH, .file_memory = true, .new_pid_namespace = new_pid_namespace, .seed = OLD_SEED};
    /* UCX 1.13's software gets over shared memory are never answered across pid namespaces (test_namespace):
     * such a source alone is given tcp, while the reader keeps its shared-memory transports. */
    if (new_pid_namespace) setenv("UCX_TLS", "tcp", 1);
    bool spawned = source_spawn(&options, &s->source);
    unsetenv("UCX_TLS");
    if (!spawned) return false;
    if (reader_tls) setenv("UCX_TLS", reader_tls, 1);
    s->reader = make_agent(reader_name);
    unsetenv("UCX_TLS");
    s->local_region = alloc_region(s->reader, LENGTH, &s->local);
    CHECK_OK(kvt_peer_load(s->reader, s->source.blob, s->source.length, &s->peer, &s->generation));
    return true;
}

static void source_reader_close(source_reader *s) {
    CHECK_OK(kvt_peer_unload(s->reader, s->peer));
    free_region(s->reader, s->local_region, s->local);
    CHECK_OK(kvt_agent_destroy(s->reader));
    source_end(&s->source);
}

/* The reader reads the source's region whole and finds its pattern. */
static void source_read_whole(source_reader *s) {
    uint64_t op, done = 0;
    CHECK_OK(post_one(s->reader, KVT_XFER_READ, s->peer, s->generation, s->local_region, 0, 1, 0, LENGTH, &op));
    CHECK(wait_op(s->reader, op, &done) == KVT_OK && done == LENGTH, "the read moved %llu bytes",
          (unsigned long long)done);
    CHECK_OK(kvt_xfer_release(s->reader, op));
    CHECK(check_pattern(s->local, LENGTH, OLD_SEED), "the bytes read are the source's");
}

/* READs are copied out of the source's file (no UCX request), WRITEs are not. */
static void another_process_is_read_through_its_file(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process and are copied under their lock");
    source_reader s;
    CHECK(source_reader_open(&s, "file-reader", false, NULL), "the source started");
    CHECK(peer_transport_mentions(s.reader, s.peer, "its file mapped"), "the source's file is mapped");
    uint64_t requests = counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED), op;
    source_read_whole(&s);
    CHECK(counter(s.reader, KVT_COUNTER_FILE_READ_BYTES) == LENGTH, "every byte counted as read through the file");
    CHECK(counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED) == requests, "no UCX request for the read");
    CHECK_OK(post_one(s.reader, KVT_XFER_WRITE, s.peer, s.generation, s.local_region, 0, 1, 0, 4096, &op));
    CHECK(wait_op(s.reader, op, NULL) == KVT_OK, "the write");
    CHECK_OK(kvt_xfer_release(s.reader, op));
    CHECK(counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED) > requests, "the write went through UCX");
    CHECK(counter(s.reader, KVT_COUNTER_FILE_READ_BYTES) == LENGTH, "the write is not a file read");
    source_reader_close(&s);
}

/* A source in another pid namespace: its pid names nothing here, so the reader leaves its fds alone. */
static void a_reader_that_cannot_open_the_fds_reads_through_ucx(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    source_reader s;
    if (!source_reader_open(&s, "file-reader-elsewhere", true, NULL)) return;
    CHECK(!peer_transport_mentions(s.reader, s.peer, "its file mapped"),
          "the file is not mapped across pid namespaces");
    uint64_t requests = counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED);
    source_read_whole(&s);
    CHECK(counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED) > requests, "the read went through UCX");
    CHECK(counter(s.reader, KVT_COUNTER_FILE_READ_BYTES) == 0, "nothing was read through the file");
    source_reader_close(&s);
}

/* A reader whose UCX_TLS leaves the memory-mapping transports out (^sm, ^mm) keeps off shared memory: it reads the
 * source's file-backed region through UCX as well, without mapping the file. */
static void a_reader_without_memory_mappers_reads_through_ucx(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback peers live in one process");
    static const char *const reader_tls[] = {"^sm", "^mm"};
    for (size_t i = 0; i < sizeof reader_tls / sizeof reader_tls[0]; i++) {
        source_reader s;
        CHECK(source_reader_open(&s, "file-reader-off-shared-memory", false, reader_tls[i]), "the source started");
        CHECK(!peer_transport_mentions(s.reader, s.peer, "its file mapped"),
              "the file is mapped with UCX_TLS=%s on the reader", reader_tls[i]);
        uint64_t requests = counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED);
        source_read_whole(&s);
        CHECK(counter(s.reader, KVT_COUNTER_REQUESTS_ISSUED) > requests, "the read went through UCX (UCX_TLS=%s)",
              reader_tls[i]);
        CHECK(counter(s.reader, KVT_COUNTER_FILE_READ_BYTES) == 0, "nothing was read through the file (UCX_TLS=%s)",
              reader_tls[i]);
        source_reader_close(&s);
    }
}

/* An owner and a reader in this process (the reader maps /proc/<own pid>/fd/<n>, as it would another's). */
typedef struct {
    uint32_t owner, reader, owner_region, local_region, peer;
    uint64_t generation;
    int fd;
    uint8_t *owner_memory, *local_memory;
} file_pair;

static void pair_open(file_pair *p) {
    *p = (file_pair){0};
    p->owner = make_agent("file-owner");
    p->reader = make_agent("file-reader");
    p->owner_memory = file_memory_map(LENGTH, &p->fd);
    fill_pattern(p->owner_memory, LENGTH, OLD_SEED);
    CHECK_OK(kvt_mem_register_fd(p->owner, (uint64_t)(uintptr_t)p->owner_memory, LENGTH, p->fd, 0, &p->owner_region));
    p->local_region = alloc_region(p->reader, LENGTH, &p->local_memory);
    p->peer = load_peer(p->reader, p->owner, &p->generation);
    CHECK(peer_transport_mentions(p->reader, p->peer, "its file mapped"), "the owner's file is mapped");
}

/* After the owner deregistered its region. */
static void pair_close(file_pair *p) {
    CHECK_OK(kvt_peer_unload(p->reader, p->peer));
    free_region(p->reader, p->local_region, p->local_memory);
    CHECK_OK(kvt_agent_destroy(p->reader));
    CHECK_OK(kvt_agent_destroy(p->owner));
    munmap(p->owner_memory, LENGTH);
    close(p->fd);
}

/* The owner deregisters its region and reuses the memory: new content in the same pages of the file. */
static void owner_withdraws_and_reuses(file_pair *p) {
    CHECK_OK(kvt_mem_deregister(p->owner, p->owner_region));
    fill_pattern(p->owner_memory, LENGTH, NEW_SEED);
}

static uint64_t post_read(file_pair *p) {
    uint64_t op;
    CHECK_OK(post_one(p->reader, KVT_XFER_READ, p->peer, p->generation, p->local_region, 0, p->owner_region, 0, LENGTH,
                      &op));
    return op;
}

static void read_fails_with_no_byte_reported(file_pair *p, uint64_t op) {
    uint64_t done = 1;
    int32_t status = wait_op(p->reader, op, &done);
    CHECK(status == KVT_ERR_NOT_FOUND, "the read ended %s, expected NOT_FOUND", kvt_status_name(status));
    CHECK(done == 0, "%llu bytes reported read out of a withdrawn region", (unsigned long long)done);
    CHECK(counter(p->reader, KVT_COUNTER_FILE_READ_BYTES) == 0, "no byte counted as read");
    CHECK_OK(kvt_xfer_release(p->reader, op));
}

static void withdrawal_before_the_copy_fails_the_read(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback reads copy under the owner's lock");
    file_pair p;
    pair_open(&p);
    CHECK_OK(kvt_fault_pause_issue(p.reader, 0)); /* nothing is copied until cleared */
    uint64_t op = post_read(&p);
    owner_withdraws_and_reuses(&p);
    CHECK_OK(kvt_fault_clear(p.reader));
    read_fails_with_no_byte_reported(&p, op);
    pair_close(&p);
}

static bool reader_waits_at_the_check(void *context) {
    const file_pair *p = context;
    bool waiting = false;
    CHECK_OK(kvt_test_file_check_waiting(p->reader, &waiting));
    return waiting;
}

/* A read of the whole region whose progress thread copied it and waits before checking the owner's table. */
static uint64_t read_held_at_the_check(file_pair *p) {
    CHECK_OK(kvt_test_hold_file_check(p->reader, true));
    uint64_t op = post_read(p);
    wait_until(0, reader_waits_at_the_check, p, "the reader to have copied, before its check", WAIT_DEADLINE_MS);
    return op;
}

static void withdrawal_between_the_copy_and_the_check_fails_the_read(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback reads copy under the owner's lock");
    file_pair p;
    pair_open(&p);
    uint64_t op = read_held_at_the_check(&p);
    owner_withdraws_and_reuses(&p);
    CHECK_OK(kvt_test_hold_file_check(p.reader, false));
    read_fails_with_no_byte_reported(&p, op);
    pair_close(&p);
}

static void withdrawal_after_the_check_keeps_the_bytes_read(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback reads copy under the owner's lock");
    file_pair p;
    pair_open(&p);
    uint64_t op = read_held_at_the_check(&p);
    CHECK_OK(kvt_test_hold_file_check(p.reader, false));
    uint64_t done = 0;
    CHECK(wait_op(p.reader, op, &done) == KVT_OK && done == LENGTH, "the read moved %llu bytes",
          (unsigned long long)done);
    CHECK_OK(kvt_xfer_release(p.reader, op));
    owner_withdraws_and_reuses(&p);
    CHECK(check_pattern(p.local_memory, LENGTH, OLD_SEED), "the bytes read are the old ones");
    pair_close(&p);
}

/* The owner's region in four pieces, each to the mirrored place here (so none merges with the next). */
static uint64_t post_read_in_pieces(file_pair *p) {
    enum { PIECES = 4 };
    const uint64_t piece = LENGTH / PIECES;
    uint32_t local_index[PIECES] = {0}, remote_index[PIECES] = {0};
    uint64_t local_offset[PIECES], remote_offset[PIECES], length[PIECES];
    for (unsigned i = 0; i < PIECES; i++) {
        local_offset[i] = (PIECES - 1 - i) * piece;
        remote_offset[i] = i * piece;
        length[i] = piece;
    }
    uint64_t op;
    CHECK_OK(kvt_xfer_post(p->reader, KVT_XFER_READ, p->peer, p->generation, PIECES, local_index, local_offset,
                           remote_index, remote_offset, length, 1, &p->local_region, 1, &p->owner_region, NULL, 0,
                           &op));
    return op;
}

/* Copies are synchronous on the progress thread: a cancel finds nothing in flight and ends the read. */
static void a_cancelled_read_ends_at_once(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback reads copy under the owner's lock");
    file_pair p;
    pair_open(&p);
    uint64_t first = LENGTH / 4;
    CHECK_OK(kvt_fault_pause_issue(p.reader, first));
    op_progress moving = {.agent = p.reader, .op = post_read_in_pieces(&p), .bytes = first};
    wait_until(p.reader, op_moved_while_in_progress, &moving, "the first piece to be read", WAIT_DEADLINE_MS);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(p.reader, moving.op));
    uint64_t done = 0;
    int32_t status = wait_op(p.reader, moving.op, &done);
    CHECK(status == KVT_ERR_CANCELED && done == first, "the cancelled read ended %s after %llu bytes",
          kvt_status_name(status), (unsigned long long)done);
    CHECK(counter(p.reader, KVT_COUNTER_REQUESTS_ISSUED) == 0, "no UCX request was issued");
    CHECK_OK(kvt_xfer_release(p.reader, moving.op));
    CHECK_OK(kvt_fault_clear(p.reader));
    CHECK_OK(kvt_mem_deregister(p.owner, p.owner_region));
    pair_close(&p);
}

TEST_MAIN("file_regions", TEST(registration_refuses_what_is_not_a_shared_mapping_of_the_file),
          TEST(shared_refusals_name_kvt_mem_register_fd), TEST(another_process_is_read_through_its_file),
          TEST(a_reader_that_cannot_open_the_fds_reads_through_ucx),
          TEST(a_reader_without_memory_mappers_reads_through_ucx), TEST(withdrawal_before_the_copy_fails_the_read),
          TEST(withdrawal_between_the_copy_and_the_check_fails_the_read),
          TEST(withdrawal_after_the_check_keeps_the_bytes_read), TEST(a_cancelled_read_ends_at_once))
