/// The admin listener's `GET /cache?prefix=…&limit=…` answer, which `larder ls` decodes with
/// this same type. JSON keys are the property names in snake case.
public struct CacheListing: Codable, Sendable, Equatable {
    public var prefix: String
    public var limit: Int
    /// More entries match than `limit`.
    public var truncated: Bool
    public var entries: [Entry]

    public struct Entry: Codable, Sendable, Equatable {
        /// The cache key (the normalized URL).
        public var key: String
        /// The request header values this variant was stored for (RFC 9111 §4.1); empty without Vary.
        public var vary: [String: String]
        /// Body bytes in memory, else the entry's bytes on disk (head and body).
        public var bytes: Int
        /// `memory`, `disk` or `memory+disk`.
        public var tier: String
        /// Current age and remaining freshness in seconds (negative: stale); nil when the head
        /// could not be read.
        public var ageSeconds: Int?
        public var ttlSeconds: Int?
        /// Lookups that found it since the daemon started.
        public var hits: Int
    }

    public func json() throws -> [UInt8] { try SnakeCaseJSON.encode(self) }

    public static func decode(_ bytes: [UInt8]) throws -> CacheListing { try SnakeCaseJSON.decode(CacheListing.self, from: bytes) }
}
