/// Every single-valued counter ``Statistics`` holds, declared once (Varnish's counter table):
/// the case is the counter, ``declaration`` its `/metrics` series (kind, name, labels, help)
/// and its `/stats` field. ``Statistics`` keeps one relaxed atomic per case, indexed by the raw
/// value; ``MetricsTable`` and ``StatsDocument/init(counters:)`` read this table. Adding a
/// counter is a case here, its field in ``StatsDocument`` (the typed document `larder stats`
/// decodes) and its increment, `stats[.name].add(n)`; README.md's metric list is held to the
/// series by a test.
///
/// Counters kept by a label (outcome, status class, retry reason...) are families declared
/// by their enums, in ``Statistics``.
public enum Counter: Int, CaseIterable, Sendable {
    case upstreamRequests
    /// Upstream exchanges that failed for good without a usable response (an `UpstreamError`,
    /// not a 5xx or 429 status), even when a stale copy was then served.
    case upstreamFailures
    case bytesFromCache
    case bytesFromUpstream
    case activeConnections
    /// Open admin connections (not counted in `activeConnections` or max_connections).
    case adminConnections
    case acceptedConnections
    case rejectedConnections
    /// Idle connections closed to make room for a new one at max_connections.
    case evictedIdleConnections
    /// Connections (or tunnels) of a client holding two more than a newcomer, closed at
    /// max_connections to admit it when none was idle.
    case connectionsTakenForOthers
    case badRequests
    /// Requests and tunnels refused by the destination policy (403).
    case destinationsRefused
    /// Busy polls of the event loops (`proxy.busy_poll`) that caught an event, and those that
    /// ran out and let the loop sleep: how often the polling paid for itself.
    case busyPollsCaught
    case busyPollsExpired
    /// Upstream fetches started for clients (coalesced requests do not start one).
    case fillsStarted
    /// Clients that attached to a fill another client started.
    case requestsCoalesced
    /// Connections moved to the loop fetching what their request needs (several loops only).
    case connectionsMoved
    /// Clients released from a fill whose response they may not share.
    case waitersReleased
    /// Clients that waited longer than coalesce.wait_timeout and went on alone.
    case waitersTimedOut
    /// Stored responses confirmed by a 304 (or a matching HEAD).
    case revalidated
    /// Revalidations started in the background after serving a stale copy.
    case backgroundRefreshes
    /// Stale responses served because the origin failed (stale-if-error).
    case staleServedOnError
    /// Stored URLs invalidated by unsafe requests (RFC 9111 §4.4) and purges.
    case invalidations
    /// Bodies on `digest` routes that did not hash to the digest their URL names.
    case digestMismatches
    /// CONNECT tunnels opened, and bytes relayed each way.
    case tunnelsOpened
    case tunnelBytesUp
    case tunnelBytesDown
    /// Requests sent again at once on a new connection after a pooled one turned out dead.
    case deadConnectionRetries
    /// Requests that waited for their client's share of an origin's connections
    /// (``UpstreamShares``); transfers paused for slow clients cut to free a connection
    /// others waited for, and transfers of clients holding more connections than one that
    /// waited (``HeldTransfers``).
    case shareWaits
    case slowClientCuts
    case overShareCuts
    /// Requests sent to the next parent proxy after one could not be reached.
    case parentFailovers
    /// Requests refused for missing or wrong Proxy-Authorization.
    case authFailures
    /// CONNECTs to an intercepted host tunnelled blind because its clients kept rejecting the
    /// handshake (`tls.splice_after_failures`).
    case splicedTunnels
    /// Intercepted sessions whose sending the kernel encrypts (kTLS): their file bodies go out
    /// zero-copy with SSL_sendfile.
    case kernelSessions

    /// A counter's `/metrics` series and `/stats` field.
    struct Declaration {
        let kind: MetricRow.Kind
        let name: String
        let labels: [(String, String)]
        let help: String
        let field: Field

        init(_ kind: MetricRow.Kind, _ name: String, _ labels: [(String, String)], _ help: String, _ field: Field) {
            self.kind = kind
            self.name = name
            self.labels = labels
            self.help = help
            self.field = field
        }

