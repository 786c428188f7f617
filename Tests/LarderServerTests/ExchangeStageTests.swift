import Testing

@testable import LarderServer

/// The exchange's stages: every allowed step, and that nothing else is.
@Suite(.timeLimit(.minutes(1))) struct ExchangeStageTests {
    typealias Stage = Exchange.Stage

    @Test func aMissReadsAFillAndResponds() {
        var stage = Stage.routing
        for event: Exchange.Event in [.routed, .attached, .headQueued, .finished] {
            stage = Exchange.stage(after: stage, on: event) ?? stage
        }
        #expect(stage == .finished)
    }

    @Test func everyStepTheDesignAllowsAndNoOther() {
        let allowed: [Stage: [Exchange.Event: Stage]] = [
            .routing: [.routed: .lookingUp, .connectAccepted: .tunnelling],
            .lookingUp: [
                .bodyNeeded: .awaitingRequestBody, .diskCheckStarted: .awaitingDisk, .attached: .readingFill, .slicesBegun: .slicing,
            ],
            .awaitingRequestBody: [.bodyRead: .lookingUp],
            .awaitingDisk: [.diskChecked: .lookingUp],
            .readingFill: [.released: .lookingUp, .headQueued: .responding],
            .responding: [:],
            .tunnelling: [:],
            .slicing: [.attached: .readingFill],
        ]
        for stage in Stage.allCases {
            for event in Exchange.Event.allCases {
                let expected: Stage? = stage == .finished ? nil : event == .finished ? .finished : allowed[stage]?[event]
                #expect(Exchange.stage(after: stage, on: event) == expected, "\(stage) on \(event)")
            }
        }
    }

    /// A request released from a shared fill (another variant) goes round again: it may need
    /// its body, a disk check, and attach to another fill.
    @Test func aReleasedRequestGoesRoundAgain() {
        let steps: [(Exchange.Event, Stage)] = [
            (.routed, .lookingUp), (.attached, .readingFill), (.released, .lookingUp), (.bodyNeeded, .awaitingRequestBody),
            (.bodyRead, .lookingUp), (.diskCheckStarted, .awaitingDisk), (.diskChecked, .lookingUp), (.attached, .readingFill),
            (.headQueued, .responding), (.finished, .finished),
        ]
        var stage = Stage.routing
        for (event, expected) in steps {
            stage = Exchange.stage(after: stage, on: event) ?? stage
            #expect(stage == expected, "after \(event)")
        }
        #expect(Exchange.stage(after: .finished, on: .finished) == nil, "nothing follows the end")
    }

    /// A sliced answer stays in one stage while its slices come and go; an object that turns out
    /// not to be sliced reads an ordinary fill.
    @Test func aSlicedAnswerMayBecomeAnOrdinaryFill() {
        #expect(Exchange.stage(after: .lookingUp, on: .slicesBegun) == .slicing)
        #expect(Exchange.stage(after: .slicing, on: .attached) == .readingFill)
        #expect(Exchange.stage(after: .slicing, on: .headQueued) == nil, "a sliced head is the plan's business")
        #expect(Exchange.stage(after: .slicing, on: .finished) == .finished)
    }
}
