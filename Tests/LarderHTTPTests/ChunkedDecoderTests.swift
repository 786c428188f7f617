import LarderHTTP
import Testing

private func decode(_ text: String, pieces: Int = 1) throws -> (body: String, complete: Bool, consumed: Int) {
    var decoder = ChunkedDecoder()
    var body: [UInt8] = []
    let bytes = Array(text.utf8)
    var consumed = 0
    let step = max(1, bytes.count / pieces)
    var start = 0
    while start < bytes.count {
        let end = min(bytes.count, start + step)
        let used = try bytes[start..<end].withUnsafeBytes { buffer in
            try decoder.decode(buffer) { body.append(contentsOf: $0) }
        }
        consumed += used
        if decoder.isComplete { break }
        start = end
    }
    return (String(decoding: body, as: UTF8.self), decoder.isComplete, consumed)
}

@Suite(.timeLimit(.minutes(1))) struct ChunkedDecoderTests {
    @Test func decodesChunksAndStopsAfterTheLastOne() throws {
        let result = try decode("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT")
        #expect(result.body == "hello world")
        #expect(result.complete)
        #expect(result.consumed == "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".utf8.count)
    }

    @Test func decodesWhenFedOneByteAtATime() throws {
        let text = "a;ext=1;q=\"x;y\"\r\n0123456789\r\n0\r\nTrailer: v\r\n\r\n"
        let result = try decode(text, pieces: text.utf8.count)
        #expect(result.body == "0123456789")
        #expect(result.complete)
    }

    @Test(arguments: [
        "g\r\nxx\r\n0\r\n\r\n",  // not hex
        "-5\r\nhello\r\n",  // signed
        "0x5\r\nhello\r\n",  // prefix
        "ffffffffffffffffff\r\n",  // overflow
        "5\nhello\r\n",  // bare LF after size
        "5\r\nhelloXX0\r\n\r\n",  // data not followed by CRLF
        " 5\r\nhello\r\n",  // leading space
        "5\r\nhello\r\n0\r\nBad Trailer\r\n\r\n",  // trailer without colon and space in name
    ])
    func rejectsMalformedCoding(_ text: String) {
        #expect(throws: HTTPParseError.self) { try decode(text) }
    }
}
