/// At most one log line an interval for an event a client can cause at will (a slow download
/// cut for others: a client with many addresses and origins could otherwise write hundreds of
/// lines a minute), with a count of those left out. The counter for the event counts them all.
///
/// State: loop-confined (one per loop and event).
struct LogThrottle {
    /// The least time between two lines, in nanoseconds of the loop's clock.
    let interval: UInt64
    private var last: UInt64?
    private var left = 0

    init(interval: UInt64 = 1_000_000_000) { self.interval = interval }

    /// Whether a line may be written at `now`, and then how many were left out since the last
    /// one; nil: leave this one out (it is counted).
    mutating func allow(now: UInt64) -> Int? {
        if let last, now &- last < interval {
            left += 1
            return nil
        }
        last = now
        defer { left = 0 }
        return left
    }
}
