/* What backs memory of this process: the mapping /proc/self/maps lists for an address, and the room
 * left where UCX's posix segments live (/dev/shm, or UCX_POSIX_DIR). Used to explain refused allocations and to
 * check that a file-backed registration is what it says. */
#include "services/mapping.h"

#include "services/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

typedef struct {
    unsigned long long start, end, offset, inode;
    unsigned device_major, device_minor;
    bool shared;
    char path[4096]; /* "" for anonymous memory */
} mapping_line;

/* The line of /proc/self/maps whose range holds `address`; false when nothing is mapped there. */
static bool find_mapping(uint64_t address, mapping_line *out) {
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return false;
    char line[4096 + 128];
    bool found = false;
    while (!found && fgets(line, sizeof line, maps)) {
        mapping_line m = {0};
        char perms[8] = "";
        int path_at = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &m.start, &m.end, perms, &m.offset, &m.device_major,
                   &m.device_minor, &m.inode, &path_at) < 7)
            continue;
        if (address < m.start || address >= m.end) continue;
        found = true;
        m.shared = perms[3] == 's';
        line[strcspn(line, "\n")] = '\0';
        if (path_at > 0) snprintf(m.path, sizeof m.path, "%s", line + path_at);
        *out = m;
    }
    fclose(maps);
    return found;
}

bool kvt_mapping_describe(uint64_t address, char *out, size_t size, bool *out_shared) {
    mapping_line m;
    snprintf(out, size, "no mapping");
    *out_shared = false;
    if (!find_mapping(address, &m)) return false;
    *out_shared = m.shared;
    snprintf(out, size, "%s", m.path[0] != '\0' ? m.path : "anonymous memory");
    return true;
}

bool kvt_mapping_of_file(uint64_t address, uint64_t length, uint64_t device, uint64_t inode, uint64_t file_offset,
                         char *why, size_t why_size) {
    mapping_line m;
    if (!find_mapping(address, &m)) {
        snprintf(why, why_size, "nothing is mapped at 0x%llx", (unsigned long long)address);
        return false;
    }
    const char *what = m.path[0] != '\0' ? m.path : "anonymous memory";
    if (m.inode != inode || makedev(m.device_major, m.device_minor) != device)
        snprintf(why, why_size, "0x%llx is a mapping of %s, not of the file open as the fd",
                 (unsigned long long)address, what);
    else if (!m.shared)
        snprintf(why, why_size, "the mapping of %s at 0x%llx is private (MAP_PRIVATE), not shared", what,
                 (unsigned long long)address);
    else if (m.offset + (address - m.start) != file_offset)
        snprintf(why, why_size, "0x%llx maps offset %llu of %s, not file offset %llu", (unsigned long long)address,
                 m.offset + (address - m.start), what, (unsigned long long)file_offset);
    else if (address + length > m.end)
        snprintf(why, why_size, "the mapping of %s at 0x%llx ends at 0x%llx, before the range's end 0x%llx", what,
                 m.start, m.end, (unsigned long long)(address + length));
    else
        return true;
    return false;
}

const char *kvt_posix_segment_dir(void) {
    const char *dir = getenv("UCX_POSIX_DIR");
    return dir ? dir : "/dev/shm";
}

/* Bytes free in `dir` into *out; false (errno set) when it cannot be asked. */
static bool free_bytes(const char *dir, uint64_t *out) {
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0) return false;
    *out = (uint64_t)fs.f_bavail * fs.f_frsize;
    return true;
}

bool kvt_posix_segment_dir_usable(void) {
    uint64_t bytes;
    return free_bytes(kvt_posix_segment_dir(), &bytes);
}

/* The largest segment SysV shared memory takes now into *out: kernel.shmmax, within the pages kernel.shmall leaves
 * to this IPC namespace; false (errno set) when it cannot be asked. */
static bool sysv_room_bytes(uint64_t page, uint64_t *out) {
    struct shminfo limits;
    struct shm_info usage;
    if (shmctl(0, IPC_INFO, (struct shmid_ds *)(void *)&limits) < 0 ||
        shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&usage) < 0)
        return false;
    uint64_t pages_left = limits.shmall > usage.shm_tot ? limits.shmall - usage.shm_tot : 0;
    uint64_t left = pages_left > UINT64_MAX / page ? UINT64_MAX : pages_left * page;
    *out = limits.shmmax < left ? limits.shmmax : left;
    return true;
}

