import LarderIO

/// Which parent proxies are backing off after a failure, and per-parent counters.
///
/// A parent that cannot be reached (connect refused, DNS, timeout before connecting, reset
/// before any response byte) is skipped for `upstream.parent_backoff`; requests then try the
/// next parent in their plan, and a parent that is backing off is still tried last, so a
/// tier whose parents are all down keeps probing them instead of failing outright. An answer
/// from a parent — any status, 502 included — means it is up: its errors are about origins.
///
/// State: one table behind a mutex, shared by every event loop; it outlives reloads (keyed
/// by the parent's URL), so a reload does not forget that a parent is down.
public final class ParentHealth: Sendable {
    public struct Counters: Sendable, Equatable {
        /// Attempts sent through the parent.
        public var requests = 0
        /// Attempts that failed to reach it.
        public var failures = 0
        /// Requests that passed it over because it was backing off.
        public var skips = 0
        /// Until when it is skipped (monotonic ns); 0 when it is up.
        public var downUntil: UInt64 = 0

        public init() {}
    }

    private let table = Locked<[String: Counters]>([:])

    public init() {}

    /// `candidates` with the parents that are backing off moved to the end (their order kept),
    /// counting a skip for each one passed over.
    public func order(_ candidates: [ParentPlan.Parent], now: UInt64 = Clocks.monotonicNanos()) -> [ParentPlan.Parent] {
        guard !candidates.isEmpty else { return candidates }
        return table.withLock { table in
            var up: [ParentPlan.Parent] = []
            var down: [ParentPlan.Parent] = []
            for parent in candidates {
                if let entry = table[parent.label], entry.downUntil > now {
                    down.append(parent)
                } else {
                    up.append(parent)
                }
            }
            // A parent is "skipped" when one that comes after it is tried in its place: the
            // down parents seen before the first one that is up.
            if !up.isEmpty {
                for parent in candidates.prefix(while: { $0 != up[0] }) { table[parent.label]?.skips += 1 }
            }
            return up + down
        }
    }

    public func recordAttempt(_ parent: ParentPlan.Parent) {
        table.withLock { $0[parent.label, default: Counters()].requests += 1 }
    }

    /// Marks `parent` down for `backoff`; returns true when it was up until now (log once).
    @discardableResult
    public func recordFailure(_ parent: ParentPlan.Parent, backoff: Duration, now: UInt64 = Clocks.monotonicNanos()) -> Bool {
        table.withLock { table in
            var entry = table[parent.label, default: Counters()]
            let wasUp = entry.downUntil <= now
            entry.failures += 1
            entry.downUntil = now &+ backoff.totalNanoseconds
            table[parent.label] = entry
            return wasUp
        }
    }

    /// A parent answered: it is up again.
    public func recordSuccess(_ parent: ParentPlan.Parent) {
        table.withLock { table in
            if table[parent.label]?.downUntil != 0 { table[parent.label]?.downUntil = 0 }
        }
    }

    /// Every parent seen so far, by label.
    public func snapshot() -> [String: Counters] { table.withLock { $0 } }
}
