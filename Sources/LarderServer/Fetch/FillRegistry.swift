import LarderIO

/// Which event loop is fetching each key, so that with several loops a request for a key that
/// another loop is fetching moves there (its connection and all) and joins that fill: one
/// upstream fetch per key for the whole process, as with a single loop.
///
/// State: shared by the loops; both tables are guarded by their mutexes. `loops` is written
/// once when the server starts. With one loop the registry is never consulted.
final class FillRegistry: Sendable {
    private let owners = Locked<[FillKey: Int]>([:])
    private let loops = Locked<[EventLoopHandle]>([])

    /// Sets the loops requests may move between (once, at start).
    func setLoops(_ handles: [EventLoopHandle]) {
        loops.withLock { $0 = handles }
    }

    /// How many loops serve.
    var loopCount: Int { loops.withLock { $0.count } }
    /// Whether there is more than one loop to coordinate.
    var isActive: Bool { loopCount > 1 }

    /// Records that loop `index` fetches `key`, unless another loop already does: then returns
    /// that loop. One step, so two loops cannot both find the key free and both fetch it.
    @discardableResult
    func claim(_ key: FillKey, loop index: Int) -> EventLoopHandle? {
        let owner = owners.withLock { table in
            if let owner = table[key] { return owner }
            table[key] = index
            return index
        }
        guard owner != index else { return nil }
        return loops.withLock { owner < $0.count ? $0[owner] : nil }
    }

    /// The loop fetching `key`, when it is not loop `index` (nothing is claimed).
    func owner(of key: FillKey, besides index: Int) -> EventLoopHandle? {
        guard let owner = owners.withLock({ $0[key] }), owner != index else { return nil }
        return loops.withLock { owner < $0.count ? $0[owner] : nil }
    }

    /// Forgets that loop `index` fetches `key` (its fill ended).
    func release(_ key: FillKey, loop index: Int) {
        owners.withLock { table in
            if table[key] == index { table.removeValue(forKey: key) }
        }
    }

}
