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
    private func parseHead(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> RequestHead {
        var lineStart = 0
        var lines: [Range<Int>] = []
        lines.reserveCapacity(16)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 13 {
                guard index + 1 < bytes.count, bytes[index + 1] == 10 else { throw .bad("bare CR in request head") }
                lines.append(lineStart..<index)
                index += 2
                lineStart = index
                continue
            }
            index += 1
        }
        guard let requestLine = lines.first else { throw .bad("empty request") }
        let (method, target, version) = try parseRequestLine(UnsafeRawBufferPointer(rebasing: bytes[requestLine]))
        if lines.count - 1 > maxFields { throw HTTPParseError(431, "more than \(maxFields) header fields") }
        var headers = HTTPHeaders(capacity: lines.count - 1)
        var hostCount = 0
        for line in lines.dropFirst() {
            let field = try parseField(UnsafeRawBufferPointer(rebasing: bytes[line]))
            if ASCII.equalsIgnoringCase(field.name, "host") {
                hostCount += 1
                if hostCount > 1 { throw .bad("more than one Host header") }
            }
            headers.add(field.name, field.value)
        }
        // RFC 9112 §3.2: an HTTP/1.1 request without Host, or with an invalid one, is rejected.
        if hostCount == 0 && version == .http1_1 { throw .bad("HTTP/1.1 request without Host header") }
        if hostCount == 1, let host = headers["Host"], !host.isEmpty {
            var text = host
            let valid = text.withUTF8 { raw in
                (try? AbsoluteURL.parseAuthority(UnsafeRawBufferPointer(raw), defaultPort: 80, requirePort: false)) != nil
            }
            if !valid { throw .bad("invalid Host header") }
        }
        return RequestHead(method: method, target: target, version: version, headers: headers)
    }

    private func parseRequestLine(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> (HTTPMethod, RequestTarget, HTTPVersion) {
        guard let firstSpace = line.firstIndex(of: 32) else { throw .bad("malformed request line") }
        let methodBytes = line[0..<firstSpace]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(ASCII.isTokenChar) else { throw .bad("invalid method") }
        let rest = line[(firstSpace + 1)...]
        guard let secondSpace = rest.firstIndex(of: 32) else { throw .bad("malformed request line") }
        let targetBytes = UnsafeRawBufferPointer(rebasing: line[(firstSpace + 1)..<secondSpace])
        let versionBytes = line[(secondSpace + 1)...]
        guard !targetBytes.isEmpty else { throw .bad("empty request target") }
        for byte in targetBytes where byte <= 0x20 || byte >= 0x7F {
            throw .bad("invalid character in request target")
        }
        let version = try parseVersion(UnsafeRawBufferPointer(rebasing: versionBytes))
        let method = HTTPMethod(String(decoding: UnsafeRawBufferPointer(rebasing: methodBytes), as: UTF8.self))
        let target: RequestTarget
        if method == .connect {
            let (host, port) = try AbsoluteURL.parseAuthority(targetBytes, defaultPort: 0, requirePort: true)
            target = .authority(host: host, port: port)
        } else if targetBytes.count == 1 && targetBytes[0] == UInt8(ascii: "*") {
            guard method == .options else { throw .bad("asterisk-form target is only for OPTIONS") }
            target = .asterisk
        } else if targetBytes[0] == UInt8(ascii: "/") {
            try AbsoluteURL.validatePathAndQuery(targetBytes)
            target = .origin(String(decoding: targetBytes, as: UTF8.self))
        } else {
            target = .absolute(try AbsoluteURL.parse(targetBytes))
        }
        return (method, target, version)
    }

    private func parseVersion(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPVersion {
        // HTTP-version = "HTTP" "/" DIGIT "." DIGIT (RFC 9112 §2.3), case-sensitive.
        guard bytes.count == 8, bytes.starts(with: "HTTP/".utf8), bytes[6] == UInt8(ascii: "."),
            (48...57).contains(bytes[5]), (48...57).contains(bytes[7])
        else { throw .bad("malformed HTTP version") }
        let major = Int(bytes[5] - 48)
        let minor = Int(bytes[7] - 48)
        guard major == 1 else { throw HTTPParseError(505, "HTTP version \(major).\(minor) not supported") }
        // RFC 9110 §2.5: a higher minor version is answered as the highest we support.
        return minor == 0 ? .http1_0 : .http1_1
    }

    private func parseField(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPField {
        guard let first = line.first else { throw .bad("empty header line") }
        // RFC 9112 §5.2: obs-fold is rejected with 400.
        if first == 32 || first == 9 { throw .bad("obsolete line folding in header") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .bad("header line without colon") }
        let nameBytes = line[0..<colon]
        guard !nameBytes.isEmpty else { throw .bad("empty header name") }
        for byte in nameBytes where !ASCII.isTokenChar(byte) {
            // RFC 9112 §5.1: no whitespace between the field name and the colon.
            if byte == 32 || byte == 9 { throw .bad("whitespace before colon in header") }
            throw .bad("invalid character in header name")
        }
        var valueStart = colon + 1
        var valueEnd = line.count
        while valueStart < valueEnd, line[valueStart] == 32 || line[valueStart] == 9 { valueStart += 1 }
        while valueEnd > valueStart, line[valueEnd - 1] == 32 || line[valueEnd - 1] == 9 { valueEnd -= 1 }
        let valueBytes = UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd])
        for byte in valueBytes where !ASCII.isFieldValueChar(byte) {
            throw .bad("invalid character in header value")
        }
        return HTTPField(
            name: String(decoding: UnsafeRawBufferPointer(rebasing: nameBytes), as: UTF8.self),
            value: ASCII.string(valueBytes))
    }
}
