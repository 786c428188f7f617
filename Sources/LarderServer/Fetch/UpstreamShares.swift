import LarderIO

/// How many fills each client (an address) has in flight to each origin on one loop, and the
/// requests waiting for one of the origin's connections, served fairly.
///
/// libcurl holds a loop's transfers to an origin to `upstream.max_connections_per_host`
/// connections and queues the rest first come, first served; a transfer whose client reads
/// slowly, or not at all, keeps its connection (it is paused while the client's buffer is
/// full). So a client with many connections had every connection to an origin, and then the
/// head of the queue behind them: each connection freed went to its next request. Here a
/// request waits, not in libcurl's queue, when its client has its share (half the connections)
/// in flight, or when every connection is taken; a connection freed goes to the waiting
/// request whose client holds the fewest fills to the origin, the oldest of those (a client
/// with many addresses gets no further ahead than one per address). Transfers that only wait
/// for their clients give their connections up to waiting requests (``HeldTransfers``). A
/// request waits for `upstream.timeout` at most (then 504). Loop-confined.
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

        /// The client's address as a log names it (`192.0.2.7`, `2001:db8::7`).
        var clientAddress: String {
            func bytes(_ word: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: word >> (56 - 8 * $0)) } }
            let all = bytes(high) + bytes(low)
            let mapped = high == 0 && low >> 32 == 0xffff
            return SocketAddress(ipBytes: mapped ? Array(all[12...]) : all, port: 0).ipString
        }
    }

    private var held: [Key: Int] = [:]
    /// Fills counted for each origin (``Key/target``), every client's.
    private var toTarget: [Int: Int] = [:]
    /// Fills counted, all clients and origins: below a limit, no client or origin can be at
    /// it, and a miss asks nothing more.
    private var total = 0
    /// A request waiting for a connection to its origin: `resume` says whether it went on
    /// (false: its client left meanwhile); `timeOut` answers it once it waited until `until`.
    struct Waiter {
        /// Its place in the order of waits (``wait(_:now:until:resume:timeOut:)``'s answer, for
        /// ``cancelWait(_:id:)``).
        let id: UInt64
        /// When it began to wait, and when it stops (the loop's clock, nanoseconds).
        let since: UInt64
        let until: UInt64
        let resume: () -> Bool
        let timeOut: () -> Void
    }
    /// Requests waiting, by origin, then by client, each client's oldest first: a choice walks
    /// the clients waiting, and a request that leaves is taken off at once, so neither grows
    /// with requests that are gone or that their client's share holds back.
    private var waiting: [Int: [Key: [Waiter]]] = [:]
    private var lastID: UInt64 = 0
    /// Origins given a connection back while requests waited for them, until the loop's next
    /// pass lets those go on (``handedOver(target:)``): a request arriving meanwhile waits
    /// behind them, so that a connection freed (or cut) for a waiting request is not taken by
    /// one that did not wait.
    private var handingOver: Set<Int> = []

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

    /// Why a request for `key` must wait, or nil: its client has its `share` in flight to the
    /// origin, or all `perHost` connections to the origin are taken.
    /// A connection given back while others waited is theirs first (``handingOver``), as long
    /// as the waiters the pass may let go on would take every free one.
    func mustWait(_ key: Key, share: Int, perHost: Int) -> Wait? {
        if !handingOver.isEmpty, handingOver.contains(key.target), waiting[key.target] != nil {
            if held[key, default: 0] >= share { return .clientShare }
            if eligibleWaiters(target: key.target, share: share) >= perHost - toTarget[key.target, default: 0] { return .originFull }
        }
        guard total >= min(share, perHost) else { return nil }
        if held[key, default: 0] >= share { return .clientShare }
        return toTarget[key.target, default: 0] >= perHost ? .originFull : nil
    }

    enum Wait {
        case clientShare, originFull

        /// The notice logged when an origin's queue begins.
        var notice: String {
            self == .clientShare
                ? "a client's requests to one origin wait for its share of the connections"
                : "requests to one origin wait for a connection: every one is taken"
        }
        /// `Cache-Status` detail while waiting, and after waiting too long.
        var detail: String { self == .clientShare ? "waited-for-client-share" : "waited-for-origin-connection" }
        var timeoutDetail: String { self == .clientShare ? "client-share-timeout" : "origin-connection-timeout" }
        /// What the 504 after `timeout` says, for `origin`.
        func timeoutMessage(_ timeout: Duration, origin: String) -> String {
            self == .clientShare
                ? "Larder: waited \(timeout) for this client's share of the connections to \(origin)"
                : "Larder: waited \(timeout) for a connection to \(origin)"
        }
    }

    /// Whether a probe for some client could find it at `limit` (a check without hashing).
    func mayBeAtLimit(_ limit: Int) -> Bool { total >= limit || !handingOver.isEmpty }

    /// Counts a fill for `key` (its transfer holds one of the origin's connections).
    mutating func take(_ key: Key) {
        held[key, default: 0] += 1
        toTarget[key.target, default: 0] += 1
        total += 1
    }

    /// Parks `resume` until the origin has a connection for it and its client is below its
    /// share (``nextWaiting(target:share:perHost:)``), from `now`, or `timeOut` once `until`
    /// has passed (``expired(now:)``); the wait's id, to cancel it.
    @discardableResult
    mutating func wait(
        _ key: Key, now: UInt64, until: UInt64, resume: @escaping () -> Bool, timeOut: @escaping () -> Void = {}
    ) -> UInt64 {
        lastID += 1
        let waiter = Waiter(id: lastID, since: now, until: until, resume: resume, timeOut: timeOut)
        waiting[key.target, default: [:]][key, default: []].append(waiter)
        return lastID
    }

    /// Takes every wait whose `until` has passed by `now` off the lists: their `timeOut`s, for
    /// the caller to run. A walk of every waiting request, made by the loop's look at its
    /// queues once a second (``ProxyLoop/watchWaits()``), not a timer per request.
    mutating func expired(now: UInt64) -> [() -> Void] {
        var ended: [() -> Void] = []
        for origin in Array(waiting.keys) {
            for client in Array(waiting[origin, default: [:]].keys) {
                guard let queue = waiting[origin]?[client], queue.contains(where: { $0.until <= now }) else { continue }
                ended += queue.lazy.filter { $0.until <= now }.map(\.timeOut)
                let left = queue.filter { $0.until > now }
                waiting[origin]?[client] = left.isEmpty ? nil : left
            }
            if waiting[origin]?.isEmpty == true { waiting[origin] = nil }
        }
        return ended
    }

    /// Takes the wait `id` of `key` off the list (its request timed out, or its client left).
    mutating func cancelWait(_ key: Key, id: UInt64) {
        guard let origin = waiting.index(forKey: key.target), let client = waiting.values[origin].index(forKey: key) else {
            return
        }
        // Ids grow in the order the client's requests waited.
        let queue = waiting.values[origin].values[client]
        var low = 0
        var high = queue.count
        while low < high {
            let middle = (low + high) / 2
            if queue[middle].id < id { low = middle + 1 } else { high = middle }
        }
        guard low < queue.count, queue[low].id == id else { return }
        waiting.values[origin].values[client].remove(at: low)
        if waiting.values[origin].values[client].isEmpty {
            waiting.values[origin].remove(at: client)
            if waiting.values[origin].isEmpty { waiting.remove(at: origin) }
        }
    }

    /// Forgets a fill counted by ``take(_:)``; whether requests wait for its origin (the
    /// caller then lets them go on, outside its own transfer's end).
    mutating func give(_ key: Key) -> Bool {
        if let index = held.index(forKey: key) {
            if held.values[index] <= 1 { held.remove(at: index) } else { held.values[index] -= 1 }
            if let origin = toTarget.index(forKey: key.target) {
                if toTarget.values[origin] <= 1 { toTarget.remove(at: origin) } else { toTarget.values[origin] -= 1 }
            }
            total -= 1
        }
        guard !waiting.isEmpty, waiting[key.target] != nil else { return false }
        handingOver.insert(key.target)
        return true
    }

    /// The loop's pass for the origin `target` after ``give(_:)`` has begun: requests arriving
    /// from here on no longer wait behind those that waited.
    mutating func handedOver(target: Int) {
        if !handingOver.isEmpty { handingOver.remove(target) }
    }

    /// The request to let go on next for the origin `target`, taken off the list: none while
    /// every connection is taken; else, of those whose client is below its `share`, the one
    /// whose client holds the fewest fills to the origin, the oldest of those. Run, it takes
    /// a connection, attaches to a fill in flight, waits again (at the back), or (false)
    /// finds its client gone.
    mutating func nextWaiting(target: Int, share: Int, perHost: Int) -> (() -> Bool)? {
        guard toTarget[target, default: 0] < perHost, let origin = waiting.index(forKey: target) else { return nil }
        var best: (client: [Key: [Waiter]].Index, held: Int, id: UInt64)?
        let clients = waiting.values[origin]
        for client in clients.indices {
            let count = held[clients.keys[client], default: 0]
            guard count < share, let first = clients.values[client].first else { continue }
            if let best, best.held < count || (best.held == count && best.id < first.id) { continue }
            best = (client, count, first.id)
        }
        guard let best else { return nil }
        let next = waiting.values[origin].values[best.client].removeFirst()
        if waiting.values[origin].values[best.client].isEmpty {
            waiting.values[origin].remove(at: best.client)
            if waiting.values[origin].isEmpty { waiting.remove(at: origin) }
        }
        return next.resume
    }

    /// Fills in flight counted for `key`.
    func count(_ key: Key) -> Int { held[key, default: 0] }

    /// Fills in flight to the origin `target` (``Key/target``), every client's.
    func inFlight(target: Int) -> Int { toTarget[target, default: 0] }

    /// The origins requests wait for.
    var waitingTargets: [Int] { Array(waiting.keys) }

    /// Requests waiting for the origin `target`.
    func waiters(target: Int) -> Int { waiting[target]?.values.reduce(0) { $0 + $1.count } ?? 0 }

    /// Whether any request waits for the origin `target`.
    func isWaitedFor(target: Int) -> Bool { waiting[target] != nil }

    /// Of the clients with a request waiting for the origin `target` since `since` or before,
    /// that a connection freed would let go on (below their `share`), the fewest fills one
    /// holds to it; nil when none has waited that long (``HeldTransfers/overShare(_:fewest:now:held:anyRate:)``).
    func fewestHeld(waitingSince since: UInt64, target: Int, share: Int) -> Int? {
        var fewest: Int?
        for (client, queue) in waiting[target] ?? [:] {
            let count = held[client, default: 0]
            // A client's oldest request is first.
            guard count < share, let first = queue.first, first.since <= since else { continue }
            fewest = min(fewest ?? count, count)
        }
        return fewest
    }

    /// Requests waiting for the origin `target` that connections freed would let go on: of
    /// each client's, as many as its `share` still has room for. (Each client's whole queue
    /// counted made a backlog of one client's requests look like many waiters: slow
    /// transfers were cut, and newcomers held back, for connections no one could take.)
    func eligibleWaiters(target: Int, share: Int) -> Int {
        waiting[target]?.reduce(0) { $0 + min($1.value.count, max(0, share - held[$1.key, default: 0])) } ?? 0
    }
}
