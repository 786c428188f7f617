/// Parsed `Cache-Control` directives (RFC 9111 §5.2), from every field line combined.
///
/// Directive names are case-insensitive; values may be tokens or quoted strings (unescaped
/// here). Malformed members are skipped rather than guessed at. The directives named below are
/// kept as one bit each and, for those that take delta-seconds, the value as the accessors
/// answer it, both set while parsing: a response's are asked about a dozen times between its
/// head and its storing, and parsing them makes nothing on the heap. Only directives of other
/// names are kept as a list (``others``).
public struct CacheControl: Sendable, Equatable {
    /// One directive: lower-cased name and optional value.
    public struct Directive: Sendable, Equatable {
        public let name: String
        public let value: String?
    }

    /// The directives with names other than those below, in order: few fields have one.
    public private(set) var others: [Directive] = []
    private var named: Named = []
    /// The delta-seconds of each directive that takes them (``Named/secondsSlot``): the value,
    /// or 0 once one was malformed or two differed (RFC 9111 §1.2.2, §4.2.1); 0 for a
    /// directive not given, whose bit is clear. Capped at 2^31, which fits.
    private var seconds = SIMD8<UInt32>()

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
        /// A bare `max-stale` (any staleness, §5.2.1.2).
        static let maxStaleAny = Named(rawValue: 1 << 15)

        /// The index in `seconds` of a directive that takes delta-seconds, nil for the others.
        var secondsSlot: Int? {
            switch self {
            case .maxAge: 0
            case .sMaxAge: 1
            case .minFresh: 2
            case .maxStale: 3
            case .staleWhileRevalidate: 4
            case .staleIfError: 5
            default: nil
            }
        }

