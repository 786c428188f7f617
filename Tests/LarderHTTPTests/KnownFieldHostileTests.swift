import LarderHTTP
import Testing

/// The known-field tags against a naive reference (every field's name compared with
/// ``KnownField/name`` byte by byte, ASCII case ignored) for hostile spellings: a tag that
/// misses `Authorization` or `Set-Cookie` shares a private response, one that invents or misses
/// `Content-Length` or `Transfer-Encoding` desynchronises a connection.
@Suite(.timeLimit(.minutes(1))) struct KnownFieldHostileTests {
    static func naive(_ name: [UInt8]) -> KnownField? {
        name.withUnsafeBytes { raw in KnownField.allCases.first { ASCII.equalsIgnoringCase(raw, $0.name) } }
    }

    static func classify(_ name: [UInt8]) -> KnownField? {
        name.withUnsafeBytes { KnownField(name: $0) }
    }

    /// Every tag has its own bit in the set of names present (a shift past 63 would give 0, and
    /// that name would read as absent).
    @Test func everyTagHasItsOwnBit() {
        #expect(KnownField.allCases.allSatisfy { $0.rawValue >= 1 && $0.rawValue < 64 })
        #expect(Set(KnownField.allCases.map(\.rawValue)).count == KnownField.allCases.count)
    }

    /// Every known name with every token byte in every position, and one token byte longer or
    /// shorter at either end: the classification is the naive one.
    @Test func everyTokenByteInEveryPositionClassifiesAsTheNaiveComparison() {
        let tokenBytes = (0...255).map(UInt8.init).filter(ASCII.isTokenChar)
        for field in KnownField.allCases {
            let name = Array("\(field.name)".utf8)
            for position in name.indices {
                for byte in tokenBytes {
                    var spelling = name
                    spelling[position] = byte
                    #expect(Self.classify(spelling) == Self.naive(spelling), "\(field) with \(byte) at \(position)")
                }
            }
            for byte in tokenBytes {
                for spelling in [name + [byte], [byte] + name, Array(name.dropFirst()), Array(name.dropLast())] {
                    #expect(Self.classify(spelling) == Self.naive(spelling), "\(spelling)")
                }
            }
        }
    }

    /// Every known name with every byte that is not a token byte in every position: the fold of
    /// case must not make one of them a known name (a CR, 0x0D, differs from `-` only in 0x20).
    @Test func everyOtherByteInEveryPositionClassifiesAsTheNaiveComparison() {
        let otherBytes = (0...255).map(UInt8.init).filter { !ASCII.isTokenChar($0) }
        for field in KnownField.allCases {
            let name = Array("\(field.name)".utf8)
            for position in name.indices {
                for byte in otherBytes {
                    var spelling = name
                    spelling[position] = byte
                    #expect(Self.classify(spelling) == Self.naive(spelling), "\(field) with \(byte) at \(position)")
                }
            }
        }
    }

    /// Odd cases of every name, and names with a space, tab, colon or control byte around or
    /// inside them, through every way a field comes in: only the exact names (any case) are tagged.
    @Test func oddSpellingsAreTaggedAsTheNaiveComparisonSays() {
        for field in KnownField.allCases {
            let name = "\(field.name)"
            let alternating = String(
                name.enumerated().map { $0.offset % 2 == 0 ? Character($0.element.lowercased()) : Character($0.element.uppercased()) })
            let spellings = [
                name, name.lowercased(), name.uppercased(), alternating, name + " ", " " + name, name + "\t", name + ":",
                name + "\u{0}", String(name.dropLast()) + "\u{7F}", "X-" + name, name.replacing("-", with: "\r"),
                name.replacing("-", with: "\u{0}"),
            ]
            for spelling in spellings {
                var headers = HTTPHeaders()
                headers.add(spelling, "1")
                Array(spelling.utf8).withUnsafeBytes { raw in
                    Array("2".utf8).withUnsafeBytes { headers.append(name: raw, value: $0) }
                }
                let expected = Self.naive(Array(spelling.utf8))
                for known in KnownField.allCases {
                    #expect(headers.contains(known) == (known == expected), "\(spelling.debugDescription) as \(known)")
                    #expect(headers.values("\(known.name)").count == (known == expected ? 2 : 0), "\(spelling.debugDescription)")
                }
            }
        }
    }

    /// Duplicates and every order of add, set, remove by tag and by name, in any case: after
    /// each step, contains and the values read by tag equal the naive reading of the fields.
    @Test func sequencesOfChangesKeepTheTagsTrue() {
        var generator = SplitMix64(seed: 59)
        let names = [
            "Set-Cookie", "SET-COOKIE", "set-cookie", "Authorization", "authorization", "Vary", "VARY", "X-A", "x-a",
            "Content-Length", "CONTENT-LENGTH", "Transfer-Encoding", "Connection", "Proxy-Authorization", "proxy-AUTHORIZATION",
        ]
        for _ in 0..<200 {
            var headers = HTTPHeaders()
            for step in 0..<12 {
                let name = names[Int(generator.next() % UInt64(names.count))]
                switch generator.next() % 6 {
                case 0, 1: headers.add(name, "v\(step)")
                case 2: headers.set(name, "s\(step)")
                case 3: headers.remove(name)
                case 4:
                    if let known = KnownField.allCases.first(where: { "\($0.name)".lowercased() == name.lowercased() }) {
                        headers.remove(known)
                    }
                default: HopByHop.strip(&headers)
                }
                Self.expectTagsMatchNames(headers)
                Self.expectTagsMatchNames(HTTPHeaders(wireLines: headers.wire[...]))
                Self.expectTagsMatchNames(headers.copy(reservingFields: 1))
            }
        }
    }

    /// A `Connection` header naming fields in odd case strips them, known or not, and the tags
    /// agree with the fields left.
    @Test func connectionNamingFieldsInOddCaseStripsThem() {
        var headers: HTTPHeaders = [
            "connection": "SET-COOKIE, x-Private, Authorization, vary", "Set-Cookie": "a=1", "X-PRIVATE": "1",
            "AUTHORIZATION": "Basic eA==", "Vary": "*", "Age": "1", "PROXY-AUTHORIZATION": "Basic eQ==", "Transfer-ENCODING": "chunked",
        ]
        HopByHop.strip(&headers)
        #expect(headers.fields.map(\.name) == ["Age"])
        Self.expectTagsMatchNames(headers)
    }

    /// The parsers, the only way names from the network come in, refuse or drop a name with a
    /// CR where a `-` is (the tag's case fold maps 0x0D onto `-`, so such a name must never
    /// reach the fields) or with a space before its colon (RFC 9112 §5.1).
    @Test func parsersKeepNamesThatFoldOntoKnownOnesOut() throws {
        for name in ["Set\rCookie", "Content\rLength", "Transfer\rEncoding", "Proxy\rAuthorization", "Content-Length ", "Set-Cookie\t"] {
            var request = RequestHeadParser()
            let bytes = Array("GET http://a/ HTTP/1.1\r\nHost: a\r\n\(name): 5\r\n\r\n".utf8)
            if case .complete(let head, _)? = try? bytes.withUnsafeBytes({ try request.parse($0) }) {
                Issue.record("request with \(name.debugDescription) parsed: \(head.headers.fields)")
            }
            var response = ResponseHeadParser()
            var final: ResponseHead?
            for line in ["HTTP/1.1 200 OK\r\n", "\(name): 5\r\n", "Content-Length: 0\r\n", "\r\n"] {
                if case .final(let head) = try Array(line.utf8).withUnsafeBytes({ try response.feed($0) }) { final = head }
            }
            let head = try #require(final)
            #expect(head.headers.fields.map(\.name) == ["Content-Length"], "\(name.debugDescription)")
            Self.expectTagsMatchNames(head.headers)
        }
    }

    static func expectTagsMatchNames(_ headers: HTTPHeaders, sourceLocation: SourceLocation = #_sourceLocation) {
        for field in KnownField.allCases {
            var byName: [String] = []
            headers.forEachField { name, value in
                if ASCII.equalsIgnoringCase(name, field.name) { byName.append(ASCII.string(value)) }
            }
            var byTag: [String] = []
            headers.forEachValue(of: field) { byTag.append(ASCII.string($0)) }
            #expect(headers.contains(field) == !byName.isEmpty, "\(field)", sourceLocation: sourceLocation)
            #expect(byTag == byName && headers[field] == byName.first, "\(field)", sourceLocation: sourceLocation)
        }
    }
}
