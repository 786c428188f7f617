import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct HTTPHeadersTests {
    @Test func listElementsAreTrimmedLoweredAndNonEmptyAcrossFieldLines() {
        let headers = HTTPHeaders([
            ("Vary", " Accept-Encoding ,\t,USER-Agent\t"), ("date", "x"), ("VARY", ",Cookie,, "), ("Vary", ""),
        ])
        #expect(headers.listElements("vary") == ["accept-encoding", "user-agent", "cookie"])
        #expect(headers.listElements("Connection") == [])
    }

    @Test func listElementsLowerOnlyASCIILetters() {
        // Field bytes above 0x7F arrive as ISO-8859-1 scalars (ASCII.string); tokens are ASCII, so
        // only A-Z change case.
        let headers = HTTPHeaders([("X-List", "ÀB, Tok\u{FF}")])
        #expect(headers.listElements("x-list") == ["Àb", "tok\u{FF}"])
    }

    @Test func lookupIgnoresCaseAndLength() {
        let headers = HTTPHeaders([("Content-Length", "3"), ("content-type", "a"), ("ETag", "\"e\"")])
        #expect(headers["CONTENT-TYPE"] == "a")
        #expect(headers["etag"] == "\"e\"")
        #expect(headers["Content-Typ"] == nil)
        #expect(headers["content-typf"] == nil)
        #expect(ASCII.equalsIgnoringCase("Proxy-Authorization", "proxy-authorizatioN"))
        #expect(!ASCII.equalsIgnoringCase("te", "tE "))
    }

    @Test func trimmingOWSKeepsInnerSpaceAndOtherBytes() {
        #expect(ASCII.trimOWS(" \t a b \t") == "a b")
        #expect(ASCII.trimOWS("\t \t") == "")
        #expect(ASCII.trimOWS("\u{A0}x\u{A0}") == "\u{A0}x\u{A0}")
    }

    @Test func absoluteURLTextKeepsANonDefaultPortAndThePath() throws {
        let url = try AbsoluteURL(parsing: "http://Example.org:8080/a%2f?q=1")
        #expect(url.description == "http://example.org:8080/a%2f?q=1")
        #expect(url.withPath("/b") == "http://example.org:8080/b")
        #expect(try AbsoluteURL(parsing: "https://h/").description == "https://h/")
        #expect(try AbsoluteURL(parsing: "http://[::1]:80/x").description == "http://[::1]/x")
    }

    @Test func removingAFieldKeepsTheOthersInOrder() {
        var headers = HTTPHeaders([("Age", "1"), ("Date", "d"), ("age", "2"), ("ETag", "e"), ("Vary", "v"), ("AGE", "3")])
        headers.remove("Age")
        #expect(headers.fields.map(\.name) == ["Date", "ETag", "Vary"])
        headers.remove("Missing")
        #expect(headers.fields.map(\.name) == ["Date", "ETag", "Vary"])
        headers.removeAll { $0.name == "Vary" || $0.name == "Date" }
        #expect(headers.fields.map(\.name) == ["ETag"])
    }
}
