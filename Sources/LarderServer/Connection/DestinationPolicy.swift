import LarderConfig
import LarderIO
import LarderUpstream

/// Where a request or tunnel may go. Decided on the address really connected to (curl's
/// open-socket and pre-request hooks for fills, the resolved list for tunnels), so every
/// spelling of an address (`127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`, a name that resolves
/// to it) gets the same answer. The rules, in order:
///
/// 1. this daemon's own listeners: always refused;
/// 2. `0.0.0.0/8` and `::` (a connect there reaches this host): always refused;
/// 3. `proxy.allow_destinations` (names and CIDRs): allowed;
/// 4. `proxy.deny_destinations`: refused;
/// 5. local addresses (loopback, link-local, this host's own): allowed only for a local client
///    and when `proxy.allow_local_destinations` (by default: when every listener is loopback);
/// 6. anything else: allowed.
///
/// State: immutable once built. A class: each fill's connect check captures the policy, and
/// a reference is one retain where the value was a copy of every list in it.
final class DestinationPolicy: Sendable {
    /// Why a destination was refused (403).
    enum Refusal: Sendable, Equatable, CustomStringConvertible {
        case ownListener(Listener.Kind)
        case unspecified
        case denied(rule: String)
        case local

        /// The text of the 403 body and of the log line.
        var description: String {
            switch self {
            case .ownListener(.admin): "Larder does not proxy to its own admin listener; connect to it directly"
            case .ownListener(.proxy): "Larder does not proxy requests to itself"
            case .unspecified: "the unspecified address (0.0.0.0 or ::) is not a destination"
            case .denied(let rule): "the destination matches proxy.deny_destinations (\(rule))"
            case .local:
                "the destination is a local address (loopback, link-local or this host's own), "
                    + "refused by proxy.allow_local_destinations"
            }
        }
    }

    /// The listeners' addresses as bound, IPv4-mapped ones unmapped.
    let listeners: [(kind: Listener.Kind, address: SocketAddress)]
    /// This host's interface addresses (port 0).
    let hostAddresses: [SocketAddress]
    /// `proxy.allow_local_destinations`, with "auto" decided on the listeners.
    let allowLocal: Bool
    let deny: [HostRule]
    let allow: [HostRule]

    init(config: ProxyConfig, own: ProcessState.OwnAddresses, hostAddresses: [SocketAddress]) {
        var listeners = own.proxy.map { (kind: Listener.Kind.proxy, address: $0.unmapped) }
        if let admin = own.admin { listeners.append((.admin, admin.unmapped)) }
        self.listeners = listeners
        self.hostAddresses = hostAddresses.map(\.unmapped)
        let proxies = own.proxy.isEmpty ? config.listen : own.proxy
        allowLocal = config.allowLocalDestinations ?? proxies.allSatisfy(\.isLoopback)
        deny = config.denyDestinations
        allow = config.allowDestinations
    }

    /// Whether `address` is this host: loopback, unspecified, link-local, or an interface's.
    func isLocal(_ address: SocketAddress) -> Bool {
        let plain = address.unmapped
        return plain.isLoopback || plain.isUnspecified || plain.isLinkLocal
            || hostAddresses.contains { $0.ipBytes == plain.ipBytes }
    }

    /// The check at connect time: `host` is the name the client asked for (for name rules),
    /// `address` the one about to be connected to (with its port).
    func refusal(host: String, address: SocketAddress, clientIsLocal: Bool) -> Refusal? {
        let plain = address.unmapped
        if let own = listener(at: plain) { return .ownListener(own) }
        if plain.isUnspecified { return .unspecified }
        if allow.contains(where: { $0.matches(host: host) || $0.matches(address: plain) }) { return nil }
        if let rule = deny.first(where: { $0.matches(host: host) || $0.matches(address: plain) }) {
            return .denied(rule: rule.description)
        }
        if isLocal(plain) && !(clientIsLocal && allowLocal) { return .local }
        return nil
    }

    /// The check before anything is looked up: a host written as an address (in any form the
    /// resolver accepts) gets the connect-time answer at once, and names are matched against
    /// the name rules. The connect-time check still runs; this one keeps such requests away
    /// from the cache and the coalescer.
    func refusal(host: String, port: Int, clientIsLocal: Bool) -> Refusal? {
        if let bytes = SocketAddress.parseNumericHost(host) {
            return refusal(host: host, address: SocketAddress(ipBytes: bytes, port: UInt16(clamping: port)), clientIsLocal: clientIsLocal)
        }
        if allow.contains(where: { $0.matches(host: host) }) { return nil }
        if let rule = deny.first(where: { $0.matches(host: host) }) { return .denied(rule: rule.description) }
        return nil
    }

    /// Which listener a connection to `address` would reach: the same address and port, or a
    /// listener on every address (`0.0.0.0`, `::`) and any local address with its port.
    private func listener(at address: SocketAddress) -> Listener.Kind? {
        for (kind, listener) in listeners where listener.port == address.port {
            if listener.ipBytes == address.ipBytes { return kind }
            if listener.isUnspecified && isLocal(address) { return kind }
            // A connect to 0.0.0.0 or :: is a connect to this host (Linux: its loopback).
            if address.isUnspecified && isLocal(listener) { return kind }
        }
        return nil
    }
}

extension DestinationPolicy: DestinationCheck.Checker {
    /// ``refusal(host:address:clientIsLocal:)``, as a fill's transfer reports it.
    func refusalReason(host: String, address: SocketAddress, clientIsLocal: Bool) -> String? {
        refusal(host: host, address: address, clientIsLocal: clientIsLocal)?.description
    }
}
