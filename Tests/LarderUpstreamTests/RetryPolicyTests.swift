import LarderConfig
import LarderHTTP
import LarderUpstream
import Synchronization
import Testing

private func policy(_ configure: (inout RetryConfig) -> Void = { _ in }) -> RetryPolicy {
    var config = RetryConfig()
    configure(&config)
    return RetryPolicy(config)
}

@Suite(.timeLimit(.minutes(1))) struct RetryPolicyTests {
    @Test func exponentialDelaysDoubleUpToTheCap() {
        let retry = policy {
            $0.baseDelay = .milliseconds(200)
            $0.multiplier = 2
            $0.maxDelay = .seconds(1)
            $0.jitter = .zero
        }
        let delays = (0..<5).map { retry.delay(forRetry: $0, random: { 0 }).totalMilliseconds }
        #expect(delays == [200, 400, 800, 1000, 1000])
    }

    @Test func linearDelaysAreConstant() {
        let retry = policy {
            $0.strategy = .linear
            $0.baseDelay = .milliseconds(300)
            $0.jitter = .zero
        }
        #expect((0..<4).map { retry.delay(forRetry: $0, random: { 0 }).totalMilliseconds } == [300, 300, 300, 300])
    }

    @Test func jitterAddsUpToItsMaximum() {
        let retry = policy {
            $0.baseDelay = .milliseconds(100)
            $0.jitter = .milliseconds(50)
        }
        #expect(retry.delay(forRetry: 0, random: { 0 }).totalMilliseconds == 100)
        #expect(retry.delay(forRetry: 0, random: { 0.5 }).totalMilliseconds == 125)
        #expect(retry.delay(forRetry: 0, random: { 0.999999 }).totalMilliseconds == 149)
        #expect(retry.delay(forRetry: 0, random: { 7 }).totalMilliseconds == 150, "random values are clamped")
        for _ in 0..<100 {
            let delay = retry.delay(forRetry: 0, random: { Double.random(in: 0..<1) }).totalMilliseconds
            #expect((100...150).contains(delay))
        }
    }

    @Test func strategyNoneRetriesNothing() {
        let retry = policy { $0.strategy = .none }
        #expect(!retry.retries(.connect))
        #expect(!policy { $0.maxAttempts = 0 }.retries(.connect))
    }

    @Test func classesComeFromRetryOn() {
        let retry = policy { $0.retryOn = [.connect, .status5xx] }
        #expect(retry.retries(.connect))
        #expect(retry.retries(.status5xx))
        #expect(!retry.retries(.timeout))
        #expect(!retry.retries(.status500))
        #expect(!retry.retries(.status429))
    }

    @Test func statusesMapToClasses() {
        #expect(RetryPolicy.reason(forStatus: 502) == .status5xx)
        #expect(RetryPolicy.reason(forStatus: 503) == .status5xx)
        #expect(RetryPolicy.reason(forStatus: 504) == .status5xx)
        #expect(RetryPolicy.reason(forStatus: 500) == .status500)
        #expect(RetryPolicy.reason(forStatus: 429) == .status429)
        for status in [200, 304, 400, 404, 409, 501] { #expect(RetryPolicy.reason(forStatus: status) == nil) }
    }

    @Test func errorsMapToClassesAndNeverAfterTheHead() {
        #expect(RetryPolicy.reason(for: UpstreamError(kind: .connect, message: "", afterHead: false)) == .connect)
        #expect(RetryPolicy.reason(for: UpstreamError(kind: .dns, message: "", afterHead: false)) == nil, "host not found is final")
        #expect(RetryPolicy.reason(for: UpstreamError(kind: .timeout, message: "", afterHead: false)) == .timeout)
        #expect(RetryPolicy.reason(for: UpstreamError(kind: .reset, message: "", afterHead: false)) == .reset)
        #expect(RetryPolicy.reason(for: UpstreamError(kind: .timeout, message: "", afterHead: true)) == nil)
        #expect(RetryPolicy.reason(for: UpstreamError(kind: .truncated, message: "", afterHead: true)) == nil)
    }

    @Test func onlyIdempotentMethodsUnlessTheRouteSaysSo() {
        for method in [HTTPMethod.get, .head, .options, .put, .delete] {
            #expect(RetryPolicy.mayRetry(method: method, routeDeclaresIdempotent: false))
        }
        #expect(!RetryPolicy.mayRetry(method: .post, routeDeclaresIdempotent: false))
        #expect(!RetryPolicy.mayRetry(method: .patch, routeDeclaresIdempotent: false))
        #expect(RetryPolicy.mayRetry(method: .post, routeDeclaresIdempotent: true))
    }

    @Test func retryAfterInBothForms() {
        #expect(RetryPolicy.retryAfter("120", now: 0) == .seconds(120))
        #expect(RetryPolicy.retryAfter(" 5 ", now: 0) == .seconds(5))
        #expect(RetryPolicy.retryAfter(HTTPDate.format(1_000_030), now: 1_000_000) == .seconds(30))
        #expect(RetryPolicy.retryAfter(HTTPDate.format(999_000), now: 1_000_000) == .zero, "a past date means now")
        #expect(RetryPolicy.retryAfter("soon", now: 0) == nil)
        #expect(RetryPolicy.retryAfter("-5", now: 0) == nil)
        let retry = policy { $0.maxDelay = .seconds(10) }
        #expect(retry.honours(retryAfter: .seconds(10)))
        #expect(!retry.honours(retryAfter: .seconds(11)))
    }
}

@Suite(.timeLimit(.minutes(1))) struct RetryBudgetTests {
    /// A clock the test moves.
    final class TestClock: Sendable {
        let now = Mutex(1000.0)
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
        var read: @Sendable () -> Double { { [self] in now.withLock { $0 } } }
    }

    @Test func retriesAreCappedAtAShareOfRequests() {
        let clock = TestClock()
        let budget = RetryBudget(ratio: 0.2, floor: 2, window: 10, clock: clock.read)
        for _ in 0..<100 { budget.recordRequest() }
        var allowed = 0
        for _ in 0..<50 where budget.tryRetry().allowed { allowed += 1 }
        #expect(allowed == 20)
        #expect(budget.exhausted.load() == 30)
    }

    @Test func theFloorAllowsAFewRetriesWithoutTraffic() {
        let budget = RetryBudget(ratio: 0.2, floor: 3, window: 10, clock: TestClock().read)
        #expect((0..<5).filter { _ in budget.tryRetry().allowed }.count == 3)
    }

    @Test func theWindowSlides() {
        let clock = TestClock()
        let budget = RetryBudget(ratio: 0.1, floor: 0, window: 10, clock: clock.read)
        for _ in 0..<100 { budget.recordRequest() }
        #expect((0..<20).filter { _ in budget.tryRetry().allowed }.count == 10)
        clock.advance(11)
        #expect(!budget.tryRetry().allowed, "old requests left the window")
        for _ in 0..<10 { budget.recordRequest() }
        #expect(budget.tryRetry().allowed)
    }

    @Test func exhaustionIsReportedOncePerWindow() {
        let clock = TestClock()
        let budget = RetryBudget(ratio: 0, floor: 0, window: 10, clock: clock.read)
        #expect(budget.tryRetry() == (false, true))
        #expect(budget.tryRetry() == (false, false))
        clock.advance(10)
        #expect(budget.tryRetry() == (false, true))
    }
}
