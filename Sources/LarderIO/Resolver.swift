import Glibc

/// Host name resolution (getaddrinfo), which blocks: callers run it on a ``BlockingWorker``.
public enum Resolver {
    /// A failed lookup, with getaddrinfo's message.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let host: String
        public let message: String
        public var description: String { "cannot resolve \(host): \(message)" }
    }

    /// The addresses of `host` (an IP literal is returned as is), IPv4 first.
    public static func resolve(_ host: String, port: UInt16) -> Result<[SocketAddress], Failure> {
        if let bytes = SocketAddress.parseIPv4(host) ?? SocketAddress.parseIPv6(host) {
            return .success([SocketAddress(ipBytes: bytes, port: port)])
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            return .failure(Failure(host: host, message: String(cString: gai_strerror(status))))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                var storage = sockaddr_storage()
                withUnsafeMutableBytes(of: &storage) { raw in
                    raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen)))
                }
                if let parsed = SocketAddress(storage: storage), !addresses.contains(parsed) { addresses.append(parsed) }
            }
            cursor = entry.pointee.ai_next
        }
        addresses.sort { $0.family == .ipv4 && $1.family == .ipv6 }
        return addresses.isEmpty ? .failure(Failure(host: host, message: "no addresses")) : .success(addresses)
    }
}
