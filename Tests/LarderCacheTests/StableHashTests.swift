import Testing

@testable import LarderCache

/// Disk entries are named by `StableHash.hex` of their key: a change in its output would
/// orphan every entry stored by an earlier version, so its values are pinned here.
@Suite struct StableHashTests {
    @Test(arguments: [
        ("http://example.com/a", "42504961764fec742583927b2ff3a620"),
        ("", "f52a15e9a9b5e89be9d327596b869820"),
        ("https://pypi.org/simple/six/\naccept-encoding=gzip", "379175364864c5db837581f33de6cb9a"),
        ("http://h\u{e9}.example/\u{2603}", "c56ce92e41396b4669057286195b0642"),
    ])
    func namesAreTheSameInEveryVersion(_ text: String, _ name: String) {
        #expect(StableHash.hex(text) == name)
        // A string whose bytes are not contiguous to begin with (a substring's copy is).
        #expect(StableHash.hex(String(Substring(text))) == name)
        // The index keeps the name as its two words; a file's name reads back to them.
        #expect(EntryName(hashing: text).description == name)
        #expect(EntryName(fileName: name) == EntryName(hashing: text))
    }

    /// Only a name Larder could have written reads as one: anything else in the entry tree is
    /// left alone by the start-up scan.
    @Test(arguments: [
        "", "42504961764fec742583927b2ff3a62", "42504961764fec742583927b2ff3a6200",
        "42504961764FEC742583927B2FF3A620", "42504961764fec742583927b2ff3a62g", "42504961764fec742583927b2ff3a620.tmp",
        "not-an-entry", "\u{e9}2504961764fec742583927b2ff3a620",
    ])
    func otherFileNamesAreNotEntryNames(_ file: String) {
        #expect(EntryName(fileName: file) == nil)
    }

    /// Checksums and names are spelled as 16 lower-case hex digits a word, zero-padded.
    @Test func wordsAreSpelledInLowerCaseHex() {
        var random = SplitMix64(seed: 60)
        var values: [UInt64] = [0, 1, 9, 10, 15, 16, 0xa, 0x9f, 0xfa, .max, 0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210]
        for _ in 0..<2000 { values.append(random.next()) }
        for value in values {
            let text = String(value, radix: 16)
            #expect(StableHash.hex64(value) == String(repeating: "0", count: 16 - text.count) + text)
        }
    }

    @Test func anEntryFileLivesUnderItsFirstFourDigits() throws {
        let fixture = try DiskFixture()
        let name = try #require(EntryName(fileName: "0123456789abcdeffedcba9876543210"))
        #expect(fixture.cache.relativePath(forName: name) == "01/23/0123456789abcdeffedcba9876543210")
        #expect(fixture.cache.path(forName: name) == fixture.directory + "/v1/01/23/0123456789abcdeffedcba9876543210")
    }
}
