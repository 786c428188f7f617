/// What the starter of a transfer may do with it while it runs: an ``UpstreamTransfer``, or a
/// stand-in a test drives.
public protocol UpstreamTransferControl: AnyObject {
    /// Stops the transfer; the delegate hears nothing more.
    func cancel()
    /// Resumes delivery after the delegate refused body bytes.
    func resumeReceiving()
    /// Resumes sending after the delegate had no request body bytes to give.
    func resumeSending()
}

/// No curl call here (UpstreamClient.swift has them all).
extension UpstreamTransfer: UpstreamTransferControl {
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
