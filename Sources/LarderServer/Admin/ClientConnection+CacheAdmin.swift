import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO

/// The admin calls over the cache's contents: `GET /cache?prefix=…&limit=…` lists entries,
/// `POST /ban?prefix=…` or `?glob=…` removes every match, `POST /purge?url=…` or `?key=…` one
/// object and its slices. They run on the admin thread (a listing reads disk heads; a ban of a
/// million entries takes a while; a purge during the start-up scan looks for slices by
/// number), and the connection waits parked.
extension ClientConnection {
    /// What the admin thread hands back.
    enum CacheAdminResult: Sendable {
        case listing(CacheListing)
        case banned(Int, pattern: BanPattern, scope: KeyScope, startNanos: UInt64)
        case purged(PurgeSubject, found: Bool)
    }

    /// What a purge named: a URL, or a key a route built.
    enum PurgeSubject: Sendable {
        case url(String)
        case key(String)
    }

    func answerCacheListing(prefix asked: String, limit: Int) {
        // What daemon log lines hide (``ProxyLoop/loggable(_:)``), the listing hides.
        let runtime = proxy.runtime
        let redaction = runtime.config.log.redactQuery
        // Cut before any value the listing hides: otherwise the prefix is an oracle for it.
        let prefix = redaction.visiblePrefix(asked)
        let scope = KeyScope.resolve(.prefix(prefix), routes: runtime.routes)
        let cache = proxy.cache
        offLoop {
            // One more than asked, to say whether there are more.
            let found = ClientConnection.list(cache, scope: scope, limit: limit + 1, now: Clocks.wallSeconds())
            return .listing(CacheListing(found, prefix: prefix, scope: scope, limit: limit, runtime: runtime))
        }
    }

    /// What every prefix and key of `scope` lists, each variant once, sorted by key.
    private static func list(_ cache: TieredCache, scope: KeyScope, limit: Int, now: Double) -> [TieredCache.Listing] {
        var found: [TieredCache.Listing] = []
        for pattern in scope.patterns {
            let (text, exactly): (String, Bool)
            switch pattern {
            case .prefix(let prefix): (text, exactly) = (prefix, false)
            case .exact(let key): (text, exactly) = (key, true)
            case .glob: continue
            }
            for entry in cache.list(prefix: text, exactly: exactly, limit: limit, now: now)
            where !found.contains(where: { $0.key == entry.key && $0.vary == entry.vary }) {
                found.append(entry)
            }
        }
        if scope.patterns.count == 1 { return found }
        return Array(
            found.sorted {
                $0.key.url != $1.key.url ? $0.key.url < $1.key.url : $0.vary.sorted(by: <).description < $1.vary.sorted(by: <).description
            }.prefix(limit))
    }

    /// Removes every stored response matching the ban, from both tiers, before answering (an
    /// eager ban: nothing is kept to test later lookups against, unlike Varnish's lazy bans).
    func answerBan(_ requested: BanPattern) {
        let scope = KeyScope.resolve(requested, routes: proxy.runtime.routes)
        let cache = proxy.cache
        let start = Clocks.monotonicNanos()
        // A slice's key is matched as its object's URL: the slices go with the object.
        offLoop {
            .banned(cache.remove(matching: { scope.matches($0.objectURL) }), pattern: requested, scope: scope, startNanos: start)
        }
    }

    /// `POST /purge?url=…`, or `?key=…` for a key a route built (`debian:/…`, `sha256:…`,
    /// whichever URLs it serves): removes what is stored under `key`, and the slices of an
    /// object stored in slices (`cache.slice_size`), which have keys of their own and are found
    /// through each tier's table of slices. On the admin thread: while the start-up scan runs,
    /// slices it has not indexed are also looked for by number, up to as many as the current
    /// slice size cuts the largest storable object into.
    func answerPurge(_ key: CacheKey, subject: PurgeSubject, config: Config) {
        let cache = proxy.cache
        let slices = ClientConnection.purgedSlices(config)
        offLoop { .purged(subject, found: cache.purgeObject(key, slicesBelow: slices)) }
    }

    /// How many slice numbers a purge during the start-up scan looks for: as many as the
    /// current slice size cuts the largest storable object into.
    static func purgedSlices(_ config: Config) -> Int {
        let size = Int64(config.cache.sliceSize)
        return size > 0 ? Int((config.disk.maxObjectBytes + size - 1) / size) : 0
    }

    /// Answers with what the admin thread found.
    func cacheAdminDone(_ result: CacheAdminResult) {
        guard isExchanging, exchange != nil else { return }  // the client left meanwhile
        switch result {
        case .listing(let listing):
            guard let json = try? listing.json() else { return respondAdmin(500, text: "the listing could not be encoded") }
            respondAdmin(.json(json))
        case .banned(let count, let pattern, let scope, let startNanos):
            proxy.telemetry.stats[.invalidations].add(count)
            let indexComplete = proxy.cache.isIndexComplete
            proxy.logger.notice(
                "banned",
                metadata: [
                    "pattern": "\(proxy.loggable(pattern.description))", "removed": "\(count)",
                    "keys": "\(proxy.loggable(scope.patterns.map(\.text).joined(separator: ", ")))",
                    "ms": "\((Clocks.monotonicNanos() - startNanos) / 1_000_000)",
                    "client": "\(peer?.ipString ?? "-")",
                ])
            respondAdmin(
                .json(
                    Array(
                        ("{\"banned\":\(count),\"pattern\":\(JSON.string(pattern.description)),\"index_complete\":\(indexComplete),"
                            + "\"keys\":\(JSON.strings(scope.patterns.map(\.text))),\"shared\":\(JSON.strings(scope.shared)),"
                            + "\"not_covered\":\(JSON.strings(scope.notCovered))}\n").utf8)))
        case .purged(let subject, let found):
            proxy.telemetry.stats[.invalidations].add(found ? 1 : 0)
            let (name, value) =
                switch subject {
                case .url(let url): ("url", url)
                case .key(let key): ("key", key)
                }
            proxy.logger.notice("purged", metadata: [name: "\(proxy.loggable(value))", "found": "\(found)"])
            respondAdmin(.json(Array("{\"\(name)\":\(JSON.string(value)),\"purged\":\(found)}\n".utf8)))
        }
        flushSoon()
    }

    /// Runs `work` on the admin thread, then ``cacheAdminDone(_:)`` on this loop, if this
    /// connection is still open.
    private func offLoop(_ work: @escaping @Sendable () -> CacheAdminResult) {
        let token = proxy.park(self)
        let handle = proxy.loop.handle
        proxy.storage.walker.submit {
            let result = work()
            handle.execute { loop in (loop.context as? ProxyLoop)?.unpark(token)?.cacheAdminDone(result) }
        }
    }
}
