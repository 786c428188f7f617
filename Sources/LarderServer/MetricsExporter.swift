import LarderCache
import LarderIO
import LarderUpstream
import Prometheus
import Synchronization

/// The `/metrics` endpoint: every counter and gauge in Prometheus text format, through
/// swift-prometheus.
///
/// The hot path never touches Prometheus objects: requests bump Larder's own relaxed atomics
/// (``Statistics``), and a scrape copies the deltas into the registry. The one per-request
/// metric, the duration histogram, is Larder's own (``RequestDurationHistogram``), rendered
/// after the registry's text.
///
/// State: the registry and its metrics are thread-safe; `synced` (last values copied) is
/// guarded by its mutex, so concurrent scrapes do not double-count.
final class MetricsExporter: Sendable {
    let registry: PrometheusCollectorRegistry
    /// Request durations, from first byte of the request head to the last byte queued.
    let requestDuration = RequestDurationHistogram()
    private let counters: [String: Prometheus.Counter]
    private let gauges: [String: Prometheus.Gauge]
    private let synced = Mutex<[String: Int]>([:])
    /// Per-parent metrics, made the first time a parent shows up (labels are not known up front).
    private let parentMetrics = Mutex<[String: ParentMetrics]>([:])

    /// A descriptor for a full metric name: the unit is the part after the last underscore.
    private static func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        let split = name.lastIndex(of: "_")!
        return MetricNameDescriptor(
            metricName: String(name[..<split]), unitName: String(name[name.index(after: split)...]), helpText: help)
    }

    private static func key(_ name: String, _ labels: [(String, String)]) -> String {
        name + labels.map { "|\($0.0)=\($0.1)" }.joined()
    }

    init(version: String = "0.1.0") {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        var counters: [String: Prometheus.Counter] = [:]
        var gauges: [String: Prometheus.Gauge] = [:]
        func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) {
            counters[Self.key(name, labels)] = registry.makeCounter(descriptor: Self.descriptor(name, help), labels: labels)
        }
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) {
            gauges[Self.key(name, labels)] = registry.makeGauge(descriptor: Self.descriptor(name, help), labels: labels)
        }
        for outcome in RequestOutcome.allCases {
            counter("larder_requests_total", "Requests answered, by how they were answered.", [("outcome", outcome.rawValue)])
        }
        counter("larder_upstream_requests_total", "Requests sent upstream (every attempt).")
        for reason in RetryPolicy.Reason.allCases {
            counter("larder_upstream_retries_total", "Upstream attempts retried, by reason.", [("reason", reason.rawValue)])
        }
        for reason in ["dns", "connect", "timeout", "reset", "truncated", "protocol", "other", "5xx", "429"] {
            counter("larder_upstream_failures_total", "Upstream exchanges that failed for good, by reason.", [("reason", reason)])
        }
        counter("larder_retry_budget_exhausted_total", "Retries refused because the retry budget was spent.")
        counter("larder_fills_total", "Upstream fetches started for clients.")
        counter("larder_coalesced_requests_total", "Requests that attached to another request's upstream fetch.")
        counter("larder_coalesce_moved_total", "Requests moved to the event loop already fetching their URL, to share its fetch.")
        counter("larder_coalesce_released_total", "Waiting requests released from a fetch they may not share.")
        counter("larder_coalesce_timeouts_total", "Waiting requests that gave up waiting (coalesce.wait_timeout).")
        counter("larder_revalidations_total", "Stored responses confirmed by the origin (304 or matching HEAD).")
        counter("larder_stale_if_error_total", "Stale responses served because the origin failed.")
        counter("larder_background_refreshes_total", "Revalidations started in the background after serving stale.")
        counter("larder_invalidations_total", "Stored URLs invalidated by unsafe requests or purges.")
        for source in ["cache", "upstream"] {
            counter("larder_bytes_served_total", "Body bytes sent to clients, by source.", [("source", source)])
        }
        for tier in ["memory", "disk"] {
            gauge("larder_cache_bytes", "Bytes held by a cache tier.", [("tier", tier)])
            gauge("larder_cache_entries", "Entries held by a cache tier.", [("tier", tier)])
            counter("larder_cache_evictions_total", "Entries evicted from a cache tier to stay within its size.", [("tier", tier)])
        }
        gauge("larder_memory_files", "Anonymous memory files holding large memory-tier bodies (one descriptor each).")
        counter("larder_disk_corruptions_total", "Disk entries found damaged (size, checksum, head) and deleted.")
        counter("larder_disk_write_errors_total", "Disk writes that failed (ENOSPC, EIO, permissions).")
        counter("larder_disk_scrubbed_bytes_total", "Bytes of disk entries over 1 MiB checked by the background scrub (disk.scrub_rate).")
        gauge("larder_disk_degraded", "1 while the disk tier refuses writes after an error.")
        gauge("larder_connections_active", "Open client connections.")
        counter("larder_connections_accepted_total", "Client connections accepted.")
        counter("larder_connections_rejected_total", "Client connections refused (ACL, max_connections).")
        counter("larder_connections_evicted_total", "Idle client connections closed to admit new ones at max_connections.")
        counter("larder_bad_requests_total", "Requests rejected as malformed.")
        counter(
            "larder_upstream_dead_connection_retries_total",
            "Requests sent again at once on a new connection after a pooled keep-alive connection turned out dead (not policy retries).")
        counter("larder_destinations_refused_total", "Requests and tunnels refused by the destination policy (403).")
        for outcome in ["caught", "expired"] {
            counter(
                "larder_busy_polls_total", "Event-loop busy polls (proxy.busy_poll), by whether an event arrived or the loop slept.",
                [("outcome", outcome)])
        }
        for direction in ["client_to_server", "server_to_client"] {
            counter("larder_tunnel_bytes_total", "Bytes relayed through CONNECT tunnels.", [("direction", direction)])
        }
        counter("larder_tunnels_total", "CONNECT tunnels opened.")
        counter("larder_proxy_auth_failures_total", "Requests refused for missing or wrong proxy credentials.")
        counter("larder_parent_failovers_total", "Requests sent to the next parent proxy after one could not be reached.")
        gauge("larder_build_info", "Always 1; the labels name the build.", [("version", version)])
        gauge("larder_start_time_seconds", "When the daemon started, in Unix seconds.")
        self.counters = counters
        self.gauges = gauges
        gauges[Self.key("larder_build_info", [("version", version)])]?.set(1.0)
        gauges[Self.key("larder_start_time_seconds", [])]?.set(Clocks.wallSeconds())
    }

    /// Brings the registry up to date with the counters and returns the exposition text.
    func render(_ shared: SharedState) -> [UInt8] {
        let stats = shared.stats
        var values: [String: Int] = [:]
        for outcome in RequestOutcome.allCases {
            values[Self.key("larder_requests_total", [("outcome", outcome.rawValue)])] = stats.value(outcome)
        }
        values[Self.key("larder_upstream_requests_total", [])] = stats.upstreamRequests.load()
        for (reason, counter) in stats.retries {
            values[Self.key("larder_upstream_retries_total", [("reason", reason)])] = counter.load()
        }
        for (reason, counter) in stats.finalFailures {
            values[Self.key("larder_upstream_failures_total", [("reason", reason)])] = counter.load()
        }
        values[Self.key("larder_retry_budget_exhausted_total", [])] = shared.retryBudget.exhausted.load()
        values[Self.key("larder_fills_total", [])] = stats.fillsStarted.load()
        values[Self.key("larder_coalesced_requests_total", [])] = stats.requestsCoalesced.load()
        values[Self.key("larder_coalesce_moved_total", [])] = stats.connectionsMoved.load()
        values[Self.key("larder_coalesce_released_total", [])] = stats.waitersReleased.load()
        values[Self.key("larder_coalesce_timeouts_total", [])] = stats.waitersTimedOut.load()
        values[Self.key("larder_revalidations_total", [])] = stats.revalidated.load()
        values[Self.key("larder_stale_if_error_total", [])] = stats.staleServedOnError.load()
        values[Self.key("larder_background_refreshes_total", [])] = stats.backgroundRefreshes.load()
        values[Self.key("larder_invalidations_total", [])] = stats.invalidations.load()
        values[Self.key("larder_bytes_served_total", [("source", "cache")])] = stats.bytesFromCache.load()
        values[Self.key("larder_bytes_served_total", [("source", "upstream")])] = stats.bytesFromUpstream.load()
        let memory = shared.memory.statistics
        values[Self.key("larder_cache_evictions_total", [("tier", "memory")])] = memory.evictions
        let disk = shared.disk?.statistics
        values[Self.key("larder_cache_evictions_total", [("tier", "disk")])] = disk?.evictions ?? 0
        values[Self.key("larder_disk_corruptions_total", [])] = disk?.corruptions ?? 0
        values[Self.key("larder_disk_write_errors_total", [])] = disk?.writeErrors ?? 0
        values[Self.key("larder_disk_scrubbed_bytes_total", [])] = shared.disk?.scrubber.checkedBytes.load() ?? 0
        values[Self.key("larder_connections_accepted_total", [])] = stats.acceptedConnections.load()
        values[Self.key("larder_connections_rejected_total", [])] = stats.rejectedConnections.load()
        values[Self.key("larder_connections_evicted_total", [])] = stats.evictedIdleConnections.load()
        values[Self.key("larder_bad_requests_total", [])] = stats.badRequests.load()
        values[Self.key("larder_destinations_refused_total", [])] = stats.destinationsRefused.load()
        values[Self.key("larder_upstream_dead_connection_retries_total", [])] = stats.deadConnectionRetries.load()
        values[Self.key("larder_busy_polls_total", [("outcome", "caught")])] = stats.busyPollsCaught.load()
        values[Self.key("larder_busy_polls_total", [("outcome", "expired")])] = stats.busyPollsExpired.load()
        values[Self.key("larder_tunnel_bytes_total", [("direction", "client_to_server")])] = stats.tunnelBytesUp.load()
        values[Self.key("larder_tunnel_bytes_total", [("direction", "server_to_client")])] = stats.tunnelBytesDown.load()
        values[Self.key("larder_tunnels_total", [])] = stats.tunnelsOpened.load()
        values[Self.key("larder_proxy_auth_failures_total", [])] = stats.authFailures.load()
        values[Self.key("larder_parent_failovers_total", [])] = stats.parentFailovers.load()
        synced.withLock { last in
            for (key, value) in values {
                let delta = value - (last[key] ?? 0)
                if delta > 0 { counters[key]?.increment(by: Int64(delta)) }
                last[key] = max(value, last[key] ?? 0)
            }
        }
        gauges[Self.key("larder_cache_bytes", [("tier", "memory")])]?.set(Double(memory.bytes))
        gauges[Self.key("larder_cache_entries", [("tier", "memory")])]?.set(Double(memory.entries))
        gauges[Self.key("larder_memory_files", [])]?.set(Double(MemoryFileBudget.shared.count))
        gauges[Self.key("larder_cache_bytes", [("tier", "disk")])]?.set(Double(disk?.bytes ?? 0))
        gauges[Self.key("larder_cache_entries", [("tier", "disk")])]?.set(Double(disk?.entries ?? 0))
        gauges[Self.key("larder_disk_degraded", [])]?.set(disk?.degraded == true ? 1.0 : 0.0)
        gauges[Self.key("larder_connections_active", [])]?.set(Double(stats.activeConnections.load()))
        syncParents(shared)
        var text = registry.emitToBuffer()
        requestDuration.render(into: &text)
        return text
    }

    /// `larder_parent_*{parent}`: attempts, failures, skips while backing off, and whether
    /// each parent is backing off now. Labels carry the parent URL without credentials.
    private func syncParents(_ shared: SharedState) {
        let now = Clocks.monotonicNanos()
        parentMetrics.withLock { metrics in
            for (label, counters) in shared.parentHealth.snapshot() {
                if metrics[label] == nil {
                    let labels = [("parent", label)]
                    func counter(_ name: String, _ help: String) -> Prometheus.Counter {
                        registry.makeCounter(descriptor: Self.descriptor(name, help), labels: labels)
                    }
                    metrics[label] = ParentMetrics(
                        requests: counter("larder_parent_requests_total", "Upstream attempts sent through a parent proxy."),
                        failures: counter("larder_parent_failures_total", "Attempts that could not reach a parent proxy."),
                        skips: counter("larder_parent_skips_total", "Requests that passed a parent over while it was backing off."),
                        down: registry.makeGauge(
                            descriptor: Self.descriptor("larder_parent_down", "1 while a parent proxy is skipped after a failure."),
                            labels: labels))
                }
                metrics[label]!.sync(counters, now: now)
            }
        }
    }
}

/// One parent's metrics and the counter values last copied into them (the counters only grow,
/// so each scrape adds the difference).
private struct ParentMetrics {
    let requests: Prometheus.Counter
    let failures: Prometheus.Counter
    let skips: Prometheus.Counter
    let down: Prometheus.Gauge
    var synced = ParentHealth.Counters()

    mutating func sync(_ current: ParentHealth.Counters, now: UInt64) {
        if current.requests > synced.requests { requests.increment(by: Int64(current.requests - synced.requests)) }
        if current.failures > synced.failures { failures.increment(by: Int64(current.failures - synced.failures)) }
        if current.skips > synced.skips { skips.increment(by: Int64(current.skips - synced.skips)) }
        down.set(current.downUntil > now ? 1.0 : 0.0)
        synced = current
    }
}
