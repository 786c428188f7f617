import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Answers from an object kept as fixed slices (`cache.slice_size`, as nginx's slice module):
/// each slice comes from the tiers when stored and fresh, else from a slice fill (a Range
/// request upstream, coalesced by slice), one slice at a time, so a partly stored object
/// fetches only what it lacks. Every slice must carry the validator of the first one used
/// (RFC 9111 §3.4: only parts of one representation combine); one that does not shows the
/// object changed, and every slice of it is dropped.
extension ClientConnection {
    /// Starts a sliced answer when nothing whole is stored: for a GET with Range (the slice
    /// holding it is fetched with a Range upstream), or a request without one whose first
    /// slice may be stored (if it is not, ``pumpSlices(_:)`` forwards the request as usual).
    /// Returns false when the request is forwarded as usual.
    /// `cachedOnly`: offline or only-if-cached, so no slice may be fetched.
    func beginsSlices(_ exchange: Exchange, cachedOnly: Bool = false) -> Bool {
        let method = exchange.head.method
        let headers = exchange.head.headers
        let size = exchange.runtime.config.cache.sliceSize
        // A digest covers the whole body: its slices could not be checked one by one. A GET
        // with content is answered by a fetch of its own (its Range goes with it).
        guard size > 0, exchange.route?.digest == nil, !sendsOwnContent(exchange), proxy.cache.maxDiskObjectBytes != nil,
            method == .get || method == .head,
            let key = exchange.key,
            !exchange.goAlone, exchange.range != .passed, exchange.variant == nil, !exchange.directives.noStore,
            !exchange.directives.noCache, !headers.contains(.authorization)
        else { return false }
        if !isRanged(exchange) {
            // Only an object whose first slice is stored (an index probe: a plain miss costs no
            // more), and not while a fill of the whole object is in flight on any loop: that
            // one is joined (it writes the slices).
            guard proxy.cache.mayHoldSlices, proxy.cache.holds(key.slice(0)) else { return false }
            guard cachedOnly || !proxy.coalescer.isFetched(FillKey(method: "GET", key: key, bodyHash: nil)) else { return false }
        }
        exchange.slices = SlicePlan(
            size: size, firstByte: isRanged(exchange) ? SlicePlan.firstByte(ofRange: headers["Range"]) : 0, cachedOnly: cachedOnly)
        exchange.take(.slicesBegun)
        exchange.outcome = .diskHit
        if pumpSlices(exchange) { flushSoon() }
        return true
    }

    private func isRanged(_ exchange: Exchange) -> Bool {
        exchange.head.method == .get && exchange.head.headers.contains(.range)
    }

    /// Moves a sliced answer on: reads the slice fill it is attached to, else queues stored
    /// slices while the output has room, else starts the next slice's fill. Returns whether
    /// anything changed (the caller flushes).
    @discardableResult
    func pumpSlices(_ exchange: Exchange) -> Bool {
        if let fill = exchange.fill { return readSliceFill(fill, exchange: exchange) }
        // A slice being checked on the reader thread, or sent from disk block by block: its
        // answer, or its last block, resumes the walk.
        guard !exchange.sliceCheckPending, exchange.diskBody == nil, !exchange.waitsForShare else { return false }
        var progressed = false
        while self.exchange === exchange, exchange.fill == nil, exchange.diskBody == nil, let plan = exchange.slices,
            let key = exchange.key
        {
            if plan.stage == .complete {
                endSlices(exchange)
                return true
            }
            guard outputHasRoom else { return progressed }
            let index = plan.sliceIndex
            let checked = exchange.takeCheckedEntry()
            switch proxy.cache.lookup(key.slice(index), request: exchange.head.headers, checked: checked) {
            case .pending(let name):
                proxy.pipeline.waitForVerification(of: name, key: key.slice(index), on: self)
                return progressed
            case .miss:
                if plan.stage == .locating, index != 0, proxy.cache.holds(key.slice(0)) {
                    // The first slice tells the length: the range may be past the end, or
                    // a suffix; no fetch before that is known.
                    exchange.slices?.look(at: 0)
                    continue
                }
                if plan.cachedOnly {
                    if plan.stage == .locating {
                        exchange.slices = nil
                        respondNotCached(exchange)
                    } else {
                        failSlices(
                            exchange, status: 504, reason: "slice \(index) is not in the cache, and it may not be fetched", cause: .uncached
                        )
                    }
                } else if plan.stage == .locating && !isRanged(exchange) {
                    forwardWhole(exchange)
                } else {
                    fetchSlice(index, validating: nil, exchange: exchange)
                }
                return true
            case .found(let stored, let fromDisk):
                progressed = true
                // Read back from the stored head once: the range here, the validator in useSlice.
                let headers = stored.headers
                guard stored.status == 206, let range = headers["Content-Range"].flatMap(ContentRange.init),
                    StoragePlan.hasSliceValidator(headers), plan.isSlice(index, range)
                else {
                    // Not a slice after all, one without a strong validator (never combined), or
                    // one cut under another `cache.slice_size`: forgotten, so the next look misses.
                    proxy.cache.purge(key.slice(index))
                    continue
                }
                let now = Clocks.wallSeconds()
                let decision = CacheDecision.decide(
                    stored: stored, request: exchange.directives, policy: exchange.policy, ttl: exchange.route?.ttl?.totalSeconds,
                    negativeTTL: exchange.runtime.negativeTTL, now: now,
                    offline: exchange.runtime.config.cache.offline)
                switch decision {
                case .serve, .serveStale:
                    break
                case .revalidate, .forward:
                    if plan.cachedOnly {
                        failSlices(
                            exchange, status: 504, reason: "slice \(index) is not fresh, and it may not be fetched", cause: .uncached)
                    } else if exchange.head.method == .head {
                        forwardWhole(exchange)
                    } else {
                        fetchSlice(index, validating: stored.hasValidator ? stored : nil, exchange: exchange)
                    }
                    return true
                case .unsatisfiable:
                    failSlices(exchange, status: 504, reason: "slice \(index) is not in the cache (only-if-cached)", cause: .uncached)
                    return true
                }
                if plan.stage == .locating {
                    var status = CacheStatus()
                    status.hit = true
                    status.ttl = Int((stored.freshnessLifetime - stored.currentAge(now: now)).rounded(.down))
                    // As a whole object's hit says `disk` when that tier held it.
                    status.detail = fromDisk ? "disk-slices" : "slices"
                    exchange.cacheStatus = status
                }
                guard let needed = useSlice(.part(range), headers: headers, age: stored.currentAge(now: now), exchange: exchange)
                else { continue }
                queueSlicePart(stored, offset: needed.offset, count: needed.count, exchange: exchange)
                exchange.slices?.sent(needed.count)
            }
        }
        return progressed
    }

    /// Takes an answer to a slice request (stored or arriving) into the client's answer: the
    /// first one decides the head; later ones must belong to the same object
    /// (``SlicePlan/take(_:validator:resolve:)`` decides). Returns the part of it to send, or
    /// nil when none (the answer ended, went another way, or needs another slice or request first).
    private func useSlice(_ reply: SlicePlan.Reply, headers: HTTPHeaders, age: Double?, exchange: Exchange) -> SlicePlan.Part? {
        guard var plan = exchange.slices else { return nil }
        let request = exchange.head.headers
        let isGet = exchange.head.method == .get
        let asked = plan.sliceIndex
        let take = plan.take(reply, validator: SlicePlan.validator(of: headers)) { length in
            isGet ? RangeRequest.resolve(request: request, length: length, responseHeaders: headers) : .full
        }
        switch take {
        case .located(let answer, let part):
            exchange.slices = plan
            var fields = headers
            fields.remove("Content-Range")
            if Preconditions.notModified(request: request, status: 200, responseHeaders: fields) {
                exchange.status = 304
                queueNotModified(headers: fields, age: age, exchange: exchange)
                exchange.take(.sliceHeadQueued)
                endSlices(exchange)
                return nil
            }
            if !noteSlicesHeld(plan, anchor: asked, exchange: exchange), plan.cachedOnly {
                // Better a 504 now than a head followed by a body cut short.
                exchange.slices = nil
                respondNotCached(exchange)
                return nil
            }
            queueSliceHead(answer, headers: fields, age: age, exchange: exchange)
            if exchange.head.method == .head || plan.stage == .complete {
                endSlices(exchange)
                return nil
            }
            return part
        case .serve(let part):
            return part
        case .ordinary:
            // The whole object (an origin that ignores ranges, or one that fits a slice), or an
            // error: an ordinary fill's response from here, the client's Range cut from it.
            guard exchange.fill != nil else {
                failSlices(exchange, status: 502, reason: "a stored slice is not one range of its object")
                return nil
            }
            exchange.slices = nil
            exchange.range = isRanged(exchange) ? .stripped : .none
            exchange.take(.sliceFillWhole)
            pumpFill()
            return nil
        case .pass:
            passSlices(exchange)
            return nil
        case .changed:
            var length = plan.length
            if case .part(let range) = reply { length = max(length, range.length) }
            dropSlices(of: exchange, length: length, keeping: nil)
            failSlices(exchange, status: 502, reason: "the object changed between its slices (validator or length)")
            return nil
        case .askAgain:
            // The caller leaves the fill and the walk asks for the rest of the slice.
            return nil
        case .cut(let reason):
            failSlices(exchange, status: 502, reason: reason)
            return nil
        }
    }

    /// Nothing is sent yet and the origin's answer to a slice request cannot be used (not the
    /// bytes asked for, or several ranges): the client's request goes upstream as it came, and
    /// the origin's answer to it is the client's, never stored as a slice (RFC 9110 §14.2).
    private func passSlices(_ exchange: Exchange) {
        guard let url = exchange.url, let key = exchange.key else { return }
        if let fill = exchange.fill { leaveSliceFill(fill, exchange: exchange) }
        exchange.slices = nil
        exchange.outcome = .miss
        if isRanged(exchange) { exchange.range = .passed }
        if exchange.cacheStatus.hit { exchange.cacheStatus = .forwarded(.uriMiss) }
        // What the slice fill stored (a capped slice's first part) is not this answer.
        exchange.cacheStatus.stored = false
        exchange.cacheStatus.collapsed = false
        forward(url, key: key, exchange: exchange)
    }

    /// Reads the slice fill the answer is attached to: checks its head once, then streams the
    /// client's part of it; at the part's end the fill is left and the next slice follows.
    @discardableResult
    private func readSliceFill(_ fill: Fill, exchange: Exchange) -> Bool {
        exchange.attempts = fill.attempts
        guard let start = exchange.attachment?.position, let end = exchange.attachment?.sliceEnd else {
            return checkSliceFill(fill, exchange: exchange)
        }
        let position = queueFillBody(fill, from: start, to: end, exchange: exchange)
        guard exchange.fill === fill else { return true }  // ended at bytes that are gone
        let progressed = position > start
        if progressed {
            exchange.slices?.sent(position - start)
            exchange.attachment?.position = position
            fill.reader(self, advancedTo: position)
        }
        if position >= end {
            leaveSliceFill(fill, exchange: exchange)
            pumpSlices(exchange)
            return true
        }
        // Its part may start past where the transfer ended (a slice taken from a whole answer).
        if position >= fill.received, let outcome = fill.outcome {
            let reason: String
            var cause = FailureCause.truncated
            if case .failure(let error) = outcome {
                reason = "\(error)"
                cause = FailureCause(error)
            } else {
                reason = "the slice ended after \(position) bytes"
            }
            failSlices(exchange, status: 502, reason: reason, cause: cause)
            return true
        }
        return progressed
    }

    /// A slice fill's first news: a stored response standing in (304-refreshed, or stale on an
    /// error), a failure, or its head.
    private func checkSliceFill(_ fill: Fill, exchange: Exchange) -> Bool {
        if let stored = fill.refreshedAnswer(for: self) ?? fill.staleAnswer {
            if fill.refreshed == nil { exchange.staleBecause = fill.staleCause }
            leaveSliceFill(fill, exchange: exchange)
            let headers = stored.headers
            if let range = headers["Content-Range"].flatMap(ContentRange.init),
                let needed = useSlice(.part(range), headers: headers, age: stored.currentAge(now: Clocks.wallSeconds()), exchange: exchange)
            {
                queueSlicePart(stored, offset: needed.offset, count: needed.count, exchange: exchange)
                exchange.slices?.sent(needed.count)
            }
            pumpSlices(exchange)
            return true
        }
        guard let head = fill.head else {
            guard case .failure(let error)? = fill.outcome else { return false }
            leaveSliceFill(fill, exchange: exchange)
            if exchange.headSent {
                failSlices(exchange, status: 502, reason: "\(error)", cause: FailureCause(error))
            } else {
                exchange.slices = nil
                respondUpstreamFailure(error, exchange: exchange)
            }
            return true
        }
        let reply = SlicePlan.Reply(status: head.status, headers: head.headers, bodyLength: fill.contentLength)
        if case .part(let range) = reply {
            if fill.willStore && !exchange.headSent { exchange.cacheStatus.stored = true }
            if let plan = exchange.slices, plan.stage == .locating, let old = fill.options.validating,
                SlicePlan.validator(of: old.headers) != SlicePlan.validator(of: head.headers)
            {
                // A stale slice came back as another object: the other slices are of the old one.
                let oldLength = old.headers["Content-Range"].flatMap(ContentRange.init)?.length ?? 0
                dropSlices(of: exchange, length: max(oldLength, range.length), keeping: range.first / plan.size)
            }
        }
        guard let needed = useSlice(reply, headers: head.headers, age: nil, exchange: exchange) else {
            // Unless the answer went another way (an ordinary fill's, or upstream again).
            if self.exchange === exchange, exchange.isSliced, exchange.fill === fill {
                leaveSliceFill(fill, exchange: exchange)
                pumpSlices(exchange)
            }
            return true
        }
        exchange.attachment?.position = needed.offset
        exchange.attachment?.sliceEnd = needed.offset + needed.count
        fill.reader(self, advancedTo: needed.offset)
        readSliceFill(fill, exchange: exchange)
        return true
    }

    private func leaveSliceFill(_ fill: Fill, exchange: Exchange) {
        exchange.take(.sliceFillLeft(alone: false))
        fill.detach(self)
    }

    /// Starts (or joins) the fill of slice `index`: a GET with the slice's Range, conditional
    /// on a stale copy's validators when there is one; or, after an answer that held only
    /// part of what the client needs of it, a request of its own for the rest (bounded by
    /// ``SlicePlan/maxRequestsPerSlice``).
    private func fetchSlice(_ index: Int, validating: StoredResponse?, exchange: Exchange) {
        guard let url = exchange.url, let key = exchange.key, var plan = exchange.slices else { return }
        let resumes = plan.resumes(index)
        // The rest of a slice is this answer's alone: no other request for the slice wants it.
        let coalesceKey = exchange.goAlone || resumes ? nil : FillKey(method: "GET", key: key.slice(index), bodyHash: nil)
        if let (share, why) = shareToWaitFor(url, coalesceKey: coalesceKey, exchange: exchange),
            waitForShare(share, why: why, exchange: exchange)
        {
            return
        }
        guard let range = plan.ask(for: index) else {
            failSlices(
                exchange, status: 502,
                reason: "the origin sent slice \(index) in more than \(SlicePlan.maxRequestsPerSlice) parts; no more are asked for")
            return
        }
        exchange.slices = plan
        exchange.outcome = .miss
        if !exchange.headSent, validating != nil || exchange.cacheStatus.hit {
            exchange.cacheStatus = .forwarded(validating != nil ? .stale : .uriMiss)
        }
        joinFill(coalesceKey, exchange: exchange) { registeredKey in
            var head = exchange.head
            for name in ["Range", "If-Range", "If-None-Match", "If-Modified-Since"] { head.headers.remove(name) }
            head.headers.add("Range", range)
            let runtime = exchange.runtime
            let request = upstreamRequest(
                url: url, head: head, runtime: runtime, route: exchange.route, body: nil, validating: validating, stripRange: false)
            let options = fillOptions(for: exchange, url: url, validating: validating)
            options.fallback = validating
            options.slice = (index, plan.size)
            if plan.stage == .sending, let validator = plan.validator { options.sliceObject = (validator, plan.length) }
            return Fill(
                key: key, coalesceKey: registeredKey, request: request, requestHeaders: exchange.head.headers, dedupAlways: false,
                options: options, settings: runtime.fill, proxy: proxy)
        }
    }

    /// No slice stored for a request without Range: an ordinary miss.
    private func forwardWhole(_ exchange: Exchange) {
        guard let url = exchange.url, let key = exchange.key else { return }
        exchange.slices = nil
        exchange.outcome = .miss
        if exchange.cacheStatus.hit { exchange.cacheStatus = .forwarded(.uriMiss) }
        forward(url, key: key, exchange: exchange)
    }

    /// Cache-Status for the answer's head (RFC 9211): a hit only when every slice it needs is
    /// stored; `fwd=partial` when some are and others are fetched.
    /// Returns whether every slice the answer needs is stored.
    private func noteSlicesHeld(_ plan: SlicePlan, anchor: Int, exchange: Exchange) -> Bool {
        guard plan.stage == .sending, let key = exchange.key else { return true }
        let needed = plan.sliceIndex...(plan.last / plan.size)
        // The length is the origin's word (up to 18 digits): slices are stored only for an
        // object within disk.max_object_bytes, so past it none is looked for.
        let held =
            Int64(plan.length) <= exchange.runtime.config.disk.maxObjectBytes
            ? needed.filter { $0 == anchor ? exchange.cacheStatus.hit : proxy.cache.holds(key.slice($0)) }.count
            : (exchange.cacheStatus.hit ? 1 : 0)
        if held == needed.count { return true }
        if held > 0 || exchange.cacheStatus.hit {
            let stored = exchange.cacheStatus.stored
            exchange.cacheStatus = .forwarded(.partial)
            exchange.cacheStatus.stored = stored
        }
        return false
    }

    /// Queues the head of a sliced answer (fields of the first slice used, less its
    /// Content-Range): 200 with the whole length, 206 with the client's range, or 416.
    private func queueSliceHead(_ answer: SlicePlan.Answer, headers: HTTPHeaders, age: Double?, exchange: Exchange) {
        exchange.take(.sliceHeadQueued)
        let status: Int
        let count: Int
        var contentRange: String?
        switch answer {
        case .unsatisfiable(let length):
            exchange.status = 416
            queueRangeNotSatisfiable(length: length, headers: headers, exchange: exchange)
            return
        case .whole(let length):
            status = 200
            count = length
        case .partial(let first, let last, let length):
            status = 206
            count = last - first + 1
            contentRange = ContentRange(first: first, last: last, length: length).fieldValue
        }
        if !exchange.cacheStatus.hit { exchange.cacheStatus.detail = "slices" }
        var head = ResponseHeadWriter(status: status, capacity: 512)
        head.fields(headers)
        if let contentRange { head.field("Content-Range", contentRange) }
        head.via()
        if let age { head.field("Age", String(max(0, Int(age)))) }
        head.cacheStatus(exchange.cacheStatus)
        queueHead(head, length: count, exchange: exchange)
        exchange.status = status
        exchange.framing = exchange.head.method == .head ? .none : .length(count)
    }

    /// Queues `count` bytes of a stored slice from `offset` on, framed here as the head
    /// announced (``BodyFrame``).
    private func queueSlicePart(_ stored: StoredResponse, offset: Int, count: Int, exchange: Exchange) {
        if case .file = stored.body {
            // From the disk tier: sent as its blocks are checked, then the walk goes on.
            startDiskBody(stored, first: offset, count: count, exchange: exchange)
            return
        }
        switch stored.body {
        case .memory(let bytes): sendBodyPart(bytes, from: offset, count: count, exchange: exchange)
        case .memoryFile(let file, _): sendBodyPart(file: file, offset: offset, count: count, exchange: exchange)
        case .file: break
        }
        proxy.telemetry.stats[.bytesFromCache].add(count)
    }

    /// Every byte of the answer is queued.
    private func endSlices(_ exchange: Exchange) {
        exchange.slices = nil
        finishExchange()
        flushSoon()
    }

    /// The answer cannot go on: before its head, a generated error; after it, the connection
    /// closes with the body incomplete (RFC 9112 §8), the only honest signal left.
    /// `cause`: the access log's; by default an origin's answer unlike what was asked.
    func failSlices(_ exchange: Exchange, status: Int, reason: String, cause: FailureCause = .framing) {
        proxy.logger.warning(
            "sliced answer failed", metadata: ["url": "\(proxy.loggable(exchange.key?.url ?? "-"))", "reason": "\(reason)"])
        if let fill = exchange.fill { leaveSliceFill(fill, exchange: exchange) }
        exchange.slices = nil
        guard exchange.headSent else {
            exchange.cacheStatus.detail = reason
            respondGenerated(status: status, message: "Larder: \(reason)", outcome: .error, cause: cause)
            return
        }
        exchange.failure = cause
        endIncomplete(exchange)
        flushSoon()
    }

    /// Forgets every slice of the object (and any whole copy), but `keeping`: the object
    /// changed, so no two of them may be combined again.
    private func dropSlices(of exchange: Exchange, length: Int, keeping: Int?) {
        guard let key = exchange.key, let size = exchange.slices?.size else { return }
        // The length is the origin's word (up to 18 digits): only slices of an object within
        // disk.max_object_bytes are ever stored, so none lies past it.
        let stored = min(Int64(length), exchange.runtime.config.disk.maxObjectBytes)
        let count = Int((stored + Int64(size) - 1) / Int64(size))
        // Found through the tiers' tables of slices; by number only while the start-up scan
        // has not indexed them all.
        proxy.cache.invalidateObject(key, keepingSlice: keeping)
        if !proxy.cache.isIndexComplete {
            for index in 0..<count where index != keeping { proxy.cache.purge(key.slice(index)) }
        }
        proxy.telemetry.stats[.invalidations].add(count)
        proxy.logger.notice(
            "dropped the slices of a changed object", metadata: ["key": "\(proxy.loggable(key.url))", "slices": "\(count)"])
    }
}
