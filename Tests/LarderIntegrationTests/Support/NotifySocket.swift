import Foundation
import Glibc

/// A Unix datagram socket standing in for systemd's NOTIFY_SOCKET: collects what sd_notify sends.
final class NotifySocket {
    let path: String
    private let fd: Int32

    init() throws {
        path = NSTemporaryDirectory() + "larder-notify-\(UUID().uuidString.prefix(8))"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            path.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count))) }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw TestFailure("cannot bind \(path): errno \(errno)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Messages received within `seconds` (each datagram split into its lines), stopping early
    /// once `until` matches one of them.
    func receive(for seconds: Double, until: ((String) -> Bool)? = nil) -> [String] {
        var messages: [String] = []
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { continue }
            let lines = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").map(String.init)
            messages += lines
            if let until, lines.contains(where: until) { break }
        }
        return messages
    }

    deinit {
        close(fd)
        unlink(path)
    }
}
