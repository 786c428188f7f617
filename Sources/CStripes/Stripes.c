// The inner loop of entry format 5's checksum (docs/DISK-FORMAT.md, "Checksums"), in C because
// Swift cannot compile one function for a CPU feature the rest of the binary may not assume:
// the same vector code is built twice, for AVX2 and for the baseline, and chosen per call.
#include "CStripes.h"

#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the format 5 checksum reads little-endian words as they lie in memory"
#endif

typedef uint64_t Lanes __attribute__((vector_size(64)));

static const uint64_t firstKey = 0xc2b2ae3d27d4eb4fULL;
static const uint64_t firstStep = 0x165667b19e3779f9ULL;
static const uint64_t secondKey = 0x27d4eb2f165667c5ULL;
static const uint64_t secondStep = 0x85ebca77c2b2ae63ULL;

// Word i of stripe n is XORed with two keys of its place, (i + 1) * key + n * step for each pair
// above; the product of the two 32-bit halves of each goes into sum i of its set. A flipped
// bit changes both products unless the word's other half equals both keys' halves, which
// differ; two products keyed apart keep two damaged places from cancelling in both sets.
__attribute__((always_inline)) static inline void absorb(uint64_t accumulators[16], uint64_t first,
                                                         const unsigned char *bytes, size_t count) {
    Lanes firstSums, secondSums;
    memcpy(&firstSums, accumulators, sizeof(firstSums));
    memcpy(&secondSums, accumulators + 8, sizeof(secondSums));
    Lanes firstKeys, secondKeys;
    for (int lane = 0; lane < 8; lane++) {
        firstKeys[lane] = (uint64_t)(lane + 1) * firstKey + first * firstStep;
        secondKeys[lane] = (uint64_t)(lane + 1) * secondKey + first * secondStep;
    }
    for (size_t stripe = 0; stripe < count; stripe++) {
        Lanes words;
        memcpy(&words, bytes + stripe * 64, sizeof(words));
        Lanes one = words ^ firstKeys;
        Lanes two = words ^ secondKeys;
        firstSums += (one & 0xffffffffULL) * (one >> 32);
        secondSums += (two & 0xffffffffULL) * (two >> 32);
        firstKeys += firstStep;
        secondKeys += secondStep;
    }
    memcpy(accumulators, &firstSums, sizeof(firstSums));
    memcpy(accumulators + 8, &secondSums, sizeof(secondSums));
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void absorbAVX2(uint64_t accumulators[16], uint64_t first,
                                                       const unsigned char *bytes, size_t count) {
    absorb(accumulators, first, bytes, count);
}
#endif

void larder_stripes_absorb_portable(uint64_t accumulators[16], uint64_t first, const void *bytes, size_t count) {
    absorb(accumulators, first, bytes, count);
}

int larder_stripes_vectorized(void) {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

void larder_stripes_absorb(uint64_t accumulators[16], uint64_t first, const void *bytes, size_t count) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        absorbAVX2(accumulators, first, bytes, count);
        return;
    }
#endif
    absorb(accumulators, first, bytes, count);
}
