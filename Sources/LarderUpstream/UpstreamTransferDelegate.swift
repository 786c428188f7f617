import LarderHTTP

/// Receives the events of one upstream transfer, on the transfer's event loop.
public protocol UpstreamTransferDelegate: AnyObject {
    /// An interim (1xx) response arrived before the final one (RFC 9110 §15.2).
    func upstreamDidReceiveInterim(_ head: ResponseHead)

    /// The final response head arrived (after any interim heads). The transfer keeps
    /// no copy, so the delegate may change it in place without copying its fields.
    func upstreamDidReceiveHead(_ head: consuming ResponseHead)

    /// Body bytes arrived. Return false to refuse them for now: the transfer pauses and the same
    /// bytes come again after ``UpstreamTransfer/resumeReceiving()``.
    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool

    /// The request body is wanted: copy up to `buffer.count` bytes into it.
    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk

    /// The transfer ended; called exactly once unless the transfer was cancelled.
    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>)
}

extension UpstreamTransferDelegate {
    /// Interim responses are dropped unless the delegate wants them.
    public func upstreamDidReceiveInterim(_ head: ResponseHead) {}
}

/// An answer to ``UpstreamTransferDelegate/upstreamWantsRequestBody(into:)``.
public enum UpstreamBodyChunk: Sendable {
    /// This many bytes were copied.
    case bytes(Int)
    /// Nothing available yet; call ``UpstreamTransfer/resumeSending()`` when there is.
    case wait
    /// The body is complete.
    case end
    /// The body cannot be completed (client went away): abort the transfer.
    case abort
}

/// What a finished transfer reports.
public struct UpstreamSummary: Sendable {
    /// Body bytes received.
    public var bodyBytes: Int
    /// Whether an existing upstream connection was reused.
    public var reusedConnection: Bool

    public init(bodyBytes: Int, reusedConnection: Bool) {
        self.bodyBytes = bodyBytes
        self.reusedConnection = reusedConnection
    }
}
