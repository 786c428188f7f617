import LarderConfig
import LarderHTTP
import LarderIO
import LarderTLS
import LarderUpstream

/// CONNECT (RFC 9110 §9.3.6) for one client connection, and HTTPS interception after it.
///
/// The connection hands it the CONNECT request. A blind tunnel is checked, its next hop (the
/// target or a parent) resolved off the loop and dialled, failing over between parents through
/// ``AttemptPlanner``; once connected, and once the responses to requests pipelined before the
/// CONNECT are written, the handler gives the client's socket to a ``Tunnel``. An intercepted
/// CONNECT (docs/SECURITY.md) is answered 200; once that is written the socket becomes the
/// server side of a TLS session showing a certificate the local CA minted for the host, and the
/// HTTP/1.1 requests inside go through the same pipeline as plain ones, as `https://host/path`.
///
/// State: loop-confined, owned by its connection (which it never outlives: timers and dials
/// hold it weakly).
final class ConnectHandler {
    /// What an intercepted connection answers for.
    struct Interception {
        /// The CONNECT host, lower case (a DNS name: `tls.intercept` lists names only).
        let host: String
        let port: Int
        let tls: TLSTransport
        var handshakeDone = false
    }

    /// An intercepted CONNECT whose 200 is still being written.
    private struct PendingInterception {
        let host: String
        let port: Int
        let interceptor: TLSInterceptor
    }

    static let tunnelGreeting = ResponseHeadWriter.connectionEstablished

    unowned let connection: ClientConnection
    /// The blind tunnel being set up, until it is handed over.
    private var setup: TunnelSetup?
    /// Set once an intercepted CONNECT's 200 is queued, until it is written.
    private var pendingInterception: PendingInterception?
    /// Set while the connection is an intercepted TLS session.
    private(set) var interception: Interception?

    /// The services CONNECT uses: counters, parents and `Via`, resolvers and intercepted hosts.
    private let telemetry: Telemetry
    private let forwarding: Forwarding
    private let tunnelling: Tunnelling

    init(connection: ClientConnection) {
        self.connection = connection
        let proxy = connection.proxy
        (telemetry, forwarding, tunnelling) = (proxy.telemetry, proxy.forwarding, proxy.tunnelling)
    }

    private var proxy: ProxyLoop { connection.proxy }

    // MARK: The connection's side

    /// Whether the connection must not read requests yet: the 200 to an intercepted CONNECT
    /// is not written, and what follows it is TLS.
    var holdsRequests: Bool { pendingInterception != nil }

    /// What the connection's writer does once everything queued is written: nil when the
    /// handler has nothing waiting on it.
    func outputWritten() -> ClientConnection.AfterWrite? {
        if setup?.server != nil, connection.exchange != nil {
            handOff()
            return .stop
        }
        if pendingInterception != nil {
            startInterception()
            return .stop
        }
        return nil
    }

    /// The connection read some input: a handshake in progress may have completed.
    func didRead() {
        if interception?.handshakeDone == false { checkHandshake() }
    }

    /// The transport failed (the connection closes next).
    func transportFailed() {
        if interception != nil { interceptionFailed() }
    }

    /// The connection timed out waiting for a request (the connection closes next).
    func timedOut() {
        if interception != nil { interceptionTimedOut() }
    }

    /// Stops a CONNECT that had not become a tunnel (its client went away).
    func abandon() {
        setup?.abandon(on: proxy.loop)
    }

    /// Continues an intercepted session another loop handed over.
    func resume(_ session: TLSTransport.Handoff, host: String, port: Int) {
        let tls = TLSTransport(session)
        connection.transport = tls
        interception = Interception(host: host, port: port, tls: tls, handshakeDone: true)
    }

    // MARK: CONNECT

