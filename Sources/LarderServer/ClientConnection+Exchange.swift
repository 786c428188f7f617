import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// The request pipeline of a connection: target checks, route, cache lookup, then upstream
/// through a fill whose body streams back to the client.
extension ClientConnection: FillReader, RequestBodySource {
    /// Starts answering a parsed request.
    func begin(_ head: RequestHead) {
        let runtime = proxy.runtime
        let exchange = Exchange(head: head, startNanos: proxy.loop.now, runtime: runtime)
        self.exchange = exchange

        let framing: BodyFraming
        do {
            framing = try BodyFraming.ofRequest(head)
        } catch {
            proxy.shared.stats.badRequests.add(1)
            rejectAndClose(error)
            return
        }
        exchange.requestFraming = framing
        if framing != .none { exchange.body = RequestBodyReader(framing: framing) }

        if kind == .admin {
            answerAdmin(exchange)
            return
        }

        let url: AbsoluteURL
        switch head.target {
        case .absolute(let absolute):
            url = absolute
        case .origin, .asterisk:
            // RFC 9112 §3.2.2: a proxy is sent absolute-form targets; this client thinks it is
            // talking to an origin server.
            respondGenerated(
                status: 400,
                message: "Larder is a forward proxy: send requests in absolute form (GET http://host/path), "
                    + "for example by setting http_proxy=http://\(proxyAddressHint)",
                outcome: .error)
            return
        case .authority:
            exchange.keepAlive = false
            respondGenerated(status: 501, message: "CONNECT tunnels are not supported by this Larder build", outcome: .error)
            return
        }

        exchange.route = runtime.routes.match(
            method: head.method.rawValue, scheme: url.scheme, host: url.host, port: url.port, pathAndQuery: url.pathAndQuery)
        let policy = exchange.route?.policy ?? runtime.config.cache.defaultPolicy
        let key = CacheKey(url)

        if head.method == .get || head.method == .head, policy != .networkOnly {
            if let stored = lookup(key, head: head, exchange: exchange) {
                serveStored(stored, exchange: exchange)
                return
            }
        } else if head.method != .get && head.method != .head {
            exchange.cacheStatus = "larder; fwd=method"
        } else {
            exchange.cacheStatus = "larder; fwd=bypass"
        }
        forward(url, key: key, exchange: exchange)
    }

    /// A fresh stored response for this request, or nil (a stale one is dropped).
    private func lookup(_ key: CacheKey, head: RequestHead, exchange: Exchange) -> StoredResponse? {
        let requestCC = CacheControl(head.headers)
        // RFC 9111 §5.2.1.4 and §5.4: no-cache (or Pragma: no-cache without Cache-Control)
        // means the stored copy may not be used without going to the origin.
        if requestCC.noCache || (requestCC.isEmpty && head.headers.listElements("Pragma").contains("no-cache")) {
            exchange.cacheStatus = "larder; fwd=request"
            return nil
        }
        guard let variants = proxy.shared.memory.lookup(key) else {
            exchange.cacheStatus = "larder; fwd=uri-miss"
            return nil
        }
        guard let stored = variants.first(where: { VaryMatcher.matches($0, request: head.headers) }) else {
            exchange.cacheStatus = "larder; fwd=vary-miss"
            return nil
        }
        if stored.isFresh(now: Clocks.wallSeconds()) { return stored }
        proxy.shared.memory.remove(stored)
        exchange.cacheStatus = "larder; fwd=stale"
        return nil
    }

    private func serveStored(_ stored: StoredResponse, exchange: Exchange) {
        exchange.outcome = .memoryHit
        exchange.status = stored.status
        queueStored(stored, exchange: exchange, cacheStatus: "larder; hit")
        finishExchange()
        flushSoon()
    }

    // MARK: Upstream

