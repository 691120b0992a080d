/* A loopback read through the library as a platform package ships it, then a ucx agent: linked against
 * that .so and run (under qemu for another cpu) by test/platform-packages.test.ts. Prints
 * "read <bytes> bytes, <n> differ" and "ucx: created" or "ucx: <status name>: <detail>". */
#include <kvreuse_transport.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES (1u << 20)

static void check(kvt_status status, const char *call) {
    if (status == KVT_OK) return;
    fprintf(stderr, "%s: %s (%s)\n", call, kvt_status_name(status), kvt_last_error_detail());
    exit(1);
}

int main(void) {
    uint32_t source, reader, source_region, reader_region, peer, remote_region, kind, device, count;
    uint64_t source_memory, reader_memory, generation, op, address, length, metadata_length, done;
    int32_t status = KVT_IN_PROGRESS;
    static uint8_t metadata[1u << 16];
    check(kvt_agent_create("qemu-source", KVT_BACKEND_LOOPBACK, 0, &source), "kvt_agent_create");
    check(kvt_agent_create("qemu-reader", KVT_BACKEND_LOOPBACK, 0, &reader), "kvt_agent_create");
    check(kvt_mem_alloc(source, BYTES, 0, &source_memory), "kvt_mem_alloc");
    check(kvt_mem_alloc(reader, BYTES, 0, &reader_memory), "kvt_mem_alloc");
    uint8_t *from = (uint8_t *)(uintptr_t)source_memory, *to = (uint8_t *)(uintptr_t)reader_memory;
    for (uint32_t i = 0; i < BYTES; i++) from[i] = (uint8_t)(i * 7u + i / 251u);
    check(kvt_mem_register(source, source_memory, BYTES, KVT_MEM_DRAM, 0, &source_region), "kvt_mem_register");
    check(kvt_mem_register(reader, reader_memory, BYTES, KVT_MEM_DRAM, 0, &reader_region), "kvt_mem_register");
    check(kvt_agent_metadata(source, metadata, sizeof metadata, &metadata_length), "kvt_agent_metadata");
    check(kvt_peer_load(reader, metadata, metadata_length, &peer, &generation), "kvt_peer_load");
    check(kvt_peer_regions(reader, peer, 1, &remote_region, &address, &length, &kind, &device, &count), "kvt_peer_regions");

    const uint32_t index = 0;
    const uint64_t offset = 0, bytes = BYTES;
    check(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, 1, &index, &offset, &index, &offset, &bytes, 1,
                        &reader_region, 1, &remote_region, NULL, 0, &op),
          "kvt_xfer_post");
    while (status == KVT_IN_PROGRESS) {
        kvt_status waited = kvt_agent_wait(reader, 1000);
        if (waited != KVT_ERR_TIMEOUT) check(waited, "kvt_agent_wait");
        check(kvt_xfer_status(reader, op, &status, &done, NULL), "kvt_xfer_status");
    }
    check(status, "the read");
    uint32_t differ = 0;
    for (uint32_t i = 0; i < BYTES; i++) differ += from[i] != to[i];

    check(kvt_xfer_release(reader, op), "kvt_xfer_release");
    check(kvt_peer_unload(reader, peer), "kvt_peer_unload");
    check(kvt_mem_deregister(reader, reader_region), "kvt_mem_deregister");
    check(kvt_mem_deregister(source, source_region), "kvt_mem_deregister");
    check(kvt_mem_free(reader, reader_memory), "kvt_mem_free");
    check(kvt_mem_free(source, source_memory), "kvt_mem_free");
    check(kvt_agent_destroy(reader), "kvt_agent_destroy");
    check(kvt_agent_destroy(source), "kvt_agent_destroy");
    printf("read %llu bytes, %u differ\n", (unsigned long long)done, differ);

    uint32_t ucx;
    kvt_status created = kvt_agent_create("qemu-ucx", KVT_BACKEND_UCX, 0, &ucx);
    if (created == KVT_OK) {
        check(kvt_agent_destroy(ucx), "kvt_agent_destroy");
        printf("ucx: created\n");
    } else
        printf("ucx: %s: %s\n", kvt_status_name(created), kvt_last_error_detail());
    return 0;
}
