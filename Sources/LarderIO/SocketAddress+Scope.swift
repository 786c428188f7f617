import Glibc

/// Address classes the destination policy decides by (RFC 6890's special-purpose registries).
extension SocketAddress {
    /// The same address with an IPv4-mapped IPv6 form (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2)
    /// turned into plain IPv4, so one check covers both spellings of an IPv4 destination.
    public var unmapped: SocketAddress {
        guard family == .ipv6, ipBytes[0..<10].allSatisfy({ $0 == 0 }), ipBytes[10] == 0xff, ipBytes[11] == 0xff else {
            return self
        }
        return SocketAddress(ipBytes: Array(ipBytes[12..<16]), port: port)
    }

    /// `0.0.0.0/8` or `::`: connecting there reaches this host's own listeners.
    public var isUnspecified: Bool {
        let plain = unmapped
        return plain.family == .ipv4 ? plain.ipBytes[0] == 0 : plain.ipBytes.allSatisfy { $0 == 0 }
    }

    /// `169.254.0.0/16` (RFC 3927) or `fe80::/10` (RFC 4291 §2.5.6): cloud metadata services
    /// and other on-link-only hosts live here.
    public var isLinkLocal: Bool {
        let plain = unmapped
        if plain.family == .ipv4 { return plain.ipBytes[0] == 169 && plain.ipBytes[1] == 254 }
        return plain.ipBytes[0] == 0xfe && plain.ipBytes[1] & 0xc0 == 0x80
    }

    /// An IPv4 or IPv6 literal (without brackets) and a port; nil for anything else.
    public init?(literal: String, port: UInt16) {
        guard let bytes = SocketAddress.parseIPv4(literal) ?? SocketAddress.parseIPv6(literal) else { return nil }
        self.init(ipBytes: bytes, port: port)
    }

    /// ``init(literal:port:)`` from a C string, parsed where it is (libcurl's address of the
    /// connection, on every transfer): no Swift string made and converted back.
    public init?(literal: UnsafePointer<CChar>, port: UInt16) {
        var v4 = in_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            self.init(ipBytes: withUnsafeBytes(of: &v4) { Array($0) }, port: port)
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, literal, &v6) == 1 else { return nil }
        self.init(ipBytes: withUnsafeBytes(of: &v6) { Array($0) }, port: port)
    }

    /// The address with another port.
    public func with(port: UInt16) -> SocketAddress { SocketAddress(ipBytes: ipBytes, port: port) }

    /// Reads a kernel `sockaddr` of `length` bytes; nil for other families.
    public init?(_ address: UnsafePointer<sockaddr>, length: Int) {
        var storage = sockaddr_storage()
        let count = min(length, MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: count))
        }
        self.init(storage: storage)
    }

    /// Parses a host the way the C library's resolver does before it asks DNS: dotted quads,
    /// and also `127.1`, `2130706433`, `0x7f000001`, `0177.0.0.1` (inet_aton), or an IPv6
    /// literal. Nil for a name. The destination policy uses it to refuse such spellings before
    /// the cache is consulted; the connect-time check is what really guards.
    public static func parseNumericHost(_ host: String) -> [UInt8]? {
        if let v6 = parseIPv6(host) { return v6 }
        var addr = in_addr()
        guard !host.isEmpty, inet_aton(host, &addr) != 0 else { return nil }
        return withUnsafeBytes(of: &addr) { Array($0) }
    }
}
