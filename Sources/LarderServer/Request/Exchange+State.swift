import LarderCache

/// The exchange as a state machine, in the shape of Varnish's `cache_req_fsm.c`: each state
/// carries what only it needs, and a pure ``step(_:on:now:)`` (unit-tested on its own) gives
/// the next state and the ``Action`` the connection carries out. ``Exchange/take(_:now:)``
/// takes every step through it, so a step the design does not allow fails the debug build's
/// tests at the point it happens.
extension Exchange {
    /// Where an exchange is in its life, and what that stage alone needs. The two large
    /// payloads are boxed (`indirect`): every read of a payload copies the whole enum, so the
    /// enum is kept to two words, and those two states change once per block or slice.
    enum State {
        /// Target checks, authentication, route.
        case routing
        /// The request body is read whole before going on (`proxy.request_body_buffer`, or the
        /// body hash of a `dedup = "always"` key); `alone` as in `lookingUp`.
        case awaitingRequestBody(alone: Bool)
        /// The cache decision: serve what is stored, revalidate it, or forward. `checked`: what
        /// the reader thread's check found for this request (a sound entry is served as it is;
        /// after any, the lookup does not go back to it). `alone`:
        /// it must not attach to a shared fill (released from one, timed out waiting, or a
        /// body too large to key).
        case lookingUp(checked: DiskCache.Verification?, alone: Bool)
        /// A disk entry is being checked on the reader thread; the decision resumes after.
        case awaitingDisk
        /// Attached to an upstream fill (its own or a shared one), no response head queued yet;
        /// the attachment says when it attached (for coalesce.wait_timeout) and where it reads.
        case readingFill(FillAttachment)
        /// The fill's response head is queued; its body follows from the attachment's position.
        case responding(FillAttachment)
        /// A stored body from the disk tier is sent a checked block at a time; the exchange
        /// finishes with its last block.
        indirect case streamingDisk(DiskBodyStream)
        /// Answered otherwise than from the fill it left (a stored response in memory, a
        /// generated answer, or a body ended short): the finish follows.
        case answering
        /// Answered from an object's slices (`cache.slice_size`), one at a time, each from the
        /// tiers or a slice fill (``SlicePlan`` says where it is within).
        indirect case slicing(SliceProgress)
        /// The fill it would start next waits for its client's share of the origin's
        /// connections (``UpstreamShares``): nothing starts one meanwhile. `after`: the state
        /// the wait began in (looking up, or a slice walk), which it goes back to; `wait`: its
        /// place on the origin's list, taken off if the client leaves first.
        indirect case waitingForShare(after: State, wait: ShareWait)
        /// A CONNECT being set up (resolving, dialling, waiting for the hand-over).
        case tunnelling
        /// Every byte of the response queued, or the connection closed.
        case finished
    }

    /// A request's place among those waiting for a connection (``UpstreamShares/wait(_:now:until:resume:timeOut:)``).
    struct ShareWait: Equatable {
        let key: UpstreamShares.Key
        let id: UInt64
    }

    /// What a sliced answer has done so far, beside its ``SlicePlan``.
    struct SliceProgress {
        /// The sliced answer's head is queued.
        var headQueued = false
        /// The stored slice being looked at, as the reader thread's check of it goes.
        var disk = SliceCheck.none
        /// The slice fill being read, if one is.
        var fill: FillAttachment?
        /// A stored slice's body being sent from the disk tier block by block.
        var diskBody: DiskBodyStream?
        /// The current slice is fetched alone (its shared fill released it, or timed out).
        var alone = false

        /// A stored slice is being checked on the reader thread.
        var isChecking: Bool {
            if case .pending = disk { return true }
            return false
        }
    }

    /// A stored slice's check on the reader thread.
    enum SliceCheck {
        case none
        /// The walk waits for its answer.
        case pending
        /// Checked: the next lookup serves a sound entry as it is, and does not go back to the
        /// reader thread for that slice.
        case checked(DiskCache.Verification)
    }

