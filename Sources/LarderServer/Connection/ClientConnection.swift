import Glibc
import LarderHTTP
import LarderIO
import LarderTLS
import LarderUpstream

/// One client connection: reads requests, answers them in order, keeps the connection alive
/// between them, and enforces the header, idle and write-stall timeouts.
///
/// Requests are answered one at a time; bytes of pipelined requests wait in the input buffer
/// until the previous response is queued, so responses leave in request order (RFC 9112 §9.3.2).
///
/// State: loop-confined; the loop's sweep calls ``checkDeadline(now:)``.
final class ClientConnection: IOHandler {
    enum Phase {
        /// Between requests (keep-alive idle), no bytes of the next one yet.
        case waitingForRequest
        /// Some bytes of a request head have arrived.
        case readingHead
        /// A request is being answered.
        case exchanging
        /// The last response was written; reading and discarding until the peer closes, so
        /// unread input does not turn our close into a reset that destroys the response.
        case lingering
        case closed
    }

    /// What the connection reads and writes through: the socket itself, or (HTTPS
    /// interception) a TLS session over it.
    var transport: any Transport
    /// The socket under ``transport``.
    let socket: Socket
    let peer: SocketAddress?
    /// The client as ``UpstreamShares`` counts it (nil: no address).
    let shareClient: (high: UInt64, low: UInt64)?
    let kind: Listener.Kind
    /// Strong: the loop's connection table holds this connection until `close()` removes it,
    /// which breaks the cycle. (An unowned reference costs an atomic retain per access.)
    let proxy: ProxyLoop
    private let inbound = ByteBuffer(capacity: 2048)
    private var output = OutputQueue()
    private var parser: RequestHeadParser
    var exchange: Exchange?
    /// The user its last request was let in as (proxy authentication on): an intercepted
    /// session's requests carry no credentials, and a tunnel's bytes none, so a reload that
    /// changes or removes this user closes them (``ProxyLoop/apply(_:)``).
    var authenticatedUser: ProxyAuthenticator.User?
    private var phase: Phase = .waitingForRequest
    /// Whether a request is being answered (not waiting for one, not lingering or closed).
    var isExchanging: Bool { phase == .exchanging }

    private var deadline: UInt64 = .max
    private var lastWriteProgress: UInt64 = 0
    private var lastReadProgress: UInt64 = 0
    /// When the request being answered began (``isQuiet(now:for:)``).
    private var exchangeBegan: UInt64 = 0
    private(set) var peerClosed = false
    private var draining = false
    private var closeWhenFlushed = false
    private var lingerBytes = 0
    private var inProcess = false
    /// Set while the writer must not begin a pipelined request: the work on the connection
    /// begins it later (``holdingRequests(_:)``).
    private var requestsHeld = false
    /// The counts of the host this connection last asked for (see ``HostCounters``).
    var hostSlot: HostCounters.Slot?
    /// The route counters this connection last counted into (``hostSlot``'s reason).
    var routeSlot: HostCounters.Slot?
    /// Which idle spell this is, matched against the loop's idle queue (see ``ProxyLoop``).
    private(set) var idleStamp: UInt64 = 0
    /// Whether this client's requests and tunnels may go where they ask.
    var destinations = DestinationGuard()
    /// CONNECT, and the intercepted TLS session after it: set once this client sends one.
    var connect: ConnectHandler?

    /// Input buffered beyond this stops reading until requests are consumed.
    private var inputLimit: Int
    /// Output queued beyond this stops pulling response bytes until the socket drains.
    static let outputHighWater = 256 * 1024

    init(socket: Socket, peer: SocketAddress?, kind: Listener.Kind, proxy: ProxyLoop) {
        self.socket = socket
        transport = SocketTransport(socket)
        self.peer = peer
        shareClient = UpstreamShares.client(peer)
        self.kind = kind
        self.proxy = proxy
        let maxHead = proxy.runtime.config.proxy.maxHeaderBytes
        parser = RequestHeadParser(maxHeadBytes: maxHead)
        inputLimit = max(maxHead + 4096, 64 * 1024)
    }

