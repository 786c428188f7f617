/// An incremental decoder for the chunked transfer coding (RFC 9112 §7.1).
///
/// Strict where smuggling lives: chunk sizes are hex digits only (no sign, no `0x`, no
/// whitespace before the digits), at most 15 digits so the size cannot overflow, every line
/// ends in CRLF, and chunk extensions and trailers are bounded. Trailer fields are discarded.
public struct ChunkedDecoder: Sendable {
    private enum State: Sendable {
        case size(value: Int, digits: Int)
        case extensions(size: Int, inQuote: Bool, escaped: Bool)
        case sizeLF(size: Int)
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailerLineStart
        case trailerName
        case trailerLine
        case trailerLF(emptyLine: Bool)
        case done
    }

    private var state: State = .size(value: 0, digits: 0)
    private var lineBytes = 0
    private var trailerBytes = 0
    /// The most bytes a chunk-size line (with extensions) may take.
    public var maxLineBytes = 4096
    /// The most bytes the trailer section may take.
    public var maxTrailerBytes = 16 * 1024

    public init() {}

    /// True once the last chunk and the trailer section were read.
    public var isComplete: Bool {
        if case .done = state { return true }
        return false
    }

    /// Decodes as much of `input` as possible, handing body bytes to `sink`; returns how many
    /// input bytes were consumed (fewer than given only once the message is complete).
    public mutating func decode(
        _ input: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) -> Void
    ) throws(HTTPParseError) -> Int {
        var index = 0
        while index < input.count {
            switch state {
            case .done:
                return index
            case .size(let value, let digits):
                let byte = input[index]
                if let digit = ASCII.hexValue(byte) {
                    guard digits < 15 else { throw .bad("chunk size too large") }
                    state = .size(value: value << 4 | digit, digits: digits + 1)
                    lineBytes += 1
                } else {
                    guard digits > 0 else { throw .bad("invalid chunk size") }
                    if byte == 13 {
                        state = .sizeLF(size: value)
                    } else if byte == UInt8(ascii: ";") || byte == 32 || byte == 9 {
                        // BWS before ";" is tolerated; anything else after the digits is not.
                        state = .extensions(size: value, inQuote: false, escaped: false)
                    } else {
                        throw .bad("invalid chunk size")
                    }
                    lineBytes += 1
                }
                index += 1
            case .extensions(let size, let inQuote, let escaped):
                let byte = input[index]
                lineBytes += 1
                guard lineBytes <= maxLineBytes else { throw .bad("chunk extensions too long") }
                if inQuote {
                    guard byte == 9 || (byte >= 0x20 && byte != 0x7F) else { throw .bad("invalid chunk extension") }
                    if escaped {
                        state = .extensions(size: size, inQuote: true, escaped: false)
                    } else if byte == UInt8(ascii: "\\") {
                        state = .extensions(size: size, inQuote: true, escaped: true)
                    } else if byte == UInt8(ascii: "\"") {
                        state = .extensions(size: size, inQuote: false, escaped: false)
                    }
                } else if byte == 13 {
                    state = .sizeLF(size: size)
                } else if byte == UInt8(ascii: "\"") {
                    state = .extensions(size: size, inQuote: true, escaped: false)
                } else if !(ASCII.isTokenChar(byte) || byte == UInt8(ascii: ";") || byte == UInt8(ascii: "=") || byte == 32 || byte == 9) {
                    throw .bad("invalid chunk extension")
                }
                index += 1
            case .sizeLF(let size):
                guard input[index] == 10 else { throw .bad("chunk size line not ended by CRLF") }
                index += 1
                lineBytes = 0
                state = size == 0 ? .trailerLineStart : .data(remaining: size)
            case .data(let remaining):
                let take = min(remaining, input.count - index)
                sink(UnsafeRawBufferPointer(rebasing: input[index..<(index + take)]))
                index += take
                state = take == remaining ? .dataCR : .data(remaining: remaining - take)
            case .dataCR:
                guard input[index] == 13 else { throw .bad("chunk data not followed by CRLF") }
                index += 1
                state = .dataLF
            case .dataLF:
                guard input[index] == 10 else { throw .bad("chunk data not followed by CRLF") }
                index += 1
                state = .size(value: 0, digits: 0)
            case .trailerLineStart:
                let byte = input[index]
                index += 1
                trailerBytes += 1
                if byte == 13 {
                    state = .trailerLF(emptyLine: true)
                } else {
                    guard ASCII.isTokenChar(byte) else { throw .bad("invalid trailer field") }
                    state = .trailerName
                }
            case .trailerName:
                let byte = input[index]
                index += 1
                trailerBytes += 1
                guard trailerBytes <= maxTrailerBytes else { throw .bad("trailer section too large") }
                if byte == UInt8(ascii: ":") {
                    state = .trailerLine
                } else if !ASCII.isTokenChar(byte) {
                    throw .bad("invalid trailer field name")
                }
            case .trailerLine:
                let byte = input[index]
                index += 1
                trailerBytes += 1
                guard trailerBytes <= maxTrailerBytes else { throw .bad("trailer section too large") }
                if byte == 13 {
                    state = .trailerLF(emptyLine: false)
                } else if byte == 10 || !(ASCII.isFieldValueChar(byte)) {
                    throw .bad("invalid character in trailer")
                }
            case .trailerLF(let emptyLine):
                guard input[index] == 10 else { throw .bad("bare CR in trailer") }
                index += 1
                state = emptyLine ? .done : .trailerLineStart
            }
        }
        return index
    }
}
