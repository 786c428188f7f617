import FoundationEssentials
import LarderIO
import LarderUpstream

/// The `/stats` document: every counter an operator, the dashboard or `larder stats` wants.
/// The daemon encodes it and `larder stats` decodes it with this same type; `/metrics` reads
/// its values from it too (``MetricsTable``), so the two views cannot disagree. JSON keys are
/// the property names in snake case (`uptime_seconds`, `from_cache`).
public struct StatsDocument: Codable, Sendable, Equatable {
    public var version: String
    public var uptimeSeconds: Double
    /// Event loops serving (`proxy.workers`).
    public var workers: Int
    /// `total` and one count per outcome (`hit`, `disk_hit`, `miss`, ...).
    public var requests: [String: Int]
    /// Proxied requests answered from the cache (hits, stale, revalidated), 0...1.
    public var hitRatio: Double
    public var bytes: Bytes
    public var memory: Memory
    /// nil (`null`) when the disk tier could not be set up.
    public var disk: Disk?
    public var coalescing: Coalescing
    public var upstream: Upstream
    /// Stored URLs invalidated by unsafe requests or purges.
    public var invalidations: Int
    public var connections: Connections
    public var refused: Refused
    public var busyPoll: BusyPoll
    public var tunnels: Tunnels
    public var parents: [Parent]
    public var parentFailovers: Int
    public var topHosts: [Host]
    /// HTTPS interception (`[tls]`).
    public var tls: TLS
    /// What `/healthz` says (nil from a daemon older than the field).
    public var health: Health?
    /// Proxied responses by status class: "1xx" ... "5xx" (nil from a daemon older than the field).
    public var responses: [String: Int]?
    /// Storable responses not stored because `cache.admission` waits for a second request (nil
    /// from a daemon older than the field).
    public var admissionsDeferred: Int?
    /// Bodies that did not match the digest their URL names, never stored nor served whole
    /// (nil from a daemon older than the field).
    public var digestMismatches: Int?
    /// Hit and miss latency since the start, from the request duration histogram (nil from a
    /// daemon older than the field).
    public var latency: Latency?
    /// The last failed requests, oldest first, with the access log's cause (nil from a daemon
    /// older than the field).
    public var recentFailures: [Failure]?
    /// The counters sampled over the last 15 minutes (nil from a daemon older than the field).
    public var history: History?
    /// Requests and bytes per route: a preset's under `preset NAME`, a file's under its
    /// `match` (nil from a daemon older than the field).
    public var routes: [Route]?

    /// p50 and p99 of the requests answered from the cache (`hit`) and after the origin
    /// (`miss`), in seconds to the microsecond; nil until one was.
    public struct Latency: Codable, Sendable, Equatable {
        public var hit: Quantiles
        public var miss: Quantiles
    }

    public struct Quantiles: Codable, Sendable, Equatable {
        public var count: Int
        public var p50Seconds: Double?
        public var p99Seconds: Double?
    }

    /// One failed request: when (Unix seconds), the client's address, what (its URL's query
    /// redacted as in the access log), the status and the cause (the access log's `detail`).
    public struct Failure: Codable, Sendable, Equatable {
        public var time: Double
        /// Absent from a daemon older than the field.
        public var client: String?
        public var method: String
        public var url: String
        public var status: Int
        public var cause: String
    }

    /// Samples of running totals every `interval_seconds`, oldest first, at most `capacity`.
    public struct History: Codable, Sendable, Equatable {
        public var intervalSeconds: Double
        public var capacity: Int
        public var samples: [Sample]
    }

    public struct Sample: Codable, Sendable, Equatable {
        /// Seconds since the daemon started (as `uptime_seconds`).
        public var uptimeSeconds: Double
        /// Proxied requests by outcome, running totals.
        public var requests: [String: Int]
        public var fromCache: Int
        public var fromUpstream: Int
    }

    public struct Route: Codable, Sendable, Equatable {
        public var route: String
        public var requests: Int
        public var hits: Int
        public var bytes: Int
        /// Bytes served from the cache: what it saved fetching.
        public var bytesSaved: Int
    }

    /// `status` is "ok", "draining" or "unhealthy"; `problems` says why when it is not ok.
    public struct Health: Codable, Sendable, Equatable {
        public var status: String
        public var problems: [String]
    }

    public struct Bytes: Codable, Sendable, Equatable {
        public var fromCache: Int
        public var fromUpstream: Int
    }

    public struct Memory: Codable, Sendable, Equatable {
        public var entries: Int
        public var bytes: Int
        public var maxBytes: Int
        public var evictions: Int
        /// Anonymous memory files holding large bodies.
        public var files: Int
    }

