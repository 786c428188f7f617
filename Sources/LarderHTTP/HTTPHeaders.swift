import Glibc

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
///
/// The fields are kept in wire form, `Name: value\r\n` each, back to back in one array, with
/// the position of each: a parser appends the bytes it read, a serializer copies them out in
/// one piece, and lookups compare bytes in place. Strings are made only for what is asked for
/// (`subscript`, `values`, iteration). A value's bytes are what went on or came off the wire;
/// as a `String` each byte is one scalar (``ASCII/string(_:)``), so text added as a `String`
/// reads back as it was when it is Latin-1, which everything on the wire is.
///
/// Each field whose name is a ``KnownField`` is tagged as it is added, and a bit per known
/// name says whether any field has it: a lookup of a known name that is absent reads that word
/// alone, and one that is present compares tags, not names.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// Every field as `Name: value\r\n`, in order: the fields of a head in wire form.
    public private(set) var wire: [UInt8]
    private var spans: [Span]
    /// The ``KnownField/bit`` of every known name among the fields (bit 0: any other name):
    /// derived from `spans`.
    @usableFromInline private(set) var present: UInt64 = 0

    /// The ``KnownField`` raw value of the field named `name`, 0 for another name. Called, not
    /// inlined: the appends that tag each field stay small enough for their own arrays' appends
    /// to be inlined.
    @inline(never)
    private static func tag(_ name: UnsafeRawBufferPointer) -> UInt8 {
        KnownField(name: name)?.rawValue ?? 0
    }

    /// A field's line in `wire`: the name at `start`, then `: `, the value, CRLF; `known`, the
    /// name's ``KnownField`` raw value (0: another name).
    private struct Span: Sendable, Equatable {
        var start: Int
        var nameCount: Int
        var valueCount: Int
        var known: UInt8
        var valueStart: Int { start + nameCount + 2 }
        var lineCount: Int { nameCount + valueCount + 4 }
    }

    public init() {
        wire = []
        spans = []
    }

    /// An empty list with room for `capacity` fields: parsers reserve it once instead of growing
    /// the arrays five times for a typical head.
    public init(capacity: Int) {
        wire = []
        spans = []
        wire.reserveCapacity(capacity * 40)
        spans.reserveCapacity(capacity)
    }

    /// Fields read back from their wire form as ``wire`` holds it (`Name: value\r\n` each, as
    /// this type writes them), in a block of exactly their size: a stored head's fields.
    /// Reading stops at the first line not in that form.
    public init(wireLines lines: ArraySlice<UInt8>) {
        wire = Array(lines)
        spans = []
        spans.reserveCapacity(HTTPHeaders.expectedStoredFields)
        var end = 0
        wire.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            while end < bytes.count {
                // The line's CR LF, found with memchr: this reads every stored head a disk hit
                // serves. A CR without its LF ends the reading (such a line is not one a parser
                // keeps: review 117 found a folded line brought one in, and an older version's
                // disk may hold it), as does a value with a byte a field value may not have.
                guard let cr = memchr(base + end, 13, bytes.count - end) else { break }
                let lineEnd = base.distance(to: UnsafeRawPointer(cr))
                guard let colonPointer = memchr(base + end, Int32(UInt8(ascii: ":")), lineEnd - end) else { break }
                let colon = base.distance(to: UnsafeRawPointer(colonPointer))
                guard colon > end, lineEnd + 1 < bytes.count, bytes[lineEnd + 1] == 10, lineEnd >= colon + 2, bytes[colon + 1] == 32,
                    ASCII.allFieldValueChars(
                        UnsafeBufferPointer(start: (base + colon + 2).assumingMemoryBound(to: UInt8.self), count: lineEnd - colon - 2))
                else { break }
                let known = HTTPHeaders.tag(UnsafeRawBufferPointer(rebasing: bytes[end..<colon]))
                present |= 1 << UInt64(known)
                spans.append(Span(start: end, nameCount: colon - end, valueCount: lineEnd - colon - 2, known: known))
                end = lineEnd + 2
            }
        }
        if end < wire.count { wire.removeSubrange(end...) }
    }

    /// Room reserved for the fields read back from a stored head.
    static let expectedStoredFields = 12

    public init(_ pairs: [(String, String)]) {
        self.init()
        for (name, value) in pairs { add(name, value) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    public var count: Int { spans.count }
    public var isEmpty: Bool { spans.isEmpty }

    /// The fields as name and value strings (made on each call).
    public var fields: [HTTPField] { map { $0 } }

    /// Iterates the fields, making each one's strings as it is reached.
    public struct Iterator: IteratorProtocol {
        fileprivate let headers: HTTPHeaders
        fileprivate var index = 0

        public mutating func next() -> HTTPField? {
            guard index < headers.spans.count else { return nil }
            defer { index += 1 }
            return headers.field(at: index)
        }
    }

    public func makeIterator() -> Iterator { Iterator(headers: self) }

    private func field(at index: Int) -> HTTPField {
        let span = spans[index]
        return wire.withUnsafeBytes { bytes in
            HTTPField(
                name: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[span.start..<(span.start + span.nameCount)]), as: UTF8.self),
                value: ASCII.string(UnsafeRawBufferPointer(rebasing: bytes[span.valueStart..<(span.valueStart + span.valueCount)])))
        }
    }

    /// Calls `body` with the name and value bytes of each field, in order.
    public func forEachField(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void) rethrows {
        try wire.withUnsafeBytes { bytes in
            for span in spans {
                try body(
                    UnsafeRawBufferPointer(rebasing: bytes[span.start..<(span.start + span.nameCount)]),
                    UnsafeRawBufferPointer(rebasing: bytes[span.valueStart..<(span.valueStart + span.valueCount)]))
            }
        }
    }

    /// Calls `body` with the index and the value bytes of each field named `name` (ASCII,
    /// case-insensitive) until it returns false. Names of another length cost one comparison.
    private func forEachIndex(named name: String, _ body: (Int, UnsafeRawBufferPointer) -> Bool) {
        ASCII.withUTF8(of: name) { forEachIndex(nameBytes: $0, body) }
    }

    private func forEachIndex(nameBytes target: UnsafeBufferPointer<UInt8>, _ body: (Int, UnsafeRawBufferPointer) -> Bool) {
        if let known = KnownField(name: UnsafeRawBufferPointer(target)) { return forEachIndex(of: known, body) }
        wire.withUnsafeBytes { bytes in
            for index in spans.indices {
                let span = spans[index]
                guard span.nameCount == target.count,
                    ASCII.equalsIgnoringCase(
                        UnsafeRawBufferPointer(rebasing: bytes[span.start..<(span.start + span.nameCount)]), target)
                else { continue }
                if !body(index, UnsafeRawBufferPointer(rebasing: bytes[span.valueStart..<(span.valueStart + span.valueCount)])) {
                    return
                }
            }
        }
    }

    /// ``forEachIndex(named:_:)`` for a known name: nothing read when none has it, and the
    /// fields found by their tag.
    private func forEachIndex(of field: KnownField, _ body: (Int, UnsafeRawBufferPointer) -> Bool) {
        guard present & field.bit != 0 else { return }
        wire.withUnsafeBytes { bytes in
            for index in spans.indices where spans[index].known == field.rawValue {
                let span = spans[index]
                if !body(index, UnsafeRawBufferPointer(rebasing: bytes[span.valueStart..<(span.valueStart + span.valueCount)])) {
                    return
                }
            }
        }
    }

    /// Whether a field named `field` is present: one bit read.
    @inlinable
    public func contains(_ field: KnownField) -> Bool { present & field.bit != 0 }

    /// The first value of `field`.
    public subscript(field: KnownField) -> String? {
        var value: String?
        forEachIndex(of: field) { _, bytes in
            value = ASCII.string(bytes)
            return false
        }
        return value
    }

    /// The first value of `field` read as an HTTP date, without making a string for it.
    public func date(_ field: KnownField) -> Int? {
        var seconds: Int?
        forEachIndex(of: field) { _, bytes in
            seconds = HTTPDate.parse(bytes)
            return false
        }
        return seconds
    }

    /// Calls `body` with the value bytes of each `field`, in order.
    public func forEachValue(of field: KnownField, _ body: (UnsafeRawBufferPointer) -> Void) {
        forEachIndex(of: field) { _, bytes in
            body(bytes)
            return true
        }
    }

    /// The index of the first field named `name`.
    private func firstIndex(of name: String) -> Int? {
        var found: Int?
        forEachIndex(named: name) { index, _ in
            found = index
            return false
        }
        return found
    }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        var value: String?
        forEachIndex(named: name) { _, bytes in
            value = ASCII.string(bytes)
            return false
        }
        return value
    }

    /// The first value of `name` read as an HTTP date (``HTTPDate/parse(_:)-(UnsafeRawBufferPointer)``),
    /// without making a string for it: freshness reads `Date` and `Last-Modified` on every
    /// stored response.
    public func date(_ name: String) -> Int? {
        var seconds: Int?
        forEachIndex(named: name) { _, bytes in
            seconds = HTTPDate.parse(bytes)
            return false
        }
        return seconds
    }

    /// A copy with room for `extraFields` more fields, so that the fields a proxy adds to a
    /// forwarded head go in without growing (or copying) its arrays again.
    public func copy(reservingFields extraFields: Int) -> HTTPHeaders {
        var copy = HTTPHeaders()
        copy.wire.reserveCapacity(wire.count + extraFields * 40)
        copy.wire.append(contentsOf: wire)
        copy.spans.reserveCapacity(spans.count + extraFields)
        copy.spans.append(contentsOf: spans)
        copy.present = present
        return copy
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        var values: [String] = []
        forEachValue(of: name) { values.append(ASCII.string($0)) }
        return values
    }

    /// Calls `body` with the value bytes of each field named `name`, in order: a list field
    /// read in place, without a string per value.
    public func forEachValue(of name: String, _ body: (UnsafeRawBufferPointer) -> Void) {
        forEachIndex(named: name) { _, bytes in
            body(bytes)
            return true
        }
    }

    public func contains(_ name: String) -> Bool { firstIndex(of: name) != nil }

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
            // Bytes above 0x7F are ISO-8859-1 (see ``ASCII/string(_:)``); tokens are ASCII.
            if element.allSatisfy({ $0 < 0x80 }) {
                result.append(ASCII.lowercasedString(element))
            } else {
                result.append(element.map(ASCII.lower).withUnsafeBytes { ASCII.string($0) })
            }
            return true
        }
        return result
    }

    /// Whether the list-valued field `name` has the element `token` (ASCII, case-insensitive),
    /// without building the list: keep-alive asks on every request.
    public func hasListElement(_ name: String, _ token: StaticString) -> Bool {
        var found = false
        forEachListElement(name) { element in
            found = ASCII.equalsIgnoringCase(UnsafeRawBufferPointer(element), token)
            return !found
        }
        return found
    }

    /// ``hasListElement(_:_:)-(String,_)`` for a known field.
    public func hasListElement(_ field: KnownField, _ token: StaticString) -> Bool {
        var found = false
        forEachListElement(field) { element in
            found = ASCII.equalsIgnoringCase(UnsafeRawBufferPointer(element), token)
            return !found
        }
        return found
    }

    /// Calls `body` with the bytes of each non-empty, OWS-trimmed element of the field `name`
    /// (RFC 9110 §5.6.1) until it returns false; `keepingEmpty` passes empty elements too (a
    /// field whose empty elements are errors, such as Content-Length). Walks the values' bytes
    /// in place: hop-by-hop stripping and keep-alive ask for `Connection` on every request and
    /// response.
    public func forEachListElement(_ name: String, keepingEmpty: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        forEachIndex(named: name) { _, raw in HTTPHeaders.forEachElement(ofList: raw, keepingEmpty: keepingEmpty, body) }
    }

    /// ``forEachListElement(_:keepingEmpty:_:)-(String,_,_)`` for a known field.
    public func forEachListElement(_ field: KnownField, keepingEmpty: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        forEachIndex(of: field) { _, raw in HTTPHeaders.forEachElement(ofList: raw, keepingEmpty: keepingEmpty, body) }
    }

    /// ``forEachListElement(_:keepingEmpty:_:)-(String,_,_)`` over one field value already in hand. Returns
    /// false when `body` stopped the walk.
    @discardableResult
    static func forEachElement(
        ofList raw: UnsafeRawBufferPointer, keepingEmpty: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Bool
    ) -> Bool {
        let bytes = raw.assumingMemoryBound(to: UInt8.self)
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

    public mutating func add(_ name: String, _ value: String) {
        let start = wire.count
        let (nameCount, valueCount) = ASCII.withUTF8(of: name) { appendLine(name: $0, value: value) }
        let known = wire.withUnsafeBytes { HTTPHeaders.tag(UnsafeRawBufferPointer(rebasing: $0[start..<(start + nameCount)])) }
        present |= 1 << UInt64(known)
        spans.append(Span(start: start, nameCount: nameCount, valueCount: valueCount, known: known))
    }

    /// Appends `field` with `value`, as ``add(_:_:)-(String,String)`` does with the field's
    /// name: its tag is known, so the name is not read again to find it.
    public mutating func add(_ field: KnownField, _ value: String) {
        let start = wire.count
        let (nameCount, valueCount) = field.name.withUTF8Buffer { appendLine(name: $0, value: value) }
        present |= field.bit
        spans.append(Span(start: start, nameCount: nameCount, valueCount: valueCount, known: field.rawValue))
    }

    /// Writes `name: value CRLF` behind the fields; the name's and the value's byte counts.
    /// An ASCII value (the usual case) goes in one append of the line built in a temporary
    /// buffer: each append to `wire` checks its uniqueness and capacity again. Other values go
    /// a byte per scalar, as `ASCII.appendBytes(of:to:)` writes them.
    @inline(__always)
    private mutating func appendLine(name: UnsafeBufferPointer<UInt8>, value: String) -> (name: Int, value: Int) {
        let valueCount: Int? = ASCII.withUTF8(of: value) { utf8 in
            for byte in utf8 where byte >= 0x80 { return nil }
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: name.count + utf8.count + 4) { buffer in
                var writer = ByteWriter(buffer)
                writer.append(contentsOf: name)
                writer.append(58)
                writer.append(32)
                writer.append(contentsOf: utf8)
                writer.append(13)
                writer.append(10)
                wire.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[0..<writer.count]))
            }
            return utf8.count
        }
        if let valueCount { return (name.count, valueCount) }
        wire.append(contentsOf: name)
        wire.append(58)
        wire.append(32)
        let valueStart = wire.count
        ASCII.appendBytes(of: value, to: &wire)
        let count = wire.count - valueStart
        wire.append(13)
        wire.append(10)
        return (name.count, count)
    }

    /// Appends `Host` with `url`'s ``AbsoluteURL/authority``, the same bytes as adding that
    /// string, written in place: every request forwarded upstream gets one.
    public mutating func addHost(of url: AbsoluteURL) {
        let written: Bool = ASCII.withUTF8(of: url.host) { host in
            // `Host: `, the authority, CRLF: the whole line in one append.
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 6 + host.count + 21 + 2) { buffer in
                var writer = ByteWriter(buffer)
                ("Host: " as StaticString).withUTF8Buffer { writer.append(contentsOf: $0) }
                url.appendAuthority(to: &writer)
                let authorityCount = writer.count - 6
                // Other bytes go through the string as `add` writes them.
                for byte in buffer[6..<writer.count] where byte >= 0x80 { return false }
                writer.append(13)
                writer.append(10)
                let start = wire.count
                wire.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[0..<writer.count]))
                present |= KnownField.host.bit
                spans.append(Span(start: start, nameCount: 4, valueCount: authorityCount, known: KnownField.host.rawValue))
                return true
            }
        }
        if !written { add(.host, url.authority) }
    }

    /// Appends a field from bytes read off the wire, as they are: the parsers have checked the
    /// name is a token and the value has no CR, LF or NUL.
    public mutating func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let start = wire.count
        // Typed buffers: appending a raw buffer goes byte by byte through the generic path.
        wire.append(contentsOf: name.assumingMemoryBound(to: UInt8.self))
        wire.append(58)
        wire.append(32)
        wire.append(contentsOf: value.assumingMemoryBound(to: UInt8.self))
        wire.append(13)
        wire.append(10)
        let known = HTTPHeaders.tag(name)
        present |= 1 << UInt64(known)
        spans.append(Span(start: start, nameCount: name.count, valueCount: value.count, known: known))
    }

    /// Appends a field from a line read off the wire: `line` is the whole line with its CRLF,
    /// the name its first `nameCount` bytes and `value` the part of it that is the value (OWS
    /// trimmed), checked as for ``append(name:value:)``. A line already in the form
    /// `Name: value\r\n`, as nearly all are, is copied in one piece.
    public mutating func append(line: UnsafeRawBufferPointer, nameCount: Int, value: UnsafeRawBufferPointer) {
        let valueStart = value.baseAddress.map { line.baseAddress!.distance(to: $0) } ?? -1
        if valueStart == nameCount + 2, line[nameCount + 1] == 32, valueStart + value.count + 2 == line.count,
            line[line.count - 2] == 13, line[line.count - 1] == 10
        {
            let known = HTTPHeaders.tag(UnsafeRawBufferPointer(rebasing: line[0..<nameCount]))
            present |= 1 << UInt64(known)
            spans.append(Span(start: wire.count, nameCount: nameCount, valueCount: value.count, known: known))
            wire.append(contentsOf: line.assumingMemoryBound(to: UInt8.self))
        } else {
            append(name: UnsafeRawBufferPointer(rebasing: line[0..<nameCount]), value: value)
        }
    }

    /// Replaces every `name` field by one with `value`, where the first one was.
    public mutating func set(_ name: String, _ value: String) {
        guard let index = firstIndex(of: name) else {
            add(name, value)
            return
        }
        var bytes: [UInt8] = []
        ASCII.appendBytes(of: value, to: &bytes)
        let span = spans[index]
        wire.replaceSubrange(span.valueStart..<(span.valueStart + span.valueCount), with: bytes)
        let delta = bytes.count - span.valueCount
        spans[index].valueCount = bytes.count
        for later in (index + 1)..<spans.count { spans[later].start += delta }
        var first = true
        removeFields(named: name) {
            defer { first = false }
            return !first
        }
    }

    public mutating func remove(_ name: String) {
        let known = ASCII.withUTF8(of: name) { KnownField(name: UnsafeRawBufferPointer($0)) }
        if let known { return remove(known) }
        removeFields(named: name) { true }
    }

    /// Removes every `field`, found by its tag: nothing is read when none is there, and one that
    /// is (the `Host` a forwarded head replaces) goes without a comparison of every name.
    public mutating func remove(_ field: KnownField) {
        guard present & field.bit != 0 else { return }
        while let index = spans.firstIndex(where: { $0.known == field.rawValue }) {
            let removed = spans.remove(at: index)
            wire.removeSubrange(removed.start..<(removed.start + removed.lineCount))
            for later in index..<spans.count { spans[later].start -= removed.lineCount }
        }
        present &= ~field.bit
    }

    /// Appends text to the last field's value (for folded lines).
    public mutating func extendLastValue(with text: String) {
        guard let last = spans.last else { return }
        var bytes: [UInt8] = []
        ASCII.appendBytes(of: text, to: &bytes)
        wire.insert(contentsOf: bytes, at: last.valueStart + last.valueCount)
        spans[spans.count - 1].valueCount += bytes.count
    }

    /// Removes the field added last (a parser that finds it invalid only on a later line).
    public mutating func removeLastField() {
        let last = count - 1
        guard last >= 0 else { return }
        var index = 0
        removeFields(whereName: { _ in
            defer { index += 1 }
            return index == last
        })
    }

    public mutating func removeAll(where predicate: (HTTPField) -> Bool) {
        let doomed = spans.indices.map { predicate(field(at: $0)) }
        var index = 0
        removeFields(whereName: { _ in
            defer { index += 1 }
            return doomed[index]
        })
    }

    /// Removes the fields named `name` (ASCII, case-insensitive) for which `predicate`, called
    /// with each in order, returns true.
    private mutating func removeFields(named name: String, _ predicate: () -> Bool) {
        ASCII.withUTF8(of: name) { target in
            if let known = KnownField(name: UnsafeRawBufferPointer(target)), present & known.bit == 0 { return }
            removeFields(whereName: { ASCII.equalsIgnoringCase($0, target) && predicate() })
        }
    }

    /// Removes the fields whose name bytes satisfy `predicate` (called once for each field, in
    /// order), moving the kept lines down in one pass; nothing is copied or rewritten when none
    /// matches, the common case.
    public mutating func removeFields(whereName predicate: (UnsafeRawBufferPointer) -> Bool) {
        removeEachField { name, _ in predicate(name) }
    }

    /// ``removeFields(whereName:)`` with each field's value bytes as well: a predicate that reads
    /// a field as it decides needs no pass of its own.
    public mutating func removeEachField(where predicate: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Bool) {
        removeLines { span, bytes in
            predicate(
                UnsafeRawBufferPointer(rebasing: bytes[span.start..<(span.start + span.nameCount)]),
                UnsafeRawBufferPointer(rebasing: bytes[span.valueStart..<(span.valueStart + span.valueCount)]))
        }
    }

    /// Whether any field has a known name whose ``KnownField/bit`` is in `bits`: one word read.
    @inline(__always)
    func containsAny(_ bits: UInt64) -> Bool { present & bits != 0 }

    /// Removes every field whose known name's ``KnownField/bit`` is in `bits` (bit 0, any other
    /// name, is ignored), by their tags: no name is read, and nothing is moved when none is there.
    mutating func removeFields(tagged bits: UInt64) {
        let bits = bits & ~1
        guard present & bits != 0 else { return }
        removeLines { span, _ in (1 << UInt64(span.known)) & bits != 0 }
    }

    /// Removes the lines for which `doomed` (called once for each field, in order, with the
    /// bytes of `wire`) returns true, moving the kept lines down in one pass, a run of them at a
    /// time; nothing is copied or rewritten when none is doomed.
    @inline(__always)
    private mutating func removeLines(where doomed: (Span, UnsafeRawBufferPointer) -> Bool) {
        var spans = self.spans
        let first: Int? = wire.withUnsafeBytes { bytes in spans.firstIndex { doomed($0, bytes) } }
        guard let first else { return }
        var kept = first
        var end = spans[first].start
        var present: UInt64 = 0
        self.spans = []  // `spans` is then the only reference: no copy when it changes
        spans.withUnsafeMutableBufferPointer { spans in
            for index in 0..<first { present |= 1 << UInt64(spans[index].known) }
            wire.withUnsafeMutableBytes { bytes in
                let base = bytes.baseAddress!
                // The kept lines since the last doomed one: contiguous where they are and where
                // they go, so moved in one call. A line not yet moved is still where its span
                // says, for `doomed` to read.
                var runFrom = 0
                var runTo = 0
                var runCount = 0
                func moveRun() {
                    if runCount > 0 && runFrom != runTo { (base + runTo).copyMemory(from: base + runFrom, byteCount: runCount) }
                    runCount = 0
                }
                for index in (first + 1)..<spans.count {
                    let span = spans[index]
                    if doomed(span, UnsafeRawBufferPointer(bytes)) {
                        moveRun()
                        continue
                    }
                    if runCount == 0 {
                        runFrom = span.start
                        runTo = end
                    }
                    runCount += span.lineCount
                    spans[kept] = Span(start: end, nameCount: span.nameCount, valueCount: span.valueCount, known: span.known)
                    present |= 1 << UInt64(span.known)
                    end += span.lineCount
                    kept += 1
                }
                moveRun()
            }
        }
        spans.removeSubrange(kept...)
        self.present = present
        self.spans = spans
        wire.removeSubrange(end...)
    }
}
