import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// CONNECT (RFC 9110 §9.3.6): checks, name resolution off the loop, the non-blocking connect,
/// then the hand-over of the client's socket to a ``Tunnel``.
extension ClientConnection {
    static let tunnelGreeting = ResponseHeadWriter.connectionEstablished

    func beginTunnel(host: String, port: Int, exchange: Exchange) {
        // Whatever happens, this connection carries no further HTTP requests: either it
        // becomes the tunnel or it closes after the refusal.
        exchange.keepAlive = false
        let config = exchange.runtime.config
        let target = "\(host):\(port)"
        // RFC 9110 §9.3.6: CONNECT content has no defined semantics; bytes after the head
        // belong to the tunnel, so a declared body would be ambiguous.
        guard exchange.requestFraming == .none else {
            proxy.shared.stats[.badRequests].add(1)
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
        if refusesDestination(host: bareHost, port: port, exchange: exchange) { return }
        // Decrypted and answered here: the origin is reached per request, through the cache.
        if intercepts(host: bareHost, exchange: exchange) {
            return beginInterception(host: bareHost, port: port, exchange: exchange)
        }
        // Through the parents when the configuration has them (and `direct` does not exempt
        // the host): the tunnel is chained with a CONNECT of our own to the parent.
        let parents = proxy.shared.parentHealth.order(
            exchange.runtime.parents.candidates(
                for: AbsoluteURL(scheme: "https", host: host, port: port, pathAndQuery: "/"), routeParent: nil))
        exchange.tunnel = TunnelSetup(target: (bareHost, port), parents: parents)
        exchange.take(.connectAccepted)
        resolveTunnelHop(exchange)
    }

    /// Resolves the next hop of a tunnel: the target itself, or the parent being tried.
    private func resolveTunnelHop(_ exchange: Exchange) {
        let config = exchange.runtime.config
        let (bareHost, port): (String, Int)
        guard let setup = exchange.tunnel else { return }
        if let parent = setup.currentParent {
            guard let endpoint = parent.endpoint else {
                return respondGenerated(
                    status: 502, message: "Larder: CONNECT through the parent \(parent.label) is not supported (only http:// parents)",
                    outcome: .error, cause: .parent)
            }
            (bareHost, port) = (endpoint.host, endpoint.port)
            proxy.shared.parentHealth.recordAttempt(parent)
        } else {
            (bareHost, port) = setup.target
        }

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
        exchange.tunnel?.deadline = proxy.loop.schedule(afterNanos: config.upstream.connectTimeout.totalNanoseconds) {
            [weak self, weak exchange] in
            guard let self, let exchange, self.exchange === exchange, exchange.tunnel?.dial == nil else { return }
            exchange.tunnel?.deadline = nil
            self.respondGenerated(
                status: 504, message: "Larder: resolving \(bareHost) took longer than upstream.connect_timeout", outcome: .error,
                cause: .timeout)
        }
    }

    func tunnelResolved(_ result: Result<[SocketAddress], Resolver.Failure>, port: Int, exchangeID: ObjectIdentifier) {
        guard phase == .exchanging, let exchange, ObjectIdentifier(exchange) == exchangeID, exchange.tunnel?.deadline != nil else {
            return
        }
        switch result {
        case .failure(let failure):
            cancelTunnelTimer(exchange)
            if exchange.tunnel?.currentParent != nil {
                // A parent whose name does not resolve is as unreachable as one that refuses.
                let error = UpstreamError(kind: .dns, message: "\(failure)", afterHead: false, connected: false)
                return tunnelConnected(.failure(.failed(error)), exchange: exchange)
            }
            respondGenerated(status: 502, message: "Larder: \(failure)", outcome: .error, cause: .dns)
        case .success(let addresses):
            cancelTunnelTimer(exchange)
            // The addresses dialled are exactly the ones checked: a direct tunnel connects only
            // to resolved addresses the destination policy allows (a parent's are the operator's).
            var allowed = addresses
            if exchange.tunnel?.currentParent == nil {
                let host = exchange.tunnel?.target.host ?? ""
                let checked = destinations.dialable(
                    addresses, host: host, client: peer, generation: proxy.refreshDestinations(exchange.runtime),
                    policy: proxy.destinationPolicy(exchange.runtime))
                if let refusal = checked.refusal {
                    return refuseDestination(refusal, target: "\(host):\(port)", exchange: exchange)
                }
                allowed = checked.allowed
            }
            let dial = TunnelDial(loop: proxy.loop, addresses: allowed, handshake: parentHandshake(exchange))
            exchange.tunnel?.dial = dial
            dial.start(timeout: exchange.runtime.config.upstream.connectTimeout.totalNanoseconds) { [weak self, weak exchange] result in
                guard let self, let exchange else {
                    if case .success(let connected) = result { connected.socket.close() }
                    return
                }
                self.tunnelConnected(result, exchange: exchange)
            }
        }
    }

    private func cancelTunnelTimer(_ exchange: Exchange) {
        if let timer = exchange.tunnel?.deadline { proxy.loop.cancel(timer) }
        exchange.tunnel?.deadline = nil
    }

    /// Our CONNECT to the parent (RFC 9110 §9.3.6), carrying Via so loops are caught and the
    /// parent URL's credentials; nil when the tunnel goes direct.
    private func parentHandshake(_ exchange: Exchange) -> [UInt8]? {
        guard let parent = exchange.tunnel?.currentParent else { return nil }
        let target = exchange.head.targetText
        let via = proxy.shared.via(after: exchange.head.headers)
        var text = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\nVia: \(via)\r\n"
        if let authorization = parent.endpoint?.authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    private func tunnelConnected(_ result: Result<TunnelDial.Connected, TunnelDial.Failure>, exchange: Exchange) {
        exchange.tunnel?.dial = nil
        guard phase == .exchanging, self.exchange === exchange else {
            if case .success(let connected) = result { connected.socket.close() }
            return
        }
        let parent = exchange.tunnel?.currentParent
        switch result {
        case .failure(.refused(let status, let statusLine)):
            // The parent is up; it (or something behind it) said no. Its refusal stands, but a
            // 407 is about credentials only Larder's configuration can fix, and any answer
            // other than a 4xx or 5xx is no refusal the client could read with this message as
            // its body (a 304 has none, RFC 9110 §6.4.1: the message would be read as the next
            // response; a 3xx here has no Location).
            if let parent { proxy.shared.parentHealth.recordSuccess(parent) }
            proxy.logger.notice(
                "parent proxy refused a CONNECT",
                metadata: ["parent": "\(parent?.label ?? "-")", "target": "\(exchange.head.targetText)", "answer": "\(statusLine)"])
            respondGenerated(
                status: status == 407 || !(400..<600).contains(status) ? 502 : status,
                message: "Larder: the parent proxy \(parent?.label ?? "") answered CONNECT with '\(statusLine)'", outcome: .error,
                cause: .parent)
        case .failure(.failed(let error)):
            guard let parent, let setup = exchange.tunnel else {
                return error.kind == .timeout
                    ? respondGenerated(
                        status: 504, message: "Larder: no connection to \(exchange.head.targetText) within upstream.connect_timeout",
                        outcome: .error, cause: .timeout)
                    : respondGenerated(
                        status: 502, message: "Larder: cannot connect to \(exchange.head.targetText): \(error.message)", outcome: .error,
                        cause: .connect)
            }
            // Failover as a miss's: the next parent when this one was not reached or reset us.
            let (action, unreachable) = AttemptPlanner.afterTunnelError(error, parent: (setup.parentIndex, setup.parents.count))
            if unreachable {
                proxy.shared.parentUnreachable(parent, backoff: exchange.runtime.parents.backoff, error: error.message)
            }
            if action == .failOver {
                exchange.tunnel?.parentIndex += 1
                proxy.shared.stats[.parentFailovers].add(1)
                return resolveTunnelHop(exchange)
            }
            // Every parent tried was unreachable; else this one was reached and its answer ends it.
            let timedOut = error.kind == .timeout
            let message =
                unreachable
                ? (timedOut
                    ? "no parent proxy answered CONNECT within upstream.connect_timeout"
                    : "no parent proxy could open the tunnel: \(error.message)")
                : (timedOut
                    ? "the parent proxy \(parent.label) did not answer CONNECT within upstream.connect_timeout"
                    : "the parent proxy \(parent.label) could not open the tunnel: \(error.message)")
            respondGenerated(status: timedOut ? 504 : 502, message: "Larder: " + message, outcome: .error, cause: .parent)
        case .success(let connected):
            if let parent { proxy.shared.parentHealth.recordSuccess(parent) }
            exchange.status = 200
            exchange.tunnel?.server = connected.socket
            exchange.tunnel?.serverLeftover = connected.leftover
            // Responses to requests pipelined before the CONNECT leave first; flush() hands
            // over once they are written.
            if output.isEmpty { handOffToTunnel() } else { flushSoon() }
        }
    }

    /// Gives the client's socket, and any bytes it sent after the CONNECT head, to a tunnel.
    func handOffToTunnel() {
        guard let exchange, let server = exchange.tunnel?.server else { return }
        exchange.tunnel?.server = nil
        self.exchange = nil
        let leftover = Array(inbound.readable)
        inbound.consume(inbound.readableCount)
        let tunnel = Tunnel(
            proxy: proxy, client: socket, peer: peer, server: server, target: exchange.head.targetText,
            leftover: leftover, greeting: ClientConnection.tunnelGreeting + (exchange.tunnel?.serverLeftover ?? []),
            startNanos: exchange.startNanos, agent: exchange.head.headers["User-Agent"])
        leaveLoop(stillCounted: true)
        proxy.adoptTunnel(tunnel)
    }
}
