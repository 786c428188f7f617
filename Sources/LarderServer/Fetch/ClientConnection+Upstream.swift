import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Sending a request upstream: coalescing, the forwarded head, request bodies.
extension ClientConnection: RequestBodySource {
    /// The most request body buffered to compute a `dedup = "always"` key; larger bodies are
    /// streamed upstream without coalescing.
    static let maxDedupBody = 1 << 20

    /// Sends the request upstream: attaches to a fill already fetching the same thing when the
    /// route's dedup policy allows, or starts a fill (which others may then attach to).
    func forward(_ url: AbsoluteURL, key: CacheKey, exchange: Exchange) {
        let head = exchange.head
        // Like nginx's request buffering: a body up to proxy.request_body_buffer is read and
        // checked whole before anything goes upstream, so a body that turns out malformed is
        // answered 400 with nothing forwarded. A larger one streams; an error in it aborts the
        // upstream transfer, so the origin sees an incomplete request.
        if exchange.requestFraming != .none, exchange.bufferedBody == nil, !exchange.requestBodyComplete, head.method != .head {
            let limit = exchange.runtime.config.proxy.requestBodyBuffer
            var fits = limit > 0
            if case .contentLength(let length) = exchange.requestFraming, length > limit { fits = false }
            if fits {
                if head.expectsContinue, head.version == .http1_1 {
                    // RFC 9110 §10.1.1: the body will be read, so tell a waiting client to send it.
                    sendHead(ResponseHeadWriter.continueHead)
                    exchange.continueSent = true
                    flushSoon()
                }
                exchange.bufferedBody = []
                exchange.take(.bodyNeeded)
                exchange.bodyBufferLimit = limit
                bufferRequestBody(exchange)
                return
            }
        }
        if exchange.cacheStatus.fwd == nil && !exchange.cacheStatus.hit { exchange.cacheStatus = .forwarded(.uriMiss) }
        // A GET with Range for something not stored: fetch it whole (to store it) and slice,
        // unless it turns out too large, in which case the range goes upstream (Fill decides).
        // A GET with content has a fetch of its own that stores nothing: its Range goes with it.
        if head.method == .get, head.headers.contains(.range), exchange.range != .passed, exchange.policy != .networkOnly,
            !sendsOwnContent(exchange)
        {
            exchange.range = .stripped
        }
        var coalesceKey: FillKey?
        // A request whose own preconditions or Range go upstream gets an answer for itself
        // alone (a 304, 412, 416 or 206 of its range): no other request may join it.
        if !exchange.goAlone, !sendsOwnSelectors(exchange), !sendsOwnContent(exchange), !head.headers.contains(.authorization) {
            switch exchange.route?.dedup ?? .automatic {
            case .never:
                break
            case .automatic:
                if head.method == .get || head.method == .head {
                    coalesceKey = FillKey(method: head.method.rawValue, key: key, bodyHash: nil)
                }
            case .always:
                if exchange.requestFraming == .none {
                    coalesceKey = FillKey(method: head.method.rawValue, key: key, bodyHash: nil)
                } else if let body = exchange.bufferedBody, exchange.requestBodyComplete {
                    coalesceKey = FillKey(method: head.method.rawValue, key: key, bodyHash: BufferedBody.hash(body))
                } else if exchange.bufferedBody == nil || exchange.bodyBufferLimit < ClientConnection.maxDedupBody && !exchange.goAlone {
                    // The key needs the whole body: read it first (process() continues here).
                    if exchange.bufferedBody == nil { exchange.bufferedBody = [] }
                    exchange.take(.bodyNeeded)
                    exchange.bodyBufferLimit = ClientConnection.maxDedupBody
                    bufferRequestBody(exchange)
                    return
                }
            }
        }
        if let variant = exchange.variant { coalesceKey = coalesceKey?.with(variant: variant) }
        // A digest key is shared by every host, but a fill is one host's answer: only clients of
        // that host wait on it, or a host that sends a wrong body slowly would hold (and, past
        // what is kept whole, fail) the clients of every other host for as long as it likes.
        if exchange.route?.digest != nil, let shared = coalesceKey {
            coalesceKey = shared.on(origin: CacheKey.origin(of: CacheKey(url).url))
        }
        if let (share, why) = shareToWaitFor(url, coalesceKey: coalesceKey, exchange: exchange),
            waitForShare(share, why: why, exchange: exchange)
        {
            return
        }
        joinFill(coalesceKey, exchange: exchange) { registeredKey in
            startFill(url, key: key, exchange: exchange, coalesceKey: registeredKey)
        }
    }

