import LarderIO

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `::1/128`).
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    public let network: [UInt8]
    public let prefixLength: Int

    /// Parses `address/prefix`; a bare address is a single host.
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else { return nil }
        let address = String(parts[0])
        guard let bytes = SocketAddress.parseIPv4(address) ?? SocketAddress.parseIPv6(address) else { return nil }
        let maxPrefix = bytes.count * 8
        var prefix = maxPrefix
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = Int(parts[1]), value <= maxPrefix
            else { return nil }
            prefix = value
        }
        network = CIDR.mask(bytes, prefix)
        prefixLength = prefix
    }

    /// Whether `address` lies in this network. IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`)
    /// match IPv4 networks.
    public func contains(_ address: SocketAddress) -> Bool {
        var bytes = address.ipBytes
        if network.count == 4 && bytes.count == 16 {
            guard bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff else { return false }
            bytes = Array(bytes[12..<16])
        }
        guard bytes.count == network.count else { return false }
        return CIDR.mask(bytes, prefixLength) == network
    }

    public var description: String {
        "\(SocketAddress(ipBytes: network, port: 0).ipString)/\(prefixLength)"
    }

    private static func mask(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        var result = bytes
        for index in 0..<result.count {
            let bitsInByte = max(0, min(8, prefix - index * 8))
            result[index] &= bitsInByte == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - bitsInByte))
        }
        return result
    }
}
