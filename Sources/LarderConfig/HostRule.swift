import LarderHTTP
import LarderIO

/// A host pattern: an entry of `upstream.direct` (matching hosts bypass the parent proxies)
/// or of `proxy.deny_destinations` / `proxy.allow_destinations`.
///
/// Host names match exactly (`"localhost"`) or by suffix (`"*.internal"` matches
/// `a.internal` and `a.b.internal`, not `internal` itself). For `upstream.direct`, CIDRs
/// (`"10.0.0.0/8"`) match hosts written as IP literals only: Larder does not resolve names to
/// decide, since the parent may see a different DNS than the child. The destination lists
/// match CIDRs against the address really connected to (``matches(address:)``). Matching is
/// case-insensitive (RFC 9110 §4.2.3: the host is case-insensitive).
public enum HostRule: Sendable, Hashable, CustomStringConvertible {
    case host(String)
    /// A suffix including its leading dot (".internal").
    case domain(String)
    case network(CIDR)

    /// Parses a host name, a `*.` domain pattern or a CIDR; nil when it is none of them.
    public init?(parsing text: String) {
        if text.contains("/") {
            guard let network = CIDR(parsing: text) else { return nil }
            self = .network(network)
            return
        }
        let lower = text.lowercased()
        let name = lower.hasPrefix("*.") ? String(lower.dropFirst(2)) : lower
        // RFC 1123 host names: labels of letters, digits and hyphens (IP literals are allowed
        // as exact hosts too, for readability next to CIDRs).
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        let valid =
            !name.isEmpty
            && labels.allSatisfy { label in
                !label.isEmpty && label.count <= 63 && label.utf8.allSatisfy { HostRule.isLabelByte($0) }
            }
        if !valid {
            // An IPv6 literal as an exact host.
            let bare = name.hasPrefix("[") && name.hasSuffix("]") ? String(name.dropFirst().dropLast()) : name
            guard !lower.hasPrefix("*."), SocketAddress.parseIPv6(bare) != nil else { return nil }
            self = .host(bare)
            return
        }
        self = lower.hasPrefix("*.") ? .domain("." + name) : .host(name)
    }

    /// Whether this names hosts by DNS name (an exact name or a `*.` domain), not by address.
    public var isName: Bool {
        switch self {
        case .host(let name): SocketAddress.parseIPv4(name) == nil && SocketAddress.parseIPv6(name) == nil
        case .domain: true
        case .network: false
        }
    }

    /// Whether a request for `host` (without IPv6 brackets) goes direct.
    public func matches(host: String) -> Bool {
        switch self {
        case .host(let name):
            return ASCII.equalsIgnoringCase(host, name)
        case .domain(let suffix):
            return host.utf8.count > suffix.utf8.count && host.lowercased().hasSuffix(suffix)
        case .network(let network):
            if let bytes = SocketAddress.parseIPv4(host) ?? SocketAddress.parseIPv6(host) {
                return network.contains(SocketAddress(ipBytes: bytes, port: 0))
            }
            return false
        }
    }

    /// Whether a connection to `address` matches: CIDRs, and IP literals as single addresses
    /// (names are matched by ``matches(host:)`` on the name the client asked for).
    public func matches(address: SocketAddress) -> Bool {
        switch self {
        case .network(let network):
            return network.contains(address)
        case .host(let name):
            // An IP literal written without a prefix ("10.1.2.3", "::1") is that one address.
            guard let bytes = SocketAddress.parseIPv4(name) ?? SocketAddress.parseIPv6(name) else { return false }
            return CIDR(parsing: name).map { $0.contains(address) } ?? (bytes == address.ipBytes)
        case .domain:
            return false
        }
    }

    private static func isLabelByte(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
    }

    public var description: String {
        switch self {
        case .host(let name): return name
        case .domain(let suffix): return "*" + suffix
        case .network(let network): return network.description
        }
    }
}