    /// The share `exchange` waits for (``UpstreamShares``), and why: its client has its share
    /// of `url`'s origin's connections on this loop in flight, or every connection is taken;
    /// and no fill in flight here for `coalesceKey` to attach to. Nil (the usual case, without
    /// a probe while fewer fills than a share are in flight on the loop): it goes on now.
    func shareToWaitFor(
        _ url: AbsoluteURL, coalesceKey: FillKey?, exchange: Exchange
    ) -> (UpstreamShares.Key, UpstreamShares.Wait)? {
        let limit = proxy.shareLimit
        guard let client = shareClient, proxy.upstreamShares.mayBeAtLimit(limit) else { return nil }
        // The parent the fill would go through first, as ``fillOptions(for:url:validating:)``
        // orders them: the share its start counts against.
        let candidates = exchange.runtime.parents.candidates(for: url, routeParent: exchange.route?.parent)
        let parents = proxy.forwarding.parentHealth.order(candidates)
        let share = Self.share(of: client, url: url, parent: parents.first)
        guard let why = proxy.upstreamShares.mustWait(share, share: limit, perHost: proxy.perHostLimit),
            coalesceKey.flatMap(proxy.coalescer.fill(for:)) == nil
        else { return nil }
        return (share, why)
    }

    /// The share a fill to `url` counts against: its origin's, or its first parent's.
    static func share(of client: (high: UInt64, low: UInt64), url: AbsoluteURL, parent: ParentPlan.Parent?) -> UpstreamShares.Key {
        guard let parent else { return UpstreamShares.Key(client: client, host: url.host, port: url.port) }
        return UpstreamShares.Key(client: client, host: parent.endpoint?.host ?? parent.label, port: parent.endpoint?.port ?? 0)
    }

    /// Parks the exchange (``Exchange/State/waitingForShare(after:wait:)``) until its origin has
    /// a connection for it and its client is below its share, then goes on where it was (it is
    /// dropped if the client has moved on, or left, by then); or answers with an error after
    /// `upstream.timeout`. False: it may not wait where it is, and goes on.
    func waitForShare(_ share: UpstreamShares.Key, why: UpstreamShares.Wait, exchange: Exchange) -> Bool {
        let queueBegins = !proxy.upstreamShares.isWaitedFor(target: share.target)
        // As long as it would have waited for an answer upstream, then a 504, as there.
        let timeout = exchange.runtime.config.upstream.timeout
        let now = proxy.loop.now
        let id = proxy.upstreamShares.wait(share, now: now, until: now &+ UInt64(timeout.totalNanoseconds)) { [weak self] in
            // Answered meanwhile, or its client left.
            guard exchange.waitsForShare, let self, self.exchange === exchange else { return false }
            switch exchange.take(.shareGiven) {
            case .forward?:
                guard let url = exchange.url else { return false }
                forward(url, key: exchange.key ?? CacheKey(url), exchange: exchange)
            case .walkSlices?:
                if pumpSlices(exchange) { flushSoon() }
            default:
                return false
            }
            return true
        } timeOut: { [weak self] in
            guard let self, exchange.waitsForShare, self.exchange === exchange, exchange.take(.shareTimedOut) == .respond else { return }
            let message = why.timeoutMessage(timeout, origin: exchange.url?.authority ?? "the origin")
            exchange.failure = .timeout
            if exchange.headSent {
                endIncomplete(exchange)
            } else {
                exchange.cacheStatus.detail = why.timeoutDetail
                respondGenerated(status: 504, message: message, outcome: .error, cause: .timeout)
            }
            flushSoon()
        }
        guard exchange.take(.shareAwaited(.init(key: share, id: id))) == .wait else {
            proxy.upstreamShares.cancelWait(share, id: id)
            return false
        }
        if queueBegins {
            let inFlight = why == .clientShare ? proxy.upstreamShares.count(share) : proxy.upstreamShares.inFlight(target: share.target)
            proxy.logger.notice(
                "\(why.notice)",
                metadata: [
                    "client": "\(peer.map(\.description) ?? "-")", "origin": "\(proxy.loggable(exchange.url?.authority ?? "-"))",
                    "in_flight": "\(inFlight)",
                ])
        }
        exchange.cacheStatus.detail = why.detail
        proxy.telemetry.stats[.shareWaits].add(1)
        // Transfers that only wait for their clients give their connections up to it, now or
        // at the loop's look at its queues (which also times waits out); so does a client
        // holding more than others.
        proxy.watchWaits()
        if !proxy.heldTransfers.isEmpty { proxy.yieldConnection(to: share.target) }
        return true
    }

