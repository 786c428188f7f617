import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream
import Logging

/// Everything one event loop owns: its client connections, its upstream client (curl multi
/// handle), its in-flight fills, its access-log buffer, and the configuration it currently
/// applies to new requests.
///
/// State: loop-confined; other threads reach it only through jobs on `loop.handle`.
final class ProxyLoop {
    /// Strong; the loop's `context` points back here until shutdown clears it.
    let loop: EventLoop
    let shared: SharedState
    private(set) var runtime: RuntimeConfig
    let upstream: UpstreamClient
    let accessLog: AccessLog
    let coalescer: Coalescer
    private var connections: [ObjectIdentifier: ClientConnection] = [:]
    private var listeners: [Listener] = []
    private var sweepInterval: UInt64 = 250_000_000
    private var draining = false
    private var parked: [Int: ClientConnection] = [:]
    private var nextParkToken = 0
    private var cachedDateSecond = -1
    private var cachedDate = ""

    init(loop: EventLoop, shared: SharedState, runtime: RuntimeConfig) {
        self.loop = loop
        self.shared = shared
        self.runtime = runtime
        upstream = UpstreamClient(loop: loop, maxConnectionsPerHost: runtime.config.upstream.maxConnectionsPerHost)
        accessLog = AccessLog(loop: loop, enabled: runtime.config.log.access)
        coalescer = Coalescer(loop: loop)
        scheduleSweep()
    }

    var logger: Logger { shared.logger }
    var connectionCount: Int { connections.count }
    var isDraining: Bool { draining }

    /// Starts accepting on `socket`.
    func listen(on socket: Socket, kind: Listener.Kind) throws(SystemError) {
        let listener = Listener(socket: socket, kind: kind, proxy: self)
        try loop.register(socket.fd, interest: .readable, handler: listener, exclusive: true)
        listeners.append(listener)
    }

    /// Applies a new configuration to requests that start from now on.
    func apply(_ newRuntime: RuntimeConfig) {
        runtime = newRuntime
        upstream.setMaxConnectionsPerHost(newRuntime.config.upstream.maxConnectionsPerHost)
        accessLog.enabled = newRuntime.config.log.access
    }

    /// Stops accepting; open connections finish their current exchange and close.
    func beginDraining() {
        draining = true
        for listener in listeners { loop.deregister(listener.socket.fd) }
        listeners.removeAll()
        for connection in connections.values { connection.drain() }
    }

    /// Closes every connection at once (the drain timeout passed).
    func closeAll() {
        for connection in Array(connections.values) { connection.close() }
        accessLog.flush()
    }

    // MARK: Connections

    func adopt(_ socket: Socket, peer: SocketAddress?, kind: Listener.Kind) {
        let connection = ClientConnection(socket: socket, peer: peer, kind: kind, proxy: self)
        do {
            try loop.register(socket.fd, interest: .readable, handler: connection)
        } catch {
            logger.error("cannot watch accepted connection", metadata: ["error": "\(error)"])
            socket.close()
            return
        }
        connections[ObjectIdentifier(connection)] = connection
        shared.stats.activeConnections.add(1)
        connection.start(now: loop.now)
    }

    func connectionClosed(_ connection: ClientConnection) {
        if connections.removeValue(forKey: ObjectIdentifier(connection)) != nil {
            shared.stats.activeConnections.subtract(1)
        }
    }

    /// Stamps this loop's heartbeat every `interval` (from the loop itself: a wedged loop stops
    /// stamping).
    func startHeartbeat(every interval: UInt64, slot: Int) {
        loop.schedule(afterNanos: interval) { [weak self] in
            guard let self, !self.draining else { return }
            self.shared.heartbeats.withLock { beats in
                if slot < beats.count { beats[slot] = self.loop.now }
            }
            self.startHeartbeat(every: interval, slot: slot)
        }
    }

    /// On loop 0: WATCHDOG=1 at half the watchdog interval while every loop's heartbeat is
    /// recent, and STATUS= every few seconds.
    func startSupervisor(watchdog: UInt64?, status: @escaping () -> String) {
        let period = watchdog.map { max($0 / 2, 10_000_000) } ?? 5_000_000_000
        var sinceStatus: UInt64 = 0
        func tick() {
            loop.schedule(afterNanos: period) { [weak self] in
                guard let self, !self.draining else { return }
                if let watchdog {
                    let now = Clocks.monotonicNanos()
                    let healthy = self.shared.heartbeats.withLock { beats in beats.allSatisfy { now &- $0 < watchdog } }
                    if healthy { Systemd.notify("WATCHDOG=1") }
                }
                sinceStatus += period
                if sinceStatus >= 5_000_000_000 {
                    sinceStatus = 0
                    Systemd.notify("STATUS=\(status())")
                }
                tick()
            }
        }
        tick()
    }

    /// Keeps a connection findable while it waits for work on another thread; the job that
    /// resumes it carries only the token (connections never leave their loop).
    func park(_ connection: ClientConnection) -> Int {
        nextParkToken += 1
        parked[nextParkToken] = connection
        return nextParkToken
    }

    func unpark(_ token: Int) -> ClientConnection? {
        parked.removeValue(forKey: token)
    }

    private func scheduleSweep() {
        let config = runtime.config
        let shortest = min(
            config.proxy.headerTimeout.totalNanoseconds, config.proxy.idleTimeout.totalNanoseconds,
            config.coalesce.waitTimeout.totalNanoseconds)
        sweepInterval = max(50_000_000, min(1_000_000_000, shortest / 4))
        loop.schedule(afterNanos: sweepInterval) { [weak self] in
            guard let self else { return }
            let now = self.loop.now
            for connection in Array(self.connections.values) { connection.checkDeadline(now: now) }
            self.coalescer.sweep()
            self.scheduleSweep()
        }
    }

    /// The current time as an HTTP date, formatted once per second.
    var httpDate: String {
        let second = Int(Clocks.wallSeconds())
        if second != cachedDateSecond {
            cachedDateSecond = second
            cachedDate = HTTPDate.format(second)
        }
        return cachedDate
    }
}
