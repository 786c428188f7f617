#ifndef LARDER_CSTRIPES_H
#define LARDER_CSTRIPES_H

#include <stddef.h>
#include <stdint.h>

/// Absorbs `count` 64-byte stripes at `bytes` into the sixteen sums of an entry format 5
/// checksum (docs/DISK-FORMAT.md, "Checksums"), the first of them being stripe number `first`
/// of the input. Uses AVX2 where the CPU has it; the result is the same either way.
void larder_stripes_absorb(uint64_t accumulators[16], uint64_t first, const void *bytes, size_t count);

/// ``larder_stripes_absorb`` without AVX2, whatever the CPU: what tests compare it with.
void larder_stripes_absorb_portable(uint64_t accumulators[16], uint64_t first, const void *bytes, size_t count);

/// Whether ``larder_stripes_absorb`` uses AVX2 on this CPU.
int larder_stripes_vectorized(void);

#endif
