import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderTLS
import LarderUpstream

/// One upstream fetch and the response received so far, read by every client that asked for
/// it while it was in flight, each at its own position (read-while-writer).
///
/// The coordinator of three parts, one job each: the ``UpstreamFetch`` (the request and its
/// attempts), the ``FillBuffer`` (the body as its readers take it) and the ``StoreSink`` (where
/// the storage plan puts the response). The fill is the transfer's delegate and decides what
/// a response head means for the readers: a 304 refresh, a stale answer, shared or not.
///
/// State: loop-confined to the loop that runs the transfer; readers are on the same loop.
final class Fill: UpstreamTransferDelegate {
    let key: CacheKey
    /// The coalescing key when other requests may attach.
    let coalesceKey: FillKey?
    let method: HTTPMethod
    /// Whether the request carries a body (kept to send again only when buffered).
    let sendsBody: Bool
    /// The headers of the request the fill was made for (Vary and Authorization checks).
    let requestHeaders: HTTPHeaders
    let dedupAlways: Bool
    var options: FillOptions
    /// Strong; the coalescer's reference to the fill goes when the fill ends.
    let proxy: ProxyLoop
    /// The request and its attempts.
    var fetch: UpstreamFetch
    /// The body and its readers.
    var buffer = FillBuffer()
    /// The transfer running now, if any.
    var transfer: (any UpstreamTransferControl)? { fetch.transfer }
    weak var bodySource: (any RequestBodySource)?
    /// A request body the fill owns (buffered for `dedup = "always"`), kept alive here.
    var ownedBodySource: (any RequestBodySource)? {
        didSet { bodySource = ownedBodySource }
    }

