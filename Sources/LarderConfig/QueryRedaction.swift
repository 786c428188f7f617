/// The query parameters whose values never leave the request path as they came
/// (`log.redact_query`): access lines, daemon log lines and cache listings write
/// `name=REDACTED` for them. Signed URLs (S3 SigV4, CloudFront, Azure SAS, GCS) and tokens in
/// a query (RFC 6750 §2.3) grant access to whoever reads them, and logs and listings are read
/// by more people than the clients that sent them. Names are matched case-insensitively, with
/// `*` globs, after percent-decoding (`X%2DAmz%2DSignature` is the signature to the origin,
/// which decodes it).
public struct QueryRedaction: Sendable, Equatable {
    /// What a redacted value becomes.
    public static let marker = "REDACTED"

    /// The default list: storage signatures and their credentials, and the usual names of
    /// tokens, keys and secrets. Expiry times and other signed-but-public parameters stay
    /// readable, except Azure's `se`, which the issue list names.
    public static let defaultNames = [
        "X-Amz-*", "X-Goog-*", "Signature", "Key-Pair-Id", "Policy", "sig", "se", "token", "*_token", "*-token", "jwt", "key",
        "api_key", "apikey", "*secret*", "password",
    ]

    /// Request fields whose values are credentials wherever they are shown (a listing's Vary
    /// values): RFC 9110 §11.6.2, §11.7.2, RFC 6265 §5.4, and the API key header many
    /// gateways read.
    public static let credentialFields = ["authorization", "proxy-authorization", "cookie", "x-api-key"]

    /// Bytes a re-encoded nested URL keeps as they are, besides letters and digits.
    private static let keptInValues = Array("-._~:/".utf8)

    /// The names as configured.
    public let names: [String]
    /// The same, lower-cased, as bytes for ``URLPattern/glob(_:_:)``.
    private let patterns: [[UInt8]]

    public init(names: [String]) {
        self.names = names
        patterns = names.map { Array($0.lowercased().utf8) }
    }

    public static func == (lhs: QueryRedaction, rhs: QueryRedaction) -> Bool { lhs.names == rhs.names }

    /// Whether `name` (a parameter's name as written, percent-escapes and all) is one to redact.
    public func covers<Name: StringProtocol>(_ name: Name) -> Bool {
        let lowered = Array(String(decoding: Self.decoded(Array(name.utf8)), as: UTF8.self).lowercased().utf8)
        return patterns.contains { URLPattern.glob($0, lowered) }
    }

    /// Whether a request field's value must be hidden where it is shown (a listing's Vary
    /// values): the credential fields, and any field `log.redact_query` names (`X-Auth-Token`).
    public func coversField<Name: StringProtocol>(_ name: Name) -> Bool {
        Self.credentialFields.contains(name.lowercased()) || covers(name)
    }

    /// `text` (a URL or a cache key) with the value of every covered parameter after its
    /// first `?` replaced by ``marker``; nil when there is nothing to replace, so a caller
    /// that finds no `?` pays for one scan and no allocation. Parameters are separated by `&`
    /// and also by `;`, which HTML 4 (§B.2.2) asked servers to accept and some still do.
    public func redacted(_ text: String) -> String? { redacted(text, nested: true) }

    /// ``redacted(_:)``, looking into values for URLs only when `nested`: one level, so a
    /// client's `?a=?b=?b=...` costs one pass, not a recursion per `?` (which took seconds
    /// and then the stack on an access line).
    private func redacted(_ text: String, nested: Bool) -> String? {
        guard !patterns.isEmpty, let mark = text.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let utf8 = text.utf8
        // A cache key's `#slice=N` follows its query (a request's URL carries no fragment).
        let stop = utf8[mark...].firstIndex(of: UInt8(ascii: "#")) ?? utf8.endIndex
        var changed = false
        var result = String(text[...mark])
        var start = utf8.index(after: mark)
        while true {
            let end = utf8[start..<stop].firstIndex { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") } ?? stop
            let parameter = text[start..<end]
            if let equals = parameter.utf8.firstIndex(of: UInt8(ascii: "=")), utf8.index(after: equals) < end {
                if covers(parameter[..<equals]) {
                    result += parameter[...equals] + Self.marker
                    changed = true
                } else if nested, let inner = inside(parameter[utf8.index(after: equals)...]) {
                    result += parameter[...equals] + inner
                    changed = true
                } else {
                    result += parameter
                }
            } else {
                result += parameter
            }
            guard end < stop else { break }
            result += text[end...end]
            start = utf8.index(after: end)
        }
        result += text[stop...]
        return changed ? result : nil
    }

    /// A parameter's value that is itself a URL with covered parameters (the admin API's
    /// `POST /purge?url=`, `?prefix=`), redacted and percent-encoded again; nil otherwise.
    private func inside(_ value: Substring) -> String? {
        let encoded = value.utf8.contains(UInt8(ascii: "%"))
        guard encoded || value.utf8.contains(UInt8(ascii: "?")) else { return nil }
        let plain = encoded ? String(decoding: Self.decoded(Array(value.utf8)), as: UTF8.self) : String(value)
        guard let hidden = redacted(plain, nested: false) else { return nil }
        guard encoded else { return hidden }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in hidden.utf8 {
            // RFC 3986 §2.3's unreserved characters, and the ':' and '/' a URL is read by, stay.
            if (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || Self.keptInValues.contains(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` up to the first value ``redacted(_:)`` would hide (cut after its `=`), or all of
    /// it. A listing's prefix is cut so: matched against the stored keys as given, a prefix
    /// reaching into a hidden value would tell, one request per character, what the listing
    /// hides.
    public func visiblePrefix(_ text: String) -> String {
        guard !patterns.isEmpty, let mark = text.utf8.firstIndex(of: UInt8(ascii: "?")) else { return text }
        let utf8 = text.utf8
        let stop = utf8[mark...].firstIndex(of: UInt8(ascii: "#")) ?? utf8.endIndex
        var start = utf8.index(after: mark)
        while start < stop {
            let end = utf8[start..<stop].firstIndex { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") } ?? stop
            let parameter = text[start..<end]
            if let equals = parameter.utf8.firstIndex(of: UInt8(ascii: "=")), utf8.index(after: equals) < end,
                covers(parameter[..<equals]) || inside(parameter[utf8.index(after: equals)...]) != nil
            {
                return String(text[...equals])
            }
            guard end < stop else { break }
            start = utf8.index(after: end)
        }
        return text
    }

    /// `text` with ``redacted(_:)`` applied, for a log line or a listing.
    public func hiding(_ text: String) -> String { redacted(text) ?? text }

    /// `bytes` with `%XX` escapes decoded (a malformed escape stays as written).
    private static func decoded(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "%")) else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