    func start(now: UInt64) {
        // The first request must start arriving within the header timeout.
        deadline = now &+ proxy.runtime.headerTimeout
        idleStamp = proxy.noteIdle(self)
        lastWriteProgress = now
        lastReadProgress = now
    }

    // MARK: Events

    func handleIO(_ events: IOEvents) {
        if events.contains(.writable) {
            flush()
        }
        if phase != .closed, events.contains(.readable) || events.contains(.hangup) || transport.wantsWritable {
            readInput()
        }
    }

    func readInput() {
        let space = inbound.writableSpace(minimum: 2048, limit: inputLimit)
        if space.isEmpty {
            updateInterest()
            return
        }
        let count: Int?
        do {
            count = try transport.read(into: space)
        } catch {
            connect?.transportFailed()
            close()
            return
        }
        connect?.didRead()
        guard let count else {
            if transport.wantsWritable { updateInterest() }
            return
        }
        if count == 0 {
            peerClosed = true
            peerDidClose()
            return
        }
        inbound.didWrite(count)
        lastReadProgress = proxy.loop.now
        process()
        // Bytes the transport holds already (decrypted TLS records) raise no epoll event.
        if phase != .closed, transport.hasBufferedInput {
            proxy.loop.enqueueDeferred { [weak self] in
                guard let self, self.phase != .closed else { return }
                self.readInput()
            }
        }
    }

    /// Handles the end of the client's input.
    private func peerDidClose() {
        switch phase {
        case .lingering, .waitingForRequest, .readingHead:
            close()
        case .exchanging:
            // The client went away (a client that half-closes and still waits is treated the
            // same, as Squid does by default): stop the work done for it.
            close()
        case .closed:
            break
        }
    }

    /// Parses and answers whatever complete requests are buffered, then writes the answers
    /// together (pipelined hits leave in one gathering write).
    func process() {
        processing(parseAndBegin)
    }

    /// Runs `body` (which begins or continues exchanges) with flushes deferred, then writes
    /// what it queued together.
    private func processing(_ body: () -> Void) {
        guard !inProcess else { return }
        inProcess = true
        body()
        inProcess = false
        if phase == .closed { return }
        if !output.isEmpty || closeWhenFlushed { flush() } else { updateInterest() }
    }

    /// Flushes now, unless ``process()`` is running and will flush when it is done.
    func flushSoon() {
        if !inProcess { flush() }
    }

    private func parseAndBegin() {
        while true {
            switch phase {
            case .closed:
                return
            case .lingering:
                lingerBytes += inbound.readableCount
                inbound.consume(inbound.readableCount)
                if lingerBytes > 1 << 20 { close() }
                return
            case .exchanging:
                if let exchange { proxy.pipeline.inputArrived(exchange, on: self) }
                return
            case .waitingForRequest, .readingHead:
                if closeWhenFlushed || connect?.holdsRequests == true { return }
                if inbound.isEmpty {
                    inbound.shrinkIfEmpty()
                    return
                }
                // Responses not yet written hold back further pipelined requests.
                if output.pendingBytes > ClientConnection.outputHighWater { return }
                if phase == .waitingForRequest {
                    phase = .readingHead
                    deadline = proxy.loop.now &+ exchangeRuntime.headerTimeout
                }
                let outcome: RequestHeadParser.Outcome
                do {
                    outcome = try parser.parse(inbound.readable)
                } catch {
                    proxy.telemetry.stats[.badRequests].add(1)
                    proxy.logger.notice(
                        "rejected request", metadata: ["client": "\(peer?.description ?? "-")", "reason": "\(error.reason)"])
                    rejectAndClose(error)
                    return
                }
                guard case .complete(let head, let length) = consume outcome else { return }
                inbound.consume(length)
                parser.reset()
                phase = .exchanging
                deadline = .max
                exchangeBegan = proxy.loop.now
                proxy.pipeline.begin(head, on: self)
            }
        }
    }

    /// The first request head (or, after an intercepted CONNECT, the TLS handshake and then
    /// the first head) must arrive within the header timeout.
    func armHeaderDeadline() {
        deadline = proxy.loop.now &+ proxy.runtime.headerTimeout
    }