    /// The response head as it will be forwarded (hop-by-hop fields and framing removed).
    var head: ResponseHead?
    /// The body length that frames this response's body, if the origin gave one.
    var contentLength: Int?
    /// The Content-Length the origin sent, even where no body follows (HEAD, 304).
    var announcedLength: Int?
    /// Where the response is stored, opened from the storage plan when the head arrived.
    var sink = StoreSink()
    /// Whether the response goes to a cache tier when complete.
    var willStore: Bool { sink.stores }
    /// Whether other clients may receive this response.
    var shareable = true
    /// Set once the transfer ended.
    private(set) var outcome: Result<Void, UpstreamError>?
    /// Body bytes received so far.
    var received: Int { buffer.received }
    /// A 304 answered the validation: the stored response, refreshed, is the answer.
    var refreshed: StoredResponse?
    /// A 304 that was its own client's only for its cookie (``ResponseAdmission/retimesStored``):
    /// the entry as it now stands, retimed, is every other reader's answer, as it is the next
    /// request's (``refreshedAnswer(for:)``).
    var refreshedForJoiners: StoredResponse?
    /// The origin failed and a stale stored response answers instead (stale-if-error).
    private(set) var staleAnswer: StoredResponse?
    /// How the origin failed when ``staleAnswer`` stands in: the access log's `detail` for it.
    private(set) var staleCause: FailureCause?
    /// The status the origin answered a validation or failing request with (Cache-Status
    /// fwd-status).
    var upstreamStatus: Int?
    let requestTime: Double
    /// When the fetch began, for the stores it makes: a purge or ban since keeps them out
    /// (``InvalidationLog``).
    let stamp: InvalidationLog.Stamp
    private(set) var responseTime = 0.0
    /// Attempts made so far (1 once started).
    var attempts: Int { fetch.attempts }
    /// Each retry: why, and the delay before it (for the access log).
    var retryLog: [(reason: String, delayMillis: Int)] { fetch.retryLog }
    /// See ``diskCopyFailed()``.
    private(set) var diskCopyDamaged = false
    var notifyScheduled = false
    /// The client's share of the origin's connections this fill counts against
    /// (``UpstreamShares``), given back when its transfer ends.
    var share: UpstreamShares.Key?
    /// The share of a transfer cut to free its connection (``giveUpConnection(_:)``): whose
    /// request it was, once ``share`` is given back.
    private(set) var cutShare: UpstreamShares.Key?
    /// How the body comes in while no client reads it (every client left, or a background
    /// refresh): whether it is worth waiting for.
    private var unreadPace: UnreadBodyPace?
    /// The origin of a transfer paused for its readers, listed as holding its connection
    /// (``HeldTransfers``).
    private var heldTarget: Int?
    /// Request body bytes handed to the transfer (an upload uses its connection too).
    private(set) var requestBodySent = 0
    /// When the fill began (the loop's clock): a transfer running longer than
    /// ``HeldTransfers/holdLimit`` may be cut for a client that waits (``HeldTransfers/overShare(_:fewest:now:held:anyRate:)``).
    let began: UInt64
    /// The transfer ended (``end()``): the next pass releases the key, after the sink stored the
    /// body. Until then the coalescer offers this fill to no one (``hasEnded``).
    private var releasesKey = false
    /// Whether the transfer ended (finished, failed, cancelled or answered from a stale copy).
    var hasEnded: Bool { outcome != nil }
    /// An operator purged or banned the key since this fill began: what it fetches is what
    /// they removed, for the readers it has, not for requests that come after.
    var wasInvalidated: Bool { !proxy.cache.isCurrent(key, since: stamp) }
    /// Readers released whose (deferred) news has not reached them, by identity.
    private var releasing: [ObjectIdentifier] = []
    /// The configuration's values for fills, as they were when this one started.
    let settings: FillSettings
    /// The doorkeeper kept this storable response out (`Cache-Status: ...; detail=admission-deferred`).
    var admissionDeferred = false
    /// What the buffer needs of the sink.
    var backing: FillBuffer.Backing {
        FillBuffer.Backing(keepsWhole: sink.keepsWhole, diskWrite: sink.diskWrite, slicedWrite: sink.slicedWrite)
    }
    /// What this fill may hold for the disk thread now (``FillBuffer/writeBacklog(streams:)``).
    private var writeBacklog: Int {
        FillBuffer.writeBacklog(streams: countsAsDiskStream ? proxy.process.diskStreams.load() : 1)
    }
    /// Counted in ``ProcessState/diskStreams`` (from its first chunk streamed to disk until
    /// it goes).
    private var countsAsDiskStream = false
    /// The stored head, when clients of this fill are sent it too.
    var preparedClientHead: StoredResponse.PreparedHead? { sink.preparedClientHead }
    var backlogTimer: EventLoop.TimerToken?
    /// Where the check of the body against its URL's digest stands (`digest` routes).
    var digestCheck = DigestCheck.none
    enum DigestCheck {
        case none
        /// Hashing as the body streams in.
        case pending(BodyDigest)
        case matched, mismatched
    }
    /// Whether readers are kept from the head until the digest is checked: a body kept whole
    /// is checked before anything is sent, so a mismatch is a clean 502.
    var digestHoldsHead = false

    init(
        key: CacheKey, coalesceKey: FillKey?, request: consuming UpstreamRequest, requestHeaders: HTTPHeaders,
        dedupAlways: Bool, options: FillOptions, settings: FillSettings, proxy: ProxyLoop,
        starter: (any UpstreamStarting)? = nil
    ) {
        self.key = key
        self.coalesceKey = coalesceKey
        method = request.method
        sendsBody = request.body != nil
        self.requestHeaders = requestHeaders
        self.dedupAlways = dedupAlways
        self.options = options
        self.proxy = proxy
        fetch = UpstreamFetch(request: consume request, parents: options.parents, starter: starter ?? proxy.upstream)
        requestTime = Clocks.wallSeconds()
        began = proxy.loop.now
        stamp = proxy.cache.storeStamp()
        self.settings = settings
    }

    /// Starts the upstream transfer, with the reader it was made for (nil: none waits on it);
    /// with nothing received yet, the reader hears of the fill with the head.
    func start(firstReader: (any FillReader)?, requestHeaders: HTTPHeaders) {
        if let firstReader {
            buffer.readers.append(FillBuffer.Reader(reader: firstReader, position: 0, requestHeaders: requestHeaders, isOwn: true))
        }
        proxy.telemetry.stats[.fillsStarted].add(1)
        proxy.forwarding.retryBudget.recordRequest()
        attempt()
    }

