import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Supplies a request body to an upstream transfer (the client connection that sent it).
protocol RequestBodySource: AnyObject {
    func readRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk
}

/// A reader of a fill: a client connection streaming the response out.
protocol FillReader: AnyObject {
    /// The fill has a head, more body, or an end; called after the current event batch.
    func fillDidProgress(_ fill: Fill)
}

/// One upstream fetch and the response received so far, read by one or more clients, each at
/// its own position (read-while-writer). The body is kept in chunks while it may still be stored
/// in memory; past that, chunks every reader has taken are dropped, and the transfer pauses when
/// the slowest reader falls too far behind, so a large body streams in bounded memory.
///
/// State: loop-confined to the loop that runs the transfer; readers are on the same loop.
final class Fill: UpstreamTransferDelegate {
    let key: CacheKey
    let method: HTTPMethod
    let requestHeaders: HTTPHeaders
    unowned let proxy: ProxyLoop
    private(set) var transfer: UpstreamTransfer?
    weak var bodySource: (any RequestBodySource)?

    /// The response head as it will be forwarded (hop-by-hop fields and framing removed).
    private(set) var head: ResponseHead?
    /// The body length that frames this response's body, if the origin gave one.
    private(set) var contentLength: Int?
    /// The Content-Length the origin sent, even where no body follows (HEAD, 304).
    private(set) var announcedLength: Int?
    /// Whether the response will be stored when complete (decided when the head arrives).
    private(set) var willStore = false
    /// Set once the transfer ended.
    private(set) var outcome: Result<Void, UpstreamError>?
    /// Body bytes received so far.
    private(set) var received = 0
    let requestTime: Double
    private(set) var responseTime = 0.0

    private var chunks: [[UInt8]] = []
    private var chunkStarts: [Int] = []
    private var retainAll = true
    private var readers: [(reader: any FillReader, position: Int)] = []
    private var notifyScheduled = false
    private var paused = false
    private let maxMemoryObject: Int
    /// The disk entry being written, when the response is going to the disk tier.
    private(set) var diskWrite: DiskWrite?
    /// How far the slowest reader may fall behind before the transfer pauses.
    static let highWater = 1 << 20
    static let lowWater = 256 << 10

    init(key: CacheKey, request: UpstreamRequest, requestHeaders: HTTPHeaders, runtime: RuntimeConfig, proxy: ProxyLoop) {
        self.key = key
        method = request.method
        self.requestHeaders = requestHeaders
        self.proxy = proxy
        requestTime = Clocks.wallSeconds()
        maxMemoryObject = runtime.config.memory.maxObjectBytes
    }

    /// Starts the upstream transfer.
    func start(_ request: UpstreamRequest) {
        proxy.shared.stats.upstreamRequests.add(1)
        transfer = proxy.upstream.start(request, delegate: self)
    }

    var isFinished: Bool { outcome != nil }

    // MARK: Readers

    func attach(_ reader: any FillReader) {
        readers.append((reader, 0))
        scheduleNotify()
    }

    /// Removes a reader; the last one leaving cancels an unfinished transfer.
    func detach(_ reader: any FillReader) {
        readers.removeAll { $0.reader === reader }
        if readers.isEmpty, outcome == nil {
            transfer?.cancel()
            transfer = nil
            outcome = .failure(UpstreamError(kind: .aborted, message: "every client left", afterHead: head != nil))
            diskWrite?.abort()
            diskWrite = nil
        } else {
            trimAndResume()
        }
    }

