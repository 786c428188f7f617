import LarderHTTP
import LarderIO
import LarderTLS

/// One upstream exchange (a curl easy handle). Owned by its ``UpstreamClient`` while active.
///
/// State: loop-confined, like the client.
public final class UpstreamTransfer {
    let client: UpstreamClient
    let handle: EasyHandle
    /// What the transfer keeps of its request once curl has it (the request itself stays with
    /// the caller, who retries with it): the destination check of a direct transfer, and the
    /// timeout's terms.
    let destinationCheck: DestinationCheck?
    let timeoutNanos: UInt64
    let minRate: Int
    /// Sent through a parent proxy: its connection is the parent's.
    let viaParent: Bool
    /// Where its connection goes, for the log.
    var connectionOrigin: String { handle.origin + (viaParent ? " (a connection to the parent proxy)" : "") }
    /// Strong while the transfer runs; set to nil when it ends or is cancelled, which breaks the
    /// delegate → transfer → delegate cycle.
    var delegate: (any UpstreamTransferDelegate)?
    /// Its place in the client's table while in flight.
    var slot: Int?
    var headerList: HeaderList?
    /// Reads the response head; made by the initializer, for the request's method.
    var headParser: ResponseHeadParser
    /// Whether the final response head has arrived (the head itself goes to the delegate).
    var receivedHead = false
    /// Its Content-Length, if it has one.
    var declaredLength: Int?
    var bodyBytes = 0
    var deadline = TransferDeadline(timeout: 0, minRate: 0, now: 0)
    var timeoutToken: EventLoop.TimerToken?
    var receivePaused = false
    var sendPaused = false
    /// The socket curl stopped watching while the transfer was paused.
    var pausedSocket: Int32?
    /// Over TLS, the socket of the connection curl kept in its pool when the transfer ended
    /// (nil if it closed it, or the transfer did not reach its end in curl).
    var keptConnection: Int32?
    /// The OpenSSL session of its connection (TLS to the origin or the parent), read when the
    /// final head arrives, and used only while ``keptConnection`` says that connection is open
    /// (``UpstreamClient/inspectConnection(after:)``).
    var tlsSession: UnsafeMutableRawPointer?
    var protocolError: String?
    /// Why the destination check refused the address curl was about to use.
    var refusal: String?

    init(client: UpstreamClient, handle: EasyHandle, request: borrowing UpstreamRequest, delegate: any UpstreamTransferDelegate) {
        self.client = client
        self.handle = handle
        // A parent's address is the operator's choice: only a direct transfer is checked.
        destinationCheck = request.parentProxy == nil ? request.destinationCheck : nil
        timeoutNanos = request.timeoutNanos
        minRate = request.minRate
        viaParent = request.parentProxy != nil
        headParser = ResponseHeadParser(answersHEAD: request.method == .head)
        self.delegate = delegate
    }

    deinit {
        headerList?.free()
    }
}
