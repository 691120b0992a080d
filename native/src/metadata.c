/* The metadata blob: encoding of the local agent and defensive parsing of a peer's.
 *
 * Layout (little-endian):
 *   "KVTM" | u16 format version | u16 backend | u64 incarnation | u64 metadata generation
 *   | u16 name length | name | u32 worker address length | worker address
 *   | u32 network address length | network address (the worker's network devices alone; 0: none)
 *   | u64 pid | 16-byte kernel boot id | u64 process start time | u64 pid namespace (the process identity)
 *   | u32 liveness table fd (0xFFFFFFFF: none)
 *   | u32 region count
 *   | per region: u32 id | u32 kind | u32 device | u64 base | u64 length
 *                 | u32 file fd (0xFFFFFFFF: not file-backed) | u64 file offset
 *                 | u32 liveness slot (of a file-backed or vram region)
 *                 | u32 rkey length | rkey
 *   | u32 CRC-32 of everything before it
 */
#include "agent.h"

#include "file_regions.h"
#include "metadata.h"
#include "services/cuda_memory.h"
#include "services/status.h"
#include "services/util.h"

#include <stdlib.h>
#include <string.h>

#define KVT_METADATA_MAGIC "KVTM"
/* 2: the process identity names its pid namespace; 3: file-backed regions; 4: vram regions have liveness slots, and
 * host-staged requests may name the destination's bounce buffer (peers of version 3 would not understand them);
 * 5: the worker's network address, for readers on this host in another pid namespace. */
#define KVT_METADATA_VERSION 5u
#define KVT_MAX_WORKER_ADDRESS (1u << 20)
#define KVT_MAX_RKEY (1u << 16)
/* UCX reads a worker address and a packed remote key without a length: ucp_ep_create reads at least the
 * address header byte and the 8-byte worker uuid, ucp_ep_rkey_unpack at least the 8-byte memory-domain map
 * and the memory-type byte. A ucx blob holding less would make UCX read past the copy it is given. */
#define KVT_MIN_UCX_WORKER_ADDRESS 9u
#define KVT_MIN_UCX_RKEY 9u

typedef struct {
    uint8_t *data; /* NULL: only measure */
    uint64_t length;
} writer;

static void put_bytes(writer *w, const void *bytes, uint64_t length) {
    if (w->data && length) memcpy(w->data + w->length, bytes, length);
    w->length += length;
}

static void put_u(writer *w, uint64_t value, unsigned width) {
    uint8_t bytes[8];
    for (unsigned i = 0; i < width; i++) bytes[i] = (uint8_t)(value >> (8 * i));
    put_bytes(w, bytes, width);
}

static void encode(kvt_agent *agent, writer *w) {
    uint32_t address_length = 0, network_length = 0;
    const uint8_t *address = agent->backend->address(agent, false, &address_length);
    const uint8_t *network = agent->backend->address(agent, true, &network_length);
    put_bytes(w, KVT_METADATA_MAGIC, 4);
    put_u(w, KVT_METADATA_VERSION, 2);
    put_u(w, agent->backend_kind, 2);
    put_u(w, agent->entry.incarnation, 8);
    put_u(w, agent->metadata_generation, 8);
    size_t name_length = strlen(agent->name);
    put_u(w, name_length, 2);
    put_bytes(w, agent->name, name_length);
    put_u(w, address_length, 4);
    put_bytes(w, address, address_length);
    put_u(w, network_length, 4);
    put_bytes(w, network, network_length);
    put_u(w, agent->process.pid, 8);
    put_bytes(w, agent->process.boot_id, sizeof agent->process.boot_id);
    put_u(w, agent->process.start_time, 8);
    put_u(w, agent->process.pid_namespace, 8);
    put_u(w, kvt_liveness_table_fd(agent), 4);
    put_u(w, agent->region_count, 4);
    for (uint32_t i = 0; i < agent->region_count; i++) {
        const kvt_region *region = agent->regions[i];
        put_u(w, region->id, 4);
        put_u(w, region->kind, 4);
        put_u(w, region->device, 4);
        put_u(w, region->address, 8);
        put_u(w, region->length, 8);
        put_u(w, region->file_fd >= 0 ? (uint32_t)region->file_fd : KVT_NO_FILE_FD, 4);
        put_u(w, region->file_offset, 8);
        put_u(w, region->liveness_slot, 4);
        put_u(w, region->rkey_length, 4);
        put_bytes(w, region->rkey, region->rkey_length);
    }
    uint32_t crc = w->data ? kvt_crc32(w->data, w->length) : 0;
    put_u(w, crc, 4);
}