    /// The payload-free name of a ``State``.
    enum Stage: Equatable, CaseIterable {
        case routing, awaitingRequestBody, lookingUp, awaitingDisk, readingFill, responding, streamingDisk, answering, slicing
        case waitingForShare, tunnelling, finished
    }

    /// What moves an exchange on.
    enum Event {
        /// Routed to a URL: the cache decision comes next.
        case routed
        /// A CONNECT was accepted for setting up.
        case connectAccepted
        /// The request body must be read whole first.
        case bodyNeeded
        /// The request body was read whole, or as much of it as is held: `tooLargeToKey`, the
        /// rest streams, so no `dedup = "always"` key can be made and the request goes alone.
        case bodyRead(tooLargeToKey: Bool)
        /// A disk entry (or a stored slice) went to the reader thread to be checked.
        case diskCheckStarted
        /// The reader thread answered (a sound entry read for this request, or none).
        case diskChecked(DiskCache.Verification)
        /// Attached to a fill for the whole object (its own or a shared one).
        case attached(Fill)
        /// A sliced answer attached to the fill of one slice.
        case sliceFillAttached(Fill)
        /// The slice fill's answer is the whole object (or an error): it is read as an ordinary
        /// fill's response from here.
        case sliceFillWhole
        /// A sliced answer left the fill of one slice: `alone`, the slice is fetched again
        /// without attaching to a shared fill.
        case sliceFillLeft(alone: Bool)
        /// The exchange left its fill to answer otherwise (the stored response a 304 refreshed
        /// or a stale one, an error, a body ended short).
        case fillLeft
        /// A stored body over one block started from the disk tier.
        case diskBodyStarted(DiskBodyStream)
        /// The disk body's last block is queued.
        case diskBodyEnded
        /// The object turned out to be stored (or fetched) in slices.
        case slicesBegun
        /// The head of a sliced answer was queued.
        case sliceHeadQueued
        /// Released from a fill before its head (another variant, timed out, a range): the
        /// request is forwarded again, `alone` or keyed by its variant.
        case released(alone: Bool)
        /// A fill's response head (or a 304/416 in its place) was queued.
        case headQueued
        /// The fill it would start must wait for a connection to the origin: its client has
        /// its share of them, or all are taken; it waits in this place on the origin's list.
        case shareAwaited(ShareWait)
        /// One of its client's fills to the origin ended: the lookup (``Action/forward``) or the
        /// slice walk (``Action/walkSlices``) goes on.
        case shareGiven
        /// It waited `upstream.timeout` (and is off the list): answered with an error where it was
        /// (``Action/respond``: a 504, or a sliced answer's body ended short).
        case shareTimedOut
        /// The fill read has news for this reader (``FillNews``): a head, body, an end, or
        /// room in the client's output.
        case fillProgressed(FillNews)
        /// Done (answered, or the connection closed).
        case finished
    }

    /// What the connection does next, after a step.
    enum Action: Equatable {
        /// The cache decision (``RequestPipeline/proceed(_:on:)``).
        case lookUp
        /// Resolve and dial the CONNECT target.
        case setUpTunnel
        /// Read the request body into memory.
        case readRequestBody
        /// Wait for the reader thread's check.
        case waitForDisk
        /// Send the request upstream (again).
        case forward
        /// Read the attached fill's response.
        case readFill
        /// Walk the slices: stored ones, the slice fill, the next fetch.
        case walkSlices
        /// Send the response body.
        case sendBody
        /// Answer without the fill (from the store, or with an error).
        case respond
        /// Nothing to do until the fill or the client's output moves.
        case wait
        /// Queue the fill's response head (or the 304, 416 or 206 it makes for this request).
        case queueHead
        /// Answer with the stored response the fill produced, leaving it: a 304-refreshed copy,
        /// or a stale one standing in for a failed origin.
        case answerFromStore(stale: Bool)
        /// Queue the fill's body bytes from the attachment's position up to this one, as the
        /// output has room.
        case sendBytes(upTo: Int)
        /// Every byte this client gets is queued (`lastChunk`: end a chunked body first).
        case finishBody(lastChunk: Bool)
        /// The fill failed this reader: before its head an error answer, after it an
        /// incomplete body (RFC 9112 §8).
        case fail(FillNews.Failure)
        /// Log the exchange, leave its fill, decide on keep-alive.
        case finish
    }

