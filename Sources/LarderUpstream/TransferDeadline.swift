/// When an upstream transfer has taken too long, as a value with the clock passed in: no
/// response head within `timeout`; a body that stalls (no byte) for `timeout`; or a body that
/// trickles, averaging under `minRate` bytes a second over a window of `timeout`. Time the
/// transfer spends paused because its client reads slowly counts against none of them.
public struct TransferDeadline: Sendable, Equatable {
    /// What ``check(now:)`` found.
    public enum Verdict: Sendable, Equatable {
        /// Nothing is late; look again at this time (monotonic ns).
        case lookAgain(at: UInt64)
        case noHead
        case stalled
        /// The last window's average, bytes a second.
        case tooSlow(bytesPerSecond: Int)
    }

    public let timeout: UInt64
    /// Bytes a second; 0 checks no rate.
    public let minRate: Int
    private var start: UInt64
    private var lastProgress: UInt64
    private var headArrived = false
    private var paused = false
    private var windowStart: UInt64
    private var windowBytes = 0

    public init(timeout: UInt64, minRate: Int, now: UInt64) {
        self.timeout = timeout
        self.minRate = minRate
        start = now
        lastProgress = now
        windowStart = now
    }

    public mutating func receivedHead(now: UInt64) {
        headArrived = true
        lastProgress = now
        windowStart = now
        windowBytes = 0
    }

    public mutating func receivedBody(_ count: Int, now: UInt64) {
        lastProgress = now
        windowBytes += count
    }

    public mutating func pause() { paused = true }

    /// After a pause the stall and rate clocks start again.
    public mutating func resume(now: UInt64) {
        paused = false
        lastProgress = now
        windowStart = now
        windowBytes = 0
    }

    /// What a verdict that ends the transfer says (nil for ``Verdict/lookAgain(at:)``).
    public func describe(_ verdict: Verdict) -> String? {
        let seconds = timeout / 1_000_000_000
        switch verdict {
        case .lookAgain: return nil
        case .noHead: return "no response head within \(seconds)s"
        case .stalled: return "response body stalled for \(seconds)s"
        case .tooSlow(let rate):
            return "response body arrived at \(rate) B/s over \(seconds)s, under the minimum rate of \(minRate) B/s"
        }
    }

    /// Decides at `now`; a window that ends with its rate met starts the next one.
    public mutating func check(now: UInt64) -> Verdict {
        // A transfer paused for its readers waits for them, not the origin; one paused before
        // any head (nothing legitimate does that) still answers for the head's timeout.
        guard headArrived else { return now >= start + timeout ? .noHead : .lookAgain(at: start + timeout) }
        if paused { return .lookAgain(at: now + timeout) }
        if now >= lastProgress + timeout { return .stalled }
        var next = lastProgress + timeout
        if minRate > 0 {
            let elapsed = now - windowStart
            if elapsed >= timeout {
                let rate = Int(Double(windowBytes) * 1e9 / Double(elapsed))
                if rate < minRate { return .tooSlow(bytesPerSecond: rate) }
                windowStart = now
                windowBytes = 0
            }
            next = min(next, windowStart + timeout)
        }
        return .lookAgain(at: next)
    }
}
