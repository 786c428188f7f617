/// Transfers paused for their clients, and which of them gives its connection up when other
/// requests wait for one to the same origin.
///
/// A transfer with no disk copy to fall back on (a body not stored, or past what is stored)
/// waits for its slowest reader (``FillBuffer``), and keeps its connection to the origin while it
/// waits: clients that read slowly, or not at all, could hold every one of an origin's
/// `upstream.max_connections_per_host` connections while everyone else's misses to it timed
/// out. ``UpstreamShares`` bounds what one address holds and serves waiting requests fairly;
/// this bounds what any number of addresses hold, by what they do rather than who they are:
/// while requests wait that no free connection serves, a transfer that has waited
/// ``holdLimit`` for its clients (they took less than the 768 KiB that would resume it) is
/// cut, and its clients' responses end incomplete. With no one waiting, a slow client keeps
/// its transfer as long as it likes. The socket's buffers move what a client takes in steps
/// of a megabyte or so, so a pause alone made readers up to ~250 KiB/s look stalled: a
/// transfer is cut only once its slowest client has also received (by the socket's unsent
/// bytes) less than ``spareRate`` over at least ``measureSpan``, measured at most twice a
/// second while requests wait (``measure(target:now:delivered:)``); the slowest goes first.
///
/// Transfers that wait for their origin, or that store what they fetch, never pause: clients
/// with several addresses asking an origin of their own for heads that do not come or bodies
/// that trickle, through a parent proxy (whose connections every origin behind it shares),
/// held every connection for as long as the transfers ran. So once a request has waited
/// ``holdLimit`` with no connection free, a running transfer that barely uses its connection,
/// of the client holding the most fills to the origin, is cut if that client holds at least
/// two more than the waiting client holding the fewest (``overShare(_:fewest:now:held:anyRate:)``):
/// such connections end up shared evenly among the clients that want them, and an honest
/// client that holds no more than others, or whose downloads move, loses nothing.
///
/// Generic over what holds the connection (a ``Fill``), so the choice is tested without one.
/// State: loop-confined.
struct HeldTransfers<Holder: AnyObject> {
    /// A transfer paused for its clients since `since` (the loop's clock, nanoseconds).
    struct Entry {
        let holder: Holder
        /// The client's share it counts against: its origin (``UpstreamShares/Key/target``)
        /// and the address whose fills to it are counted.
        let share: UpstreamShares.Key
        let since: UInt64
        /// What its slowest client had received, and when: ``measure(target:now:delivered:)``
        /// measures from it.
        var mark: (delivered: Int, at: UInt64)?
        /// What the last measure found.
        var reading = Reading.none
    }

    /// What is known of how fast a paused transfer's slowest client receives.
    enum Reading: Equatable {
        /// Nothing: not measured since it paused, or its client's reception cannot be read.
        /// Its pause alone decides.
        case none
        /// Marked less than ``measureSpan`` ago: not judged yet.
        case measuring
        /// Bytes a second received since the mark.
        case rate(Double)
    }

    /// How long a transfer may wait for its clients while others wait for its origin.
    static var holdLimit: UInt64 { 5_000_000_000 }
    /// The shortest time a client's reading is measured over before its transfer is cut: the
    /// receiver's window moves what a socket shows in steps (a second at 160 KiB/s read as 128
    /// or 192), so a second alone is not enough.
    static var measureSpan: UInt64 { 2_000_000_000 }
    /// The longest: the measure starts again from there, so that what a client read long ago
    /// does not spare it now.
    static var measureWindow: UInt64 { 10_000_000_000 }
    /// Bytes a second a paused transfer's client must receive to be spared: two thirds of
    /// ``minimumRate`` (~100 KiB/s), well clear of the steps the socket shows.
    static var spareRate: Double { minimumRate * 2 / 3 }
    /// Bytes a second a client must receive for its paused transfer to be spared: what
    /// resumes a transfer (``FillBuffer/highWater`` less ``FillBuffer/lowWater``) per
    /// ``holdLimit``, ~150 KiB/s.
    static var minimumRate: Double { Double(FillBuffer.highWater - FillBuffer.lowWater) / (Double(holdLimit) / 1e9) }

    /// The least time between two measures of one origin's transfers: however often requests
    /// wait, a measure (a system call per transfer) runs at most this often.
    static var measureInterval: UInt64 { holdLimit / 10 }

    /// One per paused transfer, by origin (``UpstreamShares/Key/target``): a choice reads one
    /// origin's, at most about its connections.
    private(set) var entries: [Int: [Entry]] = [:]
    /// When each origin's transfers were last measured.
    private var measured: [Int: UInt64] = [:]

    var isEmpty: Bool { entries.isEmpty }

    /// Transfers listed for the origin `target`.
    func count(target: Int) -> Int { entries[target]?.count ?? 0 }

    /// Records that `holder`'s transfer paused for its clients at `now`.
    mutating func paused(_ holder: Holder, share: UpstreamShares.Key, now: UInt64) {
        let entry = Entry(holder: holder, share: share, since: now)
        guard let index = entries.index(forKey: share.target) else {
            entries[share.target] = [entry]
            return
        }
        guard !entries.values[index].contains(where: { $0.holder === holder }) else { return }
        entries.values[index].append(entry)
    }

    /// Forgets `holder`, paused for its clients of the origin `target`: its transfer resumed
    /// or ended.
    mutating func resumed(_ holder: Holder, target: Int) {
        guard let index = entries.index(forKey: target) else { return }
        entries.values[index].removeAll { $0.holder === holder }
        if entries.values[index].isEmpty {
            entries.remove(at: index)
            measured[target] = nil
        }
    }

