import CChecksum
import Testing

@testable import LarderCache

/// The checksums of the entry formats Larder reads (DISK-FORMAT.md, "Checksums").
@Suite struct BodyChecksumTests {
    /// Inputs around the word (8) and block (32) boundaries, and a long one.
    static let inputs: [[UInt8]] = [
        [], Array("a".utf8), Array("abcdefg".utf8), Array("abcdefgh".utf8), [UInt8](repeating: 0x78, count: 31),
        [UInt8](repeating: 0x79, count: 32), [UInt8](repeating: 0x7a, count: 33), pattern(100_003, seed: 7),
    ]

    /// Format 2's values as the Larder that wrote format 2 computed them (its BodyChecksum, and
    /// Benchmarks/make-disk-entries.py), and format 3's and 5's as that script computes them:
    /// entries already on disk keep reading, and the format is what the document says.
    @Test func knownValuesOfEachFormat() {
        let format2: [UInt64] = [
            0xd39e_b98a_dd8b_6192, 0x3d1e_3046_5316_e732, 0xc583_9c4c_5af3_b1cf, 0xab4c_c57f_3fdc_71f7,
            0x6745_de47_e703_4463, 0x218a_f0f2_25ac_c3ca, 0xb6a9_ce93_a66d_c5ca, 0x0039_a149_b258_1c3f,
        ]
        let format3: [UInt64] = [
            0xd211_0542_2894_656e, 0xc6fd_13b5_c8be_4e08, 0xce45_a5bb_50b2_ad8e, 0x742d_589e_525f_62ed,
            0xe71a_2d64_3ace_b67c, 0x996c_a827_ba5a_1f84, 0x25e9_524f_1edf_657b, 0x3348_6bdc_c785_039e,
        ]
        let format5: [UInt64] = [
            0x0000_0000_0000_0000, 0x3302_8477_2e65_2b05, 0xec20_a3a8_cc71_0e66, 0x67b4_f30a_647a_0c59,
            0x5c62_31b8_4baf_015d, 0xf9a2_934b_55aa_c11d, 0x3679_820e_7305_f238, 0xc040_2dbd_190a_2260,
        ]
        for (index, input) in Self.inputs.enumerated() {
            var old = BodyChecksum(entryVersion: 2)
            old.update(input)
            #expect(old.value == format2[index], "format 2, \(input.count) bytes")
            var lanes = BodyChecksum(entryVersion: 3)
            lanes.update(input)
            #expect(lanes.value == format3[index], "format 3, \(input.count) bytes")
            var sameLanes = BodyChecksum(entryVersion: 4)
            sameLanes.update(input)
            #expect(sameLanes.value == lanes.value, "format 4 has format 3's checksum")
            var current = BodyChecksum()
            current.update(input)
            #expect(current.value == format5[index], "format 5, the current one, \(input.count) bytes")
        }
        var check = BodyChecksum(entryVersion: 5)
        check.update(Array("123456789".utf8))
        #expect(check.value == 0x995d_c9bb_df19_39fa, "CRC-64/XZ's published check value")
    }

