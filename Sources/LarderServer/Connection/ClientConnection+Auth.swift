import LarderHTTP
import LarderIO

/// Proxy authentication of a request (RFC 9110 §11.7.1): 407 with a `Proxy-Authenticate`
/// challenge when the credentials are missing or wrong. `Proxy-Authorization` is hop-by-hop,
/// so it is never forwarded upstream (see ``HopByHop``).
extension ClientConnection {
    func refuseAuthentication(_ reason: String, exchange: Exchange) {
        proxy.telemetry.stats[.authFailures].add(1)
        let hadCredentials = exchange.head.headers.contains(.proxyAuthorization)
        if hadCredentials {
            // Missing credentials are the normal first step of every client; wrong ones are worth a line.
            proxy.logger.notice(
                "proxy authentication failed", metadata: ["client": "\(peer?.description ?? "-")", "reason": "\(reason)"])
        }
        let realm = exchange.runtime.config.proxy.authRealm
        respondGenerated(
            status: 407,
            message: hadCredentials
                ? "Larder: proxy authentication failed"
                : "Larder: this proxy needs a user name and password (http_proxy=http://USER:PASSWORD@host:port)",
            outcome: .error, cause: .auth,
            // RFC 7617 §2.1: charset tells clients to send UTF-8.
            extra: [("Proxy-Authenticate", "Basic realm=\"\(realm)\", charset=\"UTF-8\"")])
    }

    /// Hashes on the authenticator's thread, then carries on with the request (or refuses it).
    func waitForAuthentication(_ job: ProxyAuthenticator.Job, exchange: Exchange) {
        let authenticator = proxy.process.authenticator
        guard authenticator.hasRoom else {
            proxy.logger.warning("proxy authentication backlog full; refusing", metadata: ["client": "\(peer?.description ?? "-")"])
            exchange.keepAlive = false
            return respondGenerated(
                status: 503, message: "Larder: too many authentications in progress; retry shortly", outcome: .error, cause: .limit)
        }
        let token = proxy.park(self)
        let handle = proxy.loop.handle
        let id = ObjectIdentifier(exchange)
        authenticator.verify(job) { valid in
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.unpark(token)?.authenticated(valid, exchangeID: id)
            }
        }
    }

    private func authenticated(_ valid: Bool, exchangeID: ObjectIdentifier) {
        guard isExchanging, let exchange, ObjectIdentifier(exchange) == exchangeID else { return }
        if valid {
            proxy.pipeline.route(exchange, on: self)
        } else {
            refuseAuthentication("wrong user name or password", exchange: exchange)
        }
        flushSoon()
    }
}
