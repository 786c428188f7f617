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
        headers.forEachValue(of: "Cache-Control") { parse($0.assumingMemoryBound(to: UInt8.self)) }
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
        var result: Int?
        for directive in directives where directive.name == name {
            guard let parsed = directive.value.flatMap(CacheControl.deltaSeconds) else { return 0 }
            if let result, result != parsed { return 0 }
            result = parsed
        }
        return result
    }

    /// Digits only, capped at 2^31; nil when empty or not all digits.
    private static func deltaSeconds(_ text: String) -> Int? {
        var value = 0
        var digits = 0
        for byte in text.utf8 {
            guard byte >= 48 && byte <= 57 else { return nil }
            value = min(value * 10 + Int(byte - 48), 2_147_483_648)
            digits += 1
        }
        return digits > 0 ? value : nil
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
        if directives.contains(where: { $0.name == "max-stale" && $0.value == nil }) { return Int.max }
        return deltaSeconds("max-stale")
    }

    private mutating func parse(_ text: String) {
        ASCII.withUTF8(of: text) { parse($0) }
    }

    // Parses in place over the field's bytes (no string made of them): this runs on every
    // response and on every request that carries the field.
    private mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) {
        let count = bytes.count
        var index = 0
        func skipWhitespace() {
            while index < count, bytes[index] == 32 || bytes[index] == 9 { index += 1 }
        }
        while index < count {
            // Skip separators and whitespace.
            while index < count, bytes[index] == 32 || bytes[index] == 9 || bytes[index] == UInt8(ascii: ",") { index += 1 }
            guard index < count else { break }
            let nameStart = index
            var upper = false
            while index < count, ASCII.isTokenChar(bytes[index]) {
                upper = upper || (bytes[index] >= 65 && bytes[index] <= 90)
                index += 1
            }
            let rawName = String(decoding: UnsafeBufferPointer(rebasing: bytes[nameStart..<index]), as: UTF8.self)
            let name = upper ? rawName.lowercased() : rawName
            skipWhitespace()
            var value: String?
            var valid = !name.isEmpty
            if index < count, bytes[index] == UInt8(ascii: "=") {
                index += 1
                skipWhitespace()
                if index < count, bytes[index] == UInt8(ascii: "\"") {
                    index += 1
                    var unescaped: [UInt8] = []
                    var closed = false
                    while index < count {
                        let byte = bytes[index]
                        if byte == UInt8(ascii: "\\"), index + 1 < count {
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
                    while index < count, ASCII.isTokenChar(bytes[index]) { index += 1 }
                    value = String(decoding: UnsafeBufferPointer(rebasing: bytes[valueStart..<index]), as: UTF8.self)
                }
            }
            skipWhitespace()
            if index < count, bytes[index] != UInt8(ascii: ",") {
                // Junk after a member: skip to the next comma and drop the member.
                valid = false
                while index < count, bytes[index] != UInt8(ascii: ",") { index += 1 }
            }
            if valid { directives.append(Directive(name: name, value: value)) }
        }
    }
}
