import LarderCache
import LarderConfig
import LarderIO
import LarderUpstream
import Prometheus

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
    /// One Prometheus object per ``MetricsTable/rows`` entry, at the same index.
    private let series: [Series]
    /// Each counter row's value at the last scrape (the registry's counters only add).
    private let synced = Locked<[Int]>([])
    /// Per-parent metrics, made the first time a parent shows up (labels are not known up front).
    private let parentMetrics = Locked<[String: ParentMetrics]>([:])
    /// Per `tls.intercept` entry: handshake failures, refusals, clients spliced.
    private let tlsRules = TLSRuleMetrics()

    private enum Series {
        case counter(Prometheus.Counter)
        case gauge(Prometheus.Gauge)
    }

    /// A descriptor for a full metric name: the unit is the part after the last underscore.
    private static func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        let split = name.lastIndex(of: "_")!
        return MetricNameDescriptor(
            metricName: String(name[..<split]), unitName: String(name[name.index(after: split)...]), helpText: help)
    }

    init(version: String = Version.larder) {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        series = MetricsTable.rows.map { row in
            switch row.kind {
            case .counter: .counter(registry.makeCounter(descriptor: Self.descriptor(row.name, row.help), labels: row.labels))
            case .gauge: .gauge(registry.makeGauge(descriptor: Self.descriptor(row.name, row.help), labels: row.labels))
            }
        }
        synced.withLock { $0 = Array(repeating: 0, count: MetricsTable.rows.count) }
        registry.makeGauge(
            descriptor: Self.descriptor("larder_build_info", "Always 1; the labels name the build."), labels: [("version", version)]
        )
        .set(1.0)
        registry.makeGauge(descriptor: Self.descriptor("larder_start_time_seconds", "When the daemon started, in Unix seconds."))
            .set(Clocks.wallSeconds())
    }

    /// Brings the registry up to date with `document` (read from the counters just now) and
    /// returns the exposition text.
    func render(_ document: StatsDocument, parents: ParentHealth, tls: TLSConfig, interceptedHosts: InterceptedHosts) -> [UInt8] {
        synced.withLock { last in
            for (index, row) in MetricsTable.rows.enumerated() {
                let value = row.value(document)
                switch series[index] {
                case .counter(let counter):
                    if value > last[index] {
                        counter.increment(by: Int64(value - last[index]))
                        last[index] = value
                    }
                case .gauge(let gauge):
                    gauge.set(Double(value))
                }
            }
        }
        syncParents(parents)
        syncTLSRules(tls, interceptedHosts)
        var text = registry.emitToBuffer()
        requestDuration.render(into: &text)
        ProcessMetrics.current()?.render(into: &text)
        return text
    }

    /// `larder_tls_*{intercept}`: handshake failures, refusals and clients spliced now, counted
    /// under the `tls.intercept` entry their host matches.
    private func syncTLSRules(_ tls: TLSConfig, _ interceptedHosts: InterceptedHosts) {
        var spliced: [String: Int] = [:]
        for (host, clients) in interceptedHosts.splicedHosts(now: Clocks.monotonicNanos()) {
            spliced[ConnectHandler.interceptRule(host, tls), default: 0] += clients
        }
        tlsRules.sync(interceptedHosts, spliced: spliced, registry: registry)
    }

    /// `larder_parent_*{parent}`: attempts, failures, skips while backing off, and whether
    /// each parent is backing off now. Labels carry the parent URL without credentials.
    private func syncParents(_ parents: ParentHealth) {
        let now = Clocks.monotonicNanos()
        parentMetrics.withLock { metrics in
            for (label, counters) in parents.snapshot() {
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