    /// Answers a CONNECT to `host:port` (the host as written, IPv6 in brackets).
    func begin(host: String, port: Int, exchange: Exchange) {
        // Whatever happens, this connection carries no further HTTP requests: either it
        // becomes the tunnel or it closes after the refusal.
        exchange.keepAlive = false
        let config = exchange.runtime.config
        let target = "\(host):\(port)"
        // RFC 9110 §9.3.6: CONNECT content has no defined semantics; bytes after the head
        // belong to the tunnel, so a declared body would be ambiguous.
        guard exchange.requestFraming == .none else {
            telemetry.stats[.badRequests].add(1)
            return connection.respondGenerated(
                status: 400, message: "Larder: a CONNECT request cannot carry content", outcome: .error)
        }
        guard config.proxy.connectPorts.contains(port) else {
            proxy.logger.notice(
                "refused CONNECT to a port not in proxy.connect_ports",
                metadata: ["client": "\(connection.peer?.description ?? "-")", "target": "\(target)"])
            return connection.respondGenerated(
                status: 403,
                message: "Larder: CONNECT to port \(port) is not allowed (proxy.connect_ports = "
                    + "[\(config.proxy.connectPorts.map(String.init).joined(separator: ", "))])",
                outcome: .error)
        }
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        if connection.refusesDestination(host: bareHost, port: port, exchange: exchange) { return }
        // Decrypted and answered here: the origin is reached per request, through the cache.
        if intercepts(host: bareHost, exchange: exchange) {
            return beginInterception(host: bareHost, port: port, exchange: exchange)
        }
        // Through the parents when the configuration has them (and `direct` does not exempt
        // the host): the tunnel is chained with a CONNECT of our own to the parent.
        let parents = forwarding.parentHealth.order(
            exchange.runtime.parents.candidates(
                for: AbsoluteURL(scheme: "https", host: host, port: port, pathAndQuery: "/"), routeParent: nil))
        setup = TunnelSetup(target: (bareHost, port), parents: parents)
        exchange.take(.connectAccepted)
        resolveHop(exchange)
    }

