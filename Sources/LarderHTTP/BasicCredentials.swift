/// The user and password of a `Basic` authorization (RFC 7617), as sent in
/// `Proxy-Authorization` (RFC 9110 §11.7.1).
public struct BasicCredentials: Sendable, Equatable {
    public let user: String
    public let password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// Parses `Basic <token68>`. Returns nil for another scheme, bad base64, a missing colon,
    /// or control characters in the user name: each is an authentication failure, never a
    /// crash or a partial match.
    public init?(header value: String) {
        let bytes = Array(value.utf8)
        // auth-scheme is case-insensitive (RFC 9110 §11.1), then 1*SP, then token68.
        guard bytes.count > 6, ASCII.equalsIgnoringCase(String(decoding: bytes[0..<5], as: UTF8.self), "basic"),
            bytes[5] == 0x20
        else { return nil }
        var start = 5
        while start < bytes.count, bytes[start] == 0x20 { start += 1 }
        var end = bytes.count
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        guard start < end, let decoded = BasicCredentials.decodeBase64(bytes[start..<end]) else { return nil }
        // RFC 7617 §2: user-id and password split at the first colon; the user-id has no
        // control characters. The charset is UTF-8 (we announce charset="UTF-8").
        guard let colon = decoded.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let userBytes = decoded[..<colon]
        guard !userBytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        guard let user = String(validating: userBytes, as: UTF8.self),
            let password = String(validating: decoded[(colon + 1)...], as: UTF8.self)
        else { return nil }
        self.init(user: user, password: password)
    }

    /// `Basic <base64(user:password)>`, for clients.
    public var headerValue: String {
        "Basic " + BasicCredentials.encodeBase64(Array("\(user):\(password)".utf8))
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Strict base64 (RFC 4648 §4): padding required to a multiple of four, no stray characters,
    /// unused bits zero.
    static func decodeBase64(_ input: ArraySlice<UInt8>) -> [UInt8]? {
        guard input.count % 4 == 0, input.count <= 16 * 1024 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count / 4 * 3)
        var index = input.startIndex
        while index < input.endIndex {
            let isLast = index + 4 == input.endIndex
            var values: [UInt32] = []
            var padding = 0
            for offset in 0..<4 {
                let byte = input[index + offset]
                if byte == UInt8(ascii: "=") {
                    // Padding only at the end of the last quad, and at most two.
                    guard isLast, offset >= 2 else { return nil }
                    padding += 1
                    continue
                }
                guard padding == 0, let value = sextet(byte) else { return nil }
                values.append(value)
            }
            var group: UInt32 = 0
            for value in values { group = group << 6 | value }
            group <<= UInt32(6 * padding)
            let produced = 3 - padding
            // Non-canonical encodings (set bits in the padding) are refused.
            if padding > 0, group & ((1 << (8 * UInt32(padding))) - 1) != 0 { return nil }
            for shift in stride(from: 16, through: 16 - 8 * (produced - 1), by: -8) {
                output.append(UInt8(truncatingIfNeeded: group >> UInt32(shift)))
            }
            index += 4
        }
        return output
    }

    private static func sextet(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(byte - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(byte - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }

    static func encodeBase64(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let remaining = min(3, bytes.count - index)
            var group: UInt32 = 0
            for offset in 0..<3 { group = group << 8 | (offset < remaining ? UInt32(bytes[index + offset]) : 0) }
            for position in 0..<4 {
                if position <= remaining {
                    output.append(alphabet[Int(group >> UInt32(18 - 6 * position) & 63)])
                } else {
                    output.append(UInt8(ascii: "="))
                }
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
