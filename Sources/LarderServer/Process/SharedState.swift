import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderTLS
import LarderUpstream
import Logging
import Synchronization

/// What all event loops share: the cache tiers, the counters, the current configuration.
///
/// State: `memory` and `stats` are thread-safe on their own; `runtime` is guarded by its mutex
/// and read once per loop on reload, never per request.
final class SharedState: Sendable {
    /// Memory in front of disk (the disk tier is nil when its directory could not be set up).
    let cache: TieredCache
    /// Why the disk tier the configuration asks for could not be set up (nil: it was).
    let diskProblem: String?
    /// Where the loops write access lines (`log.access_file`, restart-only).
    let accessLogFile: AccessLogFile
    let stats = Statistics()
    /// Which loop fetches each key (several loops only).
    let fills = FillRegistry()
    /// Retries across all loops, capped at a share of upstream requests.
    let retryBudget: RetryBudget
    /// The addresses this daemon listens on, for the destination policy.
    let ownAddresses = Locked(OwnAddresses())
    /// Each loop's last heartbeat (monotonic ns), for the systemd watchdog.
    let heartbeats = Locked<[UInt64]>([])
    /// Requests and bytes per origin host, for the dashboard.
    let hosts = HostCounters()
    /// Requests and bytes per route (a preset's by its name, a file's by its `match`).
    let routeCounters = HostCounters(capacity: 200)
    /// The last failed requests and their causes, for the dashboard.
    let recentFailures = RecentFailures()
    /// The counters sampled over the last 15 minutes, for the dashboard's chart.
    let history = StatsHistory()
    /// The Prometheus view of the counters.
    let metrics: MetricsExporter
    /// This process's identity in `Via` on forwarded requests (`1.1 larder (id)`), so a request
    /// that comes back through this same daemon is recognised as a loop (RFC 9110 §7.6.3).
    let viaIdentity: String
    /// This hop's `Via` element on forwarded requests and CONNECTs, built once.
    let viaElement: String

    /// The `Via` value a request goes on with: the elements it came with, then this hop's
    /// (RFC 9110 §7.6.3).
    func via(after headers: HTTPHeaders) -> String {
        headers.combined("Via").map { $0 + ", " + viaElement } ?? viaElement
    }
    /// Parent proxies that are backing off, and per-parent counters (kept across reloads).
    let parentHealth = ParentHealth()
    /// How intercepted hosts' client handshakes went, and which are spliced (tunnelled blind).
    let interceptedHosts = InterceptedHosts()
    /// What the mints a reload replaced (a rotated CA) had counted, so the totals only grow.
    let retiredMints = Locked(CertificateMint.Statistics())

    /// Certificates minted and reused since the daemon started: the running mint's counts and
    /// those of the mints it replaced.
    func mintStatistics(current: TLSInterceptor?) -> CertificateMint.Statistics {
        var total = retiredMints.withLock { $0 }
        if let running = current?.mint.statistics {
            total.minted += running.minted
            total.hits += running.hits
        }
        return total
    }
    /// Proxy authentication: the verdict table and the hashing thread.
    let authenticator = ProxyAuthenticator()
    /// Threads that resolve CONNECT targets (getaddrinfo blocks, so never on a loop). Jobs go
    /// round-robin, so one slow DNS answer holds up only the lookups queued behind it.
    private let resolvers = (0..<4).map { BlockingWorker(name: "larder-dns-\($0)") }
    /// The thread that walks the cache for admin listings and bans (disk heads are read, and a
    /// ban of a million entries takes a while: neither belongs on an event loop).
    let adminWorker = BlockingWorker(name: "larder-admin")
    private let nextResolver = Atomic<Int>(0)
    let logger: Logger
    let runtime: Locked<RuntimeConfig>
    /// Wall-clock start, for uptime.
    let startTime = Clocks.wallSeconds()

    /// A parent proxy could not be reached (by a fill or a tunnel): it is skipped for
    /// `backoff`, and the moment it goes down is logged once.
    func parentUnreachable(_ parent: ParentPlan.Parent, backoff: Duration, error: String) {
        guard parentHealth.recordFailure(parent, backoff: backoff) else { return }
        logger.warning(
            "parent proxy unreachable; skipping it for \(backoff.totalMilliseconds / 1000)s",
            metadata: ["parent": "\(parent.label)", "error": "\(error)"])
    }

    init(runtime: RuntimeConfig, logger: Logger) {
        let memory = runtime.config.memory
        let memoryTier = MemoryCache(
            limits: .init(maxBytes: memory.maxBytes, maxEntries: memory.maxEntries, maxObjectBytes: memory.maxObjectBytes))
        self.runtime = Locked(runtime)
        self.logger = logger
        viaIdentity = "larder-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        viaElement = "1.1 larder (\(viaIdentity))"
        retryBudget = RetryBudget(ratio: runtime.config.retry.budgetRatio, floor: runtime.config.retry.budgetMin)
        metrics = MetricsExporter()
        let diskConfig = runtime.config.disk
        var diskTier: DiskCache?
        var problem: String?
        do {
            diskTier = try DiskCache(
                directory: diskConfig.path,
                limits: .init(maxBytes: diskConfig.maxBytes, maxObjectBytes: diskConfig.maxObjectBytes), logger: logger)
            diskTier?.scrubber.rate.store(diskConfig.scrubRate, ordering: .relaxed)
        } catch {
            logger.error(
                "disk cache unavailable; storing in memory only", metadata: ["directory": "\(diskConfig.path)", "error": "\(error)"])
            problem = "disk tier unavailable (\(diskConfig.path)): \(error)"
        }
        diskProblem = problem
        accessLogFile = AccessLogFile(path: runtime.config.log.accessFile)
        cache = TieredCache(memory: memoryTier, disk: diskTier)
    }

    /// What keeps the cache from working as configured, for `/healthz`, `/stats` and
    /// `larder_disk_degraded`: the disk tier missing, or refusing writes after an error.
    var healthProblems: [String] {
        if let diskProblem { return [diskProblem] }
        if let directory = cache.degradedDiskDirectory {
            return ["disk tier refusing writes after an error (\(directory)); storing in memory only for now"]
        }
        return []
    }

    /// Resolves `host` on a resolver thread; `completion` runs on that thread, or at once for a
    /// name pinned in `upstream.resolve` (its addresses, without a lookup, as curl's transfers).
    func resolve(
        _ host: String, port: UInt16, completion: @escaping @Sendable (Result<[SocketAddress], Resolver.Failure>) -> Void
    ) {
        if let pinned = ResolveEntry.addresses(for: host, port: Int(port), in: currentRuntime.config.upstream.resolve) {
            completion(.success(pinned))
            return
        }
        let index = nextResolver.add(1, ordering: .relaxed).oldValue % resolvers.count
        resolvers[index].submit { completion(Resolver.resolve(host, port: port)) }
    }

    /// Ends the helper threads (after the loops stopped).
    func stopHelpers() {
        authenticator.stop()
        for resolver in resolvers { resolver.stop() }
        adminWorker.stop()
    }

    var currentRuntime: RuntimeConfig { runtime.withLock { $0 } }

    /// Listen addresses, filled in once the sockets are open.
    struct OwnAddresses: Sendable {
        var proxy: [SocketAddress] = []
        var admin: SocketAddress?
        var activated = false
    }
}
