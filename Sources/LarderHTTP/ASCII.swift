/// Byte-level helpers for the HTTP grammar (RFC 9110 §5.6).
public enum ASCII {
    /// tchar: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA,
    /// as a table of one byte per ASCII code, "t" for a tchar. A literal is a constant in the
    /// binary (a lazily built table would cost a `swift_once` check on every byte of every
    /// header name), and a byte is one load and compare (``isIn(_:low:high:)``'s masks need two
    /// range checks and a bit test). ASCIITests checks it against the tchar set on every byte.
    static var tokenTable: StaticString {
        ".................................t.ttttt..tt.tt.tttttttttt.......tttttttttttttttttttttttttt...ttttttttttttttttttttttttttttt.t.t."
    }

    @inline(__always)
    public static func isTokenChar(_ byte: UInt8) -> Bool {
        byte < 0x80 && tokenTable.utf8Start[Int(byte)] == UInt8(ascii: "t")
    }

    /// Whether `byte` is in the ASCII set given as two bit masks over the bytes 0-63 (`low`)
    /// and 64-127 (`high`); nothing above 127 is. The character classes of the request path
    /// are such masks, constants checked with a shift.
    @inline(__always)
    public static func isIn(_ byte: UInt8, low: UInt64, high: UInt64) -> Bool {
        if byte < 64 { return (low >> UInt64(byte)) & 1 != 0 }
        if byte < 128 { return (high >> UInt64(byte - 64)) & 1 != 0 }
        return false
    }

