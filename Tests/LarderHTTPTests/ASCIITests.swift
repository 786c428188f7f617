import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct ASCIITests {
    @Test func tokenCharactersAreExactlyTchar() {
        // RFC 9110 §5.6.2.
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(ASCII.isTokenChar(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }

    /// The eight-at-a-time checks answer as the byte-by-byte definitions do: every byte value at
    /// every position of words and tails, next to each boundary byte, and seeded random mixes.
    @Test func wordAtATimeChecksMatchTheByteDefinitions() {
        func check(_ bytes: [UInt8]) {
            let value = bytes.allSatisfy(ASCII.isFieldValueChar)
            let visible = bytes.allSatisfy { $0 > 0x20 && $0 != 0x7F }
            #expect(bytes.withUnsafeBufferPointer { ASCII.allFieldValueChars($0) } == value, "\(bytes)")
            #expect(bytes.withUnsafeBufferPointer { ASCII.allVisibleOrHigh($0) } == visible, "\(bytes)")
            let visibleASCII = bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
            #expect(bytes.withUnsafeBufferPointer { ASCII.allVisibleASCII($0) } == visibleASCII, "\(bytes)")
        }
        let neighbours: [UInt8] = [0x00, 0x08, 0x09, 0x0A, 0x1F, 0x20, 0x21, 0x7E, 0x7F, 0x80, 0xFF]
        for length in [1, 7, 8, 9, 16, 19] {
            for position in 0..<length {
                for byte in UInt8.min...UInt8.max {
                    for neighbour in neighbours {
                        var bytes = [UInt8](repeating: neighbour, count: length)
                        bytes[position] = byte
                        check(bytes)
                    }
                }
            }
        }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = Int(state >> 59) + 1
            check(
                (0..<length).map { index in
                    let pick = UInt8(truncatingIfNeeded: state >> (index % 8 * 8))
                    return pick < 0xC0 ? neighbours[Int(pick) % neighbours.count] : pick
                })
        }
        check([])
    }

    @Test func lowercasingTouchesOnlyASCIILettersAndRepairsBadBytes() {
        let bytes: [UInt8] = Array("HeLLo-Z@[`{".utf8) + [0xC3, 0x80]  // "À" stays as it is
        #expect(bytes.withUnsafeBufferPointer { ASCII.lowercasedString($0) } == "hello-z@[`{À")
        #expect([UInt8(0xFF), 0x41].withUnsafeBufferPointer { ASCII.lowercasedString($0) } == "\u{FFFD}a")
    }
}
