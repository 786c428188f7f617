import LarderHTTP
import LarderUpstream

/// A suspendable stand-in for libcurl behind ``UpstreamStarting``: it counts the transfers
/// started and delivers a head, body bytes, the end or an error to a transfer's delegate only
/// when the test says, so the fetch pipeline runs in process, one step at a time.
///
/// State: loop-confined, like the fill it serves (the test calls it from jobs on that loop).
final class FetchStandIn: UpstreamStarting {
    /// One transfer the stand-in started: what it was asked, and whether it was stopped.
    final class Transfer: UpstreamTransferControl {
        let request: UpstreamRequest
        /// Strong until the transfer ends or is cancelled, as ``UpstreamTransfer`` holds it.
        private(set) var delegate: (any UpstreamTransferDelegate)?
        private(set) var cancelled = false
        /// Body bytes the delegate refused (it paused the transfer) and has not taken yet.
        private(set) var refused: [UInt8]?

        init(request: UpstreamRequest, delegate: any UpstreamTransferDelegate) {
            self.request = request
            self.delegate = delegate
        }

        func cancel() {
            cancelled = true
            delegate = nil
        }

        func resumeReceiving() {
            guard let bytes = refused else { return }
            refused = nil
            body(bytes)
        }

        func resumeSending() {}

        /// The origin's final head.
        func head(_ status: Int, _ fields: [(String, String)] = []) {
            var headers = HTTPHeaders()
            for (name, value) in fields { headers.add(name, value) }
            delegate?.upstreamDidReceiveHead(ResponseHead(status: status, headers: headers))
        }

        /// Body bytes; kept to deliver again if the delegate refuses them.
        func body(_ bytes: [UInt8]) {
            guard let delegate else { return }
            let taken = bytes.withUnsafeBytes { delegate.upstreamDidReceiveBody($0) }
            if !taken { refused = bytes }
        }

        /// The end of the response.
        func finish(bodyBytes: Int) {
            let delegate = self.delegate
            self.delegate = nil
            delegate?.upstreamDidFinish(.success(UpstreamSummary(bodyBytes: bodyBytes, reusedConnection: false)))
        }

        /// A failure, before or after the head.
        func fail(_ kind: UpstreamError.Kind, afterHead: Bool = false) {
            let delegate = self.delegate
            self.delegate = nil
            delegate?.upstreamDidFinish(.failure(UpstreamError(kind: kind, message: "stand-in \(kind)", afterHead: afterHead)))
        }
    }

    private(set) var transfers: [Transfer] = []

    /// Transfers started so far (every attempt counts).
    var calls: Int { transfers.count }

    func startTransfer(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate) -> any UpstreamTransferControl {
        let transfer = Transfer(request: request, delegate: delegate)
        transfers.append(transfer)
        return transfer
    }
}
