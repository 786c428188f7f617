/// The admin listener's `GET /cache?prefix=…&limit=…` answer, which `larder ls` decodes with
/// this same type. JSON keys are the property names in snake case.
public struct CacheListing: Codable, Sendable, Equatable {
    public var prefix: String
    public var limit: Int
    /// More entries match than `limit`.
    public var truncated: Bool
    public var entries: [Entry]
    /// The key prefixes searched: the prefix itself, then those the routes build from a URL
    /// prefix (docs/OPERATIONS.md, "Listing, purging and warming"). Nil from an older daemon.
    public var keys: [String]? = nil
    /// The `key` templates of routes whose entries under the prefix several hosts share.
    public var shared: [String]? = nil
    /// The `key` templates of routes whose entries under the prefix cannot be found by it
    /// (keyed by a digest): list them by their whole URL or by key.
    public var notCovered: [String]? = nil

    public struct Entry: Codable, Sendable, Equatable {
        /// The cache key (the normalized URL).
        public var key: String
        /// The request header values this variant was stored for (RFC 9111 §4.1); empty without Vary.
        public var vary: [String: String]
        /// Body bytes in memory, else the entry's bytes on disk (head and body).
        public var bytes: Int
        /// `memory`, `disk` or `memory+disk`.
        public var tier: String
        /// Current age, and freshness left as a hit is served now (negative: stale), in
        /// seconds: the route's ttl under `cache_first`; nil when the head could not be read.
        public var ageSeconds: Int?
        public var ttlSeconds: Int?
        /// Lookups that found it since the daemon started.
        public var hits: Int
        /// The URL it was fetched from (nil: not known, for an entry under a route key stored
        /// by a Larder that did not keep it).
        public var url: String? = nil
        /// The policy it is served under now (its route's, else `cache.default_policy`), which
        /// `ttl_seconds` follows.
        public var policy: String? = nil
    }

    public func json() throws -> [UInt8] { try SnakeCaseJSON.encode(self) }

    public static func decode(_ bytes: [UInt8]) throws -> CacheListing { try SnakeCaseJSON.decode(CacheListing.self, from: bytes) }
}
