/* Transfers: batched READ/WRITE with byte verification, bounds refusals that move nothing,
 * a thousand concurrent operations, cancel and release. */
#include "harness.h"
#include "services/copy.h" /* kvt_streaming_threshold */
#include "services/util.h" /* kvt_now_ns */

#include <time.h>

typedef struct {
    uint32_t source, reader;
    uint8_t *source_memory, *reader_memory;
    uint32_t source_region, reader_region;
    uint64_t length;
    uint32_t peer;
    uint64_t generation;
} pair;

static pair pair_open(const char *source_name, const char *reader_name, uint64_t length) {
    pair p = {.length = length};
    p.source = make_agent(source_name);
    p.reader = make_agent(reader_name);
    p.source_region = alloc_region(p.source, length, &p.source_memory);
    p.reader_region = alloc_region(p.reader, length, &p.reader_memory);
    memset(p.reader_memory, 0, length);
    p.peer = load_peer(p.reader, p.source, &p.generation);
    return p;
}

static void pair_close(pair *p) {
    free_region(p->reader, p->reader_region, p->reader_memory);
    free_region(p->source, p->source_region, p->source_memory);
    CHECK_OK(kvt_agent_destroy(p->reader));
    CHECK_OK(kvt_agent_destroy(p->source));
}

typedef struct {
    uint32_t count;
    uint32_t *local_index, *remote_index;
    uint64_t *local_offset, *remote_offset, *length;
} batch;

static batch batch_new(uint32_t count) {
    batch b = {.count = count};
    b.local_index = calloc(count, sizeof *b.local_index);
    b.remote_index = calloc(count, sizeof *b.remote_index);
    b.local_offset = calloc(count, sizeof *b.local_offset);
    b.remote_offset = calloc(count, sizeof *b.remote_offset);
    b.length = calloc(count, sizeof *b.length);
    return b;
}

static void batch_free(batch *b) {
    free(b->local_index);
    free(b->remote_index);
    free(b->local_offset);
    free(b->remote_offset);
    free(b->length);
}

static kvt_status batch_post(const pair *p, uint32_t direction, const batch *b, const uint8_t *note,
                             uint32_t note_length, uint64_t *op) {
    return kvt_xfer_post(p->reader, direction, p->peer, p->generation, b->count, b->local_index, b->local_offset,
                         b->remote_index, b->remote_offset, b->length, 1, &p->reader_region, 1, &p->source_region, note,
                         note_length, op);
}

/* Pieces of `piece` bytes in a scrambled order, so neighbours rarely coalesce; piece i of the
 * source lands at the mirrored slot of the reader. */
static batch scrambled_batch(uint64_t length, uint64_t piece) {
    uint32_t count = (uint32_t)(length / piece);
    batch b = batch_new(count);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t slot = (uint32_t)(((uint64_t)i * 7919u) % count);
        b.remote_offset[i] = (uint64_t)slot * piece;
        b.local_offset[i] = (uint64_t)(count - 1 - slot) * piece;
        b.length[i] = piece;
    }
    return b;
}

static bool mirrored_equal(const uint8_t *reader, const uint8_t *source, uint64_t length, uint64_t piece) {
    uint64_t count = length / piece;
    for (uint64_t slot = 0; slot < count; slot++)
        if (memcmp(reader + (count - 1 - slot) * piece, source + slot * piece, piece) != 0) return false;
    return true;
}

/* Moves the batch over a cleared destination (the reader for READ, the source for WRITE) and checks
 * that every byte arrived in its mirrored place and was counted. */
static void move_mirrored(const pair *p, uint32_t direction, const batch *b, uint64_t piece) {
    memset(direction == KVT_XFER_READ ? p->reader_memory : p->source_memory, 0, p->length);
    uint64_t op = 0, done = 0;
    CHECK_OK(batch_post(p, direction, b, NULL, 0, &op));
    CHECK(wait_op(p->reader, op, &done) == KVT_OK && done == p->length, "%s completes with every byte counted",
          direction == KVT_XFER_READ ? "read" : "write");
    CHECK(mirrored_equal(p->reader_memory, p->source_memory, p->length, piece), "every byte arrived in place");
    CHECK_OK(kvt_xfer_release(p->reader, op));
}