    /// Takes `exchange` off its origin's list if it waits for a connection (its client left).
    func leaveShareWait(_ exchange: Exchange) {
        guard let wait = exchange.shareWait else { return }
        proxy.upstreamShares.cancelWait(wait.key, id: wait.id)
    }

    /// Attaches `exchange` to the fill in flight for `key` on this loop, or starts the fill
    /// `makeFill` builds (registered under the key it is given, which others then attach to),
    /// the one attach-or-start for whole objects and slices: ``Coalescer/join(_:maxWaiters:reader:requestHeaders:)``
    /// attaches or claims, and the fill is built here and started by the coalescer; or moves
    /// the connection to the loop fetching the key. A nil `key`: a fill of its own. Inlined,
    /// so that the caller's builder runs without a closure context holding copies of its captures.
    @inline(__always)
    func joinFill(_ key: FillKey?, exchange: Exchange, makeFill: (_ registeredKey: FillKey?) -> Fill) {
        let registeredKey: FillKey?
        switch proxy.coalescer.join(
            key, maxWaiters: exchange.runtime.config.coalesce.maxWaiters, reader: self, requestHeaders: exchange.head.headers)
        {
        case .start(let key):
            registeredKey = key
        case .attached(let fill):
            // A slice's answer stays a miss in the log; its head may be out already.
            if !exchange.isSliced {
                exchange.take(.attached(fill), now: proxy.loop.now)
                exchange.outcome = .coalesced
            } else {
                exchange.take(.sliceFillAttached(fill), now: proxy.loop.now)
            }
            if !exchange.headSent { exchange.cacheStatus.collapsed = true }
            proxy.telemetry.stats[.requestsCoalesced].add(1)
            return
        case .elsewhere(let owner, let key):
            if moveToFill(on: owner, exchange: exchange) { return }
            registeredKey = key
        }
        let fill = makeFill(registeredKey)
        // The fill takes one of the origin's connections on this loop, counted against its
        // client's share (``shareToWaitFor(_:coalesceKey:exchange:)`` held it back if it had it).
        if let client = shareClient, let url = exchange.url {
            let share = Self.share(of: client, url: url, parent: fill.options.parents.first)
            proxy.upstreamShares.take(share)
            fill.share = share
        }
        // The exchange reads the fill it starts from here on: taken before the fill starts.
        exchange.take(exchange.isSliced ? .sliceFillAttached(fill) : .attached(fill), now: proxy.loop.now)
        proxy.coalescer.start(fill, firstReader: self, requestHeaders: exchange.head.headers)
    }

