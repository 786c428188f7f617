import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// One upstream request and its attempts, as a state machine in the manner of Varnish's
/// cache_fetch.c: the transfer's callbacks come in as ``Event``s, and the pure
/// ``step(on:options:canResend:settings:now:random:spendRetry:)`` moves the ``Phase`` and
/// returns the ``Action`` its ``Fill`` carries out (counters, parent health, timers, readers).
/// It asks the ``AttemptPlanner`` what follows a failed attempt: the next parent, a resend on
/// a fresh connection after a dead pooled one, a delayed retry under the policy and its
/// budget, or the failure as the answer (a stale stored copy in its place when one may serve).
///
/// State: loop-confined, like its fill; a resend is never made from inside curl's callback.
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
    /// pooled connection turned out dead (``AttemptPlanner/Action/resendOnFreshConnection``),
    /// and the one without validators after a 304 that updates nothing.
    private(set) var freeAttempts = 0
    /// Larder's validation was answered by a 304 that updates nothing
    /// (``Event/validatorContradicted``): the fill's answer is no longer a validation's.
    private(set) var validationRefused = false
    /// Each retry: why, and the delay before it (for the access log).
    private(set) var retryLog: [(reason: String, delayMillis: Int)] = []
    var retryTimer: EventLoop.TimerToken?
    /// Where the fetch stands.
    private(set) var phase = Phase.idle

    /// Where the fetch stands.
    enum Phase: Equatable {
        /// Not sent yet.
        case idle
        /// An attempt is out, no head yet: a failure may still be retried.
        case awaitingHead
        /// The attempt's head is the answer: its body streams to the readers.
        case receivingBody
        /// An attempt failed (or its head was a retryable status): another is due.
        case waitingToResend
        /// The fetch is over: the answer is complete, failed, or the fill stopped it.
        case ended
    }

    /// What the transfer reported.
    enum Event {
        /// The final response head, with what the planner reads of it (RFC 9110 §10.2.3).
        case head(status: Int, retryAfter: String?)
        /// Body bytes.
        case body
        /// The transfer completed.
        case end
        /// The transfer failed.
        case error(UpstreamError)
        /// The head was a 304 to Larder's validation whose ETag does not name the stored
        /// response: it selects no stored response to update (RFC 9111 §4.3.4).
        case validatorContradicted
    }

    /// What the fill does.
    enum Action: Equatable {
        /// The head is the answer. `failure`: a retryable status that is not retried, counted
        /// as a final failure.
        case accept(failure: RetryPolicy.Reason?)
        /// Body bytes of the answer: take them.
        case take
        /// The answer is complete.
        case complete
        /// Drop the attempt and send to the next parent on the loop's next turn.
        case failOver
        /// Drop the attempt and send again on a fresh connection on the loop's next turn.
        case resendOnFreshConnection
        /// Drop the attempt (a 304 that updates nothing) and send again without Larder's
        /// validators on the loop's next turn, for the object itself.
        case resendUnconditionally
        /// Drop the attempt (a retried head too) and send again after `after`, at the best
        /// parent that is up then.
        case retry(RetryPolicy.Reason, after: Duration)
        /// The failure stands, but a stale stored response answers in its place (RFC 5861 §4),
        /// the cause kept for the access log.
        case answerStale(FailureCause)
        /// The failure is the answer.
        case fail(UpstreamError)
        /// The event does not belong to the phase (the fetch moved on): nothing to do.
        case ignore
    }

    /// A step's action, and the parent to mark down whatever the action (it could not be
    /// reached).
    struct Step: Equatable {
        let action: Action
        var parentDown: ParentPlan.Parent? = nil
    }

    init(request: consuming UpstreamRequest, parents: [ParentPlan.Parent], starter: any UpstreamStarting) {
        self.request = consume request
        self.parents = parents
        self.starter = starter
    }

    /// The parent this attempt goes through; nil when it goes direct.
    var currentParent: ParentPlan.Parent? {
        parentIndex < parents.count ? parents[parentIndex] : nil
    }

    /// Sends the request (again), through the current parent if any.
    mutating func send(delegate: any UpstreamTransferDelegate) {
        attempts += 1
        phase = .awaitingHead
        if let parent = currentParent { request.parentProxy = parent.url }
        transfer = starter.startTransfer(request, delegate: delegate)
    }

    /// Drops the transfer whose head is retried (the retry is scheduled).
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
        phase = .ended
    }

    /// A delayed retry starts over at the best parent that is up now.
    mutating func startOverAtBestParent(_ health: ParentHealth) {
        parents = health.order(parents)
        parentIndex = 0
    }

    /// The next step after `event`: pure but for `spendRetry`, which takes a retry from the
    /// budget shared by all loops (false: refused, the failure is final). `now` is the wall
    /// clock in seconds (Retry-After, stale-if-error), `random` in 0..<1 (the retry's jitter);
    /// these, `options` and `canResend` are read only by the steps that need them (a fill's
    /// options are copied to be read: not for every body chunk).
    mutating func step(
        on event: Event, options: @autoclosure () -> FillOptions, canResend: @autoclosure () -> Bool, settings: FillSettings,
        now: @autoclosure () -> Double, random: @autoclosure () -> Double, spendRetry: (RetryPolicy.Reason) -> Bool
    ) -> Step {
        switch (phase, event) {
        case (.receivingBody, .body):
            return Step(action: .take)
        case (.awaitingHead, .head(let status, let retryAfter)):
            guard let reason = RetryPolicy.reason(forStatus: status) else {
                phase = .receivingBody
                return Step(action: .accept(failure: nil))
            }
            let options = options()
            let action = AttemptPlanner.afterStatus(
                status, retryAfter: retryAfter, facts: facts(options: options, canResend: canResend()), policy: options.retry,
                now: now(), random: random())
            if case .retry = action, let next = take(action, spendRetry: spendRetry) { return next }
            phase = .receivingBody
            // A first 500 is not yet a failure of the origin's: one retry is its due.
            return Step(action: .accept(failure: reason != .status500 || !retryLog.isEmpty ? reason : nil))
        case (.awaitingHead, .end), (.receivingBody, .end):
            phase = .ended
            transfer = nil
            return Step(action: .complete)
        case (.awaitingHead, .error(let error)):
            transfer = nil
            let options = options()
            let (action, unreachable) = AttemptPlanner.afterError(
                error, facts: facts(options: options, canResend: canResend()), policy: options.retry, random: random())
            let parentDown = unreachable ? currentParent : nil
            if let next = take(action, spendRetry: spendRetry) {
                return Step(action: next.action, parentDown: parentDown)
            }
            phase = .ended
            if error.kind != .forbidden, options.staleAnswerForError(settings: settings, now: now()) != nil {
                return Step(action: .answerStale(FailureCause(error)), parentDown: parentDown)
            }
            return Step(action: .fail(error), parentDown: parentDown)
        case (.receivingBody, .validatorContradicted):
            // Once: an origin that answers 304 to the unconditional request too is answered
            // as it is. So is a request that cannot be sent again (no one waits any more, or
            // its body cannot be replayed): its 304 is then no validation's either.
            guard !validationRefused else { return Step(action: .ignore) }
            validationRefused = true
            guard canResend() else { return Step(action: .ignore) }
            request = request.withoutValidators()
            freeAttempts += 1
            phase = .waitingToResend
            return Step(action: .resendUnconditionally)
        case (.receivingBody, .error(let error)):
            // Bytes have gone to readers: the attempt cannot be made again.
            phase = .ended
            transfer = nil
            return Step(action: .fail(error))
        default:
            return Step(action: .ignore)
        }
    }

    /// What the planner needs to know about these attempts.
    private func facts(options: FillOptions, canResend: Bool) -> AttemptPlanner.Facts {
        AttemptPlanner.Facts(
            method: request.method, routeDeclaresIdempotent: options.idempotentRoute, canResend: canResend, attempts: attempts,
            freeAttempts: freeAttempts, onFreshConnection: request.freshConnection,
            parent: currentParent == nil ? nil : (parentIndex, parents.count))
    }

    /// Records what the planner decided, when another attempt follows; nil when none does
    /// (``AttemptPlanner/Action/final``, or a retry the budget refuses).
    private mutating func take(_ action: AttemptPlanner.Action, spendRetry: (RetryPolicy.Reason) -> Bool) -> Step? {
        switch action {
        case .failOver:
            parentIndex += 1
            retryLog.append(("parent", 0))
            phase = .waitingToResend
            return Step(action: .failOver)
        case .resendOnFreshConnection:
            freeAttempts += 1
            request.freshConnection = true
            phase = .waitingToResend
            return Step(action: .resendOnFreshConnection)
        case .retry(let reason, let delay):
            guard spendRetry(reason) else { return nil }
            retryLog.append((reason.rawValue, Int(delay.totalMilliseconds)))
            phase = .waitingToResend
            return Step(action: .retry(reason, after: delay))
        case .final:
            return nil
        }
    }
}