kvt_status kvt_metadata_encode_locked(kvt_agent *agent, uint8_t *buffer, uint64_t capacity, uint64_t *out_length) {
    writer measure = {0};
    encode(agent, &measure);
    *out_length = measure.length;
    if (!buffer) return KVT_OK;
    if (capacity < measure.length)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_metadata: buffer of %llu bytes is too small; %llu needed",
                        (unsigned long long)capacity, (unsigned long long)measure.length);
    writer out = {.data = buffer};
    encode(agent, &out);
    agent->exported_region_high = agent->next_region_id - 1;
    return KVT_OK;
}

kvt_status kvt_agent_metadata(uint32_t agent_id, uint8_t *buffer, uint64_t capacity, uint64_t *out_length) {
    kvt_detail_clear();
    if (!out_length)
        return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_metadata: out_length is NULL"));
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_agent_metadata", &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    status = kvt_metadata_encode_locked(agent, buffer, capacity, out_length);
    pthread_mutex_unlock(&agent->lock);
    return kvt_agent_finish(agent, status);
}

/* ---- parsing ------------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *data;
    uint64_t length, offset;
    const char *failure; /* first problem, NULL while fine */
    const char *field;
} reader;

static bool take(reader *r, uint64_t length, const char *field, const uint8_t **out) {
    if (r->failure) return false;
    if (length > r->length - r->offset) {
        r->failure = "truncated";
        r->field = field;
        return false;
    }
    *out = r->data + r->offset;
    r->offset += length;
    return true;
}

static uint64_t get_u(reader *r, unsigned width, const char *field) {
    const uint8_t *bytes;
    if (!take(r, width, field, &bytes)) return 0;
    uint64_t value = 0;
    for (unsigned i = 0; i < width; i++) value |= (uint64_t)bytes[i] << (8 * i);
    return value;
}

static uint8_t *get_copy(reader *r, uint64_t length, const char *field) {
    const uint8_t *bytes;
    if (!take(r, length, field, &bytes)) return NULL;
    uint8_t *copy = malloc(length ? length : 1);
    if (!copy) {
        r->failure = "out of memory";
        r->field = field;
        return NULL;
    }
    if (length) memcpy(copy, bytes, length);
    return copy;
}

void kvt_metadata_free(kvt_metadata *meta) {
    for (uint32_t i = 0; meta->regions && i < meta->region_count; i++) {
        kvt_remote_region *region = &meta->regions[i];
        if (region->vram_base) kvt_vram_close(region->device, region->vram_base);
        free(region->rkey);
    }
    free(meta->regions);
    free(meta->worker_address);
    free(meta->network_address);
    *meta = (kvt_metadata){0};
}

static kvt_status refuse(kvt_metadata *meta, kvt_status code, const char *fmt_field, const char *what,
                         unsigned long long value, uint64_t offset) {
    kvt_metadata_free(meta);
    return kvt_fail(code, "kvt_peer_load: malformed metadata blob: %s %s (value %llu) at byte %llu", fmt_field, what,
                    value, (unsigned long long)offset);
}

