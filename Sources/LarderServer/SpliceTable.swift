/// Which clients are tunnelled blind ("spliced") to which intercepted hosts: a ``SpliceStage``
/// per (client address, host) pair, so a client that keeps refusing Larder's certificate for
/// a host stops being intercepted for that host, and no other client is affected.
///
/// Only refusals make an entry (a success with none to clear needs none), and an entry is
/// dropped as soon as its stage is back to the start, so the table holds the clients now
/// failing or spliced. Bounded: past `capacity` pairs, the one changed longest ago makes
/// room, one not spliced first, so many client addresses cannot grow memory without bound.
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

        /// When the splice runs out, if the pair is spliced at `now`.
        func splicedUntil(now: UInt64) -> UInt64? {
            if case .spliced(let until) = stage, until > now { until } else { nil }
        }
    }

    private(set) var entries: [Pair: Entry] = [:]
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Whether a CONNECT from `client` to `host` at `now` is decrypted rather than spliced (a
    /// splice that has run out is dropped: the pair starts over).
    mutating func admits(client: String, host: String, now: UInt64) -> Bool {
        let pair = Pair(client: client, host: host)
        guard let entry = entries[pair] else { return true }
        let (intercept, next) = entry.stage.admitting(now: now)
        if next == .initial { entries[pair] = nil }
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
            if entries.count >= capacity { makeRoom(now: now) }
            let stage = SpliceStage.initial.after(handshakeSucceeded: false, threshold: threshold, spliceFor: spliceFor, now: now)
            entries[pair] = Entry(stage: stage, failures: 1, lastFailure: refusal, changedAt: now)
            if case .spliced = stage { return true }
            return false
        }
        let before = entry.stage
        entry.stage = before.after(handshakeSucceeded: refusal == nil, threshold: threshold, spliceFor: spliceFor, now: now)
        if entry.stage == .initial {
            entries[pair] = nil
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
        for pair in doomed { entries[pair] = nil }
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

    /// Drops the pair changed longest ago, preferring one not spliced: one pass, no copy.
    private mutating func makeRoom(now: UInt64) {
        var oldest: (pair: Pair, spliced: Bool, changedAt: UInt64)?
        for (pair, entry) in entries {
            let spliced = entry.splicedUntil(now: now) != nil
            guard let current = oldest else {
                oldest = (pair, spliced, entry.changedAt)
                continue
            }
            if (spliced ? 1 : 0, entry.changedAt) < (current.spliced ? 1 : 0, current.changedAt) {
                oldest = (pair, spliced, entry.changedAt)
            }
        }
        if let oldest { entries[oldest.pair] = nil }
    }
}