    /// The value of a hex digit (either case), or nil.
    @inline(__always)
    public static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 48...57: return Int(byte - 48)
        case 97...102: return Int(byte - 87)
        case 65...70: return Int(byte - 55)
        default: return nil
        }
    }

    /// A field-value byte: VCHAR, obs-text, SP or HTAB (RFC 9110 §5.5). No CR, LF, NUL or
    /// other controls.
    @inline(__always)
    public static func isFieldValueChar(_ byte: UInt8) -> Bool {
        byte >= 0x20 ? byte != 0x7F : byte == 0x09
    }

    @inline(__always)
    public static func lower(_ byte: UInt8) -> UInt8 {
        byte &- 0x41 < 26 ? byte | 0x20 : byte
    }

    /// Case-insensitive comparison of two ASCII strings (header names, tokens).
    ///
    /// Called for every field of a message each time a field is looked up by name, so strings
    /// of different lengths (nearly all of them) cost one length comparison, and the bytes of
    /// native strings are compared in place.
    @inline(__always)
    public static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        let a8 = a.utf8
        let b8 = b.utf8
        guard a8.count == b8.count else { return false }
        let inPlace = a8.withContiguousStorageIfAvailable { pa in
            b8.withContiguousStorageIfAvailable { pb in
                for i in 0..<pa.count where lower(pa[i]) != lower(pb[i]) { return false }
                return true
            }
        }
        if let inPlace, let equal = inPlace { return equal }
        return a8.elementsEqual(b8) { lower($0) == lower($1) }
    }

    /// Case-insensitive comparison of raw bytes (a header name in wire form) with other bytes.
    @inline(__always)
    public static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ other: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == other.count else { return false }
        for i in 0..<bytes.count where lower(bytes[i]) != lower(other[i]) { return false }
        return true
    }

    /// ``equalsIgnoringCase(_:_:)-(UnsafeRawBufferPointer,UnsafeBufferPointer<UInt8>)`` with a literal.
    @inline(__always)
    public static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        literal.withUTF8Buffer { equalsIgnoringCase(bytes, $0) }
    }

    /// `bytes` as a string with A-Z lowered and every other byte kept: tokens, schemes and host
    /// names compare case-insensitively in ASCII only (RFC 9110 §5.6.2, RFC 3986 §6.2.2.1).
    /// Invalid UTF-8 is repaired (U+FFFD), as `String(decoding:as:)` does.
    public static func lowercasedString(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for i in 0..<bytes.count { buffer[i] = lower(bytes[i]) }
            return bytes.count
        }
    }

    /// ``lowercasedString(_:)`` of raw bytes.
    public static func lowercasedString(_ bytes: UnsafeRawBufferPointer) -> String {
        lowercasedString(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// Calls `body` with `text`'s UTF-8 where it is (every native string has it contiguous): a
    /// copy made to call `withUTF8` on costs a retain and a release, and field names and
    /// values are looked at this way dozens of times a request.
    @inline(__always)
    public static func withUTF8<Result>(of text: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = text
        return copy.withUTF8(body)
    }

    /// Whether `text`'s UTF-8 contains `byte`, over its contiguous bytes (`text.utf8.contains`
    /// walks the view through the generic sequence path).
    public static func contains(_ byte: UInt8, in text: String) -> Bool {
        withUTF8(of: text) { bytes in
            for index in 0..<bytes.count where bytes[index] == byte { return true }
            return false
        }
    }

    /// A token is a non-empty run of tchar.
    public static func isToken(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { isTokenChar($0) }
    }

    /// Decodes field bytes as a string that round-trips: ASCII as is, and when any byte is
    /// above 0x7F (obs-text, or UTF-8 sent by a client) every byte becomes one scalar U+0000-U+00FF
    /// (ISO-8859-1), so ``appendBytes(of:to:)`` writes back exactly the bytes received.
    public static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        let typed = bytes.assumingMemoryBound(to: UInt8.self)
        guard isASCII(typed) else { return String(bytes.lazy.map { Character(Unicode.Scalar($0)) }) }
        return String(decoding: typed, as: UTF8.self)
    }

    /// Whether every byte may be in a field value (``isFieldValueChar(_:)``), eight at a time:
    /// a word with no byte below 0x20 and no DEL needs no look at its bytes.
    public static func allFieldValueChars(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var index = 0
        while index + 8 <= bytes.count {
            let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
            if hasByte(in: word, below: 0x20) || hasByte(in: word, equalTo: 0x7F) {
                for offset in index..<(index + 8) where !isFieldValueChar(base[offset]) { return false }  // a tab, or not
            }
            index += 8
        }
        if index < bytes.count, bytes.count >= 8 {
            // The rest as the last eight bytes, some of them checked again.
            let last = bytes.count - 8
            let word = UnsafeRawPointer(base + last).loadUnaligned(as: UInt64.self)
            if hasByte(in: word, below: 0x20) || hasByte(in: word, equalTo: 0x7F) {
                for offset in last..<bytes.count where !isFieldValueChar(base[offset]) { return false }
            }
            return true
        }
        while index < bytes.count {
            if !isFieldValueChar(base[index]) { return false }
            index += 1
        }
        return true
    }

    /// Whether every byte is above 0x20 and not DEL: no space or control byte (a request
    /// target on the wire, RFC 9112 §3.2), eight at a time. Bytes over 0x7F pass.
    public static func allVisibleOrHigh(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var index = 0
        while index + 8 <= bytes.count {
            let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
            if hasByte(in: word, below: 0x21) || hasByte(in: word, equalTo: 0x7F) { return false }
            index += 8
        }
        if index < bytes.count, bytes.count >= 8 {
            // The rest as the last eight bytes, some of them checked again.
            let word = UnsafeRawPointer(base + bytes.count - 8).loadUnaligned(as: UInt64.self)
            return !hasByte(in: word, below: 0x21) && !hasByte(in: word, equalTo: 0x7F)
        }
        while index < bytes.count {
            if base[index] <= 0x20 || base[index] == 0x7F { return false }
            index += 1
        }
        return true
    }

    /// Whether every byte is visible ASCII, 0x21-0x7E: no space, control byte, DEL or byte over
    /// 0x7F (a request target as the request line carries it), eight at a time.
    public static func allVisibleASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        @inline(__always) func visible(_ word: UInt64) -> Bool {
            word & 0x8080_8080_8080_8080 == 0 && !hasByte(in: word, below: 0x21) && !hasByte(in: word, equalTo: 0x7F)
        }
        var index = 0
        while index + 8 <= bytes.count {
            if !visible(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) { return false }
            index += 8
        }
        if index < bytes.count, bytes.count >= 8 {
            // The rest as the last eight bytes, some of them checked again.
            return visible(UnsafeRawPointer(base + bytes.count - 8).loadUnaligned(as: UInt64.self))
        }
        while index < bytes.count {
            if base[index] <= 0x20 || base[index] >= 0x7F { return false }
            index += 1
        }
        return true
    }

    /// Whether a byte of `word` is below `limit` (at most 0x80): exact as a yes or no, since a
    /// borrow only starts at a byte that is below it.
    @inline(__always)
    static func hasByte(in word: UInt64, below limit: UInt8) -> Bool {
        (word &- 0x0101_0101_0101_0101 &* UInt64(limit)) & ~word & 0x8080_8080_8080_8080 != 0
    }

    /// Whether a byte of `word` is `value`.
    @inline(__always)
    static func hasByte(in word: UInt64, equalTo value: UInt8) -> Bool {
        hasByte(in: word ^ (0x0101_0101_0101_0101 &* UInt64(value)), below: 1)
    }

    /// Whether every byte is below 0x80, eight at a time.
    @inline(__always)
    static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var index = 0
        while index + 8 <= bytes.count {
            if UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < bytes.count {
            if base[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// Appends the bytes of a string produced by ``string(_:)`` (or any ASCII string).
    @inline(__always)
    public static func appendBytes(of text: String, to output: inout [UInt8]) {
        let ascii = withASCII(text) { output.append(contentsOf: $0) }
        if !ascii {
            for scalar in text.unicodeScalars { output.append(wireByte(scalar)) }
        }
    }

    /// The same bytes as the array version above, written into a buffer sized for
    /// `text.utf8.count` (at least as long as the bytes written).
    public static func appendBytes(of text: String, to writer: inout ByteWriter) {
        let ascii = withASCII(text) { writer.append(contentsOf: $0) }
        if !ascii {
            for scalar in text.unicodeScalars { writer.append(wireByte(scalar)) }
        }
    }

    /// Calls `body` with `text`'s UTF-8 when it is all ASCII (the bytes that go out as they
    /// are) and returns true; returns false without calling it otherwise.
    @inline(__always)
    private static func withASCII(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        withUTF8(of: text) { utf8 in
            for byte in utf8 where byte >= 0x80 { return false }
            body(utf8)
            return true
        }
    }

    /// The byte a scalar of a string from ``string(_:)`` goes out as: its Latin-1 value
    /// (obs-text came in as that byte), `?` for anything past Latin-1.
    @inline(__always)
    static func wireByte(_ scalar: Unicode.Scalar) -> UInt8 {
        scalar.value < 256 ? UInt8(scalar.value) : UInt8(ascii: "?")
    }

    /// Trims spaces and tabs at both ends (byte by byte: OWS is ASCII, and walking Characters
    /// would run grapheme breaking on every header value).
    public static func trimOWS(_ text: Substring) -> Substring {
        let utf8 = text.utf8
        var start = utf8.startIndex
        var end = utf8.endIndex
        while start < end, utf8[start] == 0x20 || utf8[start] == 0x09 { utf8.formIndex(after: &start) }
        while end > start {
            let before = utf8.index(before: end)
            guard utf8[before] == 0x20 || utf8[before] == 0x09 else { break }
            end = before
        }
        return text[start..<end]
    }
}
