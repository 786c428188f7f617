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
            HopByHop.strip(&headers, alsoRemoving: "Content-Length")
            let expected = connection.first?.1 == "close" ? ["ETag"] : ["Close", "ETag"]
            #expect(headers.fields.map(\.name) == expected, "\(connection)")
        }
    }

    @Test func removesEveryFixedHopByHopFieldInAnyCase() {
        let fixed = HopByHop.names.enumerated().map { index, name in
            (index.isMultiple(of: 2) ? name.uppercased() : name, "x")
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

    @Test func leavesAMessageWithoutHopByHopFieldsAsItIs() {
        let fields = [("Server", "origin"), ("Content-Length", "3"), ("ETag", "\"a\""), ("Cache-Control", "max-age=60")]
        #expect(Self.stripped(fields) == fields.map(\.0))
    }
}
