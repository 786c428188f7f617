/// What the caller of a transfer may do while it runs. No curl call here (UpstreamClient.swift
/// has them all).
extension UpstreamTransfer {
    /// Stops the transfer; the delegate hears nothing more.
    public func cancel() {
        client.cancel(self)
    }

    /// Resumes delivery after the delegate refused body bytes.
    public func resumeReceiving() {
        guard receivePaused, slot != nil else { return }
        receivePaused = false
        deadline.resume(now: client.loopNow)
        client.updatePause(self)
    }

    /// Resumes sending after the delegate had no request body bytes to give.
    public func resumeSending() {
        guard sendPaused, slot != nil else { return }
        sendPaused = false
        client.updatePause(self)
    }
}
