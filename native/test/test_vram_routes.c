/* Vram work the GPU cuts into tiles itself (kvt_gather_routes, kvt_block_checksum_routes). Template posts: one
 * template whose routes the kernel tiles in every way it can (a row longer than a tile, rows grouped into one tile,
 * short unaligned rows, more rows than a tile holds, rows of exactly a tile), over two regions on each side, READ
 * and WRITE. Descriptor posts of large pieces, which go as one route each (small ones go as host-cut pieces to
 * kvt_gather). Every byte named must land, and the bytes around must stay. Block checksums by the same routes,
 * which must be the sums of the same rows named one by one. Runs on the fake driver, or with KVT_TEST_CUDA_REAL=1
 * (tools/gpu-check) on the machine's own. */
#include "cuda_pulls.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"

#include <stdlib.h>
#include <string.h>

#define AREA_BYTES (1u << 20) /* each route's own area, on both sides */
#define ROUTES 5u
#define BANK_BYTES (ROUTES * AREA_BYTES)
#define SECOND_REGION (3u * AREA_BYTES) /* where each side's second region starts; routes 3 and 4 are in it */
#define BLOCKS 3u
#define TILES_PER_BLOCK 8u /* 2 + 1 + 1 + 2 + 2, as the shapes below are tiled */

/* A route on each side: the remote (source) side's and the local side's skew into the route's area and
 * strides. */
typedef struct {
    uint64_t skew, row_stride, block_stride;
} side;
typedef struct {
    uint32_t rows;
    uint64_t row_bytes;
    side remote, local;
} shape;

static const shape shapes[ROUTES] = {
    /* longer than a tile, not a multiple of 16 */
    {1, (160u << 10) + 3, {0, (160u << 10) + 3, 192u << 10}, {16, (160u << 10) + 3, 200u << 10}},
    /* grouped into one tile, apart */
    {5, 4096, {16, 8192, 64u << 10}, {0, 8192 + 32, (64u << 10) + 1024}},
    /* short and unaligned */
    {3, 100, {3, 300, 1024}, {7, 308, 1536}},
    /* more rows than one tile holds, contiguous on one side only */
    {40, 4096, {0, 4096, 192u << 10}, {0, 4096 + 16, 196u << 10}},
    /* exactly a tile each */
    {2, 128u << 10, {0, (128u << 10) + 64, 320u << 10}, {0, (128u << 10) + 128, 324u << 10}},
};

typedef struct {
    uint32_t source, reader, remote[2], local[2], peer, template_id;
    uint64_t remote_vram, local_vram, generation, block_bytes;
} banks;

/* Where route r's row `row` of block `block` is on one side, in its bank; minus `region` (0, or where the
 * side's second region starts) in its region. */
static uint64_t place(uint32_t r, const side *on, uint32_t block, uint32_t row) {
    return r * (uint64_t)AREA_BYTES + on->skew + block * on->block_stride + row * on->row_stride;
}
static uint64_t region_start(uint32_t r) { return r >= 3 ? SECOND_REGION : 0; }

static void register_routes(banks *b) {
    uint32_t index[ROUTES], rows[ROUTES];
    uint64_t local_base[ROUTES], remote_base[ROUTES], local_block_stride[ROUTES], remote_block_stride[ROUTES],
        row_bytes[ROUTES], local_row_stride[ROUTES], remote_row_stride[ROUTES];
    b->block_bytes = 0;
    for (uint32_t r = 0; r < ROUTES; r++) {
        const shape *s = &shapes[r];
        index[r] = r >= 3;
        rows[r] = s->rows;
        local_base[r] = place(r, &s->local, 0, 0) - region_start(r);
        remote_base[r] = place(r, &s->remote, 0, 0) - region_start(r);
        local_block_stride[r] = s->local.block_stride;
        remote_block_stride[r] = s->remote.block_stride;
        local_row_stride[r] = s->local.row_stride;
        remote_row_stride[r] = s->remote.row_stride;
        row_bytes[r] = s->row_bytes;
        b->block_bytes += s->rows * s->row_bytes;
    }
    const kvt_template_routes routes = {.route_count = ROUTES,
                                        .local_index = index,
                                        .remote_index = index,
                                        .local_base = local_base,
                                        .remote_base = remote_base,
                                        .local_block_stride = local_block_stride,
                                        .remote_block_stride = remote_block_stride,
                                        .rows = rows,
                                        .row_bytes = row_bytes,
                                        .local_row_stride = local_row_stride,
                                        .remote_row_stride = remote_row_stride,
                                        .local_region_count = 2,
                                        .local_regions = b->local,
                                        .remote_region_count = 2,
                                        .remote_regions = b->remote,
                                        .local_block_limit = BLOCKS,
                                        .remote_block_limit = BLOCKS};
    CHECK_OK(kvt_template_register(b->reader, b->peer, b->generation, &routes, &b->template_id));
}

