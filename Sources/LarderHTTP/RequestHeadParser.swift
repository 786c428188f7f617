import Glibc

/// An incremental, strict parser for request heads (RFC 9112 §2-§5).
///
/// Feed it the connection's unread bytes each time more arrive; it remembers how far it has
/// searched for the end of the head, so a head that trickles in byte by byte costs linear time.
/// Anything the RFC allows a server to reject as ambiguous is rejected: bare CR or LF, obs-fold,
/// whitespace before the colon, control characters, duplicate Host, malformed versions.
public struct RequestHeadParser: Sendable {
    /// The most bytes a head may take, request line included (431/414 beyond).
    public var maxHeadBytes: Int
    /// The most header fields a head may carry (431 beyond).
    public var maxFields: Int
    private var scanned = 0
    /// Whether the request line's end was seen in an earlier call.
    private var sawLineEnd = false

    public init(maxHeadBytes: Int = 64 * 1024, maxFields: Int = 128) {
        self.maxHeadBytes = maxHeadBytes
        self.maxFields = maxFields
    }

    /// What a call to ``parse(_:)`` found.
    public enum Outcome: Sendable {
        /// More bytes are needed.
        case incomplete
        /// A whole head, and how many bytes of the input it took (leading empty lines included).
        case complete(RequestHead, length: Int)
    }

    /// Forgets the search position; call after a head was consumed.
    public mutating func reset() {
        scanned = 0
        sawLineEnd = false
    }

    /// Looks for a complete head at the start of `bytes`.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> Outcome {
        // RFC 9112 §2.2: ignore empty lines before the request line.
        var start = 0
        while start + 1 < bytes.count, bytes[start] == 13, bytes[start + 1] == 10, start < 16 { start += 2 }
        if start < bytes.count, bytes[start] == 10 { throw .bad("bare LF in request head") }
        // The method is a token (RFC 9110 §9.1): anything else this early is not HTTP at all
        // (a TLS ClientHello sent to a plain-HTTP port, most often) and is refused at once
        // instead of at the header timeout.
        var methodIndex = start
        while methodIndex < bytes.count, methodIndex < start + 32, bytes[methodIndex] != 32 {
            let byte = bytes[methodIndex]
            if !ASCII.isTokenChar(byte) && !(byte == 13 && methodIndex == start) {
                if methodIndex == start && byte == 0x16 {
                    throw .bad("this is TLS, not HTTP: the proxy port speaks plain HTTP (https_proxy=http://host:port)")
                }
                throw .bad("invalid method")
            }
            methodIndex += 1
        }

