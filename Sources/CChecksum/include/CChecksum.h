// The disk entries' checksum (entry format 5): CRC-64/XZ, in C so that one binary can carry a
// loop for the CPU's carry-less multiply and a table loop for CPUs without it, chosen per call.
#ifndef CCHECKSUM_H
#define CCHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// The ways larder_crc64_using can compute the CRC, slowest first.
enum larder_crc64_implementation {
    /// Eight 256-entry tables, eight bytes a step: any CPU.
    larder_crc64_table = 0,
    /// Folding 4 x 128 bits at a time with PCLMULQDQ (x86-64 with PCLMULQDQ and SSE4.1).
    larder_crc64_pclmul = 1,
    /// Folding 4 x 256 bits at a time with VPCLMULQDQ (x86-64 with VPCLMULQDQ and AVX2).
    larder_crc64_vpclmul = 2,
    /// Folding 4 x 512 bits at a time with VPCLMULQDQ on 512-bit registers (x86-64 with
    /// AVX-512F and VPCLMULQDQ, and a kernel that saves those registers).
    larder_crc64_avx512 = 3,
};

/// CRC-64/XZ (ECMA-182 polynomial, reflected, initial value and final XOR all ones) of the
/// `length` bytes at `data`, continuing `crc`: 0 to start, the previous result to go on, so a
/// body fed in pieces of any size has the value it has fed whole. The fastest implementation
/// this CPU can run.
uint64_t larder_crc64(uint64_t crc, const void *data, size_t length);

/// larder_crc64 by one implementation; one this CPU cannot run answers with the fastest it can.
uint64_t larder_crc64_using(int implementation, uint64_t crc, const void *data, size_t length);

/// The fastest implementation this CPU (and its kernel, for the vector state) can run.
int larder_crc64_fastest(void);

#endif
