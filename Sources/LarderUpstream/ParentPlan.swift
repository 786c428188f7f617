import LarderConfig
import LarderHTTP

/// Which parent proxies a request may go through, in the order to try them (RFC 9110 §7.6:
/// the parent is an intermediary like any other; Larder speaks to it in absolute form).
///
/// Built once per configuration and immutable. The order depends on the URL and the
/// configuration only; the caller moves parents that are backing off to the end
/// (``ParentHealth``), so the hash home of a URL is stable while its parent is up.
public struct ParentPlan: Sendable {
    /// A parent proxy: the URL given to libcurl (credentials included) and a label without
    /// credentials for logs and metrics. Everything derived from the URL is worked out once,
    /// when the configuration is loaded.
    public struct Parent: Sendable, Hashable {
        /// Where to open a CONNECT tunnel through a parent: host (without IPv6 brackets), port
        /// (libcurl's default 1080 when the URL has none) and the `Proxy-Authorization` value
        /// for credentials in the URL (percent-decoded).
        public struct Endpoint: Sendable, Hashable {
            public let host: String
            public let port: Int
            public let authorization: String?
        }

        public let url: String
        public let label: String
        /// Nil for parents that are not plain `http://` proxies (they cannot carry tunnels).
        public let endpoint: Endpoint?
        /// The URL's bytes hashed once, the first half of every rendezvous score.
        let seed: UInt64

        public init(url: String) {
            self.url = url
            label = ParentPlan.redact(url)
            seed = ParentPlan.fnv1a(Array(url.utf8), basis: ParentPlan.fnvBasis)
            endpoint = Parent.endpoint(of: url)
        }

        private static func endpoint(of url: String) -> Endpoint? {
            let bytes = Array(url.utf8)
            let prefix = Array("http://".utf8)
            guard bytes.count > prefix.count,
                zip(bytes, prefix).allSatisfy({ ($0 | 0x20) == $1 || $0 == $1 })
            else { return nil }
            var authority = bytes[prefix.count...]
            if let slash = authority.firstIndex(of: UInt8(ascii: "/")) { authority = authority[..<slash] }
            var authorization: String?
            if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
                let userinfo = authority[..<at]
                authority = authority[(at + 1)...]
                let colon = userinfo.firstIndex(of: UInt8(ascii: ":")) ?? userinfo.endIndex
                guard let user = ParentPlan.percentDecode(userinfo[..<colon]),
                    let password = ParentPlan.percentDecode(colon < userinfo.endIndex ? userinfo[(colon + 1)...] : [])
                else { return nil }
                authorization = BasicCredentials(user: user, password: password).headerValue
            }
            let parsed = Array(authority).withUnsafeBytes { raw -> (host: String, port: Int)? in
                try? AbsoluteURL.parseAuthority(raw, defaultPort: 1080, requirePort: false)
            }
            guard let parsed else { return nil }
            let host = parsed.host.hasPrefix("[") ? String(parsed.host.dropFirst().dropLast()) : parsed.host
            return Endpoint(host: host, port: parsed.port, authorization: authorization)
        }
    }

    /// `%XX` escapes decoded (RFC 3986 §2.1); nil for a malformed escape or invalid UTF-8.
    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex, let high = ASCII.hexValue(bytes[index + 1]), let low = ASCII.hexValue(bytes[index + 2])
                else { return nil }
                out.append(UInt8(high << 4 | low))
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    public let parents: [Parent]
    public let selection: ParentSelection
    public let direct: [HostRule]
    public let backoff: Duration
    /// The routes' own parents (`[[route]] parent = URL`), prepared like `parents`.
    private let routeParents: [String: Parent]

    public init(_ upstream: UpstreamConfig, routes: [Route] = []) {
        parents = upstream.parentList.map(Parent.init(url:))
        selection = upstream.parentSelection
        direct = upstream.direct
        backoff = upstream.parentBackoff
        var routeParents: [String: Parent] = [:]
        for case let url? in routes.map(\.parent) where url != "direct" { routeParents[url] = Parent(url: url) }
        self.routeParents = routeParents
    }

    /// The parents to try for `url`, best first; empty means go direct. A route's own `parent`
    /// wins over everything: `"direct"` bypasses the parents, a URL is the only parent.
    public func candidates(for url: AbsoluteURL, routeParent: String?) -> [Parent] {
        if let routeParent {
            return routeParent == "direct" ? [] : [routeParents[routeParent] ?? Parent(url: routeParent)]
        }
        guard !parents.isEmpty else { return [] }
        let host = url.bareHost
        if direct.contains(where: { $0.matches(host: host) }) { return [] }
        switch selection {
        case .failover:
            return parents
        case .hash:
            guard parents.count > 1 else { return parents }
            // Rendezvous hashing: every parent scores the URL, the highest is its home. Removing
            // a parent moves only the URLs it was home to.
            let key = Array(url.description.utf8)
            return parents.map { ($0, ParentPlan.score(seed: $0.seed, key: key)) }
                .sorted { $0.1 > $1.1 }
                .map(\.0)
        }
    }

    static let fnvBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    static func fnv1a(_ bytes: [UInt8], basis: UInt64) -> UInt64 {
        var hash = basis
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// FNV-1a over the URL continued from the parent's seed, then a SplitMix64 finaliser so
    /// that URLs differing in one byte spread over all parents.
    static func score(seed: UInt64, key: [UInt8]) -> UInt64 {
        var z = fnv1a(key, basis: seed)
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// `http://user:secret@host:3128` → `http://host:3128`: credentials never reach logs.
    public static func redact(_ url: String) -> String {
        let bytes = Array(url.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) else { return url }
        let start = colon + 3
        let authorityEnd = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
        guard let at = bytes[start..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return url }
        return String(decoding: bytes[..<start] + bytes[(at + 1)...], as: UTF8.self)
    }
}