    func attempt() {
        proxy.telemetry.stats[.upstreamRequests].add(1)
        if let parent = fetch.currentParent { proxy.forwarding.parentHealth.recordAttempt(parent) }
        fetch.send(delegate: self)
    }

    /// The fetch's step for what the transfer reported, with what it reads of this fill.
    func step(_ event: UpstreamFetch.Event) -> UpstreamFetch.Step {
        fetch.step(
            on: event, options: options, canResend: canResend, settings: settings, now: Clocks.wallSeconds(),
            random: Double.random(in: 0..<1), spendRetry: spendRetryBudget)
    }

    // MARK: Readers

    /// The disk file behind the bytes dropped from memory failed a block's check (or can no
    /// longer be read): those bytes are gone for good. No new reader may join (it would need
    /// them), and the key is no longer this fill's, so the next request goes its own way (for
    /// an object stored as slices, the slice walk fetches the dropped slice again) instead of
    /// stopping where the damage is. The transfer goes on for the readers it has.
    func diskCopyFailed() {
        guard !diskCopyDamaged else { return }
        diskCopyDamaged = true
        proxy.coalescer.remove(self)
    }

    /// Removes a reader. When the last one leaves an unfinished fill, it is completed anyway if
    /// it is cacheable and small enough to be worth it, or has its whole body already, and
    /// cancelled otherwise.
    func detach(_ reader: any FillReader) {
        buffer.readers.removeAll { $0.reader === reader }
        if buffer.readers.isEmpty, outcome == nil, !hasWholeBody, !worthFinishingAlone {
            cancel(reason: "every client left")
        } else {
            trimAndResume()
        }
    }

    /// Removes `reader` if it is still listed: it answered a pass that it left.
    private func readerLeft(_ reader: any FillReader) {
        if buffer.readers.contains(where: { $0.reader === reader }) { detach(reader) }
    }

    /// Every byte of a declared length has arrived and only the transfer's end is to come:
    /// where the response is stored. The last client leaving then cancels nothing.
    var hasWholeBody: Bool {
        guard let contentLength else { return false }
        return received >= contentLength
    }

    var worthFinishingAlone: Bool { worthFinishingAlone(storing: willStore) }

    /// Whether the fill goes on for the cache with no reader left, `storing` or not.
    private func worthFinishingAlone(storing: Bool) -> Bool {
        guard method == .get, coalesceKey != nil || options.background, shareable else { return false }
        guard let head else { return true }  // decided again when the head arrives
        guard storing, head.status == 200 || head.status == 203 || (head.status == 206 && options.slice != nil) else { return false }
        // The cache's own refresh of what it holds had no client to leave: its size is the
        // stored object's, its time bounded by UnreadBodyPace.
        if options.background { return true }
        if let contentLength { return contentLength - received <= settings.finishAbandonedMax }
        return received <= settings.finishAbandonedMax
    }

    func cancel(reason: String) {
        giveShareBack()
        fetch.stop(on: proxy.loop)
        outcome = .failure(UpstreamError(kind: .aborted, message: reason, afterHead: head != nil))
        sink.abort()
        proxy.coalescer.remove(self)
    }

    func release(at index: Int, reason: FillRelease) {
        let entry = buffer.readers.remove(at: index)
        proxy.telemetry.stats[.waitersReleased].add(1)
        let reader = entry.reader
        let released = ObjectIdentifier(reader)
        releasing.append(released)
        proxy.loop.enqueueDeferred { [self] in
            if let index = releasing.firstIndex(of: released) { releasing.remove(at: index) }
            reader.fillReleased(self, reason: reason)
        }
    }

    /// Whether `reader` was released and has not been told yet: until it is, it takes nothing
    /// from this fill (a response it may not have, another variant or another client's own).
    func isReleasing(_ reader: any FillReader) -> Bool {
        !releasing.isEmpty && releasing.contains(ObjectIdentifier(reader))
    }

