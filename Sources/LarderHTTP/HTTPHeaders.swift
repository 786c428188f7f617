/// One header field as received: the name keeps its case, comparisons ignore it.
public struct HTTPField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// An ordered list of header fields (RFC 9110 §5). Duplicates are kept in order; lookups are
/// case-insensitive.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [HTTPField]

    public init() { fields = [] }

    /// An empty list with room for `capacity` fields: parsers reserve it once instead of growing
    /// the array five times for a typical head.
    public init(capacity: Int) {
        fields = []
        fields.reserveCapacity(capacity)
    }

    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { HTTPField(name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[HTTPField]> { fields.makeIterator() }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        // By index: `for field in fields` copies every field it passes (two retains, two releases).
        for index in fields.indices where ASCII.equalsIgnoringCase(fields[index].name, name) {
            return fields[index].value
        }
        return nil
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.lazy.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// All values of a list-valued field joined with ", " (RFC 9110 §5.3), or nil when absent.
    public func combined(_ name: String) -> String? {
        let all = values(name)
        return all.isEmpty ? nil : all.joined(separator: ", ")
    }

    /// The comma-separated elements of a list-valued field, trimmed, lower-cased, empty ones
    /// dropped (RFC 9110 §5.6.1).
    public func listElements(_ name: String) -> [String] {
        var result: [String] = []
        forEachListElement(name) { element in
            result.append(ASCII.lowercasedString(element))
            return true
        }
        return result
    }

    /// Whether the list-valued field `name` has the element `token` (ASCII, case-insensitive),
    /// without building the list: keep-alive asks on every request.
    public func hasListElement(_ name: String, _ token: StaticString) -> Bool {
        var found = false
        token.withUTF8Buffer { token in
            forEachListElement(name) { element in
                found = element.count == token.count && zip(element, token).allSatisfy { ASCII.lower($0) == ASCII.lower($1) }
                return !found
            }
        }
        return found
    }

    /// Calls `body` with the bytes of each non-empty, OWS-trimmed element of the field `name`
    /// (RFC 9110 §5.6.1) until it returns false; `keepingEmpty` passes empty elements too (a
    /// field whose empty elements are errors, such as Content-Length). Walks the values' bytes
    /// in place (no `values`/`split` arrays, no Characters): hop-by-hop stripping and keep-alive
    /// ask for `Connection` on every request and response.
    func forEachListElement(_ name: String, keepingEmpty: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        for field in fields where ASCII.equalsIgnoringCase(field.name, name) {
            var value = field.value
            let more = value.withUTF8 { bytes in
                var start = 0
                while start < bytes.count || (keepingEmpty && start == bytes.count) {
                    var end = start
                    while end < bytes.count && bytes[end] != UInt8(ascii: ",") { end += 1 }
                    var first = start
                    var last = end
                    while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
                    while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
                    if (first < last || keepingEmpty) && !body(UnsafeBufferPointer(rebasing: bytes[first..<last])) { return false }
                    start = end + 1
                }
                return true
            }
            if !more { return }
        }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append(HTTPField(name: name, value: value))
    }

    /// Replaces every `name` field by one with `value`.
    public mutating func set(_ name: String, _ value: String) {
        if let index = fields.firstIndex(where: { ASCII.equalsIgnoringCase($0.name, name) }) {
            fields[index].value = value
            var next = index + 1
            while next < fields.count {
                if ASCII.equalsIgnoringCase(fields[next].name, name) { fields.remove(at: next) } else { next += 1 }
            }
        } else {
            add(name, value)
        }
    }

    public mutating func remove(_ name: String) {
        removeAll { ASCII.equalsIgnoringCase($0.name, name) }
    }

    /// Appends text to the last field's value (for folded lines).
    public mutating func extendLastValue(with text: String) {
        guard !fields.isEmpty else { return }
        fields[fields.count - 1].value += text
    }

    public mutating func removeAll(where predicate: (HTTPField) -> Bool) {
        // Array.removeAll(where:) makes the array unique (a copy when the head is shared) and
        // rewrites it even when nothing matches, the common case for most callers.
        guard let first = fields.firstIndex(where: predicate) else { return }
        var kept = first
        for index in first..<fields.count where !predicate(fields[index]) {
            fields.swapAt(kept, index)
            kept += 1
        }
        fields.removeSubrange(kept...)
    }
}
