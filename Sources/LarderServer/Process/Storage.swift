import LarderCache
import LarderConfig
import LarderIO
import Logging

/// The cache tiers as the daemon set them up, why the disk tier is missing or degraded, and the
/// thread that walks them for the admin API. One instance, built by ``SharedState``.
///
/// Users: the loops read `cache` (lookups, fills, the disk-store queue); `/healthz`, `/stats`
/// and `larder_disk_degraded` read `healthProblems`; the cache admin routes submit walks to
/// `walker`; ``Server`` starts, reconfigures and stops the tiers.
///
/// State: immutable after init; ``TieredCache`` is thread-safe on its own.
final class Storage: Sendable {
    /// Memory in front of disk (the disk tier is nil when its directory could not be set up).
    let cache: TieredCache
    /// Why the disk tier the configuration asks for could not be set up (nil: it was).
    let diskProblem: String?
    /// The thread that walks the cache for admin listings and bans (disk heads are read, and a
    /// ban of a million entries takes a while: neither belongs on an event loop).
    let walker = BlockingWorker(name: "larder-admin")

    init(config: Config, logger: Logger) {
        let memory = config.memory
        let memoryTier = MemoryCache(
            limits: .init(maxBytes: memory.maxBytes, maxEntries: memory.maxEntries, maxObjectBytes: memory.maxObjectBytes))
        let diskConfig = config.disk
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
}
