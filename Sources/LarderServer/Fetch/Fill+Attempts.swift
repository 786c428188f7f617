import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Sending the request again, as the fetch's step says: on the loop's next turn (the next
/// parent, a fresh connection after a dead pooled one) or after a delay.
extension Fill {
    /// Whether the request can go out again: its body (if any) is kept, and someone still
    /// wants the answer.
    /// Read while the fetch takes its step: the fetch itself is not read here.
    var canResend: Bool {
        (!sendsBody || ownedBodySource is BufferedBody) && (!buffer.readers.isEmpty || options.background)
    }

    /// Schedules the next attempt the fetch decided on, counting it.
    func carryOut(_ action: UpstreamFetch.Action) {
        switch action {
        case .failOver:
            proxy.telemetry.stats[.parentFailovers].add(1)
            resendNextTurn()
        case .resendOnFreshConnection:
            proxy.telemetry.stats[.deadConnectionRetries].add(1)
            resendNextTurn()
        case .resendUnconditionally:
            resendNextTurn()
        case .retry(let reason, let delay):
            proxy.telemetry.stats.retries[reason.rawValue]?.add(1)
            discardAttempt()
            fetch.retryTimer = proxy.loop.schedule(afterNanos: delay.totalNanoseconds) { [weak self] in
                self?.retryDue()
            }
        case .accept, .take, .complete, .answerStale, .fail, .ignore:
            break
        }
    }

    /// Drops the attempt and sends again on the loop's next turn (never from inside curl's
    /// callback).
    private func resendNextTurn() {
        discardAttempt()
        proxy.loop.enqueueDeferred { [self] in
            guard outcome == nil else { return }
            resend()
        }
    }

    /// Takes a retry from the budget shared by all loops; the first refusal is logged.
    func spendRetryBudget(_ reason: RetryPolicy.Reason) -> Bool {
        let (allowed, firstRefusal) = proxy.forwarding.retryBudget.tryRetry()
        if !allowed, firstRefusal {
            proxy.logger.warning(
                "retry budget exhausted: failures are final until it recovers",
                metadata: ["url": "\(proxy.loggable(key.url))", "reason": "\(reason.rawValue)"])
        }
        return allowed
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

    /// A delayed retry's time: it starts over at the best parent that is up now, unless every
    /// client left meanwhile.
    private func retryDue() {
        fetch.retryTimer = nil
        guard outcome == nil else { return }
        if buffer.readers.isEmpty && !options.background {
            cancel(reason: "every client left while waiting to retry")
            return
        }
        fetch.startOverAtBestParent(proxy.forwarding.parentHealth)
        resend()
    }

    var readerCount: Int { buffer.readers.count }
}