/* Two agents of this process with a bank of vram each, registered as two regions, the source's loaded as the
 * reader's peer, and the template of the shapes above between them. */
static banks open_banks(void) {
    banks b = {.source = make_agent("routes-source"), .reader = make_agent("routes-reader")};
    CHECK_OK(kvt_mem_alloc_vram(b.source, 0, BANK_BYTES, &b.remote_vram));
    CHECK_OK(kvt_mem_alloc_vram(b.reader, 0, BANK_BYTES, &b.local_vram));
    const uint64_t starts[2] = {0, SECOND_REGION}, lengths[2] = {SECOND_REGION, BANK_BYTES - SECOND_REGION};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(kvt_mem_register(b.source, b.remote_vram + starts[i], lengths[i], KVT_MEM_VRAM, 0, &b.remote[i]));
        CHECK_OK(kvt_mem_register(b.reader, b.local_vram + starts[i], lengths[i], KVT_MEM_VRAM, 0, &b.local[i]));
    }
    b.peer = load_peer(b.reader, b.source, &b.generation);
    register_routes(&b);
    return b;
}

static void close_banks(const banks *b) {
    CHECK_OK(kvt_template_release(b->reader, b->template_id));
    CHECK_OK(kvt_peer_unload(b->reader, b->peer));
    for (int i = 0; i < 2; i++) {
        CHECK_OK(kvt_mem_deregister(b->reader, b->local[i]));
        CHECK_OK(kvt_mem_deregister(b->source, b->remote[i]));
    }
    CHECK_OK(kvt_mem_free(b->reader, b->local_vram));
    CHECK_OK(kvt_mem_free(b->source, b->remote_vram));
    CHECK_OK(kvt_agent_destroy(b->reader));
    CHECK_OK(kvt_agent_destroy(b->source));
}

static uint8_t *download(uint64_t vram) {
    uint8_t *host = malloc(BANK_BYTES);
    CHECK(host, "out of memory");
    CHECK(kvt_cuda.MemcpyDtoHAsync(host, vram, BANK_BYTES, NULL) == KVT_CUDA_SUCCESS, "download");
    CHECK(kvt_cuda.StreamSynchronize(NULL) == KVT_CUDA_SUCCESS, "synchronize");
    return host;
}

static uint8_t *pattern(uint64_t seed) {
    uint8_t *host = malloc(BANK_BYTES);
    CHECK(host, "out of memory");
    fill_pattern(host, BANK_BYTES, seed);
    return host;
}

/* The destination bank `got` after blocks moved by the template: each route's rows of destination block
 * to_blocks[i] hold the source's (`from`, the source bank as it was) rows of from_blocks[i], and the 64
 * bytes after each row (up to the next one) hold what the destination had (`had`). */
