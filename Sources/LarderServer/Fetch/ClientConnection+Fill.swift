import LarderCache
import LarderHTTP
import LarderIO
import LarderUpstream
import Logging

/// Streaming a fill's response to this connection's client.
extension ClientConnection: FillReader {
    /// Takes what the fill has (once per batch of its events) and tells it how far this
    /// client got, in the answer rather than by a call back; nil once it left the fill (a
    /// response that ended here leaves it by that answer: the fill removes the reader). No
    /// pipelined request is begun inside the pass (``ClientConnection/holdingRequests(_:)``): a
    /// request for the same URL would join the fill while this connection's finished exchange
    /// is still one of its readers.
    func fillDidProgress(_ fill: Fill) -> Int? {
        guard let exchange, exchange.fill === fill else { return nil }
        return holdingRequests {
            let progressed = exchange.isSliced ? pumpSlices(exchange) : readFill(exchange, fill: fill, inPass: true)
            if progressed { flush() }
            guard let attachment = self.exchange?.attachment, attachment.fill === fill else { return nil }
            return attachment.position
        }
    }

    func delivered(upTo position: Int) -> Int? {
        guard let unsent = socket.unsentBytes() else { return nil }
        return position - pendingOutputBytes - unsent
    }

    func fillReleased(_ fill: Fill, reason: FillRelease) {
        guard let exchange, exchange.fill === fill, let url = exchange.url else { return }
        switch reason {
        case .heldConnection: return connectionCut(exchange, url: url, overShare: false)
        case .overShare: return connectionCut(exchange, url: url, overShare: true)
        default: break
        }
        if exchange.isSliced {
            // A slice fill that may not serve this client: fetch the slice alone.
            leaveSliceFillAlone(exchange)
            return
        }
        switch reason {
        case .notShareable:
            leaveFill(exchange, url: url, alone: true)
        case .otherVariant(let names):
            // Share a fill with the clients that want this variant.
            var values: [String: String] = [:]
            for name in names { values[name] = exchange.head.headers.combined(name) ?? "" }
            exchange.variant = values
            leaveFill(exchange, url: url, alone: false)
        case .passRange:
            exchange.range = .passed
            leaveFill(exchange, url: url, alone: true)
        case .fellBehind:
            guard exchange.headSent else { return leaveFill(exchange, url: url, alone: true) }
            proxy.logger.warning(
                "a client fell behind a shared download with no disk copy; its response is cut so the others go on",
                metadata: ["url": "\(proxy.loggable(url.description))", "sent": "\(exchange.bodyBytesSent)"])
            exchange.failure = .limit
            endIncomplete(exchange)
            flushSoon()
        case .heldConnection, .overShare:
            break  // above: a slice walk's too
        }
    }

    /// The fill this exchange read was cut to free its connection for requests waiting for
    /// its origin (``HeldTransfers``): after the head, the response ends short (a sliced one
    /// too); before it, a 504 (the request went upstream and its outcome is unknown, so it is
    /// never sent again: it may not be idempotent, RFC 9110 §9.2.2, and sent again it would
    /// take the connection back), unless the request joined the transfer of a client at
    /// another address. A transfer paused for its readers always has a head.
    private func connectionCut(_ exchange: Exchange, url: AbsoluteURL, overShare: Bool) {
        if !exchange.headSent, let fill = exchange.fill, joinedAnother(fill, exchange: exchange) {
            // Its own request never went upstream, and it is safe (RFC 9110 §9.2.2): it goes
            // on under its own client's share instead of losing what another client's cut.
            if exchange.isSliced {
                leaveSliceFillAlone(exchange)
            } else {
                leaveFill(exchange, url: url, alone: false)
            }
            return
        }
        if let left = proxy.cutWarnings.allow(now: proxy.loop.now) {
            let message: Logger.Message =
                overShare
                ? "a request is cut: its client held more connections to the origin than another client that waited for one"
                : "a download its client read too slowly is cut: other requests waited for a connection to its origin"
            proxy.logger.warning(
                message,
                metadata: [
                    "client": "\(peer.map(\.description) ?? "-")", "url": "\(proxy.loggable(url.description))",
                    "sent": "\(exchange.bodyBytesSent)", "not_logged_since_last": "\(left)",
                ])
        }
        let reason = "Larder: cut to share the connections to \(url.authority) with a client that waited for one; its outcome is unknown"
        if exchange.isSliced {
            exchange.take(.sliceFillLeft(alone: true))
            failSlices(exchange, status: 504, reason: "connection-share-cut", cause: .limit)
            return
        }
        exchange.failure = .limit
        guard exchange.headSent else {
            exchange.take(.fillLeft)
            exchange.cacheStatus.detail = "connection-share-cut"
            respondGenerated(status: 504, message: reason, outcome: .error, cause: .limit)
            flushSoon()
            return
        }
        endIncomplete(exchange)
        flushSoon()
    }

