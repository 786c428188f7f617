import LarderHTTP

/// Client text (a User-Agent, a user name, a key built from the request) as the access log
/// writes it: nothing in it may end a field or a line, or reach an operator's terminal as a
/// control sequence (`tail -f`): C0 controls, DEL and C1 controls (U+0080-U+009F, among them
/// CSI U+009B and OSC U+009D) are escaped in every format.
extension AccessLog {
    /// One piece of client text: a character, or a byte that was not UTF-8.
    enum TextPiece {
        case scalar(Unicode.Scalar)
        case invalid(UInt8)
    }

    /// Whether `scalar` is a control character: C0, DEL or C1.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F)
    }

    /// Calls `body` for each piece of `text`. `wire`: the text is a header value, whose bytes
    /// the parser made one scalar each (``ASCII/string(_:)``); those bytes are decoded as UTF-8
    /// here, so a client's `é` is logged as `é` and not as the two characters of its bytes,
    /// and a byte that is not UTF-8 comes as ``TextPiece/invalid(_:)``. Text that is not one
    /// byte a scalar (not from the wire) is taken as it is.
    static func forEachPiece(of text: String, wire: Bool, _ body: (TextPiece) -> Void) {
        if wire, text.unicodeScalars.allSatisfy({ $0.value < 0x100 }) {
            let bytes = text.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
            var iterator = bytes.makeIterator()
            var parser = Unicode.UTF8.ForwardParser()
            var index = 0
            while true {
                switch parser.parseScalar(from: &iterator) {
                case .valid(let encoded):
                    body(.scalar(Unicode.UTF8.decode(encoded)))
                    index += encoded.count
                case .error(let length):
                    for offset in 0..<length { body(.invalid(bytes[index + offset])) }
                    index += length
                case .emptyInput:
                    return
                }
            }
        } else {
            for scalar in text.unicodeScalars { body(.scalar(scalar)) }
        }
    }

    /// The most bytes ``writeEscaped(_:wire:to:)`` writes for `text`: an invalid byte (two
    /// bytes of UTF-8 as a scalar) becomes four, anything else no more than it was.
    static func escapedBound(_ text: String) -> Int { 2 * text.utf8.count }

    /// `text` for a quoted field of the larder and combined formats: quotes, backslashes and
    /// control characters become `'`, a byte that is not UTF-8 `\xNN` (which client text cannot
    /// spell, its backslashes being replaced). At most ``escapedBound(_:)`` bytes.
    static func writeEscaped(_ text: String, wire: Bool, to writer: inout ByteWriter) {
        let ascii = ASCII.withUTF8(of: text) { bytes in
            for index in 0..<bytes.count where bytes[index] >= 0x80 { return false }
            // The usual case, byte by byte.
            writer.append(length: bytes.count) { out in
                for index in 0..<bytes.count {
                    let byte = bytes[index]
                    out[index] =
                        byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte == 0x7F ? UInt8(ascii: "'") : byte
                }
            }
            return true
        }
        if ascii { return }
        forEachPiece(of: text, wire: wire) { piece in
            switch piece {
            case .scalar(let scalar):
                if isControl(scalar) || scalar == "\"" || scalar == "\\" {
                    writer.append(UInt8(ascii: "'"))
                } else {
                    UTF8.encode(scalar) { writer.append($0) }
                }
            case .invalid(let byte):
                writer.append("\\x" as StaticString)
                writer.append(upperHex[Int(byte >> 4)])
                writer.append(upperHex[Int(byte & 15)])
            }
        }
    }

    /// `text` as a JSON string's content (RFC 8259 §7): quote and backslash escaped, control
    /// characters as `\u00XX`, a byte that is not UTF-8 as the text `\xNN`.
    static func appendJSONEscaped(_ text: String, wire: Bool, to buffer: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        func control(_ value: UInt32) {
            buffer.append(contentsOf: "\\u00".utf8)
            buffer.append(hex[Int(value >> 4)])
            buffer.append(hex[Int(value & 15)])
        }
        let ascii = ASCII.withUTF8(of: text) { bytes in
            for index in 0..<bytes.count where bytes[index] >= 0x80 { return false }
            for index in 0..<bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    buffer.append(UInt8(ascii: "\\"))
                    buffer.append(byte)
                case 0..<0x20, 0x7F:
                    control(UInt32(byte))
                default:
                    buffer.append(byte)
                }
            }
            return true
        }
        if ascii { return }
        forEachPiece(of: text, wire: wire) { piece in
            switch piece {
            case .scalar(let scalar):
                if scalar == "\"" || scalar == "\\" {
                    buffer.append(UInt8(ascii: "\\"))
                    buffer.append(UInt8(scalar.value))
                } else if isControl(scalar) {
                    control(scalar.value)
                } else {
                    UTF8.encode(scalar) { buffer.append($0) }
                }
            case .invalid(let byte):
                buffer.append(contentsOf: "\\\\x".utf8)
                buffer.append(upperHex[Int(byte >> 4)])
                buffer.append(upperHex[Int(byte & 15)])
            }
        }
    }

    private static let upperHex = Array("0123456789ABCDEF".utf8)
}
