import LarderIO

/// What decides, for each address a direct transfer is about to connect to or send on (a
/// pooled connection included), whether it may: the checker, and what it reads of the request.
/// A value, not a closure: a closure capturing these is an allocation for every request.
public struct DestinationCheck: Sendable {
    /// The policy that answers for an address.
    public protocol Checker: AnyObject, Sendable {
        /// nil to go on, or why `address` is refused for a request to `host`.
        func refusalReason(host: String, address: SocketAddress, clientIsLocal: Bool) -> String?
    }

    public let checker: any Checker
    /// The request's host, as the policy's rules name hosts.
    public let host: String
    /// Whether the client is on this host.
    public let clientIsLocal: Bool

    public init(checker: any Checker, host: String, clientIsLocal: Bool) {
        self.checker = checker
        self.host = host
        self.clientIsLocal = clientIsLocal
    }

    /// nil to go on, or why `address` is refused.
    public func refusal(for address: SocketAddress) -> String? {
        checker.refusalReason(host: host, address: address, clientIsLocal: clientIsLocal)
    }
}
