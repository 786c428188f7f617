import LarderHTTP

/// The primary cache key (RFC 9111 §2): the target URI, normalized so equivalent spellings share
/// an entry — lower-case scheme and host, default port dropped, percent-escapes upper-cased
/// (RFC 3986 §6.2.2). The method is not part of it: GET and HEAD share stored responses.
public struct CacheKey: Hashable, Sendable, CustomStringConvertible {
    /// `scheme://authority/path?query`.
    public let url: String
    /// `url`'s hash, computed once: a request looks its key up in several tables (coalescer,
    /// memory tier, disk index), and would otherwise hash the whole URL for each.
    /// From Swift's per-process seeded hasher, so hash flooding stays as hard as it was.
    private let urlHash: Int
    /// `url.hashValue`, as computed when the key was made: a table keyed by the URL and more
    /// (the coalescer's) combines it instead of hashing the URL again.
    public var urlHashValue: Int { urlHash }

    public init(_ url: AbsoluteURL) {
        let path = url.pathAndQuery
        if ASCII.contains(UInt8(ascii: "%"), in: path) {
            self.init(normalized: url.withPath(CacheKey.normalizePercentEscapes(path)))
        } else {
            self.init(normalized: url.description)
        }
    }

    /// A key from an already normalized URL string (for example read back from disk).
    public init(normalized url: String) {
        self.url = url
        urlHash = url.hashValue
    }

    public static func == (left: CacheKey, right: CacheKey) -> Bool {
        left.urlHash == right.urlHash && left.url == right.url
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(urlHash)
    }

    public var description: String { url }

    /// `scheme://authority` of a normalized URL (the origin, RFC 6454), for same-origin checks.
    public static func origin(of url: String) -> String {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return url }
        let rest = url[url.index(colon, offsetBy: 3)...]
        let end = rest.firstIndex(of: "/") ?? rest.endIndex
        return String(url[..<end])
    }

    /// `text` with its percent-escapes' hex digits upper-cased (RFC 3986 §6.2.2.1), as keys keep them.
    public static func normalizePercentEscapes(_ text: String) -> String {
        var bytes = Array(text.utf8)
        var index = 0
        while index + 2 < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                for offset in 1...2 where bytes[index + offset] >= UInt8(ascii: "a") && bytes[index + offset] <= UInt8(ascii: "f") {
                    bytes[index + offset] -= 32
                }
                index += 3
            } else {
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension CacheKey: ShardedKey {
    /// The URL's hash, seeded per process, already computed: the shard's table hashes that
    /// word again, so its buckets do not follow these bits.
    var shardBits: UInt { UInt(bitPattern: urlHashValue) }
}
