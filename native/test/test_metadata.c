/* Metadata blobs and peers: export, load, generations, invalidation, replacement, and a fuzzer
 * (every truncation, random byte flips and random garbage) that must be refused without crashing. */
#include "harness.h"
#include "metadata.h"             /* kvt_metadata_parse: mutations are resealed and parsed directly */
#include "services/cuda_memory.h" /* kvt_vram_key */
#include "services/util.h"        /* kvt_crc32 */

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static uint8_t *export_blob(uint32_t agent, uint64_t *out_length) {
    uint64_t length = 0;
    CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &length));
    uint8_t *blob = malloc(length);
    CHECK(blob != NULL, "out of memory");
    uint64_t small = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_agent_metadata(agent, blob, length - 1, &small));
    CHECK(small == length, "a too-small buffer still reports the size");
    CHECK_OK(kvt_agent_metadata(agent, blob, length, &length));
    *out_length = length;
    return blob;
}

/* The peer 'meta-source' as `reader` finds it: by name, its region, and the path to it in words. */
static void check_advertised(uint32_t reader, uint32_t peer, uint32_t region, const uint8_t *memory) {
    uint32_t found = 0;
    CHECK_OK(kvt_peer_find(reader, "meta-source", &found, NULL));
    CHECK(found == peer, "found by name");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_find(reader, "nobody", &found, NULL));
    CHECK(counter(reader, KVT_COUNTER_LIVE_PEERS) == 1, "one live peer");
    uint32_t ids[4], kinds[4], devices[4], count = 0;
    uint64_t addresses[4], lengths[4];
    CHECK_OK(kvt_peer_regions(reader, peer, 4, ids, addresses, lengths, kinds, devices, &count));
    CHECK(count == 1 && ids[0] == region && addresses[0] == (uint64_t)(uintptr_t)memory && lengths[0] == 65536 &&
              kinds[0] == KVT_MEM_DRAM && devices[0] == 0,
          "the advertised region");
    CHECK_OK(kvt_peer_regions(reader, peer, 0, NULL, NULL, NULL, NULL, NULL, &count));
    CHECK(count == 1, "count only");
    char path[4096];
    uint32_t path_length = 0;
    CHECK_OK(kvt_peer_transport(reader, peer, path, sizeof path, &path_length));
    CHECK(path_length > 0 && strlen(path) == (path_length < sizeof path ? path_length : sizeof path - 1),
          "a description of %u bytes", path_length);
    CHECK(strstr(path, test_backend == KVT_BACKEND_UCX ? "posix" : "loopback") != NULL, "the path: %s", path);
    char small[8];
    CHECK_OK(kvt_peer_transport(reader, peer, small, sizeof small, &path_length));
    CHECK(strlen(small) == sizeof small - 1, "truncated and terminated");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_regions(reader, peer + 9, 4, ids, NULL, NULL, NULL, NULL, &count));
}

/* A source agent with one 64 KiB dram region, and a reader that loaded the source's blob as `peer`. */
typedef struct {
    uint32_t source, reader, region, peer;
    uint8_t *memory, *blob;
    uint64_t length, generation;
} loaded_pair;

static loaded_pair load_pair(const char *source_name, const char *reader_name) {
    loaded_pair pair = {.source = make_agent(source_name), .reader = make_agent(reader_name)};
    pair.region = alloc_region(pair.source, 65536, &pair.memory);
    pair.blob = export_blob(pair.source, &pair.length);
    CHECK_OK(kvt_peer_load(pair.reader, pair.blob, pair.length, &pair.peer, &pair.generation));
    return pair;
}