static kvt_status parse_regions(reader *r, kvt_metadata *meta) {
    meta->regions = calloc(meta->region_count ? meta->region_count : 1, sizeof *meta->regions);
    if (!meta->regions) return refuse(meta, KVT_ERR_NO_MEMORY, "regions", "could not be allocated", 0, r->offset);
    for (uint32_t i = 0; i < meta->region_count; i++) {
        kvt_remote_region *region = &meta->regions[i];
        region->id = (uint32_t)get_u(r, 4, "region id");
        region->kind = (uint32_t)get_u(r, 4, "region kind");
        region->device = (uint32_t)get_u(r, 4, "region device");
        region->address = get_u(r, 8, "region base");
        region->length = get_u(r, 8, "region length");
        region->file_fd = (uint32_t)get_u(r, 4, "region file fd");
        region->file_offset = get_u(r, 8, "region file offset");
        region->liveness_slot = (uint32_t)get_u(r, 4, "region liveness slot");
        region->rkey_length = (uint32_t)get_u(r, 4, "rkey length");
        if (r->failure) break;
        if (region->kind > KVT_MEM_VRAM)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "region kind", "is unknown", region->kind, r->offset);
        if (region->length == 0 || region->address + region->length < region->address)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "region length", "is 0 or wraps", region->length, r->offset);
        /* A reader checks these against the owner's table after reading them without the owner's help. */
        bool has_slot = region->file_fd != KVT_NO_FILE_FD || region->kind == KVT_MEM_VRAM;
        if (region->file_fd != KVT_NO_FILE_FD && meta->liveness_fd == KVT_NO_FILE_FD)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "region file fd", "is given without a liveness table",
                          region->file_fd, r->offset);
        if (region->kind == KVT_MEM_VRAM && meta->liveness_fd == KVT_NO_FILE_FD)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "vram region", "is given without a liveness table", region->id,
                          r->offset);
        if (has_slot && region->liveness_slot >= KVT_MAX_REGIONS)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "region liveness slot", "exceeds 65535", region->liveness_slot,
                          r->offset);
        if (region->rkey_length > KVT_MAX_RKEY)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "rkey length", "exceeds 65536", region->rkey_length, r->offset);
        if (region->kind == KVT_MEM_VRAM && region->rkey_length != sizeof(kvt_vram_key))
            return refuse(meta, KVT_ERR_INVALID_PARAM, "vram key length", "is not that of a CUDA IPC key",
                          region->rkey_length, r->offset);
        if (meta->backend == KVT_BACKEND_UCX && region->kind == KVT_MEM_DRAM && region->rkey_length < KVT_MIN_UCX_RKEY)
            return refuse(meta, KVT_ERR_INVALID_PARAM, "rkey length", "is below the 9 bytes of a packed UCX key",
                          region->rkey_length, r->offset);
        for (uint32_t k = 0; k < i; k++)
            if (meta->regions[k].id == region->id)
                return refuse(meta, KVT_ERR_INVALID_PARAM, "region id", "appears twice", region->id, r->offset);
        region->rkey = get_copy(r, region->rkey_length, "rkey");
    }
    return KVT_OK;
}