    private var exchangeRuntime: RuntimeConfig { exchange?.runtime ?? proxy.runtime }

    // MARK: Writing

    /// What the writer does once everything queued is written, as the work on the connection
    /// says (``outputWritten()``).
    enum AfterWrite {
        /// The socket was handed on (to a tunnel, to a TLS session): the writer stops.
        case stop
        /// More output was queued: write again.
        case writeMore
        /// Nothing more for now: on to keep-alive and pipelined requests.
        case idle
    }

    /// Writes queued output; whenever the socket takes everything, asks the work on the
    /// connection for more, and once an exchange is done moves on to pipelined requests.
    func flush() {
        while phase != .closed {
            let before = output.pendingBytes
            let result: OutputQueue.FlushResult
            do {
                result = try output.flush(to: transport)
            } catch {
                close()
                return
            }
            if output.pendingBytes != before { lastWriteProgress = proxy.loop.now }
            outputGainedRoom()
            switch result {
            case .wouldBlock:
                updateInterest()
                return
            case .flushed:
                break
            }
            if closeWhenFlushed {
                startLingering()
                return
            }
            switch outputWritten() {
            case .stop:
                return
            case .writeMore:
                continue
            case .idle:
                break
            }
            break
        }
        guard phase != .closed else { return }
        if (phase == .waitingForRequest || phase == .readingHead) && !inbound.isEmpty && !requestsHeld {
            process()
        } else {
            updateInterest()
        }
    }

    // MARK: What the writer asks of the work on the connection

    /// Room in the output: the exchange may read ahead (the next block of a disk body).
    private func outputGainedRoom() {
        if let exchange { proxy.pipeline.outputHasRoom(exchange, on: self) }
    }

    /// Everything queued is written: the CONNECT handler may take the socket, a streaming
    /// response may queue more of its body (if any arrived).
    private func outputWritten() -> AfterWrite {
        if let connect, let next = connect.outputWritten() { return next }
        if let exchange, proxy.pipeline.outputWritten(exchange, on: self), !output.isEmpty || closeWhenFlushed { return .writeMore }
        return .idle
    }

    func updateInterest() {
        guard phase != .closed else { return }
        var interest: IOEvents = []
        if !peerClosed && inbound.readableCount < inputLimit { interest.insert(.readable) }
        if !output.isEmpty || transport.wantsWritable { interest.insert(.writable) }
        proxy.loop.setInterest(socket.fd, interest)
    }

    // MARK: What the request side writes and reads through

    // The answer writers (Request/, Fetch/, Ranges/, Admin/, Tunnels/) reach the output, the
    // input and the close only through these: heads and bodies queued in order, a body framed
    // as its head announced, room asked, a close announced, the request body read.

    /// Queues a response head, or an interim (1xx) one, as it goes on the wire.
    @inline(__always)
    func sendHead(_ bytes: [UInt8]) {
        output.append(bytes)
    }

    /// Queues the last fields and the end of a head, which `write` puts in place into the
    /// loop's scratch buffer (at most `capacity` bytes; it returns how many): per-response
    /// fields with no array of their own. `write` is handed on as it is: wrapped in a closure
    /// of ours, it would no longer be compiled into its caller.
    @inline(__always)
    func sendHeadEnd(capacity: Int, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Int) {
        output.append(using: &proxy.scratch, capacity: capacity, write)
    }

    /// Queues a body whose length the head declared as exactly this: `bytes` whole, by reference.
    @inline(__always)
    func sendBody(_ bytes: [UInt8]) {
        output.append(bytes)
    }

    /// Queues a body whose length the head declared as exactly this: `count` of `bytes` from
    /// `offset` on, by reference.
    @inline(__always)
    func sendBody(_ bytes: [UInt8], from offset: Int, count: Int) {
        output.append(bytes, from: offset, count: count)
    }

    /// Queues a body whose length the head declared as exactly this: `count` bytes of `file`
    /// from `offset` on, sent with sendfile(2) where the transport can.
    @inline(__always)
    func sendBody(file: OpenFile, offset: Int, count: Int) {
        output.appendFile(file, offset: Int64(offset), count: Int64(count))
    }

