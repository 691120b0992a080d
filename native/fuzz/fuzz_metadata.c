/* libFuzzer target: the metadata blob parser (kvt_metadata_parse), which reads what a peer published.
 * The input is a blob without its trailing checksum; the target seals it with the right CRC, so that
 * every mutation reaches the parser instead of stopping at the checksum. A blob either parses into
 * metadata that holds the parser's promises, or is refused with everything it allocated freed (the
 * leak check runs after every input). */
#include "metadata.h"
#include "services/notify_header.h"
#include "services/util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void promised(const kvt_metadata *meta) {
    size_t name_length = strnlen(meta->name, sizeof meta->name);
    if (name_length == 0 || name_length > KVT_MAX_NAME) __builtin_trap();
    for (size_t i = 0; i < name_length; i++)
        if (meta->name[i] <= 0x20 || meta->name[i] >= 0x7F) __builtin_trap();
    if (meta->region_count > KVT_MAX_REGIONS) __builtin_trap();
    for (uint32_t i = 0; i < meta->region_count; i++) {
        const kvt_remote_region *region = &meta->regions[i];
        if (region->length == 0 || region->address + region->length < region->address) __builtin_trap();
        if (region->kind > KVT_MEM_VRAM) __builtin_trap();
        for (uint32_t k = 0; k < i; k++)
            if (meta->regions[k].id == region->id) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *blob = malloc(size + 4);
    if (!blob) return 0;
    if (size) memcpy(blob, data, size);
    uint32_t crc = kvt_crc32(blob, size);
    for (unsigned i = 0; i < 4; i++) blob[size + i] = (uint8_t)(crc >> (8 * i));
    kvt_metadata meta;
    if (kvt_metadata_parse(blob, size + 4, &meta) == KVT_OK) {
        promised(&meta);
        kvt_metadata_free(&meta);
    }
    free(blob);
    return 0;
}
