import LarderCache
import LarderConfig
import LarderIO
import Logging
import Synchronization

/// What all event loops share: the cache tiers, the counters, the current configuration.
///
/// State: `memory` and `stats` are thread-safe on their own; `runtime` is guarded by its mutex
/// and read once per loop on reload, never per request.
final class SharedState: Sendable {
    let memory: MemoryCache
    let stats = Statistics()
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
    }

    var currentRuntime: RuntimeConfig { runtime.withLock { $0 } }
}
