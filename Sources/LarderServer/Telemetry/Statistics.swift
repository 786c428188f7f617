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

    /// The outcomes of proxied requests, in `index` order: the requests a TLS session counts
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

/// Daemon-wide counters, declared once here (Varnish style). Relaxed atomics: each counter is
/// independent and only ever read for reporting.
///
/// State: every field is an `Atomic`; any thread may update or read.
public final class Statistics: Sendable {
    private let outcomes: [AtomicCounter]
    public let upstreamRequests = AtomicCounter()
    /// Upstream exchanges that failed for good without a usable response (an ``UpstreamError``,
    /// not a 5xx or 429 status), even when a stale copy was then served.
    public let upstreamFailures = AtomicCounter()
    public let bytesFromCache = AtomicCounter()
    public let bytesFromUpstream = AtomicCounter()
    public let activeConnections = AtomicCounter()
    /// Open admin connections (not counted in `activeConnections` or max_connections).
    public let adminConnections = AtomicCounter()
    public let acceptedConnections = AtomicCounter()
    public let rejectedConnections = AtomicCounter()
    /// Idle connections closed to make room for a new one at max_connections.
    public let evictedIdleConnections = AtomicCounter()
    public let badRequests = AtomicCounter()
    /// Requests and tunnels refused by the destination policy (403).
    public let destinationsRefused = AtomicCounter()
    /// Busy polls of the event loops (`proxy.busy_poll`) that caught an event, and those that
    /// ran out and let the loop sleep: how often the polling paid for itself.
    public let busyPollsCaught = AtomicCounter()
    public let busyPollsExpired = AtomicCounter()
    /// Upstream fetches started for clients (coalesced requests do not start one).
    public let fillsStarted = AtomicCounter()
    /// Clients that attached to a fill another client started.
    public let requestsCoalesced = AtomicCounter()
    /// Connections moved to the loop fetching what their request needs (several loops only).
    public let connectionsMoved = AtomicCounter()
    /// Clients released from a fill whose response they may not share.
    public let waitersReleased = AtomicCounter()
    /// Clients that waited longer than coalesce.wait_timeout and went on alone.
    public let waitersTimedOut = AtomicCounter()
    /// Stored responses confirmed by a 304 (or a matching HEAD).
    public let revalidated = AtomicCounter()
    /// Revalidations started in the background after serving a stale copy.
    public let backgroundRefreshes = AtomicCounter()
    /// Stale responses served because the origin failed (stale-if-error).
    public let staleServedOnError = AtomicCounter()
    /// Stored URLs invalidated by unsafe requests (RFC 9111 §4.4) and purges.
    public let invalidations = AtomicCounter()
    /// Bodies on `digest` routes that did not hash to the digest their URL names.
    public let digestMismatches = AtomicCounter()
    /// CONNECT tunnels opened, and bytes relayed each way.
    public let tunnelsOpened = AtomicCounter()
    /// Requests sent again at once on a new connection after a pooled one turned out dead.
    public let deadConnectionRetries = AtomicCounter()
    /// Pooled upstream connections closed because bytes arrived, or the origin closed them,
    /// while they were idle, by ``IdleConnectionClose``.
    public let idleUpstreamClosed: [String: AtomicCounter] = Dictionary(
        uniqueKeysWithValues: IdleConnectionClose.allCases.map { ($0.rawValue, AtomicCounter()) })
    /// Requests sent to the next parent proxy after one could not be reached.
    public let parentFailovers = AtomicCounter()
    public let tunnelBytesUp = AtomicCounter()
    public let tunnelBytesDown = AtomicCounter()
    /// Requests refused for missing or wrong Proxy-Authorization.
    public let authFailures = AtomicCounter()
    /// Requests answered inside intercepted TLS sessions, by outcome (also in the totals).
    private let interceptedOutcomes: [AtomicCounter]
    /// Server handshakes with intercepted clients, by ``HandshakeOutcome``.
    private let handshakes: [AtomicCounter]
    /// Proxied responses by status class, 1xx...5xx (admin requests are not counted).
    private let statusClasses: [AtomicCounter]
    /// The labels of ``statusClasses``, as `/stats` and `/metrics` show them.
    public static let statusClassNames = ["1xx", "2xx", "3xx", "4xx", "5xx"]
    /// CONNECTs to an intercepted host tunnelled blind because its clients kept rejecting the
    /// handshake (`tls.splice_after_failures`).
    public let splicedTunnels = AtomicCounter()
    /// Intercepted sessions whose sending the kernel encrypts (kTLS): their file bodies go out
    /// zero-copy with SSL_sendfile.
    public let kernelSessions = AtomicCounter()

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
        interceptedOutcomes = RequestOutcome.proxied.map { _ in AtomicCounter() }
        handshakes = HandshakeOutcome.allCases.map { _ in AtomicCounter() }
        statusClasses = Self.statusClassNames.map { _ in AtomicCounter() }
    }

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
        case .admin: 8
        case .intercept: 9
        }
    }
}