    /// Whether the exchange joined `fill`, cut for a share, from another address than the
    /// client whose request it was: a GET or HEAD (the requests fills are shared by).
    private func joinedAnother(_ fill: Fill, exchange: Exchange) -> Bool {
        guard let cut = fill.cutShare, let client = shareClient else { return false }
        let method = exchange.head.method
        return (method == .get || method == .head) && (cut.high != client.high || cut.low != client.low)
    }

    /// Leaves a slice fill that may not serve this walk (or that it waited on too long), which
    /// fetches the slice alone: as ``leaveFill(_:url:alone:)``, it is no longer collapsed into
    /// another's request.
    func leaveSliceFillAlone(_ exchange: Exchange) {
        exchange.take(.sliceFillLeft(alone: true))
        exchange.cacheStatus.collapsed = false
        if pumpSlices(exchange) { flush() }
    }

    /// Leaves a shared fill and forwards again: alone, or keyed by the request's variant.
    func leaveFill(_ exchange: Exchange, url: AbsoluteURL, alone: Bool) {
        exchange.take(.released(alone: alone))
        exchange.cacheStatus.collapsed = false
        exchange.outcome = .miss
        forward(url, key: exchange.key ?? CacheKey(url), exchange: exchange)
        flushSoon()
    }

    /// Passes an interim response on to an HTTP/1.1 client that has no final head yet (an
    /// HTTP/1.0 client must not get one, RFC 9110 §15.2); hop-by-hop fields stay behind.
    func fillDidReceiveInterim(_ fill: Fill, head: ResponseHead) {
        guard let exchange, exchange.fill === fill, !exchange.headSent, exchange.head.version == .http1_1 else { return }
        var fields = head.headers
        HopByHop.strip(&fields)
        var interim = ResponseHeadWriter(status: head.status, reason: head.reason)
        interim.fields(fields)
        sendHead(interim.interim())
        flushSoon()
    }

    /// Moves what the fill has into the output, bounded by the output high-water mark, and
    /// tells the fill how far the client got. Returns whether anything changed (bytes queued
    /// or the exchange ended); the caller flushes.
    @discardableResult
    func pumpFill() -> Bool {
        guard let exchange else { return false }
        // Released, told on the loop's next turn: a flush meanwhile takes nothing from it.
        if let fill = exchange.fill, fill.isReleasing(self) { return false }
        if exchange.isSliced { return pumpSlices(exchange) }
        guard let fill = exchange.fill else { return false }
        let before = exchange.attachment?.position
        let progressed = readFill(exchange, fill: fill)
        if let attachment = self.exchange?.attachment, attachment.fill === fill, attachment.position != before {
            fill.reader(self, advancedTo: attachment.position)
        }
        return progressed
    }

    /// The fill's news for this exchange, as ``Exchange/step(_:on:now:)`` reads it.
    private func news(of fill: Fill, for exchange: Exchange) -> FillNews {
        var news = FillNews()
        news.answer = fill.answerForReaders
        news.readable = fill.readableBytes
        switch fill.outcome {
        case nil: break
        case .success?: news.ended = .complete
        case .failure?: news.ended = .failed
        }
        if let slice = exchange.slice { news.end = slice.last + 1 }
        switch exchange.framing {
        case .length(let declared): news.declared = declared
        case .chunked: news.chunked = true
        case .none, .close: break
        }
        news.sent = exchange.bodyBytesSent
        return news
    }

