/// Parsed `Cache-Control` directives (RFC 9111 §5.2), from every field line combined.
///
/// Directive names are case-insensitive (stored lower-cased); values may be tokens or quoted
/// strings (unescaped here). Malformed members are skipped rather than guessed at.
public struct CacheControl: Sendable, Equatable {
    /// One directive: lower-cased name and optional value.
    public struct Directive: Sendable, Equatable {
        public let name: String
        public let value: String?
        /// The bit of a directive named below, empty for others: the accessors find their
        /// directive by it instead of comparing names.
        fileprivate let bit: Named
        /// The value read as delta-seconds when it is one (``CacheControl/deltaSeconds(_:)``),
        /// read from its bytes as it is parsed.
        fileprivate let seconds: Int?
    }

    public private(set) var directives: [Directive] = []
    /// The directives named below (``noStore`` and the rest), one bit each, set as they are
    /// parsed: a response's are asked about a dozen times between its head and its storing, and
    /// a bit is read where the list would be scanned. Derived from `directives` alone.
    private var named: Named = []

    fileprivate struct Named: OptionSet, Sendable, Equatable {
        let rawValue: UInt16
        static let maxAge = Named(rawValue: 1 << 0)
        static let noCache = Named(rawValue: 1 << 1)
        static let noStore = Named(rawValue: 1 << 2)
        static let isPublic = Named(rawValue: 1 << 3)
        static let isPrivate = Named(rawValue: 1 << 4)
        static let mustRevalidate = Named(rawValue: 1 << 5)
        static let sMaxAge = Named(rawValue: 1 << 6)
        static let immutable = Named(rawValue: 1 << 7)
        static let proxyRevalidate = Named(rawValue: 1 << 8)
        static let mustUnderstand = Named(rawValue: 1 << 9)
        static let onlyIfCached = Named(rawValue: 1 << 10)
        static let minFresh = Named(rawValue: 1 << 11)
        static let maxStale = Named(rawValue: 1 << 12)
        static let staleWhileRevalidate = Named(rawValue: 1 << 13)
        static let staleIfError = Named(rawValue: 1 << 14)

        /// The bit and the lower-cased name of a directive named below, matched on the name's bytes
        /// in any case (RFC 9111 §5.2: directive names are case-insensitive) and only against
        /// the names of its length; nil for others.
        static func known(_ name: UnsafeBufferPointer<UInt8>) -> (Named, String)? {
            let name = UnsafeRawBufferPointer(name)
            switch name.count {
            case 6: if ASCII.equalsIgnoringCase(name, "public") { return (.isPublic, "public") }
            case 7:
                if ASCII.equalsIgnoringCase(name, "max-age") { return (.maxAge, "max-age") }
                if ASCII.equalsIgnoringCase(name, "private") { return (.isPrivate, "private") }
            case 8:
                if ASCII.equalsIgnoringCase(name, "no-cache") { return (.noCache, "no-cache") }
                if ASCII.equalsIgnoringCase(name, "no-store") { return (.noStore, "no-store") }
                if ASCII.equalsIgnoringCase(name, "s-maxage") { return (.sMaxAge, "s-maxage") }
            case 9:
                if ASCII.equalsIgnoringCase(name, "immutable") { return (.immutable, "immutable") }
                if ASCII.equalsIgnoringCase(name, "min-fresh") { return (.minFresh, "min-fresh") }
                if ASCII.equalsIgnoringCase(name, "max-stale") { return (.maxStale, "max-stale") }
            case 14:
                if ASCII.equalsIgnoringCase(name, "only-if-cached") { return (.onlyIfCached, "only-if-cached") }
                if ASCII.equalsIgnoringCase(name, "stale-if-error") { return (.staleIfError, "stale-if-error") }
            case 15:
                if ASCII.equalsIgnoringCase(name, "must-revalidate") { return (.mustRevalidate, "must-revalidate") }
                if ASCII.equalsIgnoringCase(name, "must-understand") { return (.mustUnderstand, "must-understand") }
            case 16: if ASCII.equalsIgnoringCase(name, "proxy-revalidate") { return (.proxyRevalidate, "proxy-revalidate") }
            case 22:
                if ASCII.equalsIgnoringCase(name, "stale-while-revalidate") {
                    return (.staleWhileRevalidate, "stale-while-revalidate")
                }
            default: break
            }
            return nil
        }
    }