static void export_and_load(void) {
    loaded_pair pair = load_pair("meta-source", "meta-reader");
    uint32_t source = pair.source, reader = pair.reader, region = pair.region, peer = pair.peer;
    uint8_t *memory = pair.memory, *blob = pair.blob;
    uint64_t length = pair.length, generation = pair.generation;
    CHECK(memcmp(blob, "KVTM", 4) == 0, "magic");
    CHECK(memmem(blob, length, "meta-source", 11) != NULL, "the blob names its agent");
    CHECK(generation == 1, "first generation is 1 (got %llu)", (unsigned long long)generation);
    uint32_t state = 9, regions = 0;
    CHECK_OK(kvt_peer_info(reader, peer, &generation, &state, &regions));
    CHECK(state == KVT_PEER_READY && regions == 1, "ready with one region");
    check_advertised(reader, peer, region, memory);
    uint32_t found = 0;

    /* The same blob again is a no-op. */
    uint64_t again = 0;
    CHECK_OK(kvt_peer_load(reader, blob, length, &found, &again));
    CHECK(found == peer && again == generation, "no-op reload keeps id and generation");

    /* A newer blob of the same agent (after another registration) replaces it and bumps the generation. */
    uint8_t *memory2;
    uint32_t region2 = alloc_region(source, 4096, &memory2);
    uint64_t newer_length;
    uint8_t *newer = export_blob(source, &newer_length);
    CHECK_OK(kvt_peer_load(reader, newer, newer_length, &found, &again));
    CHECK(found == peer && again == generation + 1, "replacement bumps the generation");
    CHECK_OK(kvt_peer_info(reader, peer, NULL, NULL, &regions));
    CHECK(regions == 2, "the newer blob's regions");
    /* The older blob of the same incarnation is refused. */
    CHECK_STATUS(KVT_ERR_MISMATCH, kvt_peer_load(reader, blob, length, &found, &again));
    CHECK_DETAIL("older than the loaded");

    /* An operation prepared against the old generation is refused. */
    uint8_t *local;
    uint32_t local_region = alloc_region(reader, 4096, &local);
    uint64_t op;
    CHECK_STATUS(KVT_ERR_NOT_FOUND,
                 post_one(reader, KVT_XFER_READ, peer, generation, local_region, 0, region, 0, 4096, &op));
    CHECK_DETAIL("stale");

    /* Invalidation bumps the generation and refuses posts until reloaded. */
    CHECK_OK(kvt_peer_invalidate(reader, peer));
    uint64_t invalidated = 0;
    CHECK_OK(kvt_peer_info(reader, peer, &invalidated, &state, NULL));
    CHECK(invalidated == again + 1 && state == KVT_PEER_INVALIDATED, "invalidated at a new generation");
    uint32_t ids[4], count = 0;
    CHECK_OK(kvt_peer_regions(reader, peer, 4, ids, NULL, NULL, NULL, NULL, &count));
    CHECK(count == 0, "an invalidated peer advertises nothing");
    char path[64];
    uint32_t path_length = 0;
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_transport(reader, peer, path, sizeof path, &path_length));
    CHECK_STATUS(KVT_ERR_NOT_FOUND,
                 post_one(reader, KVT_XFER_READ, peer, invalidated, local_region, 0, region, 0, 4096, &op));
    CHECK_DETAIL("invalidated");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_notify_send(reader, peer, invalidated, (const uint8_t *)"x", 1));
    uint64_t reloaded = 0;
    CHECK_OK(kvt_peer_load(reader, newer, newer_length, &found, &reloaded));
    CHECK(found == peer && reloaded == invalidated + 1, "reload after invalidation");
    CHECK_OK(post_one(reader, KVT_XFER_READ, peer, reloaded, local_region, 0, region, 0, 4096, &op));
    CHECK(wait_op(reader, op, NULL) == KVT_OK, "read after reload");
    CHECK_OK(kvt_xfer_release(reader, op));

    CHECK_OK(kvt_peer_unload(reader, peer));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_info(reader, peer, NULL, NULL, NULL));
    free(blob);
    free(newer);
    free_region(reader, local_region, local);
    free_region(source, region, memory);
    free_region(source, region2, memory2);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
}