    /// The state and action `event` leads to from `state` at `now` (the loop's clock), or nil
    /// when the design has no such step.
    static func step(_ state: State, on event: Event, now: UInt64) -> (state: State, action: Action)? {
        // A reader's steps come once or more per batch of body bytes: decided on the state
        // alone, without building the pair the other steps match on.
        if case .fillProgressed(let news) = event { return read(news, in: state) }
        switch (state, event) {
        case (.finished, _):
            return nil
        case (_, .finished):
            return (.finished, .finish)
        case (.routing, .routed):
            return (.lookingUp(checked: nil, alone: false), .lookUp)
        case (.routing, .connectAccepted):
            return (.tunnelling, .setUpTunnel)
        case (.lookingUp(_, let alone), .bodyNeeded):
            return (.awaitingRequestBody(alone: alone), .readRequestBody)
        case (.awaitingRequestBody(let alone), .bodyRead(let tooLarge)):
            return (.lookingUp(checked: nil, alone: alone || tooLarge), .forward)
        case (.lookingUp, .diskCheckStarted):
            return (.awaitingDisk, .waitForDisk)
        case (.awaitingDisk, .diskChecked(let entry)):
            return (.lookingUp(checked: entry, alone: false), .lookUp)
        case (.lookingUp, .attached(let fill)):
            return (.readingFill(FillAttachment(fill, since: now)), .readFill)
        case (.lookingUp, .slicesBegun):
            return (.slicing(SliceProgress()), .walkSlices)
        case (.slicing(var progress), .sliceFillAttached(let fill)):
            progress.fill = FillAttachment(fill, since: now)
            return (.slicing(progress), .walkSlices)
        case (.slicing(var progress), .sliceFillLeft(let alone)):
            progress.fill = nil
            progress.alone = alone
            return (.slicing(progress), .walkSlices)
        case (.slicing(var progress), .diskCheckStarted):
            if case .pending = progress.disk { return nil }
            progress.disk = .pending
            return (.slicing(progress), .waitForDisk)
        case (.slicing(var progress), .diskChecked(let entry)):
            guard case .pending = progress.disk else { return nil }
            progress.disk = .checked(entry)
            return (.slicing(progress), .walkSlices)
        case (.slicing(var progress), .sliceHeadQueued):
            progress.headQueued = true
            return (.slicing(progress), .sendBody)
        // The origin answered a slice request whole (or with an error): an ordinary fill's
        // response from here, waiting since the slice fill attached.
        case (.slicing(let progress), .sliceFillWhole):
            guard let attachment = progress.fill else { return nil }
            return (.readingFill(attachment), .readFill)
        // No slice stored after all: the whole object is fetched.
        case (.slicing, .attached(let fill)):
            return (.readingFill(FillAttachment(fill, since: now)), .readFill)
        case (.slicing(var progress), .diskBodyStarted(let stream)):
            guard progress.diskBody == nil else { return nil }
            progress.diskBody = stream
            return (.slicing(progress), .sendBody)
        case (.slicing(var progress), .diskBodyEnded):
            guard progress.diskBody != nil else { return nil }
            progress.diskBody = nil
            return (.slicing(progress), .walkSlices)
        case (.readingFill, .released(let alone)):
            return (.lookingUp(checked: nil, alone: alone), .forward)
        case (.readingFill(let attachment), .headQueued):
            return (.responding(attachment), .sendBody)
        case (.readingFill, .fillLeft), (.responding, .fillLeft):
            return (.answering, .respond)
        case (.lookingUp, .diskBodyStarted(let stream)), (.answering, .diskBodyStarted(let stream)):
            return (.streamingDisk(stream), .sendBody)
        case (.streamingDisk, .diskBodyEnded):
            return (.answering, .finish)
        case (.lookingUp, .shareAwaited(let wait)), (.slicing, .shareAwaited(let wait)):
            // A slice walk waits between slices: not while a slice is checked, read or sent.
            if case .slicing(let progress) = state, progress.fill != nil || progress.diskBody != nil || progress.isChecking {
                return nil
            }
            return (.waitingForShare(after: state, wait: wait), .wait)
        case (.waitingForShare(let after, _), .shareGiven):
            guard case .slicing = after else { return (after, .forward) }
            return (after, .walkSlices)
        case (.waitingForShare(let after, _), .shareTimedOut):
            return (after, .respond)
        default:
            return nil
        }
    }

