/* The GPU figures of tools/gpu-check, measured on a machine with an NVIDIA GPU through the library's CUDA
 * domain (its driver loading, its kernels): one JSON object per line on stdout, a line per group of figures as
 * it is measured (an {"error"} line ends them when one fails). Not part of `make test` (a fake driver has no
 * figures); built by `make gpu-check-binaries`. The prefix is the main job's: 42 blocks of
 * Qwen3-0.6B bf16 at 64 tokens = 308,281,344 bytes, as 2,352 pieces of 128 KiB or 9,408 of 32 KiB.
 *
 * The IPC figures come from a second process that allocates the prefix and exports it as a CUDA IPC handle
 * (forked before this process touches the driver, since CUDA does not survive a fork): this process opens
 * the handle and copies out of it, with one copy and with the gather kernel (the path a same-node pull
 * takes, by the driver's calls made here), and pulls it through the library: the exporter's agent registers
 * the prefix as vram and hands over its metadata, and this process's agent READs it (ucx backend, or
 * KVT_TEST_BACKEND) as 42 blocks, 2,352 and 9,408 pieces, each pull timed from post to completion. One copy
 * from pinned host memory is the bar of a host-staged pull, which an agent created with KVT_AGENT_VRAM_STAGED
 * makes of the same 42 blocks (staged_pull_ms) and of the 2,352 pieces: the exporter copies chunks down into this
 * process's pinned bounce buffers in place (on one host; staged_in_place_share says how much of it), this process
 * copies them up. `gpu_figures preflight` only says whether a driver and a GPU answer. */
#include "harness.h"
#include "services/cuda_driver.h"
#include "services/cuda_kernels.h"
#if KVT_HAVE_UCX
#include "backends/ucx/ucx_staging.h" /* kvt_test_staged_counts */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PREFIX_BYTES 308281344ull
#define BLOCKS 42u
#define REPEATS 20
/* Host-staged pulls are timed fewer times: each moves the prefix through the host three times, which over the
 * fake driver of a dry run (a CPU machine, the figures meaningless) would take most of the part's time. */
#define STAGED_REPEATS 5

/* `text` as the characters of a JSON string (quotes and backslashes escaped, control characters dropped). */
static void print_json_text(const char *text) {
    for (const char *c = text; *c; c++)
        if ((unsigned char)*c >= 0x20) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
}

/* The {"error"} line that ends the figures: `what`, then `detail`. */
static void stop(const char *what, const char *detail) {
    printf("{\"error\": \"");
    print_json_text(what);
    print_json_text(detail);
    printf("\"}\n");
    exit(1);
}

static void fail(const char *what, CUresult result) {
    char text[256];
    kvt_cuda_error_text(result, text, sizeof text);
    char line[512];
    snprintf(line, sizeof line, "%s: ", what);
    stop(line, text);
}

