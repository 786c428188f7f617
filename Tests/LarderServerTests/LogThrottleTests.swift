import Testing

@testable import LarderServer

/// One line an interval at most, and the next says how many were left out.
@Suite struct LogThrottleTests {
    @Test func oneLineAnIntervalAndACountOfTheRest() {
        var throttle = LogThrottle(interval: 1_000)
        #expect(throttle.allow(now: 5_000) == 0, "the first line")
        #expect(throttle.allow(now: 5_001) == nil && throttle.allow(now: 5_999) == nil, "within the interval")
        #expect(throttle.allow(now: 6_000) == 2, "the next says two were left out")
        #expect(throttle.allow(now: 9_000) == 0)
    }
}