static void check_moved(const uint8_t *got, const uint8_t *had, const uint8_t *from, bool into_local,
                        const uint32_t *to_blocks, const uint32_t *from_blocks, uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t r = 0; r < ROUTES; r++) {
            const shape *s = &shapes[r];
            const side *to_side = into_local ? &s->local : &s->remote, *from_side = into_local ? &s->remote : &s->local;
            for (uint32_t row = 0; row < s->rows; row++) {
                uint64_t to = place(r, to_side, to_blocks[i], row), at = place(r, from_side, from_blocks[i], row);
                CHECK(memcmp(got + to, from + at, s->row_bytes) == 0, "route %u row %u of block %u moved", r, row,
                      to_blocks[i]);
                uint64_t after = to + s->row_bytes, gap = row + 1 < s->rows ? to_side->row_stride - s->row_bytes : 64;
                gap = gap < 64 ? gap : 64;
                CHECK(memcmp(got + after, had + after, gap) == 0,
                      "the %llu bytes after route %u row %u of block %u stayed", (unsigned long long)gap, r, row,
                      to_blocks[i]);
            }
        }
}

/* On the fake driver: the post launched `kernel` once, over `tiles` tiles (pieces) of at most `largest`
 * bytes, and not the other gather; `before` is what fake_cuda_launches answered for both before the post. */
static void check_launched(const uint64_t before[2], const char *kernel, uint32_t tiles, uint64_t largest) {
    if (real_driver()) return;
    uint64_t (*launches)(const char *) = (uint64_t(*)(const char *))(uintptr_t)fake_symbol("fake_cuda_launches");
    bool routes = strcmp(kernel, "kvt_gather_routes") == 0;
    uint64_t gathers = launches("kvt_gather") - before[0], routed = launches("kvt_gather_routes") - before[1];
    CHECK(routed == routes && gathers == !routes,
          "one launch of %s, none of the other (%llu of kvt_gather_routes and %llu of kvt_gather)", kernel,
          (unsigned long long)routed, (unsigned long long)gathers);
    uint32_t launched = 0;
    uint64_t biggest = 0;
    ((last_launch_fn)(uintptr_t)fake_symbol("fake_cuda_last_launch"))(kernel, &launched, &biggest);
    CHECK(launched == tiles && biggest == largest, "%u tiles of at most %llu bytes (%u, the largest %llu bytes)", tiles,
          (unsigned long long)largest, launched, (unsigned long long)biggest);
}

static void launches_before(uint64_t before[2]) {
    if (real_driver()) return;
    uint64_t (*launches)(const char *) = (uint64_t(*)(const char *))(uintptr_t)fake_symbol("fake_cuda_launches");
    before[0] = launches("kvt_gather");
    before[1] = launches("kvt_gather_routes");
}

static void move_by_routes(void) {
    banks b = open_banks();
    vram_fill_pattern(b.remote_vram, BANK_BYTES, 51);
    vram_fill_pattern(b.local_vram, BANK_BYTES, 52);
    uint8_t *source = pattern(51), *reader = pattern(52);
    const uint32_t local_blocks[BLOCKS] = {0, 1, 2}, remote_blocks[BLOCKS] = {2, 0, 1};
    uint64_t op = 0, before[2] = {0, 0};
    launches_before(before);
    CHECK_OK(kvt_xfer_post_blocks(b.reader, b.template_id, KVT_XFER_READ, BLOCKS, local_blocks, remote_blocks, NULL, 0,
                                  &op));
    wait_completions_ok(b.reader, 1, BLOCKS * b.block_bytes, true);
    check_launched(before, "kvt_gather_routes", BLOCKS * TILES_PER_BLOCK, KVT_KERNEL_TILE_BYTES);
    uint8_t *got = download(b.local_vram);
    check_moved(got, reader, source, true, local_blocks, remote_blocks, BLOCKS);
    free(got);

    /* A WRITE of the reader's block 2, refilled, into the source's block 1. */
    vram_fill_pattern(b.local_vram, BANK_BYTES, 53);
    uint8_t *written = pattern(53), *source_had = download(b.remote_vram);
    const uint32_t two = 2, one = 1;
    launches_before(before);
    CHECK_OK(kvt_xfer_post_blocks(b.reader, b.template_id, KVT_XFER_WRITE, 1, &two, &one, NULL, 0, &op));
    wait_completions_ok(b.reader, 1, b.block_bytes, true);
    check_launched(before, "kvt_gather_routes", TILES_PER_BLOCK, KVT_KERNEL_TILE_BYTES);
    got = download(b.remote_vram);
    check_moved(got, source_had, written, false, &one, &two, 1);
    free(got);
    free(written);
    free(source_had);
    free(source);
    free(reader);
    close_banks(&b);
}

