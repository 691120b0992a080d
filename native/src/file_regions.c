/* Regions backed by a file (kvt_mem_register_fd). The owner publishes each one's fd number and offset,
 * and keeps a liveness table; a reader on the same host maps the file through /proc/<pid>/fd and copies
 * READs itself, then checks the table, so that bytes the owner may have rewritten after withdrawing the
 * region are never reported as read (native/README.md, "Caller memory at memory speed"). The table's file also
 * carries the holds of readers of the owner's vram: read locks on a vram region's first byte (its address in the
 * owner) while a reader has that region's allocation open, and on the same byte far above while it has a WRITE
 * into the region in flight, which the owner's free and withdrawal wait for (kvt_liveness_claim, vram_holds.c). */
#include "agent.h"

#include "file_regions.h"
#include "services/mapping.h"
#include "services/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LIVENESS_MAGIC 0x3145564c4954564bull /* "KVTLIVE1", little-endian */
#define LIVENESS_HEADER_WORDS 2u             /* magic, incarnation */
#define LIVENESS_BYTES ((uint64_t)(LIVENESS_HEADER_WORDS + KVT_MAX_REGIONS) * sizeof(uint64_t))
#define CHECK_HOLD_POLL_NS 1000000L

struct kvt_liveness_table {
    int fd;
    _Atomic uint64_t *words; /* header, then KVT_MAX_REGIONS slots */
    uint32_t next_slot;      /* where the search for a free slot starts */
};

/* ---- the owner ------------------------------------------------------------------------------------- */

bool kvt_region_has_liveness_slot(const kvt_region *region) {
    return region->file_fd >= 0 || region->kind == KVT_MEM_VRAM;
}