static void new_incarnation_replaces(void) {
    uint32_t reader = make_agent("inc-reader");
    uint32_t source = make_agent("inc-source");
    uint64_t first_length;
    uint8_t *first = export_blob(source, &first_length);
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(reader, first, first_length, &peer, &generation));
    CHECK_OK(kvt_agent_destroy(source));
    source = make_agent("inc-source"); /* same name, new incarnation, metadata generation restarts */
    uint64_t second_length;
    uint8_t *second = export_blob(source, &second_length);
    uint32_t again;
    uint64_t newer;
    CHECK_OK(kvt_peer_load(reader, second, second_length, &again, &newer));
    CHECK(again == peer && newer == generation + 1, "a new incarnation replaces the peer");
    free(first);
    free(second);
    CHECK_OK(kvt_agent_destroy(source));
    CHECK_OK(kvt_agent_destroy(reader));
}

static void refuses_other_backend_and_garbage(void) {
    uint32_t reader = make_agent("garbage-reader");
    uint32_t peer;
    uint64_t generation;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_load(reader, NULL, 10, &peer, &generation));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_load(reader, (const uint8_t *)"KVTM", 4, &peer, &generation));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_peer_load(reader, (const uint8_t *)"NOPE-NOPE-NOPE", 14, &peer, &generation));
    CHECK_DETAIL("bad magic");
    uint32_t other_backend = test_backend == KVT_BACKEND_UCX ? KVT_BACKEND_LOOPBACK : KVT_BACKEND_UCX;
    uint32_t other = 0;
    if (kvt_agent_create("other-backend", other_backend, 0, &other) == KVT_OK) {
        uint64_t length;
        uint8_t *blob = export_blob(other, &length);
        CHECK_STATUS(KVT_ERR_MISMATCH, kvt_peer_load(reader, blob, length, &peer, &generation));
        CHECK_DETAIL("backend");
        free(blob);
        CHECK_OK(kvt_agent_destroy(other));
    }
    CHECK_OK(kvt_agent_destroy(reader));
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Loads a damaged `blob`: the length, magic and checksum checks refuse it cleanly (ASan catches a read out
 * of bounds), and nothing is loaded. */
static void load_is_refused(uint32_t reader, const uint8_t *blob, uint64_t length) {
    uint32_t peer;
    uint64_t generation;
    kvt_status status = kvt_peer_load(reader, blob, length, &peer, &generation);
    CHECK(status == KVT_ERR_INVALID_PARAM, "a damaged blob of %llu bytes: %s (%s), expected INVALID_PARAM",
          (unsigned long long)length, kvt_status_name(status), kvt_last_error_detail());
    CHECK(counter(reader, KVT_COUNTER_LIVE_PEERS) == 0, "the refused blob left a peer");
}

/* An agent with two allocated regions, and its exported blob: what both fuzzers mutate. */
typedef struct {
    uint32_t agent, regions[2];
    uint8_t *memory[2];
    uint8_t *blob;
    uint64_t length;
} fuzz_source;

static fuzz_source open_fuzz_source(const char *name) {
    fuzz_source source = {.agent = make_agent(name)};
    source.regions[0] = alloc_region(source.agent, 8192, &source.memory[0]);
    source.regions[1] = alloc_region(source.agent, 4096, &source.memory[1]);
    source.blob = export_blob(source.agent, &source.length);
    return source;
}

static void close_fuzz_source(fuzz_source *source) {
    free(source->blob);
    for (int i = 0; i < 2; i++) free_region(source->agent, source->regions[i], source->memory[i]);
    CHECK_OK(kvt_agent_destroy(source->agent));
}