static void routes_of_every_shape(void) { on_driver_under_test("1", move_by_routes); }

/* `count` descriptors of the first regions READ into the reader's bank; on the fake, `kernel` moved them as
 * `tiles` tiles of at most `largest` bytes. Every byte lands, and the 64 bytes after each stay. */
static void read_descriptors(banks *b, uint32_t count, const uint64_t *local_offset, const uint64_t *remote_offset,
                             const uint64_t *length, const char *kernel, uint32_t tiles, uint64_t largest) {
    vram_fill_pattern(b->local_vram, BANK_BYTES, 55);
    uint8_t *source = pattern(51), *had = pattern(55);
    const uint32_t zero[3] = {0, 0, 0};
    uint64_t op = 0, total = 0, before[2] = {0, 0};
    for (uint32_t i = 0; i < count; i++) total += length[i];
    launches_before(before);
    CHECK_OK(kvt_xfer_post(b->reader, KVT_XFER_READ, b->peer, b->generation, count, zero, local_offset, zero,
                           remote_offset, length, 1, &b->local[0], 1, &b->remote[0], NULL, 0, &op));
    wait_completions_ok(b->reader, 1, total, true);
    check_launched(before, kernel, tiles, largest);
    uint8_t *got = download(b->local_vram);
    for (uint32_t i = 0; i < count; i++) {
        CHECK(memcmp(got + local_offset[i], source + remote_offset[i], length[i]) == 0, "descriptor %u moved", i);
        uint64_t after = local_offset[i] + length[i];
        CHECK(memcmp(got + after, had + after, 64) == 0, "the 64 bytes after descriptor %u stayed", i);
    }
    free(got);
    free(had);
    free(source);
}

static void move_descriptors(void) {
    banks b = open_banks();
    vram_fill_pattern(b.remote_vram, BANK_BYTES, 51);
    /* 9 + 5 + 6 tiles, some ends unaligned: one route each, cut on the GPU. */
    const uint64_t large_local[3] = {16, (2u << 20) + 7, (1u << 20) + (128u << 10)}, large_remote[3] = {1u << 20, 5, 0},
                   large_length[3] = {(1u << 20) + 3, 640u << 10, 768u << 10};
    read_descriptors(&b, 3, large_local, large_remote, large_length, "kvt_gather_routes", 20, KVT_KERNEL_TILE_BYTES);
    /* A tile each: pieces cut on the host. */
    const uint64_t small_local[3] = {0, 256u << 10, 512u << 10}, small_remote[3] = {512u << 10, 0, 256u << 10},
                   small_length[3] = {64u << 10, 64u << 10, 64u << 10};
    read_descriptors(&b, 3, small_local, small_remote, small_length, "kvt_gather", 3, 64u << 10);
    close_banks(&b);
}

static void large_descriptors_cut_on_the_gpu(void) { on_driver_under_test("1", move_descriptors); }

/* The source's side of the shapes above as kvt_block_routes over `regions` (two, split as the banks are). */
typedef struct {
    uint32_t index[ROUTES], rows[ROUTES];
    uint64_t base[ROUTES], block_stride[ROUTES], row_bytes[ROUTES], row_stride[ROUTES];
    kvt_block_routes routes;
} source_routes;

