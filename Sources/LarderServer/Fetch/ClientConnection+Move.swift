import LarderHTTP
import LarderIO
import LarderTLS

/// A client connection on its way to another event loop, with the request it is answering and
/// the bytes it had read beyond it (pipelined requests).
struct MovedConnection: Sendable {
    let socket: Socket
    let peer: SocketAddress?
    let kind: Listener.Kind
    let head: RequestHead
    /// The request body, read whole (nil: the request has none).
    let body: [UInt8]?
    /// Bytes read beyond the request (pipelined requests).
    let pending: [UInt8]
    /// When the request was picked up, so its logged duration includes the move.
    let startNanos: UInt64
    /// An intercepted connection's TLS session and the CONNECT target it answers for.
    let interception: (session: TLSTransport.Handoff, host: String, port: Int)?
    /// ``ClientConnection/authenticatedUser``.
    let user: ProxyAuthenticator.User?
}

extension ClientConnection {
    /// Hands this connection to `target`, the loop fetching what its request needs, so the
    /// request joins that fill rather than fetching it a second time. Only at a clean point:
    /// the request body (if any) read whole and none of it sent, nothing queued to write, no
    /// fill yet, not moved before. Returns false when it cannot move (the request then fetches
    /// on its own).
    func moveToFill(on target: EventLoopHandle, exchange: Exchange) -> Bool {
        let bodyRead =
            exchange.requestFraming == .none
            || (exchange.bufferedBody != nil && exchange.requestBodyComplete && exchange.bufferedOffset == 0)
        guard !exchange.moved, !exchange.headSent, bodyRead, !exchange.continueSent, exchange.fill == nil, mayLeaveLoop
        else { return false }
        var session: TLSTransport.Handoff?
        if let interception {
            session = interception.tls.handoff()
            if session == nil { return false }
        }
        let moved = MovedConnection(
            socket: socket, peer: peer, kind: kind, head: exchange.head,
            body: exchange.requestFraming == .none ? nil : exchange.bufferedBody, pending: takeUnreadInput(),
            startNanos: exchange.startNanos,
            interception: interception.flatMap { interception in session.map { ($0, interception.host, interception.port) } },
            user: authenticatedUser)
        self.exchange = nil
        leaveLoop(stillCounted: false)
        proxy.telemetry.stats[.connectionsMoved].add(1)
        target.execute { loop in
            guard let proxy = loop.context as? ProxyLoop else {
                moved.socket.close()
                return
            }
            proxy.adopt(moved)
        }
        return true
    }
}