static void fuzzed_blobs_are_refused(void) {
    fuzz_source source = open_fuzz_source("fuzz-source");
    uint32_t reader = make_agent("fuzz-reader");
    const uint8_t *blob = source.blob;
    uint64_t length = source.length;
    uint8_t *copy = malloc(length);
    for (uint64_t cut = 0; cut < length; cut++) load_is_refused(reader, blob, cut);
    int rounds = test_under_valgrind ? 300 : 3000;
    for (int i = 0; i < rounds; i++) {
        memcpy(copy, blob, length);
        int flips = 1 + (int)(next_random() % 4);
        for (int f = 0; f < flips; f++) copy[next_random() % length] ^= (uint8_t)(1u << (next_random() % 8));
        if (memcmp(copy, blob, length) == 0) continue; /* the flips cancelled out */
        load_is_refused(reader, copy, length);
    }
    for (int i = 0; i < rounds; i++) {
        uint64_t n = next_random() % (length * 2);
        uint8_t *garbage = malloc(n ? n : 1);
        for (uint64_t k = 0; k < n; k++) garbage[k] = (uint8_t)next_random();
        if (n >= 4) memcpy(garbage, "KVTM", 4);
        load_is_refused(reader, garbage, n);
        free(garbage);
    }
    uint32_t peer;
    uint64_t generation;
    CHECK_OK(kvt_peer_load(reader, blob, length, &peer, &generation)); /* the intact blob loads */
    CHECK_OK(kvt_peer_unload(reader, peer));
    CHECK(counter(reader, KVT_COUNTER_LIVE_PEERS) == 0, "nothing left loaded");
    free(copy);
    CHECK_OK(kvt_agent_destroy(reader));
    close_fuzz_source(&source);
}

/* Writes a blob's checksum again after a mutation, so that the mutation reaches the parser. */
static void reseal(uint8_t *blob, uint64_t length) {
    uint32_t crc = kvt_crc32(blob, length - 4);
    for (int i = 0; i < 4; i++) blob[length - 4 + i] = (uint8_t)(crc >> (8 * i));
}

/* The checksum refuses every random mutation before the parser sees it (above); here each mutation past
 * the magic is resealed first, so the parser itself meets it. Whatever it gets, it parses the blob or refuses it with a
 * detail naming the field and the byte (never the checksum), and frees everything (ASan, valgrind); the
 * refusals must come from many different fields, which shows the mutations get past the header. */
static void resealed_mutations_reach_the_parser(void) {
    fuzz_source source = open_fuzz_source("reseal-source");
    const uint8_t *blob = source.blob;
    uint64_t length = source.length;
    uint8_t *copy = malloc(length);
    char seen[32][128];
    int distinct = 0, parsed = 0, refused = 0;
    int rounds = test_under_valgrind ? 500 : 5000;
    for (int i = 0; i < rounds; i++) {
        memcpy(copy, blob, length);
        int flips = 1 + (int)(next_random() % 4);
        for (int f = 0; f < flips; f++) copy[4 + next_random() % (length - 8)] ^= (uint8_t)(1u << (next_random() % 8));
        reseal(copy, length);
        kvt_metadata meta;
        kvt_status status = kvt_metadata_parse(copy, length, &meta);
        if (status == KVT_OK) {
            parsed++;
            kvt_metadata_free(&meta);
            continue;
        }
        refused++;
        const char *detail = kvt_last_error_detail();
        CHECK(strstr(detail, "checksum") == NULL, "a resealed blob passes the checksum: %s", detail);
        /* A changed format version is a MISMATCH; every other problem is INVALID_PARAM at a named byte. */
        bool version = strstr(detail, "format version") != NULL;
        kvt_status expected = version ? KVT_ERR_MISMATCH : KVT_ERR_INVALID_PARAM;
        CHECK(status == expected, "refused with %s, expected %s (%s)", kvt_status_name(status),
              kvt_status_name(expected), detail);
        CHECK(strstr(detail, " at byte ") != NULL, "the refusal names the byte: %s", detail);
        const char *what = strstr(detail, "blob: ");
        what = what ? what + 6 : detail;
        size_t n = strcspn(what, "(");
        if (n >= sizeof seen[0]) n = sizeof seen[0] - 1;
        bool known = false;
        for (int k = 0; k < distinct && !known; k++) known = strncmp(seen[k], what, n) == 0 && seen[k][n] == '\0';
        if (!known && distinct < 32) {
            memcpy(seen[distinct], what, n);
            seen[distinct++][n] = '\0';
        }
    }
    CHECK(refused > 0 && parsed > 0, "both parsed (%d) and refused (%d) blobs: flips land in values and in structure",
          parsed, refused);
    CHECK(distinct >= 6, "refusals from %d kinds of problem only (at least 6 expected)", distinct);
    free(copy);
    close_fuzz_source(&source);
}

