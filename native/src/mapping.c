/* What backs memory of this process: the mapping /proc/self/maps lists for an address, and the room
 * left in /dev/shm (where UCX's posix segments live). Used to explain refused allocations. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

bool kvt_mapping_describe(uint64_t address, char *out, size_t size, bool *out_shared) {
    snprintf(out, size, "no mapping");
    *out_shared = false;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long long start = 0, end = 0;
        char perms[8] = "";
        int path_at = 0;
        if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perms, &path_at) < 3) continue;
        if (address < start || address >= end) continue;
        found = true;
        *out_shared = perms[3] == 's';
        line[strcspn(line, "\n")] = '\0';
        snprintf(out, size, "%s", path_at > 0 && line[path_at] != '\0' ? line + path_at : "anonymous memory");
    }
    fclose(maps);
    return found;
}

uint64_t kvt_shm_free_bytes(void) {
    struct statvfs shm;
    if (statvfs("/dev/shm", &shm) != 0) return 0;
    return (uint64_t)shm.f_bavail * shm.f_frsize;
}
