import LarderCache
import LarderHTTP
import LarderIO

/// Response heads and bodies as they go on the wire.
extension ClientConnection {
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// Whether the connection closes after the current response; decided before its head is
    /// written so the head can say so.
    func closesAfter(_ exchange: Exchange) -> Bool {
        if !exchange.keepAlive || !exchange.requestBodyComplete || isDraining {
            exchange.keepAlive = false
            return true
        }
        return false
    }

    private var isDraining: Bool { proxy.isDraining }

    /// Appends the connection-management field the client needs, if any (RFC 9112 §9.3).
    func appendConnectionField(_ exchange: Exchange, to bytes: inout [UInt8]) {
        if closesAfter(exchange) {
            bytes.append(contentsOf: "Connection: close\r\n".utf8)
        } else if exchange.head.version == .http1_0 {
            bytes.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
    }

    /// A head's last lines, written in place: the framing field (`Content-Length`, or
    /// `Transfer-Encoding: chunked`), `Connection` as ``appendConnectionField(_:to:)`` writes it
    /// (RFC 9112 §9.3), and the blank line.
    static func writeHeadEnd(length: Int?, chunked: Bool, closes: Bool, http10: Bool, into writer: inout ByteWriter) {
        if let length {
            writer.append("Content-Length: " as StaticString)
            writer.append(decimal: length)
            writer.append("\r\n" as StaticString)
        } else if chunked {
            writer.append("Transfer-Encoding: chunked\r\n" as StaticString)
        }
        if closes {
            writer.append("Connection: close\r\n" as StaticString)
        } else if http10 {
            writer.append("Connection: keep-alive\r\n" as StaticString)
        }
        writer.append("\r\n" as StaticString)
    }

    /// Queues a stored response: its prepared head, the per-hit fields, and the body by
    /// reference (a disk-tier body over one block starts ``startDiskBody(_:first:count:exchange:then:)``,
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
            var bytes: [UInt8] = []
            bytes.reserveCapacity(512)
            HeadSerializer.appendStatusLine(206, HTTPStatus.reason(206), to: &bytes)
            bytes.append(contentsOf: stored.wireFields)
            bytes.append(contentsOf: StoredResponse.viaLine)
            bytes.append(contentsOf: "Content-Range: bytes \(start)-\(last)/\(stored.bodyLength)\r\n".utf8)
            output.append(bytes)
        case .full:
            exchange.status = stored.status
            output.append(stored.headBytes)
        }
        // The per-hit fields written in place into the loop's scratch buffer (appended piece
        // by piece to a new array they cost ~1,300 instructions per hit, the array ~350).
        let cacheStatus = exchange.cacheStatus
        let hasBody = stored.status != 204 && stored.status != 304
        let closes = closesAfter(exchange)
        let http10 = exchange.head.version == .http1_0
        output.append(using: &proxy.scratch, capacity: 128 + cacheStatus.renderedCapacity) { buffer in
            var writer = ByteWriter(buffer)
            writer.append("Age: " as StaticString)
            writer.append(decimal: max(0, age))
            writer.append("\r\n" as StaticString)
            cacheStatus.appendField(to: &writer)
            Self.writeHeadEnd(length: hasBody ? count : nil, chunked: false, closes: closes, http10: http10, into: &writer)
            return writer.count
        }
        if hasBody && exchange.head.method != .head && count > 0 {
            switch stored.body {
            case .memory(let bytes):
                output.append(bytes, from: first, count: count)
            case .file:
                // From the disk tier: sent as its blocks are checked, never straight from the file.
                exchange.framing = .length(count)
                startDiskBody(stored, first: first, count: count, exchange: exchange, then: .finish)
                return
            case .memoryFile(let file, _):
                output.appendFile(file, offset: Int64(first), count: Int64(count))
            }
            exchange.bodyBytesSent = count
            proxy.shared.stats.bytesFromCache.add(count)
        }
    }

    /// Queues a 304 for a client whose conditional request matched (RFC 9110 §15.4.5): the
    /// validator and caching fields of the response it stands for, no body.
    func queueNotModified(headers: HTTPHeaders, age: Double?, exchange: Exchange) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        HeadSerializer.appendStatusLine(304, HTTPStatus.reason(304), to: &bytes)
        for field in headers where Preconditions.notModifiedFields.contains(where: { ASCII.equalsIgnoringCase($0, field.name) }) {
            HeadSerializer.appendField(field.name, field.value, to: &bytes)
        }
        bytes.append(contentsOf: StoredResponse.viaLine)
        if let age { HeadSerializer.appendField("Age", String(Int(age)), to: &bytes) }
        exchange.cacheStatus.appendField(to: &bytes)
        appendConnectionField(exchange, to: &bytes)
        bytes.append(contentsOf: HeadSerializer.crlf)
        output.append(bytes)
    }

    /// Queues a 416 for a range past the end (RFC 9110 §15.5.17).
    func queueRangeNotSatisfiable(length: Int, headers: HTTPHeaders, exchange: Exchange) {
        var bytes: [UInt8] = []
        HeadSerializer.appendStatusLine(416, HTTPStatus.reason(416), to: &bytes)
        HeadSerializer.appendField("Date", proxy.httpDate, to: &bytes)
        HeadSerializer.appendField("Content-Range", "bytes */\(length)", to: &bytes)
        if let etag = headers["ETag"] { HeadSerializer.appendField("ETag", etag, to: &bytes) }
        bytes.append(contentsOf: "Content-Length: 0\r\n".utf8)
        bytes.append(contentsOf: StoredResponse.viaLine)
        exchange.cacheStatus.appendField(to: &bytes)
        appendConnectionField(exchange, to: &bytes)
        bytes.append(contentsOf: HeadSerializer.crlf)
        output.append(bytes)
    }

    /// Queues the head of a response coming from upstream and picks its framing.
    func queueFillHead(_ head: ResponseHead, fill: Fill, exchange: Exchange) {
        if let slice = exchange.slice, let length = fill.contentLength {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(512)
            HeadSerializer.appendStatusLine(206, HTTPStatus.reason(206), to: &bytes)
            HeadSerializer.appendFields(head.headers, to: &bytes)
            HeadSerializer.appendField("Content-Range", "bytes \(slice.first)-\(slice.last)/\(length)", to: &bytes)
            bytes.append(contentsOf: StoredResponse.viaLine)
            output.append(bytes)
        } else if let prepared = fill.preparedClientHead {
            // Status line, fields and Via, serialized once for the memory and disk entries
            // too: queued by reference, as a hit's head is.
            output.append(prepared.bytes)
        } else {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(512)
            HeadSerializer.appendStatusLine(head.status, head.reason, to: &bytes)
            HeadSerializer.appendFields(head.headers, to: &bytes)
            bytes.append(contentsOf: StoredResponse.viaLine)
            output.append(bytes)
        }
        // The framing this response goes out with, then the per-response fields written in
        // place into the loop's scratch buffer (no array of their own).
        var length: Int?
        var chunked = false
        if let slice = exchange.slice {
            exchange.framing = .length(slice.last - slice.first + 1)
            length = slice.last - slice.first + 1
        } else if head.hasNoBody(for: exchange.head.method) {
            exchange.framing = .none
            // HEAD and 304 may carry the length of the representation (RFC 9110 §8.6).
            if head.status != 204 { length = fill.announcedLength }
        } else if let contentLength = fill.contentLength {
            exchange.framing = .length(contentLength)
            length = contentLength
        } else if exchange.head.version == .http1_1 {
            exchange.framing = .chunked
            chunked = true
        } else {
            // An HTTP/1.0 client with no length to tell: the end of the body is the close.
            exchange.framing = .close
            exchange.keepAlive = false
        }
        let cacheStatus = exchange.cacheStatus
        let closes = closesAfter(exchange)
        let http10 = exchange.head.version == .http1_0
        output.append(using: &proxy.scratch, capacity: 128 + cacheStatus.renderedCapacity) { buffer in
            var writer = ByteWriter(buffer)
            cacheStatus.appendField(to: &writer)
            Self.writeHeadEnd(length: length, chunked: chunked, closes: closes, http10: http10, into: &writer)
            return writer.count
        }
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
        status: Int, message: String, cacheStatus: String?, close: Bool, version: HTTPVersion = .http1_1,
        headOnly: Bool = false, extra: [(String, String)] = []
    ) -> Int {
        let body = Array((message + "\n").utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256 + body.count)
        HeadSerializer.appendStatusLine(status, HTTPStatus.reason(status), to: &bytes)
        HeadSerializer.appendField("Date", proxy.httpDate, to: &bytes)
        bytes.append(contentsOf: "Content-Type: text/plain; charset=utf-8\r\nContent-Length: ".utf8)
        HeadSerializer.appendDecimal(body.count, to: &bytes)
        bytes.append(contentsOf: HeadSerializer.crlf)
        bytes.append(contentsOf: StoredResponse.viaLine)
        if let cacheStatus { HeadSerializer.appendField("Cache-Status", cacheStatus, to: &bytes) }
        for (name, value) in extra { HeadSerializer.appendField(name, value, to: &bytes) }
        if close {
            bytes.append(contentsOf: "Connection: close\r\n".utf8)
        } else if version == .http1_0 {
            bytes.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
        bytes.append(contentsOf: HeadSerializer.crlf)
        if !headOnly { bytes.append(contentsOf: body) }
        output.append(bytes)
        return headOnly ? 0 : body.count
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
        let close = closesAfter(exchange)
        let cacheStatus = exchange.cacheStatus
        exchange.bodyBytesSent = queueGenerated(
            status: status, message: message,
            cacheStatus: cacheStatus.hit || cacheStatus.fwd != nil || cacheStatus.detail != nil ? cacheStatus.rendered : nil,
            close: close, version: exchange.head.version, headOnly: exchange.head.method == .head, extra: extra)
        finishExchange()
        flushSoon()
    }

    /// The proxy's own address, for messages that tell clients how to use it.
    var proxyAddressHint: String {
        if let local = try? socket.localAddress() { return local.description }
        return "127.0.0.1:3128"
    }
}