        /// The bit of a directive named below, matched on the name's bytes in any case (RFC 9111
        /// §5.2: directive names are case-insensitive) and only against the names of its length;
        /// nil for others.
        static func known(_ name: UnsafeBufferPointer<UInt8>) -> Named? {
            let name = UnsafeRawBufferPointer(name)
            switch name.count {
            case 6: if ASCII.equalsIgnoringCase(name, "public") { return .isPublic }
            case 7:
                if ASCII.equalsIgnoringCase(name, "max-age") { return .maxAge }
                if ASCII.equalsIgnoringCase(name, "private") { return .isPrivate }
            case 8:
                if ASCII.equalsIgnoringCase(name, "no-cache") { return .noCache }
                if ASCII.equalsIgnoringCase(name, "no-store") { return .noStore }
                if ASCII.equalsIgnoringCase(name, "s-maxage") { return .sMaxAge }
            case 9:
                if ASCII.equalsIgnoringCase(name, "immutable") { return .immutable }
                if ASCII.equalsIgnoringCase(name, "min-fresh") { return .minFresh }
                if ASCII.equalsIgnoringCase(name, "max-stale") { return .maxStale }
            case 14:
                if ASCII.equalsIgnoringCase(name, "only-if-cached") { return .onlyIfCached }
                if ASCII.equalsIgnoringCase(name, "stale-if-error") { return .staleIfError }
            case 15:
                if ASCII.equalsIgnoringCase(name, "must-revalidate") { return .mustRevalidate }
                if ASCII.equalsIgnoringCase(name, "must-understand") { return .mustUnderstand }
            case 16: if ASCII.equalsIgnoringCase(name, "proxy-revalidate") { return .proxyRevalidate }
            case 22: if ASCII.equalsIgnoringCase(name, "stale-while-revalidate") { return .staleWhileRevalidate }
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

    public var isEmpty: Bool { named.isEmpty && others.isEmpty }

    /// Whether a directive is present (with or without a value); `name` in any case.
    public func has(_ name: String) -> Bool {
        if let bit = ASCII.withUTF8(of: name, { Named.known($0) }) { return named.contains(bit) }
        let name = name.lowercased()
        return others.contains { $0.name == name }
    }

    /// A delta-seconds directive (RFC 9111 §1.2.2), `name` in any case. Present but malformed,
    /// or given twice with different values, yields 0: the conservative reading (§4.2.1) treats
    /// the response as stale. Values beyond 2^31 are capped at 2^31 as §1.2.2 asks. A
    /// directive named above that takes no delta-seconds (`no-cache`, `private`) has none: nil.
    public func deltaSeconds(_ name: String) -> Int? {
        if let bit = ASCII.withUTF8(of: name, { Named.known($0) }) { return deltaSeconds(bit) }
        let name = name.lowercased()
        var result: Int?
        for directive in others where directive.name == name {
            guard let parsed = directive.value.flatMap({ ASCII.withUTF8(of: $0, CacheControl.deltaSeconds) }) else { return 0 }
            if let result, result != parsed { return 0 }
            result = parsed
        }
        return result
    }

    /// ``deltaSeconds(_:)`` of a directive named below that takes them, found by its bit.
    @inline(__always)
    private func deltaSeconds(_ bit: Named) -> Int? {
        guard named.contains(bit), let slot = bit.secondsSlot else { return nil }
        return Int(seconds[slot])
    }

    /// Digits only, capped at 2^31; nil when empty or not all digits.
    private static func deltaSeconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var reader = DeltaSeconds()
        for byte in bytes { reader.read(byte) }
        return reader.value
    }

    /// Delta-seconds read a byte at a time, as a value's bytes are scanned (a quoted one's
    /// unescaped bytes too).
    private struct DeltaSeconds {
        private var number = 0
        private var digits = 0
        private var valid = true

        @inline(__always)
        mutating func read(_ byte: UInt8) {
            guard byte >= 48 && byte <= 57 else {
                valid = false
                return
            }
            number = min(number * 10 + Int(byte - 48), 2_147_483_648)
            digits += 1
        }

        /// Digits only, capped at 2^31; nil when empty or not all digits.
        var value: Int? { valid && digits > 0 ? number : nil }
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
        if named.contains(.maxStaleAny) { return Int.max }
        return deltaSeconds(.maxStale)
    }

    private mutating func parse(_ text: String) {
        ASCII.withUTF8(of: text) { parse($0) }
    }

    // Parses in place over the field's bytes (no string made of them for a directive named
    // above): this runs on every response and on every request that carries the field.
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
            let known = Named.known(nameBytes)
            skipWhitespace()
            var hasValue = false
            var delta = DeltaSeconds()
            // Another name's value, unescaped: kept with it in `others`.
            var otherValue: [UInt8] = []
            var valid = nameBytes.count > 0
            if index < count, bytes[index] == UInt8(ascii: "=") {
                hasValue = true
                index += 1
                skipWhitespace()
                if index < count, bytes[index] == UInt8(ascii: "\"") {
                    index += 1
                    var closed = false
                    while index < count {
                        var byte = bytes[index]
                        if byte == UInt8(ascii: "\\"), index + 1 < count {
                            byte = bytes[index + 1]
                            index += 2
                        } else {
                            index += 1
                            if byte == UInt8(ascii: "\"") {
                                closed = true
                                break
                            }
                        }
                        if known == nil { otherValue.append(byte) } else { delta.read(byte) }
                    }
                    valid = valid && closed
                } else {
                    let valueStart = index
                    while index < count, ASCII.isTokenChar(bytes[index]) { index += 1 }
                    if known == nil {
                        otherValue.append(contentsOf: bytes[valueStart..<index])
                    } else {
                        for byte in bytes[valueStart..<index] { delta.read(byte) }
                    }
                }
            }
            skipWhitespace()
            if index < count, bytes[index] != UInt8(ascii: ",") {
                // Junk after a member: skip to the next comma and drop the member.
                valid = false
                while index < count, bytes[index] != UInt8(ascii: ",") { index += 1 }
            }
            guard valid else { continue }
            guard let known else {
                others.append(
                    Directive(
                        name: ASCII.lowercasedString(nameBytes),
                        value: hasValue ? String(decoding: otherValue, as: UTF8.self) : nil))
                continue
            }
            if known == .maxStale && !hasValue {
                // Any staleness, whatever else is given: the value is not read again.
                named.insert([.maxStale, .maxStaleAny])
                seconds[3] = 0
                continue
            }
            if let slot = known.secondsSlot {
                // The first value, kept while every later one agrees; otherwise 0 (which no
                // later value changes).
                let value = UInt32(delta.value ?? 0)
                seconds[slot] = named.contains(known) && seconds[slot] != value ? 0 : value
            }
            named.insert(known)
        }
    }
}