    public struct Disk: Codable, Sendable, Equatable {
        public var entries: Int
        public var bytes: Int
        public var maxBytes: Int
        public var evictions: Int
        public var corruptions: Int
        public var writeErrors: Int
        public var degraded: Bool
        public var indexComplete: Bool
        public var path: String
        public var scrubbedBytes: Int
    }

    public struct Coalescing: Codable, Sendable, Equatable {
        public var fills: Int
        public var coalesced: Int
        /// Requests moved to the loop already fetching their URL.
        public var moved: Int
        public var released: Int
        public var timedOut: Int
    }

    public struct Upstream: Codable, Sendable, Equatable {
        public var requests: Int
        public var retries: [String: Int]
        public var retriesTotal: Int
        public var failures: [String: Int]
        public var retryBudgetExhausted: Int
        public var revalidated: Int
        public var staleIfError: Int
        public var backgroundRefreshes: Int
        public var deadConnectionRetries: Int
        /// Pooled connections closed unused while idle, by why (``IdleConnectionClose``; nil from
        /// a daemon older than the field).
        public var idleConnectionsClosed: [String: Int]? = nil
        /// Exchanges that failed for good without a usable response (no status: DNS, connect,
        /// timeout, reset, TLS...); nil from a daemon older than the field.
        public var errors: Int? = nil
        /// Requests that waited for their client's share of an origin's connections;
        /// transfers paused for slow clients cut for others; transfers of clients holding more
        /// connections than one that waited, cut for it (nil from a daemon older than the
        /// fields).
        public var shareWaits: Int? = nil
        public var slowClientCuts: Int? = nil
        public var overShareCuts: Int? = nil
    }

    public struct Connections: Codable, Sendable, Equatable {
        public var active: Int
        public var accepted: Int
        public var rejected: Int
        public var evictedIdle: Int
        /// Open admin connections, apart from `active` (nil from a daemon older than the field).
        public var admin: Int? = nil
        /// Connections of a client holding two more than a newcomer, closed to admit it at
        /// max_connections (nil from a daemon older than the field).
        public var takenForOthers: Int? = nil
    }

    /// Requests refused before any cache or upstream work.
    public struct Refused: Codable, Sendable, Equatable {
        public var badRequests: Int
        public var destinations: Int
        public var proxyAuth: Int
    }

    public struct BusyPoll: Codable, Sendable, Equatable {
        public var caught: Int
        public var expired: Int
    }

    public struct Tunnels: Codable, Sendable, Equatable {
        public var opened: Int
        public var bytesUp: Int
        public var bytesDown: Int
    }

    public struct Parent: Codable, Sendable, Equatable {
        public var parent: String
        public var requests: Int
        public var failures: Int
        public var skipped: Int
        public var down: Bool
    }

    public struct TLS: Codable, Sendable, Equatable {
        /// Whether `tls.intercept` lists any host.
        public var intercepting: Bool
        /// Server handshakes with intercepted clients, by outcome (`ok`, `rejected`, `closed`,
        /// `failed`, `timeout`).
        public var handshakes: [String: Int]
        public var certificatesMinted: Int
        /// Handshakes that reused a certificate minted before.
        public var certificateCacheHits: Int
        /// Requests answered inside intercepted sessions, by outcome (also in `requests`).
        public var requests: [String: Int]
        /// CONNECTs to an intercepted host tunnelled blind because it is spliced.
        public var splicedTunnels: Int
        /// Hosts spliced now for at least one client (`tls.splice_after_failures`).
        public var splicedHosts: Int
        /// How file bodies leave intercepted sessions: `ktls` once a session had the kernel's
        /// TLS offload (SSL_sendfile, zero-copy), else `copy` (read, encrypted in user space).
        public var bodyPath: String
        /// Sessions that had the kernel's TLS offload.
        public var kernelSessions: Int
        /// Hosts whose clients failed handshakes, most failures first.
        public var failingHosts: [TLSHost]
    }

    public struct TLSHost: Codable, Sendable, Equatable {
        public var host: String
        public var failures: Int
        /// The last failure: its outcome and reason (the client's alert).
        public var lastFailure: String
        /// Whether any client is spliced for the host now.
        public var spliced: Bool
        /// How many clients are spliced for it now (a splice applies to one client).
        public var splicedClients: Int?
    }

    public struct Host: Codable, Sendable, Equatable {
        public var host: String
        public var requests: Int
        public var hits: Int
        public var bytes: Int
    }

    /// The JSON text (snake-case keys, sorted, `disk: null` when there is no disk tier).
    public func json() throws -> [UInt8] { try SnakeCaseJSON.encode(self) }

    /// Reads the JSON text `json()` wrote.
    public static func decode(_ bytes: [UInt8]) throws -> StatsDocument { try SnakeCaseJSON.decode(StatsDocument.self, from: bytes) }

