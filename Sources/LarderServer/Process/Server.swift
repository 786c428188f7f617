import Dispatch
import Glibc
import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderTLS
import Logging

/// The daemon: binds the listeners (or takes them from systemd), runs the event loops,
/// reloads, and drains on shutdown, telling the service manager at each step.
///
/// State: `loops` and `sockets` are written once by ``start()`` and read by later calls (from
/// the main thread in practice, guarded anyway); everything else is immutable or thread-safe.
public final class Server: Sendable {
    let shared: SharedState
    private let loops = Locked<[EventLoopHandle]>([])
    private let sockets = Locked<[(Listener.Kind, Socket)]>([])
    private let lifeStage = Locked<ServerLife>(.starting)

    /// Where the daemon is: starting, running, draining or stopped.
    public var life: ServerLife { lifeStage.withLock { $0 } }

    /// Takes the step `event` allows from the current stage; returns the new stage, or nil
    /// (and changes nothing) when the step is not one the current stage takes.
    @discardableResult
    private func move(_ event: ServerLife.Event) -> ServerLife? {
        lifeStage.withLock { stage in
            guard let next = stage.after(event) else { return nil }
            stage = next
            return next
        }
    }

    /// Creates a server for `config` (and the interceptor its `[tls]` asks for, made by
    /// ``TLSInterceptor/make(for:replacing:)``); nothing is bound until ``start()``.
    public init(config: Config, interceptor: TLSInterceptor?, logger: Logger) {
        shared = SharedState(runtime: RuntimeConfig(config: config, interceptor: interceptor), logger: logger)
    }

    /// Why the disk tier could not be set up (nil: it was); the daemon runs memory-only then,
    /// unless `disk.required` says it must not.
    public var diskProblem: String? { shared.storage.diskProblem }

    /// The addresses actually bound (port 0 resolved).
    public var proxyAddresses: [SocketAddress] { shared.process.ownAddresses.withLock { $0.proxy } }
    public var adminAddress: SocketAddress? { shared.process.ownAddresses.withLock { $0.admin } }
    /// How many event loops serve (``start()`` sets it: `proxy.workers`, or ``CPUBudget``).
    public var workerCount: Int { loops.withLock { $0.count } }
    /// Whether the listeners came from systemd socket activation.
    public var socketActivated: Bool { shared.process.ownAddresses.withLock { $0.activated } }

    /// Binds every listener (or adopts the sockets systemd passed: `FileDescriptorName=proxy`
    /// and `admin`), starts the event loops, and tells systemd it is ready. Throws if an
    /// address cannot be bound.
    public func start() throws(SystemError) {
        do {
            try bindAndRun()
        } catch {
            move(.startFailed)
            throw error
        }
        move(.started)
        // READY only now: every loop watches the listening sockets, so connections are accepted.
        Systemd.notify("READY=1\nSTATUS=\(statusLine)")
    }

