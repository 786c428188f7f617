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

    /// `host` or `host:port` when the port is not the default: the value for `Host`.
    public var authority: String { port == defaultPort ? host : "\(host):\(port)" }

    /// `scheme://authority/path?query`.
    public var description: String { withPath(pathAndQuery) }

    /// `scheme://authority` followed by `path`, built in one allocation and copied byte-wise
    /// (every miss builds its upstream URL and its cache key this way, every hit its key).
    public func withPath<Path: StringProtocol>(_ path: Path) -> String {
        let capacity = scheme.utf8.count + 3 + host.utf8.count + 21 + path.utf8.count
        return String(unsafeUninitializedCapacity: capacity) { buffer in
            var writer = ByteWriter(buffer)
            writer.append(scheme)
            writer.append("://" as StaticString)
            writer.append(host)
            if port != defaultPort {
                writer.append(UInt8(ascii: ":"))
                writer.append(String(port))  // a small string: no allocation
            }
            writer.append(path)
            return writer.count
        }
    }

    /// The host without IPv6 brackets, for resolving and matching.
    public var bareHost: String {
        host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
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
        // scheme "://"
        var index = 0
        while index < bytes.count, bytes[index] != UInt8(ascii: ":") { index += 1 }
        guard index < bytes.count, index > 0 else { throw .bad("request target is not an absolute URL") }
        let scheme = ASCII.lowercasedString(UnsafeRawBufferPointer(rebasing: bytes[0..<index]))
        guard scheme == "http" || scheme == "https" else {
            throw .bad("unsupported URL scheme '\(scheme)' (only http and https are proxied)")
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
        let defaultPort = scheme == "https" ? 443 : 80
        let (host, port) = try parseAuthority(authorityBytes, defaultPort: defaultPort, requirePort: false)
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
        return AbsoluteURL(scheme: scheme, host: host, port: port, pathAndQuery: pathAndQuery)
    }

    /// Parses `host[:port]` (RFC 3986 §3.2). Userinfo is an error (RFC 9110 §4.2.4).
    public static func parseAuthority(
        _ bytes: UnsafeRawBufferPointer, defaultPort: Int, requirePort: Bool
    ) throws(HTTPParseError) -> (host: String, port: Int) {
        guard !bytes.isEmpty else { throw .bad("URL has an empty host") }
        if bytes.contains(UInt8(ascii: "@")) { throw .bad("URL must not carry userinfo (user@host)") }
        var hostEnd = bytes.count
        var portStart: Int?
        let host: String
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { throw .bad("unterminated IPv6 literal in URL") }
            let literal = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[1..<close]), as: UTF8.self)
            var address = in6_addr()
            guard !literal.isEmpty, inet_pton(AF_INET6, literal, &address) == 1 else {
                throw .bad("invalid IPv6 literal '\(literal)' in URL")
            }
            host = "[" + literal.lowercased() + "]"
            if close + 1 < bytes.count {
                guard bytes[close + 1] == UInt8(ascii: ":") else { throw .bad("invalid characters after IPv6 literal") }
                portStart = close + 2
            }
        } else {
            if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
                hostEnd = colon
                portStart = colon + 1
            }
            guard hostEnd > 0 else { throw .bad("URL has an empty host") }
            for byte in bytes[0..<hostEnd] {
                let isHostChar =
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                guard isHostChar else { throw .bad("invalid character in URL host") }
            }
            host = ASCII.lowercasedString(UnsafeRawBufferPointer(rebasing: bytes[0..<hostEnd]))  // checked ASCII above
        }
        var port = defaultPort
        if let portStart {
            let digits = bytes[portStart...]
            if digits.isEmpty {
                if requirePort { throw .bad("missing port") }
            } else {
                guard digits.count <= 5, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                    throw .bad("invalid port in URL")
                }
                port = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
                guard port >= 1 && port <= 65535 else { throw .bad("port out of range in URL") }
            }
        } else if requirePort {
            throw .bad("missing port")
        }
        return (host, port)
    }

    /// RFC 3986 path-abempty and query characters; percent-escapes must be well formed. A
    /// fragment has no place in a request target (RFC 9112 §3.2).
    static func validatePathAndQuery(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHex(bytes[index + 1]), isHex(bytes[index + 2]) else {
                    throw .bad("malformed percent-encoding in URL")
                }
                index += 3
                continue
            }
            if byte == UInt8(ascii: "#") { throw .bad("URL must not carry a fragment") }
            guard uriTable[Int(byte)] else { throw .bad("invalid character in URL") }
            index += 1
        }
    }

    @inline(__always)
    static func isHex(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (ASCII.lower(byte) >= UInt8(ascii: "a") && ASCII.lower(byte) <= UInt8(ascii: "f"))
    }

    /// unreserved / sub-delims / ":" / "@" / "/" / "?"
    static let uriTable: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in UInt8(ascii: "0")...UInt8(ascii: "9") { table[Int(byte)] = true }
        for byte in UInt8(ascii: "a")...UInt8(ascii: "z") { table[Int(byte)] = true }
        for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") { table[Int(byte)] = true }
        for byte in "-._~!$&'()*+,;=:@/?".utf8 { table[Int(byte)] = true }
        return table
    }()
}