static void read_then_write_verifies_every_byte(void) {
    uint64_t length = test_under_valgrind ? (1u << 20) : (16u << 20);
    uint64_t piece = 16384;
    pair p = pair_open("xfer-source", "xfer-reader", length);
    fill_pattern(p.source_memory, length, 42);
    batch b = scrambled_batch(length, piece);
    uint64_t op = 0, done = 0, total = 0;
    CHECK_OK(batch_post(&p, KVT_XFER_READ, &b, NULL, 0, &op));
    CHECK(wait_op(p.reader, op, &done) == KVT_OK, "read completes");
    CHECK(done == length, "bytes done %llu", (unsigned long long)done);
    int32_t status = 0;
    CHECK_OK(kvt_xfer_status(p.reader, op, &status, &done, &total));
    CHECK(status == KVT_OK && done == length && total == length, "status after completion");
    CHECK(mirrored_equal(p.reader_memory, p.source_memory, length, piece), "every byte read arrived in place");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_xfer_release(p.reader, op));

    /* WRITE the reader's bytes back, un-mirrored, over a cleared source. */
    fill_pattern(p.reader_memory, length, 7);
    move_mirrored(&p, KVT_XFER_WRITE, &b, piece);
    /* One descriptor over the whole region (larger than the loopback copy chunk of 8 MiB). */
    fill_pattern(p.source_memory, length, 99);
    CHECK_OK(
        post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.reader_region, 0, p.source_region, 0, length, &op));
    CHECK(wait_op(p.reader, op, &done) == KVT_OK && done == length, "one large read completes");
    CHECK(memcmp(p.reader_memory, p.source_memory, length) == 0, "the large read arrived");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK(counter(p.reader, KVT_COUNTER_BYTES_MOVED) == 3 * length, "bytes moved counted");
    CHECK(counter(p.reader, KVT_COUNTER_OPERATIONS_POSTED) == 3, "operations posted counted");
    batch_free(&b);
    pair_close(&p);
}

/* Caller memory (malloc): over UCX no shared-memory segment, so it moves with gets, not direct copies. */
static void caller_memory_reads_every_byte(void) {
    enum { LENGTH = 1 << 20, PIECE = 8192 };
    uint32_t source = make_agent("caller-source"), reader = make_agent("caller-reader");
    uint8_t *memory = aligned_alloc(4096, LENGTH), *reader_memory;
    CHECK(memory != NULL, "out of memory");
    fill_pattern(memory, LENGTH, 12);
    uint32_t source_region = 0;
    CHECK_OK(kvt_mem_register(source, (uint64_t)(uintptr_t)memory, LENGTH, KVT_MEM_DRAM, 0, &source_region));
    pair p = {
        .source = source, .reader = reader, .source_memory = memory, .source_region = source_region, .length = LENGTH};
    p.reader_region = alloc_region(reader, LENGTH, &reader_memory);
    p.reader_memory = reader_memory;
    p.peer = load_peer(reader, source, &p.generation);
    if (test_backend == KVT_BACKEND_UCX)
        CHECK(peer_transport_mentions(p.reader, p.peer, "through UCX") &&
                  !peer_transport_mentions(p.reader, p.peer, "copied directly"),
              "caller memory uses requests");
    batch b = scrambled_batch(LENGTH, PIECE);
    /* READ only: over UCX the source's progress thread answers from this memory, through shared memory
     * ThreadSanitizer cannot see, so the test must not write it again before deregistering. */
    move_mirrored(&p, KVT_XFER_READ, &b, PIECE);
    batch_free(&b);
    free_region(reader, p.reader_region, reader_memory);
    CHECK_OK(kvt_mem_deregister(source, source_region));
    free(memory);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
}