    private func bindAndRun() throws(SystemError) {
        let config = shared.process.currentRuntime.config
        // The soft limit goes up to the hard one, as HAProxy does; only a hard limit too low to
        // hold max_connections clients is worth a warning (DescriptorBudget).
        let descriptors = ResourceLimits.raiseOpenFiles()
        // Large memory-tier bodies live in anonymous memory files, one descriptor each, up to an
        // eighth of the limit (past that they stay in arrays, which only costs speed).
        let memoryFiles = min(descriptors / 8, 1 << 16)
        MemoryFileBudget.shared.limit = memoryFiles
        // Bodies over 1 MiB too, unless the kernel's indirect calls are (or may be) retpolines.
        MemoryFileBudget.shared.fileSizes = MemoryFileBudget.fileSizes(retpolines: IndirectCalls.areRetpolines)
        let segments = shared.storage.cache.hasDiskTier ? DiskCache.segmentDescriptors(maxBytes: config.disk.maxBytes) : 0
        // Disk entry files kept open for hits on the loops (which never open one): a sixteenth
        // of the limit, at most 1,024 (a hit on one not kept is opened on the reader thread).
        let entryFiles = shared.storage.cache.hasDiskTier ? min(descriptors / 16, 1024) : 0
        shared.storage.cache.keepEntryFilesOpen(entryFiles)
        let budget = DescriptorBudget(
            limit: descriptors, maxConnections: config.proxy.maxConnections, segments: segments, memoryFiles: memoryFiles,
            entryFiles: entryFiles)
        if budget.isShort {
            shared.process.logger.warning(
                "the open-file limit holds fewer client connections than proxy.max_connections; the kernel refuses those past it",
                metadata: [
                    "limit": "\(descriptors)", "max_connections": "\(config.proxy.maxConnections)", "clients": "\(budget.clients)",
                    "needed": "\(budget.standing + 2 * config.proxy.maxConnections)",
                    "advice": "raise LimitNOFILE (systemd) or the hard ulimit -n, or lower proxy.max_connections",
                ])
        }
        var opened: [(Listener.Kind, Socket)] = []
        let passed = Systemd.listenSockets()
        if !passed.isEmpty {
            for (index, socket) in passed.enumerated() {
                let kind: Listener.Kind = socket.name == "admin" || (socket.name != "proxy" && index > 0) ? .admin : .proxy
                let adopted = Socket(fd: socket.fd)
                try adopted.setNonBlocking()
                opened.append((kind, adopted))
            }
        } else {
            // The failing call names the address and the key it came from: "bind 0.0.0.0:80
            // (proxy.listen): Address already in use".
            let wanted =
                config.proxy.listen.map { ($0, Listener.Kind.proxy, "proxy.listen") }
                + (config.admin.listen.map { [($0, .admin, "admin.listen")] } ?? [])
            for (address, kind, key) in wanted {
                do {
                    opened.append((kind, try Socket.listen(on: address)))
                } catch {
                    for (_, socket) in opened { socket.close() }
                    throw SystemError(call: "\(error.call) \(address) (\(key))", errno: error.errno)
                }
            }
        }
        let addresses = opened.compactMap { kind, socket in (try? socket.localAddress()).flatMap { $0 }.map { (kind, $0) } }
        shared.process.ownAddresses.withLock {
            $0.proxy = addresses.filter { $0.0 == .proxy }.map(\.1)
            $0.admin = addresses.first { $0.0 == .admin }?.1
            $0.activated = !passed.isEmpty
        }
        sockets.withLock { $0 = opened }
        do {
            try shared.telemetry.accessLogFile.open()
        } catch {
            for (_, socket) in opened { socket.close() }
            throw SystemError(call: "\(error.call) \(config.log.accessFile) (log.access_file)", errno: error.errno)
        }
        shared.storage.cache.start()
        let workers = config.proxy.workers ?? CPUBudget.current()
        var handles: [EventLoopHandle] = []
        for index in 0..<workers {
            handles.append(try EventLoop.start(name: "larder-loop-\(index)", index: index))
        }
        shared.forwarding.fills.setLoops(handles)
        let shared = self.shared
        let listeners = opened
        let ready = DispatchSemaphore(value: 0)
        for (index, handle) in handles.enumerated() {
            handle.execute { loop in
                let proxy = ProxyLoop(loop: loop, shared: shared, runtime: shared.process.currentRuntime)
                loop.context = proxy
                // Admin connections live on loop 0 only: one budget, one idle queue, so a health
                // check past the budget always finds an idle admin connection to close.
                for (kind, socket) in listeners where kind == .proxy || index == 0 {
                    do {
                        try proxy.listen(on: socket, kind: kind)
                    } catch {
                        shared.process.logger.error("cannot watch listener", metadata: ["error": "\(error)"])
                    }
                }
                ready.signal()
            }
        }
        for _ in handles { ready.wait() }
        loops.withLock { $0 = handles }
        startSupervision(handles)
        handles.first?.execute { loop in
            (loop.context as? ProxyLoop)?.startHistory()
            (loop.context as? ProxyLoop)?.startHousekeeping()
        }
    }