    private enum CodingKeys: String, CodingKey {
        case version, uptimeSeconds, workers, requests, hitRatio, bytes, memory, disk, coalescing, upstream, invalidations
        case connections, refused, busyPoll, tunnels, parents, parentFailovers, topHosts, tls, health, responses
        case admissionsDeferred
        case digestMismatches
        case latency, recentFailures, history, routes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(uptimeSeconds, forKey: .uptimeSeconds)
        try container.encode(workers, forKey: .workers)
        try container.encode(requests, forKey: .requests)
        try container.encode(hitRatio, forKey: .hitRatio)
        try container.encode(bytes, forKey: .bytes)
        try container.encode(memory, forKey: .memory)
        try container.encode(disk, forKey: .disk)  // null, not absent, without a disk tier
        try container.encode(coalescing, forKey: .coalescing)
        try container.encode(upstream, forKey: .upstream)
        try container.encode(invalidations, forKey: .invalidations)
        try container.encode(connections, forKey: .connections)
        try container.encode(refused, forKey: .refused)
        try container.encode(busyPoll, forKey: .busyPoll)
        try container.encode(tunnels, forKey: .tunnels)
        try container.encode(parents, forKey: .parents)
        try container.encode(parentFailovers, forKey: .parentFailovers)
        try container.encode(topHosts, forKey: .topHosts)
        try container.encode(tls, forKey: .tls)
        try container.encodeIfPresent(health, forKey: .health)
        try container.encodeIfPresent(responses, forKey: .responses)
        try container.encodeIfPresent(admissionsDeferred, forKey: .admissionsDeferred)
        try container.encodeIfPresent(digestMismatches, forKey: .digestMismatches)
        try container.encodeIfPresent(latency, forKey: .latency)
        try container.encodeIfPresent(recentFailures, forKey: .recentFailures)
        try container.encodeIfPresent(history, forKey: .history)
        try container.encodeIfPresent(routes, forKey: .routes)
    }
}

extension StatsDocument {
    /// The figures ``Statistics`` counts, and nothing else: zero tiers, no parents, hosts,
    /// health or history. Every ``Counter`` and ``CounterFamily`` is written to its declared field, which is what a unit test walks (each counter moves a
    /// ``MetricsTable`` row).
    init(counters stats: Statistics) {
        self.init(
            version: Version.larder, uptimeSeconds: 0, workers: 0, requests: [:], hitRatio: 0,
            bytes: Bytes(fromCache: 0, fromUpstream: 0),
            memory: Memory(entries: 0, bytes: 0, maxBytes: 0, evictions: 0, files: 0), disk: nil,
            coalescing: Coalescing(fills: 0, coalesced: 0, moved: 0, released: 0, timedOut: 0),
            upstream: Upstream(
                requests: 0, retries: [:], retriesTotal: 0, failures: [:], retryBudgetExhausted: 0, revalidated: 0, staleIfError: 0,
                backgroundRefreshes: 0, deadConnectionRetries: 0),
            invalidations: 0,
            connections: Connections(active: 0, accepted: 0, rejected: 0, evictedIdle: 0),
            refused: Refused(badRequests: 0, destinations: 0, proxyAuth: 0),
            busyPoll: BusyPoll(caught: 0, expired: 0),
            tunnels: Tunnels(opened: 0, bytesUp: 0, bytesDown: 0),
            parents: [], parentFailovers: 0, topHosts: [],
            tls: TLS(
                intercepting: false, handshakes: [:], certificatesMinted: 0, certificateCacheHits: 0, requests: [:], splicedTunnels: 0,
                splicedHosts: 0, bodyPath: stats[.kernelSessions].load() > 0 ? "ktls" : "copy", kernelSessions: 0, failingHosts: []))
        for family in CounterFamily.allCases { family.write(stats.values(family), into: &self) }
        // Sums shown beside their families.
        requests["total"] = requests.values.reduce(0, +)
        upstream.retriesTotal = upstream.retries.values.reduce(0, +)
        let proxied = RequestOutcome.proxied.reduce(0) { $0 + stats.value($1) }
        let fromCache = RequestOutcome.fromCache.reduce(0) { $0 + stats.value($1) }
        hitRatio = proxied > 0 ? Double(fromCache) / Double(proxied) : 0
        for counter in Counter.allCases { counter.write(stats[counter].load(), into: &self) }
    }

