/// Writes heads in HTTP/1.1 wire form into a byte array.
public enum HeadSerializer {
    /// Appends `HTTP/1.1 <status> <reason>\r\n`, the reason as the bytes it was read from
    /// (``ASCII/string(_:)``: obs-text, RFC 9112 §4, goes back out as the same byte).
    public static func appendStatusLine(_ status: Int, _ reason: String, to output: inout [UInt8]) {
        append("HTTP/1.1 ", to: &output)
        appendDecimal(status, to: &output)
        output.append(32)
        ASCII.appendBytes(of: reason, to: &output)
        output.append(13)
        output.append(10)
    }

    /// Appends a literal's bytes. `append(contentsOf: "…".utf8)` goes through the generic
    /// sequence path for each piece, and a response head from the cache has eight.
    @inline(__always)
    public static func append(_ literal: StaticString, to output: inout [UInt8]) {
        literal.withUTF8Buffer { output.append(contentsOf: $0) }
    }

    /// Appends `Name: value\r\n`, preserving the value's bytes.
    @inline(__always)
    public static func appendField(_ name: String, _ value: String, to output: inout [UInt8]) {
        ASCII.withUTF8(of: name) { output.append(contentsOf: $0) }
        output.append(58)
        output.append(32)
        ASCII.appendBytes(of: value, to: &output)
        output.append(13)
        output.append(10)
    }

    /// Appends every field: the list is kept in wire form, so one copy.
    @inline(__always)
    public static func appendFields(_ headers: HTTPHeaders, to output: inout [UInt8]) {
        output.append(contentsOf: headers.wire)
    }

    /// Appends a non-negative integer in decimal without going through String.
    @inline(__always)
    public static func appendDecimal(_ value: Int, to output: inout [UInt8]) {
        if value < 10 {
            output.append(UInt8(48 + value))
            return
        }
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var remaining = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while remaining > 0 && count < 20 {
                buffer[19 - count] = UInt8(48 + remaining % 10)
                remaining /= 10
                count += 1
            }
            output.append(contentsOf: buffer[(20 - count)...])
        }
    }

    /// Appends a chunk-size line for the chunked coding.
    public static func appendChunkSize(_ size: Int, to output: inout [UInt8]) {
        let hex = String(size, radix: 16)
        output.append(contentsOf: hex.utf8)
        output.append(contentsOf: crlf)
    }

    public static let crlf: [UInt8] = [13, 10]
}
