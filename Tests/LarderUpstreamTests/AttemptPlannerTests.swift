import LarderConfig
import LarderHTTP
import Testing

@testable import LarderUpstream

/// Every path out of a failed attempt: failover, a fresh connection, a retry with its delay, or
/// the end; the clock (for Retry-After) and the jitter are parameters.
@Suite(.timeLimit(.minutes(1))) struct AttemptPlannerTests {
    let policy = RetryPolicy(RetryConfig())  // exponential 200 ms × 2, jitter 100 ms, 3 retries, connect/timeout/5xx

    func facts(
        method: HTTPMethod = .get, attempts: Int = 1, free: Int = 0, fresh: Bool = false, canResend: Bool = true,
        parent: (Int, Int)? = nil, idempotentRoute: Bool = false
    ) -> AttemptPlanner.Facts {
        AttemptPlanner.Facts(
            method: method, routeDeclaresIdempotent: idempotentRoute, canResend: canResend, attempts: attempts, freeAttempts: free,
            onFreshConnection: fresh, parent: parent)
    }

    let refused = UpstreamError(kind: .connect, message: "refused", afterHead: false, connected: false)
    let deadPooled = UpstreamError(kind: .reset, message: "reset", afterHead: false, reusedConnection: true)

    @Test func retriesBackOffExponentiallyWithJitterUntilTheAttemptsRunOut() {
        let delays = (1...3).map { attempts in
            AttemptPlanner.afterError(refused, facts: facts(attempts: attempts), policy: policy, random: 0.5).action
        }
        #expect(
            delays == [
                .retry(.connect, after: .milliseconds(250)), .retry(.connect, after: .milliseconds(450)),
                .retry(.connect, after: .milliseconds(850)),
            ])
        #expect(AttemptPlanner.afterError(refused, facts: facts(attempts: 4), policy: policy, random: 0.5).action == .final)
    }

    @Test func onlyRepeatableRequestsThatCanBeResentAreRetried() {
        #expect(AttemptPlanner.afterError(refused, facts: facts(method: .post), policy: policy, random: 0).action == .final)
        #expect(
            AttemptPlanner.afterError(refused, facts: facts(method: .post, idempotentRoute: true), policy: policy, random: 0).action
                == .retry(.connect, after: .milliseconds(200)))
        #expect(AttemptPlanner.afterError(refused, facts: facts(canResend: false), policy: policy, random: 0).action == .final)
        let truncated = UpstreamError(kind: .truncated, message: "short", afterHead: true)
        #expect(AttemptPlanner.afterError(truncated, facts: facts(), policy: policy, random: 0).action == .final)
        var none = RetryConfig()
        none.strategy = .none
        #expect(AttemptPlanner.afterError(refused, facts: facts(), policy: RetryPolicy(none), random: 0).action == .final)
    }

    /// A dead pooled connection is resent once at once, outside the policy (reset is not in
    /// the default retry_on).
    @Test func aDeadPooledConnectionIsResentOnceOnAFreshOne() {
        #expect(AttemptPlanner.afterError(deadPooled, facts: facts(), policy: policy, random: 0).action == .resendOnFreshConnection)
        #expect(
            AttemptPlanner.afterError(deadPooled, facts: facts(attempts: 2, free: 1, fresh: true), policy: policy, random: 0).action
                == .final)
        #expect(AttemptPlanner.afterError(deadPooled, facts: facts(method: .post), policy: policy, random: 0).action == .final)
    }

    @Test func anUnreachableParentFailsOverToTheNextAndIsMarkedDown() {
        let first = AttemptPlanner.afterError(refused, facts: facts(parent: (0, 2)), policy: policy, random: 0)
        #expect(first.action == .failOver && first.parentUnreachable)
        // The last parent: marked down, and the policy decides.
        let last = AttemptPlanner.afterError(refused, facts: facts(parent: (1, 2)), policy: policy, random: 0)
        #expect(last.action == .retry(.connect, after: .milliseconds(200)) && last.parentUnreachable)
        // A reset after sending may have reached the origin: a POST does not go to the next parent.
        let reset = UpstreamError(kind: .reset, message: "reset", afterHead: false)
        let post = AttemptPlanner.afterError(reset, facts: facts(method: .post, parent: (0, 2)), policy: policy, random: 0)
        #expect(post.action == .final && post.parentUnreachable)
        // A timeout once connected reached the parent: no failover, not marked down.
        let slow = UpstreamError(kind: .timeout, message: "slow", afterHead: false, connected: true)
        let timedOut = AttemptPlanner.afterError(slow, facts: facts(parent: (0, 2)), policy: policy, random: 0)
        #expect(timedOut.action == .retry(.timeout, after: .milliseconds(200)) && !timedOut.parentUnreachable)
    }

    /// Retry-After (RFC 9110 §10.2.3) replaces the policy's delay when it is within max_delay,
    /// in seconds or as a date read against the clock given.
    @Test func retryAfterIsHonouredWhenShortEnough() {
        let now = 1_764_000_000.0
        #expect(
            AttemptPlanner.afterStatus(503, retryAfter: "3", facts: facts(), policy: policy, now: now, random: 0)
                == .retry(.status5xx, after: .seconds(3)))
        let date = HTTPDate.format(Int(now) + 5)
        #expect(
            AttemptPlanner.afterStatus(503, retryAfter: date, facts: facts(), policy: policy, now: now, random: 0)
                == .retry(.status5xx, after: .seconds(5)))
        #expect(AttemptPlanner.afterStatus(503, retryAfter: "3600", facts: facts(), policy: policy, now: now, random: 0) == .final)
        #expect(
            AttemptPlanner.afterStatus(503, retryAfter: nil, facts: facts(), policy: policy, now: now, random: 0)
                == .retry(.status5xx, after: .milliseconds(200)))
        #expect(AttemptPlanner.afterStatus(404, retryAfter: nil, facts: facts(), policy: policy, now: now, random: 0) == .final)
        #expect(
            AttemptPlanner.afterStatus(429, retryAfter: "1", facts: facts(), policy: policy, now: now, random: 0) == .final,
            "429 is not in the default retry_on")
    }

    /// A CONNECT tunnel's dial fails over where a fill's attempt does, and nowhere else: the
    /// parent unreached or resetting us; not a timeout after connecting, not a non-HTTP answer,
    /// not from the last parent, not when direct. Never a delayed retry.
    @Test(
        arguments: [
            (UpstreamError.Kind.dns, false, (0, 2), AttemptPlanner.Action.failOver, true),
            (.connect, false, (0, 2), .failOver, true),
            (.timeout, false, (0, 2), .failOver, true),
            (.reset, true, (0, 2), .failOver, true),
            (.reset, true, (1, 3), .failOver, true),
            (.timeout, true, (0, 2), .final, false),
            (.protocolError, true, (0, 2), .final, false),
            (.connect, false, (1, 2), .final, true),
            (.reset, true, (1, 2), .final, true),
            (.connect, false, nil, .final, false),
            (.timeout, false, nil, .final, false),
        ] as [(UpstreamError.Kind, Bool, (Int, Int)?, AttemptPlanner.Action, Bool)])
    func tunnelsFailOverAsFillsDo(
        kind: UpstreamError.Kind, connected: Bool, parent: (Int, Int)?, action: AttemptPlanner.Action, unreachable: Bool
    ) {
        let error = UpstreamError(kind: kind, message: "x", afterHead: false, connected: connected)
        let planned = AttemptPlanner.afterTunnelError(error, parent: parent)
        #expect(planned.action == action)
        #expect(planned.parentUnreachable == unreachable)
        // The same facts for a GET fill through the same parents decide the same failover.
        if let parent {
            let fill = AttemptPlanner.afterError(error, facts: facts(fresh: true, parent: parent), policy: policy, random: 0)
            #expect((fill.action == .failOver) == (action == .failOver))
            #expect(fill.parentUnreachable == unreachable)
        }
    }
}