/* Two loopback agents may register the same memory; a read between overlapping ranges moves like memmove. */
static void overlapping_ranges_move_like_memmove(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "UCX moves caller memory with memcpy semantics (UCX's own copy)");
    enum { LENGTH = 65536, SHIFT = 100, MOVED = 8192 };
    uint32_t source = make_agent("overlap-source"), reader = make_agent("overlap-reader");
    uint8_t *memory = malloc(LENGTH), *expected = malloc(LENGTH);
    CHECK(memory != NULL && expected != NULL, "out of memory");
    fill_pattern(memory, LENGTH, 21);
    memcpy(expected, memory, LENGTH);
    memmove(expected + SHIFT, expected, MOVED);
    uint32_t source_region = 0, reader_region = 0;
    CHECK_OK(kvt_mem_register(source, (uint64_t)(uintptr_t)memory, LENGTH, KVT_MEM_DRAM, 0, &source_region));
    CHECK_OK(kvt_mem_register(reader, (uint64_t)(uintptr_t)memory, LENGTH, KVT_MEM_DRAM, 0, &reader_region));
    uint64_t generation = 0, op = 0;
    uint32_t peer = load_peer(reader, source, &generation);
    CHECK_OK(post_one(reader, KVT_XFER_READ, peer, generation, reader_region, SHIFT, source_region, 0, MOVED, &op));
    CHECK(wait_op(reader, op, NULL) == KVT_OK, "overlapping read completes");
    CHECK(memcmp(memory, expected, LENGTH) == 0, "the overlapping read moved like memmove");
    CHECK_OK(kvt_xfer_release(reader, op));
    CHECK_OK(kvt_mem_deregister(reader, reader_region));
    CHECK_OK(kvt_mem_deregister(source, source_region));
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
    free(expected);
    free(memory);
}

/* An idle reader touches every page of a loaded peer's mapped bank once (so the first transfer does not
 * pay the first-touch cost) and only reads it: the source's bytes are unchanged, and READs and WRITEs
 * after the warm-up still land every byte. */
static void idle_warm_up_reads_a_mapped_peer_and_changes_nothing(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "only UCX maps a peer's bank into this process");
    uint64_t length = 4u << 20;
    pair p = pair_open("warm-source", "warm-reader", length);
    fill_pattern(p.source_memory, length, 9);
    CHECK(peer_transport_mentions(p.reader, p.peer, "copied directly"), "a kvt_mem_alloc bank on this host is mapped");
    /* Waits for the warm-up to report itself done; the bound only ends a hang, it times nothing. */
    uint64_t deadline = kvt_now_ns() + 60000000000ull;
    while (!peer_transport_mentions(p.reader, p.peer, "every page touched once") && kvt_now_ns() < deadline)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    CHECK(peer_transport_mentions(p.reader, p.peer, "every page touched once"),
          "the idle reader warmed the mapped bank");
    CHECK(check_pattern(p.source_memory, length, 9), "the warm-up changed none of the source's bytes");
    batch b = scrambled_batch(length, 65536);
    move_mirrored(&p, KVT_XFER_READ, &b, 65536);
    fill_pattern(p.reader_memory, length, 10);
    move_mirrored(&p, KVT_XFER_WRITE, &b, 65536);
    batch_free(&b);
    pair_close(&p);
}

/* A batch larger than the cache, in 4 KiB pieces that cannot merge: UCX copies mapped regions with
 * streaming stores, several pieces at a time. Both directions land every byte in place. */
