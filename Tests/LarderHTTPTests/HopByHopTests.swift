import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct HopByHopTests {
    private static func stripped(_ fields: [(String, String)]) -> [String] {
        var headers = HTTPHeaders(fields)
        HopByHop.strip(&headers)
        return headers.fields.map(\.name)
    }

    @Test func alsoRemovingDropsThatFieldInTheSamePassWithOrWithoutHopByHopFields() {
        for connection in [[("Connection", "Keep-Alive")], [("Connection", "close")], []] {
            var headers = HTTPHeaders(
                connection + [("Content-Length", "12"), ("Close", "named by close"), ("content-length", "12"), ("ETag", "\"a\"")])
            HopByHop.strip(&headers, alsoRemoving: .contentLength)
            let expected = connection.first?.1 == "close" ? ["ETag"] : ["Close", "ETag"]
            #expect(headers.fields.map(\.name) == expected, "\(connection)")
        }
    }

    @Test func removesEveryFixedHopByHopFieldInAnyCase() {
        let fixed = HopByHop.fields.enumerated().map { index, field in
            (index.isMultiple(of: 2) ? "\(field.name)".uppercased() : "\(field.name)".lowercased(), "x")
        }
        #expect(
            Self.stripped(fixed + [("Content-Type", "text/plain"), ("Tex", "1"), ("Upgrades", "2")]) == ["Content-Type", "Tex", "Upgrades"])
    }

    @Test func removesFieldsNamedInConnection() {
        let names = Self.stripped([
            ("Connection", "X-Private, KEEP-ALIVE"), ("x-private", "secret"), ("Keep-Alive", "timeout=5"),
            ("X-Privately", "kept"), ("Date", "now"),
        ])
        #expect(names == ["X-Privately", "Date"])
    }

    @Test func connectionNamingOnlyFixedFieldsRemovesThemAndNothingElse() {
        let names = Self.stripped([
            ("Date", "now"), ("Connection", "keep-alive, Upgrade"), ("Keep-Alive", "timeout=5"), ("Upgrade", "h2c"),
            ("Close", "kept: not named"), ("ETag", "\"a\""),
        ])
        #expect(names == ["Date", "Close", "ETag"])
    }

    @Test func aFieldNamedAfterFixedOnesInConnectionIsRemovedToo() {
        let names = Self.stripped([
            ("Connection", "keep-alive"), ("Connection", "te,  X-Trace "), ("x-trace", "1"), ("Keep-Alive", "timeout=5"),
            ("X-Traced", "kept"), ("Connection-Id", "kept"),
        ])
        #expect(names == ["X-Traced", "Connection-Id"])
    }

    @Test func emptyElementsAroundKeepAliveNameNothingButALaterElementDoes() {
        #expect(Self.stripped([("Connection", " , keep-alive,,"), ("X-A", "kept"), ("Date", "now")]) == ["X-A", "Date"])
        #expect(Self.stripped([("Connection", "keep-alive,,X-A"), ("X-A", "named"), ("Date", "now")]) == ["Date"])
    }

    /// A field named in `Connection` goes wherever it stands, before or after, and whatever the
    /// case; a `close` element names a field too (RFC 9110 §7.6.1).
    @Test(arguments: [
        ([("X-A", "1"), ("Connection", "x-a"), ("Date", "now")], ["Date"]),
        ([("Close", "1"), ("Connection", "close"), ("x-b", "2")], ["x-b"]),
        ([("X-A", "1"), ("Connection", "X-B"), ("x-b", "2"), ("Connection", "x-A, upgrade"), ("Upgrade", "h2c")], [String]()),
        ([("Connection", "Upgrade, TE"), ("Upgrade", "h2c"), ("TE", "trailers"), ("Date", "now")], ["Date"]),
        ([("Connection", ""), ("Date", "now")], ["Date"]),
    ])
    func removesListedFieldsBeforeAndAfterConnection(_ fields: [(String, String)], _ expected: [String]) {
        #expect(Self.stripped(fields) == expected)
    }

    @Test func removeFieldsSeesEachFieldOnceInOrderWithItsValue() {
        var headers = HTTPHeaders([("A", "1"), ("B", "2"), ("C", "3"), ("D", "4")])
        var seen: [String] = []
        headers.removeEachField { name, value in
            seen.append(ASCII.string(name) + "=" + ASCII.string(value))
            return value.first == UInt8(ascii: "2") || value.first == UInt8(ascii: "3")
        }
        #expect(seen == ["A=1", "B=2", "C=3", "D=4"])
        #expect(headers.fields.map(\.name) == ["A", "D"])
        #expect(headers.wire == Array("A: 1\r\nD: 4\r\n".utf8))
    }

    /// The fixed fields, `alsoRemoving` and the known names `Connection` lists (hop-by-hop or not)
    /// go by their tags; what is left reads back the same by tag and by name.
    @Test func knownNamesGoByTheirTagsAndWhatIsLeftReadsAsBefore() {
        var headers = HTTPHeaders([
            ("Date", "now"), ("Connection", "Cache-Control, x-a"), ("cache-control", "no-store"), ("TE", "trailers"), ("X-A", "1"),
            ("Content-Length", "3"), ("ETag", "\"a\""), ("Proxy-Authenticate", "Basic"), ("Te-X", "kept"), ("Vary", "Accept"),
        ])
        HopByHop.strip(&headers, alsoRemoving: .contentLength)
        #expect(headers.fields.map(\.name) == ["Date", "ETag", "Te-X", "Vary"])
        #expect(headers.wire == Array("Date: now\r\nETag: \"a\"\r\nTe-X: kept\r\nVary: Accept\r\n".utf8))
        for gone in [KnownField.connection, .cacheControl, .te, .contentLength, .proxyAuthenticate] { #expect(!headers.contains(gone)) }
        #expect(headers[.vary] == "Accept" && headers[.etag] == "\"a\"" && headers["date"] == "now" && headers["te-x"] == "kept")
    }

    @Test func leavesAMessageWithoutHopByHopFieldsAsItIs() {
        let fields = [("Server", "origin"), ("Content-Length", "3"), ("ETag", "\"a\""), ("Cache-Control", "max-age=60")]
        #expect(Self.stripped(fields) == fields.map(\.0))
    }
}
