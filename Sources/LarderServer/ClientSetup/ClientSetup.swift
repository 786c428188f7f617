import LarderConfig
import LarderIO
import LarderTLS

/// Each client tool's setup for one Larder: its proxy address and, when HTTPS interception is
/// on, its CA. A pure value: it reads no file, opens no socket and asks no clock, so the
/// command line (`larder client`) and the server (the onboarding page) build the same answer
/// from what each has. Whoever writes the files reads the parts of a ``SetupFile/Content/concatenation(_:)``.
///
/// Trust is given without taking any away (docs/SECURITY.md, "Client setup"): a tool that
/// takes a list of extra CAs gets Larder's CA alone (`NODE_EXTRA_CA_CERTS`, Docker's
/// `certs.d`); a tool that takes one file in place of its whole trust store gets the combined
/// bundle (the system's certificates, then Larder's CA), kept in step with the system store; and
/// apt gets it per intercepted host, never through the global `Acquire::https::CaInfo`.
public struct ClientSetup: Sendable {
    /// This Larder's CA, as clients are to trust it.
    public struct Authority: Sendable, Equatable {
        /// The certificate, PEM (`ca.pem`); never the key.
        public var pem: String
        /// SHA-256 of its DER form, colon-separated hex, as browsers show it.
        public var sha256Fingerprint: String
        /// The hosts whose tunnels are intercepted (`tls.intercept`): its name constraints.
        public var hosts: [HostRule]

        public init(pem: String, sha256Fingerprint: String, hosts: [HostRule]) {
            self.pem = pem
            self.sha256Fingerprint = sha256Fingerprint
            self.hosts = hosts
        }

        /// The exact host names among ``hosts`` (what per-host settings can name).
        public var exactHosts: [String] {
            hosts.compactMap {
                if case .host(let name) = $0 { return name }
                return nil
            }
        }

        /// The `*.` domains among ``hosts``, as written.
        public var domains: [String] {
            hosts.compactMap {
                if case .domain = $0 { return $0.description }
                return nil
            }
        }
    }

    /// Where Larder's CA is copied on a client (PEM), for the tools that add it to theirs.
    public static let caFile = "/etc/larder/larder-ca.pem"
    /// The combined bundle: the system store's certificates, then Larder's CA.
    public static let bundleFile = "/etc/larder/ca-bundle.pem"
    /// Destinations that never go through the proxy: this machine and the private ranges
    /// (RFC 1918, RFC 6890 link-local, RFC 4193 unique-local).
    public static let noProxy =
        "localhost,127.0.0.0/8,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,fc00::/7,fe80::/10"

    /// The names of the tools, in the order they are shown.
    public static let toolNames = [
        "env", "ca-bundle", "system-store", "apt", "pip", "npm", "cargo", "go", "git", "curl", "docker", "containerd",
    ]

    /// The proxy's URL, `http://host:port` (checked with ``checkedProxyURL(_:)``).
    public let proxyURL: String
    /// The CA; nil when interception is off, and then HTTPS is tunnelled, never cached.
    public let authority: Authority?
    public let platform: ClientPlatform

    public init(proxyURL: String, authority: Authority?, platform: ClientPlatform = .debian) {
        self.proxyURL = proxyURL
        self.authority = authority
        self.platform = platform
    }

    /// Every tool's setup, in ``toolNames`` order.
    public var tools: [ClientTool] { ClientSetup.toolNames.compactMap(tool(named:)) }

    /// What holds for every tool: said once, above them.
    public var notes: [String] {
        guard let authority else {
            return [
                "HTTPS interception is off (tls.intercept is empty): HTTPS goes through the proxy as a tunnel and is not cached; plain HTTP is."
            ]
        }
        let hosts = authority.hosts.map(\.description).joined(separator: ", ")
        return [
            "HTTPS to \(hosts) is decrypted and cached; Larder's CA (sha256 \(authority.sha256Fingerprint)) may sign for those names only, so trusting it lets it impersonate no other site.",
            "Tools that take one CA file get \(ClientSetup.bundleFile): the system's certificates plus Larder's CA, never Larder's CA alone (which would make every other HTTPS site fail).",
        ]
    }

    /// The setup of the tool called `name` (one of ``toolNames``); nil for another name.
    public func tool(named name: String) -> ClientTool? {
        switch name {
        case "env": environmentTool()
        case "ca-bundle": bundleTool()
        case "system-store": systemStoreTool()
        case "apt": aptTool()
        case "pip": pipTool()
        case "npm": npmTool()
        case "cargo": cargoTool()
        case "go": goTool()
        case "git": gitTool()
        case "curl": curlTool()
        case "docker": dockerTool()
        case "containerd": containerdTool()
        default: nil
        }
    }

    /// The proxy URL for clients of a Larder listening on `listen` (its first address), and
    /// whether that address is a wildcard (`0.0.0.0`, `[::]`) that clients cannot dial, which
    /// the machine's LAN address must replace.
    public static func proxyURL(listeningOn listen: [SocketAddress]) -> (url: String, isWildcard: Bool)? {
        guard let first = listen.first else { return nil }
        let isWildcard = first.ipBytes.allSatisfy { $0 == 0 }
        return ("http://\(first.description)", isWildcard)
    }

    /// `text` as a proxy URL every tool's configuration can hold unquoted: `http://`, an
    /// optional `user:password@`, a host name or IP literal, a port; a trailing `/` is dropped.
    /// Nil for anything else (another scheme, a path, a query, a quote, a space, a `%`), so a
    /// proxy URL never breaks out of the shell, apt, TOML or systemd syntax it is written into.
    public static func checkedProxyURL(_ text: String) -> String? {
        guard text.hasPrefix("http://") else { return nil }
        var rest = Substring(text.dropFirst("http://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        let allowed: (UInt8) -> Bool = { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2E || byte == 0x2D || byte == 0x5F || byte == 0x7E
        }
        var hostPort = rest
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            guard !credentials.isEmpty, credentials.utf8.allSatisfy({ allowed($0) || $0 == 0x3A }) else { return nil }
            hostPort = rest[rest.index(after: at)...]
        }
        guard let colon = hostPort.lastIndex(of: ":") else { return nil }
        let host = hostPort[..<colon]
        let port = hostPort[hostPort.index(after: colon)...]
        guard let number = Int(port), (1...65_535).contains(number), port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            guard SocketAddress.parseIPv6(String(host.dropFirst().dropLast())) != nil else { return nil }
        } else {
            guard !host.isEmpty, host.utf8.allSatisfy({ allowed($0) && $0 != 0x7E && $0 != 0x5F }) else { return nil }
        }
        return "http://" + rest
    }
}

extension ClientSetup.Authority {
    /// The CA in `directory` (`tls.ca_dir`, resolved) as clients are to trust it, constrained to
    /// `hosts` (`tls.intercept`). It reads `ca.pem` and checks the pair as `larder ca show`
    /// does, and takes the certificate alone, written afresh (``LocalCA/trusted(from:)``):
    /// every trust file is made from it. Blocking file reads, so call it off the event loops.
    /// Throws `LocalCA.Failure` for a missing or unusable CA.
    public static func load(caDirectory directory: String, hosts: [HostRule]) throws -> ClientSetup.Authority {
        let (facts, pem) = try LocalCA.trusted(from: directory)
        return ClientSetup.Authority(pem: pem, sha256Fingerprint: facts.sha256Fingerprint, hosts: hosts)
    }
}
