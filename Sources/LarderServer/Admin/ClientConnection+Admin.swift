import LarderCache
import LarderHTTP
import LarderIO

/// The admin listener: dashboard, health, counters, metrics, purge. Every request must name
/// the listener in `Host`, and mutating calls must not come from another site
/// (``AdminRequestGuard``); mutating calls need `Authorization: Bearer <admin.token>` when a
/// token is configured.
extension ClientConnection {
    func answerAdmin(_ exchange: Exchange) {
        exchange.outcome = .admin
        // First, before any endpoint (those added later included) sees the request.
        guard admitAdmin(exchange) else { return }
        guard case .origin(let target) = exchange.head.target else {
            respondAdmin(400, text: "the admin listener takes origin-form requests, for example GET /stats")
            return
        }
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let decision = AdminRouter.route(
            method: exchange.head.method, path: String(parts[0]), query: parts.count > 1 ? String(parts[1]) : "",
            authorization: exchange.head.headers["Authorization"], token: exchange.runtime.config.admin.token)
        switch decision {
        case .respond(let response):
            respondAdmin(response)
        case .unauthorized(let response):
            proxy.logger.warning("admin call refused: missing or wrong bearer token", metadata: ["client": "\(peer?.ipString ?? "-")"])
            respondAdmin(response)
        case .endpoint(let endpoint):
            perform(endpoint, exchange: exchange)
        }
    }

    /// Carries out what the router left to the proxy's state.
    private func perform(_ endpoint: AdminRouter.Endpoint, exchange: Exchange) {
        switch endpoint {
        case .dashboard:
            respondAdmin(.init(status: 200, contentType: "text/html; charset=utf-8", body: Array(Dashboard.html.utf8)))
        case .health:
            // A tier the configuration asks for that is not working is unhealthy, not "ok":
            // a load balancer or orchestrator should know the cache is not caching.
            let problems = proxy.storage.healthProblems
            if proxy.isDraining {
                respondAdmin(503, text: "draining")
            } else if !problems.isEmpty {
                respondAdmin(503, text: "unhealthy: " + problems.joined(separator: "; "))
            } else {
                respondAdmin(200, text: "ok")
            }
        case .stats:
            guard let json = try? statsDocument(proxy.process.currentRuntime).json() else {
                return respondAdmin(500, text: "the stats document could not be encoded")
            }
            respondAdmin(.json(json))
        case .metrics:
            let runtime = proxy.process.currentRuntime
            let text = proxy.telemetry.metrics.render(
                statsDocument(runtime), parents: proxy.forwarding.parentHealth, tls: runtime.config.tls,
                interceptedHosts: proxy.tunnelling.interceptedHosts)
            respondAdmin(.init(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: text))
        case .pac:
            answerAdminPAC(exchange)
        case .purgeKey(let key):
            answerPurge(CacheKey(normalized: key), subject: .key(key), config: exchange.runtime.config)
        case .purgeURL(let url):
            answerPurge(exchange.runtime.key(for: url), subject: .url(url.description), config: exchange.runtime.config)
        case .listCache(let prefix, let limit):
            answerCacheListing(prefix: prefix, limit: limit)
        case .ban(let pattern):
            answerBan(pattern)
        case .clearCache:
            proxy.cache.removeAll()
            proxy.telemetry.hosts.removeAll()
            proxy.logger.notice("cache cleared through the admin endpoint")
            respondAdmin(.json(Array("{\"cleared\":true}\n".utf8)))
        case .tlsListing:
            answerTLSListing(exchange)
        case .endSplices(let host, let client):
            answerEndSplices(host: host, client: client)
        }
    }

    /// Refuses (421 or 403, and a log line) what a web page could have sent: see
    /// ``AdminRequestGuard``. A system call per admin request reads the address it reached.
    /// `/stats` and `/metrics` now: what each service's owner holds, under `runtime`.
    private func statsDocument(_ runtime: RuntimeConfig) -> StatsDocument {
        StatsDocument(
            telemetry: proxy.telemetry, storage: proxy.storage, forwarding: proxy.forwarding, tunnelling: proxy.tunnelling,
            runtime: runtime)
    }

    private func admitAdmin(_ exchange: Exchange) -> Bool {
        let headers = exchange.head.headers
        let guardian = AdminRequestGuard(
            local: (try? socket.localAddress()) ?? nil, allowHosts: exchange.runtime.config.admin.allowHosts)
        guard
            let refusal = guardian.refusal(
                method: exchange.head.method, host: headers["Host"], origin: headers["Origin"], fetchSite: headers["Sec-Fetch-Site"])
        else { return true }
        proxy.logger.warning(
            "admin request refused: \(refusal.message)",
            metadata: ["client": "\(peer?.ipString ?? "-")", "method": "\(exchange.head.method.rawValue)", "status": "\(refusal.status)"])
        // The connection closes: a client that names the wrong server is not worth keeping.
        exchange.keepAlive = false
        respondAdmin(refusal.status, text: refusal.message)
        return false
    }

    func respondAdmin(_ status: Int, text: String) {
        respondAdmin(.text(status, text))
    }

    /// Queues an admin response (no caching by intermediaries) through the one head writer
    /// and finishes the exchange.
    func respondAdmin(_ response: AdminRouter.Response) {
        guard let exchange else { return }
        exchange.status = response.status
        var head = ResponseHeadWriter(status: response.status)
        head.field("Date", proxy.httpDate)
        head.field("Content-Type", response.contentType)
        head.field("Cache-Control", "no-store")
        for field in response.fields { head.field(field.name, field.value) }
        queueHead(head, length: response.body.count, exchange: exchange)
        if exchange.head.method != .head {
            sendBody(response.body)
            exchange.bodyBytesSent = response.body.count
        }
        finishExchange()
        flushSoon()
    }
}

extension HTTPMethod {
    /// Squid's PURGE method, accepted on the admin listener as a synonym of POST /purge.
    static let purge = HTTPMethod("PURGE")
}

/// `application/x-www-form-urlencoded` query values.
enum QueryString {
    static func value(_ name: String, in query: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, decode(parts[0]) == name else { continue }
            return decode(parts[1])
        }
        return nil
    }

    static func decode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var index = text.utf8.startIndex
        let utf8 = text.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "+") {
                bytes.append(32)
            } else if byte == UInt8(ascii: "%"), let high = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex),
                let low = utf8.index(index, offsetBy: 2, limitedBy: utf8.endIndex), low < utf8.endIndex,
                let value = UInt8(String(decoding: [utf8[high], utf8[low]], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                index = utf8.index(after: low)
                continue
            } else {
                bytes.append(byte)
            }
            index = utf8.index(after: index)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Comparisons that take the same time whatever the inputs, for secrets.
enum ConstantTime {
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0 && x.count == y.count
    }
}