    /// The chunk holding byte `position` of the body and the offset inside it.
    func chunk(at position: Int) -> (bytes: [UInt8], offset: Int)? {
        guard position < received, !chunks.isEmpty, position >= chunkStarts[0] else { return nil }
        var low = 0
        var high = chunks.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if chunkStarts[middle] <= position { low = middle } else { high = middle - 1 }
        }
        return (chunks[low], position - chunkStarts[low])
    }

    /// Records how far `reader` has taken the body.
    func reader(_ reader: any FillReader, advancedTo position: Int) {
        if let index = readers.firstIndex(where: { $0.reader === reader }) {
            readers[index].position = position
        }
        trimAndResume()
    }

    private func trimAndResume() {
        let slowest = readers.map(\.position).min() ?? received
        if !retainAll {
            var drop = 0
            while drop < chunks.count - 1, chunkStarts[drop + 1] <= slowest { drop += 1 }
            if drop > 0 {
                chunks.removeFirst(drop)
                chunkStarts.removeFirst(drop)
            }
        }
        if paused, received - slowest < Fill.lowWater {
            paused = false
            transfer?.resumeReceiving()
        }
    }

    private func scheduleNotify() {
        guard !notifyScheduled else { return }
        notifyScheduled = true
        proxy.loop.enqueueDeferred { [self] in
            notifyScheduled = false
            for entry in readers { entry.reader.fillDidProgress(self) }
        }
    }

    // MARK: UpstreamTransferDelegate

    func upstreamDidReceiveHead(_ upstreamHead: ResponseHead) {
        var forwarded = upstreamHead
        HopByHop.strip(&forwarded.headers)
        if let text = upstreamHead.headers["Content-Length"], let length = try? BodyFraming.parseContentLength(text[...]) {
            announcedLength = length
            if !forwarded.hasNoBody(for: method) { contentLength = length }
        }
        forwarded.headers.remove("Content-Length")
        responseTime = Clocks.wallSeconds()
        if !forwarded.headers.contains("Date") {
            // RFC 9110 §6.6.1: a recipient with a clock may add Date when the origin did not.
            forwarded.headers.add("Date", HTTPDate.format(Int(responseTime)))
        }
        head = forwarded
        let decision = Storability.decide(
            method: method, requestHeaders: requestHeaders, status: forwarded.status, responseHeaders: forwarded.headers)
        let lifetime = Freshness.lifetime(
            status: forwarded.status, headers: forwarded.headers, cacheControl: CacheControl(forwarded.headers),
            responseTime: responseTime)
        let storable = decision.canStore && lifetime > 0
        retainAll = storable && (contentLength ?? 0) <= maxMemoryObject
        if storable, let disk = proxy.shared.disk {
            var stored = forwarded.headers
            stored.remove("Age")
            diskWrite = disk.beginWrite(
                key: key,
                head: DiskEntryFormat.Head(
                    key: key.url, status: forwarded.status, reason: forwarded.reason, requestTime: requestTime,
                    responseTime: responseTime, vary: VaryMatcher.values(for: forwarded.headers, request: requestHeaders),
                    headers: stored),
                expectedLength: contentLength)
        }
        willStore = retainAll || diskWrite != nil
        scheduleNotify()
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if !retainAll, !readers.isEmpty {
            let slowest = readers.map(\.position).min() ?? received
            if received - slowest >= Fill.highWater {
                paused = true
                return false
            }
        }
        let chunk = Array(bytes)
        chunks.append(chunk)
        chunkStarts.append(received)
        received += bytes.count
        proxy.shared.stats.bytesFromUpstream.add(bytes.count)
        diskWrite?.append(chunk)
        if retainAll, received > maxMemoryObject {
            retainAll = false
            trimAndResume()
        }
        scheduleNotify()
        return true
    }

    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk {
        guard let bodySource else { return .abort }
        return bodySource.readRequestBody(into: buffer)
    }

    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) {
        transfer = nil
        switch result {
        case .success:
            if let contentLength, contentLength != received {
                outcome = .failure(
                    UpstreamError(kind: .truncated, message: "body ended after \(received) of \(contentLength) bytes", afterHead: true))
            } else {
                outcome = .success(())
                store()
                diskWrite?.finish(expectedLength: received)
            }
        case .failure(let error):
            proxy.shared.stats.upstreamFailures.add(1)
            outcome = .failure(error)
        }
        if case .failure? = outcome { diskWrite?.abort() }
        diskWrite = nil
        retainAll = false
        scheduleNotify()
    }

    /// Puts the complete response into the memory tier.
    private func store() {
        guard retainAll, let head else { return }
        let body: [UInt8]
        if chunks.count == 1 {
            body = chunks[0]
        } else {
            var joined: [UInt8] = []
            joined.reserveCapacity(received)
            for chunk in chunks { joined.append(contentsOf: chunk) }
            body = joined
        }
        var headers = head.headers
        headers.remove("Age")
        let stored = StoredResponse(
            key: key, status: head.status, reason: head.reason, headers: headers, body: .memory(body),
            requestTime: requestTime, responseTime: responseTime,
            varyValues: VaryMatcher.values(for: head.headers, request: requestHeaders),
            freshnessLifetime: Freshness.lifetime(
                status: head.status, headers: head.headers, cacheControl: CacheControl(head.headers), responseTime: responseTime),
            correctedInitialAge: Freshness.correctedInitialAge(
                headers: head.headers, requestTime: requestTime, responseTime: responseTime))
        proxy.shared.memory.insert(stored)
    }
}
