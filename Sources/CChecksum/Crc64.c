// CRC-64/XZ by table and by folding with carry-less multiplication (Intel, "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction", 2009). docs/DISK-FORMAT.md,
// "Checksums", says why a CRC: its undetected damage depends only on the error pattern.
//
// The CRC is reflected: the first bit of a byte is its least significant, and a 16-byte chunk
// loaded into a register holds its first bit at bit 0, the highest power of x. Folding replaces
// a chunk H that lies D bits before a later one by H * x^D mod P, added into the later chunk:
// the CRC of the whole is unchanged. With H = L * x^64 + R (L its first eight bytes),
// H * x^D = L * x^(D+64) + R * x^D, and each product of two 64-bit polynomials fits 128 bits.
// A carry-less product of two reflected 64-bit values is the reflected product times x, so the
// constants are x^(D+63) and x^(D-1) mod P, reflected. They are computed at load time from the
// polynomial, not written out.
#include "CChecksum.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

// ECMA-182's polynomial without its x^64 term, and bit-reflected.
static const uint64_t polynomial = 0x42F0E1EBA9EA3693ULL;
static const uint64_t reflectedPolynomial = 0xC96C5795D7870F42ULL;

static uint64_t tables[8][256];
static int fastest = larder_crc64_table;

static uint64_t reflect64(uint64_t value) {
    uint64_t result = 0;
    for (int bit = 0; bit < 64; bit++) {
        result = (result << 1) | (value & 1);
        value >>= 1;
    }
    return result;
}

// x^n mod P, not reflected.
static uint64_t powerOfX(unsigned n) {
    uint64_t remainder = 1;
    for (unsigned step = 0; step < n; step++) {
        uint64_t carry = remainder >> 63;
        remainder <<= 1;
        if (carry) remainder ^= polynomial;
    }
    return remainder;
}

static uint64_t load64(const uint8_t *bytes) {
    uint64_t value;
    memcpy(&value, bytes, 8);
    return value;  // little-endian: x86-64 and aarch64 as Larder builds them
}

// The register (the CRC before its final XOR) after `length` more bytes.
static uint64_t updateByTable(uint64_t state, const uint8_t *bytes, size_t length) {
    while (length >= 8) {
        state ^= load64(bytes);
        state = tables[7][state & 0xff] ^ tables[6][(state >> 8) & 0xff] ^ tables[5][(state >> 16) & 0xff]
            ^ tables[4][(state >> 24) & 0xff] ^ tables[3][(state >> 32) & 0xff] ^ tables[2][(state >> 40) & 0xff]
            ^ tables[1][(state >> 48) & 0xff] ^ tables[0][state >> 56];
        bytes += 8;
        length -= 8;
    }
    while (length > 0) {
        state = tables[0][(state ^ *bytes) & 0xff] ^ (state >> 8);
        bytes++;
        length--;
    }
    return state;
}

#if defined(__x86_64__)

// Each 128-bit lane: the constant for its first eight bytes low, for its last eight high.
typedef struct {
    uint64_t first, last;
} FoldConstants;

// The folding distances used, in bits.
static FoldConstants fold128, fold256, fold384, fold512, fold768, fold1024, fold1536, fold2048;

static FoldConstants foldConstants(unsigned distance) {
    FoldConstants constants = {reflect64(powerOfX(distance + 63)), reflect64(powerOfX(distance - 1))};
    return constants;
}

__attribute__((target("pclmul,sse4.1"))) static inline __m128i foldLane(__m128i lane, FoldConstants constants) {
    __m128i k = _mm_set_epi64x((long long)constants.last, (long long)constants.first);
    return _mm_xor_si128(_mm_clmulepi64_si128(lane, k, 0x00), _mm_clmulepi64_si128(lane, k, 0x11));
}

// One folded 128-bit lane standing for everything so far, then `length` more bytes: their
// 16-byte chunks folded in, the lane's CRC taken by table, then the bytes left by table too.
__attribute__((target("pclmul,sse4.1"))) static uint64_t finish(__m128i lane, const uint8_t *bytes, size_t length) {
    while (length >= 16) {
        lane = _mm_xor_si128(foldLane(lane, fold128), _mm_loadu_si128((const __m128i *)bytes));
        bytes += 16;
        length -= 16;
    }
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)last, lane);
    return updateByTable(updateByTable(0, last, 16), bytes, length);
}

