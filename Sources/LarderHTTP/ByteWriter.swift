/// Writes bytes into a buffer someone else allocated (a `String`'s or an `Array`'s
/// uninitialized capacity), front to back.
///
/// A struct with `mutating` methods rather than a nested function capturing a `var count`:
/// a captured variable's accesses are checked for exclusivity at run time (a `swift_beginAccess`
/// per use); a struct's are checked statically.
public struct ByteWriter {
    public let buffer: UnsafeMutableBufferPointer<UInt8>
    /// Bytes written so far.
    @inlinable public var count: Int { written }
    @usableFromInline var written = 0

    @inlinable
    public init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    /// Appends `text`'s UTF-8 (traps if it does not fit).
    @inline(__always)
    public mutating func append(_ text: some StringProtocol) { appendUTF8(of: text) }

    /// Appends `text`'s UTF-8 (traps if it does not fit). The generic version above is not
    /// specialized for callers in other modules, which then pay for protocol witnesses and
    /// metadata lookups on every call.
    public mutating func append(_ text: String) { appendUTF8(of: text) }

    @inline(__always)
    private mutating func appendUTF8(of text: some StringProtocol) {
        let utf8 = text.utf8
        let copied: Void? = utf8.withContiguousStorageIfAvailable { append(contentsOf: $0) }
        if copied == nil {
            for byte in utf8 { append(byte) }
        }
    }

    /// Appends `bytes` (traps if they do not fit).
    @inlinable @inline(__always)
    public mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
        written += UnsafeMutableBufferPointer(rebasing: buffer[written...]).initialize(fromContentsOf: bytes)
    }

    /// Appends a literal's bytes. Inlinable, as the other small writers here: callers in
    /// other modules otherwise pay a call and a closure per piece.
    @inlinable @inline(__always)
    public mutating func append(_ literal: StaticString) {
        let start = written
        written += literal.withUTF8Buffer { bytes in
            UnsafeMutableBufferPointer(rebasing: buffer[start...]).initialize(fromContentsOf: bytes)
        }
    }

    /// Appends `value` in decimal, left-padded with zeros to exactly `width` digits (traps if
    /// the value is negative or wider). Written last digit first, down to the field's start.
    @inlinable
    public mutating func append(_ value: Int, zeroPaddedTo width: Int) {
        precondition(value >= 0)
        var rest = value
        var index = written &+ width
        while index > written {
            index &-= 1
            let (quotient, digit) = rest.quotientAndRemainder(dividingBy: 10)
            buffer[index] = UInt8(truncatingIfNeeded: 48 &+ digit)
            rest = quotient
        }
        precondition(rest == 0, "value wider than its field")
        written += width
    }

    /// Appends a non-negative `value` in decimal, as many digits as it takes (`String(value)`
    /// goes through `CustomStringConvertible` and a new string). The digits are counted by
    /// comparison, not division: the only divisions are the ones that write them.
    @inlinable
    public mutating func append(decimal value: Int) {
        var digits = 1
        var bound = 10
        // 10^18 is the largest power of ten in an Int; a value past it has 19 digits.
        while digits < 19, value >= bound {
            digits &+= 1
            bound = bound &* 10
        }
        append(value, zeroPaddedTo: digits)
    }

    /// Appends `length` bytes that `write` fills in.
    public mutating func append(length: Int, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Void) {
        write(UnsafeMutableBufferPointer(rebasing: buffer[written..<written + length]))
        written += length
    }

    /// Appends one byte (traps if it does not fit).
    @inlinable @inline(__always)
    public mutating func append(_ byte: UInt8) {
        buffer[written] = byte
        written += 1
    }
}
