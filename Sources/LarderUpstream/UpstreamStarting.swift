/// What starts upstream transfers: ``UpstreamClient`` over libcurl, or a stand-in that a test
/// drives (it counts the calls and delivers head, body, end or error when the test says), so
/// the fetch pipeline above it can be tested without a network.
public protocol UpstreamStarting: AnyObject {
    /// Starts `request`; the events go to `delegate` on the starter's event loop, never from
    /// inside this call.
    func startTransfer(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate) -> any UpstreamTransferControl
}

extension UpstreamClient: UpstreamStarting {
    public func startTransfer(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate) -> any UpstreamTransferControl {
        start(request, delegate: delegate)
    }
}
