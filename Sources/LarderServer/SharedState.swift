import LarderCache
import LarderConfig
import LarderIO
import LarderUpstream
import Logging
import Synchronization

/// What all event loops share: the cache tiers, the counters, the current configuration.
///
/// State: `memory` and `stats` are thread-safe on their own; `runtime` is guarded by its mutex
/// and read once per loop on reload, never per request.
final class SharedState: Sendable {
    let memory: MemoryCache
    /// The persistent tier; nil when its directory could not be set up (memory-only).
    let disk: DiskCache?
    let stats = Statistics()
    /// Retries across all loops, capped at a share of upstream requests.
    let retryBudget: RetryBudget
    let logger: Logger
    let runtime: Mutex<RuntimeConfig>
    /// Wall-clock start, for uptime.
    let startTime = Clocks.wallSeconds()

    init(runtime: RuntimeConfig, logger: Logger) {
        let memory = runtime.config.memory
        self.memory = MemoryCache(
            limits: .init(maxBytes: memory.maxBytes, maxEntries: memory.maxEntries, maxObjectBytes: memory.maxObjectBytes))
        self.runtime = Mutex(runtime)
        self.logger = logger
        retryBudget = RetryBudget(ratio: runtime.config.retry.budgetRatio, floor: runtime.config.retry.budgetMin)
        let diskConfig = runtime.config.disk
        do {
            disk = try DiskCache(
                directory: diskConfig.path,
                limits: .init(maxBytes: diskConfig.maxBytes, maxObjectBytes: diskConfig.maxObjectBytes), logger: logger)
        } catch {
            logger.error(
                "disk cache unavailable; storing in memory only", metadata: ["directory": "\(diskConfig.path)", "error": "\(error)"])
            disk = nil
        }
    }

    /// Removes every stored variant of `url` from both tiers. Returns whether anything was stored.
    @discardableResult
    func purge(_ key: CacheKey) -> Bool {
        let inMemory = memory.remove(key)
        let onDisk = disk?.purge(key) ?? false
        return inMemory || onDisk
    }

    /// Empties both tiers.
    func removeAll() {
        memory.removeAll()
        disk?.removeAll()
    }

    var currentRuntime: RuntimeConfig { runtime.withLock { $0 } }
}
