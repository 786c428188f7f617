import Glibc
import LarderIO

/// A listening socket on one loop: accepts connections and hands them to the loop.
///
/// State: loop-confined.
final class Listener: IOHandler {
    enum Kind: Sendable { case proxy, admin }

    let socket: Socket
    let kind: Kind
    let proxy: ProxyLoop
    private var lastLimitLog: UInt64 = 0
    /// Not watched for a moment: out of descriptors, with no spare to refuse the next one.
    private var paused = false
    /// How long a listener out of descriptors waits before it is watched again.
    static let exhaustedPauseNanos: UInt64 = 100_000_000
    /// Admin connections are few (scrapers, the CLI); this bounds what a flood of them holds.
    static let maxAdminConnections = 64

    init(socket: Socket, kind: Kind, proxy: ProxyLoop) {
        self.socket = socket
        self.kind = kind
        self.proxy = proxy
    }

    func handleIO(_ events: IOEvents) {
        // Bounded so one busy listener cannot starve the connections already open.
        for _ in 0..<64 {
            let accepted: (Socket, SocketAddress?)?
            do {
                accepted = try socket.accept()
            } catch {
                if error.errno == EMFILE || error.errno == ENFILE {
                    logLimit("out of file descriptors: \(error); raise LimitNOFILE or lower max_connections")
                    // The pending connection would wake this level-triggered listener again at
                    // once: free the spare descriptor, take the connection, refuse it.
                    if proxy.releaseSpareDescriptor() {
                        if let (client, _) = (try? socket.accept()) ?? nil {
                            refuse(client, status: 503, body: "Larder: out of file descriptors\n")
                        }
                        proxy.reserveSpareDescriptor()
                    }
                    // No spare left (another thread took the one freed, or none could be had):
                    // the next pending connection would wake this loop again at once, and
                    // again, for as long as descriptors run short. It waits a moment instead.
                    if !proxy.holdsSpareDescriptor { pauseAccepting() }
                } else if error.errno != ECONNABORTED {
                    proxy.logger.error("accept failed", metadata: ["error": "\(error)"])
                }
                return
            }
            guard let (client, peer) = accepted else { return }
            proxy.telemetry.stats[.acceptedConnections].add(1)
            let config = proxy.runtime.config.proxy
            if kind == .proxy, let peer, !config.allow.contains(where: { $0.contains(peer) }) {
                refuse(client, status: 403, body: "Larder: client \(peer.ipString) is not in proxy.allow\n")
                continue
            }
            // At the limit, the longest-idle connection on this loop gives up its place, else
            // one of a client holding two more than the newcomer (``ProxyLoop/makeRoom(for:)``);
            // only then is the new one refused.
            if kind == .admin {
                if proxy.telemetry.stats[.adminConnections].load() >= Listener.maxAdminConnections && !proxy.evictIdleAdminConnection() {
                    logLimit("\(Listener.maxAdminConnections) admin connections open and none idle; refusing more")
                    refuse(client, status: 503, body: "Larder: too many admin connections\n")
                    continue
                }
            } else if proxy.telemetry.stats[.activeConnections].load() >= config.maxConnections && !proxy.evictIdleConnection()
                && !proxy.makeRoom(for: peer)
            {
                logLimit("max_connections (\(config.maxConnections)) reached and none idle; refusing connections")
                refuse(client, status: 503, body: "Larder: too many connections\n")
                continue
            }
            client.setNoDelay()
            proxy.adopt(client, peer: peer, kind: kind)
        }
    }

    /// Stops watching the listening socket for ``exhaustedPauseNanos``, then watches it again
    /// (with a spare descriptor, if one can be had by then), unless the daemon drains meanwhile.
    /// Deregistered rather than left idle: it is registered exclusive (EPOLLEXCLUSIVE), which
    /// epoll does not let be modified.
    private func pauseAccepting() {
        guard !paused else { return }
        paused = true
        let loop = proxy.loop
        loop.deregister(socket.fd)
        _ = loop.schedule(afterNanos: Listener.exhaustedPauseNanos) { [weak self] in
            guard let self else { return }
            self.paused = false
            guard !self.proxy.isDraining else { return }
            self.proxy.reserveSpareDescriptor()
            do {
                try loop.register(self.socket.fd, interest: .readable, handler: self, exclusive: true)
            } catch {
                self.proxy.logger.error("cannot watch the listening socket again", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Answers a connection that will not be served and closes it (best effort, never blocks).
    private func refuse(_ client: Socket, status: Int, body: String) {
        proxy.telemetry.stats[.rejectedConnections].add(1)
        var head = ResponseHeadWriter(status: status)
        head.field("Content-Type", "text/plain")
        head.end(length: body.utf8.count, connection: .close)
        var bytes = head.bytes + Array(body.utf8)
        _ = bytes.withUnsafeMutableBytes { try? client.write(UnsafeRawBufferPointer($0)) }
        client.shutdownWrite()
        client.close()
    }

    /// Logs a refusal at most once a second, however many connections are refused.
    private func logLimit(_ message: String) {
        let now = proxy.loop.now
        if now - lastLimitLog > 1_000_000_000 || lastLimitLog == 0 {
            lastLimitLog = now
            proxy.logger.warning("\(message)")
        }
    }
}
