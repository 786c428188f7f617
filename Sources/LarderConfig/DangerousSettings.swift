import LarderIO

/// The settings that let strangers in, which `check-config` and `serve` (at start and after a
/// reload) warn about without refusing them: an operator may mean it, but should know.
/// Only what is dangerous is here; an unusual setting that harms nobody is not.
public enum DangerousSettings {
    /// A warning per danger in `config`, given the addresses the listeners are (or will be)
    /// on: those bound or passed by systemd, which may differ from the file's.
    public static func warnings(_ config: Config, proxyListeners: [SocketAddress], adminListener: SocketAddress?) -> [String] {
        var warnings: [String] = []
        let allow = config.proxy.allow
        // Every address, however the list spells it: `0.0.0.0/0`, or `0.0.0.0/1` with
        // `128.0.0.0/1`, or `::/0` on an IPv6 listener.
        let open = proxyListeners.first { !$0.isLoopback && admitsEveryone(allow, on: $0) }
        if let listener = open, config.proxy.authUsers.isEmpty {
            warnings.append(
                "open proxy: proxy listener \(listener) is not on loopback and proxy.allow admits every address "
                    + "(\(allow.map(\.description).joined(separator: ", "))) "
                    + "with no proxy.auth_users; anyone who reaches it can use it (and its cache). "
                    + "List your clients' networks in proxy.allow, or set proxy.auth_users")
        }
        if let admin = adminListener, !admin.isLoopback, config.admin.token.isEmpty {
            warnings.append(
                "admin listener \(admin) is not on loopback and has no admin.token: anyone who reaches it can purge, ban, "
                    + "clear and list the cache. Set admin.token_file (systemd: LoadCredential=admin-token:...), "
                    + "or listen on 127.0.0.1")
        }
        return warnings
    }

    /// Whether `allow` admits every client a listener on `listener` can have. An IPv4 listener
    /// has IPv4 clients; an IPv6 one IPv6 clients, and IPv4 ones as `::ffff:a.b.c.d` when a
    /// socket systemd passed is dual-stack (``CIDR/contains(_:)`` matches those to IPv4 rules).
    static func admitsEveryone(_ allow: [CIDR], on listener: SocketAddress) -> Bool {
        var ipv4 = allow.filter { $0.network.count == 4 }.map { (network: $0.network, length: $0.prefixLength) }
        guard listener.family == .ipv6 else { return covers(ipv4, prefix: [0, 0, 0, 0], length: 0) }
        let ipv6 = allow.filter { $0.network.count == 16 }.map { (network: $0.network, length: $0.prefixLength) }
        if covers(ipv6, prefix: [UInt8](repeating: 0, count: 16), length: 0) { return true }
        // IPv6 rules over ::ffff:0:0/96 (RFC 4291 §2.5.5.2) admit the IPv4 clients they map.
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        for rule in ipv6 where sharesBits(rule.network, mapped + [0, 0, 0, 0], min(rule.length, 96)) {
            ipv4.append((Array(rule.network[12..<16]), max(0, rule.length - 96)))
        }
        return covers(ipv4, prefix: [0, 0, 0, 0], length: 0)
    }

    /// Whether `rules` together cover every address that starts with `prefix`'s first
    /// `length` bits: one rule as wide or wider does, or both halves are covered.
    private static func covers(_ rules: [(network: [UInt8], length: Int)], prefix: [UInt8], length: Int) -> Bool {
        var inside: [(network: [UInt8], length: Int)] = []
        for rule in rules where sharesBits(rule.network, prefix, min(rule.length, length)) {
            if rule.length <= length { return true }
            inside.append(rule)
        }
        guard !inside.isEmpty else { return false }
        var upper = prefix
        upper[length / 8] |= 0x80 >> UInt8(length % 8)
        return covers(inside, prefix: prefix, length: length + 1) && covers(inside, prefix: upper, length: length + 1)
    }

    /// Whether `a` and `b` agree on their first `bits` bits.
    private static func sharesBits(_ a: [UInt8], _ b: [UInt8], _ bits: Int) -> Bool {
        for index in 0..<(bits / 8) where a[index] != b[index] { return false }
        let rest = bits % 8
        guard rest > 0 else { return true }
        let mask = UInt8(0xff) << UInt8(8 - rest)
        return a[bits / 8] & mask == b[bits / 8] & mask
    }
}