static void a_batch_past_the_cache_verifies_every_byte(void) {
    if (test_under_valgrind) {
        test_skip_reason = "hundreds of MiB are too slow under valgrind; test_copy covers the copies there";
        return;
    }
    uint64_t piece = 4096;
    uint64_t length = (kvt_streaming_threshold() / (1u << 20) + 2) * (1u << 20);
    pair p = pair_open("stream-source", "stream-reader", length);
    if (test_backend == KVT_BACKEND_UCX)
        CHECK(peer_transport_mentions(p.reader, p.peer, "copied directly"),
              "a kvt_mem_alloc bank on this host is mapped and copied directly");
    fill_pattern(p.source_memory, length, 5);
    batch b = scrambled_batch(length, piece);
    move_mirrored(&p, KVT_XFER_READ, &b, piece);
    fill_pattern(p.reader_memory, length, 6);
    move_mirrored(&p, KVT_XFER_WRITE, &b, piece);
    batch_free(&b);
    pair_close(&p);
}

static void contiguous_descriptors_and_region_tables(void) {
    /* Two local regions and two remote regions, addressed through the index tables. */
    uint32_t source = make_agent("tables-source"), reader = make_agent("tables-reader");
    uint8_t *s0, *s1, *r0, *r1;
    uint32_t rs[2] = {alloc_region(source, 65536, &s0), alloc_region(source, 65536, &s1)};
    uint32_t rr[2] = {alloc_region(reader, 65536, &r0), alloc_region(reader, 65536, &r1)};
    fill_pattern(s0, 65536, 1);
    fill_pattern(s1, 65536, 2);
    memset(r0, 0, 65536);
    memset(r1, 0, 65536);
    uint64_t generation;
    uint32_t peer = load_peer(reader, source, &generation);
    /* 32 contiguous 2 KiB pieces per pair (these coalesce), crossed: s1 → r0, s0 → r1. */
    enum { N = 64 };
    uint32_t li[N], ri[N];
    uint64_t lo[N], ro[N], len[N];
    for (uint32_t i = 0; i < N; i++) {
        li[i] = i < 32 ? 0 : 1;
        ri[i] = i < 32 ? 1 : 0;
        lo[i] = ro[i] = (uint64_t)(i % 32) * 2048;
        len[i] = 2048;
    }
    uint64_t op;
    CHECK_OK(
        kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, N, li, lo, ri, ro, len, 2, rr, 2, rs, NULL, 0, &op));
    uint64_t done;
    CHECK(wait_op(reader, op, &done) == KVT_OK && done == 2 * 65536, "read through tables");
    CHECK(memcmp(r0, s1, 65536) == 0 && memcmp(r1, s0, 65536) == 0, "crossed regions arrived");
    CHECK_OK(kvt_xfer_release(reader, op));
    free_region(reader, rr[0], r0);
    free_region(reader, rr[1], r1);
    free_region(source, rs[0], s0);
    free_region(source, rs[1], s1);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
}

/* Posts `b` expecting INVALID_PARAM naming `needle`, and checks nothing moved and nothing stayed live. */
static void expect_refused(pair *p, const batch *b, const char *needle) {
    uint64_t op = 0;
    uint64_t before = counter(p->reader, KVT_COUNTER_ERRORS_FIRST + 0);
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, batch_post(p, KVT_XFER_READ, b, NULL, 0, &op));
    CHECK_DETAIL(needle);
    CHECK(counter(p->reader, KVT_COUNTER_ERRORS_FIRST + 0) == before + 1, "the refusal is counted");
    CHECK(counter(p->reader, KVT_COUNTER_LIVE_OPERATIONS) == 0, "no operation was created");
    for (uint64_t i = 0; i < p->length; i++) CHECK(p->reader_memory[i] == 0, "byte %llu moved", (unsigned long long)i);
}