#define CU(call)                                                                                                       \
    do {                                                                                                               \
        CUresult result_ = (call);                                                                                     \
        if (result_ != KVT_CUDA_SUCCESS) fail(#call, result_);                                                         \
    } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void must(kvt_status status) {
    if (status != KVT_OK) stop("", kvt_last_error_detail());
}

static void use_gpu_0(void) {
    const char *unavailable = kvt_cuda_unavailable();
    if (unavailable) stop("vram unavailable: ", unavailable);
    must(kvt_cuda_use_device("gpu_figures", 0));
}

static CUdeviceptr device_alloc(uint64_t bytes) {
    CUdeviceptr pointer = 0;
    CU(kvt_cuda.MemAlloc(&pointer, (size_t)bytes));
    return pointer;
}

/* The exporting process: allocates the prefix, fills it, hands its IPC handle over `to_parent` and holds
 * it until a byte arrives on `from_parent`. */
static void exporter(int to_parent, int from_parent) {
    use_gpu_0();
    CUdeviceptr prefix = device_alloc(PREFIX_BYTES);
    uint8_t *host = malloc(1 << 20);
    for (uint32_t i = 0; i < 1 << 20; i++) host[i] = (uint8_t)(i * 2654435761u >> 24);
    for (uint64_t at = 0; at < PREFIX_BYTES; at += 1 << 20) CU(kvt_cuda.MemcpyHtoDAsync(prefix + at, host, 1 << 20, 0));
    CU(kvt_cuda.StreamSynchronize(0));
    CUipcMemHandle handle;
    CU(kvt_cuda.IpcGetMemHandle(&handle, prefix));
    uint32_t agent = make_agent("figures-source"), region = 0;
    must(kvt_mem_register(agent, prefix, PREFIX_BYTES, KVT_MEM_VRAM, 0, &region));
    uint64_t length = 0;
    must(kvt_agent_metadata(agent, NULL, 0, &length));
    uint8_t *blob = malloc(length);
    must(kvt_agent_metadata(agent, blob, length, &length));
    if (write(to_parent, &handle, sizeof handle) != (ssize_t)sizeof handle ||
        write(to_parent, &length, sizeof length) != (ssize_t)sizeof length ||
        write(to_parent, blob, length) != (ssize_t)length)
        exit(1);
    char done;
    if (read(from_parent, &done, 1) != 1) exit(1);
    must(kvt_mem_deregister(agent, region));
    must(kvt_agent_destroy(agent));
    free(blob);
    CU(kvt_cuda.MemFree(prefix));
    free(host);
    exit(0);
}

typedef void (*timed_work)(CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count,
                           CUstream stream);

static void one_copy(CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count, CUstream stream) {
    (void)table;
    (void)count;
    CU(kvt_cuda.MemcpyDtoDAsync(destination, source, PREFIX_BYTES, stream));
}

/* `source` is pinned host memory here. */
static void host_copy(CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count, CUstream stream) {
    (void)table;
    (void)count;
    CU(kvt_cuda.MemcpyHtoDAsync(destination, (const void *)(uintptr_t)source, PREFIX_BYTES, stream));
}

/* `destination` is pinned host memory here. */
static void to_host_copy(CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count,
                         CUstream stream) {
    (void)table;
    (void)count;
    CU(kvt_cuda.MemcpyDtoHAsync((void *)(uintptr_t)destination, source, PREFIX_BYTES, stream));
}

static void gather(CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count, CUstream stream) {
    (void)destination;
    (void)source;
    must(kvt_cuda_gather("gpu_figures", 0, table, count, stream));
}

/* The routes of the prefix as `count` blocks of ROUTES pieces for kvt_gather_routes (one tile each) and the block
 * pairs, mirrored as piece_table mirrors them: uploaded, the routes first. */
#define ROUTES 56u
static CUdeviceptr route_table(CUdeviceptr destination, CUdeviceptr source, uint32_t count, CUstream stream) {
    const uint64_t block_bytes = PREFIX_BYTES / count, piece_bytes = block_bytes / ROUTES;
    const size_t routes_bytes = ROUTES * sizeof(kvt_gather_route),
                 bytes = routes_bytes + count * sizeof(kvt_gather_block_pair);
    uint8_t *table = malloc(bytes);
    for (uint32_t r = 0; r < ROUTES; r++) {
        kvt_gather_route route = {.source = source + r * piece_bytes,
                                  .destination = destination + r * piece_bytes,
                                  .source_block_stride = block_bytes,
                                  .destination_block_stride = block_bytes,
                                  .source_row_stride = piece_bytes,
                                  .destination_row_stride = piece_bytes,
                                  .row_bytes = piece_bytes,
                                  .first_tile = r,
                                  .rows = 1};
        (void)kvt_gather_route_tile(&route); /* a tile: the pieces are 128 KiB or 32 KiB */
        memcpy(table + r * sizeof route, &route, sizeof route);
    }
    for (uint32_t i = 0; i < count; i++) {
        const kvt_gather_block_pair pair = {.source = i, .destination = count - 1 - i};
        memcpy(table + routes_bytes + i * sizeof pair, &pair, sizeof pair);
    }
    CUdeviceptr uploaded = device_alloc(bytes);
    CU(kvt_cuda.MemcpyHtoDAsync(uploaded, table, bytes, stream));
    CU(kvt_cuda.StreamSynchronize(stream));
    free(table);
    return uploaded;
}

/* kvt_gather_routes alone over route_table's `count` blocks at `table`. */
static void gather_routes(CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count,
                          CUstream stream) {
    (void)destination;
    (void)source;
    must(kvt_cuda_gather_routes("gpu_figures", 0, table, ROUTES, table + ROUTES * sizeof(kvt_gather_route), count,
                                ROUTES, stream));
}

/* Milliseconds one run of `work` takes, the mean of REPEATS after two warm-up runs. */
static double time_ms(timed_work work, CUdeviceptr destination, CUdeviceptr source, CUdeviceptr table, uint32_t count,
                      CUstream stream) {
    for (int i = 0; i < 2; i++) work(destination, source, table, count, stream);
    CU(kvt_cuda.StreamSynchronize(stream));
    double start = now_ms();
    for (int i = 0; i < REPEATS; i++) work(destination, source, table, count, stream);
    CU(kvt_cuda.StreamSynchronize(stream));
    return (now_ms() - start) / REPEATS;
}

/* A piece table of `count` equal pieces, each to the mirrored place (the last piece first), uploaded. */
static CUdeviceptr piece_table(CUdeviceptr destination, CUdeviceptr source, uint32_t count, CUstream stream) {
    kvt_gather_piece *pieces = malloc(count * sizeof *pieces);
    uint64_t bytes = PREFIX_BYTES / count;
    for (uint32_t i = 0; i < count; i++)
        pieces[i] = (kvt_gather_piece){source + i * bytes, destination + (count - 1 - i) * bytes, bytes};
    CUdeviceptr table = device_alloc(count * sizeof *pieces);
    CU(kvt_cuda.MemcpyHtoDAsync(table, pieces, count * sizeof *pieces, stream));
    CU(kvt_cuda.StreamSynchronize(stream));
    free(pieces);
    return table;
}

/* One copy of the prefix from pinned host memory to the device (`device`): what a host-staged pull is held to;
 * and one the other way into *out_d2h_ms, what the source's side of a staged pull does. */
static double pinned_h2d_ms(CUdeviceptr device, CUstream stream, double *out_d2h_ms) {
    void *host = NULL;
    CU(kvt_cuda.MemHostAlloc(&host, PREFIX_BYTES, 0));
    memset(host, 0x5a, PREFIX_BYTES);
    double ms = time_ms(host_copy, device, (CUdeviceptr)(uintptr_t)host, 0, 0, stream);
    *out_d2h_ms = time_ms(to_host_copy, (CUdeviceptr)(uintptr_t)host, device, 0, 0, stream);
    CU(kvt_cuda.MemFreeHost(host));
    return ms;
}

/* Checksum throughput over the prefix in GB/s: by the pieces kernel over 2,352 pieces in 42 groups (`rows` 0), or by
 * the route kernel over 42 blocks of 56 routes of 128 KiB (one per layer and K/V plane) as `rows` rows each (1: a
 * row a tile; 4: rows of 32 KiB, as a TP split by heads makes them, four to a tile), as a verification sums a pull's
 * blocks. The kernel's time alone, the mean of REPEATS after two warm-up runs. */
static double checksum_gbytes_per_s(CUdeviceptr prefix, CUstream stream, uint32_t rows) {
    const bool by_routes = rows > 0;
    enum { PIECES = BLOCKS * ROUTES };
    const uint64_t piece_bytes = PREFIX_BYTES / PIECES;
    kvt_checksum_piece pieces[PIECES];
    kvt_checksum_route routes[ROUTES];
    uint32_t blocks[BLOCKS];
    kvt_route_tiling tiling;
    uint64_t tiles_per_block = 0;
    for (uint32_t i = 0; i < PIECES; i++)
        pieces[i] = (kvt_checksum_piece){
            .address = prefix + i * piece_bytes, .bytes = piece_bytes, .group = i % BLOCKS, .ordinal = i / BLOCKS};
    for (uint32_t r = 0; r < ROUTES; r++) {
        const uint64_t row_bytes = by_routes ? piece_bytes / rows : piece_bytes;
        uint64_t tiles = kvt_route_tiling_of(by_routes ? rows : 1, row_bytes, &tiling);
        routes[r] = (kvt_checksum_route){.address = prefix + r * piece_bytes,
                                         .block_stride = ROUTES * piece_bytes,
                                         .row_stride = row_bytes,
                                         .row_bytes = row_bytes,
                                         .first_tile = tiles_per_block,
                                         .first_ordinal = r * (by_routes ? rows : 1),
                                         .rows = by_routes ? rows : 1,
                                         .rows_per_tile = tiling.rows_per_tile,
                                         .chunks_per_row = tiling.chunks_per_row,
                                         .chunk_bytes = tiling.chunk_bytes};
        tiles_per_block += tiles;
    }
    for (uint32_t b = 0; b < BLOCKS; b++) blocks[b] = BLOCKS - 1 - b;
    const uint64_t table_bytes = by_routes ? sizeof routes + sizeof blocks : sizeof pieces;
    CUdeviceptr table = device_alloc(table_bytes), sums = device_alloc(BLOCKS * sizeof(uint64_t));
    if (by_routes) {
        CU(kvt_cuda.MemcpyHtoDAsync(table, routes, sizeof routes, stream));
        CU(kvt_cuda.MemcpyHtoDAsync(table + sizeof routes, blocks, sizeof blocks, stream));
    } else {
        CU(kvt_cuda.MemcpyHtoDAsync(table, pieces, sizeof pieces, stream));
    }
    double start = 0;
    for (int i = -2; i < REPEATS; i++) {
        if (i == 0) {
            CU(kvt_cuda.StreamSynchronize(stream));
            start = now_ms();
        }
        if (by_routes)
            must(kvt_cuda_block_checksum_routes("gpu_figures", 0, table, ROUTES, table + sizeof routes, BLOCKS,
                                                tiles_per_block, sums, stream));
        else
            must(kvt_cuda_block_checksum("gpu_figures", 0, table, PIECES, sums, stream));
    }
    CU(kvt_cuda.StreamSynchronize(stream));
    double ms = (now_ms() - start) / REPEATS;
    CU(kvt_cuda.MemFree(table));
    CU(kvt_cuda.MemFree(sums));
    return (double)PREFIX_BYTES / (ms * 1e6);
}

/* Milliseconds one READ of `total` bytes of the prefix as `count` equal pieces (mirrored, as piece_table) takes
 * through the library, post to completion: the mean of `repeats` after one warm-up. */
static double pull_ms(uint32_t agent, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                      uint32_t count, uint64_t total, int repeats) {
    uint32_t *zero = calloc(count, sizeof *zero);
    uint64_t *local_offset = malloc(count * sizeof *local_offset),
             *remote_offset = malloc(count * sizeof *remote_offset), *length = malloc(count * sizeof *length),
             bytes = total / count;
    for (uint32_t i = 0; i < count; i++) {
        remote_offset[i] = i * bytes;
        local_offset[i] = (count - 1 - i) * bytes;
        length[i] = bytes;
    }
    double start = 0;
    for (int i = -1; i < repeats; i++) {
        if (i == 0) start = now_ms();
        uint64_t op = 0;
        must(kvt_xfer_post(agent, KVT_XFER_READ, peer, generation, count, zero, local_offset, zero, remote_offset,
                           length, 1, &local, 1, &remote, NULL, 0, &op));
        wait_completions_ok(agent, 1, total, true);
    }
    double ms = (now_ms() - start) / repeats;
    free(zero);
    free(local_offset);
    free(remote_offset);
    free(length);
    return ms;
}

/* Milliseconds one READ of the prefix as `blocks` blocks of 56 pieces (one per layer and K/V plane of
 * Qwen3-0.6B's 28 layers) takes posted by template (kvt_xfer_post_blocks, the template expanded on the GPU),
 * post to completion, the blocks mirrored: the mean of REPEATS after one warm-up. */
static double template_pull_ms(uint32_t agent, uint32_t peer, uint64_t generation, uint32_t local, uint32_t remote,
                               uint32_t blocks) {
    uint64_t block_bytes = PREFIX_BYTES / blocks, base[ROUTES], stride[ROUTES], piece[ROUTES];
    uint32_t index[ROUTES], rows[ROUTES];
    for (uint32_t r = 0; r < ROUTES; r++) {
        index[r] = 0;
        rows[r] = 1;
        piece[r] = block_bytes / ROUTES;
        base[r] = r * piece[r];
        stride[r] = block_bytes;
    }
    const kvt_template_routes routes = {.route_count = ROUTES,
                                        .local_index = index,
                                        .remote_index = index,
                                        .local_base = base,
                                        .remote_base = base,
                                        .local_block_stride = stride,
                                        .remote_block_stride = stride,
                                        .rows = rows,
                                        .row_bytes = piece,
                                        .local_row_stride = piece,
                                        .remote_row_stride = piece,
                                        .local_region_count = 1,
                                        .local_regions = &local,
                                        .remote_region_count = 1,
                                        .remote_regions = &remote,
                                        .local_block_limit = blocks,
                                        .remote_block_limit = blocks};
    uint32_t template_id = 0, *local_blocks = malloc(2 * blocks * sizeof *local_blocks);
    uint32_t *remote_blocks = local_blocks + blocks;
    for (uint32_t i = 0; i < blocks; i++) {
        local_blocks[i] = blocks - 1 - i;
        remote_blocks[i] = i;
    }
    must(kvt_template_register(agent, peer, generation, &routes, &template_id));
    double start = 0;
    for (int i = -1; i < REPEATS; i++) {
        if (i == 0) start = now_ms();
        uint64_t op = 0;
        must(
            kvt_xfer_post_blocks(agent, template_id, KVT_XFER_READ, blocks, local_blocks, remote_blocks, NULL, 0, &op));
        wait_completions_ok(agent, 1, PREFIX_BYTES, true);
    }
    double ms = (now_ms() - start) / REPEATS;
    must(kvt_template_release(agent, template_id));
    free(local_blocks);
    return ms;
}

/* The share of the bytes `agent` moved that sources wrote into its bounce buffers in place (host-staged), or -1
 * when this build cannot tell. */
static double in_place_share(uint32_t agent) {
#if KVT_HAVE_UCX
    uint64_t moved = counter(agent, KVT_COUNTER_BYTES_MOVED);
    kvt_staged_counts counts;
    if (kvt_test_staged_counts(agent, &counts) == KVT_OK && moved > 0) return (double)counts.in_place_bytes / moved;
#else
    (void)agent;
#endif
    return -1;
}

/* The library's pulls of the exporter's prefix (its metadata `blob`) into `destination` by an agent created
 * with `flags`: as 42, 2,352 and 9,408 pieces by descriptors (`count` of them into out_ms); then, unless NULL,
 * one piece of 4 KiB (into *out_fixed_ms: what a vram pull costs beside its bytes) and the 2,352 and 9,408
 * pieces by template (into out_template_ms). */
static void library_pulls(CUdeviceptr destination, const uint8_t *blob, uint64_t length, uint32_t flags, uint32_t count,
                          double *out_ms, double *out_fixed_ms, double *out_template_ms, double *out_in_place_share) {
    uint32_t agent = 0, local = 0, peer = 0, remote = 0, regions = 0;
    uint64_t generation = 0;
    must(kvt_agent_create(flags ? "figures-staged-reader" : "figures-reader", test_backend, flags, &agent));
    must(kvt_mem_register(agent, destination, PREFIX_BYTES, KVT_MEM_VRAM, 0, &local));
    must(kvt_peer_load(agent, blob, length, &peer, &generation));
    must(kvt_peer_regions(agent, peer, 1, &remote, NULL, NULL, NULL, NULL, &regions));
    const uint32_t pieces[3] = {BLOCKS, 2352, 9408};
    for (uint32_t i = 0; i < count; i++)
        out_ms[i] =
            pull_ms(agent, peer, generation, local, remote, pieces[i], PREFIX_BYTES, flags ? STAGED_REPEATS : REPEATS);
    if (out_fixed_ms) *out_fixed_ms = pull_ms(agent, peer, generation, local, remote, 1, 4096, REPEATS);
    if (out_template_ms) {
        out_template_ms[0] = template_pull_ms(agent, peer, generation, local, remote, BLOCKS);
        out_template_ms[1] = template_pull_ms(agent, peer, generation, local, remote, 4 * BLOCKS); /* 16 tokens */
    }
    if (out_in_place_share) *out_in_place_share = in_place_share(agent);
    must(kvt_peer_unload(agent, peer));
    must(kvt_mem_deregister(agent, local));
    must(kvt_agent_destroy(agent));
}

/* `gpu_figures preflight`: whether the library sees a driver and a GPU, as one JSON object; exits 0 when it
 * does, 2 when not (the reason says what is missing). Touches no memory, so the figures run fresh after it. */
static int preflight(void) {
    const char *unavailable = kvt_cuda_unavailable();
    printf("{\"vram\": %s, \"reason\": \"", unavailable ? "false" : "true");
    print_json_text(unavailable ? unavailable : "");
    printf("\", \"devices\": %u, \"driver_version\": %d}\n", kvt_cuda_device_count(), kvt_cuda_driver_version());
    return unavailable ? 2 : 0;
}

/* The exporter's IPC handle and metadata blob, as it wrote them on `from`. */
static uint8_t *receive_export(int from, CUipcMemHandle *handle, uint64_t *blob_length) {
    if (read(from, handle, sizeof *handle) != (ssize_t)sizeof *handle ||
        read(from, blob_length, sizeof *blob_length) != (ssize_t)sizeof *blob_length)
        exit(1);
    uint8_t *blob = malloc(*blob_length);
    for (uint64_t got = 0; got < *blob_length;) {
        ssize_t n = read(from, blob + got, *blob_length - got);
        if (n <= 0) exit(1);
        got += (uint64_t)n;
    }
    return blob;
}

/* The figures are printed a line (one JSON object) at a time, as each group of them is measured, and flushed: a
 * later group that fails (its {"error"} line ends the output) leaves the earlier ones standing. */
static void print_copies(double d2d, const double gathers[2], const double routes[2], double pinned_h2d,
                         double pinned_d2h) {
    printf(
        "{\"prefix_bytes\": %llu, \"d2d_ms\": %.4f, \"gather_2352x128KiB_ms\": %.4f, \"gather_9408x32KiB_ms\": %.4f, "
        "\"gather_routes_2352x128KiB_ms\": %.4f, \"gather_routes_9408x32KiB_ms\": %.4f, \"pinned_h2d_ms\": %.4f, "
        "\"pinned_d2h_ms\": %.4f, \"ratios\": {\"gather_2352_vs_d2d\": %.3f, \"gather_9408_vs_d2d\": %.3f, "
        "\"gather_routes_2352_vs_d2d\": %.3f, \"gather_routes_9408_vs_d2d\": %.3f}}\n",
        PREFIX_BYTES, d2d, gathers[0], gathers[1], routes[0], routes[1], pinned_h2d, pinned_d2h, d2d / gathers[0],
        d2d / gathers[1], d2d / routes[0], d2d / routes[1]);
    fflush(stdout);
}

/* verify: by routes of a row, of four rows, by pieces (checksum_gbytes_per_s). */
static void print_ipc(double d2d, double ipc_copy, double ipc_gather, const double verify[3]) {
    printf("{\"ipc_copy_ms\": %.4f, \"ipc_gather_2352x128KiB_ms\": %.4f, \"verify_gbytes_per_s\": %.1f, "
           "\"verify_grouped_rows_gbytes_per_s\": %.1f, \"verify_pieces_gbytes_per_s\": %.1f, \"ratios\": "
           "{\"ipc_copy_vs_d2d\": %.3f, \"ipc_gather_2352_vs_d2d\": %.3f}}\n",
           ipc_copy, ipc_gather, verify[0], verify[1], verify[2], d2d / ipc_copy, d2d / ipc_gather);
    fflush(stdout);
}

static void print_pulls(double d2d, const double pulls[3], double pull_4k, const double template_pulls[2]) {
    printf("{\"pull_42x7MiB_ms\": %.4f, \"pull_2352x128KiB_ms\": %.4f, \"pull_9408x32KiB_ms\": %.4f, "
           "\"pull_1x4KiB_ms\": %.4f, \"template_pull_2352x128KiB_ms\": %.4f, \"template_pull_9408x32KiB_ms\": %.4f, "
           "\"pull_ratios\": {\"pull_42_vs_d2d\": %.3f, \"pull_2352_vs_d2d\": %.3f, \"pull_9408_vs_d2d\": %.3f, "
           "\"template_pull_2352_vs_d2d\": %.3f, \"template_pull_9408_vs_d2d\": %.3f}}\n",
           pulls[0], pulls[1], pulls[2], pull_4k, template_pulls[0], template_pulls[1], d2d / pulls[0], d2d / pulls[1],
           d2d / pulls[2], d2d / template_pulls[0], d2d / template_pulls[1]);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "preflight") == 0) return preflight();
    const char *backend = getenv("KVT_TEST_BACKEND");
    test_backend = backend && strcmp(backend, "loopback") == 0 ? KVT_BACKEND_LOOPBACK : KVT_BACKEND_UCX;
    int to_parent[2], from_parent[2];
    if (pipe(to_parent) != 0 || pipe(from_parent) != 0) return 1;
    pid_t child = fork();
    if (child == 0) exporter(to_parent[1], from_parent[0]);
    use_gpu_0();
    CUstream stream = NULL;
    CU(kvt_cuda.StreamCreate(&stream, KVT_CU_STREAM_NON_BLOCKING));
    CUdeviceptr source = device_alloc(PREFIX_BYTES), destination = device_alloc(PREFIX_BYTES);
    CUdeviceptr table_128k = piece_table(destination, source, 2352, stream);
    CUdeviceptr table_32k = piece_table(destination, source, 9408, stream);
    CUdeviceptr routes_128k = route_table(destination, source, BLOCKS, stream);
    CUdeviceptr routes_32k = route_table(destination, source, 4 * BLOCKS, stream); /* 16 tokens a block */
    double d2d = time_ms(one_copy, destination, source, 0, 0, stream), pinned_d2h = 0;
    const double gathers[2] = {time_ms(gather, destination, source, table_128k, 2352, stream),
                               time_ms(gather, destination, source, table_32k, 9408, stream)};
    const double routes[2] = {time_ms(gather_routes, destination, source, routes_128k, BLOCKS, stream),
                              time_ms(gather_routes, destination, source, routes_32k, 4 * BLOCKS, stream)};
    double pinned_h2d = pinned_h2d_ms(destination, stream, &pinned_d2h);
    print_copies(d2d, gathers, routes, pinned_h2d, pinned_d2h);

    CUipcMemHandle handle;
    uint64_t blob_length = 0;
    uint8_t *blob = receive_export(to_parent[0], &handle, &blob_length);
    CUdeviceptr remote = 0;
    CU(kvt_cuda.IpcOpenMemHandle(&remote, handle, KVT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CUdeviceptr table_ipc = piece_table(destination, remote, 2352, stream);
    double ipc_copy = time_ms(one_copy, destination, remote, 0, 0, stream);
    double ipc_gather = time_ms(gather, destination, remote, table_ipc, 2352, stream);
    const double verify[3] = {checksum_gbytes_per_s(destination, stream, 1),
                              checksum_gbytes_per_s(destination, stream, 4),
                              checksum_gbytes_per_s(destination, stream, 0)};
    print_ipc(d2d, ipc_copy, ipc_gather, verify);
    CU(kvt_cuda.IpcCloseMemHandle(remote)); /* the library opens the handle itself */

    double pulls[3], pull_4k = 0, template_pulls[2], staged[2] = {0, 0};
    library_pulls(destination, blob, blob_length, 0, 3, pulls, &pull_4k, template_pulls, NULL);
    print_pulls(d2d, pulls, pull_4k, template_pulls);
    /* The same 42 blocks host-staged (KVT_AGENT_VRAM_STAGED): what a peer on another host gets; and the 2,352
     * pieces, 32 to a chunk, which each side packs or unpacks with a gather launch. */
    double share = -1;
    library_pulls(destination, blob, blob_length, KVT_AGENT_VRAM_STAGED, 2, staged, NULL, NULL, &share);
    printf("{\"staged_pull_ms\": %.4f, \"staged_pull_2352x128KiB_ms\": %.4f, \"staged_in_place_share\": %.3f}\n",
           staged[0], staged[1], share);
    fflush(stdout);
    free(blob);
    CUdeviceptr mine[] = {source, destination, table_128k, table_32k, table_ipc, routes_128k, routes_32k};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) CU(kvt_cuda.MemFree(mine[i]));
    CU(kvt_cuda.StreamDestroy(stream));
    if (write(from_parent[1], "x", 1) != 1) return 1;
    int status = 0;
    waitpid(child, &status, 0);
    printf("{\"exporter_exit\": %d}\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
