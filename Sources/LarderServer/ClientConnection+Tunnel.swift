import LarderConfig
import LarderHTTP
import LarderIO

/// CONNECT (RFC 9110 §9.3.6): checks, name resolution off the loop, the non-blocking connect,
/// then the hand-over of the client's socket to a ``Tunnel``.
extension ClientConnection {
    static let tunnelGreeting = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)

    func beginTunnel(host: String, port: Int, exchange: Exchange) {
        // Whatever happens, this connection carries no further HTTP requests: either it
        // becomes the tunnel or it closes after the refusal.
        exchange.keepAlive = false
        let config = exchange.runtime.config
        let target = "\(host):\(port)"
        // RFC 9110 §9.3.6: CONNECT content has no defined semantics; bytes after the head
        // belong to the tunnel, so a declared body would be ambiguous.
        guard exchange.requestFraming == .none else {
            proxy.shared.stats.badRequests.add(1)
            return respondGenerated(status: 400, message: "Larder: a CONNECT request cannot carry content", outcome: .error)
        }
        guard config.proxy.connectPorts.contains(port) else {
            proxy.logger.notice(
                "refused CONNECT to a port not in proxy.connect_ports",
                metadata: ["client": "\(peer?.description ?? "-")", "target": "\(target)"])
            return respondGenerated(
                status: 403,
                message: "Larder: CONNECT to port \(port) is not allowed (proxy.connect_ports = "
                    + "[\(config.proxy.connectPorts.map(String.init).joined(separator: ", "))])",
                outcome: .error)
        }
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        if refusesLoop(host: bareHost, port: port, exchange: exchange) { return }

        let token = proxy.park(self)
        let handle = proxy.loop.handle
        let id = ObjectIdentifier(exchange)
        proxy.shared.resolve(bareHost, port: UInt16(port)) { result in
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.unpark(token)?.tunnelResolved(result, port: port, exchangeID: id)
            }
        }
        // Resolution has no timeout of its own that Larder controls; the client hears back
        // within connect_timeout either way.
        exchange.tunnelTimer = proxy.loop.schedule(afterNanos: config.upstream.connectTimeout.totalNanoseconds) {
            [weak self, weak exchange] in
            guard let self, let exchange, self.exchange === exchange, exchange.tunnelDial == nil else { return }
            exchange.tunnelTimer = nil
            self.respondGenerated(
                status: 504, message: "Larder: resolving \(bareHost) took longer than upstream.connect_timeout", outcome: .error)
        }
    }

    /// Refuses (403/508) a target that is this daemon itself or a request that already came
    /// through it. Returns whether it answered.
    func refusesLoop(host: String, port: Int, exchange: Exchange) -> Bool {
        // A request aimed at this daemon's own listeners would loop or expose the admin API
        // through the proxy port.
        if let own = proxy.shared.ownAddresses.withLock({ $0.listener(host: host, port: port) }) {
            exchange.keepAlive = false
            proxy.logger.notice(
                "refused a request aimed at this proxy", metadata: ["client": "\(peer?.description ?? "-")", "target": "\(host):\(port)"])
            respondGenerated(
                status: 403,
                message: own == .admin
                    ? "Larder does not proxy to its own admin listener; connect to it directly"
                    : "Larder does not proxy requests to itself", outcome: .error)
            return true
        }
        // RFC 9110 §7.6.3: our own Via identity in the request means it went round in a loop.
        if exchange.head.headers.values("Via").contains(where: { $0.contains(proxy.shared.viaIdentity) }) {
            exchange.keepAlive = false
            proxy.logger.warning(
                "forwarding loop detected", metadata: ["target": "\(host):\(port)", "via": "\(exchange.head.headers.combined("Via") ?? "")"])
            respondGenerated(status: 508, message: "Larder: forwarding loop (this request already passed through this proxy)", outcome: .error)
            return true
        }
        return false
    }

    func tunnelResolved(_ result: Result<[SocketAddress], Resolver.Failure>, port: Int, exchangeID: ObjectIdentifier) {
        guard phase == .exchanging, let exchange, ObjectIdentifier(exchange) == exchangeID, exchange.tunnelTimer != nil else {
            return
        }
        switch result {
        case .failure(let failure):
            cancelTunnelTimer(exchange)
            respondGenerated(status: 502, message: "Larder: \(failure)", outcome: .error)
        case .success(let addresses):
            // A name that resolves to this daemon is as much a loop as the address itself.
            if let own = addresses.first(where: { address in
                proxy.shared.ownAddresses.withLock { $0.listener(host: address.ipString, port: port) } != nil
            }) {
                cancelTunnelTimer(exchange)
                _ = refusesLoop(host: own.ipString, port: port, exchange: exchange)
                return
            }
            cancelTunnelTimer(exchange)
            let dial = TunnelDial(loop: proxy.loop, addresses: addresses)
            exchange.tunnelDial = dial
            dial.start(timeout: exchange.runtime.config.upstream.connectTimeout.totalNanoseconds) { [weak self, weak exchange] result in
                guard let self, let exchange else {
                    if case .success(let socket) = result { socket.close() }
                    return
                }
                self.tunnelConnected(result, exchange: exchange)
            }
        }
    }

    private func cancelTunnelTimer(_ exchange: Exchange) {
        if let timer = exchange.tunnelTimer { proxy.loop.cancel(timer) }
        exchange.tunnelTimer = nil
    }

    private func tunnelConnected(_ result: Result<Socket, TunnelDial.Failure>, exchange: Exchange) {
        exchange.tunnelDial = nil
        guard phase == .exchanging, self.exchange === exchange else {
            if case .success(let socket) = result { socket.close() }
            return
        }
        switch result {
        case .failure(.timedOut):
            respondGenerated(status: 504, message: "Larder: no connection to \(exchange.head.targetText) within upstream.connect_timeout", outcome: .error)
        case .failure(.unreachable(let reason)):
            respondGenerated(status: 502, message: "Larder: cannot connect to \(exchange.head.targetText): \(reason)", outcome: .error)
        case .success(let server):
            exchange.status = 200
            exchange.tunnelServer = server
            // Responses to requests pipelined before the CONNECT leave first; flush() hands
            // over once they are written.
            if output.isEmpty { handOffToTunnel() } else { flushSoon() }
        }
    }

    /// Gives the client's socket, and any bytes it sent after the CONNECT head, to a tunnel.
    func handOffToTunnel() {
        guard let exchange, let server = exchange.tunnelServer else { return }
        exchange.tunnelServer = nil
        self.exchange = nil
        let leftover = Array(inbound.readable)
        inbound.consume(inbound.readableCount)
        let tunnel = Tunnel(
            proxy: proxy, client: socket, peer: peer, server: server, target: exchange.head.targetText,
            leftover: leftover, greeting: ClientConnection.tunnelGreeting, startNanos: exchange.startNanos)
        handedOff()
        proxy.adoptTunnel(tunnel)
    }
}
