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
        /// Computed once: a miss looks its key up a dozen times (this loop's fills, the
        /// registry, the not-shareable marks), and hashing the URL again each time cost ~240
        /// instructions.
        let hashValue: Int

        init(method: String, url: String, bodyHash: UInt64?, variant: [String: String]?) {
            self.method = method
            self.url = url
            self.bodyHash = bodyHash
            self.variant = variant
            var hasher = Hasher()
            hasher.combine(method)
            hasher.combine(url)
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

    init(method: String, url: String, bodyHash: UInt64?, variant: [String: String]? = nil) {
        parts = Parts(method: method, url: url, bodyHash: bodyHash, variant: variant)
    }

    /// The same key for one variant of a response that varies (RFC 9111 §4.1).
    func with(variant: [String: String]) -> FillKey {
        FillKey(method: method, url: url, bodyHash: bodyHash, variant: variant)
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

/// The fills in flight on one event loop, by key, so that a request for something already
/// being fetched attaches to it instead of going upstream again; and the keys recently seen
/// to carry responses that may not be shared, which are fetched without coalescing for a while
/// (so a burst does not queue behind a response it cannot use — Varnish's hit-for-pass).
///
/// State: loop-confined. Each loop has its own coalescer; with several loops, `registry`
/// says which loop fetches a key, and a request for it moves to that loop
/// (``ClientConnection/moveToFill(on:exchange:)``).
final class Coalescer {
    private var fills: [FillKey: Fill] = [:]
    private var notShareableUntil: [FillKey: UInt64] = [:]
    private let loop: EventLoop
    /// nil with a single loop.
    private let registry: FillRegistry?

    init(loop: EventLoop, registry: FillRegistry?) {
        self.loop = loop
        self.registry = registry
    }

    /// The loop already fetching `key`, when that is another loop; otherwise this loop now
    /// counts as fetching it (the caller starts the fill).
    func claimOrFindOtherLoop(_ key: FillKey) -> EventLoopHandle? {
        registry?.claim(key, loop: loop.handle.index)
    }

    /// Whether some loop, this one or another, is fetching `key` (nothing is claimed).
    func isFetched(_ key: FillKey) -> Bool {
        fills[key] != nil || registry?.owner(of: key, besides: loop.handle.index) != nil
    }

    var count: Int { fills.count }

    /// The fill in flight for `key`.
    func fill(for key: FillKey) -> Fill? { fills[key] }

    /// Whether `key` is in its not-shareable period.
    func isNotShareable(_ key: FillKey) -> Bool {
        guard let until = notShareableUntil[key] else { return false }
        if loop.now < until { return true }
        notShareableUntil.removeValue(forKey: key)
        return false
    }

    /// Makes `fill` the one requests for its key attach to; with several loops the key was
    /// claimed first (``claimOrFindOtherLoop(_:)``).
    func register(_ fill: Fill) {
        guard let key = fill.coalesceKey else { return }
        fills[key] = fill
    }

    /// Forgets `fill` (finished, failed or cancelled) if it is the one registered.
    func remove(_ fill: Fill) {
        guard let key = fill.coalesceKey, fills[key] === fill else { return }
        fills.removeValue(forKey: key)
        registry?.release(key, loop: loop.handle.index)
    }

    /// Forgets `fill` and fetches its key without coalescing for `ttl`.
    func markNotShareable(_ fill: Fill, ttl: UInt64) {
        remove(fill)
        guard let key = fill.coalesceKey, ttl > 0 else { return }
        notShareableUntil[key] = loop.now &+ ttl
    }

    /// Drops expired not-shareable marks (called from the loop's periodic sweep).
    func sweep() {
        guard !notShareableUntil.isEmpty else { return }
        let now = loop.now
        notShareableUntil = notShareableUntil.filter { $0.value > now }
    }
}