static void routes_over(source_routes *out, const uint32_t regions[2]) {
    for (uint32_t r = 0; r < ROUTES; r++) {
        const shape *s = &shapes[r];
        out->index[r] = r >= 3;
        out->rows[r] = s->rows;
        out->base[r] = place(r, &s->remote, 0, 0) - region_start(r);
        out->block_stride[r] = s->remote.block_stride;
        out->row_bytes[r] = s->row_bytes;
        out->row_stride[r] = s->remote.row_stride;
    }
    out->routes = (kvt_block_routes){.route_count = ROUTES,
                                     .region_index = out->index,
                                     .base = out->base,
                                     .block_stride = out->block_stride,
                                     .rows = out->rows,
                                     .row_bytes = out->row_bytes,
                                     .row_stride = out->row_stride,
                                     .region_count = 2,
                                     .regions = regions};
}

/* The rows of `blocks` as kvt_mem_checksums pieces (one group a block, ordinals in route and row order) over the
 * regions of `routes`, and the same at the host addresses of `bank` (a copy of the source's bank). */
static void sums_of_rows(uint32_t agent, const source_routes *routes, const uint32_t *blocks, uint32_t count,
                         const uint8_t *bank, uint64_t *by_call, uint64_t *on_host) {
    enum { MOST = BLOCKS * 51 }; /* 1 + 5 + 3 + 40 + 2 rows a block */
    uint32_t index[MOST] = {0}, group[MOST] = {0}, ordinal[MOST] = {0}, n = 0;
    uint64_t offset[MOST] = {0}, length[MOST] = {0};
    kvt_checksum_piece pieces[MOST];
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t r = 0, k = 0; r < ROUTES; r++)
            for (uint32_t row = 0; row < shapes[r].rows; row++, k++, n++) {
                index[n] = routes->index[r];
                offset[n] = routes->base[r] + blocks[i] * routes->block_stride[r] + row * routes->row_stride[r];
                length[n] = routes->row_bytes[r];
                group[n] = i;
                ordinal[n] = k;
                pieces[n] = (kvt_checksum_piece){.address = (uint64_t)(uintptr_t)bank + region_start(r) + offset[n],
                                                 .bytes = length[n],
                                                 .group = i,
                                                 .ordinal = k};
            }
    CHECK_OK(
        kvt_mem_checksums(agent, n, index, offset, length, group, ordinal, 2, routes->routes.regions, count, by_call));
    memset(on_host, 0, count * sizeof *on_host);
    kvt_block_checksum_on_host(pieces, n, on_host);
}

static uint64_t checksum_launches(void) {
    if (real_driver()) return 0;
    return ((uint64_t(*)(const char *))(uintptr_t)fake_symbol("fake_cuda_launches"))("kvt_block_checksum_routes");
}

/* Refusals of kvt_mem_block_checksums over `routes` that leave `untouched` as it was. */
static void refuse_block_checksums(uint32_t agent, source_routes *routes, uint32_t dram_region) {
    uint64_t untouched[BLOCKS] = {7, 7, 7};
    const uint32_t past = 100, blocks[1] = {0};
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_block_checksums(agent, &routes->routes, 1, &past, untouched));
    CHECK_DETAIL("route 0: block 100 ends at byte");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_block_checksums(agent, NULL, 1, blocks, untouched));
    CHECK_DETAIL("routes, blocks or out_sums is NULL");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_block_checksums(agent, &routes->routes, 0, blocks, untouched));
    CHECK_DETAIL("5 routes and 0 blocks");
    routes->rows[2] = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_block_checksums(agent, &routes->routes, 1, blocks, untouched));
    CHECK_DETAIL("route 2: region index 0 (table 2), 0 rows of 100 bytes");
    routes->rows[2] = shapes[2].rows;
    const uint32_t mixed[2] = {routes->routes.regions[0], dram_region};
    const uint32_t *regions = routes->routes.regions;
    routes->routes.regions = mixed;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_mem_block_checksums(agent, &routes->routes, 1, blocks, untouched));
    CHECK_DETAIL("different kinds or GPUs");
    routes->routes.regions = regions;
    CHECK(untouched[0] == 7 && untouched[1] == 7 && untouched[2] == 7, "a refusal writes no sum");
}

