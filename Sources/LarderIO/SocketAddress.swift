import Glibc

/// An IPv4 or IPv6 socket address (IP literal and port).
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: Sendable { case ipv4, ipv6 }

    /// The IP address as 4 or 16 bytes in network order.
    public let ipBytes: [UInt8]
    /// The port, host order.
    public let port: UInt16

    public var family: Family { ipBytes.count == 4 ? .ipv4 : .ipv6 }

    /// An address from raw IP bytes (4 or 16) and a port.
    public init(ipBytes: [UInt8], port: UInt16) {
        precondition(ipBytes.count == 4 || ipBytes.count == 16)
        self.ipBytes = ipBytes
        self.port = port
    }

    /// Parses `"127.0.0.1:3128"` or `"[::1]:3128"`. Host names are not resolved: listen
    /// addresses are IP literals.
    public init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = Int(portText), port <= 65535
        else { return nil }
        if host.hasPrefix("[") {
            guard host.hasSuffix("]"), host.count > 2 else { return nil }
            host = String(host.dropFirst().dropLast())
            guard let bytes = SocketAddress.parseIPv6(host) else { return nil }
            self.init(ipBytes: bytes, port: UInt16(port))
        } else {
            guard let bytes = SocketAddress.parseIPv4(host) else { return nil }
            self.init(ipBytes: bytes, port: UInt16(port))
        }
    }

    /// Parses a dotted-quad IPv4 literal.
    public static func parseIPv4(_ text: String) -> [UInt8]? {
        var addr = in_addr()
        guard !text.isEmpty, inet_pton(AF_INET, text, &addr) == 1 else { return nil }
        return withUnsafeBytes(of: &addr) { Array($0) }
    }

    /// Parses an IPv6 literal (without brackets).
    public static func parseIPv6(_ text: String) -> [UInt8]? {
        var addr = in6_addr()
        guard !text.isEmpty, inet_pton(AF_INET6, text, &addr) == 1 else { return nil }
        return withUnsafeBytes(of: &addr) { Array($0) }
    }

    /// Reads a kernel `sockaddr` (as filled by accept/getsockname).
    public init?(storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let sin = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            var addr = sin.sin_addr
            self.init(ipBytes: withUnsafeBytes(of: &addr) { Array($0) }, port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            var addr = sin6.sin6_addr
            self.init(ipBytes: withUnsafeBytes(of: &addr) { Array($0) }, port: UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }

    /// The IP literal alone: `127.0.0.1` or `::1` (no brackets).
    public var ipString: String {
        // On the stack, no intermediate arrays: the access log writes this for every request.
        let family = self.family == .ipv4 ? AF_INET : AF_INET6
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN) + 1) { buffer in
            let written = ipBytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, buffer.baseAddress, socklen_t(buffer.count)) }
            guard written != nil else { return "?" }
            return String(cString: buffer.baseAddress!)
        }
    }

    /// `127.0.0.1:3128` or `[::1]:3128`.
    public var description: String {
        family == .ipv4 ? "\(ipString):\(port)" : "[\(ipString)]:\(port)"
    }

    /// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
    public var isLoopback: Bool {
        if family == .ipv4 { return ipBytes[0] == 127 }
        if ipBytes[0..<15].allSatisfy({ $0 == 0 }) && ipBytes[15] == 1 { return true }
        if ipBytes[0..<10].allSatisfy({ $0 == 0 }) && ipBytes[10] == 0xff && ipBytes[11] == 0xff {
            return ipBytes[12] == 127
        }
        return false
    }

    /// Calls `body` with this address as a kernel `sockaddr`.
    public func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(SystemError) -> R) throws(SystemError) -> R {
        var storage = sockaddr_storage()
        let length: socklen_t
        switch family {
        case .ipv4:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: ipBytes) }
            withUnsafeMutableBytes(of: &storage) { raw in
                withUnsafeBytes(of: &sin) { raw.copyMemory(from: $0) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        case .ipv6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: ipBytes) }
            withUnsafeMutableBytes(of: &storage) { raw in
                withUnsafeBytes(of: &sin6) { raw.copyMemory(from: $0) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
        return try withUnsafePointer(to: &storage) { (pointer) throws(SystemError) -> R in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa) throws(SystemError) -> R in
                try body(sa, length)
            }
        }
    }
}