    public init() {}

    /// Parses every `Cache-Control` field of `headers`.
    public init(_ headers: HTTPHeaders) {
        headers.forEachValue(of: .cacheControl) { parse($0.assumingMemoryBound(to: UInt8.self)) }
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
        deltaSeconds(of: { $0.name == name })
    }

    /// ``deltaSeconds(_:)`` of a directive named below, found by its bit.
    private func deltaSeconds(_ bit: Named) -> Int? {
        guard named.contains(bit) else { return nil }
        return deltaSeconds(of: { $0.bit == bit })
    }

    private func deltaSeconds(of matches: (Directive) -> Bool) -> Int? {
        var result: Int?
        for directive in directives where matches(directive) {
            guard let parsed = directive.seconds else { return 0 }
            if let result, result != parsed { return 0 }
            result = parsed
        }
        return result
    }

    /// Digits only, capped at 2^31; nil when empty or not all digits.
    private static func deltaSeconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var value = 0
        var digits = 0
        for byte in bytes {
            guard byte >= 48 && byte <= 57 else { return nil }
            value = min(value * 10 + Int(byte - 48), 2_147_483_648)
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    public var noStore: Bool { named.contains(.noStore) }
    public var noCache: Bool { named.contains(.noCache) }
    public var isPrivate: Bool { named.contains(.isPrivate) }
    public var isPublic: Bool { named.contains(.isPublic) }
    public var mustRevalidate: Bool { named.contains(.mustRevalidate) }
    public var proxyRevalidate: Bool { named.contains(.proxyRevalidate) }
    public var mustUnderstand: Bool { named.contains(.mustUnderstand) }
    public var onlyIfCached: Bool { named.contains(.onlyIfCached) }
    public var immutable: Bool { named.contains(.immutable) }
    public var maxAge: Int? { deltaSeconds(.maxAge) }
    public var sMaxAge: Int? { deltaSeconds(.sMaxAge) }
    public var minFresh: Int? { deltaSeconds(.minFresh) }
    public var staleWhileRevalidate: Int? { deltaSeconds(.staleWhileRevalidate) }
    public var staleIfError: Int? { deltaSeconds(.staleIfError) }

    /// `max-stale` with no value means "any staleness" (RFC 9111 §5.2.1.2): `Int.max`.
    public var maxStale: Int? {
        guard named.contains(.maxStale) else { return nil }
        if directives.contains(where: { $0.bit == .maxStale && $0.value == nil }) { return Int.max }
        return deltaSeconds(.maxStale)
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
            while index < count, ASCII.isTokenChar(bytes[index]) { index += 1 }
            let nameBytes = UnsafeBufferPointer(rebasing: bytes[nameStart..<index])
            // A known name's string is a literal: nothing decoded or lowered for it.
            let known = Named.known(nameBytes)
            let name = known?.1 ?? ASCII.lowercasedString(nameBytes)
            skipWhitespace()
            var value: String?
            var seconds: Int?
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
                    seconds = unescaped.withUnsafeBufferPointer { CacheControl.deltaSeconds($0) }
                } else {
                    let valueStart = index
                    while index < count, ASCII.isTokenChar(bytes[index]) { index += 1 }
                    let valueBytes = UnsafeBufferPointer(rebasing: bytes[valueStart..<index])
                    value = String(decoding: valueBytes, as: UTF8.self)
                    seconds = CacheControl.deltaSeconds(valueBytes)
                }
            }
            skipWhitespace()
            if index < count, bytes[index] != UInt8(ascii: ",") {
                // Junk after a member: skip to the next comma and drop the member.
                valid = false
                while index < count, bytes[index] != UInt8(ascii: ",") { index += 1 }
            }
            if valid {
                let bit = known?.0 ?? []
                named.insert(bit)
                // Room for a few at once: a field seldom has more, and growing copies the list.
                if directives.isEmpty { directives.reserveCapacity(4) }
                directives.append(Directive(name: name, value: value, bit: bit, seconds: seconds))
            }
        }
    }
}
