/* A source's side of chunks written in place: the destinations' bounce buffers it writes into, each opened
 * through /proc/<pid>/fd/<fd> of the destination's process once, checked, mapped and pinned (so its copies down
 * DMA straight into it), and kept for the next chunks while that fd still names the file (at most STAGE_TARGETS,
 * the least recently used closed for another; one whose destination closed the fd or is gone is closed at the
 * next sweep, since the mapping would keep its pages pinned). A request names the buffer by process, fd and
 * token, and the destination writes a new token into the buffer's header before each request: only a file sealed
 * against shrinking and growing, of a bounce buffer's size, whose header holds the magic and the request's token
 * now, is written. So a request cannot make this agent write into any other file its sender holds, nor into a buffer
 * whose token it learned for a request already answered. Progress thread only. */
#include "backends/ucx/ucx_staging.h"

#include "services/status.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char staging_call[] = "kvt_xfer_post (staging source)";

/* Whether the header of the mapped bounce buffer `file` holds the magic and `token`. */
static bool holds_token(const uint8_t *file, uint64_t token) {
    stage_buffer_header header;
    memcpy(&header, file, sizeof header);
    return memcmp(header.magic, STAGE_BUFFER_MAGIC, sizeof header.magic) == 0 && header.token == token;
}

typedef struct {
    char text[64];
} fd_path;

/* /proc/<pid>/fd/<fd>: the file the destination's process `pid` has open as `fd`. */
static fd_path path_of(uint64_t pid, uint32_t fd) {
    fd_path path;
    snprintf(path.text, sizeof path.text, "/proc/%llu/fd/%u", (unsigned long long)pid, fd);
    return path;
}

/* The file `ref` names, opened read-write (and stat'ed into *out), or -1. */
static int open_named(const stage_buffer_ref *ref, struct stat *out) {
    int fd = open(path_of(ref->pid, ref->fd).text, O_RDWR | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, out) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The open file `fd`, mapped shared and pinned, when it is a bounce buffer holding `token`; else NULL. */
static uint8_t *map_target(int fd, const struct stat *info, uint64_t token) {
    int seals = fcntl(fd, F_GET_SEALS);
    if (!S_ISREG(info->st_mode) || info->st_size != (off_t)STAGE_BUFFER_FILE_BYTES || seals < 0 ||
        (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
        return NULL;
    void *file = mmap(NULL, STAGE_BUFFER_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED) return NULL;
    if (holds_token(file, token) && kvt_cuda_use_device(staging_call, 0) == KVT_OK &&
        kvt_cuda.MemHostRegister((uint8_t *)file + STAGE_BUFFER_HEADER_BYTES, STAGE_CHUNK_BYTES,
                                 KVT_CU_MEMHOSTREGISTER_PORTABLE) == KVT_CUDA_SUCCESS)
        return file;
    kvt_detail_clear(); /* a refusal only means the bytes go back in the answer */
    munmap(file, STAGE_BUFFER_FILE_BYTES);
    return NULL;
}

static void close_target(ucx_state *state, ucx_stage_target *target) {
    if (kvt_cuda_use_device(staging_call, 0) == KVT_OK)
        kvt_cuda.MemHostUnregister(target->file + STAGE_BUFFER_HEADER_BYTES);
    munmap(target->file, STAGE_BUFFER_FILE_BYTES);
    *target = (ucx_stage_target){0};
    atomic_fetch_sub(&state->staged_targets, 1);
}

/* The entry of the buffer `ref` names, opened anew when the fd names another file than the one kept (or none is);
 * NULL when it cannot be. `slot` is where a new one goes. */
static ucx_stage_target *reopen(ucx_state *state, ucx_stage_target *kept, ucx_stage_target *slot,
                                const stage_buffer_ref *ref) {
    struct stat info;
    int fd = open_named(ref, &info);
    if (fd < 0) return NULL;
    bool same_file = kept && kept->device == (uint64_t)info.st_dev && kept->inode == (uint64_t)info.st_ino;
    uint8_t *file = same_file ? NULL : map_target(fd, &info, ref->token);
    close(fd);              /* the mapping keeps the file */
    if (!file) return NULL; /* the file kept holds another token: not this request's to write */
    ucx_stage_target *target = kept ? kept : slot;
    if (target->file) close_target(state, target);
    *target =
        (ucx_stage_target){.pid = ref->pid, .fd = ref->fd, .device = info.st_dev, .inode = info.st_ino, .file = file};
    atomic_fetch_add(&state->staged_targets, 1);
    return target;
}

uint8_t *ucx_stage_target_of(ucx_state *state, const kvt_process_identity *self, const stage_buffer_ref *ref) {
    ucx_staging *staging = state->staging;
    if (ref->fd == KVT_NO_FILE_FD || kvt_cuda_unavailable()) return NULL;
    if (memcmp(ref->boot_id, self->boot_id, sizeof ref->boot_id) != 0 || ref->pid_namespace != self->pid_namespace ||
        !kvt_process_checkable(self))
        return NULL;
    if (!staging->targets) staging->targets = calloc(STAGE_TARGETS, sizeof *staging->targets);
    if (!staging->targets) return NULL;
    ucx_stage_target *kept = NULL, *oldest = &staging->targets[0];
    for (uint32_t i = 0; i < STAGE_TARGETS && !kept; i++) {
        ucx_stage_target *target = &staging->targets[i];
        if (target->file && target->pid == ref->pid && target->fd == ref->fd) kept = target;
        if (!target->file || (oldest->file && target->used < oldest->used)) oldest = target;
    }
    /* The file kept, when its header holds the token now; else the fd may name another file since. */
    ucx_stage_target *target = kept && holds_token(kept->file, ref->token) ? kept : reopen(state, kept, oldest, ref);
    if (!target) return NULL;
    target->used = ++staging->target_uses;
    return target->file + STAGE_BUFFER_HEADER_BYTES;
}

/* Whether the destination's fd still names the file `target` keeps: not once the destination closed it (its agent
 * stopped) or its process is gone. The kept mapping holds the file, so no other file can have its inode meanwhile. */
static bool still_named(const ucx_stage_target *target) {
    struct stat info;
    return stat(path_of(target->pid, target->fd).text, &info) == 0 && (uint64_t)info.st_dev == target->device &&
           (uint64_t)info.st_ino == target->inode;
}

void ucx_stage_targets_sweep(ucx_state *state, uint64_t now_ns) {
    ucx_staging *staging = state->staging;
    if (!staging || !staging->targets || now_ns < staging->next_target_sweep_ns) return;
    staging->next_target_sweep_ns = now_ns + STAGE_TARGET_SWEEP_NS;
    for (uint32_t i = 0; i < STAGE_TARGETS; i++)
        if (staging->targets[i].file && !still_named(&staging->targets[i])) close_target(state, &staging->targets[i]);
}

void ucx_stage_targets_free(ucx_state *state) {
    ucx_staging *staging = state->staging;
    for (uint32_t i = 0; staging->targets && i < STAGE_TARGETS; i++)
        if (staging->targets[i].file) close_target(state, &staging->targets[i]);
    free(staging->targets);
    staging->targets = NULL;
}
