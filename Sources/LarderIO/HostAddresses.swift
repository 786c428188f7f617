import Glibc

/// The IP addresses configured on this host's interfaces (getifaddrs), port 0.
public enum HostAddresses {
    /// Every IPv4 and IPv6 interface address; empty if the kernel would not say.
    public static func current() -> [SocketAddress] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard (try? Syscall.call("getifaddrs", { getifaddrs(&list) })) != nil, let list else { return [] }
        defer { freeifaddrs(list) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = list
        while let entry = cursor {
            if let raw = entry.pointee.ifa_addr {
                let family = Int32(raw.pointee.sa_family)
                let length = family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size
                if family == AF_INET || family == AF_INET6, let address = SocketAddress(raw, length: length) {
                    let plain = address.with(port: 0)
                    if !addresses.contains(plain) { addresses.append(plain) }
                }
            }
            cursor = entry.pointee.ifa_next
        }
        return addresses
    }
}
