import LarderCache
import LarderHTTP
import LarderIO

/// Response heads and bodies as they go on the wire, answers from the store and generated
/// ones, and the record (counters, access line) each exchange leaves.
extension ClientConnection {
    /// Ends `head` with its framing and `Connection` field and queues it.
    func queueHead(_ head: consuming ResponseHeadWriter, length: Int?, chunked: Bool = false, exchange: Exchange) {
        head.end(length: length, chunked: chunked, connection: connectionField(exchange))
        sendHead(head.bytes)
    }

    /// Queues a stored response: its prepared head, the per-hit fields, and the body by
    /// reference (a disk-tier body over one block starts ``startDiskBody(_:first:count:exchange:)``,
    /// which ends the exchange); or a 206 slice of it, or a 416.
    func queueStored(_ stored: StoredResponse, exchange: Exchange, range: RangeRequest.Resolution, now: Double) {
        let age = Int(stored.currentAge(now: now))
        var first = 0
        var count = stored.bodyLength
        switch range {
        case .unsatisfiable:
            exchange.status = 416
            queueRangeNotSatisfiable(length: stored.bodyLength, headers: stored.headers, exchange: exchange)
            return
        case .partial(let start, let last):
            exchange.status = 206
            first = start
            count = last - start + 1
            var head = ResponseHeadWriter(status: 206, capacity: 512)
            head.fields(wire: stored.wireFields)
            head.via()
            head.field("Content-Range", "bytes \(start)-\(last)/\(stored.bodyLength)")
            sendHead(head.bytes)
        case .full:
            exchange.status = stored.status
            sendHead(stored.headBytes)
        }
        // The per-hit fields written in place into the loop's scratch buffer: no array of their own.
        let cacheStatus = exchange.cacheStatus
        let hasBody = stored.status != 204 && stored.status != 304
        let connection = connectionField(exchange)
        sendHeadEnd(capacity: 64 + ResponseHeadWriter.endCapacity + cacheStatus.renderedCapacity) { buffer in
            var writer = ByteWriter(buffer)
            writer.append("Age: " as StaticString)
            writer.append(decimal: max(0, age))
            writer.append("\r\n" as StaticString)
            cacheStatus.appendField(to: &writer)
            ResponseHeadWriter.writeEnd(length: hasBody ? count : nil, chunked: false, connection: connection, into: &writer)
            return writer.count
        }
        if hasBody && exchange.head.method != .head && count > 0 {
            switch stored.body {
            case .memory(let bytes):
                sendBody(bytes, from: first, count: count)
            case .file:
                // From the disk tier: sent as its blocks are checked, never straight from the file.
                exchange.framing = .length(count)
                startDiskBody(stored, first: first, count: count, exchange: exchange)
                return
            case .memoryFile(let file, _):
                sendBody(file: file, offset: first, count: count)
            }
            exchange.bodyBytesSent = count
            proxy.telemetry.stats[.bytesFromCache].add(count)
        }
    }

    /// Queues a 304 for a client whose conditional request matched (RFC 9110 §15.4.5): the
    /// validator and caching fields of the response it stands for, no body.
    func queueNotModified(headers: HTTPHeaders, age: Double?, exchange: Exchange) {
        var head = ResponseHeadWriter(status: 304)
        for field in headers where Preconditions.notModifiedFields.contains(where: { ASCII.equalsIgnoringCase($0, field.name) }) {
            head.field(field.name, field.value)
        }
        head.via()
        if let age { head.field("Age", String(Int(age))) }
        head.cacheStatus(exchange.cacheStatus)
        queueHead(head, length: nil, exchange: exchange)
    }

    /// Queues a 416 for a range past the end (RFC 9110 §15.5.17).
    func queueRangeNotSatisfiable(length: Int, headers: HTTPHeaders, exchange: Exchange) {
        var head = ResponseHeadWriter(status: 416)
        head.field("Date", proxy.httpDate)
        head.field("Content-Range", "bytes */\(length)")
        if let etag = headers["ETag"] { head.field("ETag", etag) }
        head.via()
        head.cacheStatus(exchange.cacheStatus)
        queueHead(head, length: 0, exchange: exchange)
    }