    private func forward(_ url: AbsoluteURL, key: CacheKey, exchange: Exchange) {
        let head = exchange.head
        let runtime = exchange.runtime
        var headers = head.headers
        HopByHop.strip(&headers)
        headers.remove("Host")
        // RFC 9110 §7.6.3: a proxy adds itself to Via.
        let via = headers.combined("Via").map { $0 + ", 1.1 larder" } ?? "1.1 larder"
        headers.remove("Via")
        var forwarded = HTTPHeaders([("Host", url.authority)])
        for field in headers { forwarded.add(field.name, field.value) }
        forwarded.add("Via", via)

        let body: UpstreamRequest.BodyLength?
        switch exchange.requestFraming {
        case .none: body = nil
        case .contentLength(let length): body = .known(length)
        case .chunked: body = .unknown
        }
        let request = UpstreamRequest(
            method: head.method, url: url, headers: forwarded, body: body,
            connectTimeout: runtime.config.upstream.connectTimeout,
            timeout: exchange.route?.timeout ?? runtime.config.upstream.timeout,
            parentProxy: runtime.config.upstream.parent.isEmpty ? nil : runtime.config.upstream.parent)

        if exchange.cacheStatus.isEmpty { exchange.cacheStatus = "larder; fwd=uri-miss" }
        // RFC 9110 §10.1.1: the body will be read, so tell a waiting client to send it.
        if body != nil, head.expectsContinue, head.version == .http1_1, !(exchange.body?.isComplete ?? true) {
            output.append(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            flushSoon()
        }
        let fill = Fill(key: key, request: request, requestHeaders: head.headers, proxy: proxy)
        fill.bodySource = self
        exchange.fill = fill
        exchange.attempts = 1
        fill.attach(self)
        fill.start(request)
    }

    // MARK: FillReader

    func fillDidProgress(_ fill: Fill) {
        guard let exchange, exchange.fill === fill else { return }
        if pumpFill() { flush() }
    }

    /// Moves what the fill has into the output, bounded by the output high-water mark. Returns
    /// whether anything changed (bytes queued or the exchange ended); the caller flushes.
    @discardableResult
    func pumpFill() -> Bool {
        guard let exchange, let fill = exchange.fill else { return false }
        var progressed = false
        if !exchange.headSent {
            if let head = fill.head {
                progressed = true
                exchange.headSent = true
                exchange.status = head.status
                queueFillHead(head, fill: fill, exchange: exchange)
            } else if case .failure(let error)? = fill.outcome {
                exchange.fill = nil
                fill.detach(self)
                respondUpstreamFailure(error, exchange: exchange)
                return false
            } else {
                return false
            }
        }
        var position = exchange.fillPosition
        while output.pendingBytes < ClientConnection.outputHighWater, position < fill.received,
            let (bytes, offset) = fill.chunk(at: position)
        {
            let count = bytes.count - offset
            queueBody(bytes, from: offset, count: count, exchange: exchange)
            position += count
        }
        if position != exchange.fillPosition {
            progressed = true
            exchange.fillPosition = position
            fill.reader(self, advancedTo: position)
        }
        if position == fill.received, let outcome = fill.outcome {
            progressed = true
            switch outcome {
            case .success:
                if case .chunked = exchange.framing { output.append(ClientConnection.lastChunk) }
                finishExchange()
            case .failure(let error):
                // The head is out: the only honest signal left is an incomplete message, so
                // close without terminating the body (RFC 9112 §8).
                proxy.logger.warning(
                    "upstream failed mid-response",
                    metadata: ["url": "\(fill.key)", "error": "\(error)"])
                exchange.keepAlive = false
                exchange.outcome = .error
                closeWhenFlushed = true
                let abandoned = exchange
                self.exchange = nil
                abandoned.fill = nil
                fill.detach(self)
                logTruncated(abandoned)
            }
        }
        return progressed
    }

    private func logTruncated(_ exchange: Exchange) {
        proxy.shared.stats.count(.error)
        proxy.accessLog.record(
            client: peer, method: exchange.head.method.rawValue, url: exchange.head.url?.description ?? "-",
            status: exchange.status, outcome: "truncated", bytes: exchange.bodyBytesSent,
            durationNanos: proxy.loop.now &- exchange.startNanos, attempts: exchange.attempts)
    }

    private func respondUpstreamFailure(_ error: UpstreamError, exchange: Exchange) {
        if let bodyError = exchange.bodyError {
            exchange.keepAlive = false
            respondGenerated(status: bodyError.status, message: bodyError.reason, outcome: .error)
            return
        }
        proxy.logger.notice("upstream failed", metadata: ["url": "\(exchange.head.url?.description ?? "-")", "error": "\(error)"])
        let detail = "\(error.kind.rawValue): \(error.message)".replacingQuotes()
        let message: String
        switch error.kind {
        case .timeout: message = "Larder: upstream timed out (\(error.message))"
        case .dns: message = "Larder: upstream host not found (\(error.message))"
        case .connect: message = "Larder: cannot connect upstream (\(error.message))"
        default: message = "Larder: upstream failed (\(error.message))"
        }
        exchange.cacheStatus = "\(exchange.cacheStatus); detail=\"\(detail); attempts=\(exchange.attempts)\""
        respondGenerated(status: error.status, message: message, outcome: .error)
    }

    // MARK: RequestBodySource

    func readRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk {
        guard let exchange, var reader = exchange.body else { return .end }
        var written = 0
        while !reader.isComplete, written == 0, !inbound.isEmpty {
            do {
                let result = try reader.transfer(from: inbound.readable, into: buffer)
                inbound.consume(result.consumed)
                written = result.written
            } catch {
                exchange.bodyError = error
                exchange.body = reader
                return .abort
            }
        }
        exchange.body = reader
        updateInterest()
        if written > 0 { return .bytes(written) }
        if reader.isComplete { return .end }
        if peerClosed { return .abort }
        exchange.upstreamWaitsForBody = true
        return .wait
    }
}

extension String {
    /// Makes text safe inside a quoted Cache-Status parameter.
    func replacingQuotes() -> String {
        String(unicodeScalars.map { $0 == "\"" || $0 == "\\" || $0.value < 0x20 ? "'" : Character($0) })
    }
}