static void one_bad_descriptor_refuses_the_batch(void) {
    uint64_t length = 1u << 20;
    pair p = pair_open("bounds-source", "bounds-reader", length);
    fill_pattern(p.source_memory, length, 3);
    batch b = scrambled_batch(length, 4096);
    uint32_t bad = b.count - 1; /* the last one, so everything before it would have been valid */
    const uint64_t remote_offset = b.remote_offset[bad], local_offset = b.local_offset[bad];

    b.remote_offset[bad] = length - 100;
    expect_refused(&p, &b, "descriptor 255: remote offset 1048476 + length 4096 exceeds region");
    b.remote_offset[bad] = remote_offset;
    b.local_offset[bad] = length;
    expect_refused(&p, &b, "descriptor 255: local offset 1048576");
    b.local_offset[bad] = UINT64_MAX - 10; /* offset + length would wrap */
    expect_refused(&p, &b, "descriptor 255: local offset");
    b.local_offset[bad] = local_offset;
    b.length[bad] = 0;
    expect_refused(&p, &b, "descriptor 255: length is 0");
    b.length[bad] = 4096;
    b.remote_index[bad] = 1;
    expect_refused(&p, &b, "descriptor 255: remote index 1 >= table size 1");
    b.remote_index[bad] = 0;
    b.local_index[bad] = 5;
    expect_refused(&p, &b, "descriptor 255: local index 5");
    b.local_index[bad] = 0;

    /* Table entries that are not regions, and malformed calls. */
    uint64_t op;
    uint32_t missing = 999;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_xfer_post(p.reader, KVT_XFER_READ, p.peer, p.generation, b.count,
                                                      b.local_index, b.local_offset, b.remote_index, b.remote_offset,
                                                      b.length, 1, &missing, 1, &p.source_region, NULL, 0, &op));
    CHECK_DETAIL("local_regions[0] = 999");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_xfer_post(p.reader, KVT_XFER_READ, p.peer, p.generation, b.count,
                                                      b.local_index, b.local_offset, b.remote_index, b.remote_offset,
                                                      b.length, 1, &p.reader_region, 1, &missing, NULL, 0, &op));
    CHECK_DETAIL("remote_regions[0] = 999 is not a region peer 'bounds-source' advertised");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_xfer_post(p.reader, 5, p.peer, p.generation, b.count, b.local_index,
                                                      b.local_offset, b.remote_index, b.remote_offset, b.length, 1,
                                                      &p.reader_region, 1, &p.source_region, NULL, 0, &op));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_xfer_post(p.reader, KVT_XFER_READ, p.peer, p.generation, 0, b.local_index,
                                                      b.local_offset, b.remote_index, b.remote_offset, b.length, 1,
                                                      &p.reader_region, 1, &p.source_region, NULL, 0, &op));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_xfer_post(p.reader, KVT_XFER_READ, p.peer, p.generation, KVT_MAX_DESCRIPTORS + 1, b.local_index,
                               b.local_offset, b.remote_index, b.remote_offset, b.length, 1, &p.reader_region, 1,
                               &p.source_region, NULL, 0, &op));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_xfer_post(p.reader, KVT_XFER_READ, p.peer, p.generation, b.count, NULL,
                                                      b.local_offset, b.remote_index, b.remote_offset, b.length, 1,
                                                      &p.reader_region, 1, &p.source_region, NULL, 0, &op));
    static uint8_t big[KVT_MAX_NOTIFICATION + 1];
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, batch_post(&p, KVT_XFER_READ, &b, big, sizeof big, &op));
    CHECK_DETAIL("notification of 4097 bytes");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_xfer_post(p.reader, KVT_XFER_READ, p.peer + 100, p.generation, b.count,
                                                  b.local_index, b.local_offset, b.remote_index, b.remote_offset,
                                                  b.length, 1, &p.reader_region, 1, &p.source_region, NULL, 0, &op));
    for (uint64_t i = 0; i < length; i++) CHECK(p.reader_memory[i] == 0, "byte %llu moved", (unsigned long long)i);

    /* The repaired batch goes through. */
    CHECK_OK(batch_post(&p, KVT_XFER_READ, &b, NULL, 0, &op));
    CHECK(wait_op(p.reader, op, NULL) == KVT_OK, "valid batch");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK(mirrored_equal(p.reader_memory, p.source_memory, length, 4096), "bytes");
    /* A post holds the peer and its regions while it checks the descriptors: the refused ones let go
     * (the peer unloads and the regions deregister, in pair_close). */
    CHECK_OK(kvt_peer_unload(p.reader, p.peer));
    batch_free(&b);
    pair_close(&p);
}