static uint64_t put_le(uint8_t *blob, uint64_t at, uint64_t value, int size) {
    for (int i = 0; i < size; i++) blob[at + i] = (uint8_t)(value >> (8 * i));
    return at + size;
}

/* The liveness table's fd and the region's file fd, liveness slot and kind (0: dram) a blob carries. */
typedef struct {
    uint32_t liveness_fd, file_fd, liveness_slot, kind;
} file_fields;
static const file_fields no_files = {UINT32_MAX, UINT32_MAX, 0, KVT_MEM_DRAM};

/* A ucx blob written field by field (see the layout in metadata.c): one region, the given address, network address
 * and rkey lengths (their bytes zero) and file fields, sealed. */
static uint8_t *ucx_blob(uint32_t address_length, uint32_t network_length, uint32_t rkey_length, file_fields files,
                         uint64_t *out_length) {
    uint64_t length = 4 + 2 + 2 + 8 + 8 + 2 + 4 + 4 + address_length + 4 + network_length + 8 + 16 + 8 + 8 + 4 + 4 + 4 +
                      4 + 4 + 8 + 8 + 4 + 8 + 4 + 4 + rkey_length + 4;
    uint8_t *blob = calloc(1, length);
    CHECK(blob != NULL, "out of memory");
    memcpy(blob, "KVTM", 4);
    uint64_t at = put_le(blob, 4, 5, 2); /* format version */
    at = put_le(blob, at, KVT_BACKEND_UCX, 2);
    at = put_le(blob, at, 7, 8); /* incarnation */
    at = put_le(blob, at, 1, 8); /* generation */
    at = put_le(blob, at, 4, 2); /* name length */
    memcpy(blob + at, "ucxa", 4);
    at = put_le(blob, at + 4, address_length, 4) + address_length;
    at = put_le(blob, at, network_length, 4) + network_length;
    at = put_le(blob, at, (uint64_t)getpid(), 8) + 16; /* pid, boot id */
    at = put_le(blob, at, 1, 8);                       /* start time */
    at = put_le(blob, at, 1, 8);                       /* pid namespace */
    at = put_le(blob, at, files.liveness_fd, 4);
    at = put_le(blob, at, 1, 4); /* region count */
    at = put_le(blob, at, 1, 4); /* id */
    at = put_le(blob, at, files.kind, 4);
    at = put_le(blob, at, 0, 4);       /* device */
    at = put_le(blob, at, 0x10000, 8); /* base */
    at = put_le(blob, at, 4096, 8);    /* length */
    at = put_le(blob, at, files.file_fd, 4);
    at = put_le(blob, at, 0, 8); /* file offset */
    at = put_le(blob, at, files.liveness_slot, 4);
    at = put_le(blob, at, rkey_length, 4) + rkey_length;
    CHECK(at + 4 == length, "the blob is %llu bytes, written %llu", (unsigned long long)length, (unsigned long long)at);
    reseal(blob, length);
    *out_length = length;
    return blob;
}

static void parses_ucx_blob(uint32_t address_length, uint32_t network_length, uint32_t rkey_length, kvt_status expected,
                            const char *field) {
    uint64_t length;
    uint8_t *blob = ucx_blob(address_length, network_length, rkey_length, no_files, &length);
    kvt_metadata meta;
    kvt_status status = kvt_metadata_parse(blob, length, &meta);
    CHECK(status == expected, "address %u, network address %u, rkey %u bytes: %s (%s), expected %s", address_length,
          network_length, rkey_length, kvt_status_name(status), kvt_last_error_detail(), kvt_status_name(expected));
    if (status == KVT_OK) {
        CHECK(meta.worker_address_length == address_length && meta.network_address_length == network_length &&
                  meta.regions[0].rkey_length == rkey_length,
              "the lengths");
        kvt_metadata_free(&meta);
    } else {
        CHECK_DETAIL(field);
    }
    free(blob);
}

