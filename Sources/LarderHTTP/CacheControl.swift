/// Parsed `Cache-Control` directives (RFC 9111 §5.2), from every field line combined.
///
/// Directive names are case-insensitive (stored lower-cased); values may be tokens or quoted
/// strings (unescaped here). Malformed members are skipped rather than guessed at.
public struct CacheControl: Sendable, Equatable {
    /// One directive: lower-cased name and optional value.
    public struct Directive: Sendable, Equatable {
        public let name: String
        public let value: String?
    }

    public private(set) var directives: [Directive] = []

    public init() {}

    /// Parses every `Cache-Control` field of `headers`.
    public init(_ headers: HTTPHeaders) {
        for value in headers.values("Cache-Control") { parse(value) }
    }

    /// Parses one field value.
    public init(parsing value: String) {
        parse(value)
    }

    public var isEmpty: Bool { directives.isEmpty }

    /// Whether a directive is present (with or without a value).
    public func has(_ name: String) -> Bool {
        directives.contains { $0.name == name }
    }

    /// Every value given for `name` (nil entries for bare occurrences).
    public func values(_ name: String) -> [String?] {
        directives.filter { $0.name == name }.map(\.value)
    }

    /// A delta-seconds directive (RFC 9111 §1.2.2). Present but malformed, or given twice with
    /// different values, yields 0: the conservative reading (§4.2.1) treats the response as stale.
    /// Values beyond 2^31 are capped at 2^31 as §1.2.2 asks.
    public func deltaSeconds(_ name: String) -> Int? {
        let found = values(name)
        guard !found.isEmpty else { return nil }
        var result: Int?
        for value in found {
            guard let value, !value.isEmpty, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return 0 }
            let parsed = value.utf8.count > 10 ? 2_147_483_648 : min(Int(value)!, 2_147_483_648)
            if let result, result != parsed { return 0 }
            result = parsed
        }
        return result
    }

    public var noStore: Bool { has("no-store") }
    public var noCache: Bool { has("no-cache") }
    public var isPrivate: Bool { has("private") }
    public var isPublic: Bool { has("public") }
    public var mustRevalidate: Bool { has("must-revalidate") }
    public var proxyRevalidate: Bool { has("proxy-revalidate") }
    public var mustUnderstand: Bool { has("must-understand") }
    public var onlyIfCached: Bool { has("only-if-cached") }
    public var immutable: Bool { has("immutable") }
    public var maxAge: Int? { deltaSeconds("max-age") }
    public var sMaxAge: Int? { deltaSeconds("s-maxage") }
    public var minFresh: Int? { deltaSeconds("min-fresh") }
    public var staleWhileRevalidate: Int? { deltaSeconds("stale-while-revalidate") }
    public var staleIfError: Int? { deltaSeconds("stale-if-error") }

    /// `max-stale` with no value means "any staleness" (RFC 9111 §5.2.1.2): `Int.max`.
    public var maxStale: Int? {
        let found = values("max-stale")
        guard !found.isEmpty else { return nil }
        if found.contains(where: { $0 == nil }) { return Int.max }
        return deltaSeconds("max-stale")
    }

    private mutating func parse(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.append(UInt8(ascii: ","))
        var index = 0
        while index < bytes.count {
            // Skip separators and whitespace.
            while index < bytes.count, bytes[index] == 32 || bytes[index] == 9 || bytes[index] == UInt8(ascii: ",") { index += 1 }
            guard index < bytes.count else { break }
            let nameStart = index
            while index < bytes.count, ASCII.isTokenChar(bytes[index]) { index += 1 }
            let name = String(decoding: bytes[nameStart..<index], as: UTF8.self).lowercased()
            while index < bytes.count, bytes[index] == 32 || bytes[index] == 9 { index += 1 }
            var value: String?
            var valid = !name.isEmpty
            if index < bytes.count, bytes[index] == UInt8(ascii: "=") {
                index += 1
                while index < bytes.count, bytes[index] == 32 || bytes[index] == 9 { index += 1 }
                if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                    index += 1
                    var unescaped: [UInt8] = []
                    var closed = false
                    while index < bytes.count {
                        let byte = bytes[index]
                        if byte == UInt8(ascii: "\\"), index + 1 < bytes.count {
                            unescaped.append(bytes[index + 1])
                            index += 2
                            continue
                        }
                        index += 1
                        if byte == UInt8(ascii: "\"") {
                            closed = true
                            break
                        }
                        unescaped.append(byte)
                    }
                    valid = valid && closed
                    value = String(decoding: unescaped, as: UTF8.self)
                } else {
                    let valueStart = index
                    while index < bytes.count, ASCII.isTokenChar(bytes[index]) { index += 1 }
                    value = String(decoding: bytes[valueStart..<index], as: UTF8.self)
                }
            }
            while index < bytes.count, bytes[index] == 32 || bytes[index] == 9 { index += 1 }
            if index < bytes.count, bytes[index] != UInt8(ascii: ",") {
                // Junk after a member: skip to the next comma and drop the member.
                valid = false
                while index < bytes.count, bytes[index] != UInt8(ascii: ",") { index += 1 }
            }
            if valid { directives.append(Directive(name: name, value: value)) }
        }
    }
}