    /// The fill for a whole object, registered under `coalesceKey` (nil: not registered).
    private func startFill(_ url: AbsoluteURL, key: CacheKey, exchange: Exchange, coalesceKey: FillKey?) -> Fill {
        let head = exchange.head
        let runtime = exchange.runtime
        let validating = validatingStored(exchange)
        let body: UpstreamRequest.BodyLength?
        switch exchange.requestFraming {
        case .none: body = nil
        case .contentLength(let length): body = .known(length)
        case .chunked:
            body = exchange.bufferedBody != nil && exchange.requestBodyComplete ? .known(exchange.bufferedBody!.count) : .unknown
        }
        let request = upstreamRequest(
            url: url, head: head, runtime: runtime, route: exchange.hasRoute ? exchange.route : nil, body: body,
            validating: validating, stripRange: exchange.range == .stripped)

        // RFC 9110 §10.1.1: the body will be read, so tell a waiting client to send it.
        if body != nil, head.expectsContinue, head.version == .http1_1, !exchange.requestBodyComplete, !exchange.continueSent {
            sendHead(ResponseHeadWriter.continueHead)
            flushSoon()
        }
        let options = fillOptions(for: exchange, url: url, validating: validating)
        options.fallback = exchange.stored
        options.rangeStripped = exchange.range == .stripped
        options.ownSelectors = sendsOwnSelectors(exchange)
        // (Most requests carry no selector: the field is looked for only in those that do.)
        options.rangePassed = options.ownSelectors && head.method == .get && exchange.range != .stripped && head.headers.contains(.range)
        options.ownContent = sendsOwnContent(exchange)
        let fill = Fill(
            key: key, coalesceKey: coalesceKey, request: consume request, requestHeaders: head.headers,
            dedupAlways: exchange.hasRoute && exchange.route?.dedup == .always, options: options, settings: runtime.fill, proxy: proxy)
        if let buffered = exchange.bufferedBody, exchange.requestBodyComplete {
            fill.ownedBodySource = BufferedBody(buffered)
        } else if body != nil {
            // Only a request with a body: the first weak reference to a connection gives it a
            // side table, and every retain and release of it takes the slow path from then on.
            fill.bodySource = self
        }
        exchange.cacheStatus.collapsed = false
        exchange.attempts = 1
        return fill
    }

    /// Revalidates (or refetches) a stored response that was just served stale, with no client
    /// waiting; at most one such fetch per URL is in flight (through the coalescer).
    func refreshInBackground(_ stored: StoredResponse, url: AbsoluteURL, exchange: Exchange) {
        let key = FillKey(method: "GET", key: stored.key, bodyHash: nil)
        guard proxy.coalescer.fill(for: key) == nil, !exchange.runtime.config.cache.offline else { return }
        let options = fillOptions(for: exchange, url: url, validating: stored.hasValidator ? stored : nil)
        // No client waits on it: the directives of the request that found the entry stale
        // (its no-store, its stale-if-error) are not this fetch's.
        options.requestDirectives = .none
        options.background = true
        var head = exchange.head
        head.method = .get
        // Larder's own fetch: the client's preconditions (and Range, below) are its own business,
        // and an answer to them (a 304 to its If-None-Match) would be taken for the object's.
        for name in ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"] { head.headers.remove(name) }
        let request = upstreamRequest(
            url: url, head: head, runtime: exchange.runtime, route: exchange.route, body: nil,
            validating: options.validating, stripRange: true)
        let fill = Fill(
            key: stored.key, coalesceKey: key, request: request, requestHeaders: head.headers, dedupAlways: false,
            options: options, settings: exchange.runtime.fill, proxy: proxy)
        _ = proxy.coalescer.claimOrFindOtherLoop(key)  // as before: a refresh runs wherever it started
        proxy.telemetry.stats[.backgroundRefreshes].add(1)
        proxy.coalescer.start(fill, firstReader: nil, requestHeaders: head.headers)
    }

