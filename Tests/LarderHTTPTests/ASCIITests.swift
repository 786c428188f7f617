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

    @Test func lowercasingTouchesOnlyASCIILettersAndRepairsBadBytes() {
        let bytes: [UInt8] = Array("HeLLo-Z@[`{".utf8) + [0xC3, 0x80]  // "À" stays as it is
        #expect(bytes.withUnsafeBufferPointer { ASCII.lowercasedString($0) } == "hello-z@[`{À")
        #expect([UInt8(0xFF), 0x41].withUnsafeBufferPointer { ASCII.lowercasedString($0) } == "\u{FFFD}a")
    }
}
