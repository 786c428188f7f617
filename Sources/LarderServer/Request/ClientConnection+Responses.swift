import LarderCache
import LarderHTTP
import LarderIO

/// Response heads and bodies as they go on the wire.
extension ClientConnection {
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// The `Connection` field of the current response's head, which decides whether the
    /// connection stays open after it (``ResponseHeadWriter/connection(version:keepAlive:requestBodyComplete:closeDelimited:draining:)``);
    /// a close is kept in the exchange for ``finishExchange()``. `draining`: the server's, unless
    /// given (a connection told to drain on its own).
    func connectionField(_ exchange: Exchange, draining: Bool? = nil) -> ResponseHeadWriter.ConnectionField {
        var closeDelimited = false
        if case .close = exchange.framing { closeDelimited = true }
        let field = ResponseHeadWriter.connection(
            version: exchange.head.version, keepAlive: exchange.keepAlive, requestBodyComplete: exchange.requestBodyComplete,
            closeDelimited: closeDelimited, draining: draining ?? proxy.isDraining)
        if field == .close { exchange.keepAlive = false }
        return field
    }

    /// Ends `head` with its framing and `Connection` field and queues it.
    func queueHead(_ head: consuming ResponseHeadWriter, length: Int?, chunked: Bool = false, exchange: Exchange) {
        head.end(length: length, chunked: chunked, connection: connectionField(exchange))
        output.append(head.bytes)
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
            output.append(head.bytes)
        case .full:
            exchange.status = stored.status
            output.append(stored.headBytes)
        }
        // The per-hit fields written in place into the loop's scratch buffer: no array of their own.
        let cacheStatus = exchange.cacheStatus
        let hasBody = stored.status != 204 && stored.status != 304
        let connection = connectionField(exchange)
        output.append(using: &proxy.scratch, capacity: 64 + ResponseHeadWriter.endCapacity + cacheStatus.renderedCapacity) { buffer in
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
                output.append(bytes, from: first, count: count)
            case .file:
                // From the disk tier: sent as its blocks are checked, never straight from the file.
                exchange.framing = .length(count)
                startDiskBody(stored, first: first, count: count, exchange: exchange)
                return
            case .memoryFile(let file, _):
                output.appendFile(file, offset: Int64(first), count: Int64(count))
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

    /// Queues body bytes from a fill chunk (by reference), framed as the head announced.
    func queueBody(_ bytes: [UInt8], from offset: Int, count: Int, exchange: Exchange) {
        queueFramed(count: count, exchange: exchange) { $0.append(bytes, from: offset, count: $1) }
    }

    /// Queues body bytes from the disk tier's file (a reader behind the fill's memory window).
    func queueBody(file: OpenFile, offset: Int64, count: Int, exchange: Exchange) {
        queueFramed(count: count, exchange: exchange) { $0.appendFile(file, offset: offset, count: Int64($1)) }
    }

    /// Frames `count` body bytes as the head announced (a chunk of its own when chunked);
    /// `appendPayload` queues the first so many bytes themselves. A body never runs past the
    /// Content-Length its head declared (RFC 9112 §6.3): the excess is dropped, the exchange
    /// marked broken and the connection closed after what was declared.
    private func queueFramed(count: Int, exchange: Exchange, appendPayload: (inout OutputQueue, Int) -> Void) {
        var count = count
        if case .length(let declared) = exchange.framing, exchange.bodyBytesSent + count > declared {
            count = max(0, declared - exchange.bodyBytesSent)
            if !exchange.framingBroken {
                exchange.framingBroken = true
                exchange.keepAlive = false
                proxy.logger.error(
                    "a response body ran past its declared length; the excess was dropped and the connection closes",
                    metadata: ["url": "\(proxy.loggable(exchange.head.url?.description ?? "-"))", "declared": "\(declared)"])
            }
        }
        guard count > 0 else { return }
        switch exchange.framing {
        case .none:
            return
        case .chunked:
            var size: [UInt8] = []
            HeadSerializer.appendChunkSize(count, to: &size)
            output.append(size)
            appendPayload(&output, count)
            output.append(HeadSerializer.crlf)
        case .length, .close:
            appendPayload(&output, count)
        }
        exchange.bodyBytesSent += count
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
        output.append(head.bytes)
        guard !headOnly else { return 0 }
        output.append(body)
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

    /// The proxy's own address, for messages that tell clients how to use it.
    var proxyAddressHint: String {
        if let local = try? socket.localAddress() { return local.description }
        return "127.0.0.1:3128"
    }
}