static void a_thousand_concurrent_operations(void) {
    enum { OPS = 1000 };
    uint64_t piece = 4096;
    pair p = pair_open("many-source", "many-reader", OPS * piece);
    fill_pattern(p.source_memory, OPS * piece, 9);
    uint64_t *ops = calloc(OPS, sizeof *ops);
    for (uint32_t i = 0; i < OPS; i++)
        CHECK_OK(post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.reader_region, i * piece, p.source_region,
                          i * piece, piece, &ops[i]));
    wait_completions_ok(p.reader, OPS, piece, true);
    CHECK(memcmp(p.reader_memory, p.source_memory, OPS * piece) == 0, "all bytes");
    CHECK(counter(p.reader, KVT_COUNTER_OPERATIONS_POSTED) == OPS, "posted");
    free(ops);
    pair_close(&p);
}

/* Posts `b` (READ or WRITE, with or without a one-byte notification) and waits for it to end OK. */
static void move_ok(const pair *p, uint32_t direction, const batch *b, bool notify, const char *what) {
    uint64_t op = 0;
    CHECK_OK(batch_post(p, direction, b, notify ? (const uint8_t *)"n" : NULL, notify ? 1 : 0, &op));
    CHECK(wait_op(p->reader, op, NULL) == KVT_OK, "%s ends OK", what);
    CHECK_OK(kvt_xfer_release(p->reader, op));
}

/* A READ of at most 256 KiB in at most 1,024 pieces from a bank its peer allocated (mapped here through shared
 * memory) is copied by the posting thread: it has ended, every byte in place, when the post returns. A byte
 * more, a piece more (pieces that touch count as one), a WRITE or a notification leave it to the progress thread. */
static void a_small_read_of_a_mapped_bank_ends_within_its_post(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "loopback moves every operation on its progress thread");
    uint64_t length = 2u << 20, small = 256u << 10, piece = 4096;
    pair p = pair_open("inline-source", "inline-reader", length);
    fill_pattern(p.source_memory, length, 23);
    batch b = scrambled_batch(small, piece);
    uint64_t op = 0, done = 0, total = 0;
    int32_t status = KVT_IN_PROGRESS;
    CHECK_OK(batch_post(&p, KVT_XFER_READ, &b, NULL, 0, &op));
    CHECK_OK(kvt_xfer_status(p.reader, op, &status, &done, &total));
    CHECK(status == KVT_OK && done == small && total == small, "at the post's return: %s, %llu of %llu bytes",
          kvt_status_name(status), (unsigned long long)done, (unsigned long long)total);
    CHECK(mirrored_equal(p.reader_memory, p.source_memory, small, piece), "every byte in place");
    CHECK(wait_op(p.reader, op, NULL) == KVT_OK, "its completion is queued like any other");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK(counter(p.reader, KVT_COUNTER_INLINE_OPERATIONS) == 1, "counted as moved inline");

    batch over = batch_new(1);
    over.length[0] = small + 1;
    move_ok(&p, KVT_XFER_READ, &over, false, "a read of 256 KiB and a byte");
    batch many = batch_new(1025);
    for (uint32_t i = 0; i < many.count; i++) {
        many.remote_offset[i] = many.local_offset[i] = (uint64_t)i * 128; /* apart: not merged into one */
        many.length[i] = 64;
    }
    move_ok(&p, KVT_XFER_READ, &many, false, "a read of 1,025 pieces");
    move_ok(&p, KVT_XFER_WRITE, &b, false, "a write of 256 KiB");
    move_ok(&p, KVT_XFER_READ, &b, true, "a read of 256 KiB with a notification");
    CHECK(counter(p.reader, KVT_COUNTER_INLINE_OPERATIONS) == 1, "none of those moved inline (counted %llu)",
          (unsigned long long)counter(p.reader, KVT_COUNTER_INLINE_OPERATIONS));
    CHECK(counter(p.reader, KVT_COUNTER_OPERATIONS_POSTED) == 5, "every operation counted as posted");
    CHECK(counter(p.reader, KVT_COUNTER_INFLIGHT_OPERATIONS) == 0, "none counted in flight");
    batch_free(&many);
    batch_free(&over);
    batch_free(&b);
    pair_close(&p);
}

