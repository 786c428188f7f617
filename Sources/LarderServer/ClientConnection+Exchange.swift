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
        exchange.url = url
        proceed(exchange)
    }

    /// Looks the request up in the cache tiers and answers it from there, or forwards it.
    /// Called again after a disk entry's checksum was verified in the background.
    func proceed(_ exchange: Exchange) {
        guard let url = exchange.url else { return }
        let head = exchange.head
        let policy = exchange.route?.policy ?? exchange.runtime.config.cache.defaultPolicy
        let key = CacheKey(url)
        if head.method == .get || head.method == .head, policy != .networkOnly {
            switch lookup(key, head: head, exchange: exchange) {
            case .hit(let stored, let detail):
                serveStored(stored, exchange: exchange, detail: detail)
                return
            case .pending:
                return
            case .miss:
                break
            }
        } else if head.method != .get && head.method != .head {
            exchange.cacheStatus = "larder; fwd=method"
        } else {
            exchange.cacheStatus = "larder; fwd=bypass"
        }
        forward(url, key: key, exchange: exchange)
    }

    enum LookupResult {
        case hit(StoredResponse, detail: String?)
        case miss
        /// A disk entry is being verified; ``proceed(_:)`` runs again when it is done.
        case pending
    }

    /// A fresh stored response for this request from memory, then disk.
    private func lookup(_ key: CacheKey, head: RequestHead, exchange: Exchange) -> LookupResult {
        let requestCC = CacheControl(head.headers)
        // RFC 9111 §5.2.1.4 and §5.4: no-cache (or Pragma: no-cache without Cache-Control)
        // means the stored copy may not be used without going to the origin.
        if requestCC.noCache || (requestCC.isEmpty && head.headers.listElements("Pragma").contains("no-cache")) {
            exchange.cacheStatus = "larder; fwd=request"
            return .miss
        }
        let now = Clocks.wallSeconds()
        exchange.cacheStatus = "larder; fwd=uri-miss"
        if let variants = proxy.shared.memory.lookup(key) {
            if let stored = variants.first(where: { VaryMatcher.matches($0, request: head.headers) }) {
                if stored.isFresh(now: now) { return .hit(stored, detail: nil) }
                proxy.shared.memory.remove(stored)
                exchange.cacheStatus = "larder; fwd=stale"
            } else {
                exchange.cacheStatus = "larder; fwd=vary-miss"
            }
        }
        guard let disk = proxy.shared.disk else { return .miss }
        switch disk.lookup(key, request: head.headers) {
        case .miss:
            return .miss
        case .unverified(let name):
            waitForVerification(of: name, disk: disk)
            return .pending
        case .hit(let stored):
            guard stored.isFresh(now: now) else {
                exchange.cacheStatus = "larder; fwd=stale"
                return .miss
            }
            promoteIntoMemory(stored)
            return .hit(stored, detail: "disk")
        }
    }

    /// Checks a disk entry's body on the reader thread, then resumes this exchange on its loop.
    private func waitForVerification(of name: String, disk: DiskCache) {
        let token = proxy.park(self)
        let handle = proxy.loop.handle
        disk.verify(name) { _ in
            handle.execute { loop in (loop.context as? ProxyLoop)?.unpark(token)?.resumeAfterDiskCheck() }
        }
    }

    func resumeAfterDiskCheck() {
        guard phase == .exchanging, let exchange else { return }
        proceed(exchange)
        flushSoon()
    }

    /// Copies a small disk entry into the memory tier in the background.
    private func promoteIntoMemory(_ stored: StoredResponse) {
        guard let disk = proxy.shared.disk, stored.bodyLength <= proxy.shared.memory.limits.maxObjectBytes else { return }
        let memory = proxy.shared.memory
        disk.readIntoMemory(stored) { promoted in
            if let promoted { memory.insert(promoted) }
        }
    }

    private func serveStored(_ stored: StoredResponse, exchange: Exchange, detail: String?) {
        exchange.outcome = detail == nil ? .memoryHit : .diskHit
        exchange.status = stored.status
        queueStored(stored, exchange: exchange, cacheStatus: detail.map { "larder; hit; detail=\($0)" } ?? "larder; hit")
        finishExchange()
        flushSoon()
    }

    // MARK: Upstream

    /// The most request body buffered to compute a `dedup = "always"` key; larger bodies are
    /// streamed upstream without coalescing.
    static let maxDedupBody = 1 << 20

    /// Sends the request upstream: attaches to a fill already fetching the same thing when the
    /// route's dedup policy allows, or starts a fill (which others may then attach to).
    func forward(_ url: AbsoluteURL, key: CacheKey, exchange: Exchange) {
        let head = exchange.head
        let runtime = exchange.runtime
        if exchange.cacheStatus.isEmpty { exchange.cacheStatus = "larder; fwd=uri-miss" }
        var coalesceKey: FillKey?
        if !exchange.goAlone, !head.headers.contains("Authorization") {
            switch exchange.route?.dedup ?? .automatic {
            case .never:
                break
            case .automatic:
                if head.method == .get || head.method == .head { coalesceKey = FillKey(method: head.method.rawValue, url: key.url, bodyHash: nil) }
            case .always:
                if exchange.requestFraming == .none {
                    coalesceKey = FillKey(method: head.method.rawValue, url: key.url, bodyHash: nil)
                } else if let body = exchange.bufferedBody, exchange.requestBodyComplete {
                    coalesceKey = FillKey(method: head.method.rawValue, url: key.url, bodyHash: BufferedBody.hash(body))
                } else if exchange.bufferedBody == nil {
                    // The key needs the whole body: read it first (process() continues here).
                    exchange.bufferedBody = []
                    exchange.bufferingBody = true
                    bufferRequestBody(exchange)
                    return
                }
            }
        }
        if let variant = exchange.variant { coalesceKey?.variant = variant }
        if let key = coalesceKey, proxy.coalescer.isNotShareable(key) { coalesceKey = nil }
        if let coalesceKey, let fill = proxy.coalescer.fill(for: coalesceKey), fill.acceptsLateReaders {
            if fill.readerCount < runtime.config.coalesce.maxWaiters {
                exchange.fill = fill
                exchange.collapsed = true
                exchange.outcome = .coalesced
                exchange.waitStart = proxy.loop.now
                proxy.shared.stats.requestsCoalesced.add(1)
                fill.attach(self, requestHeaders: head.headers)
                return
            }
        }
        startFill(url, key: key, exchange: exchange, coalesceKey: coalesceKey)
    }

    private func startFill(_ url: AbsoluteURL, key: CacheKey, exchange: Exchange, coalesceKey: FillKey?) {
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
        case .chunked: body = exchange.bufferedBody != nil && exchange.requestBodyComplete ? .known(exchange.bufferedBody!.count) : .unknown
        }
        let request = UpstreamRequest(
            method: head.method, url: url, headers: forwarded, body: body,
            connectTimeout: runtime.config.upstream.connectTimeout,
            timeout: exchange.route?.timeout ?? runtime.config.upstream.timeout,
            parentProxy: runtime.config.upstream.parent.isEmpty ? nil : runtime.config.upstream.parent)

        // RFC 9110 §10.1.1: the body will be read, so tell a waiting client to send it.
        if body != nil, head.expectsContinue, head.version == .http1_1, !exchange.requestBodyComplete {
            output.append(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            flushSoon()
        }
        // A registered key must not be taken over by a second fill (too many waiters).
        let registeredKey = coalesceKey.flatMap { proxy.coalescer.fill(for: $0) == nil ? $0 : nil }
        let fill = Fill(
            key: key, coalesceKey: registeredKey, request: request, requestHeaders: head.headers,
            dedupAlways: exchange.route?.dedup == .always, runtime: runtime, proxy: proxy)
        if let buffered = exchange.bufferedBody, exchange.requestBodyComplete {
            fill.ownedBodySource = BufferedBody(buffered)
        } else {
            fill.bodySource = self
        }
        exchange.fill = fill
        exchange.collapsed = false
        exchange.attempts = 1
        proxy.coalescer.register(fill)
        fill.attach(self, requestHeaders: head.headers)
        fill.start(request)
    }

    /// Reads a request body into memory to compute its dedup key (called again as bytes arrive).
    func bufferRequestBody(_ exchange: Exchange) {
        guard exchange.bufferingBody, var reader = exchange.body else { return }
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while !reader.isComplete, !inbound.isEmpty {
            let result = scratch.withUnsafeMutableBytes { buffer in
                Result { () throws(HTTPParseError) in try reader.transfer(from: inbound.readable, into: buffer) }
            }
            switch result {
            case .success(let moved):
                inbound.consume(moved.consumed)
                exchange.bufferedBody!.append(contentsOf: scratch[0..<moved.written])
            case .failure(let error):
                exchange.body = reader
                exchange.bufferingBody = false
                exchange.keepAlive = false
                respondGenerated(status: error.status, message: error.reason, outcome: .error)
                return
            }
            if exchange.bufferedBody!.count > ClientConnection.maxDedupBody { break }
        }
        exchange.body = reader
        if reader.isComplete || exchange.bufferedBody!.count > ClientConnection.maxDedupBody {
            exchange.bufferingBody = false
            if !reader.isComplete { exchange.goAlone = true }  // too large to hash: stream it
            guard let url = exchange.url else { return }
            forward(url, key: CacheKey(url), exchange: exchange)
        } else if peerClosed {
            close()
        }
    }

    // MARK: FillReader

    func fillDidProgress(_ fill: Fill) {
        guard let exchange, exchange.fill === fill else { return }
        if pumpFill() { flush() }
    }

    func fillReleased(_ fill: Fill, varyNames: [String]?) {
        guard let exchange, exchange.fill === fill, let url = exchange.url else { return }
        if let varyNames {
            // Another variant: share a fill with the clients that want this one.
            var values: [String: String] = [:]
            for name in varyNames { values[name] = exchange.head.headers.combined(name) ?? "" }
            exchange.variant = values
            leaveFill(exchange, url: url, alone: false)
        } else {
            leaveFill(exchange, url: url, alone: true)
        }
    }

    /// Leaves a shared fill and forwards again: alone, or keyed by the request's variant.
    func leaveFill(_ exchange: Exchange, url: AbsoluteURL, alone: Bool) {
        exchange.fill = nil
        exchange.fillPosition = 0
        exchange.goAlone = alone
        exchange.collapsed = false
        exchange.outcome = .miss
        forward(url, key: CacheKey(url), exchange: exchange)
        flushSoon()
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
            let data = fill.data(at: position)
        {
            switch data {
            case .memory(let bytes, let offset):
                queueBody(bytes, from: offset, count: bytes.count - offset, exchange: exchange)
                position += bytes.count - offset
            case .file(let file, let offset, let count):
                queueBody(file: file, offset: offset, count: count, exchange: exchange)
                position += count
            }
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
        // Bytes read ahead while deciding on coalescing go first.
        if let buffered = exchange.bufferedBody, exchange.bufferedOffset < buffered.count {
            let count = min(buffer.count, buffered.count - exchange.bufferedOffset)
            buffered.withUnsafeBytes { raw in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[exchange.bufferedOffset..<(exchange.bufferedOffset + count)]))
            }
            exchange.bufferedOffset += count
            return .bytes(count)
        }
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
