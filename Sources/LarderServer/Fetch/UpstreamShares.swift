import LarderIO

/// How many fills each client has in flight to each origin on one loop, so that no client
/// holds more than half of `upstream.max_connections_per_host`. libcurl queues a loop's
/// transfers to an origin behind that many connections, and a transfer whose client reads
/// slowly, or not at all, keeps its connection for as long as the client keeps up the pace
/// (its transfer is paused while the client's buffer is full); a client with every
/// connection to an origin its own made every other client's misses to it wait, or time out.
/// A request that would take a client past its share waits here, not in libcurl's queue,
/// until one of that client's own fills to the origin ends. Loop-confined.
struct UpstreamShares {
    /// One client's fills to one origin.
    struct Key: Hashable {
        /// The client: an IPv4 address whole, an IPv6 address by its /64 (one host's privacy
        /// addresses are one client).
        let client: UInt64
        let isIPv6: Bool
        let host: String
        let port: Int
    }

    private var held: [Key: Int] = [:]
    /// Requests waiting for their client's share, oldest first: each says whether it went on
    /// (false: its client left meanwhile).
    private var waiting: [Key: [() -> Bool]] = [:]

    /// The most fills one client may have in flight to one origin on a loop, of `perHost`
    /// connections (`upstream.max_connections_per_host`).
    static func limit(perHost: Int) -> Int { max(1, perHost / 2) }

    /// The client part of a key for a connection from `peer` (nil: no address, no limit).
    static func client(_ peer: SocketAddress?) -> (client: UInt64, isIPv6: Bool)? {
        guard let bytes = peer?.ipBytes else { return nil }
        // An IPv4 client on a dual-stack socket (::ffff:a.b.c.d) is that IPv4 client.
        let isMapped = bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        let significant = bytes.count == 4 ? bytes[...] : isMapped ? bytes[12..<16] : bytes[0..<8]
        let value = significant.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return (value, bytes.count == 16 && !isMapped)
    }

    /// Whether the client has its share (`limit`) of fills to the origin in flight.
    func isAtLimit(_ key: Key, limit: Int) -> Bool {
        !held.isEmpty && held[key, default: 0] >= limit
    }

    /// Counts a fill for `key` (its transfer holds one of the origin's connections).
    mutating func take(_ key: Key) { held[key, default: 0] += 1 }

    /// Parks `resume` until one of `key`'s fills ends.
    mutating func wait(_ key: Key, resume: @escaping () -> Bool) { waiting[key, default: []].append(resume) }

    /// Forgets a fill counted by ``take(_:)``; whether requests wait for the share (the caller
    /// then runs them, ``nextWaiting(_:)``, outside its own transfer's end).
    mutating func give(_ key: Key) -> Bool {
        if let index = held.index(forKey: key) {
            if held.values[index] <= 1 { held.remove(at: index) } else { held.values[index] -= 1 }
        }
        return waiting[key] != nil
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

    /// Whether no fill is counted at all (a miss then skips the probe).
    var isEmpty: Bool { held.isEmpty }

    /// Fills in flight counted for `key`.
    func count(_ key: Key) -> Int { held[key, default: 0] }

    /// Requests waiting for `key`'s share.
    func waiters(_ key: Key) -> Int { waiting[key]?.count ?? 0 }
}