kvt_status kvt_liveness_table_ensure(kvt_agent *agent, const char *call) {
    if (agent->liveness) return KVT_OK;
    kvt_liveness_table *table = calloc(1, sizeof *table);
    if (!table) return kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call);
    const char *failed = NULL;
    table->fd = memfd_create("kvreuse-liveness", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (table->fd < 0)
        failed = "memfd_create";
    else if (ftruncate(table->fd, (off_t)LIVENESS_BYTES) != 0)
        failed = "ftruncate";
    else if (fcntl(table->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        failed = "fcntl(F_ADD_SEALS)"; /* readers map it whole: it can never shrink under them */
    else {
        void *words = mmap(NULL, LIVENESS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, table->fd, 0);
        if (words == MAP_FAILED)
            failed = "mmap";
        else
            table->words = words;
    }
    if (failed) {
        int error = errno;
        if (table->fd >= 0) close(table->fd);
        free(table);
        return kvt_fail(KVT_ERR_BACKEND, "%s: the liveness table could not be made: %s: %s", call, failed,
                        strerror(error));
    }
    atomic_store(&table->words[0], LIVENESS_MAGIC);
    atomic_store(&table->words[1], agent->entry.incarnation);
    pthread_mutex_lock(&agent->lock);
    agent->liveness = table;
    pthread_mutex_unlock(&agent->lock);
    return KVT_OK;
}

uint32_t kvt_liveness_table_fd(const kvt_agent *agent) {
    return agent->liveness ? (uint32_t)agent->liveness->fd : KVT_NO_FILE_FD;
}

void kvt_liveness_table_free(kvt_agent *agent) {
    kvt_liveness_table *table = agent->liveness;
    if (!table) return;
    munmap((void *)table->words, LIVENESS_BYTES);
    close(table->fd);
    free(table);
    agent->liveness = NULL;
}

/* A region is never live twice (ids are not reused), so a slot freed and taken again holds another id. */
void kvt_liveness_mark_live_locked(kvt_agent *agent, kvt_region *region) {
    kvt_liveness_table *table = agent->liveness;
    _Atomic uint64_t *slots = table->words + LIVENESS_HEADER_WORDS;
    uint32_t slot = table->next_slot;
    while (atomic_load_explicit(&slots[slot], memory_order_relaxed) != 0) slot = (slot + 1) % KVT_MAX_REGIONS;
    region->liveness_slot = slot; /* there is one: at most KVT_MAX_REGIONS regions are live */
    table->next_slot = (slot + 1) % KVT_MAX_REGIONS;
    atomic_store(&slots[slot], region->id);
}

/* Sequentially consistent, and fenced so that no later store of the owner (its reuse of the memory) becomes
 * visible before it: a reader that copied a rewritten byte then finds the slot cleared. */
void kvt_liveness_mark_withdrawn_locked(kvt_agent *agent, const kvt_region *region) {
    atomic_store(&agent->liveness->words[LIVENESS_HEADER_WORDS + region->liveness_slot], 0);
    atomic_thread_fence(memory_order_seq_cst);
}

kvt_status kvt_file_region_prepare(kvt_region *region, int32_t fd, uint64_t file_offset) {
    struct stat file;
    if (fd < 0 || fstat(fd, &file) != 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_register_fd: fd %d is not open (%s)", fd,
                        fd < 0 ? "negative" : strerror(errno));
    if (!S_ISREG(file.st_mode))
        return kvt_fail(KVT_ERR_INVALID_PARAM,
                        "kvt_mem_register_fd: fd %d is not a regular file (a memfd or a /dev/shm file is)", fd);
    if (file_offset > (uint64_t)file.st_size || region->length > (uint64_t)file.st_size - file_offset)
        return kvt_fail(
            KVT_ERR_INVALID_PARAM,
            "kvt_mem_register_fd: file offset %llu + length %llu exceeds the %llu bytes of the file of fd %d",
            (unsigned long long)file_offset, (unsigned long long)region->length, (unsigned long long)file.st_size, fd);
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return kvt_fail(
            KVT_ERR_INVALID_PARAM,
            "kvt_mem_register_fd: the file of fd %d is not sealed against shrinking (F_SEAL_SHRINK): a "
            "reader's copy out of a file that shrank would fault; create it with memfd_create(MFD_ALLOW_SEALING) "
            "and seal it once sized",
            fd);
    char why[256];
    if (!kvt_mapping_of_file(region->address, region->length, file.st_dev, file.st_ino, file_offset, why, sizeof why))
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_mem_register_fd: [0x%llx, +%llu) of fd %d: %s",
                        (unsigned long long)region->address, (unsigned long long)region->length, fd, why);
    region->file_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (region->file_fd < 0)
        return kvt_fail(KVT_ERR_NOT_ALLOWED, "kvt_mem_register_fd: fd %d cannot be duplicated: %s", fd,
                        strerror(errno));
    region->file_offset = file_offset;
    return KVT_OK;
}

/* ---- the reader ------------------------------------------------------------------------------------ */

/* Maps `length` bytes at `offset` of the file the peer's process has open as `fd`, read-only; NULL when it
 * cannot be opened (EACCES, EPERM: not allowed to look into that process), is too short, or not mapped. The file
 * opened is kept in *out_file when out_file is not NULL (and the mapping made), else closed. */
static uint8_t *map_peer_file(uint64_t pid, uint32_t fd, uint64_t offset, uint64_t length, void **out_mapping,
                              uint64_t *out_mapping_length, int *out_file) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%llu/fd/%u", (unsigned long long)pid, fd);
    int file = open(path, O_RDONLY | O_CLOEXEC);
    if (file < 0) return NULL;
    struct stat info;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = offset & ~(page - 1);
    uint8_t *view = NULL;
    int seals = fcntl(file, F_GET_SEALS); /* a file that can shrink would fault the copy */
    if (seals >= 0 && (seals & F_SEAL_SHRINK) && fstat(file, &info) == 0 && S_ISREG(info.st_mode) &&
        offset <= (uint64_t)info.st_size && length <= (uint64_t)info.st_size - offset) {
        void *mapping = mmap(NULL, length + (offset - start), PROT_READ, MAP_SHARED, file, (off_t)start);
        if (mapping != MAP_FAILED) {
            *out_mapping = mapping;
            *out_mapping_length = length + (offset - start);
            view = (uint8_t *)mapping + (offset - start);
        }
    }
    if (view && out_file)
        *out_file = file;
    else
        close(file); /* the mapping keeps the file */
    return view;
}

void kvt_liveness_map(kvt_conn *conn) {
    kvt_metadata *meta = &conn->meta;
    if (meta->liveness_fd == KVT_NO_FILE_FD || !kvt_process_checkable(&meta->process)) return;
    void *table = NULL;
    uint64_t table_length = 0;
    bool has_vram = false; /* only holds on its vram need the file kept open */
    for (uint32_t i = 0; i < meta->region_count; i++) has_vram |= meta->regions[i].kind == KVT_MEM_VRAM;
    int file = -1;
    const _Atomic uint64_t *words = (const _Atomic uint64_t *)map_peer_file(
        meta->process.pid, meta->liveness_fd, 0, LIVENESS_BYTES, &table, &table_length, has_vram ? &file : NULL);
    if (!words) return;
    if (atomic_load(&words[0]) != LIVENESS_MAGIC || atomic_load(&words[1]) != meta->incarnation) {
        munmap(table, table_length); /* another file now has that fd number: the owner is not who it was */
        if (file >= 0) close(file);
        return;
    }
    conn->liveness = words;
    conn->liveness_file = file;
}

void kvt_liveness_unmap(kvt_conn *conn) {
    if (conn->liveness) munmap((void *)(uintptr_t)conn->liveness, LIVENESS_BYTES);
    conn->liveness = NULL;
    if (conn->liveness_file >= 0) close(conn->liveness_file); /* what it still held goes with it */
    conn->liveness_file = -1;
}

