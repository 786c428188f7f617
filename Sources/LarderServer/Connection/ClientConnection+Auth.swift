import LarderConfig
import LarderHTTP
import LarderIO

/// Proxy authentication of a request (RFC 9110 §11.7.1): 407 with a `Proxy-Authenticate`
/// challenge when the credentials are missing or wrong. `Proxy-Authorization` is hop-by-hop,
/// so it is never forwarded upstream (see ``HopByHop``).
extension ClientConnection {
    func refuseAuthentication(_ reason: String, exchange: Exchange) {
        proxy.telemetry.stats[.authFailures].add(1)
        let hadCredentials = exchange.head.headers.contains(.proxyAuthorization)
        // Missing credentials are the normal first step of every client; wrong ones are worth a
        // line, one a second at most per loop (a client sending wrong ones must not flood the log;
        // larder_auth_failures_total counts them all).
        if hadCredentials, let left = proxy.authWarnings.allow(now: proxy.loop.now) {
            proxy.logger.notice(
                "proxy authentication failed",
                metadata: ["client": "\(peer?.description ?? "-")", "reason": "\(reason)", "left_out": "\(left)"])
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

    /// Checks `exchange`'s credentials against `users`, then routes it, refuses it, or waits
    /// for its hash.
    func authenticate(_ exchange: Exchange, users: [ProxyUser]) {
        switch proxy.process.authenticator.check(
            exchange.head.headers.values("Proxy-Authorization"), users: users, now: proxy.loop.now)
        {
        case .allowed(let user):
            authenticatedUser = user
            proxy.pipeline.route(exchange, on: self)
        case .denied(let reason):
            refuseAuthentication(reason, exchange: exchange)
        case .verify(let job):
            waitForAuthentication(job, exchange: exchange)
        }
    }

    /// Hashes on the authenticator's thread, then carries on with the request (or refuses it).
    /// A client with its share of checks queued (``ProxyAuthenticator/perClientBacklog``) is
    /// answered 503, as a check another client's took the place of.
    func waitForAuthentication(_ job: ProxyAuthenticator.Job, exchange: Exchange) {
        let token = proxy.park(self)
        let handle = proxy.loop.handle
        let id = ObjectIdentifier(exchange)
        let queued = proxy.process.authenticator.verify(job, client: ClientAddress(peer) ?? ClientAddress(words: (0, 0))) { outcome in
            handle.execute { loop in
                (loop.context as? ProxyLoop)?.unpark(token)?.authenticated(outcome, job: job, exchangeID: id)
            }
        }
        if !queued, let connection = proxy.unpark(token) {
            connection.authenticated(.busy, job: job, exchangeID: id)
        }
    }

    private func authenticated(_ outcome: ProxyAuthenticator.Outcome, job: ProxyAuthenticator.Job, exchangeID: ObjectIdentifier) {
        guard isExchanging, let exchange, ObjectIdentifier(exchange) == exchangeID else { return }
        // A reload while the check waited changed or removed its user (review 120 F3): the
        // verdict is the old hash's, so the request is checked again under the users now.
        let users = proxy.runtime.config.proxy.authUsers
        if outcome != .busy, !ProxyAuthenticator.isCurrent(job, users: users) {
            if users.isEmpty { proxy.pipeline.route(exchange, on: self) } else { authenticate(exchange, users: users) }
            flushSoon()
            return
        }
        switch outcome {
        case .valid:
            authenticatedUser = ProxyAuthenticator.User(name: job.user, hash: job.hash)
            proxy.pipeline.route(exchange, on: self)
        case .invalid:
            refuseAuthentication("wrong user name or password", exchange: exchange)
        case .busy:
            if let left = proxy.authWarnings.allow(now: proxy.loop.now) {
                proxy.logger.warning(
                    "proxy authentication backlog full for this client; refusing",
                    metadata: ["client": "\(peer?.description ?? "-")", "left_out": "\(left)"])
            }
            exchange.keepAlive = false
            respondGenerated(
                status: 503, message: "Larder: too many authentications in progress; retry shortly", outcome: .error, cause: .limit)
        }
        flushSoon()
    }
}
