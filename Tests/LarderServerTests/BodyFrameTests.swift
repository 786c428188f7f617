import Testing

@testable import LarderServer

/// How a body writer's bytes go on the wire, case by case: cut at a declared length (RFC 9112
/// §6.3), a chunk of their own when chunked (§7.1), nothing without a body.
@Suite struct BodyFrameTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let framing: ResponseFraming
        let sent: Int
        let count: Int
        let expected: (count: Int, overran: Bool, chunked: Bool)
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "no body: nothing goes", framing: .none, sent: 0, count: 10, expected: (0, false, false)),
        Case(name: "within the length: all", framing: .length(100), sent: 10, count: 50, expected: (50, false, false)),
        Case(name: "up to the length exactly: all", framing: .length(100), sent: 40, count: 60, expected: (60, false, false)),
        Case(name: "past the length: cut, overran", framing: .length(100), sent: 90, count: 20, expected: (10, true, false)),
        Case(name: "the length already sent: none, overran", framing: .length(100), sent: 100, count: 5, expected: (0, true, false)),
        Case(name: "chunked: a chunk of its own", framing: .chunked, sent: 7, count: 300, expected: (300, false, true)),
        Case(name: "chunked, nothing: no chunk (size 0 ends the body)", framing: .chunked, sent: 7, count: 0, expected: (0, false, false)),
        Case(name: "until close: all", framing: .close, sent: 1_000, count: 4_096, expected: (4_096, false, false)),
    ]

    @Test(arguments: cases) func frame(_ test: Case) {
        let frame = BodyFrame(count: test.count, framing: test.framing, sent: test.sent)
        #expect(frame.count == test.expected.count)
        #expect(frame.overran == test.expected.overran)
        #expect(frame.chunked == test.expected.chunked)
    }

    @Test func theSizeLineIsHexWithCRLF() {
        #expect(BodyFrame(count: 300, framing: .chunked, sent: 0).sizeLine == Array("12c\r\n".utf8))
    }
}