static void sum_by_routes(void) {
    banks b = open_banks();
    vram_fill_pattern(b.remote_vram, BANK_BYTES, 51);
    uint8_t *bank = pattern(51);
    source_routes on_gpu;
    routes_over(&on_gpu, b.remote);
    const uint32_t blocks[BLOCKS] = {2, 0, 1};
    uint64_t sums[BLOCKS], by_pieces[BLOCKS], on_host[BLOCKS], launches = checksum_launches();
    CHECK_OK(kvt_mem_block_checksums(b.source, &on_gpu.routes, BLOCKS, blocks, sums));
    if (!real_driver()) {
        uint32_t tiles = 0;
        uint64_t largest = 0;
        ((last_launch_fn)(uintptr_t)fake_symbol("fake_cuda_last_launch"))("kvt_block_checksum_routes", &tiles,
                                                                          &largest);
        CHECK(checksum_launches() - launches == 1 && tiles == BLOCKS * TILES_PER_BLOCK &&
                  largest == KVT_KERNEL_TILE_BYTES,
              "one launch of the route checksum kernel over %u tiles (%llu launches, %u tiles of at most %llu bytes)",
              BLOCKS * TILES_PER_BLOCK, (unsigned long long)(checksum_launches() - launches), tiles,
              (unsigned long long)largest);
    }
    sums_of_rows(b.source, &on_gpu, blocks, BLOCKS, bank, by_pieces, on_host);
    for (uint32_t i = 0; i < BLOCKS; i++)
        CHECK(sums[i] == by_pieces[i] && sums[i] == on_host[i],
              "block %u: by routes %016llx, by pieces %016llx, on the host %016llx", blocks[i],
              (unsigned long long)sums[i], (unsigned long long)by_pieces[i], (unsigned long long)on_host[i]);

    /* The same bytes in dram, summed on the host. */
    uint32_t dram[2];
    for (int i = 0; i < 2; i++)
        CHECK_OK(kvt_mem_register(b.source, (uint64_t)(uintptr_t)bank + (i ? SECOND_REGION : 0),
                                  i ? BANK_BYTES - SECOND_REGION : SECOND_REGION, KVT_MEM_DRAM, 0, &dram[i]));
    source_routes on_host_routes;
    routes_over(&on_host_routes, dram);
    uint64_t dram_sums[BLOCKS];
    CHECK_OK(kvt_mem_block_checksums(b.source, &on_host_routes.routes, BLOCKS, blocks, dram_sums));
    CHECK(memcmp(dram_sums, sums, sizeof sums) == 0, "dram sums as the GPU does");

    /* One byte of route 2's last (unaligned) row of block 0 changed: block 0's sum alone changes. */
    uint64_t at = place(2, &shapes[2].remote, 0, shapes[2].rows - 1) + 99;
    uint8_t flipped = bank[at] ^ 1;
    CHECK(kvt_cuda.MemcpyHtoDAsync(b.remote_vram + at, &flipped, 1, NULL) == KVT_CUDA_SUCCESS &&
              kvt_cuda.StreamSynchronize(NULL) == KVT_CUDA_SUCCESS,
          "one byte changed");
    uint64_t changed[BLOCKS];
    CHECK_OK(kvt_mem_block_checksums(b.source, &on_gpu.routes, BLOCKS, blocks, changed));
    CHECK(changed[1] != sums[1] && changed[0] == sums[0] && changed[2] == sums[2],
          "one changed byte changes its block's sum only");
    refuse_block_checksums(b.source, &on_gpu, dram[0]);
    for (int i = 0; i < 2; i++) CHECK_OK(kvt_mem_deregister(b.source, dram[i]));
    free(bank);
    close_banks(&b);
}

static void checksums_by_routes(void) { on_driver_under_test("1", sum_by_routes); }

TEST_MAIN("vram_routes", TEST(routes_of_every_shape), TEST(large_descriptors_cut_on_the_gpu), TEST(checksums_by_routes))
