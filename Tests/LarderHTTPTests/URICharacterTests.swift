import Testing

@testable import LarderHTTP

/// A URL's path and query as AbsoluteURL checks them: its table of URI characters against
/// RFC 3986's list on every byte, and its check against the one it replaced (percent sign and
/// fragment tested first, then the class as two bit masks), kept here as the model.
@Suite(.timeLimit(.minutes(1))) struct URICharacterTests {
    @Test func uriCharactersAreExactlyThoseOfRFC3986() {
        // unreserved / sub-delims / ":" / "@" / "/" / "?" (RFC 3986 §3.3, §3.4), "%" aside.
        let allowed = Set("!$&'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(AbsoluteURL.isURIChar(byte) == allowed.contains(byte), "byte \(byte)")
        }
    }

    /// 20,000 seeded paths of 0 to 30 bytes, with escapes whole, cut short or with bad digits,
    /// fragments, spaces, controls and high bytes anywhere: the same error, or none, as before.
    @Test func pathsAreCheckedAsTheFirstCheckDid() {
        var random = SplitMix64(seed: 0x0061_0A11)
        let plain = Array("/a-Z.9_~!$&'()*+,;=:@?".utf8)
        let odd: [UInt8] = Array("%%%#2fAg".utf8) + [0x20, 0x00, 0x7F, 0x80, 0xFF, 0x22, 0x3C, 0x5C, 0x60, 0x7B]
        for round in 0..<20_000 {
            var path: [UInt8] = []
            for _ in 0..<(random.next() % 31) {
                let pick = random.next()
                path.append(pick % 4 == 0 ? odd[Int(pick / 4 % UInt64(odd.count))] : plain[Int(pick / 4 % UInt64(plain.count))])
            }
            func outcome(_ check: (UnsafeRawBufferPointer) throws(HTTPParseError) -> Void) -> String {
                do {
                    try path.withUnsafeBytes { try check($0) }
                    return "ok"
                } catch let error as HTTPParseError {
                    return error.reason
                } catch {
                    return "\(error)"
                }
            }
            #expect(outcome(AbsoluteURL.validatePathAndQuery) == outcome(Self.firstCheck), "round \(round): \(path)")
        }
    }

    /// `AbsoluteURL.validatePathAndQuery` as it was before its table.
    static func firstCheck(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, AbsoluteURL.isHex(bytes[index + 1]), AbsoluteURL.isHex(bytes[index + 2]) else {
                    throw .bad("malformed percent-encoding in URL")
                }
                index += 3
                continue
            }
            if byte == UInt8(ascii: "#") { throw .bad("URL must not carry a fragment") }
            guard ASCII.isIn(byte, low: 0xAFFF_FFD2_0000_0000, high: 0x47FF_FFFE_87FF_FFFF) else {
                throw .bad("invalid character in URL")
            }
            index += 1
        }
    }
}
