import Testing

@testable import LarderServer

/// The splice decision for one client of one intercepted host, over an explicit clock.
@Suite struct SpliceStageTests {
    let second: UInt64 = 1_000_000_000

    @Test func failuresInARowSpliceForTheConfiguredTimeThenInterceptionResumes() {
        var stage = SpliceStage.initial
        stage = stage.after(handshakeSucceeded: false, threshold: 3, spliceFor: 60 * second, now: 10 * second)
        #expect(stage == .intercepting(failures: 1))
        stage = stage.after(handshakeSucceeded: false, threshold: 3, spliceFor: 60 * second, now: 11 * second)
        #expect(stage.admitting(now: 11 * second).intercept, "two failures: still intercepted")
        stage = stage.after(handshakeSucceeded: false, threshold: 3, spliceFor: 60 * second, now: 12 * second)
        #expect(stage == .spliced(until: 72 * second))
        #expect(!stage.admitting(now: 71 * second).intercept)
        #expect(stage.admitting(now: 71 * second).next == stage)
        let after = stage.admitting(now: 72 * second)
        #expect(after.intercept && after.next == .initial, "tried again once the splice runs out")
    }

    @Test func aSuccessClearsTheCountAndOutcomesDuringASpliceChangeNothing() {
        var stage = SpliceStage.intercepting(failures: 2)
        stage = stage.after(handshakeSucceeded: true, threshold: 3, spliceFor: second, now: 0)
        #expect(stage == .initial)
        stage = stage.after(handshakeSucceeded: false, threshold: 3, spliceFor: second, now: 0)
        #expect(stage == .intercepting(failures: 1), "the count starts over")
        let spliced = SpliceStage.spliced(until: 5 * second)
        #expect(spliced.after(handshakeSucceeded: false, threshold: 1, spliceFor: second, now: second) == spliced)
        #expect(spliced.after(handshakeSucceeded: true, threshold: 1, spliceFor: second, now: second) == spliced)
    }

    @Test func aThresholdOfOneSplicesOnTheFirstFailure() {
        #expect(SpliceStage.initial.after(handshakeSucceeded: false, threshold: 1, spliceFor: second, now: 0) == .spliced(until: second))
    }
}
