import LarderConfig
import LarderHTTP

/// What a fill does after an upstream attempt failed or answered with a retryable status: go
/// to the next parent at once, send again on a fresh connection, retry after a delay, or stop.
/// A pure function of the attempt's facts, the policy and the clock, so every path has a unit
/// test; the fill carries the action out (timers, counters, logs, the retry budget).
public enum AttemptPlanner {
    /// What the fill knows about its request and the attempts made so far.
    public struct Facts: Sendable {
        public var method: HTTPMethod
        /// The route declares its requests idempotent (`idempotent = true`).
        public var routeDeclaresIdempotent: Bool
        /// The request can go out again: its body (if any) is kept, and someone wants the answer.
        public var canResend: Bool
        /// Attempts made, the failed one included.
        public var attempts: Int
        /// Attempts the retry policy does not count (a resend on a fresh connection).
        public var freeAttempts: Int
        /// The failed attempt already went out on a connection opened for it.
        public var onFreshConnection: Bool
        /// Going through a parent proxy: which one of how many in the plan (nil: direct).
        public var parent: (index: Int, count: Int)?

        public init(
            method: HTTPMethod, routeDeclaresIdempotent: Bool, canResend: Bool, attempts: Int, freeAttempts: Int,
            onFreshConnection: Bool, parent: (index: Int, count: Int)?
        ) {
            self.method = method
            self.routeDeclaresIdempotent = routeDeclaresIdempotent
            self.canResend = canResend
            self.attempts = attempts
            self.freeAttempts = freeAttempts
            self.onFreshConnection = onFreshConnection
            self.parent = parent
        }

        /// RFC 9110 §9.2.2: only idempotent requests are repeated, unless the route says so.
        var mayRepeat: Bool { method.isIdempotent || routeDeclaresIdempotent }
    }

    /// The next step.
    public enum Action: Sendable, Equatable {
        /// Send to the next parent in the plan at once: the request never reached anyone, so
        /// it is not a retry (neither the policy nor the budget applies).
        case failOver
        /// Send again at once on a new connection: the pooled one was dead (RFC 9112 §9.3.1).
        case resendOnFreshConnection
        /// Retry after `delay`, if the retry budget allows (else ``final``).
        case retry(RetryPolicy.Reason, after: Duration)
        /// No more attempts: answer from a stale copy if one may serve, else fail.
        case final
    }

    /// After an attempt that failed before any response head.
    /// Returns the action and whether the parent it went through could not be reached (to be
    /// marked down, whatever happens next).
    public static func afterError(
        _ error: UpstreamError, facts: Facts, policy: RetryPolicy, random: Double
    ) -> (action: Action, parentUnreachable: Bool) {
        let unreached = error.kind == .dns || error.kind == .connect || (error.kind == .timeout && !error.connected)
        var parentUnreachable = false
        if let parent = facts.parent, unreached || error.kind == .reset {
            parentUnreachable = true
            // A reset after sending may have reached the origin: resend only where a retry could.
            if parent.index + 1 < parent.count, facts.canResend, unreached || facts.mayRepeat {
                return (.failOver, true)
            }
        }
        if error.kind == .reset, error.reusedConnection, facts.freeAttempts == 0, !facts.onFreshConnection, facts.canResend,
            facts.mayRepeat
        {
            return (.resendOnFreshConnection, parentUnreachable)
        }
        guard let reason = RetryPolicy.reason(for: error) else { return (.final, parentUnreachable) }
        return (retry(reason, retryAfter: nil, facts: facts, policy: policy, now: 0, random: random), parentUnreachable)
    }

    /// After a CONNECT tunnel's dial failed before the parent's 2xx (or, direct, before the
    /// target accepted): the rules of ``afterError(_:facts:policy:random:)``, so a tunnel fails
    /// over exactly where a fill does: the parent unreached (its name, its connect, a timeout
    /// before connecting) or its connection reset. Our CONNECT carries nothing of the client's
    /// (RFC 9110 §9.3.6), so asking the next parent repeats nothing; a timeout after connecting
    /// (the parent still reaching the target) or an answer that is not HTTP is final, as for a
    /// fill. A tunnel is never retried after a delay: the client waits on it.
    /// `parent`: which parent of how many the dial went through (nil: direct).
    public static func afterTunnelError(
        _ error: UpstreamError, parent: (index: Int, count: Int)?
    ) -> (action: Action, parentUnreachable: Bool) {
        var never = RetryConfig()
        never.strategy = .none
        let facts = Facts(
            method: .connect, routeDeclaresIdempotent: true, canResend: true, attempts: (parent?.index ?? 0) + 1,
            freeAttempts: parent?.index ?? 0, onFreshConnection: true, parent: parent)
        let (action, unreachable) = afterError(error, facts: facts, policy: RetryPolicy(never), random: 0)
        return (action == .failOver ? .failOver : .final, unreachable)
    }

    /// After a response head with status `status` (and its Retry-After, if any), at wall-clock
    /// time `now`: a retry, or ``Action/final`` when the status is not retried (the response
    /// then goes to the clients as it is).
    public static func afterStatus(
        _ status: Int, retryAfter: String?, facts: Facts, policy: RetryPolicy, now: Double, random: Double
    ) -> Action {
        guard let reason = RetryPolicy.reason(forStatus: status) else { return .final }
        return retry(reason, retryAfter: retryAfter, facts: facts, policy: policy, now: now, random: random)
    }

    /// A retry for `reason` when the policy allows one more: the policy's delay with jitter
    /// (`random` in [0, 1)), or the origin's Retry-After for 429 and 5xx when it is not too long
    /// (RFC 9110 §10.2.3).
    static func retry(
        _ reason: RetryPolicy.Reason, retryAfter: String?, facts: Facts, policy: RetryPolicy, now: Double, random: Double
    ) -> Action {
        let counted = facts.attempts - facts.freeAttempts
        guard policy.retries(reason), counted <= policy.config.maxAttempts, facts.canResend, facts.mayRepeat else { return .final }
        var delay = policy.delay(forRetry: counted - 1, random: { random })
        if let retryAfter, reason == .status429 || reason == .status5xx, let wanted = RetryPolicy.retryAfter(retryAfter, now: now) {
            guard policy.honours(retryAfter: wanted) else { return .final }
            delay = wanted
        }
        return .retry(reason, after: delay)
    }
}
