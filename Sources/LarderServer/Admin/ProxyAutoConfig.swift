import LarderIO

/// The proxy auto-config file browsers load (`/proxy.pac`): a `FindProxyForURL` that sends
/// http and https through one Larder address, and goes direct for plain host names,
/// localhost, and loopback, private and link-local address literals.
///
/// Names are never resolved to decide (no `dnsResolve`, and `isInNet` only on literals, where
/// it needs no lookup): a PAC file that resolves stalls every page load on DNS.
struct ProxyAutoConfig: Sendable, Equatable {
    /// The proxy as `host:port` (`[v6]:port`), the address the client reached Larder on.
    let proxy: String
    /// The onboarding page's host name, always sent through the proxy (it is Larder's own);
    /// empty when the page is off.
    let setupHost: String

    static let contentType = "application/x-ns-proxy-autoconfig"

    /// The IPv4 networks reached directly (RFC 1918 private, loopback, link-local).
    static let directNetworks: [(network: String, mask: String)] = [
        ("127.0.0.0", "255.0.0.0"), ("10.0.0.0", "255.0.0.0"), ("172.16.0.0", "255.240.0.0"),
        ("192.168.0.0", "255.255.0.0"), ("169.254.0.0", "255.255.0.0"),
    ]

    /// The script. Every value from outside the script's own text is a JavaScript string
    /// literal with anything but plain address characters escaped.
    var text: String {
        let networks = Self.directNetworks.map { "isInNet(host, \"\($0.network)\", \"\($0.mask)\")" }.joined(separator: " ||\n            ")
        let setup = setupHost.isEmpty ? "" : "    if (host === \(Self.literal(setupHost))) return proxy;\n"
        return """
            // Proxy auto-config for Larder: http and https through it; plain host names,
            // localhost, and loopback, private and link-local addresses direct.
            function FindProxyForURL(url, host) {
                var proxy = \(Self.literal("PROXY " + proxy));
                host = host.toLowerCase();
            \(setup)    var scheme = url.substring(0, url.indexOf(":")).toLowerCase();
                if (scheme !== "http" && scheme !== "https") return "DIRECT";
                // Address literals first: an IPv6 one has no dot, and would pass for a plain name.
                if (/^[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+$/.test(host)) {
                    if (\(networks)) return "DIRECT";
                    return proxy;
                }
                if (host.indexOf(":") >= 0) {
                    var bare = host.replace(/^\\[/, "").replace(/\\]$/, "");
                    if (bare === "::1" || /^f[cd]/.test(bare) || /^fe[89ab]/.test(bare)) return "DIRECT";
                    return proxy;
                }
                if (isPlainHostName(host) || host === "localhost" || dnsDomainIs(host, ".localhost")) return "DIRECT";
                return proxy;
            }

            """
    }

    /// A double-quoted JavaScript string literal of `value`: letters, digits and `.:-[] ` as
    /// they are, everything else as `\uXXXX`, so no value can end the literal or the script.
    static func literal(_ value: String) -> String {
        var out = "\""
        for unit in value.utf16 {
            let plain =
                (unit >= 0x30 && unit <= 0x39) || (unit >= 0x41 && unit <= 0x5A) || (unit >= 0x61 && unit <= 0x7A)
                || unit == 0x2E || unit == 0x3A || unit == 0x2D || unit == 0x5B || unit == 0x5D || unit == 0x20
            if plain {
                out.unicodeScalars.append(Unicode.Scalar(UInt8(unit)))
            } else {
                let hex = String(unit, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        return out + "\""
    }

    /// How `address` is written for clients: `host:port`, an IPv4-mapped IPv6 address (a
    /// dual-stack listener's IPv4 client) as the IPv4 address it is.
    static func advertised(_ address: SocketAddress) -> String { address.unmapped.description }
}
