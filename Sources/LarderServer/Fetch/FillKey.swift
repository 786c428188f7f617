import LarderCache
import LarderIO

/// What identifies requests that may share one upstream fetch: the method, the normalized
/// URL, for `dedup = "always"` routes a hash of the request body, and for clients released from
/// a fill because their request selects another variant, that variant's request values.
struct FillKey: Hashable, Sendable {
    /// The parts, in one object: a miss copies its key about nine times (its fill, the
    /// coalescer's and the registry's tables, the lookups), and a copy is then one retain
    /// instead of three.
    private final class Parts: Sendable {
        let method: String
        let url: String
        let bodyHash: UInt64?
        let variant: [String: String]?
        /// `url.hashValue`.
        let urlHash: Int
        /// Computed once: a miss looks its key up a dozen times (this loop's fills, the
        /// registry, the not-shareable marks), and hashing the URL again each time cost ~240
        /// instructions.
        let hashValue: Int

        init(method: String, url: String, urlHash: Int, bodyHash: UInt64?, variant: [String: String]?) {
            self.method = method
            self.url = url
            self.bodyHash = bodyHash
            self.variant = variant
            self.urlHash = urlHash
            var hasher = Hasher()
            hasher.combine(method)
            hasher.combine(urlHash)
            hasher.combine(bodyHash)
            hasher.combine(variant)
            hashValue = hasher.finalize()
        }
    }

    private let parts: Parts
    var method: String { parts.method }
    var url: String { parts.url }
    var bodyHash: UInt64? { parts.bodyHash }
    var variant: [String: String]? { parts.variant }

    /// The URL is hashed by its `hashValue` (the seeded hasher's, so hash flooding stays as
    /// hard as it was), or `urlHash` when that is already known.
    init(method: String, url: String, urlHash: Int? = nil, bodyHash: UInt64?, variant: [String: String]? = nil) {
        parts = Parts(method: method, url: url, urlHash: urlHash ?? url.hashValue, bodyHash: bodyHash, variant: variant)
    }

    /// The key for `method` on `key`'s URL, whose hash the cache key has already computed.
    init(method: String, key: CacheKey, bodyHash: UInt64?) {
        self.init(method: method, url: key.url, urlHash: key.urlHashValue, bodyHash: bodyHash)
    }

    /// The same key for one variant of a response that varies (RFC 9111 §4.1).
    func with(variant: [String: String]) -> FillKey {
        FillKey(method: method, url: url, urlHash: parts.urlHash, bodyHash: bodyHash, variant: variant)
    }

    /// The same key for the clients of one origin only (a key several hosts share, such as a
    /// digest: each host's answer is that host's alone until it is checked). A space never
    /// occurs in a URL, so the two parts cannot run into each other.
    func on(origin: String) -> FillKey {
        FillKey(method: method, url: url + " " + origin, bodyHash: bodyHash, variant: variant)
    }

    static func == (left: FillKey, right: FillKey) -> Bool {
        let (left, right) = (left.parts, right.parts)
        return left === right
            || (left.hashValue == right.hashValue && left.url == right.url && left.method == right.method
                && left.bodyHash == right.bodyHash && left.variant == right.variant)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(parts.hashValue)
    }
}