    /// Queues a response Larder generates itself (errors, refusals): a one-line text body.
    /// Returns the body bytes queued (none for a HEAD), which the access line counts.
    @discardableResult
    func queueGenerated(
        status: Int, message: String, cacheStatus: CacheStatus?, connection: ResponseHeadWriter.ConnectionField,
        headOnly: Bool = false, extra: [(String, String)] = []
    ) -> Int {
        let body = Array((message + "\n").utf8)
        var head = ResponseHeadWriter(status: status, capacity: 256 + body.count)
        head.field("Date", proxy.httpDate)
        head.field("Content-Type", "text/plain; charset=utf-8")
        head.via()
        if let cacheStatus { head.cacheStatus(cacheStatus) }
        for (name, value) in extra { head.field(name, value) }
        head.end(length: body.count, connection: connection)
        sendHead(head.bytes)
        guard !headOnly else { return 0 }
        sendBody(body)
        return body.count
    }

    /// Answers the current exchange with a generated response and finishes it.
    /// `cause`: why, for the access log (else implied by an error status).
    func respondGenerated(
        status: Int, message: String, outcome: RequestOutcome, cause: FailureCause? = nil, extra: [(String, String)] = []
    ) {
        guard let exchange else { return }
        exchange.status = status
        exchange.outcome = outcome
        if let cause { exchange.failure = cause }
        let cacheStatus = exchange.cacheStatus
        exchange.bodyBytesSent = queueGenerated(
            status: status, message: message,
            cacheStatus: cacheStatus.hit || cacheStatus.fwd != nil || cacheStatus.detail != nil ? cacheStatus : nil,
            connection: connectionField(exchange), headOnly: exchange.head.method == .head, extra: extra)
        finishExchange()
        flushSoon()
    }

    /// 504 for a request that may only be answered from the cache, with nothing suitable
    /// stored (offline, or RFC 9111 §5.2.1.7 only-if-cached).
    func respondNotCached(_ exchange: Exchange) {
        if exchange.runtime.config.cache.offline { return respondOffline(exchange) }
        exchange.cacheStatus = .forwarded(.miss)
        exchange.cacheStatus.detail = "only-if-cached"
        respondGenerated(status: 504, message: "Larder: not in the cache (only-if-cached)", outcome: .miss, cause: .uncached)
    }

    /// 504 for a request offline mode may not forward, with nothing stored.
    func respondOffline(_ exchange: Exchange) {
        exchange.cacheStatus = .forwarded(.miss)
        exchange.cacheStatus.detail = "offline"
        respondGenerated(status: 504, message: "Larder is offline and has no stored copy", outcome: .miss, cause: .offline)
    }

    /// Answers from a stored response: 304 for a matching conditional request, 206/416 for a
    /// range, else the whole response.
    func serveFromCache(
        _ stored: StoredResponse, exchange: Exchange, stale: Bool, now: Double, fromDisk: Bool = false, refreshing: Bool = false,
        status: CacheStatus? = nil
    ) {
        var cacheStatus = status ?? CacheStatus()
        if status == nil {
            cacheStatus.hit = true
            // RFC 9211 §2.2: the remaining freshness as this cache judges it; under cache_first
            // that is the route's ttl for a success, not the origin's (a negative ttl would say
            // "stale"), and at most cache.negative_ttl for anything else.
            var lifetime = CacheDecision.lifetime(of: stored, negativeTTL: exchange.runtime.negativeTTL)
            if exchange.policy == .cacheFirst, CacheDecision.isSuccess(stored.status), let ttl = exchange.route?.ttl?.totalSeconds {
                lifetime = ttl
            }
            cacheStatus.ttl = Int((lifetime - stored.currentAge(now: now)).rounded(.down))
            var details: [String] = []
            if stored.isOnDisk || fromDisk { details.append("disk") }
            if exchange.runtime.config.cache.offline && stale {
                details.append("offline")
            } else if stale {
                details.append(refreshing ? "stale-while-revalidate" : "stale")
            }
            cacheStatus.detail = details.isEmpty ? nil : details.joined(separator: "-")
        }
        exchange.cacheStatus = cacheStatus
        exchange.outcome =
            status != nil
            ? (status?.fwdStatus == 304 ? .revalidated : .stale)
            : stale ? .stale : (stored.isOnDisk || fromDisk ? .diskHit : .memoryHit)
        let request = exchange.head.headers
        if Preconditions.notModified(request: request, status: stored.status, etag: stored.etag, lastModified: stored.lastModified) {
            exchange.status = 304
            queueNotModified(headers: stored.headers, age: stored.currentAge(now: now), exchange: exchange)
        } else if exchange.head.method == .get, stored.status == 200, request.contains("Range") {
            let resolution = RangeRequest.resolve(request: request, length: stored.bodyLength, responseHeaders: stored.headers)
            queueStored(stored, exchange: exchange, range: resolution, now: now)
        } else {
            queueStored(stored, exchange: exchange, range: .full, now: now)
        }
        // A body sent from the disk tier block by block ends the exchange with its last block.
        if exchange.diskBody == nil { finishExchange() }
        flushSoon()
    }