/* UCX is handed the worker address, its network address and every remote key without their length, so a ucx blob
 * whose address (a network address that is there) or key is shorter than what UCX reads unconditionally is refused by
 * the parser, as is one above the caps. */
static void ucx_address_and_key_lengths_are_bounded(void) {
    parses_ucx_blob(9, 0, 9, KVT_OK, NULL);
    parses_ucx_blob(9, 9, 9, KVT_OK, NULL);
    parses_ucx_blob(0, 0, 9, KVT_ERR_INVALID_PARAM, "worker address length");
    parses_ucx_blob(8, 0, 9, KVT_ERR_INVALID_PARAM, "worker address length");
    parses_ucx_blob((1u << 20) + 1, 0, 9, KVT_ERR_INVALID_PARAM, "worker address length");
    parses_ucx_blob(9, 8, 9, KVT_ERR_INVALID_PARAM, "network address length is neither 0 nor a UCX worker address");
    parses_ucx_blob(9, (1u << 20) + 1, 9, KVT_ERR_INVALID_PARAM, "network address length exceeds 1 MiB");
    parses_ucx_blob(9, 0, 0, KVT_ERR_INVALID_PARAM, "rkey length");
    parses_ucx_blob(9, 0, 8, KVT_ERR_INVALID_PARAM, "rkey length");
    parses_ucx_blob(9, 0, (1u << 16) + 1, KVT_ERR_INVALID_PARAM, "rkey length");
}

static void parses_file_fields(file_fields files, kvt_status expected, const char *field) {
    uint64_t length;
    uint8_t *blob = ucx_blob(9, 9, files.kind == KVT_MEM_VRAM ? sizeof(kvt_vram_key) : 9, files, &length);
    kvt_metadata meta;
    kvt_status status = kvt_metadata_parse(blob, length, &meta);
    CHECK(status == expected, "table fd %u, file fd %u, slot %u: %s (%s), expected %s", files.liveness_fd,
          files.file_fd, files.liveness_slot, kvt_status_name(status), kvt_last_error_detail(),
          kvt_status_name(expected));
    if (status == KVT_OK) {
        CHECK(meta.liveness_fd == files.liveness_fd && meta.regions[0].file_fd == files.file_fd &&
                  meta.regions[0].liveness_slot == files.liveness_slot,
              "the file fields");
        kvt_metadata_free(&meta);
    } else {
        CHECK_DETAIL(field);
    }
    free(blob);
}

/* A file-backed region names its slot in the owner's liveness table, which a reader indexes: a region's file
 * without a table, or a slot past the table's end, is refused. */
static void file_backed_regions_need_a_table_and_a_slot_in_it(void) {
    parses_file_fields((file_fields){3, 5, 7, KVT_MEM_DRAM}, KVT_OK, NULL);
    parses_file_fields((file_fields){3, UINT32_MAX, 0, KVT_MEM_DRAM}, KVT_OK, NULL);
    parses_file_fields((file_fields){UINT32_MAX, 5, 7, KVT_MEM_DRAM}, KVT_ERR_INVALID_PARAM,
                       "region file fd is given without a liveness table");
    parses_file_fields((file_fields){3, 5, KVT_MAX_REGIONS, KVT_MEM_DRAM}, KVT_ERR_INVALID_PARAM,
                       "region liveness slot exceeds 65535");
}

/* So does a vram region: a reader that moved its bytes through the owner's CUDA IPC handle checks that slot. */
static void vram_regions_need_a_table_and_a_slot_in_it(void) {
    parses_file_fields((file_fields){3, UINT32_MAX, 7, KVT_MEM_VRAM}, KVT_OK, NULL);
    parses_file_fields((file_fields){UINT32_MAX, UINT32_MAX, 7, KVT_MEM_VRAM}, KVT_ERR_INVALID_PARAM,
                       "vram region is given without a liveness table");
    parses_file_fields((file_fields){3, UINT32_MAX, KVT_MAX_REGIONS, KVT_MEM_VRAM}, KVT_ERR_INVALID_PARAM,
                       "region liveness slot exceeds 65535");
}

