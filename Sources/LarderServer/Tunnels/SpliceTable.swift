import LarderIO

/// Which clients are tunnelled blind ("spliced") to which intercepted hosts: a ``SpliceStage``
/// per (client address, host) pair, so a client that keeps refusing Larder's certificate for
/// a host stops being intercepted for that host, and no other client is affected.
///
/// Only refusals make an entry (a success with none to clear needs none), and an entry is
/// dropped as soon as its stage is back to the start, so the table holds the clients now
/// failing or spliced.
///
/// Bounded, and so that one client cannot push out another's state: one client address holds
/// at most `addressCapacity` pairs, making room among its own, so a client refusing
/// certificates for many names under a wildcard entry only ever evicts its own pairs, never
/// another's count or splice (which would keep a pinning client from ever reaching its splice,
/// or end it early). Past `capacity` pairs in all, the *prefix* holding the most makes room
/// (an IPv4 address, or an IPv6 /64, whose addresses one host may use at will, RFC 6177), and
/// in it the address holding the most: a client spreading refusals over many addresses of its
/// /64 pushes out pairs of that /64 only (a LAN's clients share one), and no IPv4 client's.
/// Either way the pair changed longest ago goes, one not spliced first.
///
/// Pure: every call takes the clock (monotonic nanoseconds) as a parameter.
struct SpliceTable: Sendable {
    /// A client address (no port: a client opens each connection from a new one) and a host.
    struct Pair: Hashable, Sendable {
        let client: String
        let host: String
    }

    struct Entry: Sendable, Equatable {
        var stage = SpliceStage.initial
        /// Refusals counted for this pair since its entry was made.
        var failures = 0
        /// The last refusal: its outcome and reason (the client's alert).
        var lastFailure = ""
        /// When the entry last changed.
        var changedAt: UInt64 = 0
        /// The client's prefix (see ``SpliceTable``): what a full table makes room by.
        var prefix = ""

        /// When the splice runs out, if the pair is spliced at `now`.
        func splicedUntil(now: UInt64) -> UInt64? {
            if case .spliced(let until) = stage, until > now { until } else { nil }
        }
    }

    private(set) var entries: [Pair: Entry] = [:]
    /// How many entries each client address holds, and its prefix (no address with none).
    private(set) var entriesByAddress: [String: (prefix: String, count: Int)] = [:]
    /// How many entries each prefix holds (no prefix with none).
    private(set) var entriesByPrefix: [String: Int] = [:]
    let capacity: Int
    let addressCapacity: Int

    init(capacity: Int, addressCapacity: Int = 64) {
        self.capacity = max(1, capacity)
        self.addressCapacity = max(1, min(addressCapacity, capacity))
    }

    /// The prefix a client address counts under: an IPv6 address's /64, else the address (an
    /// IPv4-mapped address is its IPv4 address, not one of all of them in `::ffff:0:0/96`).
    static func prefix(of client: String) -> String {
        guard client.contains(":"), let bytes = SocketAddress.parseIPv6(client) else { return client }
        let address = SocketAddress(ipBytes: bytes, port: 0).unmapped
        guard address.family == .ipv6 else { return address.ipString }
        return SocketAddress(ipBytes: Array(bytes[0..<8]) + Array(repeating: 0, count: 8), port: 0).ipString + "/64"
    }

    /// Whether a CONNECT from `client` to `host` at `now` is decrypted rather than spliced (a
    /// splice that has run out is dropped: the pair starts over).
    mutating func admits(client: String, host: String, now: UInt64) -> Bool {
        let pair = Pair(client: client, host: host)
        guard let entry = entries[pair] else { return true }
        let (intercept, next) = entry.stage.admitting(now: now)
        if next == .initial { remove(pair) }
        return intercept
    }

