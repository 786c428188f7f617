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
        guard head.headers.contains(.transferEncoding) || head.headers.contains(.contentLength) else { return .none }
        let transferEncodings = head.headers.values("Transfer-Encoding")
        if !transferEncodings.isEmpty {
            if head.headers.contains(.contentLength) { throw .bad("both Transfer-Encoding and Content-Length") }
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
        return try declaredLength(head.headers).map { .contentLength($0) } ?? .none
    }

    /// Checks an origin's response framing before anything of it is forwarded or stored: both
    /// Transfer-Encoding and Content-Length (RFC 9112 §6.3 ¶3 calls it a likely smuggling
    /// attempt), or Content-Length values that disagree or are not numbers (RFC 9110 §8.6), are
    /// errors, since the length forwarded would not be the length delivered. Returns the
    /// declared length, if any. `withoutBody`: a response to HEAD, or a 204 or 304, whose
    /// transfer codings only say what a body would have had (RFC 9112 §6.1): not checked.
    public static func checkResponse(_ headers: HTTPHeaders, withoutBody: Bool = false) throws(HTTPParseError) -> Int? {
        if !withoutBody { try checkResponseCodings(headers) }
        guard let length = try declaredLength(headers) else { return nil }
        if headers.contains(.transferEncoding) { throw .bad("both Transfer-Encoding and Content-Length") }
        return length
    }

    /// A response's transfer codings must be `chunked` alone. Larder sends no `TE` (RFC 9110
    /// §10.1.4), so any other coding is one it never accepted (RFC 9112 §7.4); curl would
    /// remove only the chunked framing and deliver the still-coded bytes as if they were the
    /// content, to be stored and served as such. Refused (502) like the framing faults above,
    /// whether chunked follows it (RFC 9112 §6.1) or the close ends the body (§6.3 ¶4).
    static func checkResponseCodings(_ headers: HTTPHeaders) throws(HTTPParseError) {
        guard headers.contains(.transferEncoding) else { return }
        var codings = 0
        var chunked = 0
        headers.forEachListElement(.transferEncoding, keepingEmpty: true) { element in
            codings += 1
            if ASCII.equalsIgnoringCase(UnsafeRawBufferPointer(element), "chunked") { chunked += 1 }
            return true
        }
        guard codings != 1 || chunked != 1 else { return }
        throw .bad("Transfer-Encoding names a coding other than chunked, which Larder never asks for")
    }

    /// The one length the Content-Length field lines declare, walked in place (no arrays or
    /// substrings: every request with a body and every response passes here). RFC 9110 §8.6: a
    /// list of identical values may be treated as one; an empty, signed, over-long or differing
    /// element is an error.
    static func declaredLength(_ headers: HTTPHeaders) throws(HTTPParseError) -> Int? {
        var length: Int?
        var problem: HTTPParseError?
        headers.forEachListElement(.contentLength, keepingEmpty: true) { element in
            guard !element.isEmpty, element.count <= 18, element.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                problem = .bad("invalid Content-Length")
                return false
            }
            let parsed = element.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            if let length, length != parsed {
                problem = .bad("conflicting Content-Length values")
                return false
            }
            length = parsed
            return true
        }
        if let problem { throw problem }
        return length
    }
}