static void unload_refuses_while_in_use(void) {
    uint32_t agent = make_agent("unload-busy");
    uint8_t *memory;
    uint32_t region = alloc_region(agent, 8192, &memory);
    uint64_t generation;
    uint32_t self = load_peer(agent, agent, &generation);
    CHECK_OK(kvt_fault_delay_completions(agent, KVT_DELAY_FOREVER));
    uint64_t op;
    CHECK_OK(post_one(agent, KVT_XFER_READ, self, generation, region, 0, region, 4096, 4096, &op));
    CHECK_STATUS(KVT_ERR_BUSY, kvt_peer_unload(agent, self));
    CHECK_DETAIL("in progress");
    CHECK_OK(kvt_fault_clear(agent));
    CHECK(wait_op(agent, op, NULL) == KVT_OK, "read");
    CHECK_OK(kvt_xfer_release(agent, op));
    CHECK_OK(kvt_peer_unload(agent, self));
    free_region(agent, region, memory);
    CHECK_OK(kvt_agent_destroy(agent));
}

/* A loopback blob exported by another process names that process: loading it is refused. */
static void loopback_blob_from_another_process(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_LOOPBACK, "UCX peers may live in other processes");
    int up[2];
    CHECK(pipe(up) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        uint32_t agent = make_agent("elsewhere");
        uint64_t length;
        uint8_t *blob = export_blob(agent, &length);
        CHECK(write(up[1], &length, sizeof length) == sizeof length && write(up[1], blob, length) == (ssize_t)length,
              "write");
        _exit(0); /* the child's agent dies with it */
    }
    close(up[1]);
    uint64_t length = 0;
    CHECK(read(up[0], &length, sizeof length) == sizeof length, "read");
    uint8_t *blob = malloc(length);
    for (uint64_t got = 0; got < length;) {
        ssize_t n = read(up[0], blob + got, length - got);
        CHECK(n > 0, "read blob");
        got += (uint64_t)n;
    }
    close(up[0]);
    waitpid(pid, NULL, 0);
    uint32_t reader = make_agent("here");
    uint32_t peer;
    uint64_t generation;
    CHECK_STATUS(KVT_ERR_NOT_SUPPORTED, kvt_peer_load(reader, blob, length, &peer, &generation));
    CHECK_DETAIL("lives in process");
    CHECK(counter(reader, KVT_COUNTER_LIVE_PEERS) == 0, "nothing loaded");
    free(blob);
    CHECK_OK(kvt_agent_destroy(reader));
}

/* The outcome of a peer-load job, once the wake-up pipe announced it. */
static kvt_status load_outcome(uint32_t agent, uint64_t job, uint32_t *peer, uint64_t *generation) {
    kvt_status status;
    while ((status = kvt_peer_load_status(agent, job, peer, generation)) == KVT_IN_PROGRESS) await_wakeup(agent);
    return status;
}

/* kvt_peer_load_begin refuses a bad blob at once; else the progress thread loads the peer (nothing is
 * loaded while it is stalled) and kvt_peer_load_status answers once, with the peer and its generation. */
