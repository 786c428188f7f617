import LarderHTTP

/// Single byte ranges served from a complete stored response (RFC 9110 §14).
public enum RangeRequest {
    /// What to send for a Range request.
    public enum Resolution: Sendable, Equatable {
        /// The whole representation (no Range, an ignored Range, or an If-Range that failed).
        case full
        /// Bytes `first...last` (206 with Content-Range).
        case partial(first: Int, last: Int)
        /// 416 with `Content-Range: bytes */length`.
        case unsatisfiable
    }

    /// Resolves `Range`/`If-Range` of a GET against a representation of `length` bytes.
    /// Invalid syntax and multiple ranges are answered with the full representation, which
    /// §14.2 allows.
    public static func resolve(request: HTTPHeaders, length: Int, responseHeaders: HTTPHeaders) -> Resolution {
        guard let header = request["Range"] else { return .full }
        if let condition = request["If-Range"], !ifRangeHolds(condition, responseHeaders: responseHeaders) { return .full }
        let text = ASCII.trimOWS(header[...])
        guard text.lowercased().hasPrefix("bytes=") else { return .full }
        let specs = text.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false)
        guard specs.count == 1 else { return .full }
        let spec = ASCII.trimOWS(specs[0])
        guard let dash = spec.firstIndex(of: "-") else { return .full }
        let firstText = spec[..<dash]
        let lastText = spec[spec.index(after: dash)...]
        func number(_ text: Substring) -> Int? {
            guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int(text)
        }
        if firstText.isEmpty {
            // Suffix range: the last N bytes.
            guard let suffix = number(lastText) else { return .full }
            guard suffix > 0, length > 0 else { return .unsatisfiable }
            return .partial(first: max(0, length - suffix), last: length - 1)
        }
        guard let first = number(firstText) else { return .full }
        var last = length - 1
        if !lastText.isEmpty {
            guard let explicit = number(lastText), explicit >= first else { return .full }
            last = min(explicit, length - 1)
        }
        guard first < length else { return .unsatisfiable }
        return .partial(first: first, last: last)
    }

    /// If-Range (§13.1.5): a strong entity tag must equal the ETag; a date must equal
    /// Last-Modified exactly.
    static func ifRangeHolds(_ condition: String, responseHeaders: HTTPHeaders) -> Bool {
        let trimmed = String(ASCII.trimOWS(condition[...]))
        if trimmed.hasPrefix("\"") || trimmed.hasPrefix("W/") {
            guard let etag = responseHeaders["ETag"] else { return false }
            return EntityTag.strongMatch(trimmed, etag)
        }
        guard let date = HTTPDate.parse(trimmed), let modified = responseHeaders.date("Last-Modified") else {
            return false
        }
        return date == modified
    }
}