/* `counted` (what the kinds counted have, "" when none), then the kinds UCX_TLS leaves out of `kinds`, if any. */
static void describe_with_left_out(const char *counted, kvt_shared_memory_kinds kinds, char *out, size_t size) {
    const char *left_out = !kinds.posix && !kinds.sysv ? "posix and sysv" : !kinds.posix ? "posix" : "sysv";
    if (kinds.posix && kinds.sysv)
        snprintf(out, size, "%s", counted);
    else if (counted[0])
        snprintf(out, size, "%s (UCX_TLS leaves %s out)", counted, left_out);
    else
        snprintf(out, size, "UCX_TLS leaves %s out", left_out);
}

/* What one kind of shared memory has room for, as asked now; `error` is the errno where it could not be asked. */
typedef struct {
    bool known;
    uint64_t bytes;
    int error;
} room_answer;

static room_answer ask_posix_room(void) {
    room_answer answer = {0};
    answer.known = free_bytes(kvt_posix_segment_dir(), &answer.bytes);
    answer.error = errno;
    return answer;
}

static room_answer ask_sysv_room(void) {
    room_answer answer = {0};
    answer.known = sysv_room_bytes((uint64_t)sysconf(_SC_PAGESIZE), &answer.bytes);
    answer.error = errno;
    return answer;
}

/* The room of each of `kinds` (posix: the bytes free in kvt_posix_segment_dir(); sysv: the largest segment); none
 * asked for a kind left out. */
static void ask_room(kvt_shared_memory_kinds kinds, room_answer *posix, room_answer *sysv) {
    *posix = kinds.posix ? ask_posix_room() : (room_answer){0};
    *sysv = kinds.sysv ? ask_sysv_room() : (room_answer){0};
}

/* What ask_posix_room answered, as a refusal's detail says it (a long directory is cut short at `size`). */
static void describe_posix_room(const room_answer *posix, char *out, size_t size) {
    const char *dir = kvt_posix_segment_dir();
    if (posix->known)
        snprintf(out, size, "%s has %llu bytes free", dir, (unsigned long long)posix->bytes);
    else
        snprintf(out, size, "%s could not be asked for its free bytes (statvfs: %s)", dir, strerror(posix->error));
}

/* What ask_room answered for `kinds`, then the kinds UCX_TLS leaves out. */
static void describe_room(kvt_shared_memory_kinds kinds, const room_answer *posix, const room_answer *sysv, char *out,
                          size_t size) {
    char posix_room[320] = "", sysv_room[160] = "", counted[512];
    if (kinds.posix) describe_posix_room(posix, posix_room, sizeof posix_room);
    if (sysv->known)
        snprintf(sysv_room, sizeof sysv_room, "SysV shared memory takes at most %llu bytes",
                 (unsigned long long)sysv->bytes);
    else if (kinds.sysv)
        snprintf(sysv_room, sizeof sysv_room, "SysV shared memory could not be asked for its limits (shmctl: %s)",
                 strerror(sysv->error));
    snprintf(counted, sizeof counted, "%s%s%s", posix_room, posix_room[0] && sysv_room[0] ? " and " : "", sysv_room);
    describe_with_left_out(counted, kinds, out, size);
}

/* A limit that cannot be asked is no room: without SysV IPC UCX has no SysV segments, and UCX 1.13 leaves its posix
 * transport out when statvfs fails on its directory. */
bool kvt_shared_memory_room(uint64_t length, kvt_shared_memory_kinds kinds, char *why, size_t why_size) {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t segment = (length + page - 1) / page * page;
    room_answer posix, sysv;
    ask_room(kinds, &posix, &sysv);
    if ((posix.known && segment <= posix.bytes) || (sysv.known && segment <= sysv.bytes)) return true;
    describe_room(kinds, &posix, &sysv, why, why_size);
    return false;
}

void kvt_shared_memory_describe(kvt_shared_memory_kinds kinds, char *out, size_t size) {
    room_answer posix, sysv;
    ask_room(kinds, &posix, &sysv);
    describe_room(kinds, &posix, &sysv, out, size);
}

void kvt_shared_memory_refusal_describe(kvt_shared_memory_kinds kinds, char *out, size_t size) {
    char posix_room[320] = "", counted[512];
    if (kinds.posix) {
        room_answer posix = ask_posix_room();
        describe_posix_room(&posix, posix_room, sizeof posix_room);
    }
    snprintf(counted, sizeof counted, "%s%s%s", kinds.sysv ? "SysV shared memory refused it" : "",
             kinds.sysv && kinds.posix ? " and " : "", posix_room);
    describe_with_left_out(counted, kinds, out, size);
}