    /// Drops what no reader needs from memory, then resumes a paused transfer.
    func trimAndResume() {
        // Read before the buffer is: an argument read from the fill while the buffer is being
        // accessed makes the compiler copy the whole buffer first.
        let backing = backing
        buffer.trim(backing)
        if buffer.paused, !buffer.mustPause(backing, writeBacklog: writeBacklog) {
            buffer.paused = false
            if heldTarget != nil { stopHolding() }
            transfer?.resumeReceiving()
        }
    }

    /// The transfer paused for its readers keeps its connection: listed, so that while other
    /// requests wait for its origin, the loop's look at them cuts it once it has waited
    /// ``HeldTransfers/holdLimit`` (``ProxyLoop/yieldConnection(to:)``).
    private func holdConnection(_ share: UpstreamShares.Key) {
        guard heldTarget == nil else { return }
        heldTarget = share.target
        proxy.heldTransfers.paused(self, share: share, now: proxy.loop.now)
    }

    /// The bytes of the body the slowest reader's client has really received (the reader
    /// the transfer is paused for), or nil when it cannot tell (``FillReader/delivered(upTo:)``).
    func slowestDelivered() -> Int? {
        guard let slowest = buffer.readers.min(by: { $0.position < $1.position }) else { return nil }
        return slowest.reader.delivered(upTo: slowest.position)
    }

    /// The transfer no longer waits for its readers (resumed or ended).
    private func stopHolding() {
        if let target = heldTarget { proxy.heldTransfers.resumed(self, target: target) }
        heldTarget = nil
    }

    /// Cuts the transfer to free its connection for requests waiting for the origin
    /// (``HeldTransfers``): every reader's response ends incomplete, for `reason`
    /// (``FillRelease/heldConnection`` or ``FillRelease/overShare``).
    /// A revalidation cut before its head whose stale copy may answer on an error (RFC 5861
    /// §4, RFC 9111 §4.2.4) answers every reader from it instead: the cut is an error of
    /// Larder's making, and a stale answer beats a 504.
    func giveUpConnection(_ reason: FillRelease) {
        let why =
            if case .overShare = reason {
                "its client held more of the origin's connections than another client that waited for one"
            } else {
                "paused for its clients while other requests waited for its origin"
            }
        cutShare = share
        if head == nil, let fallback = options.staleAnswerForError(settings: settings, now: Clocks.wallSeconds()) {
            if let left = proxy.cutWarnings.allow(now: proxy.loop.now) {
                proxy.logger.warning(
                    "a revalidation is cut to share its origin's connections; its stale copy answers",
                    metadata: [
                        "client": "\(share?.clientAddress ?? "-")", "url": "\(proxy.loggable("\(key)"))", "why": "\(why)",
                        "not_logged_since_last": "\(left)",
                    ])
            }
            cancel(reason: why)
            standIn(fallback, cause: .limit)
            outcome = .success(())
            scheduleNotify()
            return
        }
        while let last = buffer.readers.indices.last { release(at: last, reason: reason) }
        cancel(reason: why)
    }

    /// The origin failed (or the transfer was cut) and the stale `fallback` answers instead
    /// (RFC 5861 §4), but not readers whose request selects another variant of it: they joined
    /// by URL, before any Vary was known (RFC 9111 §4.1), and are released to ask for their own.
    private func standIn(_ fallback: StoredResponse, cause: FailureCause) {
        releaseOtherVariants(of: fallback, vary: fallback.headers)
        staleAnswer = fallback
        staleCause = cause
        proxy.telemetry.stats[.staleServedOnError].add(1)
    }

    /// While paused for the disk thread, look again every few milliseconds: its progress does
    /// not wake the loop by itself.
    func watchWriteBacklog() {
        guard backlogTimer == nil, sink.diskWrite != nil || sink.slicedWrite != nil else { return }
        backlogTimer = proxy.loop.schedule(afterNanos: 5_000_000) { [weak self] in
            guard let self else { return }
            self.backlogTimer = nil
            self.trimAndResume()
            if self.buffer.paused { self.watchWriteBacklog() }
        }
    }

