import LarderIO

/// curl's timer (CURLMOPT_TIMERFUNCTION) on the loop. No curl call here (UpstreamClient.swift
/// has them all).
extension UpstreamClient {
    func setTimer(milliseconds: Int) {
        if let timer { loop.cancel(timer) }
        timer = nil
        timeoutNowRequested = false
        guard milliseconds >= 0 else { return }
        if milliseconds == 0 {
            // "Now" (curl asks for it whenever a transfer is added): run in this loop iteration's
            // deferred pass, not through a timer that costs another epoll_wait to fire.
            timeoutNowRequested = true
            if !timeoutNowQueued {
                timeoutNowQueued = true
                loop.enqueueDeferred(runTimeoutNow)
            }
            return
        }
        timer = loop.schedule(afterNanos: UInt64(milliseconds) * 1_000_000, timerFired)
    }

    /// The loop's clock and timers, for transfers' deadlines.
    var loopNow: UInt64 { loop.now }

    func schedule(afterNanos: UInt64, _ body: consuming @escaping () -> Void) -> EventLoop.TimerToken {
        loop.schedule(afterNanos: afterNanos, body)
    }
}
