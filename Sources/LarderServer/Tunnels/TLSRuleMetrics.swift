import LarderIO
import Prometheus

/// `larder_tls_handshake_failures_total`, `larder_tls_certificate_refusals_total` and
/// `larder_tls_spliced_clients`, labelled by the `tls.intercept` entry the host matched
/// (`intercept="*.pythonhosted.org"`), not by the host: a wildcard entry matches any number of
/// names a client may CONNECT to, so host labels would let a client grow the series without
/// bound, while the entries are the operator's own and few.
///
/// State: the metrics by label and the counts last copied, behind one lock (taken per scrape).
final class TLSRuleMetrics: Sendable {
    private struct Series {
        let failures: Prometheus.Counter
        let refusals: Prometheus.Counter
        let spliced: Prometheus.Gauge
        var synced = InterceptedHosts.RuleCounts()
    }

    private let series = Locked<[String: Series]>([:])

    /// Copies the counts of `hosts` into `registry`: each label's failures and refusals since
    /// the start, and `spliced`, its clients spliced now (0 for a label not in it).
    func sync(_ hosts: InterceptedHosts, spliced: [String: Int], registry: PrometheusCollectorRegistry) {
        let counts = hosts.countsByRule()
        series.withLock { series in
            for label in counts.keys where series[label] == nil {
                let labels = [("intercept", label)]
                series[label] = Series(
                    failures: registry.makeCounter(
                        descriptor: MetricNameDescriptor(
                            metricName: "larder_tls_handshake_failures", unitName: "total",
                            helpText: "Failed TLS handshakes with intercepted clients, by the tls.intercept entry the host matched."),
                        labels: labels),
                    refusals: registry.makeCounter(
                        descriptor: MetricNameDescriptor(
                            metricName: "larder_tls_certificate_refusals", unitName: "total",
                            helpText: "Of those, clients refusing the certificate they were shown (what leads to a splice)."),
                        labels: labels),
                    spliced: registry.makeGauge(
                        descriptor: MetricNameDescriptor(
                            metricName: "larder_tls_spliced", unitName: "clients",
                            helpText: "Clients tunnelled blind to a host now, by the tls.intercept entry the host matched."),
                        labels: labels))
            }
            for (label, current) in counts {
                guard var entry = series[label] else { continue }
                if current.failures > entry.synced.failures {
                    entry.failures.increment(by: Int64(current.failures - entry.synced.failures))
                }
                if current.refusals > entry.synced.refusals {
                    entry.refusals.increment(by: Int64(current.refusals - entry.synced.refusals))
                }
                entry.synced = current
                series[label] = entry
            }
            for (label, entry) in series { entry.spliced.set(Double(spliced[label] ?? 0)) }
        }
    }
}