    /// Counts and logs a finished (or abandoned) exchange: its outcome and status, its host's
    /// and route's counters, the dashboard's recent failures, the access line.
    func record(_ exchange: Exchange) {
        proxy.telemetry.stats.count(exchange.outcome)
        if exchange.outcome != .admin { proxy.telemetry.stats.countStatus(exchange.status) }
        if interception != nil { proxy.telemetry.stats.countIntercepted(exchange.outcome) }
        let duration = Clocks.monotonicNanos() &- exchange.startNanos
        proxy.telemetry.metrics.requestDuration.record(nanoseconds: duration, result: .init(exchange.outcome))
        // Larder's own pages (the onboarding page on the proxy port) are no host it caches.
        if exchange.outcome != .admin, let url = exchange.head.url ?? exchange.url {
            let hit = exchange.outcome.isFromCache
            let slot: HostCounters.Slot
            if let held = hostSlot, held.holds(host: url.host, port: url.port) {
                slot = held
            } else {
                slot = proxy.telemetry.hosts.slot(for: .init(host: url.host, port: url.port, defaultPort: url.defaultPort))
                hostSlot = slot
            }
            slot.record(hit: hit, bytes: exchange.bodyBytesSent)
            // A preset's routes count under its name, a file's under its pattern (read in place:
            // a copy of the route would retain each of its fields).
            if let label = exchange.route?.source ?? exchange.route?.match.text {
                let counters: HostCounters.Slot
                if let held = routeSlot, held.holds(host: label, port: 0) {
                    counters = held
                } else {
                    counters = proxy.telemetry.routeCounters.slot(for: .init(host: label, port: 0, defaultPort: 0))
                    routeSlot = counters
                }
                counters.record(hit: hit, bytes: exchange.bodyBytesSent)
            }
        }
        let detail = exchange.failure ?? (exchange.outcome == .error ? FailureCause.implied(byStatus: exchange.status) : nil)
        if let detail { noteFailure(exchange, cause: detail) }
        // A stale answer the origin's failure brought (stale-if-error) names it, though it is not a failure.
        let logged = detail ?? exchange.staleBecause
        // The target's text is built only for a log that is on; the admin listener's requests
        // (a dashboard polls every second) only when asked for. The onboarding page's, on the
        // proxy port, always: who fetched the CA is worth a line.
        guard proxy.accessLog.enabled, exchange.outcome != .admin || kind == .proxy || exchange.runtime.config.log.adminRequests
        else { return }
        let headers = exchange.head.headers
        let user =
            exchange.runtime.config.proxy.authUsers.isEmpty || interception != nil
            ? nil : headers["Proxy-Authorization"].flatMap(BasicCredentials.init(header:))?.user
        proxy.accessLog.record(
            client: peer, method: exchange.head.method.rawValue,
            url: interception == nil ? Self.logTarget(exchange.head) : .text(exchange.url?.description ?? exchange.head.targetText),
            status: exchange.status, outcome: .request(exchange.outcome), bytes: exchange.bodyBytesSent,
            durationNanos: duration, attempts: exchange.attempts, retries: exchange.retries, tls: interception?.tls.version,
            key: exchange.customKey, user: user, agent: headers["User-Agent"], detail: logged)
    }

    /// Lists a failed request among the dashboard's recent failures, its query redacted as in the
    /// log, with the client's address. Not a request refused before it passed proxy
    /// authentication (a 407, a head refused before it was checked): with those, anyone who can
    /// connect could push the users' failures out of the list. They are counted and logged.
    func noteFailure(_ exchange: Exchange, cause: FailureCause) {
        guard exchange.admitted else { return }
        let url = exchange.url?.description ?? exchange.head.targetText
        proxy.telemetry.recentFailures.record(
            .init(
                time: Clocks.wallSeconds(), client: peer?.ipString ?? "-", method: exchange.head.method.rawValue,
                url: proxy.loggable(url), status: exchange.status, cause: cause))
    }

    /// What the access log names as `head`'s target: an absolute URL is written from its parts.
    static func logTarget(_ head: RequestHead) -> AccessLog.Target {
        if case .absolute(let url) = head.target { return .absolute(url) }
        return .text(head.targetText)
    }

    /// The proxy's own address, for messages that tell clients how to use it.
    var proxyAddressHint: String {
        if let local = try? socket.localAddress() { return local.description }
        return "127.0.0.1:3128"
    }
}
