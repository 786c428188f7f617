/// How a body no client reads (every client left, or a background refresh) is coming in, to
/// judge whether the fill is worth keeping for the cache alone. Pure: the loop clock
/// (nanoseconds) is a parameter.
///
/// The rate is the one over the last window of one upstream timeout, not since the fill was
/// left: otherwise an origin that bursts once pays for a trickle after it, and holds the
/// connection, and its descriptor, for hours (review 79 A1). What is left must come within
/// twice the timeout at that rate, counted up to `finish_abandoned_max` (an unknown length
/// counts as that much): a fill fast enough to bring that much so soon goes on whatever its
/// size (a large background refresh), and a slower one must cut what is left by a third every
/// window, so it ends within a few dozen (45 for 64 MiB sent as slowly as the check allows;
/// fewer once `upstream.min_rate` bites).
struct UnreadBodyPace: Sendable, Equatable {
    /// When the body was first left unread.
    let since: UInt64
    private var windowStart: UInt64
    private var windowFrom: Int
    /// Bytes per nanosecond over the last whole window; nil before one has passed.
    private(set) var recentRate: Double?

    init(now: UInt64, received: Int) {
        since = now
        windowStart = now
        windowFrom = received
    }

    /// Takes the body's progress (`received` bytes in all) at `now`; whether to go on. Always
    /// while a client reads it (`judged` false), and for the first `2 × timeout` since it was
    /// first left unread; then while `rest` (nil: unknown), at most `cap`, would come within
    /// `2 × timeout` at the last window's rate.
    mutating func goesOn(now: UInt64, received: Int, rest: Int?, cap: Int, timeout: UInt64, judged: Bool = true) -> Bool {
        if now &- windowStart >= timeout {
            recentRate = Double(received - windowFrom) / Double(now &- windowStart)
            windowStart = now
            windowFrom = received
        }
        guard judged, now &- since >= 2 * timeout else { return true }
        guard let rate = recentRate, rate > 0 else { return false }
        return Double(min(rest ?? cap, cap)) <= rate * Double(2 * timeout)
    }
}