    /// Carries out the steps the fill's news leads to, until one waits (for the fill, the
    /// output, or a block from disk) or the exchange leaves the fill. Returns whether anything
    /// changed that the caller still writes. The one place a fill's reader acts on its news.
    /// `inPass`: called from the fill's pass, which the finished reader answers that it left
    /// (its end writes the output itself).
    private func readFill(_ exchange: Exchange, fill: Fill, inPass: Bool = false) -> Bool {
        exchange.attempts = fill.attempts
        exchange.retries = fill.retryLog.isEmpty ? nil : fill.retryLog.map { "\($0.reason):\($0.delayMillis)ms" }.joined(separator: ",")
        guard let attachment = exchange.attachment else { return false }
        var progressed = false
        // Each action that does not leave the fill (or wait) keeps the exchange on it: the head
        // queued (startResponse answers true otherwise), bytes sent from it.
        while true {
            guard let action = exchange.take(.fillProgressed(news(of: fill, for: exchange)), now: proxy.loop.now) else { break }
            switch action {
            case .queueHead:
                guard let head = fill.headForReaders, !startResponse(head, fill: fill, exchange: exchange) else { return false }
                progressed = true
            case .answerFromStore(let stale):
                let stored = stale ? fill.staleAnswer : fill.refreshedAnswer(for: self)
                fill.detach(self)
                if stale { exchange.staleBecause = fill.staleCause }
                answerFromFill(exchange, fill: fill, stored: stored!, staleIfError: stale)
                return false
            case .sendBytes(let end):
                let start = attachment.position
                let position = queueFillBody(fill, from: start, to: end, exchange: exchange)
                guard exchange.fill === fill else { return true }  // ended at bytes that are gone
                guard position != start else { return progressed }
                progressed = true
                attachment.position = position
            case .finishBody(let lastChunk):
                if lastChunk { sendLastChunk() }
                guard inPass else {
                    finishExchange()
                    return true
                }
                // The fill's pass removes the reader when it answers that it left: the exchange
                // ends here, and the end writes the output, as nothing follows in the pass.
                self.exchange = nil
                exchange.take(.finished)
                endExchange(exchange, flushing: true)
                return false
            case .fail(let failure):
                let error: UpstreamError
                switch (failure, fill.outcome) {
                case (.transfer, .failure(let transfer)?), (.beforeHead, .failure(let transfer)?):
                    error = transfer
                case (.short(let sent, let declared), _):
                    error = UpstreamError(kind: .truncated, message: "body of \(sent) bytes, \(declared) declared", afterHead: true)
                case (.transfer, _), (.beforeHead, _):
                    error = UpstreamError(kind: .truncated, message: "the transfer ended", afterHead: true)
                }
                fill.detach(self)
                guard failure != .beforeHead else {
                    respondUpstreamFailure(error, exchange: exchange)
                    return false
                }
                // The head is out: the only honest signal left is an incomplete message, so
                // close without terminating the body (RFC 9112 §8).
                proxy.logger.warning(
                    "upstream failed mid-response",
                    metadata: ["url": "\(proxy.loggable(fill.key.url))", "error": "\(error)"])
                exchange.failure = FailureCause(error)
                endIncomplete(exchange)
                return true
            default:
                return progressed
            }
        }
        return progressed
    }

    /// Queues the body bytes `fill` holds from `position` on, up to `end`, while the output has
    /// room; returns the position reached. Bytes the fill keeps only in its disk file come from
    /// a block read and checked on the reader thread first (``readFillBlock(_:fill:exchange:)``):
    /// the walk stops there, and the block's answer pumps again.
    func queueFillBody(_ fill: Fill, from position: Int, to end: Int, exchange: Exchange) -> Int {
        var position = position
        // What the fill lets readers have (a digest check holds its last byte back).
        let end = min(end, fill.readableBytes)
        while outputHasRoom, position < end, let attachment = exchange.attachment,
            attachment.fill === fill, !attachment.isReadingBlock
        {
            if let held = attachment.checkedBlock, position >= held.start, position < held.start + held.bytes.count {
                let count = min(held.start + held.bytes.count - position, end - position)
                sendBodyPart(held.bytes, from: position - held.start, count: count, exchange: exchange)
                position += count
                if position == held.start + held.bytes.count { attachment.checkedBlock = nil }
                continue
            }
            guard let data = fill.data(at: position) else { break }
            switch data {
            case .memory(let bytes, let offset):
                let count = min(bytes.count - offset, end - position)
                sendBodyPart(bytes, from: offset, count: count, exchange: exchange)
                position += count
            case .block(let block):
                readFillBlock(block, fill: fill, exchange: exchange)
            case .lost:
                proxy.logger.warning(
                    "bytes a lagging client needs are gone from the disk cache (its file replaced, removed or damaged); the response ends incomplete",
                    metadata: ["url": "\(proxy.loggable("\(fill.key)"))", "position": "\(position)"])
                abandonFillBody(exchange, fill: fill)
                return position
            }
        }
        return position
    }

