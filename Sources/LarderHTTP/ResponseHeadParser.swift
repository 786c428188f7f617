/// Builds a response head from header lines as an upstream client library delivers them
/// (status line, field lines, empty line), one line per call.
///
/// Origin responses are parsed tolerantly but safely: obs-fold is replaced by a space
/// (RFC 9112 §5.2 allows a proxy to do so), a field line without a valid name is dropped, and
/// values keep their bytes. Heads (interim ones included) over ``maxHeadBytes`` in all, and
/// final heads whose framing is ambiguous (``BodyFraming/checkResponse(_:)``), are errors:
/// nothing of them may be forwarded.
public struct ResponseHeadParser: Sendable {
    /// The head being built, valid while `started`. Not an Optional: each field line then
    /// mutates it in place, where `head!.headers.add` copied the whole head out and back.
    private var head = ResponseHead(status: 0)
    private var started = false
    /// The request was a HEAD: the final head has no body whatever it says.
    private let answersHEAD: Bool
    private var headBytes = 0
    /// How many fields were kept when a field line was last dropped (-1: none since the status
    /// line): while no field is kept after it, an obs-fold line continues nothing kept. Set
    /// only where a line is dropped, so a kept line costs nothing more.
    private var droppedAt = -1
    /// libcurl refuses a single field line over 100 KiB itself; this bounds the whole.
    public static let maxHeadBytes = 256 * 1024

    /// `answersHEAD`: the head answers a HEAD request.
    public init(answersHEAD: Bool = false) { self.answersHEAD = answersHEAD }

    /// What a line completed.
    public enum Event: Sendable {
        /// Nothing yet.
        case none
        /// An interim (1xx) head ended; a final one follows.
        case interim(ResponseHead)
        /// The final head ended.
        case final(ResponseHead)
    }

    /// Feeds one line, with or without its CRLF.
    public mutating func feed(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> Event {
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
            if (100..<200).contains(head.status) { return .interim(takeHead()) }
            let withoutBody = answersHEAD || head.status == 204 || head.status == 304
            head.declaredLength = try BodyFraming.checkResponse(head.headers, withoutBody: withoutBody)
            return .final(takeHead())
        }
        // Byte by byte rather than `starts(with:)`, whose generic walk of a UTF-8 view cost more
        // than the rest of the status line's checks.
        if content[0] == UInt8(ascii: "H"), content.count >= 5, content[1] == UInt8(ascii: "T"), content[2] == UInt8(ascii: "T"),
            content[3] == UInt8(ascii: "P"), content[4] == UInt8(ascii: "/")
        {
            head = try ResponseHeadParser.parseStatusLine(content)
            started = true
            droppedAt = -1
            return .none
        }
        guard started else { throw .bad("header line before status line") }
        let first = content[0]
        if first == 32 || first == 9 {
            // obs-fold: joined to the previous value with one space (RFC 9112 §5.2), under
            // the check every value has: a bare CR or a NUL in it drops the whole field, which
            // would otherwise reach clients (and the cache) with the CR in it.
            guard droppedAt != head.headers.count, head.headers.count > 0 else { return .none }
            guard ASCII.allFieldValueChars(content.assumingMemoryBound(to: UInt8.self)) else {
                head.headers.removeLastField()
                droppedAt = head.headers.count
                return .none
            }
            let folded = ASCII.trimOWS(ASCII.string(content)[...])
            head.headers.extendLastValue(with: " " + folded)
            return .none
        }
        // One pass over the bytes through a typed pointer: every field of every response
        // comes through here.
        let bytes = content.assumingMemoryBound(to: UInt8.self)
        // The name's token characters, then its colon: ":" is not one, so a single test per
        // byte finds both the colon and a name that is not a token (the line is dropped).
        var colon = 0
        while colon < bytes.count, ASCII.isTokenChar(bytes[colon]) { colon += 1 }
        guard colon > 0, colon < bytes.count, bytes[colon] == UInt8(ascii: ":") else {
            droppedAt = head.headers.count
            return .none
        }
        var valueStart = colon + 1
        var valueEnd = bytes.count
        while valueStart < valueEnd, bytes[valueStart] == 32 || bytes[valueStart] == 9 { valueStart += 1 }
        while valueEnd > valueStart, bytes[valueEnd - 1] == 32 || bytes[valueEnd - 1] == 9 { valueEnd -= 1 }
        // A NUL or bare CR inside a value could split the header downstream: drop the field.
        guard ASCII.allFieldValueChars(UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd])) else {
            droppedAt = head.headers.count
            return .none
        }
        head.headers.append(line: line, nameCount: colon, value: UnsafeRawBufferPointer(rebasing: content[valueStart..<valueEnd]))
        return .none
    }

    /// The head built so far, moved out and replaced by an empty one: the caller's is then the
    /// only reference to its fields, which it changes in place. The empty head's reason is
    /// given, not looked up: it is never read (the next status line replaces the head).
    private mutating func takeHead() -> ResponseHead {
        var taken = ResponseHead(status: 0, reason: "")
        swap(&taken, &head)
        return taken
    }

    /// Room reserved for a response's fields (an origin's 1 KiB response carries 6-12).
    static let expectedFields = 16

    /// Whether `bytes` may be a reason phrase: HTAB, SP, VCHAR, obs-text. A loop of its own: a
    /// reason is a few bytes, for which ``ASCII/allFieldValueChars(_:)``'s words cost more.
    @inline(__always)
    static func isReason(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for byte in bytes where byte < 0x20 && byte != 9 || byte == 0x7F { return false }
        return true
    }

    /// `HTTP/1.1 200 OK` (the reason may be empty or missing).
    static func parseStatusLine(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> ResponseHead {
        guard line.count >= 12, line[8] == 32,
            (49...53).contains(line[9]), (48...57).contains(line[10]), (48...57).contains(line[11])
        else {
            // HTTP/2 status lines from libcurl look like "HTTP/2 200".
            if line.count >= 10, line.starts(with: "HTTP/2 ".utf8) || line.starts(with: "HTTP/3 ".utf8) {
                let digits = line[7..<10]
                guard digits.allSatisfy({ (48...57).contains($0) }) else { throw .bad("malformed status line") }
                let status = digits.reduce(0) { $0 * 10 + Int($1 - 48) }
                return ResponseHead(status: status)
            }
            throw .bad("malformed status line")
        }
        let status = Int(line[9] - 48) * 100 + Int(line[10] - 48) * 10 + Int(line[11] - 48)
        var reason = ""
        // RFC 9112 §4: HTAB, SP, VCHAR and obs-text only, the bytes a field value may hold. A
        // reason with a bare CR or another control byte is not forwarded (it could end the
        // status line early for a client): the status's own reason goes instead.
        if line.count > 13, isReason(UnsafeRawBufferPointer(rebasing: line[13...])) {
            reason = ASCII.string(UnsafeRawBufferPointer(rebasing: line[13...]))
        }
        let version: HTTPVersion = line[7] == 48 ? .http1_0 : .http1_1
        return ResponseHead(
            status: status, reason: reason.isEmpty ? nil : reason, version: version,
            headers: HTTPHeaders(capacity: expectedFields))
    }
}