static void peer_load_begun_loads_on_the_progress_thread(void) {
    uint32_t source = make_agent("meta-source");
    uint32_t reader = make_agent("meta-reader");
    uint8_t *memory, *memory2;
    uint32_t region = alloc_region(source, 65536, &memory);
    uint64_t length, newer_length, job = 0, stale = 0;
    uint8_t *blob = export_blob(source, &length);
    uint32_t region2 = alloc_region(source, 4096, &memory2);
    uint8_t *newer = export_blob(source, &newer_length);
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_load_begin(reader, blob, length - 1, &job));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_peer_load_begin(reader, blob, length, NULL));

    CHECK_OK(kvt_fault_stall_progress(reader, 1));
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_peer_load_begin(reader, newer, newer_length, &job));
    memset(newer, 0, newer_length); /* the job copied what it needs */
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_peer_load_begin(reader, blob, length, &stale));
    uint32_t peer = 0, found = 0;
    uint64_t generation = 0;
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_peer_load_status(reader, job, &peer, &generation));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_find(reader, "meta-source", &found, NULL));
    CHECK(counter(reader, KVT_COUNTER_LIVE_PEERS) == 0, "nothing is loaded while the thread is stalled");
    CHECK_OK(kvt_fault_stall_progress(reader, 0));

    CHECK_OK(load_outcome(reader, job, &peer, &generation));
    CHECK_OK(kvt_peer_find(reader, "meta-source", &found, NULL));
    CHECK(found == peer && generation == 1, "the loaded peer and its first generation");
    CHECK_STATUS(KVT_ERR_MISMATCH, load_outcome(reader, stale, &peer, &generation));
    CHECK_DETAIL("older than the loaded");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_peer_load_status(reader, job, &peer, &generation));
    CHECK_DETAIL("not yet answered");

    /* A job nobody asked about is freed with its agent. */
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_peer_load_begin(reader, blob, length, &job));
    free(blob);
    free(newer);
    CHECK_OK(kvt_agent_destroy(reader));
    free_region(source, region, memory);
    free_region(source, region2, memory2);
    CHECK_OK(kvt_agent_destroy(source));
}

/* kvt_peer_transport on a thread of its own, so that a call that waits can be waited for with a deadline. */
typedef struct {
    uint32_t agent, peer;
    _Atomic bool answered;
    kvt_status status;
    char text[8192];
} transport_call;

static void *call_transport(void *arg) {
    transport_call *call = arg;
    uint32_t length = 0;
    call->status = kvt_peer_transport(call->agent, call->peer, call->text, sizeof call->text, &length);
    atomic_store(&call->answered, true);
    return NULL;
}

static bool transport_answered(void *arg) { return atomic_load(&((transport_call *)arg)->answered); }

/* A loaded peer's description is kept by the progress thread, so asking for it needs no round trip to that
 * thread: it answers while the thread is stalled. */
static void transport_answers_without_the_progress_thread(void) {
    loaded_pair pair = load_pair("transport-source", "transport-reader");
    uint32_t reader = pair.reader;
    free(pair.blob);
    CHECK_OK(kvt_fault_stall_progress(reader, 1));
    transport_call call = {.agent = reader, .peer = pair.peer};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, call_transport, &call) == 0, "pthread_create");
    wait_until(0, transport_answered, &call, "kvt_peer_transport to answer while the progress thread is stalled",
               WAIT_DEADLINE_MS);
    CHECK_OK(kvt_fault_stall_progress(reader, 0));
    pthread_join(thread, NULL);
    CHECK(call.status == KVT_OK && strstr(call.text, test_backend == KVT_BACKEND_UCX ? "posix" : "loopback"),
          "the description: %s", call.text);
    CHECK_OK(kvt_peer_unload(reader, pair.peer));
    free_region(pair.source, pair.region, pair.memory);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(pair.source));
}

TEST_MAIN("metadata", TEST(export_and_load), TEST(new_incarnation_replaces), TEST(refuses_other_backend_and_garbage),
          TEST(fuzzed_blobs_are_refused), TEST(resealed_mutations_reach_the_parser),
          TEST(ucx_address_and_key_lengths_are_bounded), TEST(file_backed_regions_need_a_table_and_a_slot_in_it),
          TEST(vram_regions_need_a_table_and_a_slot_in_it), TEST(unload_refuses_while_in_use),
          TEST(loopback_blob_from_another_process), TEST(peer_load_begun_loads_on_the_progress_thread),
          TEST(transport_answers_without_the_progress_thread))
