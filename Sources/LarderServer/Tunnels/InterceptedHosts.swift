import LarderIO

/// How intercepted handshakes went, shared by every loop: per host, its clients' failures
/// (for `/stats` and `/tls`), and per (client address, host) pair its ``SpliceStage`` in a
/// ``SpliceTable``, so a client that refuses the certificate is spliced alone.
///
/// Bounded: past `capacity` hosts, the one whose last failure is oldest makes room; the
/// splice table has its own cap. State: both behind one lock, taken per CONNECT to an
/// intercepted host and per handshake outcome, never per request.
final class InterceptedHosts: Sendable {
    /// A host's failed handshakes, whatever their cause.
    struct Failures: Sendable, Equatable {
        /// Failed handshakes since the daemon started.
        var count = 0
        /// Of those, the refusals of the certificate (what moves a client towards a splice).
        var refusals = 0
        /// The last failure's outcome and reason (the client's alert, for a refusal).
        var last = ""
        var lastAt: UInt64 = 0
    }

    /// Failures counted under one `tls.intercept` entry (the metrics' label).
    struct RuleCounts: Sendable, Equatable {
        var failures = 0
        var refusals = 0
    }

    private struct State {
        var failures: [String: Failures] = [:]
        var splices: SpliceTable
        /// By the `tls.intercept` entry the host matched: bounded by the configuration.
        var byRule: [String: RuleCounts] = [:]
    }

    private let state: Locked<State>
    private let capacity: Int

    init(capacity: Int = 4096, pairCapacity: Int = 16384) {
        self.capacity = capacity
        state = Locked(State(splices: SpliceTable(capacity: pairCapacity)))
    }

    /// Whether a CONNECT from `client` (its address, no port) to `host` (lower case) at `now`
    /// is decrypted rather than spliced.
    func admits(client: String, host: String, now: UInt64) -> Bool {
        state.withLock { $0.splices.admits(client: client, host: host, now: now) }
    }

    /// Records how a handshake of `client` with `host` ended (`failure` nil for success).
    /// Only a failure that `isRefusal` (the client refused the certificate it was shown)
    /// moves that client's splice stage: bytes that are not TLS, a stalled handshake or a
    /// connection closed before Larder sent its certificate say nothing about pinning. Other
    /// clients of the host are never affected. Returns whether this started a splice (to be
    /// logged once).
    func record(
        client: String, host: String, rule: String, failure: String?, isRefusal: Bool, threshold: Int, spliceFor: UInt64,
        now: UInt64
    ) -> Bool {
        state.withLock { state in
            if failure != nil {
                state.byRule[rule, default: RuleCounts()].failures += 1
                if isRefusal { state.byRule[rule]?.refusals += 1 }
            }
            if let failure {
                if state.failures[host] == nil, state.failures.count >= capacity,
                    let oldest = state.failures.min(by: { $0.value.lastAt < $1.value.lastAt })?.key
                {
                    state.failures[oldest] = nil
                }
                state.failures[host, default: Failures()].count += 1
                if isRefusal { state.failures[host]?.refusals += 1 }
                state.failures[host]?.last = failure
                state.failures[host]?.lastAt = now
            }
            guard failure == nil || isRefusal else { return false }
            return state.splices.record(
                client: client, host: host, refusal: failure, threshold: threshold, spliceFor: spliceFor, now: now)
        }
    }

    /// Failures since the start by `tls.intercept` entry.
    func countsByRule() -> [String: RuleCounts] {
        state.withLock { $0.byRule }
    }

    /// Ends the splices of `host` (of one client when `client` is given); how many went.
    func clear(host: String, client: String?) -> Int {
        state.withLock { $0.splices.clear(host: host, client: client) }
    }

    /// Hosts with failures, most failures first, at most `limit`, each with how many clients
    /// it is spliced for at `now`.
    func failing(_ limit: Int, now: UInt64) -> [(host: String, failures: Failures, splicedClients: Int)] {
        let (failures, spliced) = state.withLock { ($0.failures, $0.splices.splicedHosts(now: now)) }
        return failures.sorted { ($0.value.count, $1.key) > ($1.value.count, $0.key) }.prefix(limit).map {
            ($0.key, $0.value, spliced[$0.key] ?? 0)
        }
    }

    /// The (client, host) pairs spliced at `now`, the latest to run out first.
    func splices(now: UInt64) -> [(pair: SpliceTable.Pair, entry: SpliceTable.Entry, until: UInt64)] {
        state.withLock { $0.splices.spliced(now: now) }
    }

    /// The hosts spliced for at least one client at `now`, and for how many.
    func splicedHosts(now: UInt64) -> [String: Int] {
        state.withLock { $0.splices.splicedHosts(now: now) }
    }
}
