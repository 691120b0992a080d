/* A host-staged chunk of many vram pieces crosses PCIe as one copy each way and a kvt_gather launch on each side
 * (ucx_stage_gather.c), counted through the fake driver's hooks: its copies and launches, a chunk of few pieces, dram
 * pieces among vram ones, and more chunks in flight than an agent has GPU chunk buffers. Fake driver only (the
 * counts are its hooks'); test_cuda's staged cases move the same chunks on the machine's driver. */
#include "cuda_pulls.h"

#include <stdlib.h>
#include <string.h>

#if KVT_HAVE_UCX
#include "backends/ucx/ucx_staging.h" /* STAGE_MAX_PIECES, STAGE_GPU_CHUNKS, STAGE_GATHER_MIN_PIECES */

/* The fake driver's copies and kvt_gather launches so far. */
typedef struct {
    unsigned long copies;
    uint64_t launches;
} gpu_calls;

static gpu_calls gpu_calls_now(void) {
    return (gpu_calls){((unsigned long (*)(void))(uintptr_t)fake_symbol("fake_cuda_copies"))(),
                       ((uint64_t(*)(const char *))(uintptr_t)fake_symbol("fake_cuda_launches"))("kvt_gather")};
}

#define GATHER_PIECE 32u
#define GATHER_STRIDE 48u

/* A staged READ of pieces of GATHER_PIECE bytes from the pair's source, in reverse order, into the `range`-th range of
 * count * GATHER_STRIDE bytes on the reader (none merge). With dram regions (`reader_dram` and `source_dram`, both
 * PULL_BYTES), piece i lands in the reader's dram when i is odd and comes from the source's dram when i / 2 is. */
typedef struct {
    uint32_t count, range;
    uint32_t reader_dram, source_dram; /* regions, or 0 */
    uint8_t *reader_dram_memory;
} spread_pull;

static bool mixed(const spread_pull *pull) { return pull->reader_dram != 0; }

static uint64_t spread_local(const spread_pull *pull, uint32_t i) {
    return ((uint64_t)pull->range * pull->count + i) * GATHER_STRIDE;
}

static uint64_t spread_remote(const spread_pull *pull, uint32_t i) {
    return (uint64_t)(pull->count - 1 - i) * GATHER_STRIDE + pull->range;
}

/* Posts the READ; answers the op. */
static uint64_t post_spread_pieces(const vram_pair *pair, const spread_pull *pull) {
    uint32_t *local_slot = calloc(pull->count, sizeof *local_slot),
             *remote_slot = calloc(pull->count, sizeof *remote_slot);
    uint64_t *local_offset = malloc(pull->count * sizeof(uint64_t)),
             *remote_offset = malloc(pull->count * sizeof(uint64_t)), *length = malloc(pull->count * sizeof(uint64_t)),
             op = 0;
    for (uint32_t i = 0; i < pull->count; i++) {
        local_slot[i] = mixed(pull) ? i % 2 : 0;
        remote_slot[i] = mixed(pull) ? i / 2 % 2 : 0;
        local_offset[i] = spread_local(pull, i);
        remote_offset[i] = spread_remote(pull, i);
        length[i] = GATHER_PIECE;
    }
    const uint32_t locals[2] = {pair->local, pull->reader_dram}, remotes[2] = {pair->remote, pull->source_dram};
    const uint32_t regions = mixed(pull) ? 2 : 1;
    CHECK_OK(kvt_xfer_post(pair->reader, KVT_XFER_READ, pair->peer, pair->generation, pull->count, local_slot,
                           local_offset, remote_slot, remote_offset, length, regions, locals, regions, remotes, NULL, 0,
                           &op));
    free(local_slot);
    free(remote_slot);
    free(local_offset);
    free(remote_offset);
    free(length);
    return op;
}

/* Every piece holds the source's bytes (both of its regions hold the pattern of `seed`). */
static void check_spread_pieces(const vram_pair *pair, const spread_pull *pull, uint64_t seed) {
    uint8_t *expected = malloc(PULL_BYTES);
    fill_pattern(expected, PULL_BYTES, seed);
    for (uint32_t i = 0; i < pull->count; i++) {
        bool into_dram = mixed(pull) && i % 2;
        CHECK(into_dram
                  ? memcmp(pull->reader_dram_memory + spread_local(pull, i), expected + spread_remote(pull, i),
                           GATHER_PIECE) == 0
                  : holds_pattern(pair->local_vram + spread_local(pull, i), GATHER_PIECE, spread_remote(pull, i), seed),
              "range %u: piece %u moved", pull->range, i);
    }
    free(expected);
}

/* Whether the held pulls' chunks all arrived and were copied up (context: the gpu_calls they end at). */
static bool every_chunk_copied_up(void *context) {
    const gpu_calls *expected = context, now = gpu_calls_now();
    return now.copies >= expected->copies && now.launches >= expected->launches;
}

