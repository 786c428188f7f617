import LarderIO
import Logging

/// What belongs to the daemon as a whole rather than to one concern: the configuration in
/// force, the logger, where it listens, whether its loops are alive, and proxy authentication.
/// One instance, built by ``SharedState``.
///
/// Users: ``Server`` (reload, listeners, watchdog), each loop (its destination policy reads
/// `ownAddresses`, its heartbeat stamps `heartbeats`), connections (`authenticator`), the admin
/// routes (the configuration in force, the listen addresses).
///
/// State: `runtime`, `ownAddresses` and `heartbeats` are guarded by their own mutexes and read
/// on reload, on rebuilding a policy or by the watchdog, never per request; the rest is
/// immutable or thread-safe.
final class ProcessState: Sendable {
    /// The configuration in force; each loop keeps its own copy, applied on reload.
    let runtime: Locked<RuntimeConfig>
    let logger: Logger
    /// The addresses this daemon listens on, for the destination policy.
    let ownAddresses = Locked(OwnAddresses())
    /// Each loop's last heartbeat (monotonic ns), for the systemd watchdog.
    let heartbeats = Locked<[UInt64]>([])
    /// Proxy authentication: the verdict table and the hashing thread.
    let authenticator = ProxyAuthenticator()
    /// Fills streaming a body to disk now, every loop's (``FillBuffer/writeBacklog(streams:)``).
    let diskStreams = AtomicCounter()
    /// Each client address's proxy connections and tunnels on every loop: `max_connections`
    /// is the process's, and a client's connections spread over the loops
    /// (``ProxyLoop/makeRoom(for:)``). Changed on accept and close, read at the limit.
    let clientConnections = Locked<[ClientAddress: Int]>([:])

    init(runtime: RuntimeConfig, logger: Logger) {
        self.runtime = Locked(runtime)
        self.logger = logger
    }

    var currentRuntime: RuntimeConfig { runtime.withLock { $0 } }

    /// Listen addresses, filled in once the sockets are open.
    struct OwnAddresses: Sendable {
        var proxy: [SocketAddress] = []
        var admin: SocketAddress?
        var activated = false
    }
}