    func scheduleNotify() {
        guard !notifyScheduled else { return }
        notifyScheduled = true
        proxy.loop.enqueueDeferred { [self] in
            notifyScheduled = false
            // A reader may leave the fill from inside the call: iterating the array itself would
            // copy it on the first such change. One reader, the usual case, is called without
            // holding the array; several, each from a snapshot. Each answers with how far it got.
            // A reader that answers it left and is still listed (its response ended in the
            // pass) is removed here.
            if buffer.readers.count == 1 {
                let only = buffer.readers[0].reader
                if let position = only.fillDidProgress(self) {
                    buffer.move(only, to: position)
                    trimAndResume()
                } else {
                    readerLeft(only)
                }
            } else {
                for entry in buffer.readers {
                    if let position = entry.reader.fillDidProgress(self) {
                        buffer.move(entry.reader, to: position)
                    } else {
                        readerLeft(entry.reader)
                    }
                }
                trimAndResume()
            }
            if releasesKey {
                releasesKey = false
                proxy.coalescer.remove(self)
            }
        }
    }

    // MARK: UpstreamTransferDelegate

    /// RFC 9110 §15.2: interim responses go to the clients waiting (never stored). 100 Continue
    /// is Larder's own business with its client (the request's Expect is not forwarded); a 101
    /// ends the transfer before it gets here (``UpstreamTransfer/receiveHeaderLine(_:)``).
    /// An interim response (103 Early Hints: links, even cookies) comes before the final head
    /// says whether the answer may be shared, or with whom (Vary, `private`): it goes to the
    /// fill's own reader only, to none of a background refresh (RFC 8297 §2: optional).
    func upstreamDidReceiveInterim(_ head: ResponseHead) {
        guard head.status != 100, head.status != 101, self.head == nil else { return }
        for reader in buffer.readers where reader.isOwn { reader.reader.fillDidReceiveInterim(self, head: head) }
    }