static void check_gpu_calls(gpu_calls before, gpu_calls expected, const char *what) {
    gpu_calls after = gpu_calls_now();
    CHECK(after.copies == expected.copies && after.launches == expected.launches,
          "%s: %lu copies and %llu launches (expected %lu and %llu)", what, after.copies - before.copies,
          (unsigned long long)(after.launches - before.launches), expected.copies - before.copies,
          (unsigned long long)(expected.launches - before.launches));
}

#define HELD_PULLS 5u
#define HELD_PIECES (4 * STAGE_MAX_PIECES) /* four chunks: every slot of a pull */

/* HELD_PULLS staged pulls of HELD_PIECES pieces each while the fake holds the events: every chunk's copy up stays in
 * flight, so no GPU chunk buffer comes back before its pull ends. */
static void pull_while_copies_are_held(const vram_pair *pair, uint64_t seed) {
    const gpu_calls before = gpu_calls_now();
    ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(1);
    for (uint32_t p = 0; p < HELD_PULLS; p++)
        post_spread_pieces(pair, &(spread_pull){.count = HELD_PIECES, .range = p});
    /* 20 chunks: the source packs each with a launch (its table up, the chunk down); the reader unpacks 16 (all
     * STAGE_GPU_CHUNKS buffers then held) with a launch each (the chunk up, its table up), and copies the other 4 a
     * piece at a time. */
    const uint32_t chunks = HELD_PULLS * HELD_PIECES / STAGE_MAX_PIECES, gathered = STAGE_GPU_CHUNKS;
    gpu_calls expected = {before.copies + 2 * chunks + 2 * gathered + (chunks - gathered) * STAGE_MAX_PIECES,
                          before.launches + chunks + gathered};
    wait_until(pair->reader, every_chunk_copied_up, &expected, "every held chunk copied up", WAIT_DEADLINE_MS);
    ((hold_fn)(uintptr_t)fake_symbol("fake_cuda_hold_events"))(0);
    wait_completions_ok(pair->reader, HELD_PULLS, HELD_PIECES * GATHER_PIECE, true);
    check_gpu_calls(before, expected, "20 chunks, 16 GPU chunk buffers");
    for (uint32_t p = 0; p < HELD_PULLS; p++)
        check_spread_pieces(pair, &(spread_pull){.count = HELD_PIECES, .range = p}, seed);
}

/* A staged chunk of many vram pieces crosses as one copy each way and a gather launch on each side, not a copy per
 * piece, dram pieces among them too; a chunk of fewer than STAGE_GATHER_MIN_PIECES is copied a piece at a time; with
 * every GPU chunk buffer held by a copy in flight, a chunk is copied a piece at a time too. Every byte lands where it
 * belongs. */
static void staged_pulls_gather_their_chunks(void) {
    vram_pair pair = open_vram_pair(79, KVT_AGENT_VRAM_STAGED);
    const spread_pull whole = {.count = STAGE_MAX_PIECES}, few = {.count = STAGE_GATHER_MIN_PIECES - 1, .range = 1};
    spread_pull with_dram = {.count = STAGE_MAX_PIECES, .range = 2};
    uint8_t *source_dram_memory = NULL;
    with_dram.reader_dram = alloc_region(pair.reader, PULL_BYTES, &with_dram.reader_dram_memory);
    with_dram.source_dram = alloc_region(pair.source, PULL_BYTES, &source_dram_memory);
    fill_pattern(source_dram_memory, PULL_BYTES, 79);
    pair.peer = load_peer(pair.reader, pair.source, &pair.generation); /* the metadata that advertises it */
    const spread_pull *pulls[3] = {&whole, &few, &with_dram};
    for (uint32_t p = 0; p < 3; p++) {
        const spread_pull *pull = pulls[p];
        const gpu_calls before = gpu_calls_now();
        post_spread_pieces(&pair, pull);
        wait_completions_ok(pair.reader, 1, pull->count * GATHER_PIECE, true);
        /* A gathered chunk: its table up and the chunk down at the source, the chunk and its table up at the reader. */
        const bool gathered = pull->count >= STAGE_GATHER_MIN_PIECES;
        check_gpu_calls(before,
                        (gpu_calls){before.copies + (gathered ? 4 : 2 * pull->count), before.launches + 2 * gathered},
                        mixed(pull) ? "a chunk of vram and dram pieces"
                        : gathered  ? "a chunk of 256"
                                    : "a chunk of 3");
        check_spread_pieces(&pair, pull, 79);
    }
    pull_while_copies_are_held(&pair, 79);
    free_region(pair.reader, with_dram.reader_dram, with_dram.reader_dram_memory);
    free_region(pair.source, with_dram.source_dram, source_dram_memory);
    close_vram_pair(&pair);
}

static void vram_staged_pull_gathers_its_chunks(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
    on_fake_driver("1", staged_pulls_gather_their_chunks);
}
#else
static void vram_staged_pull_gathers_its_chunks(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
}
#endif

TEST_MAIN("staged_gather", TEST(vram_staged_pull_gathers_its_chunks))
