import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct KnownFieldTests {
    /// Every known name is recognised in any case, and names that share its length and first
    /// letter, or differ in one byte, are not.
    @Test func namesAreRecognisedInAnyCaseAndOnlyThose() {
        for field in KnownField.allCases {
            let name = "\(field.name)"
            for spelling in [name, name.lowercased(), name.uppercased()] {
                #expect(Self.classify(spelling) == field, "\(spelling)")
            }
            var changed = Array(name.utf8)
            changed[changed.count - 1] ^= 0x01
            #expect(Self.classify(String(decoding: changed, as: UTF8.self)) == nil, "\(name) with its last byte changed")
            #expect(Self.classify(name + "x") == nil)
            #expect(Self.classify(String(name.dropLast())) == nil)
        }
        for other in ["", "A", "Tf", "TEs", "Ages", "X-Range", "Content-Type", "Accept-Ranges", "Cache-Controm", "If-Rangf", "If-Natch"] {
            #expect(Self.classify(other) == nil, "\(other)")
        }
    }

    static func classify(_ name: String) -> KnownField? {
        Array(name.utf8).withUnsafeBytes { KnownField(name: $0) }
    }

    /// A known name is found through every way a field comes in and not after every way it
    /// goes, by its tag and by its name as a string, as an unknown name is.
    @Test func lookupsFollowEveryChangeToTheFields() {
        var headers = HTTPHeaders()
        #expect(!headers.contains(.range) && !headers.contains("Range"))
        headers.add("range", "bytes=0-1")
        headers.add("X-Other", "1")
        #expect(headers.contains(.range) && headers.contains("RANGE") && headers[.range] == "bytes=0-1")
        headers.set("Range", "bytes=2-3")
        #expect(headers[.range] == "bytes=2-3" && headers.values("Range") == ["bytes=2-3"])
        headers.add("Range", "bytes=4-5")
        headers.set("X-Other", "22")
        #expect(headers.values("range") == ["bytes=2-3", "bytes=4-5"] && headers["x-other"] == "22")
        headers.remove("Range")
        #expect(!headers.contains(.range) && headers["Range"] == nil && headers["X-Other"] == "22")

        let line = Array("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n".utf8)
        line.withUnsafeBytes { raw in
            headers.append(line: raw, nameCount: 4, value: UnsafeRawBufferPointer(rebasing: raw[6..<(raw.count - 2)]))
        }
        Array("If-None-Match".utf8).withUnsafeBytes { name in
            Array("\"a\"".utf8).withUnsafeBytes { headers.append(name: name, value: $0) }
        }
        #expect(headers.date(.date) == 784_111_777 && headers.date("date") == 784_111_777)
        #expect(headers.contains(.ifNoneMatch) && headers["if-none-match"] == "\"a\"")

        let copy = headers.copy(reservingFields: 2)
        #expect(copy == headers && copy.contains(.date) && copy.contains(.ifNoneMatch))
        let read = HTTPHeaders(wireLines: headers.wire[...])
        #expect(read == headers && read.contains(.date) && !read.contains(.age))

        headers.removeFields(whereName: { $0.count == 4 })
        #expect(!headers.contains(.date) && headers.contains(.ifNoneMatch) && headers["X-Other"] == "22")
        headers.removeAll(where: { $0.name == "If-None-Match" })
        #expect(!headers.contains(.ifNoneMatch) && headers.count == 1)
        var values: [String] = []
        headers.add("Cache-Control", "max-age=1")
        headers.add("cache-control", "public")
        headers.forEachValue(of: .cacheControl) { values.append(String(decoding: $0, as: UTF8.self)) }
        #expect(values == ["max-age=1", "public"])
    }
}
