import LarderHTTP
import Testing

private func framing(_ headers: [(String, String)], version: HTTPVersion = .http1_1) -> Result<BodyFraming, HTTPParseError> {
    let head = RequestHead(
        method: .post, target: .origin("/"), version: version, headers: HTTPHeaders([("Host", "a")] + headers))
    return Result { () throws(HTTPParseError) in try BodyFraming.ofRequest(head) }
}

@Suite(.timeLimit(.minutes(1))) struct BodyFramingTests {
    @Test func noFramingHeadersMeansNoBody() throws {
        #expect(try framing([]).get() == BodyFraming.none)
    }

    @Test func contentLengthIsUsed() throws {
        #expect(try framing([("Content-Length", "42")]).get() == .contentLength(42))
    }

    @Test func identicalDuplicateContentLengthsAreOne() throws {
        #expect(try framing([("Content-Length", "7"), ("Content-Length", "7")]).get() == .contentLength(7))
        #expect(try framing([("Content-Length", "7, 7")]).get() == .contentLength(7))
    }

    @Test(arguments: [["5", "6"], ["5, 6"], ["+5"], ["-1"], ["0x10"], [" "], ["99999999999999999999"]])
    func ambiguousContentLengthIsRejected(_ values: [String]) {
        #expect(throws: HTTPParseError.self) { try framing(values.map { ("Content-Length", $0) }).get() }
    }

    @Test func chunkedIsUsed() throws {
        #expect(try framing([("Transfer-Encoding", "chunked")]).get() == .chunked)
        #expect(try framing([("Transfer-Encoding", "Chunked")]).get() == .chunked)
    }

    @Test func contentLengthWithTransferEncodingIsRejected() {
        #expect(throws: HTTPParseError.self) {
            try framing([("Content-Length", "5"), ("Transfer-Encoding", "chunked")]).get()
        }
    }

    @Test(arguments: ["chunked, identity", "xchunked", "identity", "chunked,", "gzip"])
    func unusableTransferCodingsAreRejected(_ value: String) {
        #expect(throws: HTTPParseError.self) { try framing([("Transfer-Encoding", value)]).get() }
    }

    @Test func transferEncodingInHTTP10IsRejected() {
        #expect(throws: HTTPParseError.self) { try framing([("Transfer-Encoding", "chunked")], version: .http1_0).get() }
    }
}

/// An origin's framing (RFC 9112 §6.3, RFC 9110 §8.6): what a proxy may forward a length for.
@Suite(.timeLimit(.minutes(1))) struct ResponseFramingTests {
    private func check(_ fields: [(String, String)]) throws(HTTPParseError) -> Int? {
        try BodyFraming.checkResponse(HTTPHeaders(fields))
    }

    @Test func oneLengthOrIdenticalOnesAreAccepted() throws {
        #expect(try check([]) == nil)
        #expect(try check([("Transfer-Encoding", "chunked")]) == nil)
        #expect(try check([("Content-Length", "5")]) == 5)
        #expect(try check([("Content-Length", "5"), ("Content-Length", "5, 5")]) == 5)
    }

    @Test(arguments: [
        [("Content-Length", "0"), ("Transfer-Encoding", "chunked")],
        [("Transfer-Encoding", "gzip, chunked"), ("Content-Length", "10")],
        [("Content-Length", "3"), ("Content-Length", "5")],
        [("Content-Length", "3, 5")],
        [("Content-Length", "abc")],
        [("Content-Length", "+5")],
        [("Content-Length", "5,")],
        [("Content-Length", "")],
        [("Content-Length", "5"), ("Content-Length", "")],
        [("Content-Length", "1234567890123456789")],
    ])
    func ambiguousFramingIsAnError(_ fields: [(String, String)]) {
        #expect(throws: HTTPParseError.self) { try check(fields) }
    }

    @Test func chunkedAloneInAnyCaseIsTheOneTransferCodingAccepted() throws {
        #expect(try check([("Transfer-Encoding", "Chunked")]) == nil)
        #expect(try check([("Transfer-Encoding", " chunked ")]) == nil)
    }

    /// Larder sends no TE: any other coding was never asked for, and curl would pass its bytes
    /// on still coded (RFC 9112 §7.4).
    @Test(arguments: [
        [("Transfer-Encoding", "gzip, chunked")], [("Transfer-Encoding", "gzip")], [("Transfer-Encoding", "x-unknown, chunked")],
        [("Transfer-Encoding", "chunked, chunked")], [("Transfer-Encoding", "gzip"), ("Transfer-Encoding", "chunked")],
        [("Transfer-Encoding", "chunked,")], [("Transfer-Encoding", "")], [("Transfer-Encoding", "identity")],
    ])
    func aTransferCodingOtherThanChunkedIsAnError(_ fields: [(String, String)]) {
        #expect(throws: HTTPParseError.self) { try check(fields) }
    }
}
