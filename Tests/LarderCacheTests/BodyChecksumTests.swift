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
            var lanes = BodyChecksum(entryVersion: 3)
            lanes.update(input)
            #expect(lanes.value == format3[index], "format 3, \(input.count) bytes")
            var four = BodyChecksum(entryVersion: 4)
            four.update(input)
            #expect(four.value == lanes.value, "format 4 has format 3's checksums")
        }
    }

    /// Format 5's values as Benchmarks/make-disk-entries.py computes them (a second
    /// implementation, from the document), around the word and stripe (64) boundaries, on this
    /// CPU's loop and on the portable one.
    @Test func knownValuesOfFormat5() {
        let inputs =
            Self.inputs + [
                [UInt8](repeating: 0x7b, count: 63), [UInt8](repeating: 0x7c, count: 64), [UInt8](repeating: 0x7d, count: 65),
                pattern(1_000, seed: 3),
            ]
        let format5: [UInt64] = [
            0x4dfb_d334_5a9a_b582, 0xeec0_f169_627d_d416, 0x870d_7322_2f8d_3af9, 0xfbbd_e338_9c7b_7490, 0xac26_f3ce_a47c_e687,
            0x0ac7_1d5d_234c_56d2, 0xf02d_86ba_f256_5217, 0xb751_0af8_1a37_d20a, 0x000d_36ad_fb66_7d0d, 0xc27b_27cf_d532_a1b6,
            0x5ad2_4430_e7cc_4987, 0xb83b_1b05_0752_3bb0,
        ]
        for (index, input) in inputs.enumerated() {
            var current = BodyChecksum()
            current.update(input)
            #expect(current.value == format5[index], "format 5, \(input.count) bytes")
            var portable = BodyChecksum(portableStripes: ())
            portable.update(input)
            #expect(portable.value == format5[index], "format 5 without AVX2, \(input.count) bytes")
        }
        #expect(DiskEntryFormat.version == 5)
    }

    /// The AVX2 loop and the portable one agree on every length up to a few stripes and on
    /// random bytes, fed whole and in pieces (on a CPU without AVX2 both are the portable one).
    @Test func theVectorLoopAgreesWithThePortableOne() {
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...300) + [4_095, 4_096, 65_537, 1 << 20] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var vector = BodyChecksum()
            var portable = BodyChecksum(portableStripes: ())
            vector.update(bytes)
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + 1 + (offset * 7) % 200)
                portable.update(Array(bytes[offset..<end]))
                offset = end
            }
            #expect(vector.value == portable.value, "\(length) bytes")
        }
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

    /// Format 5 sums its stripes, so a word's place must count: the same stripes or words in
    /// another order, every bit of every word flipped alone, and two flips of the same bit in
    /// the same lane of two stripes (whose plain sums cancel) each change the value.
    @Test func format5SeesEveryFlipAndEveryMove() {
        // Not periodic, so that moved stripes and sectors are other bytes.
        var state: UInt64 = 0x1234_5678
        let body = (0..<(4_096 + 24)).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        func value(_ bytes: [UInt8]) -> UInt64 {
            var checksum = BodyChecksum()
            checksum.update(bytes)
            return checksum.value
        }
        let original = value(body)
        var seen: Set<UInt64> = [original]
        for byte in 0..<256 {
            for bit in 0..<8 {
                var flipped = body
                flipped[byte] ^= 1 << bit
                seen.insert(value(flipped))
            }
        }
        #expect(seen.count == 1 + 256 * 8, "every single flip in the first four stripes gives a value of its own")
        var stripesSwapped = body
        stripesSwapped.replaceSubrange(0..<128, with: Array(body[64..<128]) + Array(body[0..<64]))
        #expect(value(stripesSwapped) != original)
        var sectorsSwapped = body
        sectorsSwapped.replaceSubrange(0..<1_024, with: Array(body[512..<1_024]) + Array(body[0..<512]))
        #expect(value(sectorsSwapped) != original)
        for (first, second) in [(7, 71), (63, 127), (3, 4_035)] {
            var twice = body
            twice[first] ^= 0x80
            twice[second] ^= 0x80
            #expect(value(twice) != original, "bytes \(first) and \(second)")
        }
        var zeros = [UInt8](repeating: 0, count: 4_096)
        let zero = value(zeros)
        zeros[4_095] = 1
        #expect(value(zeros) != zero)
        #expect(value([UInt8](repeating: 0, count: 4_097)) != zero, "a zero byte more")
    }

    /// Two flips of bit 63 in one lane of two stripes whose words' keyed low halves are equal,
    /// their keyed bit 63 apart: they cancel in one keyed product's sum (as they did in the
    /// first draft of format 5, whose other sum held the plain words, found by review), not in
    /// both. Built for each lane as the review built them.
    @Test func twoFlipsThatCancelInOneKeyedSumDoNotInTheOther() {
        let (key, step): (UInt64, UInt64) = (0xc2b2_ae3d_27d4_eb4f, 0x1656_67b1_9e37_79f9)
        var state: UInt64 = 0xfeed
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state ^ (state >> 29)
        }
        for lane in 0..<8 {
            var words = (0..<16).map { _ in next() }
            let first = words[lane] ^ (UInt64(lane + 1) &* key)
            let secondKey = UInt64(lane + 1) &* key &+ step
            let low = (first & 0xffff_ffff) ^ (secondKey & 0xffff_ffff)
            let top = ((first >> 63) ^ 1) ^ (secondKey >> 63)
            words[8 + lane] = (top << 63) | (next() & 0x7fff_ffff_0000_0000) | low
            let body = words.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (8 * $0)) } }
            var flipped = body
            flipped[lane * 8 + 7] ^= 0x80
            flipped[64 + lane * 8 + 7] ^= 0x80
            var before = BodyChecksum()
            before.update(body)
            var after = BodyChecksum()
            after.update(flipped)
            #expect(before.value != after.value, "lane \(lane)")
        }
    }
}
