// The inner loop of entry format 5's checksum (docs/DISK-FORMAT.md, "Checksums"), in C because
// Swift cannot compile one function for a CPU feature the rest of the binary may not assume:
// the same vector code is built twice, for AVX2 and for the baseline, and chosen per call.
#include "CStripes.h"

#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the format 5 checksum reads little-endian words as they lie in memory"
#endif

typedef uint64_t Lanes __attribute__((vector_size(64)));

static const uint64_t stripeKey = 0xc2b2ae3d27d4eb4fULL;
static const uint64_t stripeStep = 0x165667b19e3779f9ULL;

// Word i of stripe s, XORed with the stripe's key for lane i ((i + 1) * stripeKey + s * stripeStep),
// adds the product of its two 32-bit halves to accumulator i, and the word itself to the
// accumulator beside it (i ^ 1): the product mixes, the plain sum keeps every flipped bit, the
// key makes a word's place count.
__attribute__((always_inline)) static inline void absorb(uint64_t accumulators[8], uint64_t first,
                                                         const unsigned char *bytes, size_t count) {
    Lanes sums;
    memcpy(&sums, accumulators, sizeof(sums));
    Lanes key;
    for (int lane = 0; lane < 8; lane++) {
        key[lane] = (uint64_t)(lane + 1) * stripeKey + first * stripeStep;
    }
    for (size_t stripe = 0; stripe < count; stripe++) {
        Lanes words;
        memcpy(&words, bytes + stripe * 64, sizeof(words));
        Lanes keyed = words ^ key;
        sums += (keyed & 0xffffffffULL) * (keyed >> 32);
        sums += __builtin_shufflevector(words, words, 1, 0, 3, 2, 5, 4, 7, 6);
        key += stripeStep;
    }
    memcpy(accumulators, &sums, sizeof(sums));
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void absorbAVX2(uint64_t accumulators[8], uint64_t first,
                                                       const unsigned char *bytes, size_t count) {
    absorb(accumulators, first, bytes, count);
}
#endif

void larder_stripes_absorb_portable(uint64_t accumulators[8], uint64_t first, const void *bytes, size_t count) {
    absorb(accumulators, first, bytes, count);
}

int larder_stripes_vectorized(void) {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

void larder_stripes_absorb(uint64_t accumulators[8], uint64_t first, const void *bytes, size_t count) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        absorbAVX2(accumulators, first, bytes, count);
        return;
    }
#endif
    absorb(accumulators, first, bytes, count);
}
