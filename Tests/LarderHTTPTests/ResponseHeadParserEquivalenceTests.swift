import Testing

@testable import LarderHTTP

/// The response head parser against the one it replaced (``FirstParser``, kept
/// here as the model): for seeded heads with damaged lines, the same events, the same errors
/// and the same heads, field bytes included.
@Suite(.timeLimit(.minutes(1))) struct ResponseHeadParserEquivalenceTests {
    static let lines: [String] = [
        "HTTP/1.1 200 OK", "HTTP/1.0 304 Not Modified", "HTTP/1.1 100 Continue", "HTTP/2 200", "HTTP/1.1 204 ",
        "Date: Sun, 06 Nov 1994 08:49:37 GMT", "Content-Length: 3", "Content-Length: 0", "Transfer-Encoding: chunked",
        "Connection: keep-alive", "ETag:\"e\"", "X-Pad: \t a  b \t", "Cache-Control: max-age=60", "Server: nginx",
        "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT", "Vary: Accept-Encoding", "Content-Type: text/plain",
    ]

    /// Bytes that end, split or spoil a line: CR, LF, colon, space, tab, a letter, "H", "/",
    /// NUL, DEL, a byte over 0x7F, and separators that are not token characters.
    static let damage: [UInt8] = [13, 10, 58, 32, 9, 65, 72, 47, 0, 0x7F, 0xC3, 40, 64, 44, 34]

    @Test func headsAreParsedAsTheFirstParserDid() {
        var random = SplitMix64(seed: 0x61_0061)
        for round in 0..<20_000 {
            var lines: [[UInt8]] = []
            for _ in 0...(random.next() % 10) {
                var line = Array(Self.lines[Int(random.next() % UInt64(Self.lines.count))].utf8)
                if random.next() % 3 == 0 {
                    for _ in 0...(random.next() % 3) {
                        let byte = Self.damage[Int(random.next() % UInt64(Self.damage.count))]
                        let position = line.isEmpty ? 0 : Int(random.next() % UInt64(line.count))
                        switch random.next() % 4 {
                        case 0 where !line.isEmpty: line[position] = byte
                        case 1: line.insert(byte, at: position)
                        case 2 where !line.isEmpty: line.remove(at: position)
                        default: line = Array(line.prefix(position))
                        }
                    }
                }
                lines.append(line + (random.next() % 8 == 0 ? [10] : [13, 10]))
            }
            lines.append([13, 10])
            let answersHEAD = random.next() % 4 == 0
            var parser = ResponseHeadParser(answersHEAD: answersHEAD)
            var first = FirstParser(answersHEAD: answersHEAD)
            for (number, line) in lines.enumerated() {
                let event = Self.describe { try line.withUnsafeBytes { try parser.feed($0) } }
                let expected = Self.describe { try line.withUnsafeBytes { try first.feed($0) } }
                #expect(event == expected, "round \(round), line \(number): \(line)")
                if event != expected { return }
            }
        }
    }

    /// An event, or the error thrown, as text that names every part of a head.
    static func describe(_ feed: () throws -> ResponseHeadParser.Event) -> String {
        let event: ResponseHeadParser.Event
        do {
            event = try feed()
        } catch let error as HTTPParseError {
            return "error: \(error.reason)"
        } catch {
            return "error: \(error)"
        }
        func text(_ head: ResponseHead) -> String {
            "\(head.status) \(head.reason) \(head.version) \(head.declaredLength.map(String.init) ?? "-") \(head.headers.wire) "
                + head.headers.fields.map { "\($0.name)=\($0.value)" }.joined(separator: "|")
        }
        switch event {
        case .none: return "none"
        case .interim(let head): return "interim \(text(head))"
        case .final(let head): return "final \(text(head))"
        }
    }

    /// ``ResponseHeadParser/feed(_:)`` as it was before the status line's prefix was compared byte
    /// by byte, the field name was scanned in one test per byte and the head was taken out whole.
    struct FirstParser {
        private var head = ResponseHead(status: 0)
        private var started = false
        private let answersHEAD: Bool
        private var headBytes = 0
        private var droppedLast = false

        init(answersHEAD: Bool) { self.answersHEAD = answersHEAD }

        mutating func feed(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> ResponseHeadParser.Event {
            headBytes += line.count
            guard headBytes <= ResponseHeadParser.maxHeadBytes else {
                throw .bad("the response head is over \(ResponseHeadParser.maxHeadBytes / 1024) KiB")
            }
            var end = line.count
            while end > 0, line[end - 1] == 10 || line[end - 1] == 13 { end -= 1 }
            let content = UnsafeRawBufferPointer(rebasing: line[0..<end])
            if content.isEmpty {
                guard started else { return .none }
                started = false
                var finished = ResponseHead(status: 0)
                swap(&finished, &head)
                if (100..<200).contains(finished.status) { return .interim(finished) }
                let withoutBody = answersHEAD || finished.status == 204 || finished.status == 304
                finished.declaredLength = try BodyFraming.checkResponse(finished.headers, withoutBody: withoutBody)
                return .final(finished)
            }
            if content[0] == UInt8(ascii: "H"), content.starts(with: "HTTP/".utf8) {
                head = try ResponseHeadParser.parseStatusLine(content)
                started = true
                droppedLast = false
                return .none
            }
            guard started else { throw .bad("header line before status line") }
            let first = content[0]
            if first == 32 || first == 9 {
                // A continuation of a dropped field, or with a control byte in it, is dropped
                // with its field (review 117).
                guard !droppedLast, head.headers.count > 0 else { return .none }
                guard ASCII.allFieldValueChars(content.assumingMemoryBound(to: UInt8.self)) else {
                    head.headers.removeLastField()
                    droppedLast = true
                    return .none
                }
                let folded = ASCII.trimOWS(ASCII.string(content)[...])
                head.headers.extendLastValue(with: " " + folded)
                return .none
            }
            droppedLast = true
            let bytes = content.assumingMemoryBound(to: UInt8.self)
            var colon = 0
            while colon < bytes.count, bytes[colon] != UInt8(ascii: ":") {
                guard ASCII.isTokenChar(bytes[colon]) else { return .none }
                colon += 1
            }
            guard colon > 0, colon < bytes.count else { return .none }
            var valueStart = colon + 1
            var valueEnd = bytes.count
            while valueStart < valueEnd, bytes[valueStart] == 32 || bytes[valueStart] == 9 { valueStart += 1 }
            while valueEnd > valueStart, bytes[valueEnd - 1] == 32 || bytes[valueEnd - 1] == 9 { valueEnd -= 1 }
            guard ASCII.allFieldValueChars(UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd])) else { return .none }
            head.headers.append(line: line, nameCount: colon, value: UnsafeRawBufferPointer(rebasing: content[valueStart..<valueEnd]))
            droppedLast = false
            return .none
        }
    }
}