static void cancel_and_release(void) {
    pair p = pair_open("cancel-source", "cancel-reader", 1u << 20);
    CHECK_OK(kvt_fault_delay_completions(p.reader, KVT_DELAY_FOREVER));
    uint64_t op;
    CHECK_OK(
        post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.reader_region, 0, p.source_region, 0, 1u << 20, &op));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_xfer_release(p.reader, op));
    CHECK_DETAIL("still in progress");
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(p.reader, op));
    CHECK(wait_op(p.reader, op, NULL) == KVT_ERR_CANCELED, "the held op ends canceled");
    CHECK_OK(kvt_xfer_cancel(p.reader, op)); /* terminal: nothing to do */
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_xfer_cancel(p.reader, op));
    CHECK(counter(p.reader, KVT_COUNTER_ERRORS_FIRST + 8) == 1, "one canceled operation counted");
    CHECK_OK(kvt_fault_clear(p.reader));
    pair_close(&p);
}

typedef struct {
    uint32_t agent;
    uint64_t op;
} held_op;

/* True once the backend moved every byte of an operation whose completion is held. */
static bool every_byte_moved(void *context) {
    const held_op *held = context;
    int32_t status = KVT_OK;
    uint64_t done = 0, total = 0;
    CHECK_OK(kvt_xfer_status(held->agent, held->op, &status, &done, &total));
    CHECK(status == KVT_IN_PROGRESS, "the held operation ended %s", kvt_status_name(status));
    return done == total;
}

/* A batch whose bytes all moved but whose completion is held in flight: the cancel is accepted and the
 * batch ends CANCELED, with every byte it moved counted and in place. */
static void cancel_a_batch_held_in_flight(void) {
    uint64_t length = 1u << 20, piece = 4096;
    pair p = pair_open("held-cancel-source", "held-cancel-reader", length);
    fill_pattern(p.source_memory, length, 17);
    CHECK_OK(kvt_fault_delay_completions(p.reader, KVT_DELAY_FOREVER));
    batch b = scrambled_batch(length, piece);
    uint64_t op = 0, done = 0;
    CHECK_OK(batch_post(&p, KVT_XFER_READ, &b, NULL, 0, &op));
    held_op held = {.agent = p.reader, .op = op};
    wait_until(p.reader, every_byte_moved, &held, "the held batch's bytes to move", WAIT_DEADLINE_MS);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(p.reader, op));
    int32_t end = wait_op(p.reader, op, &done);
    CHECK(end == KVT_ERR_CANCELED, "the held batch ended %s, expected CANCELED", kvt_status_name(end));
    CHECK(done == length, "the canceled batch counts the %llu bytes it moved (got %llu)", (unsigned long long)length,
          (unsigned long long)done);
    CHECK(mirrored_equal(p.reader_memory, p.source_memory, length, piece), "the bytes it moved are in place");
    CHECK(counter(p.reader, KVT_COUNTER_ERRORS_FIRST + 8) == 1, "one canceled operation counted");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    CHECK_OK(kvt_fault_clear(p.reader));
    batch_free(&b);
    pair_close(&p);
}

