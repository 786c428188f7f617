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
        let path = String(parts[0])
        let query = parts.count > 1 ? String(parts[1]) : ""
        let method = exchange.head.method
        let readOnly = method == .get || method == .head
        switch path {
        case "/", "/index.html":
            guard readOnly else { return methodNotAllowed("GET, HEAD") }
            respondAdmin(200, contentType: "text/html; charset=utf-8", body: Array(Dashboard.html.utf8))
        case "/healthz":
            guard readOnly else { return methodNotAllowed("GET, HEAD") }
            // A tier the configuration asks for that is not working is unhealthy, not "ok":
            // a load balancer or orchestrator should know the cache is not caching.
            let problems = proxy.shared.healthProblems
            if proxy.isDraining {
                respondAdmin(503, text: "draining")
            } else if !problems.isEmpty {
                respondAdmin(503, text: "unhealthy: " + problems.joined(separator: "; "))
            } else {
                respondAdmin(200, text: "ok")
            }
        case "/stats":
            guard readOnly else { return methodNotAllowed("GET, HEAD") }
            let document = StatsDocument(proxy.shared)
            guard let json = try? document.json() else { return respondAdmin(500, text: "the stats document could not be encoded") }
            respondAdmin(200, contentType: "application/json", body: json)
        case "/metrics":
            guard readOnly else { return methodNotAllowed("GET, HEAD") }
            respondAdmin(
                200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                body: proxy.shared.metrics.render(StatsDocument(proxy.shared), shared: proxy.shared))
        case "/purge":
            guard method == .post || method == .purge else { return methodNotAllowed("POST") }
            guard authorized(exchange) else { return }
            if let key = QueryString.value("key", in: query), !key.isEmpty {
                return answerKeyPurge(CacheKey(normalized: key))
            }
            guard let text = QueryString.value("url", in: query), let url = try? AbsoluteURL(parsing: text) else {
                respondAdmin(400, text: "POST /purge?url=http://host/path or ?key=debian:/path (URL-encoded) names the URL or key to purge")
                return
            }
            let purged = proxy.shared.cache.purge(exchange.runtime.key(for: url))
            proxy.shared.stats.invalidations.add(purged ? 1 : 0)
            proxy.logger.notice("purged", metadata: ["url": "\(proxy.loggable(url.description))", "found": "\(purged)"])
            respondAdmin(
                200, contentType: "application/json", body: Array("{\"url\":\(JSON.string(url.description)),\"purged\":\(purged)}\n".utf8))
        case "/cache" where readOnly:
            // URLs can carry credentials (signed query strings): listed only with the token,
            // and with log.redact_query's values hidden.
            guard authorized(exchange) else { return }
            answerCacheListing(query: query)
        case "/ban":
            guard method == .post else { return methodNotAllowed("POST") }
            guard authorized(exchange) else { return }
            answerBan(query: query)
        case "/cache":
            guard method == .delete else { return methodNotAllowed("GET, HEAD, DELETE") }
            guard authorized(exchange) else { return }
            proxy.shared.cache.removeAll()
            proxy.shared.hosts.removeAll()
            proxy.logger.notice("cache cleared through the admin endpoint")
            respondAdmin(200, contentType: "application/json", body: Array("{\"cleared\":true}\n".utf8))
        case "/proxy.pac":
            guard readOnly else { return methodNotAllowed("GET, HEAD") }
            answerAdminPAC(exchange)
        case "/tls", "/tls/splices": answerTLSAdmin(exchange, path: path, query: query, authorized: authorized)
        default:
            respondAdmin(
                404,
                text: "no admin endpoint \(path); try /, /healthz, /stats, /metrics, /proxy.pac, GET /cache?prefix=, POST /purge?url=, "
                    + "POST /ban?prefix= or ?glob=, DELETE /cache")
        }
    }

    /// Refuses (421 or 403, and a log line) what a web page could have sent: see
    /// ``AdminRequestGuard``. A system call per admin request reads the address it reached.
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

    /// Checks the bearer token for a mutating call; answers 401 itself when it fails.
    private func authorized(_ exchange: Exchange) -> Bool {
        let token = exchange.runtime.config.admin.token
        guard !token.isEmpty else { return true }
        let given = exchange.head.headers["Authorization"] ?? ""
        if ConstantTime.equal(given, "Bearer " + token) { return true }
        proxy.logger.warning("admin call refused: missing or wrong bearer token", metadata: ["client": "\(peer?.ipString ?? "-")"])
        respondAdmin(
            401, text: "this call needs Authorization: Bearer <admin.token>", extra: [("WWW-Authenticate", "Bearer realm=\"larder\"")])
        return false
    }

    private func methodNotAllowed(_ allowed: String) {
        respondAdmin(405, text: "method not allowed here", extra: [("Allow", allowed)])
    }

    func respondAdmin(_ status: Int, text: String, extra: [(String, String)] = []) {
        respondAdmin(status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8), extra: extra)
    }

    /// Queues an admin response (no caching by intermediaries) and finishes the exchange.
    func respondAdmin(_ status: Int, contentType: String, body: [UInt8], extra: [(String, String)] = []) {
        guard let exchange else { return }
        exchange.status = status
        let close = !exchange.keepAlive || !exchange.requestBodyComplete || proxy.isDraining
        if close { exchange.keepAlive = false }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        HeadSerializer.appendStatusLine(status, HTTPStatus.reason(status), to: &bytes)
        HeadSerializer.appendField("Date", proxy.httpDate, to: &bytes)
        HeadSerializer.appendField("Content-Type", contentType, to: &bytes)
        HeadSerializer.appendField("Content-Length", String(body.count), to: &bytes)
        HeadSerializer.appendField("Cache-Control", "no-store", to: &bytes)
        for (name, value) in extra { HeadSerializer.appendField(name, value, to: &bytes) }
        if close { bytes.append(contentsOf: "Connection: close\r\n".utf8) }
        bytes.append(contentsOf: HeadSerializer.crlf)
        output.append(bytes)
        if exchange.head.method != .head {
            output.append(body)
            exchange.bodyBytesSent = body.count
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