    func upstreamDidReceiveHead(_ upstreamHead: consuming ResponseHead) {
        // A head is the parent's answer, whatever follows: it is up.
        if fetch.phase == .awaitingHead, let parent = fetch.currentParent { proxy.forwarding.parentHealth.recordSuccess(parent) }
        let status = upstreamHead.status
        let retryAfter = RetryPolicy.reason(forStatus: status) == nil ? nil : upstreamHead.headers["Retry-After"]
        switch step(.head(status: status, retryAfter: retryAfter)).action {
        case .accept(let failure?):
            proxy.telemetry.stats.countFinalFailure(failure == .status429 ? "429" : "5xx")
        case .accept(nil):
            break
        case let retried:
            // A retryable status is retried before anyone sees it (no byte has gone to a client).
            carryOut(retried)
            fetch.cancelTransfer()
            return
        }
        if status == 304, !fetch.validationRefused, let validating = options.validating, options.digest == nil,
            Self.namesAnotherRepresentation(upstreamHead.headers, than: validating)
        {
            // RFC 9111 §4.3.4: a 304 whose validator is not the stored response's updates
            // nothing (applied, it would put that ETag on the stored bytes, and every later
            // validation would confirm them as the other representation). The object is fetched
            // again without validators; its answer replaces the stored response as any fill's
            // would (a failure leaves it, for stale-if-error). Not sent again (no one waits, or
            // a body that cannot be replayed), the 304 is an ordinary answer: it updates nothing
            // and leaves the stored response as it was. (A digest route's bytes are checked
            // against their URL's digest, whatever a host calls them: its 304s freshen as before.)
            let resend = step(.validatorContradicted).action == .resendUnconditionally
            proxy.logger.info(
                "a 304 named another representation than the one validated: it updates nothing",
                metadata: ["url": "\(proxy.loggable(key.url))", "then": "\(resend ? "sent again without validators" : "not sent again")"])
            if resend {
                carryOut(.resendUnconditionally)
                fetch.cancelTransfer()
                return
            }
        }
        // The origin's framing, read before the hop-by-hop strip (a `Connection` naming it).
        // Checked by the parser: a head whose Content-Length is ambiguous never gets here.
        let announced = upstreamHead.declaredLength
        // Moved, not copied: the transfer keeps no reference, so the fields change in place.
        var forwarded = upstreamHead
        // Larder frames the body itself: Content-Length goes in the same pass.
        HopByHop.strip(&forwarded.headers, alsoRemoving: .contentLength)
        if let length = announced {
            announcedLength = length
            if !forwarded.hasNoBody(for: method) { contentLength = length }
        }
        if let digest = options.digest, method == .get, forwarded.status == 200 {
            // Checked against the digest, and then any host's answer for every host: only
            // fields that describe the bytes.
            ContentAddressedFields.restrict(&forwarded.headers, digest: "\(digest.algorithm.rawValue):\(digest.expected)")
        }
        var sliceRange: ContentRange?
        if options.slice != nil {
            sliceRange = SlicePlan.Reply.storableRange(of: &forwarded, contentLength: &contentLength)
        } else if options.rangePassed, settings.sliceSize > 0, options.digest == nil {
            sliceRange = SlicePlan.Reply.passedRange(of: forwarded, contentLength: contentLength)
        }
        responseTime = Clocks.wallSeconds()
        if !forwarded.headers.contains(.date) {
            // RFC 9110 §6.6.1: a recipient with a clock may add Date when the origin did not.
            forwarded.headers.add("Date", HTTPDate.format(Int(responseTime)))
        }
        head = forwarded
        let cacheControl = CacheControl(forwarded.headers)
        // The plan is consulted here; the sink it needs is opened last (a fill's sink stores
        // nothing until then), once the plan's other actions are carried out.
        let plan = proxy.cache.plan(
            admissionRequest(for: sliceRange != nil ? 200 : forwarded.status),
            answer: StoragePlan.Answer(
                head: forwarded, cacheControl: cacheControl, contentLength: contentLength, announcedLength: announcedLength,
                sliceRange: sliceRange),
            slicing: StoragePlan.Slicing(sliceFill: options.slice != nil, size: settings.sliceSize, rangeFill: options.rangePassed),
            key: key,
            policy: settings.admission, minBytes: settings.admissionMinBytes, now: responseTime)
        let admission = plan.admission
        if plan.action == .skip(.deferred) { admissionDeferred = true }
        if admission.invalidates { invalidate(forwarded) }
        if admission.checksDigest, let digest = options.digest { digestCheck = .pending(BodyDigest(digest.algorithm)) }
        switch plan.action {
        case .merge:
            // A digest entry may be revalidated through another host than filled it: that
            // host's 304 freshens it, but says nothing else about bytes it never sent.
            if options.digest != nil { ContentAddressedFields.restrictUpdate(&forwarded.headers) }
            refresh(
                options.validating!, with: forwarded, storing: admission.shareable && !admission.keepsStored,
                retiming: admission.retimesStored)
            // One client's 304 goes to no one else; the readers that joined it ask for their
            // own, unless it refreshed the entry (then that is their answer).
            if !admission.shareable, !admission.retimesStored { releaseAllButOwn() }
            return
        case .serveStale:
            // RFC 5861 §4: the origin erred; a stale copy is a better answer than its error.
            upstreamStatus = forwarded.status
            // An error status from the origin, not a failure to reach it.
            if let fallback = options.fallback { standIn(fallback, cause: .upstream) }
            cancel(reason: "answered from a stale copy")
            outcome = .success(())
            scheduleNotify()
            return
        case .updateFromHead, .outdateFromHead:
            updateStored(from: forwarded, matches: plan.action == .updateFromHead)
        case .whole, .streamed, .slices, .slice, .slicesWithin, .slicePart, .skip:
            break
        }
        // Only a body kept whole (the plan `whole`, whose sink always opens) is checked before
        // any byte goes out.
        if case .pending = digestCheck { digestHoldsHead = plan.action == .whole }
        share(forwarded, shareable: admission.shareable)
        // A new response that will not be stored outdates the validated one (a sink the disk
        // refuses does the same in `open`); a 304 that updated nothing
        // (``UpstreamFetch/validationRefused``) is no new response: the entry stays, for
        // stale-if-error and the next validation.
        if let validating = options.validating, plan.outdatesValidated(stored: plan.stores),
            !(forwarded.status == 304 && fetch.validationRefused)
        {
            proxy.cache.invalidate(validating)
        }
        if buffer.readers.isEmpty && !worthFinishingAlone(storing: plan.stores) {
            cancel(reason: "every client left")
            return
        }
        scheduleNotify()
        // Last: the head's work ends in the cache. A sink the disk tier refuses stores nothing,
        // and the first chunk's check cancels a fill that no one reads.
        guard plan.stores else { return }
        sink = proxy.cache.open(
            plan, head: forwarded, cacheControl: cacheControl,
            entry: StoreSink.Entry(
                key: key, url: options.storedURL, requestHeaders: requestHeaders, requestTime: requestTime,
                responseTime: responseTime, contentLength: contentLength, sliceIndex: options.slice?.index, sliceSize: settings.sliceSize,
                stamp: stamp, keepsSlices: keepsSlices(forwarded)),
            replacing: options.validating)
    }

