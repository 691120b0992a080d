/* A source's side of chunks written in place: the destinations' bounce buffers it writes into, each opened
 * through /proc/<pid>/fd/<fd> of the destination's process once, checked, mapped and pinned (so its copies down
 * DMA straight into it), and kept for the next chunks while that fd still names the file (at most STAGE_TARGETS,
 * the least recently used closed for another). A request names the buffer by process, fd and token, and the
 * destination writes a new token into the buffer's header before each request: only a file sealed against
 * shrinking and growing, of a bounce buffer's size, whose header holds the magic and the request's token now, is
 * written. So a request cannot make this agent write into any other file its sender holds, nor into a buffer
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

/* The file `ref` names, opened read-write (and stat'ed into *out), or -1. */
static int open_named(const stage_buffer_ref *ref, struct stat *out) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%llu/fd/%u", (unsigned long long)ref->pid, ref->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
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

static void close_target(ucx_stage_target *target) {
    if (kvt_cuda_use_device(staging_call, 0) == KVT_OK)
        kvt_cuda.MemHostUnregister(target->file + STAGE_BUFFER_HEADER_BYTES);
    munmap(target->file, STAGE_BUFFER_FILE_BYTES);
    *target = (ucx_stage_target){0};
}

/* The entry of the buffer `ref` names, opened anew when the fd names another file than the one kept (or none is);
 * NULL when it cannot be. `slot` is where a new one goes. */
static ucx_stage_target *reopen(ucx_stage_target *kept, ucx_stage_target *slot, const stage_buffer_ref *ref) {
    struct stat info;
    int fd = open_named(ref, &info);
    if (fd < 0) return NULL;
    bool same_file = kept && kept->device == (uint64_t)info.st_dev && kept->inode == (uint64_t)info.st_ino;
    uint8_t *file = same_file ? NULL : map_target(fd, &info, ref->token);
    close(fd);              /* the mapping keeps the file */
    if (!file) return NULL; /* the file kept holds another token: not this request's to write */
    ucx_stage_target *target = kept ? kept : slot;
    if (target->file) close_target(target);
    *target =
        (ucx_stage_target){.pid = ref->pid, .fd = ref->fd, .device = info.st_dev, .inode = info.st_ino, .file = file};
    return target;
}

uint8_t *ucx_stage_target_of(ucx_staging *staging, const kvt_agent *agent, const stage_buffer_ref *ref) {
    if (ref->fd == KVT_NO_FILE_FD || kvt_cuda_unavailable()) return NULL;
    const kvt_process_identity *self = &agent->process;
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
    ucx_stage_target *target = kept && holds_token(kept->file, ref->token) ? kept : reopen(kept, oldest, ref);
    if (!target) return NULL;
    target->used = ++staging->target_uses;
    return target->file + STAGE_BUFFER_HEADER_BYTES;
}

void ucx_stage_targets_free(ucx_staging *staging) {
    for (uint32_t i = 0; staging->targets && i < STAGE_TARGETS; i++)
        if (staging->targets[i].file) close_target(&staging->targets[i]);
    free(staging->targets);
    staging->targets = NULL;
}
