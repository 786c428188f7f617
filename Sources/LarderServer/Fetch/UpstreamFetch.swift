import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// One upstream request and its attempts: the transfer running now, the parent it goes
/// through, and what the ``AttemptPlanner`` decides after a failed attempt (the next parent,
/// a resend on a fresh connection after a dead pooled one, a delayed retry under the policy
/// and its budget), with the attempts and retries the access log reports.
///
/// A value inside its ``Fill``, which is the transfer's delegate and turns each of its
/// callbacks into a step here: the fill schedules what a ``Next`` asks for on its loop (a
/// resend is never made from inside curl's callback).
///
/// State: loop-confined, like its fill.
struct UpstreamFetch {
    /// The request, kept to send again on a retry (its parent proxy changes on failover).
    var request: UpstreamRequest
    /// What starts the transfers: the loop's ``UpstreamClient``, or a test's stand-in.
    let starter: any UpstreamStarting
    private(set) var transfer: (any UpstreamTransferControl)?
    /// The parent proxies to go through, best first (empty: direct).
    private(set) var parents: [ParentPlan.Parent]
    /// Which of ``parents`` this attempt goes through.
    private(set) var parentIndex = 0
    /// Attempts made so far (1 once started).
    private(set) var attempts = 0
    /// Attempts that do not count against the retry policy: the one immediate resend after a
    /// pooled connection turned out dead (``AttemptPlanner/Action/resendOnFreshConnection``).
    private(set) var freeAttempts = 0
    /// Each retry: why, and the delay before it (for the access log).
    private(set) var retryLog: [(reason: String, delayMillis: Int)] = []
    var retryTimer: EventLoop.TimerToken?

    /// What the fill does after a failed attempt.
    enum Next: Equatable {
        /// Drop the attempt and send again on the loop's next turn.
        case resendNextTurn
        /// Drop the attempt and send again after this delay, at the best parent up then.
        case retry(after: Duration)
        /// The failure is the answer.
        case final
    }

    init(request: UpstreamRequest, parents: [ParentPlan.Parent], starter: any UpstreamStarting) {
        self.request = request
        self.parents = parents
        self.starter = starter
    }

    /// The parent this attempt goes through; nil when it goes direct.
    var currentParent: ParentPlan.Parent? {
        parentIndex < parents.count ? parents[parentIndex] : nil
    }

    /// Sends the request (again), through the current parent if any.
    mutating func send(delegate: any UpstreamTransferDelegate, shared: SharedState) {
        attempts += 1
        shared.stats[.upstreamRequests].add(1)
        if let parent = currentParent {
            request.parentProxy = parent.url
            shared.parentHealth.recordAttempt(parent)
        }
        transfer = starter.startTransfer(request, delegate: delegate)
    }

    /// A response head arrived: the parent it came through is up.
    func headArrived(_ health: ParentHealth) {
        if let parent = currentParent { health.recordSuccess(parent) }
    }

    /// The transfer ended (its delegate heard the end).
    mutating func transferEnded() {
        transfer = nil
    }

    /// Drops the transfer that delivered a head to be retried (the retry may be scheduled).
    mutating func cancelTransfer() {
        transfer?.cancel()
        transfer = nil
    }

    /// Stops the transfer and any retry waiting to start.
    mutating func stop(on loop: EventLoop) {
        if let retryTimer { loop.cancel(retryTimer) }
        retryTimer = nil
        transfer?.cancel()
        transfer = nil
    }

    /// A delayed retry starts over at the best parent that is up now.
    mutating func startOverAtBestParent(_ health: ParentHealth) {
        parents = health.order(parents)
        parentIndex = 0
    }

    /// What the planner needs to know about these attempts.
    func facts(method: HTTPMethod, options: FillOptions, canResend: Bool) -> AttemptPlanner.Facts {
        AttemptPlanner.Facts(
            method: method, routeDeclaresIdempotent: options.idempotentRoute, canResend: canResend, attempts: attempts,
            freeAttempts: freeAttempts, onFreshConnection: request.freshConnection,
            parent: currentParent == nil ? nil : (parentIndex, parents.count))
    }

    /// After an attempt failed before any response head: marks an unreachable parent down and
    /// takes the planner's next step.
    mutating func next(
        after error: UpstreamError, method: HTTPMethod, options: FillOptions, canResend: Bool, key: CacheKey, proxy: ProxyLoop
    ) -> Next {
        let (action, parentUnreachable) = AttemptPlanner.afterError(
            error, facts: facts(method: method, options: options, canResend: canResend), policy: options.retry,
            random: Double.random(in: 0..<1))
        if parentUnreachable, let parent = currentParent {
            proxy.shared.parentUnreachable(parent, backoff: options.parentBackoff, error: "\(error)")
        }
        return take(action, key: key, proxy: proxy)
    }

    /// After a response head with a retryable status: ``Next/final`` unless it is retried (the
    /// fill then drops the transfer and its head, no byte having gone to a client).
    mutating func next(
        afterStatus head: ResponseHead, method: HTTPMethod, options: FillOptions, canResend: Bool, key: CacheKey, proxy: ProxyLoop
    ) -> Next {
        let action = AttemptPlanner.afterStatus(
            head.status, retryAfter: head.headers["Retry-After"],
            facts: facts(method: method, options: options, canResend: canResend), policy: options.retry,
            now: Clocks.wallSeconds(), random: Double.random(in: 0..<1))
        guard case .retry = action else { return .final }
        return take(action, key: key, proxy: proxy)
    }

    /// Records what the planner decided; ``Next/final`` also for a retry the budget refuses.
    private mutating func take(_ action: AttemptPlanner.Action, key: CacheKey, proxy: ProxyLoop) -> Next {
        switch action {
        case .failOver:
            parentIndex += 1
            retryLog.append(("parent", 0))
            proxy.shared.stats[.parentFailovers].add(1)
            return .resendNextTurn
        case .resendOnFreshConnection:
            freeAttempts += 1
            request.freshConnection = true
            proxy.shared.stats[.deadConnectionRetries].add(1)
            return .resendNextTurn
        case .retry(let reason, let delay):
            guard spendRetryBudget(reason, key: key, proxy: proxy) else { return .final }
            retryLog.append((reason.rawValue, Int(delay.totalMilliseconds)))
            proxy.shared.stats.retries[reason.rawValue]?.add(1)
            return .retry(after: delay)
        case .final:
            return .final
        }
    }

    /// Takes a retry from the budget shared by all loops; the first refusal is logged.
    private func spendRetryBudget(_ reason: RetryPolicy.Reason, key: CacheKey, proxy: ProxyLoop) -> Bool {
        let (allowed, firstRefusal) = proxy.shared.retryBudget.tryRetry()
        if !allowed, firstRefusal {
            proxy.logger.warning(
                "retry budget exhausted: failures are final until it recovers",
                metadata: ["url": "\(proxy.loggable(key.url))", "reason": "\(reason.rawValue)"])
        }
        return allowed
    }
}
