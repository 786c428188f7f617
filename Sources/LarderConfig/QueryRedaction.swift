/// The query parameters whose values never leave the request path as they came
/// (`log.redact_query`): access lines and cache listings write `name=REDACTED` for them.
/// Signed URLs (S3 SigV4, CloudFront, Azure SAS, GCS) and tokens in a query (RFC 6750 §2.3)
/// grant access to whoever reads them, and logs and listings are read by more people than
/// the clients that sent them. Names are matched case-insensitively, with `*` globs.
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

    /// The names as configured.
    public let names: [String]
    /// The same, lower-cased, as bytes for ``URLPattern/glob(_:_:)``.
    private let patterns: [[UInt8]]

    public init(names: [String]) {
        self.names = names
        patterns = names.map { Array($0.lowercased().utf8) }
    }

    public static func == (lhs: QueryRedaction, rhs: QueryRedaction) -> Bool { lhs.names == rhs.names }

    /// Whether `name` (a parameter's name as written) is one to redact.
    public func covers<Name: StringProtocol>(_ name: Name) -> Bool {
        let lowered = Array(name.lowercased().utf8)
        return patterns.contains { URLPattern.glob($0, lowered) }
    }

    /// `text` (a URL or a cache key) with the value of every covered parameter after its
    /// first `?` replaced by ``marker``; nil when there is nothing to replace, so a caller
    /// that finds no `?` pays for one scan and no allocation.
    public func redacted(_ text: String) -> String? {
        guard !patterns.isEmpty, let mark = text.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let query = text[text.index(after: mark)...]
        var changed = false
        var parts: [Substring] = []
        for parameter in query.split(separator: "&", omittingEmptySubsequences: false) {
            if let equals = parameter.firstIndex(of: "="), parameter.index(after: equals) < parameter.endIndex,
                covers(parameter[..<equals])
            {
                parts.append(Substring(parameter[...equals] + Self.marker))
                changed = true
            } else {
                parts.append(parameter)
            }
        }
        guard changed else { return nil }
        return String(text[...mark]) + parts.joined(separator: "&")
    }
}
