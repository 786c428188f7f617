import Testing

@testable import LarderCache

/// The checksums of both entry formats Larder reads (DISK-FORMAT.md, "Checksums").
@Suite struct BodyChecksumTests {
    /// Inputs around the word (8) and block (32) boundaries, and a long one.
    static let inputs: [[UInt8]] = [
        [], Array("a".utf8), Array("abcdefg".utf8), Array("abcdefgh".utf8), [UInt8](repeating: 0x78, count: 31),
        [UInt8](repeating: 0x79, count: 32), [UInt8](repeating: 0x7a, count: 33), pattern(100_003, seed: 7),
    ]

    /// Format 2's values as the Larder that wrote format 2 computed them (its BodyChecksum, and
    /// Benchmarks/make-disk-entries.py), and format 3's as that script computes them: entries
    /// already on disk keep reading, and the format is what the document says.
    @Test func knownValuesOfBothFormats() {
        let format2: [UInt64] = [
            0xd39e_b98a_dd8b_6192, 0x3d1e_3046_5316_e732, 0xc583_9c4c_5af3_b1cf, 0xab4c_c57f_3fdc_71f7,
            0x6745_de47_e703_4463, 0x218a_f0f2_25ac_c3ca, 0xb6a9_ce93_a66d_c5ca, 0x0039_a149_b258_1c3f,
        ]
        let format3: [UInt64] = [
            0xd211_0542_2894_656e, 0xc6fd_13b5_c8be_4e08, 0xce45_a5bb_50b2_ad8e, 0x742d_589e_525f_62ed,
            0xe71a_2d64_3ace_b67c, 0x996c_a827_ba5a_1f84, 0x25e9_524f_1edf_657b, 0x3348_6bdc_c785_039e,
        ]
        for (index, input) in Self.inputs.enumerated() {
            var old = BodyChecksum(entryVersion: 2)
            old.update(input)
            #expect(old.value == format2[index], "format 2, \(input.count) bytes")
            var current = BodyChecksum(entryVersion: 3)
            current.update(input)
            #expect(current.value == format3[index], "format 3, \(input.count) bytes")
            var plain = BodyChecksum()
            plain.update(input)
            #expect(plain.value == current.value, "the current format is 3")
        }
    }

    @Test(arguments: [2, 3]) func theValueDoesNotDependOnChunking(version: Int) {
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
    @Test(arguments: [2, 3]) func damageChangesTheValue(version: Int) {
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