    /// The stored response Larder validates with its own validators (RFC 9111 §4.3.1), which
    /// replace the client's conditionals upstream: a stale one, or one the client's no-cache
    /// sends to the origin.
    func validatingStored(_ exchange: Exchange) -> StoredResponse? {
        guard let stored = exchange.stored, stored.hasValidator else { return nil }
        return exchange.cacheStatus.fwd?.validatesStored == true ? stored : nil
    }

    /// Whether the request goes upstream with fields of the client's that select an answer for
    /// it alone: preconditions (RFC 9110 §13.1) that Larder's own validators do not replace, or
    /// a Range (§14.2) sent as it came. The origin's 304, 412, 416 or 206 then describes that
    /// request, not the object: it is neither shared with other requests nor stored.
    func sendsOwnSelectors(_ exchange: Exchange) -> Bool {
        let headers = exchange.head.headers
        // Most requests carry neither: their bits, read before the exact checks.
        guard Self.mayCarrySelectors(headers) else { return false }
        if Preconditions.hasOriginConditions(headers) { return true }
        if exchange.range != .stripped, headers.contains(.range) { return true }
        return Preconditions.hasCacheableConditions(headers) && validatingStored(exchange) == nil
    }

    /// Whether a GET or HEAD goes upstream with content (RFC 9110 §9.3.1, §9.3.2): the origin
    /// may answer what the content asks, which is no other request's answer (a route with
    /// `dedup = "always"` keys its fills by the body and is left as it is).
    func sendsOwnContent(_ exchange: Exchange) -> Bool {
        let method = exchange.head.method
        guard method == .get || method == .head, exchange.route?.dedup != .always else { return false }
        switch exchange.requestFraming {
        case .none, .contentLength(0): return false
        case .contentLength, .chunked: return true
        }
    }

    /// Whether `headers` has a precondition (RFC 9110 §13.1) or `Range`/`If-Range` (§14.2): the
    /// fields' bits, read without a pass over the names.
    static func mayCarrySelectors(_ headers: HTTPHeaders) -> Bool {
        headers.contains(.ifNoneMatch) || headers.contains(.ifModifiedSince) || headers.contains(.ifMatch)
            || headers.contains(.ifUnmodifiedSince) || headers.contains(.range) || headers.contains(.ifRange)
    }

    /// What a fill for `exchange` starts with: the route's policy, ttl, retry and parents, what
    /// the route says of its objects (a shared key, immutable, the digest the URL names, the
    /// URL kept under a key template), the request's directives, the stored response it
    /// validates. Every fill's options are built here, a background refresh's too.
    func fillOptions(for exchange: Exchange, url: AbsoluteURL, validating: StoredResponse?) -> FillOptions {
        let runtime = exchange.runtime
        // Read once: a route is a large value, and most requests have none.
        let route = exchange.hasRoute ? exchange.route : nil
        let options = FillOptions(retry: RetryPolicy(route?.retry ?? runtime.config.retry))
        options.validating = validating
        options.requestDirectives = exchange.directives
        options.policy = exchange.policy
        if let route {
            options.ttl = route.ttl?.totalSeconds
            options.idempotentRoute = route.idempotent ?? false
            options.sharedKey = route.hasCustomKey
            options.immutableRoute = route.immutable
            if let algorithm = route.digest, let expected = route.expectedDigest(in: url.pathAndQuery) {
                options.digest = (algorithm, String(expected))
            }
            // Under a key template, the URL is kept with the entry (listings show it), without
            // the query parameters the route ignores (signatures).
            if route.key != nil {
                var plain = route
                plain.key = nil
                options.storedURL = CacheKey(url, route: plain).url
            }
        }
        // The parents a fill goes through (none: direct), the ones backing off last.
        options.parents = proxy.forwarding.parentHealth.order(runtime.parents.candidates(for: url, routeParent: route?.parent))
        options.parentBackoff = runtime.parents.backoff
        return options
    }

