import LarderCache
import LarderConfig
import LarderHTTP
import LarderIO
import LarderUpstream

/// Sending the request again, as the fetch's ``UpstreamFetch/Next`` says: on the loop's next
/// turn (the next parent, a fresh connection after a dead pooled one) or after a delay.
extension Fill {
    /// Whether the request can go out again: its body (if any) is kept, and someone still
    /// wants the answer.
    var canResend: Bool {
        (fetch.request.body == nil || ownedBodySource is BufferedBody) && (!buffer.readers.isEmpty || options.background)
    }

    /// Schedules what the fetch decided after a failed attempt; returns whether another
    /// attempt follows.
    func carryOut(_ next: UpstreamFetch.Next) -> Bool {
        switch next {
        case .resendNextTurn:
            discardAttempt()
            proxy.loop.enqueueDeferred { [self] in
                guard outcome == nil else { return }
                resend()
            }
        case .retry(let delay):
            discardAttempt()
            fetch.retryTimer = proxy.loop.schedule(afterNanos: delay.totalNanoseconds) { [weak self] in
                self?.retryDue()
            }
        case .final:
            return false
        }
        return true
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
        fetch.startOverAtBestParent(proxy.shared.parentHealth)
        resend()
    }

    var readerCount: Int { buffer.readers.count }
}
