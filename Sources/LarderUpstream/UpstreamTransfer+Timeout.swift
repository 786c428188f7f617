import LarderIO

/// A transfer's own timeout, on the loop's timers: curl's CURLOPT_TIMEOUT would also count the
/// time a transfer is paused for a slow client. The rules are ``TransferDeadline``'s. No curl
/// call here (UpstreamClient.swift has them all).
extension UpstreamTransfer {
    /// Starts the deadline at `now` and its timer.
    func armTimeout(now: UInt64) {
        deadline = TransferDeadline(timeout: timeoutNanos, minRate: minRate, now: now)
        guard timeoutNanos > 0 else { return }
        scheduleTimeoutCheck(afterNanos: timeoutNanos)
    }

    func disarmTimeout(loop: EventLoop) {
        if let timeoutToken { loop.cancel(timeoutToken) }
        timeoutToken = nil
    }

    /// The timer fired: the transfer ends as timed out, or is checked again at the deadline
    /// its progress moved to.
    private func timeoutFired() {
        guard slot != nil else { return }
        let now = client.loopNow
        let verdict = deadline.check(now: now)
        guard let message = deadline.describe(verdict) else {
            guard case .lookAgain(let next) = verdict else { return }
            scheduleTimeoutCheck(afterNanos: next > now ? next - now : 0)
            return
        }
        client.finish(self, error: UpstreamError(kind: .timeout, message: message, afterHead: receivedHead))
    }

    /// A strong capture: the timer is cancelled when the transfer is released, and a released
    /// transfer's check does nothing (`key` is nil). A weak reference would give the transfer a
    /// side table, and every retain and release of it the slow path.
    private func scheduleTimeoutCheck(afterNanos nanoseconds: UInt64) {
        timeoutToken = client.schedule(afterNanos: nanoseconds) { [self] in timeoutFired() }
    }
}
