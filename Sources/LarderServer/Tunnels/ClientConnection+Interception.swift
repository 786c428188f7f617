import LarderConfig
import LarderHTTP
import LarderIO
import LarderTLS

/// HTTPS interception (docs/SECURITY.md): a CONNECT to a host in `tls.intercept` is answered
/// 200, then the client's socket becomes the server side of a TLS session showing a
/// certificate the local CA minted for that host. The HTTP/1.1 requests inside go through the
/// same pipeline as plain ones, as `https://host/path`.
extension ClientConnection {
    /// What an intercepted connection answers for.
    struct Interception {
        /// The CONNECT host, lower case (a DNS name: `tls.intercept` lists names only).
        let host: String
        let port: Int
        let tls: TLSTransport
        var handshakeDone = false
    }

    /// Whether a CONNECT to `host` is decrypted: interception on, the host listed (and not in
    /// `never`), and this client not spliced for it after it kept refusing the handshake. A
    /// splice is counted here; the caller tunnels it blind.
    func intercepts(host: String, exchange: Exchange) -> Bool {
        guard exchange.runtime.interceptor != nil, interception == nil else { return false }
        let lower = host.lowercased()
        guard exchange.runtime.config.tls.intercepts(host: lower) else { return false }
        if proxy.shared.interceptedHosts.admits(client: clientAddress, host: lower, now: proxy.loop.now) { return true }
        proxy.shared.stats[.splicedTunnels].add(1)
        return false
    }

    /// Answers the CONNECT with 200; once that is written, ``startInterception()`` turns the
    /// socket into a TLS session.
    func beginInterception(host: String, port: Int, exchange: Exchange) {
        guard let interceptor = exchange.runtime.interceptor else { return }
        exchange.status = 200
        exchange.outcome = .intercept
        exchange.keepAlive = true
        pendingInterception = PendingInterception(host: host.lowercased(), port: port, interceptor: interceptor)
        output.append(ClientConnection.tunnelGreeting)
        finishExchange()
        flushSoon()
    }

    /// Switches to TLS once the 200 has left. The handshake then runs inside the reads, and
    /// `proxy.header_timeout` bounds it together with the first request head.
    func startInterception() {
        guard let pending = pendingInterception else { return }
        pendingInterception = nil
        // The client spoke before it heard the 200: those bytes were read as plain text and
        // OpenSSL reads from the socket, so they cannot reach the handshake.
        guard inbound.isEmpty else {
            proxy.shared.stats.count(.failed)
            proxy.logger.notice(
                "closed an intercepted tunnel: the client sent bytes before the 200 to its CONNECT",
                metadata: ["client": "\(peer?.description ?? "-")", "host": "\(pending.host)"])
            return close()
        }
        let tls: TLSTransport
        do {
            tls = try TLSTransport(socket: socket, interceptor: pending.interceptor, host: pending.host)
        } catch {
            proxy.logger.error("cannot intercept", metadata: ["host": "\(pending.host)", "error": "\(error)"])
            return close()
        }
        transport = tls
        interception = Interception(host: pending.host, port: pending.port, tls: tls)
        armHeaderDeadline()
        updateInterest()
    }

    /// Called after every read of an intercepted connection whose handshake was not complete.
    func checkHandshake() {
        guard let interception, !interception.handshakeDone, interception.tls.stage == .open else { return }
        self.interception?.handshakeDone = true
        proxy.shared.stats.count(.ok)
        if interception.tls.canSendFile { proxy.shared.stats[.kernelSessions].add(1) }
        recordHandshake(failure: nil, isRefusal: false)
    }

    /// The session failed (the connection closes next): a handshake failure is logged with
    /// the host and the reason, counted, and may splice the host.
    func interceptionFailed() {
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
    func interceptionTimedOut() {
        guard let interception, !interception.handshakeDone else { return }
        // A stalled handshake proves nothing about the certificate: it never counts.
        handshakeFailed(.timeout, reason: "no TLS handshake within proxy.header_timeout", isRefusal: false)
    }

    private func handshakeFailed(_ outcome: Statistics.HandshakeOutcome, reason: String, isRefusal: Bool) {
        guard let interception else { return }
        self.interception?.handshakeDone = true  // counted once
        proxy.shared.stats.count(outcome)
        proxy.logger.notice(
            "TLS handshake with an intercepted client failed",
            metadata: [
                "client": "\(peer?.description ?? "-")", "host": "\(interception.host)", "outcome": "\(outcome.rawValue)",
                "reason": "\(reason)", "refused_certificate": "\(isRefusal)",
            ])
        recordHandshake(failure: "\(outcome.rawValue): \(reason)", isRefusal: isRefusal)
    }

    private func recordHandshake(failure: String?, isRefusal: Bool) {
        guard let interception else { return }
        let tls = proxy.runtime.config.tls
        let client = clientAddress
        let spliced = proxy.shared.interceptedHosts.record(
            client: client, host: interception.host, rule: Self.interceptRule(interception.host, tls), failure: failure,
            isRefusal: isRefusal, threshold: tls.spliceAfterFailures,
            spliceFor: tls.spliceFor.totalNanoseconds, now: proxy.loop.now)
        if spliced {
            proxy.logger.warning(
                "tls: client \(client) keeps refusing the certificate for \(interception.host); tunnelling it blind for \(tls.spliceFor.totalMilliseconds / 1000)s (other clients stay intercepted)",
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
    private var clientAddress: String { peer?.unmapped.ipString ?? "-" }

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
            respondGenerated(
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
            metadata: ["client": "\(peer?.description ?? "-")", "tunnel": "\(expected.authority)", "asked": "\(asked)"])
        respondGenerated(
            status: 421, message: "Larder: this tunnel is for \(expected.authority), not \(asked)", outcome: .error)
    }
}

/// An intercepted CONNECT whose 200 is still being written.
struct PendingInterception {
    let host: String
    let port: Int
    let interceptor: TLSInterceptor
}