/* An open file description's lock (F_OFD_*) of `type` on [start, +length) of the table's file. */
static int lock_range(int file, short type, uint64_t start, uint64_t length) {
    struct flock range = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)start, .l_len = (off_t)length};
    int result;
    do result = fcntl(file, F_OFD_SETLK, &range);
    while (result != 0 && errno == EINTR);
    return result == 0 ? 0 : errno;
}

/* Where in the table's file the holds of `kind` on the owner's byte `address` lie: a region's mapping holds at its
 * address, its WRITE holds 2^60 above (user addresses lie below 2^57). */
static uint64_t hold_offset(kvt_hold_kind kind, uint64_t address) {
    return kind == KVT_HOLD_WRITE ? address + (1ull << 60) : address;
}

kvt_status kvt_liveness_hold(const kvt_conn *conn, const kvt_remote_region *region, kvt_hold_kind kind) {
    int error = conn->liveness_file < 0
                    ? EBADF
                    : lock_range(conn->liveness_file, F_RDLCK, hold_offset(kind, region->address), 1);
    if (error == 0) return KVT_OK;
    if (error == EAGAIN || error == EACCES) return KVT_ERR_NOT_FOUND; /* the owner is withdrawing or freeing it */
    return kvt_fail(KVT_ERR_BACKEND,
                    "kvt_xfer_post: peer '%s''s vram region %u cannot be held %s (a lock on its liveness table: %s), "
                    "and its owner could withdraw it under this process",
                    conn->meta.name, region->id, kind == KVT_HOLD_WRITE ? "for a WRITE" : "open", strerror(error));
}

void kvt_liveness_let_go(const kvt_conn *conn, const kvt_remote_region *region, kvt_hold_kind kind) {
    lock_range(conn->liveness_file, F_UNLCK, hold_offset(kind, region->address), 1);
}

bool kvt_liveness_claim(kvt_agent *agent, kvt_hold_kind kind, uint64_t address, uint64_t length) {
    return !agent->liveness || lock_range(agent->liveness->fd, F_WRLCK, hold_offset(kind, address), length) == 0;
}

void kvt_liveness_unclaim(kvt_agent *agent, kvt_hold_kind kind, uint64_t address, uint64_t length) {
    if (agent->liveness) lock_range(agent->liveness->fd, F_UNLCK, hold_offset(kind, address), length);
}

bool kvt_remote_region_live(const kvt_conn *conn, const kvt_remote_region *region) {
    return atomic_load(&conn->liveness[LIVENESS_HEADER_WORDS + region->liveness_slot]) == region->id;
}

void kvt_file_regions_map(kvt_conn *conn) {
    if (!conn->liveness) return;
    kvt_metadata *meta = &conn->meta;
    for (uint32_t i = 0; i < meta->region_count; i++) {
        kvt_remote_region *region = &meta->regions[i];
        if (region->file_fd != KVT_NO_FILE_FD)
            region->file_view = map_peer_file(meta->process.pid, region->file_fd, region->file_offset, region->length,
                                              &region->file_mapping, &region->file_mapping_length, NULL);
    }
    /* Every open above named the owner only if its pid was not reused meanwhile: the connection's pidfd
     * (opened, start time checked, when the connection was made) says whether that process still runs. */
    if (kvt_conn_process_gone(conn)) {
        kvt_file_regions_unmap(conn);
        kvt_liveness_unmap(conn);
    }
}

void kvt_file_regions_unmap(kvt_conn *conn) {
    for (uint32_t i = 0; i < conn->meta.region_count; i++) {
        kvt_remote_region *region = &conn->meta.regions[i];
        if (region->file_view) munmap(region->file_mapping, region->file_mapping_length);
        region->file_view = NULL;
    }
}

static void hold_point(kvt_agent *agent) {
    int held = 1;
    if (!atomic_compare_exchange_strong(&agent->file_check_hold, &held, 2)) return;
    struct timespec poll_interval = {.tv_nsec = CHECK_HOLD_POLL_NS};
    while (atomic_load(&agent->file_check_hold) == 2) nanosleep(&poll_interval, NULL);
}

bool kvt_file_reads_live(kvt_agent *agent, const kvt_conn *conn, const kvt_remote_region *const *regions,
                         unsigned count) {
    hold_point(agent);
    atomic_thread_fence(memory_order_seq_cst); /* every byte copied is read before the slots are */
    for (unsigned i = 0; i < count; i++)
        if (!kvt_remote_region_live(conn, regions[i])) return false;
    return true;
}

kvt_status kvt_test_hold_file_check(uint32_t agent_id, bool hold) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_hold_file_check", &agent);
    if (status != KVT_OK) return status;
    atomic_store(&agent->file_check_hold, hold ? 1 : 0);
    return kvt_agent_finish(agent, KVT_OK);
}

kvt_status kvt_test_file_check_waiting(uint32_t agent_id, bool *out_waiting) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_test_file_check_waiting", &agent);
    if (status != KVT_OK) return status;
    *out_waiting = atomic_load(&agent->file_check_hold) == 2;
    return kvt_agent_finish(agent, KVT_OK);
}
