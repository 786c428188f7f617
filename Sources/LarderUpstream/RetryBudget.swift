import LarderIO
import Synchronization

/// Caps retries across the daemon at a share of upstream requests over a sliding window, so an
/// origin that is down gets at most `1 + ratio` times its normal load, not `1 + max_attempts`
/// times (the gRPC/Finagle retry-budget idea).
///
/// State: one mutex around the per-second buckets; taken once per upstream attempt.
public final class RetryBudget: Sendable {
    private struct State {
        var requests: [Int]
        var retries: [Int]
        var second: Int64 = 0
        var exhaustedLoggedAt: Int64 = -1
        var ratio: Double
        var floor: Int
    }

    private let state: Locked<State>
    private let window: Int
    private let clock: @Sendable () -> Double
    /// Retries refused because the budget was spent.
    public let exhausted = AtomicCounter()

    /// `ratio` of requests over the last `window` seconds may be retries, and never fewer
    /// than `floor` retries per window.
    public init(ratio: Double, floor: Int, window: Int = 10, clock: @escaping @Sendable () -> Double = { Clocks.monotonicSeconds() }) {
        self.window = max(1, window)
        self.clock = clock
        state = Locked(
            State(
                requests: Array(repeating: 0, count: max(1, window)), retries: Array(repeating: 0, count: max(1, window)), ratio: ratio,
                floor: floor))
    }

    public func setLimits(ratio: Double, floor: Int) {
        state.withLock {
            $0.ratio = ratio
            $0.floor = floor
        }
    }

    /// Counts a first attempt.
    public func recordRequest() {
        let now = Int64(clock())
        state.withLock { state in
            advance(&state, to: now)
            state.requests[Int(now % Int64(window))] += 1
        }
    }

    /// Takes a retry from the budget. The result says whether it may go ahead, and whether this
    /// is the first refusal in the current window (so it is logged once).
    public func tryRetry() -> (allowed: Bool, firstRefusalInWindow: Bool) {
        let now = Int64(clock())
        return state.withLock { state in
            advance(&state, to: now)
            let requests = state.requests.reduce(0, +)
            let retries = state.retries.reduce(0, +)
            let allowed = Double(retries) < max(Double(state.floor), state.ratio * Double(requests))
            if allowed {
                state.retries[Int(now % Int64(window))] += 1
                return (true, false)
            }
            exhausted.add(1)
            let first = state.exhaustedLoggedAt < 0 || now - state.exhaustedLoggedAt >= Int64(window)
            if first { state.exhaustedLoggedAt = now }
            return (false, first)
        }
    }

    private func advance(_ state: inout State, to now: Int64) {
        guard now > state.second else { return }
        let steps = min(Int(now - state.second), window)
        for offset in 1...steps {
            let slot = Int((state.second + Int64(offset)) % Int64(window))
            state.requests[slot] = 0
            state.retries[slot] = 0
        }
        state.second = now
    }
}
