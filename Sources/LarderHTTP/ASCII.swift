/// Byte-level helpers for the HTTP grammar (RFC 9110 §5.6).
public enum ASCII {
    /// tchar: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    public static let tokenTable: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in UInt8(ascii: "0")...UInt8(ascii: "9") { table[Int(byte)] = true }
        for byte in UInt8(ascii: "a")...UInt8(ascii: "z") { table[Int(byte)] = true }
        for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") { table[Int(byte)] = true }
        for byte in "!#$%&'*+-.^_`|~".utf8 { table[Int(byte)] = true }
        return table
    }()

    @inline(__always)
    public static func isTokenChar(_ byte: UInt8) -> Bool { tokenTable[Int(byte)] }

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
    @inline(__always)
    public static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                guard pa.count == pb.count else { return false }
                for i in 0..<pa.count where lower(pa[i]) != lower(pb[i]) { return false }
                return true
            }
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
        for byte in bytes where byte >= 0x80 {
            return String(bytes.lazy.map { Character(Unicode.Scalar($0)) })
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the bytes of a string produced by ``string(_:)`` (or any ASCII string).
    @inline(__always)
    public static func appendBytes(of text: String, to output: inout [UInt8]) {
        var copy = text
        let ascii = copy.withUTF8 { utf8 in
            for byte in utf8 where byte >= 0x80 { return false }
            output.append(contentsOf: utf8)
            return true
        }
        if !ascii {
            for scalar in text.unicodeScalars {
                output.append(scalar.value < 256 ? UInt8(scalar.value) : UInt8(ascii: "?"))
            }
        }
    }

    /// Trims spaces and tabs at both ends.
    public static func trimOWS(_ text: Substring) -> Substring {
        var start = text.startIndex
        var end = text.endIndex
        while start < end, text[start] == " " || text[start] == "\t" { start = text.index(after: start) }
        while end > start {
            let before = text.index(before: end)
            guard text[before] == " " || text[before] == "\t" else { break }
            end = before
        }
        return text[start..<end]
    }
}
