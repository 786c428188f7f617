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

    /// One state of each kind, and the slice states that differ in what they allow.
    static let states: [(name: String, state: State)] = [
        ("routing", .routing), ("awaitingRequestBody", .awaitingRequestBody(alone: false)),
        ("lookingUp", .lookingUp(checked: nil, alone: false)),
        ("awaitingDisk", .awaitingDisk), ("readingFill", .readingFill(since: 7)), ("responding", .responding),
        ("slicing", .slicing(Exchange.SliceProgress(fillSince: 7))),
        ("slicingChecking", .slicing(Exchange.SliceProgress(disk: .pending, fillSince: 7))), ("tunnelling", .tunnelling),
        ("finished", .finished),
    ]

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
        case .sliceFillLeft: "sliceFillLeft"
        case .slicesBegun: "slicesBegun"
        case .sliceHeadQueued: "sliceHeadQueued"
        case .released: "released"
        case .headQueued: "headQueued"
        case .finished: "finished"
        }
    }

    static let events: [Event] = [
        .routed, .connectAccepted, .bodyNeeded, .bodyRead(tooLargeToKey: false), .diskCheckStarted, .diskChecked(nil), .attached,
        .sliceFillAttached, .sliceFillLeft(alone: true), .slicesBegun, .sliceHeadQueued, .released(alone: false), .headQueued,
        .finished,
    ]

    @Test func everyStepTheDesignAllowsAndNoOther() {
        let allowed: [String: [String: (Stage, Exchange.Action)]] = [
            "routing": ["routed": (.lookingUp, .lookUp), "connectAccepted": (.tunnelling, .setUpTunnel)],
            "lookingUp": [
                "bodyNeeded": (.awaitingRequestBody, .readRequestBody), "diskCheckStarted": (.awaitingDisk, .waitForDisk),
                "attached": (.readingFill, .readFill), "slicesBegun": (.slicing, .walkSlices),
            ],
            "awaitingRequestBody": ["bodyRead": (.lookingUp, .forward)],
            "awaitingDisk": ["diskChecked": (.lookingUp, .lookUp)],
            "readingFill": ["released": (.lookingUp, .forward), "headQueued": (.responding, .sendBody)],
            "responding": [:],
            "tunnelling": [:],
            "slicing": [
                "attached": (.readingFill, .readFill), "sliceFillAttached": (.slicing, .walkSlices),
                "sliceFillLeft": (.slicing, .walkSlices),
                "diskCheckStarted": (.slicing, .waitForDisk), "sliceHeadQueued": (.slicing, .sendBody),
            ],
            "slicingChecking": [
                "attached": (.readingFill, .readFill), "sliceFillAttached": (.slicing, .walkSlices),
                "sliceFillLeft": (.slicing, .walkSlices),
                "diskChecked": (.slicing, .walkSlices), "sliceHeadQueued": (.slicing, .sendBody),
            ],
        ]
        #expect(Set(Self.events.map(Self.name)).count == 14, "every event is tried")
        for (stateName, state) in Self.states {
            for event in Self.events {
                let eventName = Self.name(event)
                let expected: (Stage, Exchange.Action)? =
                    stateName == "finished" ? nil : eventName == "finished" ? (.finished, .finish) : allowed[stateName]?[eventName]
                let step = Exchange.step(state, on: event, now: 42)
                let taken = step.map { (Exchange.stage(of: $0.state), $0.action) }
                #expect(taken?.0 == expected?.0 && taken?.1 == expected?.1, "\(stateName) on \(eventName)")
            }
        }
    }

    @Test func aMissReadsAFillAndResponds() {
        var state = State.routing
        var actions: [Exchange.Action] = []
        for event: Event in [.routed, .attached, .headQueued, .finished] {
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

    /// The clock is the step's: attaching records when, for coalesce.wait_timeout, and a sliced
    /// answer that becomes an ordinary fill keeps waiting since its slice fill attached.
    @Test func attachingRecordsWhenFromTheClockGiven() {
        guard case .readingFill(let since)? = Exchange.step(.lookingUp(checked: nil, alone: false), on: .attached, now: 123)?.state else {
            Issue.record("not reading a fill")
            return
        }
        #expect(since == 123)
        guard let joined = Exchange.step(.slicing(Exchange.SliceProgress()), on: .sliceFillAttached, now: 456)?.state,
            case .slicing(let progress) = joined
        else {
            Issue.record("not slicing")
            return
        }
        #expect(progress.fillSince == 456)
        guard case .readingFill(let whole)? = Exchange.step(joined, on: .attached, now: 789)?.state else {
            Issue.record("not reading a fill")
            return
        }
        #expect(whole == 456)
    }

    /// The entry the reader thread checked goes to the lookup that follows, once; a sliced
    /// answer's goes to its walk.
    @Test func aCheckedEntryIsCarriedToTheNextLookupOnce() {
        let head = RequestHead(method: .get, target: .origin("/a"), version: .http1_1, headers: [:])
        let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        #expect(exchange.take(.routed) == .lookUp)
        #expect(exchange.take(.diskCheckStarted) == .waitForDisk)
        #expect(exchange.stage == .awaitingDisk)
        #expect(exchange.take(.diskChecked(Self.entry)) == .lookUp)
        #expect(exchange.takeCheckedEntry()?.bodyLength == 3)
        #expect(exchange.takeCheckedEntry() == nil, "once")

        let sliced = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        sliced.take(.routed)
        #expect(sliced.take(.slicesBegun) == .walkSlices)
        #expect(!sliced.headSent)
        sliced.take(.diskCheckStarted)
        #expect(sliced.sliceCheckPending)
        #expect(sliced.take(.diskChecked(Self.entry)) == .walkSlices)
        #expect(!sliced.sliceCheckPending)
        #expect(sliced.takeCheckedEntry()?.bodyLength == 3)
        #expect(sliced.takeCheckedEntry() == nil, "once")
        sliced.take(.sliceHeadQueued)
        #expect(sliced.headSent)
    }

    /// A request released from a shared fill (another variant) goes round again: it may need
    /// its body, a disk check, and attach to another fill.
    @Test func aReleasedRequestGoesRoundAgain() {
        let steps: [(Event, Stage, Exchange.Action)] = [
            (.routed, .lookingUp, .lookUp), (.attached, .readingFill, .readFill), (.released(alone: false), .lookingUp, .forward),
            (.bodyNeeded, .awaitingRequestBody, .readRequestBody), (.bodyRead(tooLargeToKey: false), .lookingUp, .forward),
            (.diskCheckStarted, .awaitingDisk, .waitForDisk), (.diskChecked(nil), .lookingUp, .lookUp),
            (.attached, .readingFill, .readFill), (.headQueued, .responding, .sendBody), (.finished, .finished, .finish),
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

    /// Going alone (no shared fill) is the state's: a release says whether, it lasts while the
    /// body is read, a body too large to key makes it so, and a slice walk sets it per slice.
    @Test func goingAloneIsCarriedByTheStateThatNeedsIt() {
        let head = RequestHead(method: .post, target: .origin("/a"), version: .http1_1, headers: [:])
        let exchange = Exchange(head: head, startNanos: 0, runtime: RuntimeConfig(config: Config()))
        exchange.take(.routed)
        #expect(!exchange.goAlone)
        exchange.take(.attached, now: 1)
        #expect(exchange.take(.released(alone: true)) == .forward)
        #expect(exchange.goAlone)
        exchange.take(.bodyNeeded)
        #expect(exchange.goAlone, "while the body is read")
        exchange.take(.bodyRead(tooLargeToKey: false))
        #expect(exchange.goAlone, "still")
        exchange.take(.attached, now: 2)
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
