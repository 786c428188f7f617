import LarderIO

/// How many fills each client (an address) has in flight to each origin on one loop, so that
/// no client holds more than half of `upstream.max_connections_per_host`. libcurl queues a loop's
/// transfers to an origin behind that many connections, and a transfer whose client reads
/// slowly, or not at all, keeps its connection for as long as the client keeps up the pace
/// (its transfer is paused while the client's buffer is full); a client with every
/// connection to an origin its own made every other client's misses to it wait, or time out.
/// A request that would take a client past its share waits here, not in libcurl's queue,
/// until one of that client's own fills to the origin ends (or `upstream.timeout` passes: 504).
/// A client with several addresses has a share for each. Loop-confined.
struct UpstreamShares {
    /// One client's fills to one origin (or to the parent proxy they go through: libcurl's
    /// limit counts connections to the host it connects to).
    struct Key: Hashable {
        /// The client's address: IPv4 in `low`, IPv6 in both (every host of a LAN shares its
        /// /64, so nothing shorter than the whole address tells them apart).
        let high: UInt64
        let low: UInt64
        /// The host and port connected to, hashed once: the key is hashed on every fill's
        /// start and end, and a string in it cost most of a thousand instructions a miss.
        let target: Int

        init(client: (high: UInt64, low: UInt64), host: String, port: Int) {
            high = client.high
            low = client.low
            var hasher = Hasher()
            hasher.combine(host)
            hasher.combine(port)
            target = hasher.finalize()
        }
    }

    private var held: [Key: Int] = [:]
    /// Fills counted, all clients and origins: below a limit, no client can be at it, and a
    /// miss asks nothing more.
    private var total = 0
    /// Requests waiting for their client's share, oldest first: each says whether it went on
    /// (false: its client left meanwhile).
    private var waiting: [Key: [() -> Bool]] = [:]

    /// The most fills one client may have in flight to one origin on a loop, of `perHost`
    /// connections (`upstream.max_connections_per_host`).
    static func limit(perHost: Int) -> Int { max(1, perHost / 2) }

    /// The client part of a key for a connection from `peer` (nil: no address, no limit). An
    /// IPv4 client on a dual-stack socket (::ffff:a.b.c.d) is that IPv4 client; an IPv4 one
    /// has the bits of ::ffff:0:0/96 above its address, as an IPv6 one never has.
    static func client(_ peer: SocketAddress?) -> (high: UInt64, low: UInt64)? {
        guard let bytes = peer?.ipBytes else { return nil }
        func word(_ part: ArraySlice<UInt8>) -> UInt64 { part.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        if bytes.count == 4 { return (0, 0xffff_0000_0000 | word(bytes[...])) }
        return (word(bytes[0..<8]), word(bytes[8..<16]))
    }

    /// Whether the client has its share (`limit`) of fills to the origin in flight.
    func isAtLimit(_ key: Key, limit: Int) -> Bool {
        total >= limit && held[key, default: 0] >= limit
    }

    /// Whether a probe for some client could find it at `limit` (a check without hashing).
    func mayBeAtLimit(_ limit: Int) -> Bool { total >= limit }

    /// Counts a fill for `key` (its transfer holds one of the origin's connections).
    mutating func take(_ key: Key) {
        held[key, default: 0] += 1
        total += 1
    }

    /// Parks `resume` until one of `key`'s fills ends.
    mutating func wait(_ key: Key, resume: @escaping () -> Bool) { waiting[key, default: []].append(resume) }

    /// Forgets a fill counted by ``take(_:)``; whether requests wait for the share (the caller
    /// then runs them, ``nextWaiting(_:)``, outside its own transfer's end).
    mutating func give(_ key: Key) -> Bool {
        if let index = held.index(forKey: key) {
            if held.values[index] <= 1 { held.remove(at: index) } else { held.values[index] -= 1 }
            total -= 1
        }
        return !waiting.isEmpty && waiting[key] != nil
    }

    /// The oldest request waiting for `key`'s share, taken off the list: run, it takes the
    /// share, attaches to a fill in flight, waits again (at the back) if the share was taken
    /// meanwhile, or (false) finds its client gone.
    mutating func nextWaiting(_ key: Key) -> (() -> Bool)? {
        guard let index = waiting.index(forKey: key) else { return nil }
        let next = waiting.values[index].removeFirst()
        if waiting.values[index].isEmpty { waiting.remove(at: index) }
        return next
    }

    /// Fills in flight counted for `key`.
    func count(_ key: Key) -> Int { held[key, default: 0] }

    /// Fills in flight to the origin `target` (``Key/target``), every client's: more than its
    /// `upstream.max_connections_per_host` and the rest wait in libcurl's queue. Counted when
    /// asked, over the clients' counts (at most one per fill in flight), so that a miss pays
    /// nothing for it: asked only while transfers to the origin are paused for their clients.
    func inFlight(target: Int) -> Int {
        var count = 0
        for (key, fills) in held where key.target == target { count += fills }
        return count
    }

    /// The shares requests wait for.
    var waitingKeys: [Key] { Array(waiting.keys) }

    /// Requests waiting for `key`'s share.
    func waiters(_ key: Key) -> Int { waiting[key]?.count ?? 0 }
}
