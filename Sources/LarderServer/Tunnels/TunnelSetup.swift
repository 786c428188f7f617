import LarderIO
import LarderUpstream

/// A CONNECT on its way to becoming a ``Tunnel``: the target, the parents it may go through,
/// and which step it is at (resolving under a deadline, dialling, connected and waiting for
/// earlier responses to be written before the hand-over).
///
/// State: owned by the connection's ``ConnectHandler``, on its loop.
struct TunnelSetup {
    /// The CONNECT target (host without IPv6 brackets, port).
    let target: (host: String, port: Int)
    /// Parent proxies the tunnel goes through, best first, and which one is being tried.
    let parents: [ParentPlan.Parent]
    var parentIndex = 0
    /// The resolve deadline (cancelled once the dial starts).
    var deadline: EventLoop.TimerToken?
    /// The connect in progress.
    var dial: TunnelDial?
    /// The connected socket, waiting for the hand-over.
    var server: Socket?
    /// Bytes the parent proxy sent after its 2xx to our CONNECT (the target's first bytes).
    var serverLeftover: [UInt8] = []

    init(target: (host: String, port: Int), parents: [ParentPlan.Parent]) {
        self.target = target
        self.parents = parents
    }

    /// The parent being tried, if any.
    var currentParent: ParentPlan.Parent? { parentIndex < parents.count ? parents[parentIndex] : nil }

    /// Stops whatever step is in progress (the client went away before the hand-over).
    mutating func abandon(on loop: EventLoop) {
        if let deadline { loop.cancel(deadline) }
        deadline = nil
        dial?.cancel()
        dial = nil
        server?.close()
        server = nil
    }
}