    /// Reads a block of a fill's disk file and checks it on the reader thread; its answer
    /// comes back to ``receiveFillBlock(_:token:)``.
    private func readFillBlock(_ block: FillData.Block, fill: Fill, exchange: Exchange) {
        let token = proxy.park(self)
        exchange.attachment?.blockRead = (token, block)
        let handle = proxy.loop.handle
        block.write.readBlock(block.index, range: block.bytes, from: block.file) { read in
            handle.execute { loop in (loop.context as? ProxyLoop)?.unpark(token)?.receiveFillBlock(read, token: token) }
        }
    }

    /// A fill's block is read: holds its checked bytes and pumps again, or, when it failed its
    /// check (the write is spoiled and counted), ends this client's response short of its
    /// framing: never a byte that was not checked (RFC 9112 §8: an incomplete message).
    private func receiveFillBlock(_ read: DiskCache.BlockRead, token: Int) {
        guard isExchanging, let exchange, let fill = exchange.fill, let pending = exchange.attachment?.blockRead,
            pending.token == token
        else { return }
        exchange.attachment?.blockRead = nil
        guard case .checked(let bytes) = read else {
            proxy.logger.warning(
                "a disk cache file being written failed its check while being sent; the response ends incomplete",
                metadata: ["url": "\(proxy.loggable("\(fill.key)"))", "block": "\(pending.block.index)"])
            fill.diskCopyFailed()
            abandonFillBody(exchange, fill: fill)
            return
        }
        exchange.attachment?.checkedBlock = (pending.block.start, bytes)
        if pumpFill() { flush() }
    }

    /// Ends a response whose head is out in the middle of its body (``endIncomplete(_:)``);
    /// the fill goes on for the others.
    private func abandonFillBody(_ exchange: Exchange, fill: Fill) {
        if exchange.isSliced {
            failSlices(exchange, status: 502, reason: "a disk cache file being written failed its check", cause: .disk)
            return
        }
        exchange.failure = .disk
        endIncomplete(exchange)
        exchange.take(.fillLeft)
        fill.detach(self)
        flushSoon()
    }

    /// Sends the head of a fill's response, or instead a 304 for a matching conditional
    /// request, or a 206 slice. Returns true when the exchange was handed elsewhere (released
    /// to pass a range upstream, or answered with a 304).
    private func startResponse(_ head: ResponseHead, fill: Fill, exchange: Exchange) -> Bool {
        let request = exchange.head
        if fill.willStore {
            exchange.cacheStatus.stored = true
        } else if fill.admissionDeferred, exchange.cacheStatus.detail == nil {
            exchange.cacheStatus.detail = "admission-deferred"
        }
        if Preconditions.notModified(request: request.headers, status: head.status, responseHeaders: head.headers) {
            exchange.status = 304
            exchange.take(.headQueued)
            queueNotModified(headers: head.headers, age: nil, exchange: exchange)
            finishExchange()
            flushSoon()
            return true
        }
        if exchange.range == .stripped && head.status == 200 {
            guard fill.servesRangesFromWhole else {
                fill.releaseForRange(self)
                return true
            }
            if let length = fill.contentLength {
                switch RangeRequest.resolve(request: request.headers, length: length, responseHeaders: head.headers) {
                case .full:
                    break
                case .partial(let first, let last):
                    exchange.slice = (first, last)
                    exchange.attachment?.position = first
                    fill.reader(self, advancedTo: first)
                case .unsatisfiable:
                    exchange.status = 416
                    exchange.take(.headQueued)
                    queueRangeNotSatisfiable(length: length, headers: head.headers, exchange: exchange)
                    finishExchange()
                    flushSoon()
                    return true
                }
            }
        }
        exchange.take(.headQueued)
        exchange.status = exchange.slice == nil ? head.status : 206
        if exchange.cacheStatus.fwd?.validatesStored == true, fill.options.validating != nil {
            exchange.cacheStatus.fwdStatus = head.status
        }
        queueFillHead(head, fill: fill, exchange: exchange)
        return false
    }