    /// Whether a slice fill's 200 is the object the walk's slices belong to (the same strong
    /// ETag and length, RFC 9111 §3.4): stored slice by slice, it keeps those slices
    /// rather than dropping them first, so a transfer cut before it has written them again
    /// loses nothing the cache held.
    private func keepsSlices(_ forwarded: ResponseHead) -> Bool {
        // Only under a strong ETag: a Last-Modified of one-second resolution may name two
        // objects of one length, and what a cut left of each would be combined.
        guard forwarded.status == 200, let object = options.sliceObject, object.validator.hasPrefix("etag ") else { return false }
        return object.length == contentLength && object.validator == SlicePlan.validator(of: forwarded.headers)
    }

    /// Whether the body may be fetched whole for readers that asked for a range (stored, and
    /// small enough); otherwise they send their range upstream themselves.
    var servesRangesFromWhole: Bool {
        guard let head, head.status == 200, willStore else { return false }
        return (contentLength ?? Int.max) <= settings.rangeWholeMax
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard case .take = step(.body).action else { return false }
        // `finish_abandoned_max` bounds its bytes, this its time (UnreadBodyPace): an origin
        // trickling just above `upstream.min_rate` would keep the connection for days. Once
        // left unread, it is judged whenever no one reads it: a client that joins for a moment
        // now and then does not start the count again.
        if buffer.readers.isEmpty || unreadPace != nil {
            let now = proxy.loop.now
            var pace = unreadPace ?? UnreadBodyPace(now: now, received: buffer.received)
            let rest = contentLength.map { max(0, $0 - buffer.received) }
            let goesOn = pace.goesOn(
                now: now, received: buffer.received, rest: rest, cap: settings.finishAbandonedMax, timeout: fetch.request.timeoutNanos,
                judged: buffer.readers.isEmpty)
            unreadPace = pace
            if !goesOn {
                let why = "no client reads it, and at its recent rate the rest would take longer than twice upstream.timeout"
                proxy.logger.warning(
                    "a transfer is given up: \(why)", metadata: ["url": "\(proxy.loggable("\(key)"))", "received": "\(buffer.received)"])
                cancel(reason: why)
                return false
            }
        }
        if !countsAsDiskStream, !sink.keepsWhole, sink.diskWrite != nil || sink.slicedWrite != nil {
            countsAsDiskStream = true
            proxy.process.diskStreams.add(1)
        }
        let backing = backing
        // A body kept whole never pauses: asked only otherwise (the call copies the buffer).
        if !backing.keepsWhole, buffer.mustPause(backing, writeBacklog: writeBacklog) {
            // Without a disk copy (the body outgrew what is stored, or the disk failed) the
            // transfer would wait for its slowest reader, and every other reader with it: one
            // client that stops reading must not hold up the others it shares the fill with.
            for index in buffer.laggards(backing).reversed() { release(at: index, reason: .fellBehind) }
            if buffer.mustPause(backing, writeBacklog: writeBacklog) {
                buffer.paused = true
                watchWriteBacklog()
                if let share, buffer.waitsForReaders(backing) { holdConnection(share) }
                return false
            }
        }
        // Unknown length that outgrows what is kept whole: it streams to disk from here on,
        // decided once, before this chunk, which the sink then takes like any other.
        if backing.keepsWhole, buffer.received + bytes.count > sink.wholeLimit {
            sink.stopKeepingWhole(chunks: buffer.chunks)
            digestHoldsHead = false
        }
        let chunk = buffer.append(bytes)
        proxy.telemetry.stats[.bytesFromUpstream].add(bytes.count)
        if case .pending(let digest) = digestCheck { digest.update(bytes) }
        if buffer.readers.isEmpty, !worthFinishingAlone {
            // Taken first, so that a slice of a streamed response this chunk completes stays
            // stored (a capped part, cancelled, fails and drops its slice's assembly).
            sink.append(chunk)
            cancel(reason: "every client left and the rest is too large to fetch for nobody")
            return false
        }
        trimAndResume()
        scheduleNotify()
        // Last: the sink answers nothing the fill goes on with.
        sink.append(chunk)
        return true
    }

    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk {
        guard let bodySource else { return .abort }
        let chunk = bodySource.readRequestBody(into: buffer)
        if case .bytes(let count) = chunk { requestBodySent += count }
        return chunk
    }

    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) {
        let event: UpstreamFetch.Event
        switch result {
        case .success: event = .end
        case .failure(let error): event = .error(error)
        }
        let step = step(event)
        if let parent = step.parentDown, case .error(let error) = event {
            proxy.forwarding.parentUnreachable(parent, backoff: options.parentBackoff, error: "\(error)")
        }
        switch step.action {
        case .complete:
            if let contentLength, contentLength != received {
                outcome = .failure(
                    UpstreamError(kind: .truncated, message: "body ended after \(received) of \(contentLength) bytes", afterHead: true))
            } else if let mismatch = checkDigest() {
                outcome = .failure(mismatch)
            } else {
                outcome = .success(())
            }
            // Failed for good as much as an error from the transfer, and counted alike.
            if case .failure(let error)? = outcome { countFailure(error) }
        case .fail(let error):
            countFailure(error)
            outcome = .failure(error)
        case .answerStale(let cause):
            if case .error(let error) = event { countFailure(error) }
            if let fallback = options.fallback { standIn(fallback, cause: cause) }
            outcome = .success(())
        case .failOver, .resendOnFreshConnection, .resendUnconditionally, .retry:
            carryOut(step.action)
            return
        case .accept, .take, .ignore:
            return
        }
        end()
    }

    /// The fill's end once its transfer ended, in one place: the pass after the batch tells the
    /// readers and then releases the key (``releasesKey``), and the sink, last, stores the body
    /// or drops what it wrote (each way closes it). So with several loops the key is free only
    /// once the body is stored, and nothing here goes on after the sink returns.
    private func end() {
        giveShareBack()
        releasesKey = true
        scheduleNotify()
        if case .failure? = outcome {
            sink.abort()
        } else if staleAnswer != nil {
            sink.abandonStream()
        } else {
            sink.finish(chunks: buffer.chunks, received: received, queue: proxy.diskStores)
        }
    }

    // A fill dropped without its transfer's end (the loop stopping) must not leave its
    // client's share taken. Fills live and die on their loop.
    deinit {
        giveShareBack()
        if countsAsDiskStream { proxy.process.diskStreams.subtract(1) }
    }

    /// Gives the client's share back (once): the transfer no longer holds a connection.
    private func giveShareBack() {
        if heldTarget != nil { stopHolding() }
        guard let share else { return }
        self.share = nil
        proxy.giveShare(share)
    }

    /// A failure with no usable answer from upstream, stale copy or not.
    private func countFailure(_ error: UpstreamError) {
        proxy.telemetry.stats[.upstreamFailures].add(1)
        proxy.telemetry.stats.countFinalFailure(error.kind.rawValue)
    }
}
