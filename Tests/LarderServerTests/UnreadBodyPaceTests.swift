import Testing

@testable import LarderServer

/// When a body no client reads is given up: judged on the last window's rate, never on an
/// average a burst can pay for.
@Suite struct UnreadBodyPaceTests {
    static let second: UInt64 = 1_000_000_000
    /// upstream.timeout in these cases: windows of 2 s, judged from 4 s on.
    let timeout = 2 * Self.second
    let cap = 64 << 20

    /// Feeds `pieces` (bytes each) one every `every` nanoseconds from `start` until the pace says
    /// stop; the time it stopped at, or nil if it never did.
    func stopsAt(
        _ pace: inout UnreadBodyPace, from start: UInt64, every: UInt64, pieces: [Int], length: Int?, received: inout Int
    ) -> UInt64? {
        var now = start
        for piece in pieces {
            received += piece
            let rest = length.map { $0 - received }
            if !pace.goesOn(now: now, received: received, rest: rest, cap: cap, timeout: timeout) { return now }
            now += every
        }
        return nil
    }

    @Test func anythingGoesOnForTwiceTheTimeout() {
        var pace = UnreadBodyPace(now: 0, received: 0)
        let first = pace.goesOn(now: 0, received: 0, rest: 1 << 30, cap: cap, timeout: timeout)
        let before = pace.goesOn(now: 4 * Self.second - 1, received: 1, rest: 1 << 30, cap: cap, timeout: timeout)
        let judged = pace.goesOn(now: 4 * Self.second, received: 2, rest: 1 << 30, cap: cap, timeout: timeout)
        #expect(first && before && !judged)
    }

    /// Review 80 F3: a client that joins for a moment now and then does not start the count
    /// again; while one reads, the body goes on.
    @Test func aReaderForAMomentDoesNotStartTheCountAgain() {
        var pace = UnreadBodyPace(now: 0, received: 0)
        let early = pace.goesOn(now: Self.second, received: 200, rest: 1 << 20, cap: cap, timeout: timeout)
        let read = pace.goesOn(now: 5 * Self.second, received: 400, rest: 1 << 20, cap: cap, timeout: timeout, judged: false)
        let alone = pace.goesOn(now: 5 * Self.second + 1, received: 400, rest: 1 << 20, cap: cap, timeout: timeout)
        #expect(early && read && !alone)
    }

    /// Review 79 A1: 8 MB at once after the client left, then the last 24 KB at 200 B/s. The
    /// average since it was left says 24 KB is soon; the last window's rate says two minutes.
    @Test func aBurstDoesNotPayForTheTrickleAfterIt() {
        var pace = UnreadBodyPace(now: 0, received: 0)
        var received = 0
        let length = 8_000_000 + 24_000
        let pieces = [8_000_000] + Array(repeating: 20, count: 1200)
        let stopped = stopsAt(&pace, from: 0, every: Self.second / 10, pieces: pieces, length: length, received: &received)
        #expect(stopped != nil && stopped! <= 5 * Self.second, "\(String(describing: stopped))")
    }

    /// A steady body longer than the bound completes while its rest comes soon at its rate
    /// (review 78 N3), and so does a large one fast enough to bring `cap` within the bound,
    /// known length or not.
    @Test func aSteadyBodyGoesOnWhateverItsSize() {
        var pace = UnreadBodyPace(now: 0, received: 0)
        var received = 0
        // 80 KB/s for 8 s: 640 KB.
        let steady = Array(repeating: 8_000, count: 80)
        #expect(stopsAt(&pace, from: 0, every: Self.second / 10, pieces: steady, length: 640_000, received: &received) == nil)
        // 40 MB/s of unknown length for 20 s.
        pace = UnreadBodyPace(now: 0, received: 0)
        received = 0
        let fast = Array(repeating: 4_000_000, count: 200)
        #expect(stopsAt(&pace, from: 0, every: Self.second / 10, pieces: fast, length: nil, received: &received) == nil)
    }

    /// A slow body whose rest is large, or whose length is unknown (counted as `cap`), stops
    /// once judged.
    @Test func aSlowBodyWithMuchLeftStops() {
        var pace = UnreadBodyPace(now: 0, received: 0)
        var received = 0
        let slow = Array(repeating: 800, count: 100)  // 8 KB/s
        let known = stopsAt(&pace, from: 0, every: Self.second / 10, pieces: slow, length: 1_000_000, received: &received)
        #expect(known == 4 * Self.second)
        pace = UnreadBodyPace(now: 0, received: 0)
        received = 0
        let unknown = stopsAt(&pace, from: 0, every: Self.second / 10, pieces: slow, length: nil, received: &received)
        #expect(unknown == 4 * Self.second)
    }

    /// However its origin paces it, a body the cache alone waits for ends within a bounded
    /// number of windows: an origin that sends, every window, the least the check lets through
    /// must still cut what is left by a third each time (the rest within twice the window).
    @Test func theLongestAHostileOriginHoldsItIsBounded() {
        var pace = UnreadBodyPace(now: 0, received: 0)
        let length = cap
        var received = 0
        var now: UInt64 = 0
        var windows = 0
        while received < length && windows < 1000 {
            now += timeout
            windows += 1
            // The least piece this window that the check takes (found on a copy).
            var low = 0
            var high = length - received
            while low < high {
                let middle = (low + high) / 2
                var probe = pace
                if probe.goesOn(now: now, received: received + middle, rest: length - received - middle, cap: cap, timeout: timeout) {
                    high = middle
                } else {
                    low = middle + 1
                }
            }
            received += low
            let goesOn = pace.goesOn(now: now, received: received, rest: length - received, cap: cap, timeout: timeout)
            #expect(goesOn)
        }
        #expect(received == length)
        #expect(windows <= 50, "\(windows) windows of upstream.timeout")
    }
}
