import LarderConfig
import LarderTLS
import Testing

/// The digest a `digest` route checks bodies against, fed in pieces as a body streams in.
@Suite struct BodyDigestTests {
    /// FIPS 180-2's examples ("abc"), fed one byte at a time and in one piece alike.
    @Test func matchesTheStandardsExamplesWhateverTheChunking() {
        let expected: [(DigestAlgorithm, String)] = [
            (.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                .sha512,
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
            ),
        ]
        for (algorithm, hex) in expected {
            let whole = BodyDigest(algorithm)
            Array("abc".utf8).withUnsafeBytes { whole.update($0) }
            let pieces = BodyDigest(algorithm)
            for byte in "abc".utf8 { [byte].withUnsafeBytes { pieces.update($0) } }
            [UInt8]().withUnsafeBytes { pieces.update($0) }
            #expect(whole.finish() == hex)
            #expect(pieces.finish() == hex)
            #expect(hex.count == algorithm.hexLength && algorithm.accepts(hex[...]))
        }
        #expect(!DigestAlgorithm.sha256.accepts(String(repeating: "A", count: 64)[...]), "lower-case hex only")
    }
}
