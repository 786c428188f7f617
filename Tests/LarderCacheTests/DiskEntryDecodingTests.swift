import LarderHTTP
import Testing

@testable import LarderCache

/// The byte-wise decoders of an entry's preamble and head against the String-based ones they
/// replaced (``ReferenceEntryDecoder``): the same answer, value or problem, for every head
/// Larder writes and for heads damaged in every way a seeded run of mutations reaches.
@Suite(.timeLimit(.minutes(1))) struct DiskEntryDecodingTests {
    static let latin1 = ([0x43, 0x61, 0x66, 0xE9, 0x20, 0x4F, 0x4B] as [UInt8]).withUnsafeBytes { ASCII.string($0) }

    /// Heads as the disk tier writes them: reasons empty, plain and Latin-1, Vary values with
    /// spaces, times with and without fractions, fields of several kinds.
    static let heads: [DiskEntryFormat.Head] = [
        .init(
            key: "http://example.com/a", status: 200, reason: "OK", requestTime: 1_764_000_000.123456,
            responseTime: 1_764_000_000.5, vary: [:], headers: ["Cache-Control": "max-age=60", "ETag": "\"e\""]),
        .init(
            key: "https://pypi.org/simple/six/", status: 404, reason: "", requestTime: 100, responseTime: 101,
            vary: ["accept-encoding": "gzip, br", "accept-language": "fr-\u{e9}"], headers: ["Content-Type": "text/html"]),
        .init(
            key: "http://[::1]:8080/x?y=z%20w", status: 299, reason: latin1, requestTime: 0, responseTime: 0.000001,
            vary: ["x": ""], headers: [:]),
        .init(
            key: "http://h/", status: 100, reason: "Continue  twice", requestTime: 1e11, responseTime: 99_999_999_999.999999,
            vary: [:], headers: ["A": "1", "B": "", "C": "x y z"]),
        // Under a route key, the URL fetched (a `url` line, which readers without it skip).
        .init(
            key: "debian:/debian/pool/main/h/hello.deb", status: 200, reason: "OK", requestTime: 1, responseTime: 2, vary: [:],
            headers: ["A": "1"], url: "http://deb.debian.org/debian/pool/main/h/hello.deb"),
        // Refreshed over the body of an earlier fill (a `body-time` line, which readers without
        // it skip).
        .init(
            key: "http://example.com/refreshed", status: 200, reason: "OK", requestTime: 1_764_000_300.25,
            responseTime: 1_764_000_300.5, bodyTime: 1_764_000_000.5, vary: [:], headers: ["ETag": "W/\"e\""]),
    ]

    static func record(_ head: DiskEntryFormat.Head, bodyLength: Int64 = 12345, checksum: UInt64 = 0xfedc_ba98_7654_3210)
        -> [UInt8]
    {
        DiskEntryFormat.entryHead(head, bodyLength: bodyLength, bodyChecksum: checksum)
    }

    /// Both decoders' answers for `bytes` (a preamble, then a head section), as text: NaN
    /// times compare equal that way, a problem's detail is part of the answer, and Vary values
    /// are listed in name order (two equal dictionaries may iterate in different orders).
    static func answers(_ bytes: [UInt8], acceptingFreed: Bool) -> (new: String, reference: String) {
        let preamble = bytes[...]
        let section = bytes.count > DiskEntryFormat.preambleLength ? bytes[DiskEntryFormat.preambleLength...] : []
        let new =
            text(
                Result { () throws(DiskEntryFormat.Problem) in try DiskEntryFormat.decodePreamble(preamble, acceptingFreed: acceptingFreed)
                })
            + " "
            + text(Result { () throws(DiskEntryFormat.Problem) in try DiskEntryFormat.decodeHead(section, bodyLength: 7, bodyChecksum: 9) })
        let reference =
            text(
                Result { () throws(DiskEntryFormat.Problem) in
                    try ReferenceEntryDecoder.decodePreamble(preamble, acceptingFreed: acceptingFreed)
                })
            + " "
            + text(
                Result { () throws(DiskEntryFormat.Problem) in try ReferenceEntryDecoder.decodeHead(section, bodyLength: 7, bodyChecksum: 9)
                })
        return (new, reference)
    }

    static func text(_ result: Result<DiskEntryFormat.Preamble, DiskEntryFormat.Problem>) -> String { "\(result)" }

    static func text(_ result: Result<DiskEntryFormat.Head, DiskEntryFormat.Problem>) -> String {
        switch result {
        case .failure(let problem): return "\(problem)"
        case .success(let head):
            let vary = head.vary.sorted { $0.key < $1.key }.map { "\($0.key.debugDescription)=\($0.value.debugDescription)" }
            return "\(head.key.debugDescription) \(head.status) \(head.reason.debugDescription) \(head.requestTime) "
                + "\(head.responseTime) \(head.bodyTime.map { "\($0)" } ?? "-") \(vary) \(head.headers.wire) \(head.bodyLength) \(head.bodyChecksum)"
        }
    }

    @Test func whatLarderWritesReadsBackAsItWasWritten() throws {
        for head in Self.heads {
            let bytes = Self.record(head)
            let preamble = try DiskEntryFormat.decodePreamble(bytes[...])
            #expect(preamble.bodyLength == 12345 && preamble.bodyChecksum == 0xfedc_ba98_7654_3210 && !preamble.freed)
            #expect(preamble.headLength == bytes.count - DiskEntryFormat.preambleLength)
            let back = try DiskEntryFormat.decodeHead(bytes[DiskEntryFormat.preambleLength...], preamble: preamble)
            var expected = head
            expected.bodyLength = 12345
            expected.bodyChecksum = 0xfedc_ba98_7654_3210
            #expect(back == expected)
            let answers = Self.answers(bytes, acceptingFreed: false)
            #expect(answers.new == answers.reference)
        }
        // A freed record reads as one only where freed records may be.
        var freed = Self.record(Self.heads[0])
        freed.replaceSubrange(0..<DiskEntryFormat.freedMagic.utf8.count, with: DiskEntryFormat.freedMagic.utf8)
        #expect(try DiskEntryFormat.decodePreamble(freed[...], acceptingFreed: true).freed)
        #expect(throws: DiskEntryFormat.Problem.unknownFormat) { try DiskEntryFormat.decodePreamble(freed[...]) }
    }

    /// A `body-time` line only where the body arrived before the response (a refreshed head);
    /// without one, the body arrived with the response. A malformed one makes the head unreadable.
    @Test func aBodyTimeIsWrittenOnlyForABodyThatArrivedBefore() throws {
        for (head, line) in [(Self.heads[0], false), (Self.heads[5], true)] {
            let bytes = Self.record(head)
            #expect(String(decoding: bytes, as: UTF8.self).contains("\nbody-time ") == line)
            let back = try DiskEntryFormat.decodeHead(bytes[DiskEntryFormat.preambleLength...], bodyLength: 7, bodyChecksum: 9)
            #expect(back.bodyArrival == (line ? 1_764_000_000.5 : head.responseTime))
        }
        let normalized = DiskEntryFormat.Head(
            key: Self.heads[0].key, status: 200, reason: "OK", requestTime: 1, responseTime: 2.0000001, bodyTime: 2, vary: [:],
            headers: [:])
        #expect(normalized.bodyTime == nil, "the same microsecond as the response: no line")
        let text = String(decoding: Self.record(Self.heads[5]), as: UTF8.self)
        let damaged = Array(text.replacingOccurrences(of: "body-time 1764000000.500000", with: "body-time 17x4000000.500000").utf8)
        #expect(text.contains("\nbody-time 1764000000.500000\n"))
        #expect(throws: DiskEntryFormat.Problem.unreadableHead("malformed body-time")) {
            try DiskEntryFormat.decodeHead(damaged[DiskEntryFormat.preambleLength...], bodyLength: 7, bodyChecksum: 9)
        }
    }

    /// A head is moved several times a miss (the fill's sink, the store queue): within 128
    /// bytes each move is made inline, past that each is a call to memcpy. The rare fields
    /// (`url`, `body-time`) are boxed to stay within.
    @Test func aHeadStaysWithinTheSizeCopiedInline() {
        #expect(MemoryLayout<DiskEntryFormat.Head>.size <= 128)
        #expect(Self.heads[4].url == "http://deb.debian.org/debian/pool/main/h/hello.deb" && Self.heads[4].bodyTime == nil)
        #expect(Self.heads[5].url == nil && Self.heads[5].bodyTime == 1_764_000_000.5)
        #expect(Self.heads[0].url == nil && Self.heads[0].bodyTime == nil)
    }

    /// Review 87 F2: a time that is no number of seconds (`nan`, `inf`, past a double's range),
    /// which the writer never spells, makes the head unreadable (the entry is dropped as
    /// damaged), rather than an entry fresh forever or one no refresh can match.
    @Test(arguments: ["nan", "-nan", "inf", "-infinity", "1e400"])
    func aTimeThatIsNotFiniteMakesTheHeadUnreadable(_ spelling: String) {
        let text = String(decoding: Self.record(Self.heads[5]), as: UTF8.self)
        for (line, problem) in [
            ("request-time 1764000300.250000", "missing field"), ("response-time 1764000300.500000", "missing field"),
            ("body-time 1764000000.500000", "malformed body-time"),
        ] {
            #expect(text.contains(line))
            let name = line.prefix { $0 != " " }
            let bytes = Array(text.replacingOccurrences(of: line, with: name + " " + spelling).utf8)
            #expect(throws: DiskEntryFormat.Problem.unreadableHead(problem), "\(name) \(spelling)") {
                try DiskEntryFormat.decodeHead(bytes[DiskEntryFormat.preambleLength...], bodyLength: 7, bodyChecksum: 9)
            }
            let answers = Self.answers(bytes, acceptingFreed: false)
            #expect(answers.new == answers.reference)
        }
    }

    /// Hand-made damage at the places that decide: signs and stray bytes in numbers, CR LF
    /// where a line ends, a version from another format, fields out of order.
    @Test func damageAtTheDecidingPlacesIsReadAsBefore() {
        let text = String(decoding: Self.record(Self.heads[0]), as: UTF8.self)
        let edits: [(String, String)] = [
            ("LARDER-ENTRY 5", "LARDER-ENTRY 1"), ("LARDER-ENTRY 5", "LARDER-ENTRY 2"), ("LARDER-ENTRY 5", "LARDER-ENTRY 3"),
            ("LARDER-ENTRY 5", "LARDER-ENTRY 4"), ("LARDER-ENTRY 5", "LARDER-ENTRY +"), ("LARDER-ENTRY 5", "LARDER-ENTRY 9"),
            ("body-length 0", "body-length +"), ("body-length 0", "body-length -"), ("body-checksum f", "body-checksum +"),
            ("body-length 00", "body-length 09"),
            ("body-checksum f", "body-checksum F"), ("head-length 0", "head-length\u{0}"), ("5\nbody", "5\r\nbody"),
            ("status 200 OK", "status  200  OK"), ("status 200 OK", "status 200"), ("status 200 OK", "status +200 OK"),
            ("status 200 OK", "status 2000 OK"), ("status 200 OK", "status OK"), ("status 200 OK", "status "),
            ("\nrequest-time", "\r\nrequest-time"), ("request-time 1764000000.123456", "request-time 1e3"),
            ("request-time 1764000000.123456", "request-time nan"), ("key http", "key\thttp"), ("key ", "kex "),
            ("\n\n", "\n"), ("\n\n", "\n\r\n"), ("response-time", "vary a:b\nresponse-time"), ("response-time", "vary ab\nresponse-time"),
            ("response-time", "vary a: \t b c \t\nresponse-time"), ("response-time", "vary a:\nvary a:2\nresponse-time"),
        ]
        for (from, to) in edits {
            guard let range = text.range(of: from) else {
                Issue.record("no \(from.debugDescription) in the record")
                continue
            }
            let bytes = Array(text.replacingCharacters(in: range, with: to).utf8)
            for acceptingFreed in [false, true] {
                let answers = Self.answers(bytes, acceptingFreed: acceptingFreed)
                #expect(answers.new == answers.reference, "\(from.debugDescription) -> \(to.debugDescription)")
            }
        }
    }

    /// Times spelled every way the writer spells them, and a few it does not (no fraction, an
    /// empty one, more digits than a double holds), read to the same value as before.
    @Test func timesReadAsBefore() {
        var random = SplitMix64(seed: 0x7e11)
        let text = String(decoding: Self.record(Self.heads[0]), as: UTF8.self)
        let original = "request-time 1764000000.123456"
        for round in 0..<5_000 {
            let whole = String(random.next() % [1, 10, 1_000, 1_000_000_000, 100_000_000_000, 1 << 62][round % 6])
            let fraction = String(String(random.next()).prefix(Int(random.next() % 8)))
            let spelled = round % 7 == 0 ? whole : whole + "." + fraction
            let bytes = Array(text.replacingOccurrences(of: original, with: "request-time " + spelled).utf8)
            let answers = Self.answers(bytes, acceptingFreed: false)
            #expect(answers.new == answers.reference, "\(spelled)")
        }
    }

    /// Seeded mutations (bytes replaced, inserted, removed; the replacements biased to bytes
    /// that matter to the decoders), 20,000 of them over every head.
    @Test func seededDamageIsReadAsBefore() {
        var random = SplitMix64(seed: 0x1a2d_e5)
        let interesting: [UInt8] = Array("\n\r \t:+-0123456789abcdefABCDEFx".utf8) + [0, 0x80, 0xC3, 0xE9, 0xFF]
        var disagreements = 0
        for round in 0..<20_000 {
            var bytes = Self.record(Self.heads[round % Self.heads.count])
            for _ in 0...(random.next() % 3) {
                let position = Int(random.next() % UInt64(bytes.count))
                let byte =
                    random.next() % 4 == 0
                    ? UInt8(truncatingIfNeeded: random.next()) : interesting[Int(random.next() % UInt64(interesting.count))]
                switch random.next() % 3 {
                case 0: bytes[position] = byte
                case 1: bytes.insert(byte, at: position)
                default: bytes.remove(at: position)
                }
            }
            let answers = Self.answers(bytes, acceptingFreed: round % 2 == 0)
            if answers.new != answers.reference {
                disagreements += 1
                if disagreements <= 3 { Issue.record("round \(round): \(answers.new) against \(answers.reference): \(bytes)") }
            }
        }
        #expect(disagreements == 0)
    }
}

/// A small seeded generator, so a failing round can be replayed (shared by this target's tests).
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