    /// Queues `count` of `bytes` from `offset` on (by reference) as the next part of
    /// `exchange`'s body, framed as its head announced (``BodyFrame``).
    func sendBodyPart(_ bytes: [UInt8], from offset: Int, count: Int, exchange: Exchange) {
        sendFramed(count, exchange: exchange) { output, count in output.append(bytes, from: offset, count: count) }
    }

    /// Queues `count` bytes of `file` from `offset` on as the next part of `exchange`'s body,
    /// framed as its head announced (``BodyFrame``).
    func sendBodyPart(file: OpenFile, offset: Int, count: Int, exchange: Exchange) {
        sendFramed(count, exchange: exchange) { output, count in
            output.appendFile(file, offset: Int64(offset), count: Int64(count))
        }
    }

    /// Ends a chunked body: the last chunk, no trailer fields (RFC 9112 §7.1).
    func sendLastChunk() {
        output.append(ClientConnection.lastChunk)
    }

    private static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// Frames a body part of `count` bytes: a chunk of its own when chunked; what would run
    /// past a declared Content-Length is dropped (``bodyOverran(_:)``). `queue` appends the
    /// part's bytes, as many as it is given.
    @inline(__always)
    private func sendFramed(_ count: Int, exchange: Exchange, _ queue: (inout OutputQueue, Int) -> Void) {
        let frame = BodyFrame(count: count, framing: exchange.framing, sent: exchange.bodyBytesSent)
        if frame.overran { bodyOverran(exchange) }
        guard frame.count > 0 else { return }
        if frame.chunked { output.append(frame.sizeLine) }
        queue(&output, frame.count)
        if frame.chunked { output.append(HeadSerializer.crlf) }
        exchange.bodyBytesSent += frame.count
    }

    /// A body writer's bytes ran past the Content-Length its head declared (``BodyFrame``):
    /// the excess was dropped; the exchange is marked broken and the connection closes after
    /// what was declared. Logged once per exchange.
    private func bodyOverran(_ exchange: Exchange) {
        guard !exchange.framingBroken else { return }
        exchange.framingBroken = true
        exchange.keepAlive = false
        var declared = "-"
        if case .length(let length) = exchange.framing { declared = "\(length)" }
        proxy.logger.error(
            "a response body ran past its declared length; the excess was dropped and the connection closes",
            metadata: ["url": "\(proxy.loggable(exchange.head.url?.description ?? "-"))", "declared": "\(declared)"])
    }

    /// Whether a streaming body may queue more now: the output is below its high-water mark.
    /// Past it, the body waits for ``RequestPipeline/outputWritten(_:on:)``.
    var outputHasRoom: Bool { output.pendingBytes < ClientConnection.outputHighWater }

    /// Bytes queued and not yet written.
    var pendingOutputBytes: Int { output.pendingBytes }

    /// Announces that the connection closes once what is queued is written, whatever the
    /// response's head said (a body that cannot be completed, RFC 9112 §8).
    func closeAfterResponse() {
        closeWhenFlushed = true
    }

    /// Whether the client sent bytes not read yet: a request body's, or a pipelined request's.
    var hasUnreadInput: Bool { !inbound.isEmpty }

    /// Moves request body bytes from the input into `buffer` as `reader` decodes its framing
    /// (RFC 9112 §6.3, §7.1), consuming what it read: returns the body bytes written.
    func takeRequestBody(_ reader: inout RequestBodyReader, into buffer: UnsafeMutableRawBufferPointer) throws(HTTPParseError)
        -> Int
    {
        let moved = try reader.transfer(from: inbound.readable, into: buffer)
        inbound.consume(moved.consumed)
        return moved.written
    }

    /// Takes every byte read and not consumed: the socket goes to a new owner (a tunnel,
    /// another loop), which gets them first.
    func takeUnreadInput() -> [UInt8] {
        let bytes = Array(inbound.readable)
        inbound.consume(inbound.readableCount)
        return bytes
    }

