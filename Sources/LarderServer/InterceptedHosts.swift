import LarderIO

/// Each intercepted host's ``SpliceStage`` and its clients' handshake failures, shared by
/// every loop: `/stats` lists the hosts whose clients reject the certificate.
///
/// Bounded: past `capacity` hosts, one with nothing to report (no failure, not spliced) makes
/// room, else the one whose last failure is oldest. State: behind a lock.
final class InterceptedHosts: Sendable {
    struct Entry: Sendable, Equatable {
        var stage = SpliceStage.initial
        /// Failed handshakes since the daemon started.
        var failures = 0
        /// The last failure's reason (the client's alert, for one that rejected the certificate).
        var lastFailure: String?
        var lastFailureAt: UInt64 = 0
    }

    private let table = Locked<[String: Entry]>([:])
    private let capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    /// Whether a CONNECT to `host` (lower case) at `now` is decrypted rather than spliced.
    func admits(_ host: String, now: UInt64) -> Bool {
        table.withLock { table in
            guard let entry = table[host] else { return true }
            let (intercept, next) = entry.stage.admitting(now: now)
            if next != entry.stage { table[host]?.stage = next }
            return intercept
        }
    }

    /// Records how a handshake with a client of `host` ended (`failure` nil for success).
    /// Only a failure that `countsTowardSplice` (the client refused the certificate) moves the
    /// splice stage: bytes that are not TLS or a stalled handshake say nothing about pinning,
    /// and must not let any client switch interception off for a host.
    /// Returns whether this failure started a splice (to be logged once).
    func record(_ host: String, failure: String?, countsTowardSplice: Bool, threshold: Int, spliceFor: UInt64, now: UInt64) -> Bool {
        table.withLock { table in
            if table[host] == nil {
                // A success on a host never seen failing needs no entry.
                guard failure != nil else { return false }
                if table.count >= capacity { makeRoom(&table) }
            }
            var entry = table[host] ?? Entry()
            let before = entry.stage
            if failure == nil || countsTowardSplice {
                entry.stage = before.after(handshakeSucceeded: failure == nil, threshold: threshold, spliceFor: spliceFor, now: now)
            }
            if let failure {
                entry.failures += 1
                entry.lastFailure = failure
                entry.lastFailureAt = now
            }
            table[host] = entry
            if case .spliced = entry.stage, case .intercepting = before { return true }
            return false
        }
    }

    private func makeRoom(_ table: inout [String: Entry]) {
        if let quiet = table.first(where: { $0.value.stage == .initial })?.key {
            table[quiet] = nil
        } else if let oldest = table.min(by: { $0.value.lastFailureAt < $1.value.lastFailureAt })?.key {
            table[oldest] = nil
        }
    }

    /// Hosts with failures, most failures first, at most `limit`.
    func failing(_ limit: Int) -> [(host: String, entry: Entry)] {
        let entries = table.withLock { table in table.filter { $0.value.failures > 0 } }
        return entries.sorted { ($0.value.failures, $1.key) > ($1.value.failures, $0.key) }.prefix(limit).map { ($0.key, $0.value) }
    }

    /// Hosts spliced at `now`.
    func splicedCount(now: UInt64) -> Int {
        table.withLock { table in
            table.values.count { if case .spliced(let until) = $0.stage { until > now } else { false } }
        }
    }
}
