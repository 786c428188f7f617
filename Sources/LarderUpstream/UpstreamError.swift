/// Why an upstream exchange failed.
public struct UpstreamError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Failure classes, which decide the status a client sees and whether a retry may help.
    public enum Kind: String, Sendable {
        /// The host name did not resolve.
        case dns
        /// The connection was refused or the host unreachable.
        case connect
        /// No response head, or a body stall, within the timeout.
        case timeout
        /// The connection dropped before any response byte.
        case reset
        /// The connection dropped in the middle of the body.
        case truncated
        /// The TLS connection to the origin failed: its certificate did not verify against the
        /// trust anchors, or the handshake broke. Never retried, never hidden.
        case tls
        /// The origin sent something that is not HTTP.
        case protocolError = "protocol"
        /// The body did not hash to the digest its URL names.
        case digest
        /// Larder stopped the transfer (client gone, limit reached).
        case aborted
        /// The destination policy refused the address the transfer was to connect to.
        case forbidden
        /// Anything else the upstream library reported.
        case other
    }

    public let kind: Kind
    /// A human-readable cause (from the upstream library's error buffer).
    public let message: String
    /// Whether the response head had been received when it failed.
    public let afterHead: Bool
    /// Whether a connection to the next hop (origin or parent proxy) was established: a
    /// timeout before it means the hop is unreachable, after it that the answer is slow.
    public let connected: Bool
    /// Whether the attempt went out only on pooled keep-alive connections (none was opened
    /// for it): a reset then usually means the origin had dropped the idle connection.
    public let reusedConnection: Bool

    public init(kind: Kind, message: String, afterHead: Bool, connected: Bool = true, reusedConnection: Bool = false) {
        self.kind = kind
        self.message = message
        self.afterHead = afterHead
        self.connected = connected
        self.reusedConnection = reusedConnection
    }

    /// The status a client is answered with when nothing was sent yet: 504 for timeouts,
    /// 403 for a refused destination, 502 for everything else (RFC 9110 §15.6.3, §15.6.5).
    public var status: Int {
        switch kind {
        case .timeout: 504
        case .forbidden: 403
        default: 502
        }
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}
