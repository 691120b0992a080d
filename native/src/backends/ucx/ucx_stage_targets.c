/* A source's side of chunks written in place: the destinations' bounce buffers it writes into, each opened
 * through /proc/<pid>/fd/<fd> of the destination's process once, checked, mapped and pinned (so its copies down
 * DMA straight into it), and kept for the next chunks (at most STAGE_TARGETS, the least recently used closed for
 * another). A request names the buffer by process, fd and token; only a file sealed against shrinking and
 * growing, of a bounce buffer's size, whose header holds that token, is written: a request cannot make this
 * agent write into any other file its sender has open. Progress thread only. */
#include "backends/ucx/ucx_staging.h"

#include "services/status.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file `ref` names, mapped shared and pinned, or NULL. */
static uint8_t *open_target(const stage_buffer_ref *ref) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%llu/fd/%u", (unsigned long long)ref->pid, ref->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat info;
    int seals = fcntl(fd, F_GET_SEALS);
    void *file = MAP_FAILED;
    if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size == (off_t)STAGE_BUFFER_FILE_BYTES &&
        seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW))
        file = mmap(NULL, STAGE_BUFFER_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (file == MAP_FAILED) return NULL;
    stage_buffer_header header;
    memcpy(&header, file, sizeof header);
    if (memcmp(header.magic, STAGE_BUFFER_MAGIC, sizeof header.magic) == 0 && header.token == ref->token &&
        kvt_cuda_use_device("kvt_xfer_post (staging source)", 0) == KVT_OK &&
        kvt_cuda.MemHostRegister((uint8_t *)file + STAGE_BUFFER_HEADER_BYTES, STAGE_CHUNK_BYTES,
                                 KVT_CU_MEMHOSTREGISTER_PORTABLE) == KVT_CUDA_SUCCESS)
        return file;
    kvt_detail_clear(); /* a refusal only means the bytes go back in the answer */
    munmap(file, STAGE_BUFFER_FILE_BYTES);
    return NULL;
}

static void close_target(ucx_stage_target *target) {
    if (kvt_cuda_use_device("kvt_xfer_post (staging source)", 0) == KVT_OK)
        kvt_cuda.MemHostUnregister(target->file + STAGE_BUFFER_HEADER_BYTES);
    munmap(target->file, STAGE_BUFFER_FILE_BYTES);
    *target = (ucx_stage_target){0};
}

uint8_t *ucx_stage_target_of(ucx_staging *staging, const kvt_agent *agent, const stage_buffer_ref *ref) {
    if (ref->fd == KVT_NO_FILE_FD || kvt_cuda_unavailable()) return NULL;
    const kvt_process_identity *self = &agent->process;
    if (memcmp(ref->boot_id, self->boot_id, sizeof ref->boot_id) != 0 || ref->pid_namespace != self->pid_namespace ||
        !kvt_process_checkable(self))
        return NULL;
    if (!staging->targets) staging->targets = calloc(STAGE_TARGETS, sizeof *staging->targets);
    if (!staging->targets) return NULL;
    ucx_stage_target *oldest = &staging->targets[0];
    for (uint32_t i = 0; i < STAGE_TARGETS; i++) {
        ucx_stage_target *target = &staging->targets[i];
        if (target->file && target->pid == ref->pid && target->fd == ref->fd && target->token == ref->token) {
            target->used = ++staging->target_uses;
            return target->file + STAGE_BUFFER_HEADER_BYTES;
        }
        if (!target->file || (oldest->file && target->used < oldest->used)) oldest = target;
    }
    uint8_t *file = open_target(ref);
    if (!file) return NULL;
    if (oldest->file) close_target(oldest);
    *oldest = (ucx_stage_target){
        .pid = ref->pid, .token = ref->token, .fd = ref->fd, .file = file, .used = ++staging->target_uses};
    return file + STAGE_BUFFER_HEADER_BYTES;
}

void ucx_stage_targets_free(ucx_staging *staging) {
    for (uint32_t i = 0; staging->targets && i < STAGE_TARGETS; i++)
        if (staging->targets[i].file) close_target(&staging->targets[i]);
    free(staging->targets);
    staging->targets = NULL;
}
