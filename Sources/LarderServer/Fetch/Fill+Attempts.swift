import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Sending the request again: to the next parent, on a fresh connection after a dead pooled
/// one, or after a delay under the retry policy and its budget.
extension Fill {
    /// What the planner needs to know about this fill's attempts.
    var attemptFacts: AttemptPlanner.Facts {
        AttemptPlanner.Facts(
            method: method, routeDeclaresIdempotent: options.idempotentRoute, canResend: canResend, attempts: attempts,
            freeAttempts: freeAttempts, onFreshConnection: request.freshConnection,
            parent: currentParent == nil ? nil : (parentIndex, options.parents.count))
    }

    /// After an attempt failed before any response head: marks an unreachable parent down and
    /// carries out the planner's next step. Returns whether another attempt follows.
    func tryAgain(after error: UpstreamError) -> Bool {
        let (action, parentUnreachable) = AttemptPlanner.afterError(
            error, facts: attemptFacts, policy: options.retry, random: Double.random(in: 0..<1))
        if parentUnreachable, let parent = currentParent {
            proxy.shared.parentUnreachable(parent, backoff: options.parentBackoff, error: "\(error)")
        }
        return carryOut(action)
    }

    /// After a response head with a retryable status: whether it is retried (the caller then
    /// drops the transfer and its head, no byte having gone to a client).
    func tryAgain(afterStatus head: ResponseHead) -> Bool {
        let action = AttemptPlanner.afterStatus(
            head.status, retryAfter: head.headers["Retry-After"], facts: attemptFacts, policy: options.retry,
            now: Clocks.wallSeconds(), random: Double.random(in: 0..<1))
        guard case .retry = action else { return false }
        return carryOut(action)
    }

    /// Does what the planner decided; false for ``AttemptPlanner/Action/final`` or a retry the
    /// budget refuses.
    private func carryOut(_ action: AttemptPlanner.Action) -> Bool {
        switch action {
        case .failOver:
            parentIndex += 1
            retryLog.append(("parent", 0))
            proxy.shared.stats[.parentFailovers].add(1)
            resendNextTurn()
        case .resendOnFreshConnection:
            freeAttempts += 1
            request.freshConnection = true
            proxy.shared.stats[.deadConnectionRetries].add(1)
            resendNextTurn()
        case .retry(let reason, let delay):
            guard spendRetryBudget(reason) else { return false }
            scheduleRetry(reason, after: delay)
        case .final:
            return false
        }
        return true
    }

    /// Whether the request can go out again: its body (if any) is kept, and someone still
    /// wants the answer.
    var canResend: Bool {
        (request.body == nil || ownedBodySource is BufferedBody) && (!readers.isEmpty || options.background)
    }

    /// Forgets what a failed attempt received before the next one.
    func discardAttempt() {
        head = nil
        sink = StoreSink()
        contentLength = nil
        announcedLength = nil
        upstreamStatus = nil
    }

    func resend() {
        (ownedBodySource as? BufferedBody)?.rewind()
        attempt()
    }

    /// Drops the failed attempt and sends the request again on the loop's next turn: not from
    /// inside curl's completion callback.
    func resendNextTurn() {
        discardAttempt()
        proxy.loop.enqueueDeferred { [self] in
            guard outcome == nil else { return }
            resend()
        }
    }

    // MARK: Retries

    /// Takes a retry from the budget shared by all loops; the first refusal is logged.
    private func spendRetryBudget(_ reason: RetryPolicy.Reason) -> Bool {
        let (allowed, firstRefusal) = proxy.shared.retryBudget.tryRetry()
        if !allowed, firstRefusal {
            proxy.logger.warning(
                "retry budget exhausted: failures are final until it recovers",
                metadata: ["url": "\(proxy.loggable(key.url))", "reason": "\(reason.rawValue)"])
        }
        return allowed
    }

    /// Drops the failed attempt and schedules the next one.
    func scheduleRetry(_ reason: RetryPolicy.Reason, after delay: Duration) {
        retryLog.append((reason.rawValue, Int(delay.totalMilliseconds)))
        proxy.shared.stats.retries[reason.rawValue]?.add(1)
        discardAttempt()
        retryTimer = proxy.loop.schedule(afterNanos: delay.totalNanoseconds) { [weak self] in
            guard let self else { return }
            self.retryTimer = nil
            guard self.outcome == nil else { return }
            if self.readers.isEmpty && !self.options.background {
                self.cancel(reason: "every client left while waiting to retry")
                return
            }
            // Start over at the best parent that is up now.
            self.options.parents = self.proxy.shared.parentHealth.order(self.options.parents)
            self.parentIndex = 0
            self.resend()
        }
    }

    var readerCount: Int { readers.count }
}
