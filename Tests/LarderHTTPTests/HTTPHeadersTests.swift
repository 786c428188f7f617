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

    /// A stored head's fields read back from their wire form: names, values (empty, with a
    /// colon, with inner spaces) and order as written; a line not in that form ends the list.
    /// Fields of the kinds a stored head holds: a date, an empty value, a value with a colon,
    /// inner spaces.
    static var stored: HTTPHeaders {
        var written = HTTPHeaders()
        written.add("Date", "Sun, 06 Nov 1994 08:49:37 GMT")
        written.add("X-Empty", "")
        written.add("Link", "<http://a/b:c>; rel=x")
        written.add("x-lower", "a  b")
        return written
    }

    @Test func fieldsReadBackFromTheirWireForm() {
        let written = Self.stored
        let text = Array(("HEAD\r\n").utf8) + written.wire + Array("tail".utf8)
        let read = HTTPHeaders(wireLines: text[6..<(6 + written.wire.count)])
        #expect(read == written)
        #expect(read["link"] == "<http://a/b:c>; rel=x" && read["X-Empty"] == "" && read.count == 4)
        #expect(read.wire.capacity < read.wire.count + 64, "a block of the fields' size")
        let cut = HTTPHeaders(wireLines: (written.wire + Array("Broken line\r\nX-After: 1\r\n".utf8))[...])
        #expect(cut == written, "reading stops at the first line without a name and ': '")
        let unended = HTTPHeaders(wireLines: (written.wire + Array("X-Tail: 1".utf8))[...])
        #expect(unended == written && unended.wire == written.wire, "a last line without its CRLF is not a field")
        #expect(HTTPHeaders(wireLines: []).isEmpty)
    }

    /// Fields read back from wire form against a byte loop of the rule (``firstReading(_:)``):
    /// the same fields and the same bytes kept, for 20,000 seeded damages (bytes that end lines and split
    /// names from values replaced, inserted, removed).
    @Test func wireLinesAreReadAsTheFirstReaderDid() {
        let written = Self.stored
        var random = SplitMix64(seed: 0x3117)
        let bytes: [UInt8] = [13, 10, 13, 10, 58, 32, 65, 9, 0x7F]
        for round in 0..<20_000 {
            var wire = written.wire
            for _ in 0...(random.next() % 3) {
                let position = Int(random.next() % UInt64(wire.count))
                let byte = bytes[Int(random.next() % UInt64(bytes.count))]
                switch random.next() % 3 {
                case 0: wire[position] = byte
                case 1: wire.insert(byte, at: position)
                default: wire.remove(at: position)
                }
            }
            let read = HTTPHeaders(wireLines: wire[...])
            let (kept, fields) = Self.firstReading(wire)
            #expect(read.wire == Array(wire[..<kept]), "round \(round)")
            #expect(read.fields.map { [$0.name, $0.value] } == fields, "round \(round)")
        }
    }

    /// How `HTTPHeaders(wireLines:)` first read fields: bytes kept, and each field's name and value.
    static func firstReading(_ wire: [UInt8]) -> (kept: Int, fields: [[String]]) {
        var fields: [[String]] = []
        var end = 0
        while end < wire.count {
            // Since review 117, a CR ends the line, and must be followed by LF; a value holds
            // only the bytes a field value may (HTAB, SP, VCHAR, obs-text).
            var lineEnd = end
            while lineEnd < wire.count, wire[lineEnd] != 13 { lineEnd += 1 }
            var colon = end
            while colon < lineEnd, wire[colon] != UInt8(ascii: ":") { colon += 1 }
            guard colon > end, lineEnd + 1 < wire.count, wire[lineEnd + 1] == 10, lineEnd >= colon + 2, wire[colon + 1] == 32,
                wire[(colon + 2)..<lineEnd].allSatisfy({ $0 == 9 || ($0 >= 0x20 && $0 != 0x7F) })
            else { break }
            fields.append([
                String(decoding: wire[end..<colon], as: UTF8.self), String(decoding: wire[(colon + 2)..<lineEnd], as: UTF8.self),
            ])
            end = lineEnd + 2
        }
        return (end, fields)
    }

    /// A reason phrase goes out with the bytes it came in with: obs-text (RFC 9112 §4) was read
    /// as one scalar a byte and is written back as that byte, not re-encoded as UTF-8.
    @Test func aStatusLineKeepsTheReasonsBytes() {
        let raw: [UInt8] = [0x43, 0x61, 0x66, 0xE9]
        let reason = raw.withUnsafeBytes { ASCII.string($0) }
        var line: [UInt8] = []
        HeadSerializer.appendStatusLine(203, reason, to: &line)
        #expect(line == Array("HTTP/1.1 203 ".utf8) + raw + [13, 10])
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
        #expect(url.authority == "example.org:8080")
        #expect(try AbsoluteURL(parsing: "https://h:443/").authority == "h")
        #expect(try AbsoluteURL(parsing: "https://[::1]:65535/").authority == "[::1]:65535")
    }

    /// `Host` and a known field added by their tags are the fields added by name, byte for byte.
    @Test func hostAndKnownFieldsAddedByTagAreTheFieldsAddedByName() throws {
        for text in ["http://Example.org:8080/a", "https://h:443/", "https://[::1]:65535/", "http://h/"] {
            let url = try AbsoluteURL(parsing: text)
            var byTag = HTTPHeaders([("X-A", "1")])
            byTag.addHost(of: url)
            byTag.add(.via, "1.1 larder")
            var byName = HTTPHeaders([("X-A", "1")])
            byName.add("Host", url.authority)
            byName.add("Via", "1.1 larder")
            #expect(byTag == byName, "\(text)")
            #expect(byTag.wire == byName.wire)
            #expect(String(decoding: byTag.wire, as: UTF8.self) == "X-A: 1\r\nHost: \(url.authority)\r\nVia: 1.1 larder\r\n")
            #expect(byTag["host"] == url.authority)
            #expect(byTag.contains(.host) && byTag.contains(.via))
        }
        let unicode = AbsoluteURL(scheme: "http", host: "é.example", port: 81, pathAndQuery: "/")
        var byTag = HTTPHeaders()
        byTag.addHost(of: unicode)
        var byName = HTTPHeaders()
        byName.add("Host", unicode.authority)
        #expect(byTag == byName)
        // A scalar under 256 goes out as its byte, in a host as in a known field's value.
        byTag.add(.via, "1.1 é")
        #expect(byTag.wire == Array("Host: ".utf8) + [0xE9] + Array(".example:81\r\nVia: 1.1 ".utf8) + [0xE9, 13, 10])
        #expect(byTag["via"] == "1.1 é" && byTag["host"] == unicode.authority)
        #expect(!unicode.isPlainOnTheWire)
    }

    /// Only host characters pass in the host, only visible bytes in the path.
    @Test func aURLIsPlainOnTheWireOnlyWithHostCharactersAndVisibleBytes() throws {
        #expect(AbsoluteURL(scheme: "http", host: "a-b.c_d.9Z", port: 8, pathAndQuery: "/x?y=%20").isPlainOnTheWire)
        #expect(try AbsoluteURL(parsing: "http://[::1]:8/").isPlainOnTheWire)
        for host in ["a b", "a\r\nb", "a/b", "a@b", "a\u{7F}", "a%b", "a~b", "a{b}", "a\u{0}"] {
            #expect(!AbsoluteURL(scheme: "http", host: host, port: 80, pathAndQuery: "/").isPlainOnTheWire, "\(host)")
        }
        for path in ["/a b", "/\t", "/\u{7F}", "/\r\n"] {
            #expect(!AbsoluteURL(scheme: "http", host: "h", port: 80, pathAndQuery: path).isPlainOnTheWire, "\(path)")
        }
        #expect(AbsoluteURL(scheme: "http", host: "h", port: 80, pathAndQuery: "/é").isPlainOnTheWire)
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

    /// The list is kept in wire form: what is added as strings, or read as lines, is there as
    /// `Name: value\r\n`, and removing or replacing fields keeps the lines and lookups in step.
    @Test func fieldsAreKeptInWireFormThroughEveryChange() {
        var headers = HTTPHeaders([("Date", "d"), ("X-A", "1"), ("Vary", "v"), ("x-a", "2")])
        #expect(String(decoding: headers.wire, as: UTF8.self) == "Date: d\r\nX-A: 1\r\nVary: v\r\nx-a: 2\r\n")
        headers.set("X-A", "three")
        #expect(String(decoding: headers.wire, as: UTF8.self) == "Date: d\r\nX-A: three\r\nVary: v\r\n", "in place of the first")
        #expect(headers["vary"] == "v" && headers["x-a"] == "three" && headers.count == 3)
        headers.removeFields(whereName: { ASCII.equalsIgnoringCase($0, "Date") })
        headers.extendLastValue(with: " w")
        headers.add("ETag", "\"e\"")
        #expect(String(decoding: headers.wire, as: UTF8.self) == "X-A: three\r\nVary: v w\r\nETag: \"e\"\r\n")
        #expect(
            headers.fields == [
                HTTPField(name: "X-A", value: "three"), HTTPField(name: "Vary", value: "v w"), HTTPField(name: "ETag", value: "\"e\""),
            ])
        headers.remove("x-a")
        headers.remove("ETAG")
        #expect(String(decoding: headers.wire, as: UTF8.self) == "Vary: v w\r\n")
        #expect(headers == HTTPHeaders([("Vary", "v w")]))
    }

    /// Lines read off the wire go in as they are when already `Name: value`, and otherwise
    /// with their OWS dropped; either way the value reads back the same.
    @Test func linesGoInWithTheirValuesTrimmed() {
        var headers = HTTPHeaders()
        for (line, valueRange) in [
            ("A: 1\r\n", 3..<4), ("B:2\r\n", 2..<3), ("C: \t 3 \t\r\n", 5..<6), ("D: \r\n", 3..<3), ("E: 5 \r\n", 3..<4),
        ] {
            let bytes = Array(line.utf8)
            bytes.withUnsafeBytes { raw in
                headers.append(line: raw, nameCount: 1, value: UnsafeRawBufferPointer(rebasing: raw[valueRange]))
            }
        }
        #expect(String(decoding: headers.wire, as: UTF8.self) == "A: 1\r\nB: 2\r\nC: 3\r\nD: \r\nE: 5\r\n")
        #expect(headers.fields.map(\.value) == ["1", "2", "3", "", "5"])
    }

    /// Bytes above 0x7F are kept as they came (each one a Latin-1 scalar as a string), and a
    /// string of Latin-1 text goes out as those bytes.
    @Test func valueBytesRoundTripAsLatin1() {
        var headers = HTTPHeaders()
        let raw: [UInt8] = [0x58, 0x3A, 0x20, 0xC3, 0xA9, 0xFF, 0x0D, 0x0A]
        raw.withUnsafeBytes { headers.append(line: $0, nameCount: 1, value: UnsafeRawBufferPointer(rebasing: $0[3..<6])) }
        #expect(headers["x"] == "\u{C3}\u{A9}\u{FF}")
        #expect(headers.wire == raw)
        var added = HTTPHeaders()
        added.add("X", "\u{C3}\u{A9}\u{FF}")
        #expect(added == headers)
    }

    @Test func datesAreReadFromTheValueBytes() {
        let headers = HTTPHeaders([
            ("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Last-Modified", "Sunday, 06-Nov-94 08:49:37 GMT"), ("Expires", "0"),
        ])
        #expect(headers.date("date") == 784_111_777)
        #expect(headers.date("Last-Modified") == 784_111_777, "the other formats through the general parser")
        #expect(headers.date("Expires") == nil)
        #expect(headers.date("Age") == nil)
    }

    @Test func aCopyWithRoomIsEqualAndIndependent() {
        let original = HTTPHeaders([("Host", "a"), ("Accept", "*/*")])
        var copy = original.copy(reservingFields: 4)
        #expect(copy == original)
        copy.add("Via", "1.1 larder")
        copy.remove("Host")
        #expect(original.fields.map(\.name) == ["Host", "Accept"])
        #expect(copy.fields.map(\.name) == ["Accept", "Via"])
    }

    /// Random edits, the same on the list and on a plain array of pairs (the model): after each
    /// one the fields, the wire form and every lookup agree with the model. Seeded, bounded.
    @Test func randomEditsAgreeWithAListOfPairs() {
        var random = SplitMix64(seed: 0x1A2D_E120)
        let names = ["A", "a", "Via", "VIA", "x-y", "Host", "Connection", "te", "Keep-Alive"]
        let hopByHop: Set<String> = ["connection", "te", "keep-alive"]
        let alphabet = Array("ab ,;=\"\u{E9}")  // a Latin-1 letter among them
        func word() -> String { String((0..<Int(random.next() % 5)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }) }
        func same(_ a: String, _ b: String) -> Bool { a.lowercased() == b.lowercased() }
        var headers = HTTPHeaders()
        var model: [(name: String, value: String)] = []
        for step in 0..<3000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            let value = word()
            switch random.next() % 8 {
            case 0, 1:
                headers.add(name, value)
                model.append((name, value))
            case 2:
                headers.set(name, value)
                if let first = model.firstIndex(where: { same($0.name, name) }) {
                    model[first].value = value
                    model = model.enumerated().filter { $0.offset == first || !same($0.element.name, name) }.map(\.element)
                } else {
                    model.append((name, value))
                }
            case 3:
                headers.remove(name)
                model.removeAll { same($0.name, name) }
            case 4:
                headers.extendLastValue(with: value)
                if !model.isEmpty { model[model.count - 1].value += value }
            case 5:
                headers.removeAll { same($0.name, name) || $0.value == value }
                model.removeAll { same($0.name, name) || $0.value == value }
            case 6:
                // A Connection naming one of the names, then the hop-by-hop strip: the fixed
                // fields and every field a Connection element names go, by tag or by name.
                headers.add("Connection", name + "," + value)
                model.append(("Connection", name + "," + value))
                HopByHop.strip(&headers)
                var listed = hopByHop
                for field in model where same(field.name, "Connection") {
                    for element in field.value.split(separator: ",") {
                        let trimmed = element.drop { $0 == " " }.reversed().drop { $0 == " " }
                        if !trimmed.isEmpty { listed.insert(String(trimmed.reversed()).lowercased()) }
                    }
                }
                model.removeAll { listed.contains($0.name.lowercased()) }
            default:
                // A line as a parser hands it over: already `Name: value`, value without OWS.
                let trimmed = String(value.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
                var line: [UInt8] = Array(name.utf8) + [58, 32]
                ASCII.appendBytes(of: trimmed, to: &line)
                line += [13, 10]
                line.withUnsafeBytes { raw in
                    headers.append(
                        line: raw, nameCount: name.utf8.count,
                        value: UnsafeRawBufferPointer(rebasing: raw[(name.utf8.count + 2)..<(raw.count - 2)]))
                }
                model.append((name, trimmed))
            }
            var wire: [UInt8] = []
            for field in model { HeadSerializer.appendField(field.name, field.value, to: &wire) }
            guard headers.wire == wire, headers.fields == model.map({ HTTPField(name: $0.name, value: $0.value) }) else {
                Issue.record("step \(step): \(headers.fields) against \(model)")
                return
            }
            for probe in names {
                #expect(headers[probe] == model.first(where: { same($0.name, probe) })?.value, "step \(step): \(probe)")
                #expect(headers.values(probe) == model.filter { same($0.name, probe) }.map(\.value), "step \(step): \(probe)")
            }
            #expect(headers.count == model.count)
        }
    }
}