    /// A fill's reader's step on the fill's news: before its head (``FillNews/beforeHead()``),
    /// after it (``FillNews/afterHead(position:blockPending:)``); nil in any other state.
    private static func read(_ news: FillNews, in state: State) -> (state: State, action: Action)? {
        switch state {
        case .readingFill(let attachment):
            let next = news.beforeHead()
            return (next.leaves ? .answering : .readingFill(attachment), next.action)
        case .responding(let attachment):
            let action = news.afterHead(position: attachment.position, blockPending: attachment.isReadingBlock)
            if case .fail = action { return (.answering, action) }
            return (.responding(attachment), action)
        default:
            return nil
        }
    }

    /// The stage the exchange is in.
    var stage: Stage { Exchange.stage(of: state) }

    /// The name of `state`'s stage.
    static func stage(of state: State) -> Stage {
        switch state {
        case .routing: .routing
        case .awaitingRequestBody: .awaitingRequestBody
        case .lookingUp: .lookingUp
        case .awaitingDisk: .awaitingDisk
        case .readingFill: .readingFill
        case .responding: .responding
        case .streamingDisk: .streamingDisk
        case .answering: .answering
        case .slicing: .slicing
        case .waitingForShare: .waitingForShare
        case .tunnelling: .tunnelling
        case .finished: .finished
        }
    }

    /// The response head is queued (a fill's response is streaming, a stored body from disk,
    /// or a sliced answer's).
    var headSent: Bool {
        switch state {
        case .responding, .streamingDisk: true
        case .slicing(let progress), .waitingForShare(after: .slicing(let progress), _): progress.headQueued
        default: false
        }
    }

    /// The request must not attach to a shared fill (nor, looking up, begin a sliced answer).
    var goAlone: Bool {
        switch state {
        case .lookingUp(_, let alone), .awaitingRequestBody(let alone), .waitingForShare(after: .lookingUp(_, let alone), _): alone
        case .slicing(let progress), .waitingForShare(after: .slicing(let progress), _): progress.alone
        default: false
        }
    }

    /// Its next fill waits for its client's share of the origin's connections.
    var waitsForShare: Bool { stage == .waitingForShare }

    /// Where it waits for a connection to its origin, while it does.
    var shareWait: ShareWait? {
        if case .waitingForShare(_, let wait) = state { return wait }
        return nil
    }

    /// The request body is being read whole before the exchange goes on.
    var bufferingBody: Bool { stage == .awaitingRequestBody }

    /// A stored slice is being checked on the reader thread (the walk waits for its answer).
    var sliceCheckPending: Bool {
        if case .slicing(let progress) = state { return progress.isChecking }
        return false
    }

    /// When the exchange attached to the fill it waits on (for coalesce.wait_timeout).
    var waitStart: UInt64 { attachment?.since ?? 0 }
}
