/* What backs an address in this process (mapping.c). */
#ifndef KVT_MAPPING_H
#define KVT_MAPPING_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What backs `address` as /proc/self/maps names it ("/dev/shm/ucx_shm_posix_… (deleted)" for UCX's posix
 * segments, "/SYSV00000000 (deleted)" for SysV shared memory, "anonymous memory"), and whether the mapping
 * is shared with other processes. False (and "no mapping") when nothing is mapped there. */
bool kvt_mapping_describe(uint64_t address, char *out, size_t size, bool *out_shared);
/* Whether [address, +length) lies in one shared mapping of the file (device, inode) at `file_offset`; else
 * false with why not in `why`. */
bool kvt_mapping_of_file(uint64_t address, uint64_t length, uint64_t device, uint64_t inode, uint64_t file_offset,
                         char *why, size_t why_size);
/* The directory UCX's posix transport puts its segments in: UCX_POSIX_DIR, /dev/shm when unset (UCX's default). */
const char *kvt_posix_segment_dir(void);
/* Whether statvfs can ask kvt_posix_segment_dir(): UCX 1.13 leaves its posix transport out where it cannot. */
bool kvt_posix_segment_dir_usable(void);
/* The kinds of shared memory UCX allocates from, each as UCX_TLS leaves its transport in or out. */
typedef struct {
    bool sysv;  /* the sysv transport: SysV segments */
    bool posix; /* the posix transport: segments in kvt_posix_segment_dir() */
} kvt_shared_memory_kinds;
/* Whether one of `kinds` (SysV shared memory, kvt_posix_segment_dir()) has room for a segment of `length` bytes
 * (whole pages); else false, with how much each of `kinds` has in `why`, and which kinds UCX_TLS leaves out. A limit
 * that cannot be asked counts as no room (`why` names it and the error asking it). */
bool kvt_shared_memory_room(uint64_t length, kvt_shared_memory_kinds kinds, char *why, size_t why_size);
/* What UCX had to choose from before it fell back to private memory, as a refusal's detail says it: SysV shared
 * memory refused it, what kvt_posix_segment_dir() has free (each where `kinds` has it), and which kinds UCX_TLS
 * leaves out. */
void kvt_shared_memory_refusal_describe(kvt_shared_memory_kinds kinds, char *out, size_t size);
/* What each of `kinds` has room for, as kvt_shared_memory_room's refusal says it ("/dev/shm has N bytes free and SysV
 * shared memory takes at most M bytes", or why one could not be asked), then which kinds UCX_TLS leaves out. */
void kvt_shared_memory_describe(kvt_shared_memory_kinds kinds, char *out, size_t size);
/* Room for what the calls above write (a long directory is cut short). */
enum { KVT_SHARED_MEMORY_DESCRIPTION_SIZE = 640 };

#endif