    /// Every implementation of format 5's CRC this CPU runs (carry-less multiply on x86-64
    /// unless it lacks PCLMULQDQ) gives the table's value, for every length around the loops'
    /// steps (16, 64, 128, 256 bytes), at unaligned starts, continuing any CRC.
    @Test func everyImplementationOfTheCRCAgreesWithTheTable() {
        let fastest = larder_crc64_fastest()
        #if arch(x86_64)
            #expect(fastest >= Int32(larder_crc64_pclmul.rawValue), "every x86-64 CPU Larder runs on has PCLMULQDQ")
        #endif
        // No 256-byte period, which the pattern has: a fold of equal chunks is not all a loop does.
        let body = pattern(1_100 + 3, seed: 11).enumerated().map { $0.element &+ UInt8(truncatingIfNeeded: $0.offset / 256) }
        var compared = 0
        body.withUnsafeBytes { raw in
            for length in 0...1_100 {
                for start in 0...3 where start + length <= raw.count {
                    let bytes = raw.baseAddress! + start
                    let previous = UInt64(length) &* 0x9e37_79b9_7f4a_7c15
                    let table = larder_crc64_using(Int32(larder_crc64_table.rawValue), previous, bytes, length)
                    for implementation in 1...max(1, fastest) {
                        let value = larder_crc64_using(implementation, previous, bytes, length)
                        if value != table { Issue.record("implementation \(implementation), \(length) bytes at +\(start)") }
                        compared += 1
                    }
                }
            }
        }
        #expect(compared > 4_000)
        let large = pattern(3 << 20 + 17, seed: 5)
        large.withUnsafeBytes { raw in
            let table = larder_crc64_using(Int32(larder_crc64_table.rawValue), 0, raw.baseAddress, raw.count)
            #expect(larder_crc64(0, raw.baseAddress, raw.count) == table, "3 MiB + 17 bytes")
        }
    }

    /// The damage that broke a vector checksum tried before (stop 68's review): the same bit
    /// flipped in two words one loop step apart (16, 64, 128 and 256 bytes), or any two bits
    /// 512 bits apart. A CRC whose polynomial has a period over the body's length misses no
    /// two-bit error, whatever the data.
    @Test func twoFlipsOneLoopStepApartChangeTheCRC() {
        let body = pattern(4_096, seed: 3)
        let original = body.withUnsafeBytes { larder_crc64(0, $0.baseAddress, $0.count) }
        var checked = 0
        for distance in [16, 64, 128, 256] {
            for first in stride(from: 0, to: body.count - distance, by: 37) {
                for bit in [0, 7] {
                    var damaged = body
                    damaged[first] ^= UInt8(1 << bit)
                    damaged[first + distance] ^= UInt8(1 << bit)
                    let value = damaged.withUnsafeBytes { larder_crc64(0, $0.baseAddress, $0.count) }
                    if value == original { Issue.record("flips at \(first) and \(first + distance), bit \(bit)") }
                    checked += 1
                }
            }
        }
        #expect(checked > 500)
    }

    @Test(arguments: [2, 3, 5]) func theValueDoesNotDependOnChunking(version: Int) {
        let body = pattern(100_003)
        var whole = BodyChecksum(entryVersion: version)
        whole.update(body)
        // Chunks of 1 to 70 bytes, so every offset into a word and a block starts one.
        var pieces = BodyChecksum(entryVersion: version)
        var offset = 0
        var size = 1
        while offset < body.count {
            let end = min(body.count, offset + size)
            pieces.update(Array(body[offset..<end]))
            offset = end
            size = size % 70 + 1
        }
        #expect(whole.value == pieces.value)
        // Reading the value midway changes nothing.
        var midway = BodyChecksum(entryVersion: version)
        midway.update(Array(body[..<50_001]))
        _ = midway.value
        midway.update(Array(body[50_001...]))
        #expect(midway.value == whole.value)
    }

    /// A flipped bit in each lane of a block, in the last block's whole words, in the partial
    /// word, and a byte cut off or added, each change the value.
    @Test(arguments: [2, 3, 5]) func damageChangesTheValue(version: Int) {
        let body = pattern(1_000 + 5)
        func value(_ bytes: [UInt8]) -> UInt64 {
            var checksum = BodyChecksum(entryVersion: version)
            checksum.update(bytes)
            return checksum.value
        }
        let original = value(body)
        for position in [0, 8, 16, 24, 40, 500, 992, 999, 1_000, 1_004] {
            var flipped = body
            flipped[position] ^= 0x01
            #expect(value(flipped) != original, "bit flipped at \(position)")
        }
        #expect(value(Array(body.dropLast())) != original)
        #expect(value(body + [0]) != original)
        // Swapped lanes: the same words in another order.
        var swapped = body
        swapped.replaceSubrange(0..<16, with: Array(body[8..<16]) + Array(body[0..<8]))
        #expect(value(swapped) != original)
    }
}