    /// Resolves the next hop of a tunnel: the target itself, or the parent being tried.
    private func resolveHop(_ exchange: Exchange) {
        let config = exchange.runtime.config
        let (bareHost, port): (String, Int)
        guard let setup else { return }
        if let parent = setup.currentParent {
            guard let endpoint = parent.endpoint else {
                return connection.respondGenerated(
                    status: 502, message: "Larder: CONNECT through the parent \(parent.label) is not supported (only http:// parents)",
                    outcome: .error, cause: .parent)
            }
            (bareHost, port) = (endpoint.host, endpoint.port)
            forwarding.parentHealth.recordAttempt(parent)
        } else {
            (bareHost, port) = setup.target
        }

        let token = proxy.park(connection)
        let handle = proxy.loop.handle
        let id = ObjectIdentifier(exchange)
        let pinned = proxy.process.currentRuntime.config.upstream.resolve
        tunnelling.resolve(bareHost, port: UInt16(port), pinned: pinned) { result in
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.unpark(token)?.connect?.resolved(result, port: port, exchangeID: id)
            }
        }
        // Resolution has no timeout of its own that Larder controls; the client hears back
        // within connect_timeout either way.
        self.setup?.deadline = proxy.loop.schedule(afterNanos: config.upstream.connectTimeout.totalNanoseconds) {
            [weak self, weak exchange] in
            guard let self, let exchange, self.connection.exchange === exchange, self.setup?.dial == nil else { return }
            self.setup?.deadline = nil
            self.connection.respondGenerated(
                status: 504, message: "Larder: resolving \(bareHost) took longer than upstream.connect_timeout", outcome: .error,
                cause: .timeout)
        }
    }

    private func resolved(_ result: Result<[SocketAddress], Resolver.Failure>, port: Int, exchangeID: ObjectIdentifier) {
        guard connection.isExchanging, let exchange = connection.exchange, ObjectIdentifier(exchange) == exchangeID,
            setup?.deadline != nil
        else { return }
        switch result {
        case .failure(let failure):
            cancelResolveTimer()
            if setup?.currentParent != nil {
                // A parent whose name does not resolve is as unreachable as one that refuses.
                let error = UpstreamError(kind: .dns, message: "\(failure)", afterHead: false, connected: false)
                return connected(.failure(.failed(error)), exchange: exchange)
            }
            connection.respondGenerated(status: 502, message: "Larder: \(failure)", outcome: .error, cause: .dns)
        case .success(let addresses):
            cancelResolveTimer()
            // The addresses dialled are exactly the ones checked: a direct tunnel connects only
            // to resolved addresses the destination policy allows (a parent's are the operator's).
            var allowed = addresses
            if setup?.currentParent == nil {
                let host = setup?.target.host ?? ""
                let checked = connection.destinations.dialable(
                    addresses, host: host, client: connection.peer, generation: proxy.refreshDestinations(exchange.runtime),
                    policy: proxy.destinationPolicy(exchange.runtime))
                if let refusal = checked.refusal {
                    return connection.refuseDestination(refusal, target: "\(host):\(port)", exchange: exchange)
                }
                allowed = checked.allowed
            }
            let dial = TunnelDial(loop: proxy.loop, addresses: allowed, handshake: parentHandshake(exchange))
            setup?.dial = dial
            dial.start(timeout: exchange.runtime.config.upstream.connectTimeout.totalNanoseconds) { [weak self, weak exchange] result in
                guard let self, let exchange else {
                    if case .success(let connected) = result { connected.socket.close() }
                    return
                }
                self.connected(result, exchange: exchange)
            }
        }
    }

    private func cancelResolveTimer() {
        if let timer = setup?.deadline { proxy.loop.cancel(timer) }
        setup?.deadline = nil
    }

    /// Our CONNECT to the parent (RFC 9110 §9.3.6), carrying Via so loops are caught and the
    /// parent URL's credentials; nil when the tunnel goes direct.
    private func parentHandshake(_ exchange: Exchange) -> [UInt8]? {
        guard let parent = setup?.currentParent else { return nil }
        let target = exchange.head.targetText
        let via = forwarding.via(after: exchange.head.headers)
        var text = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\nVia: \(via)\r\n"
        if let authorization = parent.endpoint?.authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    private func connected(_ result: Result<TunnelDial.Connected, TunnelDial.Failure>, exchange: Exchange) {
        setup?.dial = nil
        guard connection.isExchanging, connection.exchange === exchange else {
            if case .success(let connected) = result { connected.socket.close() }
            return
        }
        let parent = setup?.currentParent
        switch result {
        case .failure(.refused(let status, let statusLine)):
            // The parent is up; it (or something behind it) said no. Its refusal stands, but a
            // 407 is about credentials only Larder's configuration can fix, and any answer
            // other than a 4xx or 5xx is no refusal the client could read with this message as
            // its body (a 304 has none, RFC 9110 §6.4.1: the message would be read as the next
            // response; a 3xx here has no Location).
            if let parent { forwarding.parentHealth.recordSuccess(parent) }
            proxy.logger.notice(
                "parent proxy refused a CONNECT",
                metadata: ["parent": "\(parent?.label ?? "-")", "target": "\(exchange.head.targetText)", "answer": "\(statusLine)"])
            connection.respondGenerated(
                status: status == 407 || !(400..<600).contains(status) ? 502 : status,
                message: "Larder: the parent proxy \(parent?.label ?? "") answered CONNECT with '\(statusLine)'", outcome: .error,
                cause: .parent)
        case .failure(.failed(let error)):
            guard let parent, let setup else {
                return error.kind == .timeout
                    ? connection.respondGenerated(
                        status: 504, message: "Larder: no connection to \(exchange.head.targetText) within upstream.connect_timeout",
                        outcome: .error, cause: .timeout)
                    : connection.respondGenerated(
                        status: 502, message: "Larder: cannot connect to \(exchange.head.targetText): \(error.message)", outcome: .error,
                        cause: .connect)
            }
            // Failover as a miss's: the next parent when this one was not reached or reset us.
            let (action, unreachable) = AttemptPlanner.afterTunnelError(error, parent: (setup.parentIndex, setup.parents.count))
            if unreachable {
                forwarding.parentUnreachable(parent, backoff: exchange.runtime.parents.backoff, error: error.message)
            }
            if action == .failOver {
                self.setup?.parentIndex += 1
                telemetry.stats[.parentFailovers].add(1)
                return resolveHop(exchange)
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
            connection.respondGenerated(
                status: timedOut ? 504 : 502, message: "Larder: " + message, outcome: .error, cause: .parent)
        case .success(let connected):
            if let parent { forwarding.parentHealth.recordSuccess(parent) }
            exchange.status = 200
            setup?.server = connected.socket
            setup?.serverLeftover = connected.leftover
            // Responses to requests pipelined before the CONNECT leave first; the writer hands
            // over once they are written (``outputWritten()``).
            if connection.pendingOutputBytes == 0 { handOff() } else { connection.flushSoon() }
        }
    }

    /// Gives the client's socket, and any bytes it sent after the CONNECT head, to a tunnel.
    private func handOff() {
        // Held here: the connection leaves its loop's table below.
        let connection = self.connection
        guard let exchange = connection.exchange, let server = setup?.server else { return }
        let serverLeftover = setup?.serverLeftover ?? []
        setup = nil
        connection.exchange = nil
        let leftover = connection.takeUnreadInput()
        let proxy = connection.proxy
        let tunnel = Tunnel(
            proxy: proxy, client: connection.socket, peer: connection.peer, server: server, target: exchange.head.targetText,
            leftover: leftover, greeting: ConnectHandler.tunnelGreeting + serverLeftover,
            startNanos: exchange.startNanos, agent: exchange.head.headers["User-Agent"], user: connection.authenticatedUser)
        connection.leaveLoop(stillCounted: true)
        proxy.adoptTunnel(tunnel)
    }

    // MARK: Interception

    /// Whether a CONNECT to `host` is decrypted: interception on, the host listed (and not in
    /// `never`), and this client not spliced for it after it kept refusing the handshake. A
    /// splice is counted here; the caller tunnels it blind.
    private func intercepts(host: String, exchange: Exchange) -> Bool {
        guard exchange.runtime.interceptor != nil, interception == nil else { return false }
        let lower = host.lowercased()
        guard exchange.runtime.config.tls.intercepts(host: lower) else { return false }
        if tunnelling.interceptedHosts.admits(client: clientAddress, host: lower, now: proxy.loop.now) { return true }
        telemetry.stats[.splicedTunnels].add(1)
        return false
    }

    /// Answers the CONNECT with 200; once that is written, ``startInterception()`` turns the
    /// socket into a TLS session.
    private func beginInterception(host: String, port: Int, exchange: Exchange) {
        guard let interceptor = exchange.runtime.interceptor else { return }
        exchange.status = 200
        exchange.outcome = .intercept
        exchange.keepAlive = true
        pendingInterception = PendingInterception(host: host.lowercased(), port: port, interceptor: interceptor)
        connection.sendHead(ConnectHandler.tunnelGreeting)
        connection.finishExchange()
        connection.flushSoon()
    }

    /// Switches to TLS once the 200 has left. The handshake then runs inside the reads, and
    /// `proxy.header_timeout` bounds it together with the first request head.
    private func startInterception() {
        guard let pending = pendingInterception else { return }
        pendingInterception = nil
        // The client spoke before it heard the 200: those bytes were read as plain text and
        // OpenSSL reads from the socket, so they cannot reach the handshake.
        guard !connection.hasUnreadInput else {
            telemetry.stats.count(.failed)
            proxy.logger.notice(
                "closed an intercepted tunnel: the client sent bytes before the 200 to its CONNECT",
                metadata: ["client": "\(connection.peer?.description ?? "-")", "host": "\(pending.host)"])
            return connection.close()
        }
        let tls: TLSTransport
        do {
            tls = try TLSTransport(socket: connection.socket, interceptor: pending.interceptor, host: pending.host)
        } catch {
            proxy.logger.error("cannot intercept", metadata: ["host": "\(pending.host)", "error": "\(error)"])
            return connection.close()
        }
        connection.transport = tls
        interception = Interception(host: pending.host, port: pending.port, tls: tls)
        connection.armHeaderDeadline()
        connection.updateInterest()
    }

    /// Called after every read of an intercepted connection whose handshake was not complete.
    private func checkHandshake() {
        guard let interception, !interception.handshakeDone, interception.tls.stage == .open else { return }
        self.interception?.handshakeDone = true
        telemetry.stats.count(.ok)
        if interception.tls.canSendFile { telemetry.stats[.kernelSessions].add(1) }
        recordHandshake(failure: nil, isRefusal: false)
    }

    /// The session failed (the connection closes next): a handshake failure is logged with
    /// the host and the reason, counted, and may splice the host.
    private func interceptionFailed() {
        guard let interception, !interception.handshakeDone else {
            if let reason = self.interception?.tls.failure {
                proxy.logger.debug(
                    "intercepted session ended", metadata: ["host": "\(self.interception?.host ?? "-")", "reason": "\(reason)"])
            }
            return
        }
        let outcome: Statistics.HandshakeOutcome =
            switch interception.tls.ending {
            case .alert: .rejected
            case .closed: .closed
            case .error, nil: .failed
            }
        let reason = interception.tls.failure ?? "unknown"
        // Only the client's verdict on the certificate it was shown counts towards a splice:
        // an alert (unknown_ca, bad_certificate, RFC 8446 §6.2) or a close (a pinning client
        // may send none) after Larder's Certificate message. Junk, a refused name, or a close
        // or reset before the certificate (no ClientHello at all) say nothing about it.
        let refused = interception.tls.certificateSent && (outcome == .rejected || outcome == .closed)
        handshakeFailed(outcome, reason: reason, isRefusal: refused)
    }

    /// The handshake (or the first request head) did not arrive within `proxy.header_timeout`.
    private func interceptionTimedOut() {
        guard let interception, !interception.handshakeDone else { return }
        // A stalled handshake proves nothing about the certificate: it never counts.
        handshakeFailed(.timeout, reason: "no TLS handshake within proxy.header_timeout", isRefusal: false)
    }

    private func handshakeFailed(_ outcome: Statistics.HandshakeOutcome, reason: String, isRefusal: Bool) {
        guard let interception else { return }
        self.interception?.handshakeDone = true  // counted once
        telemetry.stats.count(outcome)
        proxy.logger.notice(
            "TLS handshake with an intercepted client failed",
            metadata: [
                "client": "\(connection.peer?.description ?? "-")", "host": "\(interception.host)", "outcome": "\(outcome.rawValue)",
                "reason": "\(reason)", "refused_certificate": "\(isRefusal)",
            ])
        recordHandshake(failure: "\(outcome.rawValue): \(reason)", isRefusal: isRefusal)
    }

    private func recordHandshake(failure: String?, isRefusal: Bool) {
        guard let interception else { return }
        let tls = proxy.runtime.config.tls
        let client = clientAddress
        let spliced = tunnelling.interceptedHosts.record(
            client: client, host: interception.host, rule: Self.interceptRule(interception.host, tls), failure: failure,
            isRefusal: isRefusal, threshold: tls.spliceAfterFailures,
            spliceFor: tls.spliceFor.totalNanoseconds, now: proxy.loop.now)
        if spliced {
            proxy.logger.warning(
                "tls: client \(client) keeps refusing the certificate for \(interception.host); tunnelling it blind for \(tls.spliceFor.totalMilliseconds / 1000)s (other clients stay intercepted; once it trusts the CA, larder tls clear \(interception.host) ends this)",
                metadata: ["client": "\(client)", "host": "\(interception.host)", "failures_in_a_row": "\(tls.spliceAfterFailures)"])
        }
    }

    /// The `tls.intercept` entry `host` matches, as written: the label of the per-host TLS
    /// metrics (bounded by the configuration, where hosts under a wildcard are not).
    static func interceptRule(_ host: String, _ tls: TLSConfig) -> String {
        tls.intercept.first { $0.matches(host: host) }?.description ?? "other"
    }

    /// The client's address without its port: what a splice applies to. An IPv4 client of a
    /// dual-stack socket (systemd's `ListenStream=PORT`) arrives as `::ffff:a.b.c.d` (RFC 4291
    /// §2.5.5.2): it is the IPv4 address, so `GET /tls` and `--client` name it as one, and it
    /// is not counted with every other IPv4 client in the IPv6 prefix `::/64`.
    private var clientAddress: String { connection.peer?.unmapped.ipString ?? "-" }

    /// The URL an origin-form request inside an intercepted session stands for, or nil after
    /// answering it: `Host` (and an absolute target) must name the CONNECT host, so a session
    /// for one name cannot be used to reach another (RFC 9110 §15.5.20, 421).
    func interceptedURL(_ exchange: Exchange, interception: Interception) -> AbsoluteURL? {
        let expected = AbsoluteURL(scheme: "https", host: interception.host, port: interception.port, pathAndQuery: "/")
        let pathAndQuery: String
        switch exchange.head.target {
        case .origin(let path):
            pathAndQuery = path
        case .absolute(let url):
            guard url.scheme == "https", url.host == expected.host, url.port == expected.port else {
                misdirected(exchange, asked: url.authority, expected: expected)
                return nil
            }
            pathAndQuery = url.pathAndQuery
        case .authority, .asterisk:
            connection.respondGenerated(
                status: 400, message: "Larder: only requests for https://\(expected.authority)/ are answered inside this tunnel",
                outcome: .error)
            return nil
        }
        if let host = exchange.head.headers["Host"], !ASCII.equalsIgnoringCase(host, expected.authority),
            !ASCII.equalsIgnoringCase(host, "\(expected.host):\(expected.port)")
        {
            misdirected(exchange, asked: host, expected: expected)
            return nil
        }
        return AbsoluteURL(scheme: "https", host: expected.host, port: expected.port, pathAndQuery: pathAndQuery)
    }

    private func misdirected(_ exchange: Exchange, asked: String, expected: AbsoluteURL) {
        exchange.keepAlive = false
        proxy.logger.notice(
            "refused a request for another host inside an intercepted tunnel",
            metadata: ["client": "\(connection.peer?.description ?? "-")", "tunnel": "\(expected.authority)", "asked": "\(asked)"])
        connection.respondGenerated(
            status: 421, message: "Larder: this tunnel is for \(expected.authority), not \(asked)", outcome: .error)
    }
}
