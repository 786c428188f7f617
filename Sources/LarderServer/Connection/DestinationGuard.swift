import LarderHTTP
import LarderIO
import LarderUpstream

/// Whether a client's request may go where it asks, for proxied requests and CONNECT alike: the
/// one place that asks the ``DestinationPolicy``. Asked twice, as the security checks need:
///
/// - by the target as written, before anything is looked up: a spelling the policy refuses (an
///   address in any form, a denied name), and a request that already came through this proxy;
/// - by the address really connected to: the resolved list a direct tunnel dials, and the check
///   a fill's transfer runs on each address it connects to or reuses. A name that resolves to a
///   refused address is refused there.
///
/// State: loop-confined, a value inside its connection. The last verdict by name and the
/// client's locality are kept under the policy generation they were reached with (the loop
/// rebuilds the policy on reload and as host addresses change): a keep-alive connection asking
/// for the same host again costs a string compare.
struct DestinationGuard {
    /// What the check before the lookup found.
    enum Verdict: Equatable {
        case allowed
        /// The policy refuses the target as written (403).
        case refused(DestinationPolicy.Refusal)
        /// Our own Via identity is in the request: it went round in a loop (508, RFC 9110 §7.6.3).
        case loop
    }

    private var lastVerdict: (host: String, port: Int, generation: Int, refusal: DestinationPolicy.Refusal?)?
    private var clientLocality: (generation: Int, local: Bool)?

    /// The check before anything is looked up. `host` is without IPv6 brackets; `identity` is
    /// this daemon's Via identity; `policy` is asked only when the verdict is not kept.
    mutating func check(
        host: String, port: Int, headers: borrowing HTTPHeaders, identity: String, client: SocketAddress?, generation: Int,
        policy: () -> DestinationPolicy
    ) -> Verdict {
        let refusal: DestinationPolicy.Refusal?
        if let kept = lastVerdict, kept.generation == generation, kept.port == port, kept.host == host {
            refusal = kept.refusal
        } else {
            let current = policy()
            refusal = current.refusal(host: host, port: port, clientIsLocal: isLocal(client, generation: generation, policy: current))
            lastVerdict = (host, port, generation, refusal)
        }
        if let refusal { return .refused(refusal) }
        if headers.values("Via").contains(where: { $0.contains(identity) }) { return .loop }
        return .allowed
    }

    /// The resolved addresses a direct tunnel to `host` may dial: exactly those the policy
    /// allows. When it allows none, the first refusal (nil when there was no address at all).
    mutating func dialable(
        _ addresses: [SocketAddress], host: String, client: SocketAddress?, generation: Int, policy: DestinationPolicy
    ) -> (allowed: [SocketAddress], refusal: DestinationPolicy.Refusal?) {
        let local = isLocal(client, generation: generation, policy: policy)
        var firstRefusal: DestinationPolicy.Refusal?
        let allowed = addresses.filter { address in
            guard let refusal = policy.refusal(host: host, address: address, clientIsLocal: local) else { return true }
            if firstRefusal == nil { firstRefusal = refusal }
            return false
        }
        return (allowed, allowed.isEmpty ? firstRefusal : nil)
    }

    /// The check a fill's transfer runs on each address it connects to or reuses for `host`:
    /// the refusal's text, or nil to go ahead.
    mutating func connectCheck(
        host: String, client: SocketAddress?, generation: Int, policy: DestinationPolicy
    ) -> DestinationCheck {
        DestinationCheck(checker: policy, host: host, clientIsLocal: isLocal(client, generation: generation, policy: policy))
    }

    /// Whether the client is on this host (loopback or one of its addresses).
    private mutating func isLocal(_ client: SocketAddress?, generation: Int, policy: DestinationPolicy) -> Bool {
        if let clientLocality, clientLocality.generation == generation { return clientLocality.local }
        let local = client.map(policy.isLocal) ?? false
        clientLocality = (generation, local)
        return local
    }
}
