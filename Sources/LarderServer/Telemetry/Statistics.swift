import LarderIO
import LarderUpstream
import Synchronization

/// How a request was answered; one counter per case, and the access log's cache field.
public enum RequestOutcome: String, Sendable, CaseIterable {
    case memoryHit = "hit"
    case diskHit = "disk_hit"
    case miss
    case coalesced
    case revalidated
    case stale
    case error
    case tunnel
    /// A CONNECT answered by decrypting the tunnel (HTTPS interception): the requests inside
    /// are counted on their own.
    case intercept
    case admin

    /// The outcomes of proxied requests, in `allCases` order: the requests a TLS session counts
    /// and the hit ratio's denominator (not admin requests, tunnels or interceptions).
    public static let proxied: [RequestOutcome] = [.memoryHit, .diskHit, .miss, .coalesced, .revalidated, .stale, .error]

    /// Answered from what the cache stores (a stale copy and one revalidated with a 304
    /// included): the one definition the hit ratio, the per-host counters and `STATUS=` use.
    public var isFromCache: Bool {
        switch self {
        case .memoryHit, .diskHit, .stale, .revalidated: true
        case .miss, .coalesced, .error, .tunnel, .intercept, .admin: false
        }
    }

    /// The proxied outcomes answered from the cache: the hit ratio's numerator.
    public static let fromCache: [RequestOutcome] = proxied.filter(\.isFromCache)
}

/// Daemon-wide counters: the single-valued ones declared once in ``Counter``, those kept by a
/// label in ``CounterFamily``. Relaxed atomics: each counter is independent and only ever read
/// for reporting.
///
/// State: every field is an `Atomic`; any thread may update or read.
public final class Statistics: Sendable {
    private let outcomes: [AtomicCounter]
    /// One per ``Counter`` case, at its raw value.
    private let counters: [AtomicCounter]
    /// Pooled upstream connections closed because bytes arrived, or the origin closed them,
    /// while they were idle, by ``IdleConnectionClose``.
    public let idleUpstreamClosed: [String: AtomicCounter] = Dictionary(
        uniqueKeysWithValues: IdleConnectionClose.allCases.map { ($0.rawValue, AtomicCounter()) })
    /// Requests answered inside intercepted TLS sessions, by outcome (also in the totals).
    private let interceptedOutcomes: [AtomicCounter]
    /// Server handshakes with intercepted clients, by ``HandshakeOutcome``.
    private let handshakes: [AtomicCounter]
    /// Proxied responses by status class, 1xx...5xx (admin requests are not counted).
    private let statusClasses: [AtomicCounter]
    /// The labels of ``statusClasses``, as `/stats` and `/metrics` show them.
    public static let statusClassNames = ["1xx", "2xx", "3xx", "4xx", "5xx"]
    /// How a server handshake with an intercepted client ended.
    public enum HandshakeOutcome: String, Sendable, CaseIterable {
        /// Completed: requests follow.
        case ok
        /// The client refused it with an alert (it does not trust the CA, or it pins).
        case rejected
        /// The client closed the connection without an alert.
        case closed
        /// Bytes that are not TLS, a name other than the CONNECT host, or a protocol error.
        case failed
        /// Not complete within `proxy.header_timeout`.
        case timeout
    }

    /// Retries by reason (connect, timeout, reset, 5xx, 500, 429).
    public let retries: [String: AtomicCounter] = Dictionary(
        uniqueKeysWithValues: RetryPolicy.Reason.allCases.map { ($0.rawValue, AtomicCounter()) })
    /// Requests that failed for good, by reason (the error kind, or the status class).
    public let finalFailures: [String: AtomicCounter] = Dictionary(
        uniqueKeysWithValues: Statistics.failureReasons.map { ($0, AtomicCounter()) })
    /// Why an upstream exchange failed for good (`larder_upstream_failures_total{reason}`).
    static let failureReasons = ["dns", "connect", "timeout", "reset", "truncated", "protocol", "digest", "tls", "other", "5xx", "429"]

    public init() {
        outcomes = RequestOutcome.allCases.map { _ in AtomicCounter() }
        counters = Counter.allCases.map { _ in AtomicCounter() }
        interceptedOutcomes = RequestOutcome.proxied.map { _ in AtomicCounter() }
        handshakes = HandshakeOutcome.allCases.map { _ in AtomicCounter() }
        statusClasses = Self.statusClassNames.map { _ in AtomicCounter() }
    }

    /// The counter for `counter`: an index into an array, no lookup by name.
    @inline(__always)
    public subscript(_ counter: Counter) -> AtomicCounter { counters[counter.rawValue] }

    /// Counts a response's status under its class; a status outside 100...599 is not counted.
    func countStatus(_ status: Int) {
        let index = status / 100 - 1
        if statusClasses.indices.contains(index) { statusClasses[index].add(1) }
    }

    /// Responses counted under `name` ("2xx"), 0 for an unknown name.
    public func responses(_ name: String) -> Int {
        Self.statusClassNames.firstIndex(of: name).map { statusClasses[$0].load() } ?? 0
    }

    /// Counts a request answered inside an intercepted session; only proxied outcomes have a
    /// counter (their `index` is their place in ``RequestOutcome/proxied``).
    func countIntercepted(_ outcome: RequestOutcome) {
        let index = Self.index(outcome)
        if index < interceptedOutcomes.count { interceptedOutcomes[index].add(1) }
    }

    public func interceptedValue(_ outcome: RequestOutcome) -> Int {
        let index = Self.index(outcome)
        return index < interceptedOutcomes.count ? interceptedOutcomes[index].load() : 0
    }

    func count(_ handshake: HandshakeOutcome) {
        handshakes[HandshakeOutcome.allCases.firstIndex(of: handshake)!].add(1)
    }

    public func value(_ handshake: HandshakeOutcome) -> Int {
        handshakes[HandshakeOutcome.allCases.firstIndex(of: handshake)!].load()
    }

    func countFinalFailure(_ reason: String) {
        (finalFailures[reason] ?? finalFailures["other"])?.add(1)
    }

    @inline(__always)
    public func count(_ outcome: RequestOutcome) {
        outcomes[Self.index(outcome)].add(1)
    }

    public func value(_ outcome: RequestOutcome) -> Int {
        outcomes[Self.index(outcome)].load()
    }

    /// A family's counters, in the order its declaration lists the label's values.
    func counters(_ family: CounterFamily) -> [AtomicCounter] {
        switch family {
        case .requests: outcomes
        case .responses: statusClasses
        case .upstreamRetries: RetryPolicy.Reason.allCases.map { retries[$0.rawValue]! }
        case .upstreamFailures: Self.failureReasons.map { finalFailures[$0]! }
        case .idleUpstreamClosed: IdleConnectionClose.allCases.map { idleUpstreamClosed[$0.rawValue]! }
        case .tlsHandshakes: handshakes
        case .tlsRequests: interceptedOutcomes
        }
    }

    /// A family's counts, in the order its declaration lists the label's values.
    func values(_ family: CounterFamily) -> [Int] { counters(family).map { $0.load() } }

    /// An outcome's place in `allCases`, written out: counting is on every request.
    @inline(__always)
    private static func index(_ outcome: RequestOutcome) -> Int {
        switch outcome {
        case .memoryHit: 0
        case .diskHit: 1
        case .miss: 2
        case .coalesced: 3
        case .revalidated: 4
        case .stale: 5
        case .error: 6
        case .tunnel: 7
        case .intercept: 8
        case .admin: 9
        }
    }
}