    /// Watchdog pings and STATUS updates when running under systemd. Each loop stamps a
    /// heartbeat from its own timer; loop 0 pings the watchdog at half the interval only if
    /// every loop stamped recently, so one wedged loop gets the service restarted.
    private func startSupervision(_ handles: [EventLoopHandle]) {
        guard Systemd.isSupervised else { return }
        let watchdog = Systemd.watchdogInterval()
        let shared = self.shared
        shared.process.heartbeats.withLock { $0 = Array(repeating: Clocks.monotonicNanos(), count: handles.count) }
        let beat = min(watchdog.map { $0 / 4 } ?? 1_000_000_000, 1_000_000_000)
        for (index, handle) in handles.enumerated() {
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.startHeartbeat(every: beat, slot: index)
            }
        }
        handles.first?.execute { [self] loop in
            (loop.context as? ProxyLoop)?.startSupervisor(watchdog: watchdog) { [self] in statusLine }
        }
    }

    /// `STATUS=` text: what an operator sees in `systemctl status larder`.
    var statusLine: String {
        let stats = shared.telemetry.stats
        let served = RequestOutcome.allCases.reduce(0) { $0 + stats.value($1) }
        let fromCache = RequestOutcome.allCases.reduce(0) { $1.isFromCache ? $0 + stats.value($1) : $0 }
        let ratio = served > 0 ? Double(fromCache) * 100 / Double(served) : 0
        let memory = shared.storage.cache.memoryStatistics
        let disk = shared.storage.cache.diskStatistics?.figures
        return "\(stats[.activeConnections].load()) connections, \(served) requests, "
            + "\(Int(ratio.rounded()))% from cache, memory \(Units.format(bytes: Int64(memory.bytes / 1024 * 1024))) "
            + "in \(memory.entries) entries, disk \(disk.map { "\($0.entries) entries" } ?? "off")"
    }

    /// Applies `config` to new requests on every loop; requests in flight keep their config.
    /// Tells systemd it is reloading, then ready again.
    /// Returns false, applying nothing, unless the daemon is running (a reload that arrives
    /// while it drains would only change what is about to stop).
    @discardableResult
    public func apply(_ config: Config, interceptor: TLSInterceptor?) -> Bool {
        guard life.acceptsReload else { return false }
        Systemd.notifyReloading()
        let (runtime, replaced, usersBefore) = shared.process.runtime.withLock { current in
            let replaced = current.interceptor
            let users = current.config.proxy.authUsers
            current = RuntimeConfig(config: config, generation: current.generation + 1, interceptor: interceptor)
            return (current, replaced, users)
        }
        if config.proxy.authUsers != usersBefore { shared.process.authenticator.forgetRefused() }
        if let replaced, replaced !== interceptor {
            let counted = replaced.mint.statistics
            shared.tunnelling.retiredMints.withLock { retired in
                retired.minted += counted.minted
                retired.hits += counted.hits
            }
        }
        let memory = config.memory
        shared.storage.cache.setLimits(
            memory: .init(maxBytes: memory.maxBytes, maxEntries: memory.maxEntries, maxObjectBytes: memory.maxObjectBytes),
            disk: .init(maxBytes: config.disk.maxBytes, maxObjectBytes: config.disk.maxObjectBytes), scrubRate: config.disk.scrubRate)
        shared.forwarding.retryBudget.setLimits(ratio: config.retry.budgetRatio, floor: config.retry.budgetMin)
        let done = DispatchSemaphore(value: 0)
        let handles = loops.withLock { $0 }
        for handle in handles {
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.apply(runtime)
                done.signal()
            }
        }
        for _ in handles { done.wait() }
        Systemd.notify("READY=1\nSTATUS=\(statusLine)")
        return true
    }

    /// Tells systemd that a reload was attempted but the file was rejected (still READY).
    /// SIGUSR1: reopens `log.access_file` (after logrotate moved it); returns its path, or nil
    /// when access lines go to stdout.
    public func reopenAccessLog() throws(SystemError) -> String? {
        try shared.telemetry.accessLogFile.reopen() ? shared.telemetry.accessLogFile.path : nil
    }

    public func reloadRejected() {
        Systemd.notify("READY=1\nSTATUS=reload rejected: configuration errors; running the previous configuration")
    }

    /// The configuration currently applied.
    public var config: Config { shared.process.currentRuntime.config }
    /// The interceptor currently applied (a reload keeps it when the CA did not change).
    public var interceptor: TLSInterceptor? { shared.process.currentRuntime.interceptor }

    /// Stops accepting, lets in-flight exchanges finish for up to `timeout`, then closes the
    /// rest, flushes the disk tier and stops the loops.
    /// Does nothing unless the daemon is running.
    public func shutdown(drainTimeout timeout: Duration) {
        guard let draining = move(.drainRequested(now: Clocks.monotonicNanos(), timeout: timeout.totalNanoseconds))
        else { return }
        Systemd.notify("STOPPING=1\nSTATUS=draining \(shared.telemetry.stats[.activeConnections].load()) connections")
        let handles = loops.withLock { $0 }
        for handle in handles {
            handle.execute { loop in (loop.context as? ProxyLoop)?.beginDraining(draining) }
        }
        while shared.telemetry.stats[.activeConnections].load() > 0, !draining.drainExpired(now: Clocks.monotonicNanos()) {
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
        for (_, socket) in sockets.withLock({ $0 }) { socket.close() }
        // Queued disk writes finish (or fail) before exit, so an orderly stop leaves nothing
        // half-written in tmp/.
        shared.storage.cache.stop()
        shared.stopHelpers()
        move(.loopsStopped)
    }

    /// Counters, for the admin endpoint and tests.
    public var statistics: Statistics { shared.telemetry.stats }
}
