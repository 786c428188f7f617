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
    }
}
