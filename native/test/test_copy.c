/* The library's own copies (UCX regions mapped through shared memory): streaming copies at every
 * alignment and length, grouped pieces, and which pieces may be grouped. Backend-independent. */
#include "harness.h"
#include "services/copy.h"

#define ARENA (5u * 4096u + 256u)

static uint8_t *patterned(size_t length, uint8_t seed) {
    uint8_t *bytes = malloc(length);
    CHECK(bytes != NULL, "out of memory");
    for (size_t i = 0; i < length; i++) bytes[i] = (uint8_t)(i * 131u + seed);
    return bytes;
}

static void streaming_and_plain_copies_match_memcpy(void) {
    static const size_t lengths[] = {
        0, 1, 15, 63, 64, 65, 127, 3 * 64 + 1, 4096, 4096 + 64, 4 * 4096, 4 * 4096 + 17, 5 * 4096 + 3};
    uint8_t *source = patterned(ARENA, 3);
    uint8_t *destination = malloc(ARENA);
    CHECK(destination != NULL, "out of memory");
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (size_t shift = 0; shift < 64; shift += 7)
            for (int streaming = 0; streaming <= 1; streaming++) {
                size_t length = lengths[l];
                memset(destination, 0xEE, ARENA);
                kvt_copy(destination + shift, source + (63 - shift), length, streaming);
                kvt_copy_fence();
                CHECK(memcmp(destination + shift, source + (63 - shift), length) == 0,
                      "%zu bytes at shift %zu (streaming %d) copied exactly", length, shift, streaming);
                for (size_t i = 0; i < ARENA; i++)
                    if (i < shift || i >= shift + length)
                        CHECK(destination[i] == 0xEE, "byte %zu outside the %zu copied at shift %zu untouched", i,
                              length, shift);
            }
    free(destination);
    free(source);
}

/* Destinations on 32-byte boundaries take 32-byte stores where the CPU has AVX2; 16-byte aligned ones take
 * 16-byte stores on every x86-64. */
static void grouped_pieces_land_in_their_own_destinations(void) {
    enum { PIECE = 4096, PIECES = 4 };
    uint8_t *source = patterned(PIECES * PIECE, 11);
    uint8_t *arena = aligned_alloc(64, PIECES * PIECE + 64);
    CHECK(arena != NULL, "out of memory");
    for (size_t misalign = 0; misalign <= 16; misalign += 16)
        for (unsigned count = 1; count <= KVT_COPY_GROUP; count++)
            for (size_t length = 64; length <= PIECE; length *= 4) {
                uint8_t *destination = arena + misalign;
                memset(arena, 0, PIECES * PIECE + 64);
                uint8_t *destinations[KVT_COPY_GROUP];
                const uint8_t *sources[KVT_COPY_GROUP];
                for (unsigned i = 0; i < count; i++) { /* reversed, as unmergeable batches are */
                    destinations[i] = destination + (size_t)(PIECES - 1 - i) * PIECE;
                    sources[i] = source + (size_t)i * PIECE;
                    CHECK(kvt_copy_groupable(destinations[i], length), "piece %u of %zu bytes is groupable", i, length);
                }
                kvt_copy_group(destinations, sources, count, length);
                kvt_copy_fence();
                for (unsigned i = 0; i < count; i++) {
                    CHECK(memcmp(destinations[i], sources[i], length) == 0,
                          "piece %u of %u (%zu bytes, misaligned by %zu)", i, count, length, misalign);
                    for (size_t k = length; k < PIECE; k++)
                        CHECK(destinations[i][k] == 0, "piece %u: byte %zu past its %zu bytes untouched", i, k, length);
                }
            }
    free(arena);
    free(source);
}

static void only_aligned_whole_lines_up_to_the_limit_are_groupable(void) {
    uint8_t *buffer = aligned_alloc(64, 128);
    CHECK(buffer != NULL, "out of memory");
    CHECK(kvt_copy_groupable(buffer, 64), "aligned line");
    CHECK(kvt_copy_groupable(buffer + 16, KVT_COPY_GROUP_MAX_BYTES), "16-byte aligned, at the limit");
    CHECK(!kvt_copy_groupable(buffer + 8, 64), "8-byte aligned destination");
    CHECK(!kvt_copy_groupable(buffer, 100), "not a multiple of 64");
    CHECK(!kvt_copy_groupable(buffer, KVT_COPY_GROUP_MAX_BYTES + 64), "past the limit");
    CHECK(kvt_streaming_threshold() >= 64, "a streaming threshold of %llu bytes",
          (unsigned long long)kvt_streaming_threshold());
    free(buffer);
}

/* Pieces of mixed lengths and alignments through a copier: each lands whole, grouped or not. */
static void a_copier_copies_every_piece_it_was_given(void) {
    static const size_t lengths[] = {4096, 4096, 4096, 1000, 4096, 4096, 64, 4096, 8192, 8192, 8192, 8192, 8192, 4096};
    enum { COUNT = sizeof lengths / sizeof lengths[0], SLOT = 8192 + 64 };
    uint8_t *source = patterned((size_t)COUNT * SLOT, 17);
    uint8_t *destination = aligned_alloc(64, (size_t)COUNT * SLOT);
    CHECK(destination != NULL, "out of memory");
    for (int streaming = 0; streaming <= 1; streaming++) {
        memset(destination, 0, (size_t)COUNT * SLOT);
        kvt_copier copier = {.streaming = streaming};
        for (size_t i = 0; i < COUNT; i++) { /* reversed slots; piece 5 starts 8 bytes off alignment */
            size_t shift = i == 5 ? 8 : 0;
            kvt_copier_add(&copier, destination + (COUNT - 1 - i) * SLOT + shift, source + i * SLOT, lengths[i]);
        }
        kvt_copier_flush(&copier);
        kvt_copy_fence();
        for (size_t i = 0; i < COUNT; i++) {
            size_t shift = i == 5 ? 8 : 0;
            CHECK(memcmp(destination + (COUNT - 1 - i) * SLOT + shift, source + i * SLOT, lengths[i]) == 0,
                  "piece %zu (%zu bytes, streaming %d) arrived", i, lengths[i], streaming);
        }
    }
    free(destination);
    free(source);
}

TEST_MAIN("copy", TEST(a_copier_copies_every_piece_it_was_given), TEST(streaming_and_plain_copies_match_memcpy),
          TEST(grouped_pieces_land_in_their_own_destinations),
          TEST(only_aligned_whole_lines_up_to_the_limit_are_groupable));
