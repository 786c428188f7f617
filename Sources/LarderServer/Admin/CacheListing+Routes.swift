import LarderCache
import LarderConfig
import LarderHTTP

extension CacheListing {
    /// The listing of `found` (sorted, one more than `limit` when more match): keys and URLs
    /// with `log.redact_query`'s query values hidden, and so are the Vary values of credential
    /// fields (a response stored with `Vary: Cookie` or `Vary: Authorization` keeps the
    /// request's cookie or bearer token); each entry's freshness as its route serves it.
    init(_ found: [TieredCache.Listing], prefix: String, scope: KeyScope, limit: Int, runtime: RuntimeConfig) {
        let redaction = runtime.config.log.redactQuery
        self.init(
            prefix: prefix, limit: limit, truncated: found.count > limit,
            entries: found.prefix(limit).map { entry in
                let route = CacheListing.route(of: entry, routes: runtime.routes)
                let policy = route?.policy ?? runtime.config.cache.defaultPolicy
                let ttl = CacheListing.remainingFreshness(
                    of: entry, policy: policy, routeTTL: route?.ttl?.totalSeconds,
                    negativeTTL: runtime.negativeTTL)
                var listed = CacheListing.Entry(
                    key: redaction.hiding(entry.key.url),
                    vary: entry.vary.isEmpty
                        ? entry.vary
                        : entry.vary.reduce(into: [:]) { $0[$1.key] = redaction.coversField($1.key) ? QueryRedaction.marker : $1.value },
                    bytes: Int(entry.bytes),
                    tier: entry.inMemory && entry.onDisk ? "memory+disk" : entry.inMemory ? "memory" : "disk",
                    ageSeconds: entry.age.map { Int($0.rounded(.down)) }, ttlSeconds: ttl.map { Int($0.rounded(.down)) },
                    hits: entry.hits)
                listed.url = CacheListing.fetchedURL(of: entry).map(redaction.hiding)
                listed.policy = policy.rawValue
                return listed
            })
        keys = scope.patterns.map { redaction.hiding($0.text) }
        shared = scope.shared
        notCovered = scope.notCovered
    }

    /// The URL an entry was fetched from: kept with it when its route's key is not the URL,
    /// else its key (without a slice's `#slice=N`). Nil for an entry under a route key that
    /// was stored before URLs were kept with entries.
    static func fetchedURL(of entry: TieredCache.Listing) -> String? {
        if let url = entry.url { return url }
        let key = entry.key.url
        guard key.hasPrefix("http://") || key.hasPrefix("https://") else { return nil }
        return String(key.prefix { $0 != "#" })
    }

    /// The route that serves an entry: the one its URL takes now, or for an entry whose URL
    /// is not known, the first whose key template begins with the text the key begins with
    /// (`debian:`, `sha256:`).
    static func route(of entry: TieredCache.Listing, routes: RouteTable) -> Route? {
        if let text = fetchedURL(of: entry) {
            guard let url = try? AbsoluteURL(parsing: text) else { return nil }
            return routes.match(method: "GET", scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.pathAndQuery)
        }
        return routes.routes.first { route in
            guard case .literal(let literal)? = route.key?.parts.first else { return false }
            return entry.key.url.hasPrefix(literal)
        }
    }

    /// What is left of an entry's freshness as a hit is served now (its `Cache-Status` ttl,
    /// RFC 9211 §2.2): under `cache_first` a success lives for the route's ttl whatever its
    /// headers say (an immutable route's ten years), any other answer at most
    /// `cache.negative_ttl`; otherwise its HTTP freshness (RFC 9111 §4.2). Nil when its head
    /// could not be read.
    static func remainingFreshness(of entry: TieredCache.Listing, policy: CachePolicy, routeTTL: Double?, negativeTTL: Double) -> Double? {
        guard let age = entry.age, let left = entry.ttl, let status = entry.status else { return entry.ttl }
        guard CacheDecision.isSuccess(status) else { return min(left + age, negativeTTL) - age }
        if policy == .cacheFirst, let routeTTL { return routeTTL - age }
        return left
    }
}
