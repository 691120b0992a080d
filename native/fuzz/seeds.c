/* Writes the fuzzers' starting inputs: a real metadata blob (a loopback agent with two regions, without its
 * checksum, as fuzz_metadata takes it) and a real notification header. Usage: seeds METADATA_DIR NOTIFY_DIR */
#include "services/notify_header.h"

#include <stdio.h>
#include <stdlib.h>

static void write_file(const char *dir, const char *name, const uint8_t *bytes, size_t length) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "wb");
    if (!file || fwrite(bytes, 1, length, file) != length || fclose(file) != 0) {
        perror(path);
        exit(1);
    }
}

static void check(kvt_status status, const char *what) {
    if (status == KVT_OK) return;
    fprintf(stderr, "seeds: %s failed with %d\n", what, (int)status);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s METADATA_DIR NOTIFY_DIR\n", argv[0]);
        return 2;
    }
    uint32_t agent = 0;
    check(kvt_agent_create("fuzz-seed-agent", KVT_BACKEND_LOOPBACK, 0, &agent), "kvt_agent_create");
    uint64_t addresses[2] = {0, 0};
    uint32_t regions[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        check(kvt_mem_alloc(agent, 4096u << i, 0, &addresses[i]), "kvt_mem_alloc");
        check(kvt_mem_register(agent, addresses[i], 4096u << i, KVT_MEM_DRAM, 0, &regions[i]), "kvt_mem_register");
    }
    uint64_t length = 0;
    check(kvt_agent_metadata(agent, NULL, 0, &length), "kvt_agent_metadata (size)");
    uint8_t *blob = malloc(length);
    if (!blob) return 1;
    check(kvt_agent_metadata(agent, blob, length, &length), "kvt_agent_metadata");
    write_file(argv[1], "loopback-two-regions", blob, length - 4);
    free(blob);
    for (int i = 0; i < 2; i++) {
        check(kvt_mem_deregister(agent, regions[i]), "kvt_mem_deregister");
        check(kvt_mem_free(agent, addresses[i]), "kvt_mem_free");
    }
    check(kvt_agent_destroy(agent), "kvt_agent_destroy");
    uint8_t header[KVT_NOTIFY_HEADER_FIXED + KVT_MAX_NAME];
    write_file(argv[2], "sender-decode-tp0", header, kvt_notify_header_write(header, "decode-tp0"));
    return 0;
}
