/// How a message body is delimited (RFC 9112 §6.3).
public enum BodyFraming: Sendable, Equatable {
    /// No body.
    case none
    /// Exactly this many bytes.
    case contentLength(Int)
    /// The chunked transfer coding.
    case chunked

    /// The framing of a request body, rejecting every ambiguous combination that request
    /// smuggling relies on (RFC 9112 §6.1, §6.3, §11.2).
    public static func ofRequest(_ head: RequestHead) throws(HTTPParseError) -> BodyFraming {
        // Most requests carry neither field: two lookups instead of two lists built.
        guard head.headers.contains("Transfer-Encoding") || head.headers.contains("Content-Length") else { return .none }
        let transferEncodings = head.headers.values("Transfer-Encoding")
        let contentLengths = head.headers.values("Content-Length")
        if !transferEncodings.isEmpty {
            if !contentLengths.isEmpty { throw .bad("both Transfer-Encoding and Content-Length") }
            if head.version == .http1_0 { throw .bad("Transfer-Encoding in an HTTP/1.0 request") }
            var codings: [String] = []
            for value in transferEncodings {
                for element in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let coding = ASCII.trimOWS(element)
                    guard ASCII.isToken(coding) else { throw .bad("malformed Transfer-Encoding") }
                    codings.append(coding.lowercased())
                }
            }
            // Only "chunked" alone is accepted: a proxy that forwards other codings invites two
            // parsers to disagree about where the body ends.
            guard codings.last == "chunked" else { throw .bad("Transfer-Encoding does not end in chunked") }
            // RFC 9112 §7: chunked is never applied more than once.
            if codings.dropLast().contains("chunked") { throw .bad("chunked applied more than once") }
            guard codings.count == 1 else {
                throw HTTPParseError(501, "transfer coding '\(codings.joined(separator: ", "))' not implemented")
            }
            return .chunked
        }
        return try contentLength(contentLengths).map { .contentLength($0) } ?? .none
    }

    /// Checks an origin's response framing before anything of it is forwarded or stored: both
    /// Transfer-Encoding and Content-Length (RFC 9112 §6.3 ¶3 calls it a likely smuggling
    /// attempt), or Content-Length values that disagree or are not numbers (RFC 9110 §8.6), are
    /// errors, since the length forwarded would not be the length delivered. Returns the
    /// declared length, if any.
    public static func checkResponse(_ headers: HTTPHeaders) throws(HTTPParseError) -> Int? {
        // Every response a miss stores passes here twice: walked in place, no arrays or
        // substrings (which cost ~6,000 instructions a call).
        var length: Int?
        var problem: HTTPParseError?
        for field in headers.fields where ASCII.equalsIgnoringCase(field.name, "Content-Length") {
            var value = field.value
            value.withUTF8 { bytes in
                var start = 0
                repeat {
                    var end = start
                    while end < bytes.count && bytes[end] != UInt8(ascii: ",") { end += 1 }
                    var first = start
                    var last = end
                    while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
                    while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
                    guard last > first, last - first <= 18 else { return problem = .bad("invalid Content-Length") }
                    var parsed = 0
                    for index in first..<last {
                        let byte = bytes[index]
                        guard byte >= 0x30 && byte <= 0x39 else { return problem = .bad("invalid Content-Length") }
                        parsed = parsed * 10 + Int(byte - 0x30)
                    }
                    if let length, length != parsed { return problem = .bad("conflicting Content-Length values") }
                    length = parsed
                    start = end + 1
                } while start <= bytes.count
            }
            if let problem { throw problem }
        }
        guard let length else { return nil }
        if headers.contains("Transfer-Encoding") { throw .bad("both Transfer-Encoding and Content-Length") }
        return length
    }

    /// The one length a list of Content-Length field values declares. RFC 9110 §8.6: a list of
    /// identical values may be treated as one; anything else is an error.
    static func contentLength(_ contentLengths: [String]) throws(HTTPParseError) -> Int? {
        var length: Int?
        for value in contentLengths {
            for element in value.split(separator: ",", omittingEmptySubsequences: false) {
                let parsed = try parseContentLength(ASCII.trimOWS(element))
                if let length, length != parsed { throw .bad("conflicting Content-Length values") }
                length = parsed
            }
        }
        return length
    }

    /// 1*DIGIT, no sign, no overflow.
    public static func parseContentLength(_ text: Substring) throws(HTTPParseError) -> Int {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw .bad("invalid Content-Length")
        }
        return text.utf8.reduce(0) { $0 * 10 + Int($1 - 48) }
    }
}
