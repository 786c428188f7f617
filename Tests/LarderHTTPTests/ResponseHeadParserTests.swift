import LarderHTTP
import Testing

/// Heads as libcurl hands them over: one line per call, each with its CRLF.
@Suite(.timeLimit(.minutes(1))) struct ResponseHeadParserTests {
    /// Feeds `lines` (CRLF added) and returns the final head, or nil when none ended.
    private func parse(_ lines: [String]) throws -> ResponseHead? {
        var parser = ResponseHeadParser()
        for line in lines {
            let bytes = Array((line + "\r\n").utf8)
            if case .final(let head) = try bytes.withUnsafeBytes({ try parser.feed($0) }) { return head }
        }
        return nil
    }

    @Test func fieldsAreKeptInWireFormWithTheirOWSDropped() throws {
        let head = try #require(
            try parse([
                "HTTP/1.1 200 OK", "Date: Sun, 06 Nov 1994 08:49:37 GMT", "ETag:\"e\"", "X-Pad: \t a  b \t", "X-Trail: t  ",
                "Content-Length: 3",
                "",
            ]))
        #expect(head.status == 200 && head.reason == "OK")
        #expect(
            String(decoding: head.headers.wire, as: UTF8.self)
                == "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nETag: \"e\"\r\nX-Pad: a  b\r\nX-Trail: t\r\nContent-Length: 3\r\n")
        #expect(head.headers["x-pad"] == "a  b")
        #expect(head.declaredLength == 3)
    }

    /// obs-fold joins the previous value with one space (RFC 9112 §5.2); a line without a valid
    /// name, or a value with a NUL, is dropped and the rest kept.
    @Test func foldedLinesJoinAndBadLinesAreDropped() throws {
        let head = try #require(
            try parse(["HTTP/1.1 200 OK", "X-A: one", " two", "Bad Name: x", "X-Nul: a\u{0}b", ": empty", "X-B: b", ""]))
        #expect(String(decoding: head.headers.wire, as: UTF8.self) == "X-A: one two\r\nX-B: b\r\n")
        #expect(head.headers.count == 2)
    }

    /// Review 117 F3: a folded line is checked as a value is (a bare CR or a control byte drops
    /// the field it continues), and the continuation of a dropped field continues nothing
    /// (before, it was joined to the field kept before it). A reason with a control byte is not
    /// kept (the status's own goes out).
    @Test func foldedLinesAreCheckedAsValuesAre() throws {
        let head = try #require(
            try parse([
                "HTTP/1.1 200 OK\u{1b}]0;x\u{07}", "X-A: one", " two\rContent-Length: 0", "X-Nul: a\u{0}b", " more", "X-B: b",
                "\tc", "X-C: c", " \u{7f}", "",
            ]))
        #expect(String(decoding: head.headers.wire, as: UTF8.self) == "X-B: b c\r\n")
        #expect(head.reason == "OK" && head.status == 200)
        #expect(try parse(["HTTP/1.1 404 Not\tFound", ""])?.reason == "Not\tFound", "HTAB is a reason's")
    }

    /// A coding other than chunked is refused on a response with a body; on one without (a
    /// 304, a 204, an answer to HEAD) it only says what a body would have had (RFC 9112 §6.1).
    @Test func aCodingIsRefusedOnlyWhereABodyFollows() throws {
        let coded = "Transfer-Encoding: gzip, chunked"
        #expect(throws: HTTPParseError.self) { try parse(["HTTP/1.1 200 OK", coded, ""]) }
        #expect(try parse(["HTTP/1.1 304 Not Modified", coded, ""])?.status == 304)
        #expect(try parse(["HTTP/1.1 204 No Content", coded, ""])?.status == 204)
        var parser = ResponseHeadParser(answersHEAD: true)
        var last: ResponseHeadParser.Event = .none
        for line in ["HTTP/1.1 200 OK", coded, ""] {
            last = try Array((line + "\r\n").utf8).withUnsafeBytes { try parser.feed($0) }
        }
        guard case .final(let head) = last else {
            Issue.record("no final head for HEAD")
            return
        }
        #expect(head.status == 200)
    }

    @Test func anInterimHeadComesBeforeTheFinalOne() throws {
        var parser = ResponseHeadParser()
        var events: [ResponseHeadParser.Event] = []
        for line in ["HTTP/1.1 103 Early Hints", "Link: </a>", "", "HTTP/1.1 204 No Content", "X: y", ""] {
            let bytes = Array((line + "\r\n").utf8)
            events.append(try bytes.withUnsafeBytes { try parser.feed($0) })
        }
        guard case .interim(let interim) = events[2], case .final(let final) = events[5] else {
            Issue.record("expected an interim head, then a final one: \(events)")
            return
        }
        #expect(interim.status == 103 && interim.headers["link"] == "</a>")
        #expect(final.status == 204 && final.headers.fields == [HTTPField(name: "X", value: "y")])
    }
}