    /// The document for the running daemon now: the counters, then what their owners hold
    /// (the tiers, parents, hosts, TLS hosts, health, latency, history, routes), read under
    /// `runtime`, the configuration in force.
    init(telemetry: Telemetry, storage: Storage, forwarding: Forwarding, tunnelling: Tunnelling, runtime: RuntimeConfig) {
        self.init(counters: telemetry.stats)
        let config = runtime.config
        uptimeSeconds = telemetry.uptime
        workers = forwarding.fills.loopCount
        let memory = storage.cache.memoryStatistics
        self.memory = Memory(
            entries: memory.entries, bytes: memory.bytes, maxBytes: config.memory.maxBytes, evictions: memory.evictions,
            files: MemoryFileBudget.shared.count)
        disk = storage.cache.diskStatistics.map { disk in
            let figures = disk.figures
            return Disk(
                entries: figures.entries, bytes: Int(figures.bytes), maxBytes: Int(config.disk.maxBytes), evictions: figures.evictions,
                corruptions: figures.corruptions, writeErrors: figures.writeErrors, degraded: figures.degraded,
                indexComplete: figures.indexComplete, path: disk.directory, scrubbedBytes: disk.scrubbedBytes)
        }
        upstream.retryBudgetExhausted = forwarding.retryBudget.exhausted.load()
        // Every configured parent, plus any a route or an earlier configuration used.
        let health = forwarding.parentHealth.snapshot()
        let now = Clocks.monotonicNanos()
        let configured = runtime.parents.parents.map(\.label)
        let labels = configured + health.keys.filter { !configured.contains($0) }.sorted()
        parents = labels.map { label in
            let entry = health[label] ?? ParentHealth.Counters()
            return Parent(
                parent: label, requests: entry.requests, failures: entry.failures, skipped: entry.skips, down: entry.downUntil > now)
        }
        topHosts = telemetry.hosts.top(10).map { entry in
            Host(host: entry.host, requests: entry.counts.requests, hits: entry.counts.hits, bytes: entry.counts.bytes)
        }
        tls.take(tunnelling, runtime: runtime, now: now)
        self.health = Health(status: storage.healthProblems.isEmpty ? "ok" : "unhealthy", problems: storage.healthProblems)
        admissionsDeferred = storage.cache.admissionsDeferred.load()
        latency = Latency(telemetry.metrics.requestDuration)
        recentFailures = telemetry.recentFailures.all.map {
            Failure(time: $0.time, client: $0.client, method: $0.method, url: $0.url, status: $0.status, cause: $0.cause.rawValue)
        }
        history = History(
            intervalSeconds: Double(telemetry.history.interval) / 1e9, capacity: telemetry.history.capacity,
            samples: telemetry.history.samples.map {
                Sample(uptimeSeconds: $0.uptime, requests: $0.requests, fromCache: $0.bytesFromCache, fromUpstream: $0.bytesFromUpstream)
            })
        routes = telemetry.routeCounters.top(50).map { entry in
            Route(
                route: entry.host, requests: entry.counts.requests, hits: entry.counts.hits, bytes: entry.counts.bytes,
                bytesSaved: entry.counts.savedBytes)
        }
    }
}

extension StatsDocument.Latency {
    init(_ histogram: RequestDurationHistogram) {
        // Estimates within a bucket: microseconds are precision enough, and short decimals
        // read back as the same number in every JSON parser.
        func micro(_ seconds: Double) -> Double { (seconds * 1e6).rounded() / 1e6 }
        func quantiles(_ answer: RequestDurationHistogram.Answer) -> StatsDocument.Quantiles {
            let counts = histogram.counts([answer])
            return StatsDocument.Quantiles(
                count: counts.reduce(0, +),
                p50Seconds: RequestDurationHistogram.quantile(0.5, counts: counts, bounds: histogram.bounds).map(micro),
                p99Seconds: RequestDurationHistogram.quantile(0.99, counts: counts, bounds: histogram.bounds).map(micro))
        }
        self.init(hit: quantiles(.hit), miss: quantiles(.miss))
    }
}

extension StatsDocument.TLS {
    /// What the interceptor, the certificate mint and the host table hold; the counters came
    /// from ``Statistics``.
    mutating func take(_ tunnelling: Tunnelling, runtime: RuntimeConfig, now: UInt64) {
        let mint = tunnelling.mintStatistics(current: runtime.interceptor)
        intercepting = runtime.interceptor != nil
        certificatesMinted = mint.minted
        certificateCacheHits = mint.hits
        splicedHosts = tunnelling.interceptedHosts.splicedHosts(now: now).count
        failingHosts = tunnelling.interceptedHosts.failing(10, now: now).map { host, failures, splicedClients in
            StatsDocument.TLSHost(
                host: host, failures: failures.count, lastFailure: failures.last, spliced: splicedClients > 0,
                splicedClients: splicedClients)
        }
    }
}

/// Build facts.
public enum Version {
    public static let larder = "0.1.0"
}
