import Dispatch
import Glibc
import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import Logging
import Synchronization

/// The daemon: binds the listeners, runs the event loops, reloads and drains.
///
/// State: `loops` is written once by ``start()`` and read by later calls (all from the main
/// thread in practice, guarded anyway); everything else is immutable or thread-safe.
public final class Server: Sendable {
    let shared: SharedState
    private let loops = Mutex<[EventLoopHandle]>([])
    private let bound = Mutex<[(Listener.Kind, SocketAddress)]>([])

    /// Creates a server for `config`; nothing is bound until ``start()``.
    public init(config: Config, logger: Logger) {
        shared = SharedState(runtime: RuntimeConfig(config: config), logger: logger)
    }

    /// The addresses actually bound (port 0 resolved), proxy first.
    public var proxyAddresses: [SocketAddress] { bound.withLock { $0.filter { $0.0 == .proxy }.map(\.1) } }
    public var adminAddress: SocketAddress? { bound.withLock { $0.first { $0.0 == .admin }?.1 } }

    /// Binds every listener, then starts the event loops. Throws if any address cannot be bound.
    public func start() throws(SystemError) {
        let config = shared.currentRuntime.config
        var sockets: [(Listener.Kind, Socket)] = []
        do {
            for address in config.proxy.listen {
                sockets.append((.proxy, try Socket.listen(on: address)))
            }
            if let admin = config.admin.listen {
                sockets.append((.admin, try Socket.listen(on: admin)))
            }
        } catch {
            for (_, socket) in sockets { socket.close() }
            throw error
        }
        bound.withLock { list in
            list = sockets.compactMap { kind, socket in (try? socket.localAddress()).flatMap { $0 }.map { (kind, $0) } }
        }
        shared.disk?.start()
        let workers = config.proxy.workers > 0 ? config.proxy.workers : 1
        var handles: [EventLoopHandle] = []
        for index in 0..<workers {
            let handle = try EventLoop.start(name: "larder-loop-\(index)", index: index)
            handles.append(handle)
        }
        let shared = self.shared
        let listeners = sockets
        let ready = DispatchSemaphore(value: 0)
        for handle in handles {
            handle.execute { loop in
                let proxy = ProxyLoop(loop: loop, shared: shared, runtime: shared.currentRuntime)
                loop.context = proxy
                for (kind, socket) in listeners {
                    do {
                        try proxy.listen(on: socket, kind: kind)
                    } catch {
                        shared.logger.error("cannot watch listener", metadata: ["error": "\(error)"])
                    }
                }
                ready.signal()
            }
        }
        for _ in handles { ready.wait() }
        loops.withLock { $0 = handles }
    }

    /// Applies `config` to new requests on every loop; requests in flight keep their config.
    public func apply(_ config: Config) {
        let runtime = shared.runtime.withLock { current in
            current = RuntimeConfig(config: config, generation: current.generation + 1)
            return current
        }
        let memory = config.memory
        shared.memory.setLimits(
            .init(maxBytes: memory.maxBytes, maxEntries: memory.maxEntries, maxObjectBytes: memory.maxObjectBytes))
        shared.disk?.setLimits(.init(maxBytes: config.disk.maxBytes, maxObjectBytes: config.disk.maxObjectBytes))
        shared.retryBudget.setLimits(ratio: config.retry.budgetRatio, floor: config.retry.budgetMin)
        for handle in loops.withLock({ $0 }) {
            handle.execute { loop in (loop.context as? ProxyLoop)?.apply(runtime) }
        }
    }

    /// The configuration currently applied.
    public var config: Config { shared.currentRuntime.config }

    /// Stops accepting, lets in-flight exchanges finish for up to `timeout`, then closes the
    /// rest and stops the loops.
    public func shutdown(drainTimeout timeout: Duration) {
        let handles = loops.withLock { $0 }
        for handle in handles {
            handle.execute { loop in (loop.context as? ProxyLoop)?.beginDraining() }
        }
        let deadline = Clocks.monotonicNanos() + timeout.totalNanoseconds
        while shared.stats.activeConnections.load() > 0, Clocks.monotonicNanos() < deadline {
            usleep(20_000)
        }
        let done = DispatchSemaphore(value: 0)
        for handle in handles {
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.closeAll()
                loop.context = nil
                loop.stop()
                done.signal()
            }
        }
        for _ in handles { done.wait() }
        // Queued disk writes finish (or fail) before exit, so nothing half-written is left
        // in tmp/ by an orderly stop.
        shared.disk?.stop()
    }

    /// Removes every stored variant of `url` from memory and disk. Returns whether anything
    /// was stored. `url` must be an absolute http(s) URL.
    public func purge(url: String) throws(HTTPParseError) -> Bool {
        shared.purge(CacheKey(try AbsoluteURL(parsing: url)))
    }

    /// Empties both cache tiers.
    public func removeAll() {
        shared.removeAll()
    }

    /// Counters, for the admin endpoint and tests.
    public var statistics: Statistics { shared.stats }
}