    /// Records a handshake of `client` with `host`: `refusal` nil for a success (it clears the
    /// pair's count), else the refusal's description. Returns whether it started a splice.
    mutating func record(
        client: String, host: String, refusal: String?, threshold: Int, spliceFor: UInt64, now: UInt64
    ) -> Bool {
        let pair = Pair(client: client, host: host)
        guard var entry = entries[pair] else {
            guard let refusal else { return false }
            let prefix = entriesByAddress[client]?.prefix ?? Self.prefix(of: client)
            if entriesByAddress[client]?.count ?? 0 >= addressCapacity {
                makeRoom(now: now) { pair, _ in pair.client == client }
            } else if entries.count >= capacity {
                makeRoomInTheFullestPrefix(now: now)
            }
            let stage = SpliceStage.initial.after(handshakeSucceeded: false, threshold: threshold, spliceFor: spliceFor, now: now)
            entries[pair] = Entry(stage: stage, failures: 1, lastFailure: refusal, changedAt: now, prefix: prefix)
            entriesByAddress[client, default: (prefix, 0)].count += 1
            entriesByPrefix[prefix, default: 0] += 1
            if case .spliced = stage { return true }
            return false
        }
        let before = entry.stage
        entry.stage = before.after(handshakeSucceeded: refusal == nil, threshold: threshold, spliceFor: spliceFor, now: now)
        if entry.stage == .initial {
            remove(pair)
            return false
        }
        if let refusal {
            entry.failures += 1
            entry.lastFailure = refusal
            entry.changedAt = now
        }
        entries[pair] = entry
        if case .spliced = entry.stage, case .intercepting = before { return true }
        return false
    }

    /// Ends the splices (and clears the counts) of `host`, of one client when `client` is
    /// given; how many entries went.
    mutating func clear(host: String, client: String?) -> Int {
        let doomed = entries.keys.filter { $0.host == host && (client == nil || $0.client == client) }
        for pair in doomed { remove(pair) }
        return doomed.count
    }

    /// The pairs spliced at `now`, the latest to run out first.
    func spliced(now: UInt64) -> [(pair: Pair, entry: Entry, until: UInt64)] {
        entries.compactMap { pair, entry in entry.splicedUntil(now: now).map { (pair, entry, $0) } }
            .sorted { ($0.until, $0.pair.host, $0.pair.client) > ($1.until, $1.pair.host, $1.pair.client) }
    }

    /// The hosts with a splice at `now`, and how many clients each.
    func splicedHosts(now: UInt64) -> [String: Int] {
        var hosts: [String: Int] = [:]
        for (pair, entry) in entries where entry.splicedUntil(now: now) != nil { hosts[pair.host, default: 0] += 1 }
        return hosts
    }

    private mutating func remove(_ pair: Pair) {
        guard let entry = entries.removeValue(forKey: pair) else { return }
        if let held = entriesByAddress[pair.client], held.count > 1 {
            entriesByAddress[pair.client] = (held.prefix, held.count - 1)
        } else {
            entriesByAddress[pair.client] = nil
        }
        let left = entriesByPrefix[entry.prefix, default: 1] - 1
        entriesByPrefix[entry.prefix] = left > 0 ? left : nil
    }

    /// A full table makes room in the prefix holding the most pairs, and in it the address
    /// holding the most (one address, or many spoofed in one /64, pays for its own flood); the
    /// oldest pair of all when every prefix holds one.
    private mutating func makeRoomInTheFullestPrefix(now: UInt64) {
        guard let fullest = entriesByPrefix.max(by: { $0.value < $1.value }), fullest.value > 1 else {
            return makeRoom(now: now) { _, _ in true }
        }
        var address: (key: String, count: Int)?
        for (key, held) in entriesByAddress where held.prefix == fullest.key && held.count > (address?.count ?? 0) {
            address = (key, held.count)
        }
        if let address, address.count > 1 {
            makeRoom(now: now) { pair, _ in pair.client == address.key }
        } else {
            makeRoom(now: now) { _, entry in entry.prefix == fullest.key }
        }
    }

    /// Drops, of the pairs `among` picks, the one changed longest ago, preferring one not
    /// spliced: one pass, no copy, no lookup per entry (this runs under the lock for each new
    /// pair once the table is full).
    private mutating func makeRoom(now: UInt64, among: (Pair, Entry) -> Bool) {
        var oldest: (pair: Pair, spliced: Bool, changedAt: UInt64)?
        for (pair, entry) in entries where among(pair, entry) {
            let spliced = entry.splicedUntil(now: now) != nil
            if let current = oldest, (current.spliced ? 1 : 0, current.changedAt) <= (spliced ? 1 : 0, entry.changedAt) { continue }
            oldest = (pair, spliced, entry.changedAt)
        }
        if let oldest { remove(oldest.pair) }
    }
}