/* A cancel after the batch completed has nothing to do: the batch stays done with every byte. */
static void cancel_after_the_batch_completed(void) {
    uint64_t length = 1u << 20, piece = 4096;
    pair p = pair_open("done-cancel-source", "done-cancel-reader", length);
    fill_pattern(p.source_memory, length, 19);
    batch b = scrambled_batch(length, piece);
    uint64_t op = 0, done = 0;
    CHECK_OK(batch_post(&p, KVT_XFER_READ, &b, NULL, 0, &op));
    CHECK(wait_op(p.reader, op, &done) == KVT_OK && done == length, "the batch completes with every byte");
    CHECK_OK(kvt_xfer_cancel(p.reader, op));
    int32_t status = KVT_IN_PROGRESS;
    uint64_t total = 0;
    CHECK_OK(kvt_xfer_status(p.reader, op, &status, &done, &total));
    CHECK(status == KVT_OK && done == length && total == length, "after the cancel: %s, %llu of %llu bytes",
          kvt_status_name(status), (unsigned long long)done, (unsigned long long)total);
    uint32_t reported = 7;
    CHECK_OK(kvt_agent_poll(p.reader, 0, NULL, NULL, NULL, &reported, NULL));
    CHECK(reported == 0, "the cancel reports nothing new");
    CHECK(mirrored_equal(p.reader_memory, p.source_memory, length, piece), "every byte in place");
    CHECK(counter(p.reader, KVT_COUNTER_ERRORS_FIRST + 8) == 0, "no canceled operation counted");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    batch_free(&b);
    pair_close(&p);
}

static void withdrawn_or_destroyed_source(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "a UCX reader cannot see a withdrawn region (one-sided; trust model)");
    pair p = pair_open("gone-source", "gone-reader", 65536);
    /* The source deregisters after the reader loaded its metadata: loopback refuses to touch it. */
    uint8_t *extra = malloc(65536);
    uint32_t extra_region;
    CHECK_OK(kvt_mem_register(p.source, (uint64_t)(uintptr_t)extra, 65536, KVT_MEM_DRAM, 0, &extra_region));
    uint64_t generation;
    p.peer = load_peer(p.reader, p.source, &generation);
    p.generation = generation;
    CHECK_OK(kvt_mem_deregister(p.source, extra_region));
    uint64_t op;
    CHECK_OK(post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.reader_region, 0, extra_region, 0, 4096, &op));
    CHECK(wait_op(p.reader, op, NULL) == KVT_ERR_REMOTE_DISCONNECT, "withdrawn region");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    free(extra);
    /* The source agent goes away entirely. */
    free_region(p.source, p.source_region, p.source_memory);
    CHECK_OK(kvt_agent_destroy(p.source));
    CHECK_OK(
        post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.reader_region, 0, p.source_region, 0, 4096, &op));
    CHECK(wait_op(p.reader, op, NULL) == KVT_ERR_REMOTE_DISCONNECT, "destroyed source");
    CHECK_OK(kvt_xfer_release(p.reader, op));
    uint32_t state;
    CHECK_OK(kvt_peer_info(p.reader, p.peer, NULL, &state, NULL));
    CHECK(state == KVT_PEER_DISCONNECTED, "the peer shows as disconnected");
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, post_one(p.reader, KVT_XFER_READ, p.peer, p.generation, p.reader_region, 0,
                                                     p.source_region, 0, 4096, &op));
    free_region(p.reader, p.reader_region, p.reader_memory);
    CHECK_OK(kvt_agent_destroy(p.reader));
}

TEST_MAIN("xfer", TEST(read_then_write_verifies_every_byte), TEST(a_batch_past_the_cache_verifies_every_byte),
          TEST(idle_warm_up_reads_a_mapped_peer_and_changes_nothing), TEST(caller_memory_reads_every_byte),
          TEST(overlapping_ranges_move_like_memmove), TEST(contiguous_descriptors_and_region_tables),
          TEST(one_bad_descriptor_refuses_the_batch), TEST(a_thousand_concurrent_operations),
          TEST(a_small_read_of_a_mapped_bank_ends_within_its_post), TEST(cancel_and_release),
          TEST(cancel_a_batch_held_in_flight), TEST(cancel_after_the_batch_completed),
          TEST(withdrawn_or_destroyed_source))
