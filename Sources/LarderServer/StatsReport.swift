import LarderIO
import LarderUpstream

/// The `/stats` document: every counter an operator (or the dashboard, or `larder stats`)
/// wants, as JSON.
enum StatsReport {
    static func json(_ shared: SharedState) -> String {
        let stats = shared.stats
        let config = shared.currentRuntime.config
        var outcomes: [(String, String)] = []
        var proxied = 0
        for outcome in RequestOutcome.allCases {
            outcomes.append((outcome.rawValue, String(stats.value(outcome))))
            if outcome != .admin && outcome != .tunnel { proxied += stats.value(outcome) }
        }
        let fromCache = stats.value(.memoryHit) + stats.value(.diskHit) + stats.value(.stale) + stats.value(.revalidated)
        let total = outcomes.reduce(0) { $0 + (Int($1.1) ?? 0) }
        let memory = shared.memory.statistics
        let diskJSON: String
        if let disk = shared.disk?.statistics {
            diskJSON = JSON.object([
                ("entries", String(disk.entries)), ("bytes", String(disk.bytes)), ("max_bytes", String(config.disk.maxBytes)),
                ("evictions", String(disk.evictions)), ("corruptions", String(disk.corruptions)),
                ("write_errors", String(disk.writeErrors)), ("degraded", String(disk.degraded)),
                ("index_complete", String(disk.indexComplete)), ("path", JSON.string(shared.disk?.directory ?? "")),
            ])
        } else {
            diskJSON = "null"
        }
        // Every configured parent, plus any a route or an earlier configuration used.
        let health = shared.parentHealth.snapshot()
        let now = Clocks.monotonicNanos()
        let configured = shared.currentRuntime.parents.parents.map(\.label)
        let parentLabels = configured + health.keys.filter { !configured.contains($0) }.sorted()
        let parents = parentLabels.map { label in
            let entry = health[label] ?? ParentHealth.Counters()
            return JSON.object([
                ("parent", JSON.string(label)), ("requests", String(entry.requests)), ("failures", String(entry.failures)),
                ("skipped", String(entry.skips)), ("down", String(entry.downUntil > now)),
            ])
        }
        let parentsJSON = "[" + parents.joined(separator: ",") + "]"
        let failovers = String(stats.parentFailovers.load())
        let hosts = shared.hosts.top(10).map { entry in
            JSON.object([
                ("host", JSON.string(entry.host)), ("requests", String(entry.counts.requests)),
                ("hits", String(entry.counts.hits)), ("bytes", String(entry.counts.bytes)),
            ])
        }
        return JSON.object([
            ("version", JSON.string(Version.larder)),
            ("uptime_seconds", JSON.number(Clocks.wallSeconds() - shared.startTime)),
            ("requests", JSON.object([("total", String(total))] + outcomes)),
            ("hit_ratio", JSON.number(proxied > 0 ? Double(fromCache) / Double(proxied) : 0)),
            ("bytes", JSON.object([
                ("from_cache", String(stats.bytesFromCache.load())), ("from_upstream", String(stats.bytesFromUpstream.load())),
            ])),
            ("memory", JSON.object([
                ("entries", String(memory.entries)), ("bytes", String(memory.bytes)), ("max_bytes", String(config.memory.maxBytes)),
                ("evictions", String(memory.evictions)), ("files", String(MemoryFileBudget.shared.count)),
            ])),
            ("disk", diskJSON),
            ("coalescing", JSON.object([
                ("fills", String(stats.fillsStarted.load())), ("coalesced", String(stats.requestsCoalesced.load())),
                ("released", String(stats.waitersReleased.load())), ("timed_out", String(stats.waitersTimedOut.load())),
            ])),
            ("upstream", JSON.object([
                ("requests", String(stats.upstreamRequests.load())),
                ("retries", JSON.object(stats.retries.sorted { $0.key < $1.key }.map { ($0.key, String($0.value.load())) })),
                ("retries_total", String(stats.retries.values.reduce(0) { $0 + $1.load() })),
                ("failures", JSON.object(stats.finalFailures.sorted { $0.key < $1.key }.map { ($0.key, String($0.value.load())) })),
                ("retry_budget_exhausted", String(shared.retryBudget.exhausted.load())),
                ("revalidated", String(stats.revalidated.load())), ("stale_if_error", String(stats.staleServedOnError.load())),
            ])),
            ("connections", JSON.object([
                ("active", String(stats.activeConnections.load())), ("accepted", String(stats.acceptedConnections.load())),
                ("rejected", String(stats.rejectedConnections.load())),
                ("evicted_idle", String(stats.evictedIdleConnections.load())),
            ])),
            ("busy_poll", JSON.object([
                ("caught", String(stats.busyPollsCaught.load())), ("expired", String(stats.busyPollsExpired.load())),
            ])),
            ("tunnels", JSON.object([
                ("opened", String(stats.tunnelsOpened.load())), ("bytes_up", String(stats.tunnelBytesUp.load())),
                ("bytes_down", String(stats.tunnelBytesDown.load())),
            ])),
            ("parents", parentsJSON),
            ("parent_failovers", failovers),
            ("top_hosts", "[" + hosts.joined(separator: ",") + "]"),
        ]) + "\n"
    }
}

/// Build facts.
public enum Version {
    public static let larder = "0.1.0"
}