    /// Measures what the slowest client of each transfer paused for the origin `target` has
    /// received (`delivered`: ``Fill/slowestDelivered()``, nil when it cannot be read) since
    /// the transfer's mark, at `now`, unless the origin's were measured less than
    /// ``measureInterval`` ago. A transfer is marked at its first measure and judged once its
    /// mark is ``measureSpan`` old; one whose client keeps up is marked anew past
    /// ``measureWindow``, so that what it read long ago does not spare it later.
    mutating func measure(target: Int, now: UInt64, delivered: (Holder) -> Int?) {
        guard let index = entries.index(forKey: target) else { return }
        if let last = measured[target], now < last &+ Self.measureInterval { return }
        measured[target] = now
        for slot in entries.values[index].indices {
            let entry = entries.values[index][slot]
            guard let received = delivered(entry.holder) else {
                entries.values[index][slot].reading = .none
                continue
            }
            guard let mark = entry.mark, now >= mark.at &+ Self.measureSpan else {
                if entry.mark == nil { entries.values[index][slot].mark = (received, now) }
                entries.values[index][slot].reading = .measuring
                continue
            }
            let rate = Double(received - mark.delivered) / (Double(now - mark.at) / 1e9)
            entries.values[index][slot].reading = .rate(rate)
            if rate >= Self.spareRate, now >= mark.at &+ Self.measureWindow { entries.values[index][slot].mark = (received, now) }
        }
    }

    /// The transfer to cut for the origin `target`, at `now`, or nil: none while the requests
    /// `waiting` for a connection to it (that one would let go on) are no more than the
    /// connections `free`; otherwise, of those paused for at least ``holdLimit`` whose last
    /// reading (``measure(target:now:delivered:)``) is below ``spareRate`` or unknown, the one
    /// whose client holds the most fills to the origin (`held`: ``UpstreamShares/count(_:)``),
    /// then the slowest read (unknown counts as nothing), then the longest paused.
    func toCut(target: Int, waiting: Int, free: Int, now: UInt64, held: (UpstreamShares.Key) -> Int) -> Holder? {
        guard waiting > free, let listed = entries[target] else { return nil }
        var chosen: (entry: Entry, held: Int, rate: Double)?
        for entry in listed where now >= entry.since &+ Self.holdLimit {
            let rate: Double
            switch entry.reading {
            case .none: rate = 0
            case .measuring: continue
            case .rate(let measured):
                guard measured < Self.spareRate else { continue }
                rate = measured
            }
            let count = held(entry.share)
            if let best = chosen {
                if best.held != count {
                    if best.held > count { continue }
                } else if best.rate != rate {
                    if best.rate < rate { continue }
                } else if best.entry.since <= entry.since {
                    continue
                }
            }
            chosen = (entry, count, rate)
        }
        return chosen?.entry.holder
    }

    /// How long a request waits before a transfer that moves may be cut for it
    /// (``overShare(_:fewest:now:held:anyRate:)``): half its `timeout`, and 15 s at least.
    static func fairnessFloor(timeout: UInt64) -> UInt64 { max(15_000_000_000, timeout / 2) }

    /// A transfer running to the origin (``overShare(_:fewest:now:held:anyRate:)``).
    struct Running {
        let holder: Holder
        let share: UpstreamShares.Key
        /// When its fill began (the loop's clock, nanoseconds).
        let began: UInt64
        /// Responses reading it: a cut ends each of them.
        let readers: Int
        /// Bytes it has moved: the response body received, and the request body sent.
        let received: Int
    }

    /// The transfer to cut, at `now`, so that a client waiting since ``holdLimit`` ago gets a
    /// connection, or nil: of the `running` transfers begun at least ``holdLimit`` ago that
    /// barely use their connection (less than ``minimumRate`` received on average: a head
    /// that does not come, or a body that trickles), one whose client holds (`held`) at least
    /// two more fills to the origin than `fewest` (the waiting client holding the fewest), so
    /// that it still holds more after the cut. A transfer moving its body faster is never cut
    /// for a share: what a waiting request would gain is less than what the cut would throw
    /// away. The client holding the most first; then the transfer with the fewest readers (a
    /// client's own request rather than one that others joined); then the newest.
    ///
    /// `anyRate`: a request has waited so long (``fairnessFloor(timeout:)``) that a transfer
    /// that moves is cut too, the slowest first: a client paying for an origin that sends
    /// just fast enough must not hold every connection until others time out.
    static func overShare(
        _ running: [Running], fewest: Int, now: UInt64, held: (UpstreamShares.Key) -> Int, anyRate: Bool = false
    ) -> Holder? {
        var chosen: (transfer: Running, held: Int, rate: Double)?
        for transfer in running where now >= transfer.began &+ holdLimit {
            let rate = Double(transfer.received) / (Double(now - transfer.began) / 1e9)
            guard anyRate || rate < minimumRate else { continue }
            let count = held(transfer.share)
            guard count >= fewest + 2 else { continue }
            if let best = chosen {
                if best.held != count {
                    if best.held > count { continue }
                } else if best.transfer.readers != transfer.readers {
                    if best.transfer.readers < transfer.readers { continue }
                } else if anyRate, best.rate != rate {
                    if best.rate < rate { continue }
                } else if best.transfer.began >= transfer.began {
                    continue
                }
            }
            chosen = (transfer, count, rate)
        }
        return chosen?.transfer.holder
    }
}
