import LarderHTTP
import LarderIO

/// Which admin requests a web page in an operator's browser could have sent, decided from the
/// request head alone (a pure value: unit-tested without sockets).
///
/// - DNS rebinding: a page at `http://evil.example:3129/` whose name is made to resolve to
///   127.0.0.1 reads the admin API as its own origin. The browser still sends its own name in
///   `Host` (RFC 9110 §7.2), so a request must name the listener it reached: the address the
///   connection came in on, with its port (which covers a `0.0.0.0` listener and sockets
///   systemd passed); `localhost` or a loopback literal, which no DNS answer can stand for;
///   or an `admin.allow_hosts` name. Anything else gets 421 Misdirected Request
///   (RFC 9110 §15.5.20). A request with no `Host` (HTTP/1.0 health checks) is no browser's.
/// - Cross-site requests: any page may send a "simple" POST without reading its answer. A
///   call that changes something refuses an `Origin` (RFC 6454 §7) other than the listener's
///   own, and `Sec-Fetch-Site` other than `same-origin` or `none` (Fetch Metadata), token or no
///   token.
struct AdminRequestGuard {
    /// The address the connection reached (`getsockname`); nil when it could not be read.
    let local: SocketAddress?
    /// `admin.allow_hosts`, lower-cased: `name` (any port) or `name:port`.
    let allowHosts: [String]

    enum Refusal: Equatable {
        /// 421: `Host` names another server.
        case misdirected(String)
        /// 403: a changing call from another site.
        case crossSite(String)

        var status: Int {
            switch self {
            case .misdirected: 421
            case .crossSite: 403
            }
        }

        var message: String {
            switch self {
            case .misdirected(let reason), .crossSite(let reason): reason
            }
        }
    }

    /// Why the request must be refused, or nil to answer it.
    func refusal(method: HTTPMethod, host: String?, origin: String?, fetchSite: String?) -> Refusal? {
        // No Host at all is no browser's (HAProxy's `option httpchk` sends HTTP/1.0 without one).
        var named: (name: String, port: Int)?
        if let host {
            guard let split = Self.split(host), accepts(split, text: host) else {
                return .misdirected(
                    "the admin listener answers requests for its own address or localhost; Host '\(Self.shown(host))' is neither"
                        + " (admin.allow_hosts adds names)")
            }
            named = split
        }
        guard method != .get && method != .head else { return nil }
        if let fetchSite, !["same-origin", "none"].contains(fetchSite.lowercased()) {
            return .crossSite("this call changes the cache and is refused from another site (Sec-Fetch-Site: \(Self.shown(fetchSite)))")
        }
        if let origin {
            // The listener's own origin is http://<the Host it was reached by>.
            let lowered = origin.lowercased()
            guard lowered.hasPrefix("http://"), let from = Self.split(String(lowered.dropFirst(7))), let named, from == named else {
                return .crossSite("this call changes the cache and is refused from another site (Origin: \(Self.shown(origin)))")
            }
        }
        return nil
    }

    /// Whether `named` (from `Host`, whose text is `text`) names this listener.
    private func accepts(_ named: (name: String, port: Int), text: String) -> Bool {
        let lowered = text.lowercased()
        if allowHosts.contains(where: { $0 == named.name || $0 == lowered }) { return true }
        // A loopback name involves no DNS, so it cannot be rebound: any port (an `ssh -L`
        // tunnel or a container's port map may differ from the listener's). 0.0.0.0 and ::
        // reach this host too.
        if named.name == "localhost" || named.name == "localhost." { return true }
        let bare = named.name.hasPrefix("[") ? String(named.name.dropFirst().dropLast()) : named.name
        guard let address = SocketAddress(literal: bare, port: 0)?.unmapped else { return false }
        if address.isLoopback || address.isUnspecified { return true }
        guard let local else { return false }
        return named.port == Int(local.port) && address.ipBytes == local.unmapped.ipBytes
    }

    /// A client's value as the answer and the log line quote it: at most 200 characters.
    static func shown(_ value: String) -> String {
        value.count <= 200 ? value : String(value.prefix(200)) + "..."
    }

    /// `name[:port]` (IPv6 literals in brackets) as a lower-cased name and a port (80 when
    /// absent, the `http` default); nil when it is not one.
    static func split(_ text: String) -> (name: String, port: Int)? {
        var name = Substring(text.lowercased())
        var port = 80
        let close = name.lastIndex(of: "]")
        if let colon = name.lastIndex(of: ":"), close.map({ colon > $0 }) ?? true {
            guard let number = Int(name[name.index(after: colon)...]), (1...65535).contains(number) else { return nil }
            port = number
            name = name[..<colon]
        }
        guard !name.isEmpty else { return nil }
        return (String(name), port)
    }
}
