import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO

/// The admin calls over the cache's contents: `GET /cache?prefix=…&limit=…` lists entries,
/// `POST /ban?prefix=…` or `?glob=…` removes every match. Both walk the cache on the admin
/// thread (a listing reads disk heads; a ban of a million entries takes a while), and the
/// connection waits parked.
extension ClientConnection {
    /// Listing limit when the query names none, and the most one call lists.
    static let defaultListLimit = 100
    static let maxListLimit = 10_000

    /// What the admin thread hands back.
    enum CacheAdminResult: Sendable {
        case listing(CacheListing)
        case banned(Int, pattern: BanPattern, startNanos: UInt64)
    }

    func answerCacheListing(query: String) {
        // What daemon log lines hide (``ProxyLoop/loggable(_:)``), the listing hides.
        let redaction = proxy.runtime.config.log.redactQuery
        // Cut before any value the listing hides: otherwise the prefix is an oracle for it.
        let prefix = redaction.visiblePrefix(QueryString.value("prefix", in: query) ?? "")
        var limit = ClientConnection.defaultListLimit
        if let text = QueryString.value("limit", in: query) {
            guard let number = Int(text), number >= 1, number <= ClientConnection.maxListLimit else {
                return respondAdmin(400, text: "limit must be a number from 1 to \(ClientConnection.maxListLimit)")
            }
            limit = number
        }
        let cache = proxy.shared.cache
        let asked = limit
        offLoop {
            // One more than asked, to say whether there are more.
            let found = cache.list(prefix: prefix, limit: asked + 1, now: Clocks.wallSeconds())
            return .listing(ClientConnection.listing(found, prefix: prefix, limit: asked, redaction: redaction))
        }
    }

    /// Removes every stored response matching the ban, from both tiers, before answering (an
    /// eager ban: nothing is kept to test later lookups against, unlike Varnish's lazy bans).
    func answerBan(query: String) {
        let pattern: BanPattern
        switch (QueryString.value("prefix", in: query), QueryString.value("glob", in: query)) {
        case (let prefix?, nil) where !prefix.isEmpty:
            pattern = .prefix(prefix)
        case (nil, let glob?) where !glob.isEmpty:
            pattern = .glob(glob)
        default:
            return respondAdmin(
                400, text: "POST /ban?prefix=https://host/path/ or /ban?glob=https://host/*.whl (one of the two, URL-encoded, not empty)")
        }
        let cache = proxy.shared.cache
        let start = Clocks.monotonicNanos()
        offLoop { .banned(cache.remove(matching: { pattern.matches($0.url) }), pattern: pattern, startNanos: start) }
    }

    /// Answers with what the admin thread found.
    func cacheAdminDone(_ result: CacheAdminResult) {
        guard phase == .exchanging, exchange != nil else { return }  // the client left meanwhile
        switch result {
        case .listing(let listing):
            guard let json = try? listing.json() else { return respondAdmin(500, text: "the listing could not be encoded") }
            respondAdmin(200, contentType: "application/json", body: json)
        case .banned(let count, let pattern, let startNanos):
            proxy.shared.stats.invalidations.add(count)
            let indexComplete = proxy.shared.cache.disk?.isIndexComplete ?? true
            proxy.logger.notice(
                "banned",
                metadata: [
                    "pattern": "\(proxy.loggable(pattern.description))", "removed": "\(count)",
                    "ms": "\((Clocks.monotonicNanos() - startNanos) / 1_000_000)",
                    "client": "\(peer?.ipString ?? "-")",
                ])
            respondAdmin(
                200, contentType: "application/json",
                body: Array(
                    "{\"banned\":\(count),\"pattern\":\(JSON.string(pattern.description)),\"index_complete\":\(indexComplete)}\n".utf8))
        }
        flushSoon()
    }

    /// The listing's entries; keys with `redaction`'s query values hidden (log.redact_query),
    /// and so are the Vary values of credential fields: a response stored with
    /// `Vary: Cookie` or `Vary: Authorization` keeps the request's cookie or bearer token.
    private static func listing(_ found: [TieredCache.Listing], prefix: String, limit: Int, redaction: QueryRedaction) -> CacheListing {
        CacheListing(
            prefix: prefix, limit: limit, truncated: found.count > limit,
            entries: found.prefix(limit).map { entry in
                CacheListing.Entry(
                    key: redaction.hiding(entry.key.url),
                    vary: entry.vary.isEmpty
                        ? entry.vary
                        : entry.vary.reduce(into: [:]) { $0[$1.key] = redaction.coversField($1.key) ? QueryRedaction.marker : $1.value },
                    bytes: Int(entry.bytes),
                    tier: entry.inMemory && entry.onDisk ? "memory+disk" : entry.inMemory ? "memory" : "disk",
                    ageSeconds: entry.age.map { Int($0.rounded(.down)) }, ttlSeconds: entry.ttl.map { Int($0.rounded(.down)) },
                    hits: entry.hits)
            })
    }

    /// Runs `work` on the admin thread, then ``cacheAdminDone(_:)`` on this loop, if this
    /// connection is still open.
    private func offLoop(_ work: @escaping @Sendable () -> CacheAdminResult) {
        let token = proxy.park(self)
        let handle = proxy.loop.handle
        proxy.shared.adminWorker.submit {
            let result = work()
            handle.execute { loop in (loop.context as? ProxyLoop)?.unpark(token)?.cacheAdminDone(result) }
        }
    }
}
