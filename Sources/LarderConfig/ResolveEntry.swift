import LarderIO

/// An `upstream.resolve` entry, `"host:port:address[,address...]"` as curl's CURLOPT_RESOLVE
/// takes it: requests and tunnels to that host and port connect to these addresses instead of
/// asking DNS (pinning a mirror, or a name the resolver does not know). The destination policy
/// still judges the address connected to, not the name.
public struct ResolveEntry: Sendable, Hashable, CustomStringConvertible {
    /// Lower-cased host name (or IP literal, IPv6 without brackets).
    public let host: String
    public let port: Int
    /// The addresses, each with `port`, in the order given.
    public let addresses: [SocketAddress]

    /// Parses an entry, or says why it is not one when it is not `host:port:address[,address]`.
    public static func parse(_ text: String) -> Result<ResolveEntry, ResolveEntry.Invalid> {
        // host:port:addresses; the host may be a bracketed IPv6 literal, the addresses too.
        var rest = Substring(text)
        let host: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return .failure(Invalid("'[' without ']' in the host")) }
            host = rest[rest.index(after: rest.startIndex)..<close]
            rest = rest[rest.index(after: close)...]
        } else {
            guard let colon = rest.firstIndex(of: ":") else { return .failure(Invalid("expected \"host:port:address\"")) }
            host = rest[..<colon]
            rest = rest[colon...]
        }
        guard !host.isEmpty, rest.hasPrefix(":"), !host.contains("*"), !host.contains("/"), HostRule(parsing: String(host)) != nil else {
            return .failure(Invalid("expected a host name or IP literal before the first ':'"))
        }
        rest = rest.dropFirst()
        guard let colon = rest.firstIndex(of: ":"), let port = Int(rest[..<colon]), (1...65535).contains(port),
            rest[..<colon].allSatisfy(\.isNumber)
        else { return .failure(Invalid("expected a port from 1 to 65535 after the host")) }
        var addresses: [SocketAddress] = []
        for item in rest[rest.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false) {
            let bare = item.hasPrefix("[") && item.hasSuffix("]") ? item.dropFirst().dropLast() : item
            guard let bytes = SocketAddress.parseIPv4(String(bare)) ?? SocketAddress.parseIPv6(String(bare)) else {
                return .failure(Invalid("\"\(item)\" is not an IP address (names are not resolved here)"))
            }
            addresses.append(SocketAddress(ipBytes: bytes, port: UInt16(port)))
        }
        return .success(ResolveEntry(host: host.lowercased(), port: port, addresses: addresses))
    }

    /// Why an entry was refused.
    public struct Invalid: Error, Equatable {
        public let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The entry as curl's CURLOPT_RESOLVE list takes it.
    public var curlForm: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        let list = addresses.map { $0.family == .ipv4 ? $0.ipString : "[\($0.ipString)]" }
        return "\(hostText):\(port):\(list.joined(separator: ","))"
    }

    public var description: String { curlForm }

    /// The addresses pinned for `host` and `port` in `entries`, or nil when none is.
    public static func addresses(for host: String, port: Int, in entries: [ResolveEntry]) -> [SocketAddress]? {
        guard !entries.isEmpty else { return nil }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return entries.first { $0.port == port && $0.host == bare.lowercased() }?.addresses
    }
}