        var index = max(scanned, start)
        while index < bytes.count {
            guard let found = memchr(bytes.baseAddress! + index, 10, bytes.count - index) else { break }
            let lf = bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
            guard lf > start, bytes[lf - 1] == 13 else { throw .bad("bare LF in request head") }
            if lf - start + 1 > maxHeadBytes {
                // RFC 9112 §3: a request line too long is 414; a header section, 431.
                if !sawLineEnd { throw HTTPParseError(414, "request line longer than \(maxHeadBytes) bytes") }
                throw HTTPParseError(431, "request head larger than \(maxHeadBytes) bytes")
            }
            sawLineEnd = true
            if lf >= start + 3, bytes[lf - 2] == 10, bytes[lf - 3] == 13 {
                reset()
                let head = try parseHead(UnsafeRawBufferPointer(rebasing: bytes[start..<(lf - 1)]))
                return .complete(head, length: lf + 1)
            }
            index = lf + 1
        }
        scanned = bytes.count
        if bytes.count - start > maxHeadBytes {
            if !sawLineEnd { throw HTTPParseError(414, "request line longer than \(maxHeadBytes) bytes") }
            throw HTTPParseError(431, "request head larger than \(maxHeadBytes) bytes")
        }
        return .incomplete
    }

    /// Parses a head whose lines end in CRLF; `bytes` ends just before the final CRLF
    /// (so it ends with the CRLF of the last header line, or of the request line).
    ///
    /// One pass over the lines in place: no array of line ranges, the `Host` field validated as
    /// it is met (a lookup and a host string less per request).
    private func parseHead(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> RequestHead {
        guard !bytes.isEmpty else { throw .bad("empty request") }
        // Every LF is preceded by CR (checked by `parse`), so the LFs count the lines.
        var lineCount = 0
        var index = 0
        while index < bytes.count, let found = memchr(bytes.baseAddress! + index, 10, bytes.count - index) {
            lineCount += 1
            index = bytes.baseAddress!.distance(to: UnsafeRawPointer(found)) + 1
        }
        if lineCount - 1 > maxFields { throw HTTPParseError(431, "more than \(maxFields) header fields") }

        var lineEnd = try endOfLine(bytes, from: 0)
        let (method, target, version, targetAuthority) = try parseRequestLine(UnsafeRawBufferPointer(rebasing: bytes[0..<lineEnd]))
        var headers = HTTPHeaders(capacity: lineCount - 1)
        var hostCount = 0
        var lineStart = lineEnd + 2
        while lineStart < bytes.count {
            lineEnd = try endOfLine(bytes, from: lineStart)
            let line = UnsafeRawBufferPointer(rebasing: bytes[lineStart..<lineEnd])
            let (colon, value) = try scanField(line)
            let name = UnsafeRawBufferPointer(rebasing: line[0..<colon])
            if name.count == 4, ASCII.lower(name[0]) == UInt8(ascii: "h"), ASCII.lower(name[1]) == UInt8(ascii: "o"),
                ASCII.lower(name[2]) == UInt8(ascii: "s"), ASCII.lower(name[3]) == UInt8(ascii: "t")
            {
                hostCount += 1
                if hostCount > 1 { throw .bad("more than one Host header") }
                // RFC 9112 §3.2: an invalid Host is rejected (an empty one is allowed). The same
                // bytes as the target's authority were checked with it.
                if !value.isEmpty, !Self.same(value, as: targetAuthority.map { UnsafeRawBufferPointer(rebasing: bytes[$0]) }) {
                    do throws(HTTPParseError) {
                        try AbsoluteURL.validateAuthority(value, defaultPort: 80)
                    } catch {
                        throw .bad("invalid Host header")
                    }
                }
            }
            headers.append(line: UnsafeRawBufferPointer(rebasing: bytes[lineStart..<(lineEnd + 2)]), nameCount: colon, value: value)
            lineStart = lineEnd + 2
        }
        // RFC 9112 §3.2: an HTTP/1.1 request without Host is rejected.
        if hostCount == 0 && version == .http1_1 { throw .bad("HTTP/1.1 request without Host header") }
        return RequestHead(method: method, target: target, version: version, headers: headers)
    }

    /// The index of the CR that ends the line starting at `start`; a CR not followed by LF is
    /// an error (RFC 9112 §2.2).
    @inline(__always)
    private func endOfLine(_ bytes: UnsafeRawBufferPointer, from start: Int) throws(HTTPParseError) -> Int {
        guard let found = memchr(bytes.baseAddress! + start, 13, bytes.count - start) else {
            throw .bad("bare LF in request head")  // unreachable: `bytes` ends with CRLF
        }
        let cr = bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
        guard cr + 1 < bytes.count, bytes[cr + 1] == 10 else { throw .bad("bare CR in request head") }
        return cr
    }

    /// Whether `value` is byte for byte `other`.
    private static func same(_ value: UnsafeRawBufferPointer, as other: UnsafeRawBufferPointer?) -> Bool {
        guard let other, other.count == value.count else { return false }
        return memcmp(value.baseAddress!, other.baseAddress!, value.count) == 0
    }

    /// The method, target and version, and where in `line` the target's authority is (an
    /// absolute-form or authority-form target's, accepted as ``AbsoluteURL/validateAuthority(_:defaultPort:)``
    /// accepts a `Host`: the port does not change what is valid, and authority-form's required
    /// port only refuses more).
    private func parseRequestLine(
        _ line: UnsafeRawBufferPointer
    ) throws(HTTPParseError) -> (HTTPMethod, RequestTarget, HTTPVersion, authority: Range<Int>?) {
        var firstSpace = 0
        while firstSpace < line.count, line[firstSpace] != 32 {
            guard ASCII.isTokenChar(line[firstSpace]) else { throw .bad("invalid method") }
            firstSpace += 1
        }
        guard firstSpace < line.count else { throw .bad("malformed request line") }
        guard firstSpace > 0 else { throw .bad("invalid method") }
        // The target runs to the next space (memchr), and every byte of it is visible ASCII,
        // checked eight at a time: a request line's longest part, looked at byte by byte, cost
        // more than the rest of the line.
        var secondSpace = line.count
        if let found = memchr(line.baseAddress! + firstSpace + 1, 32, line.count - firstSpace - 1) {
            secondSpace = line.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
        let typed = line.assumingMemoryBound(to: UInt8.self)
        guard ASCII.allVisibleASCII(UnsafeBufferPointer(rebasing: typed[(firstSpace + 1)..<secondSpace])) else {
            throw .bad("invalid character in request target")
        }
        guard secondSpace < line.count else { throw .bad("malformed request line") }
        let targetBytes = UnsafeRawBufferPointer(rebasing: line[(firstSpace + 1)..<secondSpace])
        guard !targetBytes.isEmpty else { throw .bad("empty request target") }
        let version = try parseVersion(UnsafeRawBufferPointer(rebasing: line[(secondSpace + 1)...]))
        let method = Self.method(UnsafeRawBufferPointer(rebasing: line[0..<firstSpace]))
        let target: RequestTarget
        var authority: Range<Int>?
        if method == .connect {
            let (host, port) = try AbsoluteURL.parseAuthority(targetBytes, defaultPort: 0, requirePort: true)
            target = .authority(host: host, port: port)
            authority = (firstSpace + 1)..<secondSpace
        } else if targetBytes.count == 1 && targetBytes[0] == UInt8(ascii: "*") {
            guard method == .options else { throw .bad("asterisk-form target is only for OPTIONS") }
            target = .asterisk
        } else if targetBytes[0] == UInt8(ascii: "/") {
            try AbsoluteURL.validatePathAndQuery(targetBytes)
            target = .origin(String(decoding: targetBytes, as: UTF8.self))
        } else {
            var range = 0..<0
            target = .absolute(try AbsoluteURL.parse(targetBytes, authority: &range))
            authority = (firstSpace + 1 + range.lowerBound)..<(firstSpace + 1 + range.upperBound)
        }
        return (method, target, version, authority)
    }

    /// The method; GET and HEAD (nearly every request a cache sees) from literals instead of
    /// a string decoded from the bytes.
    @inline(__always)
    private static func method(_ bytes: UnsafeRawBufferPointer) -> HTTPMethod {
        if bytes.count == 3, bytes[0] == UInt8(ascii: "G"), bytes[1] == UInt8(ascii: "E"), bytes[2] == UInt8(ascii: "T") {
            return HTTPMethod("GET")
        }
        if bytes.count == 4, bytes[0] == UInt8(ascii: "H"), bytes[1] == UInt8(ascii: "E"), bytes[2] == UInt8(ascii: "A"),
            bytes[3] == UInt8(ascii: "D")
        {
            return HTTPMethod("HEAD")
        }
        return HTTPMethod(String(decoding: bytes, as: UTF8.self))
    }

    private func parseVersion(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPVersion {
        // HTTP-version = "HTTP" "/" DIGIT "." DIGIT (RFC 9112 §2.3), case-sensitive.
        guard bytes.count == 8, bytes[0] == UInt8(ascii: "H"), bytes[1] == UInt8(ascii: "T"), bytes[2] == UInt8(ascii: "T"),
            bytes[3] == UInt8(ascii: "P"), bytes[4] == UInt8(ascii: "/"), bytes[6] == UInt8(ascii: "."),
            bytes[5] &- 48 < 10, bytes[7] &- 48 < 10
        else { throw .bad("malformed HTTP version") }
        let major = Int(bytes[5] - 48)
        let minor = Int(bytes[7] - 48)
        guard major == 1 else { throw HTTPParseError(505, "HTTP version \(major).\(minor) not supported") }
        // RFC 9110 §2.5: a higher minor version is answered as the highest we support.
        return minor == 0 ? .http1_0 : .http1_1
    }

    /// Checks one field line: where the name ends (the colon) and the value without its
    /// surrounding whitespace.
    private func scanField(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> (colon: Int, value: UnsafeRawBufferPointer) {
        guard let first = line.first else { throw .bad("empty header line") }
        // RFC 9112 §5.2: obs-fold is rejected with 400.
        if first == 32 || first == 9 { throw .bad("obsolete line folding in header") }
        var colon = 0
        while colon < line.count, line[colon] != UInt8(ascii: ":") {
            let byte = line[colon]
            if !ASCII.isTokenChar(byte) {
                guard line[colon...].contains(UInt8(ascii: ":")) else { throw .bad("header line without colon") }
                // RFC 9112 §5.1: no whitespace between the field name and the colon.
                if byte == 32 || byte == 9 { throw .bad("whitespace before colon in header") }
                throw .bad("invalid character in header name")
            }
            colon += 1
        }
        guard colon < line.count else { throw .bad("header line without colon") }
        guard colon > 0 else { throw .bad("empty header name") }
        var valueStart = colon + 1
        var valueEnd = line.count
        while valueStart < valueEnd, line[valueStart] == 32 || line[valueStart] == 9 { valueStart += 1 }
        while valueEnd > valueStart, line[valueEnd - 1] == 32 || line[valueEnd - 1] == 9 { valueEnd -= 1 }
        let value = UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd])
        guard ASCII.allFieldValueChars(value.assumingMemoryBound(to: UInt8.self)) else { throw .bad("invalid character in header value") }
        return (colon, value)
    }
}