    /// Queues the head of a response coming from upstream and picks its framing.
    private func queueFillHead(_ head: ResponseHead, fill: Fill, exchange: Exchange) {
        if let slice = exchange.slice, let length = fill.contentLength {
            var start = ResponseHeadWriter(status: 206, capacity: 512)
            start.fields(head.headers)
            start.field("Content-Range", "bytes \(slice.first)-\(slice.last)/\(length)")
            start.via()
            sendHead(start.bytes)
        } else if let prepared = fill.preparedClientHead {
            // Status line, fields and Via, serialized once for the memory and disk entries
            // too: queued by reference, as a hit's head is.
            sendHead(prepared.bytes)
        } else {
            var start = ResponseHeadWriter(status: head.status, reason: head.reason, capacity: 512)
            start.fields(head.headers)
            start.via()
            sendHead(start.bytes)
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
        }
        let cacheStatus = exchange.cacheStatus
        let connection = connectionField(exchange)
        sendHeadEnd(capacity: 64 + ResponseHeadWriter.endCapacity + cacheStatus.renderedCapacity) { buffer in
            var writer = ByteWriter(buffer)
            cacheStatus.appendField(to: &writer)
            ResponseHeadWriter.writeEnd(length: length, chunked: chunked, connection: connection, into: &writer)
            return writer.count
        }
    }

    /// Answers with a stored response a fill produced (a 304-refreshed copy, or a stale copy
    /// standing in for a failed origin), the exchange having left the fill.
    private func answerFromFill(_ exchange: Exchange, fill: Fill, stored: StoredResponse, staleIfError: Bool) {
        var status = exchange.cacheStatus
        status.fwdStatus = fill.upstreamStatus
        status.detail = staleIfError ? "stale-if-error" : nil
        status.collapsed = false
        serveFromCache(stored, exchange: exchange, stale: staleIfError, now: Clocks.wallSeconds(), status: status)
    }

    /// Ends a response whose head is out but whose body cannot be completed (the origin broke
    /// off, a block from disk failed its check): the connection closes without completing the
    /// framing, the only honest signal left (RFC 9112 §8), and the exchange is logged as
    /// truncated.
    func endIncomplete(_ exchange: Exchange) {
        exchange.keepAlive = false
        exchange.outcome = .error
        closeAfterResponse()
        self.exchange = nil
        proxy.telemetry.stats.count(.error)
        noteFailure(exchange, cause: exchange.failure ?? .truncated)
        proxy.accessLog.record(
            client: peer, method: exchange.head.method.rawValue, url: exchange.head.url.map { .absolute($0) } ?? .text("-"),
            status: exchange.status, outcome: .truncated, bytes: exchange.bodyBytesSent,
            durationNanos: Clocks.monotonicNanos() &- exchange.startNanos, attempts: exchange.attempts, retries: exchange.retries,
            agent: exchange.head.headers["User-Agent"], detail: exchange.failure ?? .truncated)
    }

    func respondUpstreamFailure(_ error: UpstreamError, exchange: Exchange) {
        if let bodyError = exchange.bodyError {
            exchange.keepAlive = false
            proxy.telemetry.stats[.badRequests].add(1)
            respondGenerated(status: bodyError.status, message: bodyError.reason, outcome: .error, cause: FailureCause(bodyError))
            return
        }
        if error.kind == .forbidden {
            // As for a refusal by spelling: the connection closes after the 403.
            exchange.keepAlive = false
            proxy.telemetry.stats[.destinationsRefused].add(1)
            proxy.logger.notice(
                "refused a destination",
                metadata: [
                    "client": "\(peer?.description ?? "-")", "url": "\(proxy.loggable(exchange.head.url?.description ?? "-"))",
                    "reason": "\(error.message)",
                ])
        } else {
            proxy.logger.notice(
                "upstream failed", metadata: ["url": "\(proxy.loggable(exchange.head.url?.description ?? "-"))", "error": "\(error)"])
        }
        let message: String
        switch error.kind {
        case .forbidden: message = "Larder: destination refused (\(error.message))"
        case .timeout: message = "Larder: upstream timed out (\(error.message))"
        case .dns: message = "Larder: upstream host not found (\(error.message))"
        case .connect: message = "Larder: cannot connect upstream (\(error.message))"
        case .tls: message = "Larder: the origin's TLS certificate did not verify, or its TLS handshake failed (\(error.message))"
        default: message = "Larder: upstream failed (\(error.message))"
        }
        exchange.cacheStatus.collapsed = false
        let retries = exchange.retries.map { " retries=\($0)" } ?? ""
        exchange.cacheStatus.detail = "\(error.kind.rawValue): \(error.message); attempts=\(exchange.attempts)\(retries)"
        respondGenerated(status: error.status, message: message, outcome: .error, cause: FailureCause(error))
    }
}

extension String {
    /// Makes text safe inside a quoted Cache-Status parameter.
    func replacingQuotes() -> String {
        String(unicodeScalars.map { $0 == "\"" || $0 == "\\" || $0.value < 0x20 ? "'" : Character($0) })
    }
}