    /// The request as it goes upstream: hop-by-hop fields removed, Host from the URL, Via
    /// added (RFC 9110 §7.6); the client's conditionals replaced by Larder's own when it
    /// validates a stored response (the client's are then answered locally); Range removed when
    /// the whole object is fetched.
    func upstreamRequest(
        url: AbsoluteURL, head: RequestHead, runtime: RuntimeConfig, route: Route?, body: UpstreamRequest.BodyLength?,
        validating: StoredResponse?, stripRange: Bool
    ) -> UpstreamRequest {
        // Unshared, with room for the fields added below: no copy-on-write, no growing.
        var headers = head.headers.copy(reservingFields: 4)
        HopByHop.strip(&headers)
        headers.remove(.host)
        let via = proxy.forwarding.via(after: headers)
        headers.remove(.via)
        if stripRange {
            headers.remove(.range)
            headers.remove(.ifRange)
        }
        if let validating {
            headers.remove(.ifNoneMatch)
            headers.remove(.ifModifiedSince)
            // RFC 9111 §4.3.1: validate with the stored validators.
            if let etag = validating.etag { headers.add("If-None-Match", etag) }
            if let modified = validating.headers[.lastModified] { headers.add("If-Modified-Since", modified) }
        }
        // Last in the list, first on the wire: curl writes a given Host right after the request
        // line (RFC 9112 §3.2) and leaves it out of the other fields.
        headers.addHost(of: url)
        headers.add(.via, via)
        var request = UpstreamRequest(
            method: head.method, url: url, headers: headers, body: body,
            connectTimeoutNanos: runtime.upstreamConnectTimeout,
            timeoutNanos: route?.timeout.map(\.totalNanoseconds) ?? runtime.upstreamTimeout,
            destinationCheck: destinationCheck(host: url.bareHost, runtime: runtime))
        request.minRate = route?.minRate ?? runtime.config.upstream.minRate
        let extraTrust = runtime.config.tls.upstreamCAFile
        if !extraTrust.isEmpty { request.extraTrustAnchors = extraTrust }
        return request
    }

    // MARK: Request bodies

    /// Reads a request body into memory, up to `exchange.bodyBufferLimit`: to check it before
    /// forwarding, or to compute its dedup key (called again as bytes arrive).
    func bufferRequestBody(_ exchange: Exchange) {
        guard exchange.bufferingBody, var reader = exchange.body else { return }
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while !reader.isComplete, hasUnreadInput {
            let result = scratch.withUnsafeMutableBytes { buffer in
                Result { () throws(HTTPParseError) in try takeRequestBody(&reader, into: buffer) }
            }
            switch result {
            case .success(let written):
                exchange.bufferedBody!.append(contentsOf: scratch[0..<written])
            case .failure(let error):
                exchange.body = reader
                exchange.keepAlive = false
                proxy.telemetry.stats[.badRequests].add(1)
                respondGenerated(status: error.status, message: error.reason, outcome: .error, cause: FailureCause(error))
                return
            }
            if exchange.bufferedBody!.count > exchange.bodyBufferLimit { break }
        }
        exchange.body = reader
        if reader.isComplete || exchange.bufferedBody!.count > exchange.bodyBufferLimit {
            // Too large to hold: stream it (and, for dedup = "always", without coalescing).
            let next = exchange.take(
                .bodyRead(tooLargeToKey: !reader.isComplete && exchange.bodyBufferLimit >= ClientConnection.maxDedupBody))
            guard next == .forward, let url = exchange.url else { return }
            forward(url, key: exchange.key ?? CacheKey(url), exchange: exchange)
        } else if peerClosed {
            close()
        }
    }

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
        while !reader.isComplete, written == 0, hasUnreadInput {
            do {
                written = try takeRequestBody(&reader, into: buffer)
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
