import Glibc

/// An `http` or `https` URL from an absolute-form request target (RFC 9112 §3.2.2), validated
/// and normalized: lower-case scheme and host, default port dropped from ``authority``.
public struct AbsoluteURL: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// Lower-cased host; an IPv6 literal keeps its brackets (`[::1]`).
    public let host: String
    /// The port, explicit or the scheme's default.
    public let port: Int
    /// Path and query, never empty (`/` when the URL had no path).
    public let pathAndQuery: String

    public init(scheme: String, host: String, port: Int, pathAndQuery: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.pathAndQuery = pathAndQuery
    }

    public var defaultPort: Int { scheme == "https" ? 443 : 80 }

    /// `host` or `host:port` when the port is not the default: the value for `Host`. Built
    /// byte-wise: it is the upstream `Host` of every miss to an origin on another port.
    public var authority: String {
        guard port != defaultPort else { return host }
        return String(unsafeUninitializedCapacity: host.utf8.count + 21) { buffer in
            var writer = ByteWriter(buffer)
            appendAuthority(to: &writer)
            return writer.count
        }
    }

    /// `host`, then `:port` when the port is not the default.
    func appendAuthority(to writer: inout ByteWriter) {
        writer.append(host)
        if port != defaultPort {
            writer.append(UInt8(ascii: ":"))
            writer.append(decimal: port)
        }
    }

    /// `scheme://authority/path?query`.
    public var description: String { withPath(pathAndQuery) }

    /// `scheme://authority` followed by `path`, built in one allocation and copied byte-wise
    /// (every miss builds its upstream URL and its cache key this way, every hit its key).
    public func withPath<Path: StringProtocol>(_ path: Path) -> String {
        String(unsafeUninitializedCapacity: textBound(pathBytes: path.utf8.count)) { buffer in
            var writer = ByteWriter(buffer)
            write(path: path, to: &writer)
            return writer.count
        }
    }

    /// The most bytes ``write(to:)`` writes.
    public var textBound: Int { textBound(pathBytes: pathAndQuery.utf8.count) }

    /// `scheme://`, the host, `:` and a port of up to 20 digits, then the path.
    private func textBound(pathBytes: Int) -> Int { scheme.utf8.count + 3 + host.utf8.count + 21 + pathBytes }

    /// Writes ``description``'s bytes, at most ``textBound``, without building the string (the
    /// access log writes every request's target this way).
    public func write(to writer: inout ByteWriter) {
        write(path: pathAndQuery, to: &writer)
    }

    private func write<Path: StringProtocol>(path: Path, to writer: inout ByteWriter) {
        writer.append(scheme)
        writer.append("://" as StaticString)
        appendAuthority(to: &writer)
        writer.append(path)
    }

    /// Whether the host and path can go into a request line and a `Host` field as they are
    /// (RFC 9112 §3, §3.2): no space, control byte or DEL in either, only host characters in
    /// the host. What ``parse(_:)`` accepts always is; a URL put together from parts may not be.
    public var isPlainOnTheWire: Bool {
        let plainHost = ASCII.withUTF8(of: host) { bytes in
            for byte in bytes where !ASCII.isIn(byte, low: AbsoluteURL.hostMaskLow, high: AbsoluteURL.hostMaskHigh) { return false }
            return true
        }
        return plainHost && ASCII.withUTF8(of: pathAndQuery) { ASCII.allVisibleOrHigh($0) }
    }

    /// A host's bytes on the wire: ``isRegNameChar(_:)``'s, and `:` `[` `]` of an IPv6 literal.
    private static var hostMaskLow: UInt64 { regNameMaskLow | 1 << 58 }
    private static var hostMaskHigh: UInt64 { regNameMaskHigh | 1 << (91 - 64) | 1 << (93 - 64) }

    /// The host without IPv6 brackets, for resolving and matching.
    public var bareHost: String {
        host.utf8.first == UInt8(ascii: "[") ? String(host.dropFirst().dropLast()) : host
    }

    /// The path without the query.
    public var path: Substring {
        if let mark = pathAndQuery.firstIndex(of: "?") { return pathAndQuery[..<mark] }
        return pathAndQuery[...]
    }

    /// Parses `text` as an absolute `http`/`https` URL, strictly.
    public init(parsing text: String) throws(HTTPParseError) {
        var text = text
        let result = text.withUTF8 { bytes in
            Result { () throws(HTTPParseError) in try AbsoluteURL.parse(UnsafeRawBufferPointer(bytes)) }
        }
        self = try result.get()
    }

    /// Parses the bytes of an absolute-form target.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> AbsoluteURL {
        var authority = 0..<0
        return try parse(bytes, authority: &authority)
    }

    /// Parses the bytes of an absolute-form target; `authority` is set to where in them the
    /// authority is, which ``parseAuthority(_:defaultPort:requirePort:)`` accepted.
    static func parse(_ bytes: UnsafeRawBufferPointer, authority: inout Range<Int>) throws(HTTPParseError) -> AbsoluteURL {
        // scheme "://"; the two schemes are compared byte-wise and stored as literals, so no
        // string is built from the bytes for every request.
        var index = 0
        while index < bytes.count, bytes[index] != UInt8(ascii: ":") { index += 1 }
        guard index < bytes.count, index > 0 else { throw .bad("request target is not an absolute URL") }
        let secure: Bool
        if index == 4 && hasPrefixIgnoringCase(bytes, "http") {
            secure = false
        } else if index == 5 && hasPrefixIgnoringCase(bytes, "https") {
            secure = true
        } else {
            let named = ASCII.lowercasedString(UnsafeRawBufferPointer(rebasing: bytes[0..<index]))
            throw .bad("unsupported URL scheme '\(named)' (only http and https are proxied)")
        }
        guard index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "/"), bytes[index + 2] == UInt8(ascii: "/") else {
            throw .bad("request target is not an absolute URL")
        }
        index += 3
        let authorityStart = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            index += 1
        }
        let authorityBytes = UnsafeRawBufferPointer(rebasing: bytes[authorityStart..<index])
        let (host, port) = try parseAuthority(authorityBytes, defaultPort: secure ? 443 : 80, requirePort: false)
        authority = authorityStart..<index
        let rest = UnsafeRawBufferPointer(rebasing: bytes[index...])
        try validatePathAndQuery(rest)
        let pathAndQuery: String
        if rest.isEmpty {
            pathAndQuery = "/"
        } else if rest[0] == UInt8(ascii: "?") {
            pathAndQuery = "/" + String(decoding: rest, as: UTF8.self)
        } else {
            pathAndQuery = String(decoding: rest, as: UTF8.self)
        }
        return AbsoluteURL(scheme: secure ? "https" : "http", host: host, port: port, pathAndQuery: pathAndQuery)
    }

    /// Whether `bytes` starts with the lower-case ASCII `prefix`, ignoring case.
    @inline(__always)
    private static func hasPrefixIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { prefix in
            guard bytes.count >= prefix.count else { return false }
            for i in 0..<prefix.count where ASCII.lower(bytes[i]) != prefix[i] { return false }
            return true
        }
    }

    /// Parses `host[:port]` (RFC 3986 §3.2). Userinfo is an error (RFC 9110 §4.2.4).
    public static func parseAuthority(
        _ bytes: UnsafeRawBufferPointer, defaultPort: Int, requirePort: Bool
    ) throws(HTTPParseError) -> (host: String, port: Int) {
        guard let first = bytes.first else { throw .bad("URL has an empty host") }
        if first == UInt8(ascii: "[") { return try parseIPv6Authority(bytes, defaultPort: defaultPort, requirePort: requirePort) }
        let (hostEnd, port) = try scanAuthority(bytes, defaultPort: defaultPort, requirePort: requirePort)
        return (ASCII.lowercasedString(UnsafeRawBufferPointer(rebasing: bytes[0..<hostEnd])), port)  // checked ASCII
    }

    /// Checks `host[:port]` as ``parseAuthority(_:defaultPort:requirePort:)`` does without
    /// building the host string: a request's `Host` field is validated on every request and its
    /// value is kept as received.
    public static func validateAuthority(_ bytes: UnsafeRawBufferPointer, defaultPort: Int) throws(HTTPParseError) {
        guard let first = bytes.first else { throw .bad("URL has an empty host") }
        if first == UInt8(ascii: "[") {
            _ = try parseIPv6Authority(bytes, defaultPort: defaultPort, requirePort: false)
        } else {
            _ = try scanAuthority(bytes, defaultPort: defaultPort, requirePort: false)
        }
    }

    /// Validates a reg-name or IPv4 authority in one pass: where the host ends and the port.
    private static func scanAuthority(
        _ bytes: UnsafeRawBufferPointer, defaultPort: Int, requirePort: Bool
    ) throws(HTTPParseError) -> (hostEnd: Int, port: Int) {
        if memchr(bytes.baseAddress!, Int32(UInt8(ascii: "@")), bytes.count) != nil {
            throw .bad("URL must not carry userinfo (user@host)")
        }
        var hostEnd = 0
        while hostEnd < bytes.count {
            let byte = bytes[hostEnd]
            if byte == UInt8(ascii: ":") { break }
            guard isRegNameChar(byte) else { throw .bad("invalid character in URL host") }
            hostEnd += 1
        }
        guard hostEnd > 0 else { throw .bad("URL has an empty host") }
        let port = try parsePort(bytes, colon: hostEnd, defaultPort: defaultPort, requirePort: requirePort)
        return (hostEnd, port)
    }

    /// An IPv6 literal in brackets (RFC 3986 §3.2.2), checked with `inet_pton`, lower-cased.
    private static func parseIPv6Authority(
        _ bytes: UnsafeRawBufferPointer, defaultPort: Int, requirePort: Bool
    ) throws(HTTPParseError) -> (host: String, port: Int) {
        if memchr(bytes.baseAddress!, Int32(UInt8(ascii: "@")), bytes.count) != nil {
            throw .bad("URL must not carry userinfo (user@host)")
        }
        guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { throw .bad("unterminated IPv6 literal in URL") }
        let literal = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[1..<close]), as: UTF8.self)
        var address = in6_addr()
        guard !literal.isEmpty, inet_pton(AF_INET6, literal, &address) == 1 else {
            throw .bad("invalid IPv6 literal '\(literal)' in URL")
        }
        if close + 1 < bytes.count, bytes[close + 1] != UInt8(ascii: ":") {
            throw .bad("invalid characters after IPv6 literal")
        }
        let port = try parsePort(bytes, colon: close + 1, defaultPort: defaultPort, requirePort: requirePort)
        return ("[" + literal.lowercased() + "]", port)
    }

    /// The port after the colon at `colon` (`bytes.count` when there is no colon).
    @inline(__always)
    private static func parsePort(
        _ bytes: UnsafeRawBufferPointer, colon: Int, defaultPort: Int, requirePort: Bool
    ) throws(HTTPParseError) -> Int {
        guard colon < bytes.count else {
            if requirePort { throw .bad("missing port") }
            return defaultPort
        }
        let digits = bytes.count - colon - 1
        if digits == 0 {
            if requirePort { throw .bad("missing port") }
            return defaultPort
        }
        guard digits <= 5 else { throw .bad("invalid port in URL") }
        var port = 0
        for index in (colon + 1)..<bytes.count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw .bad("invalid port in URL") }
            port = port * 10 + Int(digit)
        }
        guard port >= 1 && port <= 65535 else { throw .bad("port out of range in URL") }
        return port
    }

    /// A reg-name or IPv4 byte as accepted here: ALPHA / DIGIT / "-" / "." / "_".
    @inline(__always)
    static func isRegNameChar(_ byte: UInt8) -> Bool {
        // "-" 45, "." 46, "0"-"9" 48-57 | "A"-"Z" 65-90, "_" 95, "a"-"z" 97-122
        ASCII.isIn(byte, low: regNameMaskLow, high: regNameMaskHigh)
    }

    private static var regNameMaskLow: UInt64 { 0x03FF_6000_0000_0000 }
    private static var regNameMaskHigh: UInt64 { 0x07FF_FFFE_87FF_FFFE }

    /// RFC 3986 path-abempty and query characters; percent-escapes must be well formed. A
    /// fragment has no place in a request target (RFC 9112 §3.2).
    static func validatePathAndQuery(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            // The plain characters first, nearly every byte ("%" and "#" are not among them).
            if isURIChar(byte) {
                index += 1
                continue
            }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHex(bytes[index + 1]), isHex(bytes[index + 2]) else {
                    throw .bad("malformed percent-encoding in URL")
                }
                index += 3
                continue
            }
            if byte == UInt8(ascii: "#") { throw .bad("URL must not carry a fragment") }
            throw .bad("invalid character in URL")
        }
    }

    /// unreserved / sub-delims / ":" / "@" / "/" / "?": ! $ & ' ( ) * + , - . / 0-9 : ; = ? @
    /// A-Z _ a-z ~, as a table of one byte per ASCII code, "u" for a URI character (a literal:
    /// a constant in the binary, read with one load and compare, as ``ASCII/tokenTable``).
    static var uriTable: StaticString {
        ".................................u..u.uuuuuuuuuuuuuuuuuuuuuu.u.uuuuuuuuuuuuuuuuuuuuuuuuuuuu....u.uuuuuuuuuuuuuuuuuuuuuuuuuu...u."
    }

    @inline(__always)
    static func isURIChar(_ byte: UInt8) -> Bool {
        byte < 0x80 && uriTable.utf8Start[Int(byte)] == UInt8(ascii: "u")
    }

    @inline(__always)
    static func isHex(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (ASCII.lower(byte) >= UInt8(ascii: "a") && ASCII.lower(byte) <= UInt8(ascii: "f"))
    }
}