// Four lanes of 16 bytes, 64 bytes a step. The register's eight bytes are added into the
// first eight of the data: a reflected CRC's register is the polynomial of what precedes.
__attribute__((target("pclmul,sse4.1"))) static uint64_t updateByPclmul(uint64_t state, const uint8_t *bytes, size_t length) {
    if (length < 64) return updateByTable(state, bytes, length);
    __m128i lane0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)bytes), _mm_cvtsi64_si128((long long)state));
    __m128i lane1 = _mm_loadu_si128((const __m128i *)(bytes + 16));
    __m128i lane2 = _mm_loadu_si128((const __m128i *)(bytes + 32));
    __m128i lane3 = _mm_loadu_si128((const __m128i *)(bytes + 48));
    bytes += 64;
    length -= 64;
    while (length >= 64) {
        lane0 = _mm_xor_si128(foldLane(lane0, fold512), _mm_loadu_si128((const __m128i *)bytes));
        lane1 = _mm_xor_si128(foldLane(lane1, fold512), _mm_loadu_si128((const __m128i *)(bytes + 16)));
        lane2 = _mm_xor_si128(foldLane(lane2, fold512), _mm_loadu_si128((const __m128i *)(bytes + 32)));
        lane3 = _mm_xor_si128(foldLane(lane3, fold512), _mm_loadu_si128((const __m128i *)(bytes + 48)));
        bytes += 64;
        length -= 64;
    }
    __m128i lane = _mm_xor_si128(
        _mm_xor_si128(foldLane(lane0, fold384), foldLane(lane1, fold256)), _mm_xor_si128(foldLane(lane2, fold128), lane3));
    return finish(lane, bytes, length);
}

__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) static inline __m256i foldWide(__m256i lanes, FoldConstants constants) {
    __m256i k = _mm256_set_epi64x(
        (long long)constants.last, (long long)constants.first, (long long)constants.last, (long long)constants.first);
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(lanes, k, 0x00), _mm256_clmulepi64_epi128(lanes, k, 0x11));
}

// Four registers of two 16-byte lanes, 128 bytes a step; then as updateByPclmul.
__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) static uint64_t updateByVpclmul(
    uint64_t state, const uint8_t *bytes, size_t length) {
    if (length < 256) return updateByPclmul(state, bytes, length);
    __m256i wide0 = _mm256_xor_si256(
        _mm256_loadu_si256((const __m256i *)bytes), _mm256_zextsi128_si256(_mm_cvtsi64_si128((long long)state)));
    __m256i wide1 = _mm256_loadu_si256((const __m256i *)(bytes + 32));
    __m256i wide2 = _mm256_loadu_si256((const __m256i *)(bytes + 64));
    __m256i wide3 = _mm256_loadu_si256((const __m256i *)(bytes + 96));
    bytes += 128;
    length -= 128;
    while (length >= 128) {
        wide0 = _mm256_xor_si256(foldWide(wide0, fold1024), _mm256_loadu_si256((const __m256i *)bytes));
        wide1 = _mm256_xor_si256(foldWide(wide1, fold1024), _mm256_loadu_si256((const __m256i *)(bytes + 32)));
        wide2 = _mm256_xor_si256(foldWide(wide2, fold1024), _mm256_loadu_si256((const __m256i *)(bytes + 64)));
        wide3 = _mm256_xor_si256(foldWide(wide3, fold1024), _mm256_loadu_si256((const __m256i *)(bytes + 96)));
        bytes += 128;
        length -= 128;
    }
    __m256i wide = _mm256_xor_si256(
        _mm256_xor_si256(foldWide(wide0, fold768), foldWide(wide1, fold512)), _mm256_xor_si256(foldWide(wide2, fold256), wide3));
    while (length >= 32) {
        wide = _mm256_xor_si256(foldWide(wide, fold256), _mm256_loadu_si256((const __m256i *)bytes));
        bytes += 32;
        length -= 32;
    }
    __m128i lane = _mm_xor_si128(foldLane(_mm256_castsi256_si128(wide), fold128), _mm256_extracti128_si256(wide, 1));
    return finish(lane, bytes, length);
}

#define LARDER_AVX512 "vpclmulqdq,avx512f,avx2,pclmul,sse4.1"

__attribute__((target(LARDER_AVX512))) static inline __m512i foldZmm(__m512i lanes, FoldConstants constants) {
    __m512i k = _mm512_set_epi64(
        (long long)constants.last, (long long)constants.first, (long long)constants.last, (long long)constants.first,
        (long long)constants.last, (long long)constants.first, (long long)constants.last, (long long)constants.first);
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(lanes, k, 0x00), _mm512_clmulepi64_epi128(lanes, k, 0x11));
}

