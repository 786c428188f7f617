import Testing

@testable import LarderIO

/// The loop's timer heap on its own: order, cancellation, and tokens that outlive their timer
/// while the slot they named serves another.
@Suite struct TimerHeapTests {
    /// Runs what is due at `now` and returns the labels it recorded, in firing order.
    private static func fire(_ heap: inout TimerHeap, now: UInt64, into log: Log) -> [Int] {
        log.labels.removeAll()
        for work in heap.popDue(now: now) { work.body() }
        return log.labels
    }

    private final class Log {
        var labels: [Int] = []
    }

    @Test func timersFireInDeadlineOrderOnlyOnceDue() {
        var heap = TimerHeap()
        let log = Log()
        for (label, deadline) in [(3, 30), (1, 10), (5, 50), (2, 20), (4, 40)] as [(Int, UInt64)] {
            _ = heap.schedule(at: deadline) { log.labels.append(label) }
        }
        #expect(heap.count == 5)
        #expect(heap.nextDeadline() == 10)
        #expect(Self.fire(&heap, now: 9, into: log) == [])
        #expect(Self.fire(&heap, now: 30, into: log) == [1, 2, 3])
        #expect(heap.nextDeadline() == 40)
        #expect(Self.fire(&heap, now: 100, into: log) == [4, 5])
        #expect(heap.isEmpty)
        #expect(heap.nextDeadline() == nil)
    }

    @Test func aCancelledTimerNeverFiresAndLeavesTheNextDeadline() {
        var heap = TimerHeap()
        let log = Log()
        let first = heap.schedule(at: 10) { log.labels.append(1) }
        _ = heap.schedule(at: 20) { log.labels.append(2) }
        heap.cancel(first)
        #expect(heap.count == 1)
        #expect(heap.nextDeadline() == 20)
        #expect(Self.fire(&heap, now: 100, into: log) == [2])
        // Cancelling again, or after everything fired, does nothing.
        heap.cancel(first)
        #expect(heap.isEmpty)
    }

    /// A slot freed by a timer that fired or was cancelled serves the next timer; the old
    /// token must not reach the new timer through it.
    @Test func aStaleTokenDoesNotCancelTheTimerNowInItsSlot() {
        var heap = TimerHeap()
        let log = Log()
        let fired = heap.schedule(at: 10) { log.labels.append(1) }
        #expect(Self.fire(&heap, now: 10, into: log) == [1])
        let cancelled = heap.schedule(at: 15) { log.labels.append(2) }
        heap.cancel(cancelled)
        let current = heap.schedule(at: 20) { log.labels.append(3) }
        #expect(current.slot == fired.slot)
        heap.cancel(fired)
        heap.cancel(cancelled)
        #expect(heap.count == 1)
        #expect(Self.fire(&heap, now: 20, into: log) == [3])
    }

    /// Rescheduling over and over (as curl's timer is, several times a transfer) keeps the
    /// heap near the number of live timers and the earliest one first.
    @Test func reschedulingManyTimesKeepsTheHeapSmallAndOrdered() {
        var heap = TimerHeap()
        let log = Log()
        var token = heap.schedule(at: 1_000) { log.labels.append(0) }
        _ = heap.schedule(at: 50_000) { log.labels.append(-1) }
        for round in 1...10_000 {
            heap.cancel(token)
            token = heap.schedule(at: UInt64(1_000 + round)) { log.labels.append(round) }
        }
        #expect(heap.count == 2)
        #expect(heap.entryCount <= 65)
        #expect(heap.nextDeadline() == 11_000)
        #expect(Self.fire(&heap, now: 10_999, into: log) == [])
        #expect(Self.fire(&heap, now: 20_000, into: log) == [10_000])
        #expect(Self.fire(&heap, now: 60_000, into: log) == [-1])
    }
}
