import LarderUpstream
import Testing

/// The upstream timeouts as a pure value: the clock is passed in (nanoseconds).
@Suite(.timeLimit(.minutes(1))) struct TransferDeadlineTests {
    static let second: UInt64 = 1_000_000_000

    @Test func noHeadWithinTheTimeout() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 64, now: 0)
        #expect(deadline.check(now: 5 * Self.second) == .lookAgain(at: 10 * Self.second))
        #expect(deadline.check(now: 10 * Self.second) == .noHead)
    }

    /// Review 76 F2: a transfer paused with no head (an unasked 101's "body") was never timed
    /// out. A pause waits for readers, and a transfer without a head has none to wait for.
    @Test func aTransferPausedBeforeItsHeadStillTimesOut() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 0, now: 0)
        deadline.pause()
        #expect(deadline.check(now: 5 * Self.second) == .lookAgain(at: 10 * Self.second))
        #expect(deadline.check(now: 10 * Self.second) == .noHead)
        // Paused after its head, it waits for its readers as long as they take.
        var held = TransferDeadline(timeout: 10 * Self.second, minRate: 0, now: 0)
        held.receivedHead(now: Self.second)
        held.pause()
        #expect(held.check(now: 60 * Self.second) == .lookAgain(at: 70 * Self.second))
    }

    @Test func aBodyThatStopsIsStalled() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 0, now: 0)
        deadline.receivedHead(now: Self.second)
        deadline.receivedBody(1000, now: 2 * Self.second)
        #expect(deadline.check(now: 11 * Self.second) == .lookAgain(at: 12 * Self.second))
        #expect(deadline.check(now: 12 * Self.second) == .stalled)
    }

    @Test func aTricklingBodyIsCutAtTheEndOfItsWindow() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 64, now: 0)
        deadline.receivedHead(now: 0)
        // One byte a second: never a stall, but far under 64 B/s.
        for second in 1...9 {
            deadline.receivedBody(1, now: UInt64(second) * Self.second)
            #expect(deadline.check(now: UInt64(second) * Self.second) == .lookAgain(at: 10 * Self.second))
        }
        deadline.receivedBody(1, now: 10 * Self.second)
        #expect(deadline.check(now: 10 * Self.second) == .tooSlow(bytesPerSecond: 1))
    }

    @Test func aBodyAtTheRateStartsTheNextWindow() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 64, now: 0)
        deadline.receivedHead(now: 0)
        deadline.receivedBody(640, now: 9 * Self.second)
        #expect(deadline.check(now: 10 * Self.second) == .lookAgain(at: 19 * Self.second))
        #expect(deadline.check(now: 19 * Self.second) == .stalled)
    }

    @Test func timePausedForASlowClientDoesNotCount() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 64, now: 0)
        deadline.receivedHead(now: 0)
        deadline.receivedBody(100, now: Self.second)
        deadline.pause()
        #expect(deadline.check(now: 30 * Self.second) == .lookAgain(at: 40 * Self.second))
        deadline.resume(now: 35 * Self.second)
        deadline.receivedBody(1000, now: 36 * Self.second)
        #expect(deadline.check(now: 45 * Self.second) == .lookAgain(at: 46 * Self.second))
    }

    @Test func noMinimumRateWhenZero() {
        var deadline = TransferDeadline(timeout: 10 * Self.second, minRate: 0, now: 0)
        deadline.receivedHead(now: 0)
        for second in 1...30 {
            deadline.receivedBody(1, now: UInt64(second) * Self.second)
            #expect(deadline.check(now: UInt64(second) * Self.second) == .lookAgain(at: UInt64(second + 10) * Self.second))
        }
    }
}
