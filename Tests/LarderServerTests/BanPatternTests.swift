import Testing

@testable import LarderServer

/// Which stored URLs a ban covers.
@Suite struct BanPatternTests {
    @Test func prefixesMatchTheStartOnly() {
        let ban = BanPattern.prefix("https://files.example/packages/")
        #expect(ban.matches("https://files.example/packages/a/b.whl"))
        #expect(!ban.matches("https://files.example/simple/a/"))
        #expect(!ban.matches("http://files.example/packages/a.whl"), "the scheme is part of the key")
    }

    @Test func globStarsSpanAnyRunIncludingSlashesAndNothingElseIsSpecial() {
        let ban = BanPattern.glob("https://registry.example/*/-/*.tgz")
        #expect(ban.matches("https://registry.example/left-pad/-/left-pad-1.3.0.tgz"))
        #expect(ban.matches("https://registry.example/@scope/pkg/-/pkg-1.0.0.tgz"), "* crosses slashes")
        #expect(!ban.matches("https://registry.example/left-pad"))
        #expect(!ban.matches("https://registry.example/left-pad/-/left-pad-1.3.0.tgz.sig"), "anchored at the end")
        #expect(BanPattern.glob("*").matches("") && BanPattern.glob("a**b").matches("ab"))
        #expect(BanPattern.glob("http://x/?a=1").matches("http://x/?a=1") && !BanPattern.glob("http://x/?a=1").matches("http://x/b"))
    }

    @Test func aPathologicalGlobStaysLinearEnough() {
        let text = String(repeating: "a", count: 20_000)
        let pattern = String(repeating: "*a", count: 50) + "b"
        #expect(!BanPattern.glob(pattern).matches(text))
    }
}
