/* Copies the library does itself (UCX regions it maps through shared memory): plain memcpy, or
 * non-temporal stores for batches whose destination will not stay in the cache anyway. */
#include "services/copy.h"

#include "services/status.h"

#include <pthread.h>
#include <stdatomic.h>

#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define STREAMING_THRESHOLD_FALLBACK (8u << 20)

static uint64_t streaming_threshold;
#if defined(__x86_64__)
static bool has_avx2;
#endif
static pthread_once_t streaming_once = PTHREAD_ONCE_INIT;

/* Three quarters of the last-level cache, as glibc's memcpy decides for one call; and whether the CPU
 * has the 32-byte stores the streaming copy prefers. */
static void streaming_init(void) {
    long llc = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    streaming_threshold = llc > 0 ? (uint64_t)llc / 4 * 3 : STREAMING_THRESHOLD_FALLBACK;
#if defined(__x86_64__)
    has_avx2 = __builtin_cpu_supports("avx2");
#endif
}

uint64_t kvt_streaming_threshold(void) {
    pthread_once(&streaming_once, streaming_init);
    return streaming_threshold;
}

#if defined(__x86_64__)
#define LINE 64u

static inline void stream_line(uint8_t *d, const uint8_t *s) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16)),
            c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
}

/* Lines prefetched ahead of the one being copied, and of a piece about to be copied. */
#define AHEAD 4u

static void stream_lines_sse2(uint8_t *d, const uint8_t *s, size_t length) {
    for (; length >= LINE; length -= LINE, d += LINE, s += LINE) {
        _mm_prefetch((const char *)s + AHEAD * LINE, _MM_HINT_T0);
        stream_line(d, s);
    }
}

/* Two lines per step in 32-byte stores, prefetching further ahead: glibc's memcpy copies large spans with
 * AVX2 non-temporal stores where the CPU has them, and 16-byte stores trail it by 10-15% here. */
#define AVX2_AHEAD (8u * LINE)

__attribute__((target("avx2"))) static void stream_lines_avx2(uint8_t *d, const uint8_t *s, size_t length) {
    for (; length >= 2 * LINE; length -= 2 * LINE, d += 2 * LINE, s += 2 * LINE) {
        _mm_prefetch((const char *)s + AVX2_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)s + AVX2_AHEAD + LINE, _MM_HINT_T0);
        __m256i a = _mm256_loadu_si256((const __m256i *)s), b = _mm256_loadu_si256((const __m256i *)(s + 32)),
                c = _mm256_loadu_si256((const __m256i *)(s + 64)), e = _mm256_loadu_si256((const __m256i *)(s + 96));
        _mm256_stream_si256((__m256i *)d, a);
        _mm256_stream_si256((__m256i *)(d + 32), b);
        _mm256_stream_si256((__m256i *)(d + 64), c);
        _mm256_stream_si256((__m256i *)(d + 96), e);
    }
    if (length >= LINE) stream_line(d, s);
}

static void stream_lines(uint8_t *d, const uint8_t *s, size_t length) {
    pthread_once(&streaming_once, streaming_init);
    if (has_avx2 && ((uintptr_t)d & 31u) == 0)
        stream_lines_avx2(d, s, length);
    else
        stream_lines_sse2(d, s, length);
}

/* Non-temporal copy of one span, front to back: one stream, which the hardware prefetchers follow. */
static void copy_streaming(uint8_t *d, const uint8_t *s, size_t length) {
    size_t head = (LINE - ((uintptr_t)d & (LINE - 1))) & (LINE - 1);
    if (head > length) head = length;
    memcpy(d, s, head);
    stream_lines(d + head, s + head, length - head);
    size_t tail = (length - head) % LINE;
    memcpy(d + length - tail, s + length - tail, tail);
}
#endif

void kvt_copy(void *destination, const void *source, size_t length, bool streaming) {
#if defined(__x86_64__)
    if (streaming) {
        copy_streaming(destination, source, length);
        return;
    }
#else
    (void)streaming;
#endif
    memcpy(destination, source, length);
}

bool kvt_copy_groupable(const void *destination, size_t length) {
    return ((uintptr_t)destination & 15u) == 0 && length % 64u == 0 && length <= KVT_COPY_GROUP_MAX_BYTES;
}

void kvt_copy_group(uint8_t *const *destinations, const uint8_t *const *sources, unsigned count, size_t length) {
#if defined(__x86_64__)
    for (unsigned i = 0; i < count; i++) {
        if (i + 1 < count)
            for (size_t k = 0; k < AHEAD * LINE && k < length; k += LINE)
                _mm_prefetch((const char *)sources[i + 1] + k, _MM_HINT_T0);
        stream_lines(destinations[i], sources[i], length);
    }
#else
    for (unsigned i = 0; i < count; i++) memcpy(destinations[i], sources[i], length);
#endif
}

void kvt_copier_flush(kvt_copier *copier) {
    if (copier->count == 1)
        kvt_copy(copier->destinations[0], copier->sources[0], copier->length, copier->streaming);
    else if (copier->count > 1)
        kvt_copy_group(copier->destinations, copier->sources, copier->count, copier->length);
    copier->count = 0;
}

void kvt_copier_add(kvt_copier *copier, uint8_t *destination, const uint8_t *source, size_t length) {
    if (!copier->streaming || !kvt_copy_groupable(destination, length)) {
        kvt_copier_flush(copier);
        kvt_copy(destination, source, length, copier->streaming);
        return;
    }
    if (copier->count > 0 && copier->length != length) kvt_copier_flush(copier);
    copier->destinations[copier->count] = destination;
    copier->sources[copier->count] = source;
    copier->length = length;
    if (++copier->count == KVT_COPY_GROUP) kvt_copier_flush(copier);
}

void kvt_copy_fence(void) {
#if defined(__x86_64__)
    _mm_sfence(); /* non-temporal stores are weakly ordered */
#endif
    atomic_thread_fence(memory_order_release);
}
