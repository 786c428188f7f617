import LarderIO

/// What the daemon counts and records about its traffic, for `/stats`, `/metrics`, the
/// dashboard, `STATUS=` and the access log: one instance, built by ``SharedState``.
///
/// Users: every part that counts (connections, exchanges, fills, tunnels, listeners) writes
/// `stats`; the exchange's end writes `hosts`, `routeCounters`, `recentFailures` and the
/// latency histogram in `metrics`; loop 0 samples `history`; the admin routes read it all.
///
/// State: immutable references; each member is thread-safe on its own (atomics or one lock
/// each), so loops write them without coordinating.
final class Telemetry: Sendable {
    let stats = Statistics()
    /// Requests and bytes per origin host, for the dashboard.
    let hosts = HostCounters()
    /// Requests and bytes per route (a preset's by its name, a file's by its `match`).
    let routeCounters = HostCounters(capacity: 200)
    /// The last failed requests and their causes, for the dashboard.
    let recentFailures = RecentFailures()
    /// The counters sampled over the last 15 minutes, for the dashboard's chart.
    let history = StatsHistory()
    /// The Prometheus view of the counters.
    let metrics = MetricsExporter()
    /// Where the loops write access lines (`log.access_file`, restart-only).
    let accessLogFile: AccessLogFile
    /// Wall-clock start, for uptime.
    let startTime = Clocks.wallSeconds()

    init(accessLogPath: String) {
        accessLogFile = AccessLogFile(path: accessLogPath)
    }

    /// Seconds since the daemon started.
    var uptime: Double { Clocks.wallSeconds() - startTime }
}