// Four registers of four 16-byte lanes, 256 bytes a step: the same folding as
// updateByVpclmul's with twice the lanes a multiply (a CPU with VPCLMULQDQ on 512-bit
// registers multiplies four lane pairs in the time of two). The four registers are folded
// into the last, its 64-byte chunks follow, and its four lanes are folded into one.
__attribute__((target(LARDER_AVX512))) static uint64_t updateByAvx512(uint64_t state, const uint8_t *bytes, size_t length) {
    if (length < 512) return updateByVpclmul(state, bytes, length);
    __m512i zmm0 = _mm512_xor_si512(_mm512_loadu_si512(bytes), _mm512_zextsi128_si512(_mm_cvtsi64_si128((long long)state)));
    __m512i zmm1 = _mm512_loadu_si512(bytes + 64);
    __m512i zmm2 = _mm512_loadu_si512(bytes + 128);
    __m512i zmm3 = _mm512_loadu_si512(bytes + 192);
    bytes += 256;
    length -= 256;
    while (length >= 256) {
        zmm0 = _mm512_xor_si512(foldZmm(zmm0, fold2048), _mm512_loadu_si512(bytes));
        zmm1 = _mm512_xor_si512(foldZmm(zmm1, fold2048), _mm512_loadu_si512(bytes + 64));
        zmm2 = _mm512_xor_si512(foldZmm(zmm2, fold2048), _mm512_loadu_si512(bytes + 128));
        zmm3 = _mm512_xor_si512(foldZmm(zmm3, fold2048), _mm512_loadu_si512(bytes + 192));
        bytes += 256;
        length -= 256;
    }
    __m512i zmm = _mm512_xor_si512(
        _mm512_xor_si512(foldZmm(zmm0, fold1536), foldZmm(zmm1, fold1024)), _mm512_xor_si512(foldZmm(zmm2, fold512), zmm3));
    while (length >= 64) {
        zmm = _mm512_xor_si512(foldZmm(zmm, fold512), _mm512_loadu_si512(bytes));
        bytes += 64;
        length -= 64;
    }
    __m128i lane = _mm_xor_si128(
        _mm_xor_si128(foldLane(_mm512_extracti32x4_epi32(zmm, 0), fold384), foldLane(_mm512_extracti32x4_epi32(zmm, 1), fold256)),
        _mm_xor_si128(foldLane(_mm512_extracti32x4_epi32(zmm, 2), fold128), _mm512_extracti32x4_epi32(zmm, 3)));
    return finish(lane, bytes, length);
}

// What CPUID says, and for 256- and 512-bit registers whether the kernel saves them (XCR0's
// SSE and AVX state bits; for AVX-512 its opmask and upper ZMM bits too).
static int fastestOnThisCPU(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return larder_crc64_table;
    int pclmul = (ecx & bit_PCLMUL) && (ecx & bit_SSE4_1);
    if (!pclmul) return larder_crc64_table;
    int osSavesYmm = 0, osSavesZmm = 0;
    if ((ecx & bit_OSXSAVE) && (ecx & bit_AVX)) {
        unsigned low, high;
        __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
        osSavesYmm = (low & 0x6) == 0x6;
        osSavesZmm = (low & 0xE6) == 0xE6;
    }
    if (osSavesYmm && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_AVX2) && (ecx & bit_VPCLMULQDQ)) {
        return osSavesZmm && (ebx & bit_AVX512F) ? larder_crc64_avx512 : larder_crc64_vpclmul;
    }
    return larder_crc64_pclmul;
}

#endif

__attribute__((constructor)) static void prepare(void) {
    for (unsigned byte = 0; byte < 256; byte++) {
        uint64_t value = byte;
        for (int bit = 0; bit < 8; bit++) value = (value >> 1) ^ ((value & 1) ? reflectedPolynomial : 0);
        tables[0][byte] = value;
    }
    for (int table = 1; table < 8; table++) {
        for (unsigned byte = 0; byte < 256; byte++) {
            uint64_t previous = tables[table - 1][byte];
            tables[table][byte] = (previous >> 8) ^ tables[0][previous & 0xff];
        }
    }
#if defined(__x86_64__)
    fold128 = foldConstants(128);
    fold256 = foldConstants(256);
    fold384 = foldConstants(384);
    fold512 = foldConstants(512);
    fold768 = foldConstants(768);
    fold1024 = foldConstants(1024);
    fold1536 = foldConstants(1536);
    fold2048 = foldConstants(2048);
    fastest = fastestOnThisCPU();
#endif
}

uint64_t larder_crc64_using(int implementation, uint64_t crc, const void *data, size_t length) {
    const uint8_t *bytes = data;
    uint64_t state = ~crc;
    if (implementation > fastest) implementation = fastest;
#if defined(__x86_64__)
    if (implementation == larder_crc64_avx512) return ~updateByAvx512(state, bytes, length);
    if (implementation == larder_crc64_vpclmul) return ~updateByVpclmul(state, bytes, length);
    if (implementation == larder_crc64_pclmul) return ~updateByPclmul(state, bytes, length);
#endif
    return ~updateByTable(state, bytes, length);
}

uint64_t larder_crc64(uint64_t crc, const void *data, size_t length) {
    return larder_crc64_using(fastest, crc, data, length);
}

int larder_crc64_fastest(void) { return fastest; }
