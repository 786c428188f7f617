import LarderHTTP
import Testing

private func framing(_ headers: [(String, String)], version: HTTPVersion = .http1_1) -> Result<BodyFraming, HTTPParseError> {
    let head = RequestHead(
        method: .post, target: .origin("/"), version: version, headers: HTTPHeaders([("Host", "a")] + headers))
    return Result { () throws(HTTPParseError) in try BodyFraming.ofRequest(head) }
}

@Suite struct BodyFramingTests {
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