        init(_ kind: MetricRow.Kind, _ name: String, _ help: String, _ field: Field) {
            self.init(kind, name, [], help, field)
        }
    }

    /// Where `/stats` shows a counter; a field added after the first release is optional, so
    /// `larder stats` still reads an older daemon's document.
    enum Field {
        case value(WritableKeyPath<StatsDocument, Int>)
        case optional(WritableKeyPath<StatsDocument, Int?>)
    }

    var declaration: Declaration {
        switch self {
        case .upstreamRequests:
            .init(.counter, "larder_upstream_requests_total", "Requests sent upstream (every attempt).", .value(\.upstream.requests))
        case .upstreamFailures:
            .init(
                .counter, "larder_upstream_errors_total",
                "Upstream exchanges that failed for good without a usable response (DNS, connect, timeout, reset, TLS...).",
                .optional(\.upstream.errors))
        case .bytesFromCache:
            .init(
                .counter, "larder_bytes_served_total", [("source", "cache")], "Body bytes sent to clients, by source.",
                .value(\.bytes.fromCache))
        case .bytesFromUpstream:
            .init(
                .counter, "larder_bytes_served_total", [("source", "upstream")], "Body bytes sent to clients, by source.",
                .value(\.bytes.fromUpstream))
        case .activeConnections:
            .init(.gauge, "larder_connections_active", "Open client connections.", .value(\.connections.active))
        case .adminConnections:
            .init(
                .gauge, "larder_admin_connections_active", "Open admin connections (dashboards, scrapes, the CLI).",
                .optional(\.connections.admin))
        case .acceptedConnections:
            .init(.counter, "larder_connections_accepted_total", "Client connections accepted.", .value(\.connections.accepted))
        case .rejectedConnections:
            .init(
                .counter, "larder_connections_rejected_total", "Client connections refused (ACL, max_connections).",
                .value(\.connections.rejected))
        case .evictedIdleConnections:
            .init(
                .counter, "larder_connections_evicted_total", "Idle client connections closed to admit new ones at max_connections.",
                .value(\.connections.evictedIdle))
        case .connectionsTakenForOthers:
            .init(
                .counter, "larder_connections_taken_total",
                "Connections of a client holding two more than a newcomer, closed at max_connections to admit it.",
                .optional(\.connections.takenForOthers))
        case .badRequests:
            .init(.counter, "larder_bad_requests_total", "Requests rejected as malformed.", .value(\.refused.badRequests))
        case .destinationsRefused:
            .init(
                .counter, "larder_destinations_refused_total", "Requests and tunnels refused by the destination policy (403).",
                .value(\.refused.destinations))
        case .busyPollsCaught:
            .init(
                .counter, "larder_busy_polls_total", [("outcome", "caught")],
                "Event-loop busy polls (proxy.busy_poll), by whether an event arrived or the loop slept.", .value(\.busyPoll.caught))
        case .busyPollsExpired:
            .init(
                .counter, "larder_busy_polls_total", [("outcome", "expired")],
                "Event-loop busy polls (proxy.busy_poll), by whether an event arrived or the loop slept.", .value(\.busyPoll.expired))
        case .fillsStarted:
            .init(.counter, "larder_fills_total", "Upstream fetches started for clients.", .value(\.coalescing.fills))
        case .requestsCoalesced:
            .init(
                .counter, "larder_coalesced_requests_total", "Requests that attached to another request's upstream fetch.",
                .value(\.coalescing.coalesced))
        case .connectionsMoved:
            .init(
                .counter, "larder_coalesce_moved_total", "Requests moved to the event loop already fetching their URL, to share its fetch.",
                .value(\.coalescing.moved))
        case .waitersReleased:
            .init(
                .counter, "larder_coalesce_released_total", "Waiting requests released from a fetch they may not share.",
                .value(\.coalescing.released))
        case .waitersTimedOut:
            .init(
                .counter, "larder_coalesce_timeouts_total", "Waiting requests that gave up waiting (coalesce.wait_timeout).",
                .value(\.coalescing.timedOut))
        case .revalidated:
            .init(
                .counter, "larder_revalidations_total", "Stored responses confirmed by the origin (304 or matching HEAD).",
                .value(\.upstream.revalidated))
        case .backgroundRefreshes:
            .init(
                .counter, "larder_background_refreshes_total", "Revalidations started in the background after serving stale.",
                .value(\.upstream.backgroundRefreshes))
        case .staleServedOnError:
            .init(
                .counter, "larder_stale_if_error_total", "Stale responses served because the origin failed.",
                .value(\.upstream.staleIfError))
        case .invalidations:
            .init(.counter, "larder_invalidations_total", "Stored URLs invalidated by unsafe requests or purges.", .value(\.invalidations))
        case .digestMismatches:
            .init(
                .counter, "larder_digest_mismatches_total",
                "Bodies that did not hash to the digest their URL names (never stored, never served whole).", .optional(\.digestMismatches))
        case .tunnelsOpened:
            .init(.counter, "larder_tunnels_total", "CONNECT tunnels opened.", .value(\.tunnels.opened))
        case .tunnelBytesUp:
            .init(
                .counter, "larder_tunnel_bytes_total", [("direction", "client_to_server")], "Bytes relayed through CONNECT tunnels.",
                .value(\.tunnels.bytesUp))
        case .tunnelBytesDown:
            .init(
                .counter, "larder_tunnel_bytes_total", [("direction", "server_to_client")], "Bytes relayed through CONNECT tunnels.",
                .value(\.tunnels.bytesDown))
        case .deadConnectionRetries:
            .init(
                .counter, "larder_upstream_dead_connection_retries_total",
                "Requests sent again at once on a new connection after a pooled keep-alive connection turned out dead (not policy retries).",
                .value(\.upstream.deadConnectionRetries))
        case .shareWaits:
            .init(
                .counter, "larder_upstream_share_waits_total",
                "Requests that waited for a connection to their origin: their client's share (half) in flight, or every one taken.",
                .optional(\.upstream.shareWaits))
        case .slowClientCuts:
            .init(
                .counter, "larder_upstream_slow_client_cuts_total",
                "Transfers paused 5 s for slow clients, cut to free their origin connection for requests that waited for one.",
                .optional(\.upstream.slowClientCuts))
        case .overShareCuts:
            .init(
                .counter, "larder_upstream_over_share_cuts_total",
                "Transfers cut because their client held at least two more connections to the origin than another client that waited 5 s for one.",
                .optional(\.upstream.overShareCuts))
        case .parentFailovers:
            .init(
                .counter, "larder_parent_failovers_total", "Requests sent to the next parent proxy after one could not be reached.",
                .value(\.parentFailovers))
        case .authFailures:
            .init(
                .counter, "larder_proxy_auth_failures_total", "Requests refused for missing or wrong proxy credentials.",
                .value(\.refused.proxyAuth))
        case .splicedTunnels:
            .init(
                .counter, "larder_tls_spliced_tunnels_total",
                "CONNECTs to an intercepted host tunnelled blind because its clients kept refusing the handshake.",
                .value(\.tls.splicedTunnels))
        case .kernelSessions:
            .init(
                .counter, "larder_tls_kernel_sessions_total",
                "Intercepted TLS sessions whose sending the kernel encrypts (kTLS; file bodies zero-copy).", .value(\.tls.kernelSessions))
        }
    }

    /// The counter's value as `document` shows it (0 for an optional field an older daemon left out).
    func read(_ document: StatsDocument) -> Int {
        switch declaration.field {
        case .value(let path): document[keyPath: path]
        case .optional(let path): document[keyPath: path] ?? 0
        }
    }

    /// Sets the counter's field of `document`.
    func write(_ value: Int, into document: inout StatsDocument) {
        switch declaration.field {
        case .value(let path): document[keyPath: path] = value
        case .optional(let path): document[keyPath: path] = value
        }
    }
}
