// Speed of the loops a checksum could run over a checked body, on one core, bodies hot in
// cache as after a read: format 4's four 64x64->128 multiply chains (BodyChecksum.updateLanes),
// and the folding loops of a CRC-64 by carry-less multiplication: 4 x 128-bit (PCLMULQDQ,
// every x86-64 CPU since 2010) and 4 x 512-bit (VPCLMULQDQ, AVX-512). The folding constants
// here are placeholders: the loop's cost does not depend on their values, so this measures
// speed, not a CRC. cc -O2 -o checksum-speed Benchmarks/probes/checksum-speed.c && taskset -c 1 ./checksum-speed
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t absorb(uint64_t state, uint64_t word) {
    __uint128_t m = (__uint128_t)(state ^ word) * 0xa0761d6478bd642fULL;
    return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

static uint64_t format4(const uint8_t *p, size_t n) {
    uint64_t s0 = 1, s1 = 2, s2 = 3, s3 = 4, w[4];
    for (size_t i = 0; i + 32 <= n; i += 32) {
        memcpy(w, p + i, 32);
        s0 = absorb(s0, w[0]); s1 = absorb(s1, w[1]); s2 = absorb(s2, w[2]); s3 = absorb(s3, w[3]);
    }
    return s0 ^ s1 ^ s2 ^ s3;
}

__attribute__((target("pclmul,sse4.1")))
static uint64_t fold128(const uint8_t *p, size_t n) {
    const __m128i k = _mm_set_epi64x(0x0123456789abcdefLL, 0x7fedcba987654321LL);
    __m128i a0 = _mm_loadu_si128((const __m128i *)p), a1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i a2 = _mm_loadu_si128((const __m128i *)(p + 32)), a3 = _mm_loadu_si128((const __m128i *)(p + 48));
    for (size_t i = 64; i + 64 <= n; i += 64) {
#define FOLD(a, off) a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), _mm_loadu_si128((const __m128i *)(p + i + off)))
        FOLD(a0, 0); FOLD(a1, 16); FOLD(a2, 32); FOLD(a3, 48);
    }
    __m128i x = _mm_xor_si128(_mm_xor_si128(a0, a1), _mm_xor_si128(a2, a3));
    return (uint64_t)_mm_extract_epi64(x, 0) ^ (uint64_t)_mm_extract_epi64(x, 1);
}

__attribute__((target("avx512f,avx512bw,vpclmulqdq")))
static uint64_t fold512(const uint8_t *p, size_t n) {
    const __m512i k = _mm512_set1_epi64(0x0123456789abcdefLL);
    __m512i a0 = _mm512_loadu_si512(p), a1 = _mm512_loadu_si512(p + 64), a2 = _mm512_loadu_si512(p + 128), a3 = _mm512_loadu_si512(p + 192);
    for (size_t i = 256; i + 256 <= n; i += 256) {
#define FOLD5(a, off) a = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), _mm512_loadu_si512(p + i + off), 0x96)
        FOLD5(a0, 0); FOLD5(a1, 64); FOLD5(a2, 128); FOLD5(a3, 192);
    }
    __m512i x = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    uint64_t out[8];
    _mm512_storeu_si512(out, x);
    return out[0] ^ out[1] ^ out[2] ^ out[3] ^ out[4] ^ out[5] ^ out[6] ^ out[7];
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(void) {
    size_t sizes[] = {100 * 1024, 1 << 20};
    uint8_t *buffer = aligned_alloc(64, 1 << 20);
    for (size_t i = 0; i < (1 << 20); i++) buffer[i] = (uint8_t)(i * 2654435761u >> 13);
    const char *names[] = {"format 4 (4 mul chains)", "CRC-64 fold 4x128 PCLMUL", "CRC-64 fold 4x512 VPCLMUL"};
    uint64_t (*loops[])(const uint8_t *, size_t) = {format4, fold128, fold512};
    volatile uint64_t sink = 0;
    for (int s = 0; s < 2; s++) {
        for (int f = 0; f < 3; f++) {
            double best = 1e9;
            for (int round = 0; round < 7; round++) {
                size_t reps = (64u << 20) / sizes[s];
                double start = now();
                for (size_t r = 0; r < reps; r++) sink ^= loops[f](buffer, sizes[s]);
                double took = (now() - start) / reps;
                if (took < best) best = took;
            }
            printf("%-28s %7zu B: %6.1f GB/s (%.1f us)\n", names[f], sizes[s], sizes[s] / best / 1e9, best * 1e6);
        }
    }
    return (int)(sink & 0);
}
