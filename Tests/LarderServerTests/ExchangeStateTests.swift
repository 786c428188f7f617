import LarderCache
import LarderConfig
import LarderHTTP
import Testing

@testable import LarderServer

/// The exchange's states: every allowed step with the state and action it leads to, that
/// nothing else is allowed, and what the states carry.
@Suite(.timeLimit(.minutes(1))) struct ExchangeStateTests {
    typealias State = Exchange.State
    typealias Event = Exchange.Event
    typealias Stage = Exchange.Stage

    static let entry = StoredResponse(
        key: CacheKey(AbsoluteURL(scheme: "http", host: "example.org", port: 80, pathAndQuery: "/a")), status: 200, reason: "OK",
        headers: ["Cache-Control": "max-age=60"], body: .memory([1, 2, 3]), requestTime: 1000, responseTime: 1000,
        freshnessLifetime: 60, correctedInitialAge: 0)

    static let stream = DiskBodyStream(stored: entry, first: 0, count: 3)
    static let shareWait = Exchange.ShareWait(key: UpstreamShares.Key(client: (0, 1), host: "example.org", port: 80), id: 1)

    /// Runs `body` with a fill made on a pipeline's loop (the steps only carry it) and lets go
    /// of it on that loop.
    static func withFill(_ body: (Fill) -> Void) throws {
        let pipeline = try FillPipeline()
        let made = UncheckedBox<Fill?>(pipeline.onLoop { pipeline, _ in pipeline.makeFill("/state", coalesceKey: nil) })
        body(made.value!)
        pipeline.onLoop { _, _ in made.value = nil }
        pipeline.close()
    }

    /// One state of each kind, and the slice states that differ in what they allow.
    static func states(_ fill: Fill) -> [(name: String, state: State)] {
        let attachment = FillAttachment(fill, since: 7)
        return [
            ("routing", .routing), ("awaitingRequestBody", .awaitingRequestBody(alone: false)),
            ("lookingUp", .lookingUp(checked: nil, alone: false)), ("awaitingDisk", .awaitingDisk),
            ("readingFill", .readingFill(attachment)), ("responding", .responding(attachment)),
            ("streamingDisk", .streamingDisk(stream)), ("answering", .answering),
            ("slicing", .slicing(Exchange.SliceProgress())),
            ("slicingChecking", .slicing(Exchange.SliceProgress(disk: .pending))),
            ("slicingFill", .slicing(Exchange.SliceProgress(fill: attachment))),
            ("slicingDisk", .slicing(Exchange.SliceProgress(diskBody: stream))),
            ("waitingForShare", .waitingForShare(after: .lookingUp(checked: nil, alone: true), wait: shareWait)),
            ("waitingForShareSlicing", .waitingForShare(after: .slicing(Exchange.SliceProgress(headQueued: true)), wait: shareWait)),
            ("tunnelling", .tunnelling),
            ("finished", .finished),
        ]
    }

    /// The name of each event; the switch lists every case, so a new event fails to compile
    /// here until the table below says where it is allowed.
    static func name(_ event: Event) -> String {
        switch event {
        case .routed: "routed"
        case .connectAccepted: "connectAccepted"
        case .bodyNeeded: "bodyNeeded"
        case .bodyRead: "bodyRead"
        case .diskCheckStarted: "diskCheckStarted"
        case .diskChecked: "diskChecked"
        case .attached: "attached"
        case .sliceFillAttached: "sliceFillAttached"
        case .sliceFillWhole: "sliceFillWhole"
        case .sliceFillLeft: "sliceFillLeft"
        case .fillLeft: "fillLeft"
        case .diskBodyStarted: "diskBodyStarted"
        case .diskBodyEnded: "diskBodyEnded"
        case .slicesBegun: "slicesBegun"
        case .sliceHeadQueued: "sliceHeadQueued"
        case .released: "released"
        case .headQueued: "headQueued"
        case .shareAwaited: "shareAwaited"
        case .shareGiven: "shareGiven"
        case .shareTimedOut: "shareTimedOut"
        case .fillProgressed: "fillProgressed"
        case .finished: "finished"
        }
    }

    static func events(_ fill: Fill) -> [Event] {
        [
            .routed, .connectAccepted, .bodyNeeded, .bodyRead(tooLargeToKey: false), .diskCheckStarted, .diskChecked(.dropped),
            .attached(fill), .sliceFillAttached(fill), .sliceFillWhole, .sliceFillLeft(alone: true), .fillLeft,
            .diskBodyStarted(stream), .diskBodyEnded, .slicesBegun, .sliceHeadQueued, .released(alone: false), .headQueued,
            .shareAwaited(shareWait), .shareGiven, .shareTimedOut, .fillProgressed(FillNews()), .finished,
        ]
    }

    /// `table` with the entries of `changes` set (nil: removed).
    static func changing(
        _ table: [String: (Stage, Exchange.Action)], _ changes: [String: (Stage, Exchange.Action)?]
    ) -> [String: (Stage, Exchange.Action)] {
        var table = table
        for (name, entry) in changes { table[name] = entry }
        return table
    }

    @Test func everyStepTheDesignAllowsAndNoOther() throws {
        // What any slicing state allows, whatever it is doing.
        let slicing: [String: (Stage, Exchange.Action)] = [
            "attached": (.readingFill, .readFill), "sliceFillAttached": (.slicing, .walkSlices),
            "sliceFillLeft": (.slicing, .walkSlices), "sliceHeadQueued": (.slicing, .sendBody),
            "diskCheckStarted": (.slicing, .waitForDisk), "diskBodyStarted": (.slicing, .sendBody),
            "shareAwaited": (.waitingForShare, .wait),
        ]
        let allowed: [String: [String: (Stage, Exchange.Action)]] = [
            "routing": ["routed": (.lookingUp, .lookUp), "connectAccepted": (.tunnelling, .setUpTunnel)],
            "lookingUp": [
                "bodyNeeded": (.awaitingRequestBody, .readRequestBody), "diskCheckStarted": (.awaitingDisk, .waitForDisk),
                "attached": (.readingFill, .readFill), "slicesBegun": (.slicing, .walkSlices),
                "diskBodyStarted": (.streamingDisk, .sendBody), "shareAwaited": (.waitingForShare, .wait),
            ],
            "awaitingRequestBody": ["bodyRead": (.lookingUp, .forward)],
            "awaitingDisk": ["diskChecked": (.lookingUp, .lookUp)],
            "readingFill": [
                "released": (.lookingUp, .forward), "headQueued": (.responding, .sendBody), "fillLeft": (.answering, .respond),
                "fillProgressed": (.readingFill, .wait),
            ],
            "responding": ["fillLeft": (.answering, .respond), "fillProgressed": (.responding, .wait)],
            "streamingDisk": ["diskBodyEnded": (.answering, .finish)],
            "answering": ["diskBodyStarted": (.streamingDisk, .sendBody)],
            "tunnelling": [:],
            "slicing": slicing,
            // A slice walk waits for its share between slices only.
            "slicingChecking": Self.changing(
                slicing, ["diskCheckStarted": nil, "diskChecked": (.slicing, .walkSlices), "shareAwaited": nil]),
            "slicingFill": Self.changing(slicing, ["sliceFillWhole": (.readingFill, .readFill), "shareAwaited": nil]),
            "slicingDisk": Self.changing(
                slicing, ["diskBodyStarted": nil, "diskBodyEnded": (.slicing, .walkSlices), "shareAwaited": nil]),
            "waitingForShare": ["shareGiven": (.lookingUp, .forward), "shareTimedOut": (.lookingUp, .respond)],
            "waitingForShareSlicing": ["shareGiven": (.slicing, .walkSlices), "shareTimedOut": (.slicing, .respond)],
        ]
        try Self.withFill { fill in
            #expect(Set(Self.events(fill).map(Self.name)).count == 22, "every event is tried")
            for (stateName, state) in Self.states(fill) {
                for event in Self.events(fill) {
                    let eventName = Self.name(event)
                    let expected: (Stage, Exchange.Action)? =
                        stateName == "finished" ? nil : eventName == "finished" ? (.finished, .finish) : allowed[stateName]?[eventName]
                    let step = Exchange.step(state, on: event, now: 42)
                    let taken = step.map { (Exchange.stage(of: $0.state), $0.action) }
                    #expect(taken?.0 == expected?.0 && taken?.1 == expected?.1, "\(stateName) on \(eventName)")
                }
            }
        }
    }

    @Test func aMissReadsAFillAndResponds() throws {
        try Self.withFill { fill in
            var state = State.routing
            var actions: [Exchange.Action] = []
            for event: Event in [.routed, .attached(fill), .headQueued, .finished] {
                guard let step = Exchange.step(state, on: event, now: 9) else {
                    Issue.record("\(Self.name(event)) refused")
                    return
                }
                state = step.state
                actions.append(step.action)
            }
            #expect(actions == [.lookUp, .readFill, .sendBody, .finish])
            #expect(Exchange.stage(of: state) == .finished)
        }
    }

    /// The clock is the step's: attaching records when, for coalesce.wait_timeout, and a sliced
    /// answer that becomes an ordinary fill keeps waiting since its slice fill attached.
    @Test func attachingRecordsWhenFromTheClockGiven() throws {
        try Self.withFill { fill in
            guard
                case .readingFill(let attachment)? = Exchange.step(.lookingUp(checked: nil, alone: false), on: .attached(fill), now: 123)?
                    .state
            else {
                Issue.record("not reading a fill")
                return
            }
            #expect(attachment.since == 123 && attachment.fill === fill && attachment.position == 0)
            guard let joined = Exchange.step(.slicing(Exchange.SliceProgress()), on: .sliceFillAttached(fill), now: 456)?.state,
                case .slicing(let progress) = joined
            else {
                Issue.record("not slicing")
                return
            }
            #expect(progress.fill?.since == 456)
            guard case .readingFill(let whole)? = Exchange.step(joined, on: .sliceFillWhole, now: 789)?.state else {
                Issue.record("not reading a fill")
                return
            }
            #expect(whole.since == 456 && whole.fill === fill)
        }
    }

    /// Where the client is in the fill (its position, a block read, a checked block, the end of
    /// a slice's part, a transfer waiting for the request body) lives and dies with the
    /// attachment: kept from reading to responding, gone with a release or a slice fill left.
    @Test func theAttachmentCarriesTheReadersPlaceAndGoesWithTheFill() throws {
        let head = RequestHead(method: .get, target: .origin("/a"), version: .http1_1, headers: [:])
        try Self.withFill { fill in
            let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
            exchange.take(.routed)
            #expect(exchange.attachment == nil, "no attachment before a fill")
            exchange.take(.attached(fill), now: 3)
            #expect(exchange.fill === fill && exchange.waitStart == 3)
            exchange.attachment?.position = 5
            exchange.attachment?.checkedBlock = (0, [1, 2, 3])
            exchange.upstreamWaitsForBody = true
            #expect(exchange.take(.headQueued) == .sendBody)
            #expect(exchange.headSent)
            #expect(exchange.attachment?.position == 5 && exchange.attachment?.checkedBlock?.bytes == [1, 2, 3])
            #expect(exchange.upstreamWaitsForBody)
            #expect(exchange.take(.fillLeft) == .respond)
            #expect(exchange.fill == nil && !exchange.upstreamWaitsForBody && !exchange.headSent)

            let released = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
            released.take(.routed)
            released.take(.attached(fill), now: 1)
            released.attachment?.position = 9
            #expect(released.take(.released(alone: true)) == .forward)
            #expect(released.fill == nil && released.waitStart == 0)
            released.take(.attached(fill), now: 2)
            #expect(released.attachment?.position == 0, "a new attachment starts at the body's start")

            let sliced = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
            sliced.take(.routed)
            sliced.take(.slicesBegun)
            sliced.take(.sliceFillAttached(fill), now: 4)
            sliced.attachment?.position = 10
            sliced.attachment?.sliceEnd = 20
            #expect(sliced.attachment?.sliceEnd == 20 && sliced.waitStart == 4)
            #expect(sliced.take(.sliceFillLeft(alone: false)) == .walkSlices)
            #expect(sliced.fill == nil && sliced.attachment?.sliceEnd == nil)
        }
    }

    /// A stored body from disk is the state's: what follows its last block is the finish for a
    /// whole answer and the next slice for a sliced one; its progress is kept in the state.
    @Test func aDiskBodyIsCarriedByTheStateAndSaysWhatFollows() {
        let head = RequestHead(method: .get, target: .origin("/a"), version: .http1_1, headers: [:])
        let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        exchange.take(.routed)
        #expect(exchange.take(.diskBodyStarted(Self.stream)) == .sendBody)
        #expect(exchange.headSent && exchange.stage == .streamingDisk)
        var stream = Self.stream
        stream.reading = 11
        exchange.updateDiskBody(stream)
        #expect(exchange.diskBody?.reading == 11)
        #expect(exchange.take(.diskBodyEnded) == .finish)
        #expect(exchange.diskBody == nil)

        let sliced = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        sliced.take(.routed)
        sliced.take(.slicesBegun)
        sliced.take(.sliceHeadQueued)
        #expect(sliced.take(.diskBodyStarted(Self.stream)) == .sendBody)
        #expect(sliced.diskBody != nil)
        #expect(sliced.take(.diskBodyEnded) == .walkSlices)
        #expect(sliced.diskBody == nil && sliced.headSent && sliced.stage == .slicing)
    }

    static func news(
        _ answer: FillNews.Answer = .head, readable: Int = 0, ended: FillNews.Ended? = nil, end: Int = .max,
        declared: Int? = nil, chunked: Bool = false, sent: Int = 0
    ) -> FillNews {
        FillNews(answer: answer, readable: readable, ended: ended, end: end, declared: declared, chunked: chunked, sent: sent)
    }

    /// A fill's news for a reader with no head yet: what it answers with, and whether it leaves
    /// the fill doing so.
    @Test func aReaderBeforeItsHeadAnswersAsTheFillsNewsSays() throws {
        let rows: [(String, FillNews, Stage, Exchange.Action)] = [
            ("nothing yet", Self.news(.pending), .readingFill, .wait),
            ("nothing yet, the body under way", Self.news(.pending, readable: 5), .readingFill, .wait),
            ("a head", Self.news(.head), .readingFill, .queueHead),
            ("a head and its end", Self.news(.head, readable: 5, ended: .complete), .readingFill, .queueHead),
            ("a 304 refreshed the stored copy", Self.news(.refreshed, ended: .complete), .answering, .answerFromStore(stale: false)),
            ("a stale copy stands in", Self.news(.stale, ended: .complete), .answering, .answerFromStore(stale: true)),
            ("failed before a head", Self.news(.pending, ended: .failed), .answering, .fail(.beforeHead)),
        ]
        try Self.withFill { fill in
            for (name, news, stage, action) in rows {
                let step = Exchange.step(.readingFill(FillAttachment(fill, since: 1)), on: .fillProgressed(news), now: 2)
                #expect(step.map { Exchange.stage(of: $0.state) } == stage && step?.action == action, "\(name)")
            }
        }
    }

    /// A fill's news for a reader whose head is out, at a position in the body: how many bytes
    /// to send, when its response is complete (its range, its declared length, the transfer's
    /// end), and when it ends incomplete.
    @Test func aReaderAfterItsHeadSendsFinishesOrFailsAsTheNewsSays() throws {
        let rows: [(String, position: Int, FillNews, Stage, Exchange.Action)] = [
            ("bytes to send", 0, Self.news(readable: 5, declared: 5), .responding, .sendBytes(upTo: 5)),
            ("more arrived", 3, Self.news(readable: 8, sent: 3), .responding, .sendBytes(upTo: 8)),
            ("up to its range's end", 2, Self.news(readable: 9, end: 4), .responding, .sendBytes(upTo: 4)),
            ("its range is complete", 4, Self.news(readable: 9, end: 4), .responding, .finishBody(lastChunk: false)),
            ("every declared byte sent", 5, Self.news(readable: 5, declared: 5, sent: 5), .responding, .finishBody(lastChunk: false)),
            ("nothing new", 5, Self.news(readable: 5, declared: 9, sent: 5), .responding, .wait),
            (
                "the end of a chunked body", 5, Self.news(readable: 5, ended: .complete, chunked: true, sent: 5), .responding,
                .finishBody(lastChunk: true)
            ),
            (
                "the end, as declared", 5, Self.news(readable: 5, ended: .complete, declared: 5, sent: 5), .responding,
                .finishBody(lastChunk: false)
            ),
            (
                "the end, short of what was declared", 3, Self.news(readable: 3, ended: .complete, declared: 5, sent: 3),
                .answering, .fail(.short(sent: 3, declared: 5))
            ),
            ("the transfer failed", 3, Self.news(readable: 3, ended: .failed, sent: 3), .answering, .fail(.transfer)),
            // Review 71 F1: a range starting past where the transfer failed hung for good.
            ("failed before the range's first byte", 8, Self.news(readable: 3, ended: .failed), .answering, .fail(.transfer)),
            (
                "ended before the range's first byte", 8, Self.news(readable: 3, ended: .complete, declared: 5), .answering,
                .fail(.short(sent: 0, declared: 5))
            ),
            (
                "failed, bytes still to send first", 1, Self.news(readable: 3, ended: .failed, sent: 1), .responding,
                .sendBytes(upTo: 3)
            ),
        ]
        try Self.withFill { fill in
            for (name, position, news, stage, action) in rows {
                let attachment = FillAttachment(fill, since: 1)
                attachment.position = position
                let step = Exchange.step(.responding(attachment), on: .fillProgressed(news), now: 2)
                #expect(step.map { Exchange.stage(of: $0.state) } == stage && step?.action == action, "\(name)")
            }
        }
        // A block of the fill's disk file being read for it: nothing more until it is checked.
        #expect(Self.news(readable: 9).afterHead(position: 2, blockPending: true) == .wait)
        #expect(Self.news(readable: 9).afterHead(position: 2, blockPending: false) == .sendBytes(upTo: 9))
    }

    /// The length of the sound entry a check found, if it found one.
    private static func checkedLength(_ check: DiskCache.Verification?) -> Int? {
        guard case .sound(let entry?, _) = check else { return nil }
        return entry.bodyLength
    }

    /// What the reader thread's check found goes to the lookup that follows, once; a sliced
    /// answer's goes to its walk. Nothing found is carried too: that lookup must not send the
    /// request back to the reader thread for a name the start-up scan has not indexed, or
    /// a miss would go round forever.
    @Test func aCheckedEntryIsCarriedToTheNextLookupOnce() {
        let head = RequestHead(method: .get, target: .origin("/a"), version: .http1_1, headers: [:])
        let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        #expect(exchange.take(.routed) == .lookUp)
        #expect(exchange.take(.diskCheckStarted) == .waitForDisk)
        #expect(exchange.stage == .awaitingDisk)
        #expect(exchange.take(.diskChecked(.sound(Self.entry))) == .lookUp)
        #expect(Self.checkedLength(exchange.takeCheckedEntry()) == 3)
        #expect(exchange.takeCheckedEntry() == nil, "once")
        exchange.take(.diskCheckStarted)
        #expect(exchange.take(.diskChecked(.dropped)) == .lookUp)
        guard case .dropped = exchange.takeCheckedEntry() else {
            Issue.record("a check that found nothing is not carried to the lookup")
            return
        }
        #expect(exchange.takeCheckedEntry() == nil, "once")

        let sliced = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        sliced.take(.routed)
        #expect(sliced.take(.slicesBegun) == .walkSlices)
        #expect(!sliced.headSent)
        sliced.take(.diskCheckStarted)
        #expect(sliced.sliceCheckPending)
        #expect(sliced.take(.diskChecked(.sound(Self.entry))) == .walkSlices)
        #expect(!sliced.sliceCheckPending)
        #expect(Self.checkedLength(sliced.takeCheckedEntry()) == 3)
        #expect(sliced.takeCheckedEntry() == nil, "once")
        sliced.take(.sliceHeadQueued)
        #expect(sliced.headSent)
    }

    /// A request released from a shared fill (another variant) goes round again: it may need
    /// its body, a disk check, and attach to another fill.
    @Test func aReleasedRequestGoesRoundAgain() throws {
        try Self.withFill { fill in
            let steps: [(Event, Stage, Exchange.Action)] = [
                (.routed, .lookingUp, .lookUp), (.attached(fill), .readingFill, .readFill),
                (.released(alone: false), .lookingUp, .forward), (.bodyNeeded, .awaitingRequestBody, .readRequestBody),
                (.bodyRead(tooLargeToKey: false), .lookingUp, .forward), (.diskCheckStarted, .awaitingDisk, .waitForDisk),
                (.diskChecked(.dropped), .lookingUp, .lookUp), (.attached(fill), .readingFill, .readFill),
                (.headQueued, .responding, .sendBody), (.finished, .finished, .finish),
            ]
            var state = State.routing
            for (event, stage, action) in steps {
                guard let step = Exchange.step(state, on: event, now: 0) else {
                    Issue.record("\(Self.name(event)) refused")
                    return
                }
                state = step.state
                #expect(Exchange.stage(of: state) == stage && step.action == action, "after \(Self.name(event))")
            }
            #expect(Exchange.step(.finished, on: .finished, now: 0) == nil, "nothing follows the end")
        }
    }

    /// A wait for the client's share keeps what the state it began in says (a sliced answer's
    /// head is out, the request goes alone) and goes back to it: a lookup forwards again, a
    /// slice walk walks on, and a wait that timed out answers from where it was.
    @Test func aWaitForTheSharePausesWhereItWasAndGoesBackThere() {
        let head = RequestHead(method: .get, target: .origin("/a"), version: .http1_1, headers: [:])
        let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        exchange.take(.routed)
        #expect(exchange.take(.shareAwaited(Self.shareWait)) == .wait && exchange.waitsForShare && !exchange.headSent)
        #expect(exchange.shareWait == Self.shareWait, "the wait's place is the stage's")
        #expect(exchange.take(.shareGiven) == .forward && exchange.stage == .lookingUp && exchange.shareWait == nil)

        let sliced = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        sliced.take(.routed)
        sliced.take(.slicesBegun)
        sliced.take(.sliceFillLeft(alone: true))
        sliced.take(.sliceHeadQueued)
        #expect(sliced.take(.shareAwaited(Self.shareWait)) == .wait)
        #expect(sliced.waitsForShare && sliced.headSent && sliced.goAlone, "what the walk carried is kept while it waits")
        #expect(sliced.attachment == nil && sliced.diskBody == nil)
        #expect(sliced.take(.shareTimedOut) == .respond && sliced.stage == .slicing && sliced.headSent)
        #expect(!sliced.waitsForShare)
    }

    /// Going alone (no shared fill) is the state's: a release says whether, it lasts while the
    /// body is read, a body too large to key makes it so, and a slice walk sets it per slice.
    @Test func goingAloneIsCarriedByTheStateThatNeedsIt() throws {
        try Self.withFill { fill in Self.goAlone(fill) }
    }

    static func goAlone(_ fill: Fill) {
        let head = RequestHead(method: .post, target: .origin("/a"), version: .http1_1, headers: [:])
        let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        exchange.take(.routed)
        #expect(!exchange.goAlone)
        exchange.take(.attached(fill), now: 1)
        #expect(exchange.take(.released(alone: true)) == .forward)
        #expect(exchange.goAlone)
        exchange.take(.bodyNeeded)
        #expect(exchange.goAlone, "while the body is read")
        exchange.take(.bodyRead(tooLargeToKey: false))
        #expect(exchange.goAlone, "still")
        exchange.take(.attached(fill), now: 2)
        #expect(!exchange.goAlone, "a fill's reader is past the choice")
        exchange.take(.released(alone: false))
        #expect(!exchange.goAlone, "keyed by its variant")
        exchange.take(.bodyNeeded)
        exchange.take(.bodyRead(tooLargeToKey: true))
        #expect(exchange.goAlone, "a body too large to key")

        let sliced = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        sliced.take(.routed)
        sliced.take(.slicesBegun)
        #expect(sliced.take(.sliceFillLeft(alone: true)) == .walkSlices)
        #expect(sliced.goAlone)
        sliced.take(.sliceFillLeft(alone: false))
        #expect(!sliced.goAlone)
    }
}
