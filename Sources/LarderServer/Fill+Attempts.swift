import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Sending the request again: to the next parent, on a fresh connection after a dead pooled
/// one, or after a delay under the retry policy and its budget.
extension Fill {
    // MARK: Parent failover

    /// After a failure to reach the current parent: marks it down and, if another parent is
    /// left in the plan, sends the request there at once (true). Not a retry: the request
    /// never reached anyone, so neither the retry policy nor its budget applies; but a request
    /// that may have been forwarded (reset after sending) is only re-sent where a retry could be.
    func failOver(after error: UpstreamError) -> Bool {
        guard let parent = currentParent else { return false }
        let unreached = error.kind == .dns || error.kind == .connect || (error.kind == .timeout && !error.connected)
        guard unreached || error.kind == .reset else { return false }
        proxy.shared.parentUnreachable(parent, backoff: options.parentBackoff, error: "\(error)")
        guard parentIndex + 1 < options.parents.count, canResend,
            unreached || RetryPolicy.mayRetry(method: method, routeDeclaresIdempotent: options.idempotentRoute)
        else { return false }
        parentIndex += 1
        retryLog.append(("parent", 0))
        proxy.shared.stats.parentFailovers.add(1)
        resendNextTurn()
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
        memoryEntryParts = nil
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

    /// An idempotent request that went out only on pooled connections and got nothing back
    /// (the origin had dropped them while idle, RFC 9112 §9.3.1) is sent again at once on a new
    /// connection: once, outside the retry policy and its budget. Returns whether it was.
    func retryOnFreshConnection(after error: UpstreamError) -> Bool {
        guard error.kind == .reset, error.reusedConnection, freeAttempts == 0, !request.freshConnection, canResend,
            RetryPolicy.mayRetry(method: method, routeDeclaresIdempotent: options.idempotentRoute)
        else { return false }
        freeAttempts += 1
        request.freshConnection = true
        proxy.shared.stats.deadConnectionRetries.add(1)
        resendNextTurn()
        return true
    }

    /// The delay before retrying after `reason`, or nil when this failure is final: the policy
    /// does not retry it, the attempts are used up, the method may not be repeated, the request
    /// body cannot be sent again, nobody is waiting, a Retry-After is too long, or the retry
    /// budget is spent. The one timer is the fill's: waiting clients hold none.
    func retryDelay(_ reason: RetryPolicy.Reason, retryAfter: String? = nil) -> Duration? {
        let policy = options.retry
        guard policy.retries(reason), attempts - freeAttempts <= policy.config.maxAttempts, canResend,
            RetryPolicy.mayRetry(method: method, routeDeclaresIdempotent: options.idempotentRoute)
        else { return nil }
        var delay = policy.delay(forRetry: attempts - freeAttempts - 1, random: { Double.random(in: 0..<1) })
        if let retryAfter, reason == .status429 || reason == .status5xx,
            let wanted = RetryPolicy.retryAfter(retryAfter, now: Clocks.wallSeconds())
        {
            // RFC 9110 §10.2.3: the origin says when; wait that long if it is not too long.
            guard policy.honours(retryAfter: wanted) else { return nil }
            delay = wanted
        }
        let (allowed, firstRefusal) = proxy.shared.retryBudget.tryRetry()
        guard allowed else {
            if firstRefusal {
                proxy.logger.warning(
                    "retry budget exhausted: failures are final until it recovers",
                    metadata: ["url": "\(key)", "reason": "\(reason.rawValue)"])
            }
            return nil
        }
        return delay
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

    /// `attempts=N` and the retries with their reasons and delays, for logs and Cache-Status.
    var attemptSummary: String {
        guard !retryLog.isEmpty else { return "attempts=\(attempts)" }
        return "attempts=\(attempts) retries=" + retryLog.map { "\($0.reason):\($0.delayMillis)ms" }.joined(separator: ",")
    }

    var isFinished: Bool { outcome != nil }
    var readerCount: Int { readers.count }
}
