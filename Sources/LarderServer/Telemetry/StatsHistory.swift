import Glibc
import LarderIO

/// The last 15 minutes of the counters the dashboard charts (90 samples, one every
/// ``interval``), sampled by the daemon whether a page is open or not, so a page that opens draws the whole window at
/// once (`/stats` `history`). Each sample holds the running totals; the page draws rates from
/// consecutive ones.
///
/// State: the ring is behind one mutex, taken by the sampling timer (loop 0, once an interval)
/// and by `/stats`; requests never touch it.
final class StatsHistory: Sendable {
    /// The totals at one moment.
    struct Sample: Sendable, Equatable {
        /// Seconds since the daemon started.
        var uptime: Double
        /// Proxied requests by outcome (``RequestOutcome`` raw values, no `admin`).
        var requests: [String: Int]
        var bytesFromCache: Int
        var bytesFromUpstream: Int
    }

    /// Nanoseconds between samples: 10 s (tests shorten it with `LARDER_HISTORY_INTERVAL_MS`,
    /// so that a full window takes seconds).
    let interval: UInt64
    /// Samples kept: the window is `capacity` intervals.
    let capacity: Int
    private let ring: Locked<Ring<Sample>>

    init(capacity: Int = 90, interval: UInt64 = StatsHistory.configuredInterval) {
        self.interval = interval
        self.capacity = capacity
        ring = Locked(Ring(capacity: capacity))
    }

    static var configuredInterval: UInt64 {
        if let text = getenv("LARDER_HISTORY_INTERVAL_MS").map({ String(cString: $0) }), let millis = UInt64(text), millis > 0 {
            return millis * 1_000_000
        }
        return 10_000_000_000
    }

    /// Takes a sample of `stats` now.
    func sample(_ stats: Statistics, uptime: Double) {
        var requests: [String: Int] = [:]
        for outcome in RequestOutcome.allCases where outcome != .admin { requests[outcome.rawValue] = stats.value(outcome) }
        let sample = Sample(
            uptime: uptime, requests: requests, bytesFromCache: stats[.bytesFromCache].load(),
            bytesFromUpstream: stats[.bytesFromUpstream].load())
        ring.withLock { $0.append(sample) }
    }

    /// Oldest first.
    var samples: [Sample] { ring.withLock { $0.elements } }
}