    /// Whether the socket may go to another owner now: an exchange under way, nothing queued
    /// to write, no close announced.
    var mayLeaveLoop: Bool { phase == .exchanging && output.isEmpty && !closeWhenFlushed }

    /// Runs `body` without beginning a pipelined request inside it (a fill's pass over its
    /// readers: a request for the same URL would join the fill while this connection's
    /// finished exchange is still one of its readers). What `body` leaves waiting is begun on
    /// the loop's next turn.
    func holdingRequests<Result>(_ body: () -> Result) -> Result {
        let held = requestsHeld
        requestsHeld = true
        let result = body()
        requestsHeld = held
        if !held, phase == .waitingForRequest || phase == .readingHead, !inbound.isEmpty {
            proxy.loop.enqueueDeferred { [weak self] in
                guard let self, self.phase == .waitingForRequest || self.phase == .readingHead else { return }
                self.process()
            }
        }
        return result
    }

    // MARK: Ending exchanges and connections

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

    /// Called when every byte of the current response is queued: the exchange leaves what it
    /// was reading (``RequestPipeline/finished(_:on:)``), then ends here.
    func finishExchange() {
        guard let exchange else { return }
        self.exchange = nil
        proxy.pipeline.finished(exchange, on: self)
        endExchange(exchange)
    }

    /// Ends `exchange`, whose response is all queued, which has left what it was reading and
    /// which the connection no longer holds: it is counted and logged, and the connection
    /// closes once the output is written or waits for the next request, as the head announced.
    /// `flushing`: the caller (a fill's pass, which is told the reader left) writes nothing
    /// more itself, so the output is written here.
    func endExchange(_ exchange: Exchange, flushing: Bool = false) {
        record(exchange)
        // The decision the head announced, made again with this connection's own drain.
        if connectionField(exchange, draining: draining) == .close {
            closeWhenFlushed = true
            phase = .waitingForRequest
            if flushing { flush() } else { flushSoon() }
            return
        }
        phase = .waitingForRequest
        deadline = proxy.loop.now &+ proxy.runtime.idleTimeout
        idleStamp = proxy.noteIdle(self)
        if flushing { flush() }
    }

    /// Finishes the current exchange (if any), then closes once the output is written.
    func drain() {
        draining = true
        if phase == .waitingForRequest && output.isEmpty { close() }
    }

    /// Sends `error` as a response and closes: the bytes after a malformed head cannot be trusted.
    func rejectAndClose(_ error: HTTPParseError) {
        let bodyBytes = queueGenerated(status: error.status, message: error.reason, cacheStatus: nil, connection: .close)
        if let exchange {
            exchange.bodyBytesSent = bodyBytes
            exchange.status = error.status
            exchange.outcome = .error
            exchange.failure = FailureCause(error)
            exchange.keepAlive = false
            finishExchange()
        } else {
            // No exchange (the head itself was malformed): still one access line, with its status.
            proxy.telemetry.stats.countStatus(error.status)
            proxy.accessLog.record(
                client: peer, method: "-", url: .text("-"), status: error.status, outcome: .request(.error),
                bytes: bodyBytes,
                durationNanos: 0, attempts: 0, detail: FailureCause(error))
            closeWhenFlushed = true
            flushSoon()
        }
    }

    private func startLingering() {
        guard phase != .closed else { return }
        phase = .lingering
        transport.shutdownWrite()
        if peerClosed {
            close()
            return
        }
        deadline = proxy.loop.now &+ 2_000_000_000
        inbound.consume(inbound.readableCount)
        updateInterest()
    }

    /// Closes the socket and abandons the current exchange.
    func close() {
        guard phase != .closed else { return }
        if let exchange {
            self.exchange = nil
            proxy.pipeline.abandon(exchange, on: self)
        }
        phase = .closed
        output.removeAll()
        proxy.loop.deregister(socket.fd)
        transport.close()
        proxy.connectionClosed(self)
    }

    /// Whether this connection may be closed to make room for a new one: between requests,
    /// nothing read of the next one, nothing left to write.
    func isEvictable(stamp: UInt64) -> Bool {
        phase == .waitingForRequest && idleStamp == stamp && inbound.isEmpty && !closeWhenFlushed && !draining
    }