kvt_status kvt_metadata_parse(const uint8_t *blob, uint64_t length, kvt_metadata *out) {
    *out = (kvt_metadata){0};
    if (!blob || length < 4 + 4)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_load: metadata blob of %llu bytes is too short",
                        (unsigned long long)length);
    if (memcmp(blob, KVT_METADATA_MAGIC, 4) != 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_peer_load: not a kvreuse metadata blob (bad magic)");
    uint32_t stored_crc = (uint32_t)blob[length - 4] | (uint32_t)blob[length - 3] << 8 |
                          (uint32_t)blob[length - 2] << 16 | (uint32_t)blob[length - 1] << 24;
    if (kvt_crc32(blob, length - 4) != stored_crc)
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_peer_load: metadata blob checksum mismatch (%llu bytes; truncated or corrupted)",
                        (unsigned long long)length);
    reader r = {.data = blob, .length = length - 4, .offset = 4};
    uint64_t version = get_u(&r, 2, "version");
    if (!r.failure && version != KVT_METADATA_VERSION)
        return refuse(out, KVT_ERR_MISMATCH, "format version", "is not supported (expected 5)", version, 4);
    out->backend = (uint32_t)get_u(&r, 2, "backend");
    out->incarnation = get_u(&r, 8, "incarnation");
    out->generation = get_u(&r, 8, "generation");
    uint64_t name_length = get_u(&r, 2, "name length");
    if (!r.failure && (name_length == 0 || name_length > KVT_MAX_NAME))
        return refuse(out, KVT_ERR_INVALID_PARAM, "name length", "is outside 1..255", name_length, r.offset);
    const uint8_t *name;
    if (take(&r, name_length, "name", &name)) {
        for (uint64_t i = 0; i < name_length; i++)
            if (name[i] <= 0x20 || name[i] >= 0x7F)
                return refuse(out, KVT_ERR_INVALID_PARAM, "name byte", "is not printable ASCII", name[i], r.offset);
        memcpy(out->name, name, name_length);
        out->name[name_length] = '\0';
    }
    uint64_t address_length = get_u(&r, 4, "worker address length");
    if (!r.failure && address_length > KVT_MAX_WORKER_ADDRESS)
        return refuse(out, KVT_ERR_INVALID_PARAM, "worker address length", "exceeds 1 MiB", address_length, r.offset);
    if (!r.failure && out->backend == KVT_BACKEND_UCX && address_length < KVT_MIN_UCX_WORKER_ADDRESS)
        return refuse(out, KVT_ERR_INVALID_PARAM, "worker address length",
                      "is below the 9 bytes of a UCX worker address", address_length, r.offset);
    out->worker_address = get_copy(&r, address_length, "worker address");
    out->worker_address_length = (uint32_t)address_length;
    uint64_t network_length = get_u(&r, 4, "network address length");
    if (!r.failure && network_length > KVT_MAX_WORKER_ADDRESS)
        return refuse(out, KVT_ERR_INVALID_PARAM, "network address length", "exceeds 1 MiB", network_length, r.offset);
    if (!r.failure && network_length > 0 &&
        (out->backend != KVT_BACKEND_UCX || network_length < KVT_MIN_UCX_WORKER_ADDRESS))
        return refuse(out, KVT_ERR_INVALID_PARAM, "network address length",
                      "is neither 0 nor a UCX worker address of 9 bytes or more", network_length, r.offset);
    out->network_address = get_copy(&r, network_length, "network address");
    out->network_address_length = (uint32_t)network_length;
    out->process.pid = get_u(&r, 8, "pid");
    const uint8_t *boot_id;
    if (take(&r, sizeof out->process.boot_id, "boot id", &boot_id))
        memcpy(out->process.boot_id, boot_id, sizeof out->process.boot_id);
    out->process.start_time = get_u(&r, 8, "process start time");
    out->process.pid_namespace = get_u(&r, 8, "pid namespace");
    out->liveness_fd = (uint32_t)get_u(&r, 4, "liveness table fd");
    uint64_t region_count = get_u(&r, 4, "region count");
    if (!r.failure && region_count > KVT_MAX_REGIONS)
        return refuse(out, KVT_ERR_INVALID_PARAM, "region count", "exceeds 65536", region_count, r.offset);
    out->region_count = (uint32_t)region_count;
    if (!r.failure) {
        kvt_status status = parse_regions(&r, out);
        if (status != KVT_OK) return status;
    }
    if (r.failure) return refuse(out, KVT_ERR_INVALID_PARAM, r.field, r.failure, 0, r.offset);
    if (r.offset != r.length)
        return refuse(out, KVT_ERR_INVALID_PARAM, "blob", "has trailing bytes", r.length - r.offset, r.offset);
    return KVT_OK;
}
