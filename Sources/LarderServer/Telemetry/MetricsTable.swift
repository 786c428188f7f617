import LarderUpstream

/// Every `/metrics` series, declared once: name, help, type, labels, and how to read its value
/// from the `/stats` document. ``MetricsExporter`` registers and renders exactly these rows,
/// so a series cannot be declared and then silently never set.
struct MetricRow: Sendable {
    enum Kind: Sendable {
        /// Only grows; each scrape adds the difference since the last.
        case counter
        /// Set to the value read at each scrape.
        case gauge
    }

    let name: String
    let help: String
    let kind: Kind
    let labels: [(String, String)]
    let value: @Sendable (StatsDocument) -> Int

    init(
        _ kind: Kind, _ name: String, _ help: String, _ labels: [(String, String)] = [], _ value: @escaping @Sendable (StatsDocument) -> Int
    ) {
        self.kind = kind
        self.name = name
        self.help = help
        self.labels = labels
        self.value = value
    }
}

enum MetricsTable {
    static let rows: [MetricRow] = {
        var rows: [MetricRow] = []
        for outcome in RequestOutcome.allCases {
            rows.append(
                .init(
                    .counter, "larder_requests_total", "Requests answered, by how they were answered.",
                    [("outcome", outcome.rawValue)]
                ) { $0.requests[outcome.rawValue] ?? 0 })
        }
        for name in Statistics.statusClassNames {
            rows.append(
                .init(
                    .counter, "larder_responses_total", "Proxied responses, by status class (admin requests not counted).",
                    [("class", name)]
                ) { $0.responses?[name] ?? 0 })
        }
        rows.append(.init(.counter, "larder_upstream_requests_total", "Requests sent upstream (every attempt).") { $0.upstream.requests })
        rows.append(
            .init(
                .counter, "larder_upstream_errors_total",
                "Upstream exchanges that failed for good without a usable response (DNS, connect, timeout, reset, TLS...)."
            ) { $0.upstream.errors ?? 0 })
        for reason in RetryPolicy.Reason.allCases.map(\.rawValue) {
            rows.append(
                .init(
                    .counter, "larder_upstream_retries_total", "Upstream attempts retried, by reason.",
                    [("reason", reason)]
                ) { $0.upstream.retries[reason] ?? 0 })
        }
        for reason in Statistics.failureReasons {
            rows.append(
                .init(
                    .counter, "larder_upstream_failures_total", "Upstream exchanges that failed for good, by reason.",
                    [("reason", reason)]
                ) { $0.upstream.failures[reason] ?? 0 })
        }
        for reason in IdleConnectionClose.allCases.map(\.rawValue) {
            rows.append(
                .init(
                    .counter, "larder_upstream_idle_closed_total",
                    "Pooled upstream connections closed unused because bytes arrived (data) or the origin closed them (closed) while idle.",
                    [("reason", reason)]
                ) { $0.upstream.idleConnectionsClosed?[reason] ?? 0 })
        }
        rows += [
            .init(.counter, "larder_retry_budget_exhausted_total", "Retries refused because the retry budget was spent.") {
                $0.upstream.retryBudgetExhausted
            },
            .init(.counter, "larder_fills_total", "Upstream fetches started for clients.") { $0.coalescing.fills },
            .init(.counter, "larder_coalesced_requests_total", "Requests that attached to another request's upstream fetch.") {
                $0.coalescing.coalesced
            },
            .init(
                .counter, "larder_coalesce_moved_total", "Requests moved to the event loop already fetching their URL, to share its fetch."
            ) {
                $0.coalescing.moved
            },
            .init(.counter, "larder_coalesce_released_total", "Waiting requests released from a fetch they may not share.") {
                $0.coalescing.released
            },
            .init(.counter, "larder_coalesce_timeouts_total", "Waiting requests that gave up waiting (coalesce.wait_timeout).") {
                $0.coalescing.timedOut
            },
            .init(.counter, "larder_revalidations_total", "Stored responses confirmed by the origin (304 or matching HEAD).") {
                $0.upstream.revalidated
            },
            .init(.counter, "larder_stale_if_error_total", "Stale responses served because the origin failed.") {
                $0.upstream.staleIfError
            },
            .init(.counter, "larder_background_refreshes_total", "Revalidations started in the background after serving stale.") {
                $0.upstream.backgroundRefreshes
            },
            .init(.counter, "larder_invalidations_total", "Stored URLs invalidated by unsafe requests or purges.") { $0.invalidations },
            .init(.counter, "larder_bytes_served_total", "Body bytes sent to clients, by source.", [("source", "cache")]) {
                $0.bytes.fromCache
            },
            .init(.counter, "larder_bytes_served_total", "Body bytes sent to clients, by source.", [("source", "upstream")]) {
                $0.bytes.fromUpstream
            },
            .init(.gauge, "larder_cache_bytes", "Bytes held by a cache tier.", [("tier", "memory")]) { $0.memory.bytes },
            .init(.gauge, "larder_cache_entries", "Entries held by a cache tier.", [("tier", "memory")]) { $0.memory.entries },
            .init(
                .counter, "larder_cache_evictions_total", "Entries evicted from a cache tier to stay within its size.", [("tier", "memory")]
            ) {
                $0.memory.evictions
            },
            .init(.gauge, "larder_cache_bytes", "Bytes held by a cache tier.", [("tier", "disk")]) { $0.disk?.bytes ?? 0 },
            .init(.gauge, "larder_cache_entries", "Entries held by a cache tier.", [("tier", "disk")]) { $0.disk?.entries ?? 0 },
            .init(
                .counter, "larder_cache_evictions_total", "Entries evicted from a cache tier to stay within its size.", [("tier", "disk")]
            ) {
                $0.disk?.evictions ?? 0
            },
            .init(
                .counter, "larder_cache_admissions_deferred_total",
                "Storable responses not stored until a second request (cache.admission = \"second_request\")."
            ) {
                $0.admissionsDeferred ?? 0
            },
            .init(
                .counter, "larder_digest_mismatches_total",
                "Bodies that did not hash to the digest their URL names (never stored, never served whole)."
            ) {
                $0.digestMismatches ?? 0
            },
            .init(.gauge, "larder_memory_files", "Anonymous memory files holding large memory-tier bodies (one descriptor each).") {
                $0.memory.files
            },
            .init(.counter, "larder_disk_corruptions_total", "Disk entries found damaged (size, checksum, head) and deleted.") {
                $0.disk?.corruptions ?? 0
            },
            .init(.counter, "larder_disk_write_errors_total", "Disk writes that failed (ENOSPC, EIO, permissions).") {
                $0.disk?.writeErrors ?? 0
            },
            .init(
                .counter, "larder_disk_scrubbed_bytes_total",
                "Bytes of disk entries over 1 MiB checked by the background scrub (disk.scrub_rate)."
            ) {
                $0.disk?.scrubbedBytes ?? 0
            },
            .init(.gauge, "larder_disk_degraded", "1 while the disk tier refuses writes after an error, or could not be set up.") {
                $0.disk?.degraded ?? true ? 1 : 0
            },
            .init(.gauge, "larder_connections_active", "Open client connections.") { $0.connections.active },
            .init(.gauge, "larder_admin_connections_active", "Open admin connections (dashboards, scrapes, the CLI).") {
                $0.connections.admin ?? 0
            },
            .init(.counter, "larder_connections_accepted_total", "Client connections accepted.") { $0.connections.accepted },
            .init(.counter, "larder_connections_rejected_total", "Client connections refused (ACL, max_connections).") {
                $0.connections.rejected
            },
            .init(.counter, "larder_connections_evicted_total", "Idle client connections closed to admit new ones at max_connections.") {
                $0.connections.evictedIdle
            },
            .init(.counter, "larder_bad_requests_total", "Requests rejected as malformed.") { $0.refused.badRequests },
            .init(
                .counter, "larder_upstream_dead_connection_retries_total",
                "Requests sent again at once on a new connection after a pooled keep-alive connection turned out dead (not policy retries)."
            ) {
                $0.upstream.deadConnectionRetries
            },
            .init(.counter, "larder_destinations_refused_total", "Requests and tunnels refused by the destination policy (403).") {
                $0.refused.destinations
            },
            .init(
                .counter, "larder_busy_polls_total",
                "Event-loop busy polls (proxy.busy_poll), by whether an event arrived or the loop slept.",
                [("outcome", "caught")]
            ) { $0.busyPoll.caught },
            .init(
                .counter, "larder_busy_polls_total",
                "Event-loop busy polls (proxy.busy_poll), by whether an event arrived or the loop slept.",
                [("outcome", "expired")]
            ) { $0.busyPoll.expired },
            .init(.counter, "larder_tunnel_bytes_total", "Bytes relayed through CONNECT tunnels.", [("direction", "client_to_server")]) {
                $0.tunnels.bytesUp
            },
            .init(.counter, "larder_tunnel_bytes_total", "Bytes relayed through CONNECT tunnels.", [("direction", "server_to_client")]) {
                $0.tunnels.bytesDown
            },
            .init(.counter, "larder_tunnels_total", "CONNECT tunnels opened.") { $0.tunnels.opened },
            .init(.counter, "larder_proxy_auth_failures_total", "Requests refused for missing or wrong proxy credentials.") {
                $0.refused.proxyAuth
            },
            .init(.counter, "larder_parent_failovers_total", "Requests sent to the next parent proxy after one could not be reached.") {
                $0.parentFailovers
            },
            .init(.gauge, "larder_workers", "Event loops serving (proxy.workers).") { $0.workers },
            .init(.counter, "larder_tls_certificates_minted_total", "Certificates the local CA minted for intercepted hosts.") {
                $0.tls.certificatesMinted
            },
            .init(
                .counter, "larder_tls_certificate_cache_hits_total", "Intercepted handshakes that reused a certificate minted before."
            ) {
                $0.tls.certificateCacheHits
            },
            .init(
                .counter, "larder_tls_spliced_tunnels_total",
                "CONNECTs to an intercepted host tunnelled blind because its clients kept refusing the handshake."
            ) {
                $0.tls.splicedTunnels
            },
            .init(
                .counter, "larder_tls_kernel_sessions_total",
                "Intercepted TLS sessions whose sending the kernel encrypts (kTLS; file bodies zero-copy)."
            ) {
                $0.tls.kernelSessions
            },
            .init(
                .gauge, "larder_tls_spliced_hosts",
                "Intercepted hosts tunnelled blind now for at least one client (tls.splice_after_failures)."
            ) {
                $0.tls.splicedHosts
            },
        ]
        for outcome in Statistics.HandshakeOutcome.allCases.map(\.rawValue) {
            rows.append(
                .init(
                    .counter, "larder_tls_handshakes_total", "TLS handshakes with intercepted clients, by outcome.",
                    [("outcome", outcome)]
                ) { $0.tls.handshakes[outcome] ?? 0 })
        }
        for outcome in RequestOutcome.proxied {
            rows.append(
                .init(
                    .counter, "larder_tls_requests_total", "Requests answered inside intercepted TLS sessions, by outcome.",
                    [("outcome", outcome.rawValue)]
                ) { $0.tls.requests[outcome.rawValue] ?? 0 })
        }
        return rows
    }()
}