    /// Whether it is idle but still writing its last response.
    var isFlushingWhileIdle: Bool { phase == .waitingForRequest && !output.isEmpty }

    /// Whether closing it cuts nothing its client is receiving (``ProxyLoop/makeRoom(for:)``):
    /// every byte written has reached the client, here and in the socket (a hit queued whole,
    /// or a slow reader's response, drains for seconds after the exchange ends or last moves),
    /// and a request being answered has moved nothing either way for `quiet` nanoseconds.
    func isQuiet(now: UInt64, for quiet: UInt64) -> Bool {
        switch phase {
        case .closed: return false
        case .exchanging: guard now &- max(exchangeBegan, lastWriteProgress, lastReadProgress) >= quiet else { return false }
        case .waitingForRequest, .readingHead, .lingering: break
        }
        return output.isEmpty && socket.unsentBytes() == 0
    }

    /// Leaves the loop's connection table without closing the socket: a tunnel owns it now
    /// (and the connection stays counted until the tunnel closes), or another loop does.
    func leaveLoop(stillCounted: Bool) {
        phase = .closed
        output.removeAll()
        proxy.loop.deregister(socket.fd)
        proxy.connectionLeft(self, stillCounted: stillCounted)
    }

    /// Continues a connection another loop moved here (``moveToFill(on:exchange:)``): its
    /// request starts again on this loop, which fetches what it needs.
    func resume(_ moved: MovedConnection) {
        start(now: proxy.loop.now)
        authenticatedUser = moved.user
        if let moving = moved.interception {
            let handler = ConnectHandler(connection: self)
            handler.resume(moving.session, host: moving.host, port: moving.port)
            connect = handler
        }
        if !moved.pending.isEmpty {
            let space = inbound.writableSpace(minimum: moved.pending.count, limit: max(inputLimit, moved.pending.count))
            space.copyBytes(from: moved.pending)
            inbound.didWrite(moved.pending.count)
        }
        phase = .exchanging
        deadline = .max
        exchangeBegan = proxy.loop.now
        processing { proxy.pipeline.begin(moved.head, on: self, moved: (moved.startNanos, moved.body)) }
        // Records the session decrypted before the move raise no event here.
        if phase != .closed, transport.hasBufferedInput {
            proxy.loop.enqueueDeferred { [weak self] in
                guard let self, self.phase != .closed else { return }
                self.readInput()
            }
        }
    }

    // MARK: CONNECT

    /// Set while this connection is an intercepted TLS session.
    var interception: ConnectHandler.Interception? { connect?.interception }

    /// Hands a CONNECT request to this connection's ``ConnectHandler``.
    func beginTunnel(host: String, port: Int, exchange: Exchange) {
        let handler = connect ?? ConnectHandler(connection: self)
        connect = handler
        handler.begin(host: host, port: port, exchange: exchange)
    }

    /// Enforces the timeouts; called by the loop's periodic sweep.
    func checkDeadline(now: UInt64) {
        switch phase {
        case .waitingForRequest:
            guard now >= deadline else { return }
            connect?.timedOut()
            close()
        case .readingHead:
            guard now >= deadline else { return }
            // RFC 9110 §15.5.9: 408 tells the client why its request went unanswered.
            phase = .waitingForRequest
            queueGenerated(
                status: 408, message: "request head not received within the header timeout", cacheStatus: nil, connection: .close)
            closeWhenFlushed = true
            flush()
        case .exchanging:
            // A client that stops reading its response must not pin the response in memory.
            if !output.isEmpty, now &- lastWriteProgress >= exchangeRuntime.idleTimeout { close() }
            if let exchange, proxy.pipeline.waitedTooLong(exchange, now: now, on: self) { return }
            // A request body that stops arriving.
            if let exchange, exchange.upstreamWaitsForBody, now &- lastReadProgress >= exchangeRuntime.idleTimeout {
                close()
            }
        case .lingering:
            if now >= deadline { close() }
        case .closed:
            break
        }
    }
}
