import CLarderSystem
import Glibc

/// A socket file descriptor. A value: it does not close itself; its owner calls ``close()``.
///
/// Every call goes through ``Syscall``; the non-blocking I/O calls return `nil` when the call
/// would block, so callers wait for readiness on their ``EventLoop``.
public struct Socket: Sendable, Hashable {
    /// The file descriptor.
    public let fd: Int32

    public init(fd: Int32) { self.fd = fd }

    /// Opens a non-blocking listening TCP socket bound to `address`.
    public static func listen(on address: SocketAddress, backlog: Int32 = 4096) throws(SystemError) -> Socket {
        let domain = address.family == .ipv4 ? AF_INET : AF_INET6
        let fd = try Syscall.call("socket") {
            Glibc.socket(domain, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        }
        let socket = Socket(fd: fd)
        do {
            try socket.setOption(SOL_SOCKET, SO_REUSEADDR, 1)
            if address.family == .ipv6 { try socket.setOption(Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1) }
            try address.withSockAddr { (sa, length) throws(SystemError) in
                _ = try Syscall.call("bind") { Glibc.bind(fd, sa, length) }
            }
            _ = try Syscall.call("listen") { Glibc.listen(fd, backlog) }
        } catch {
            socket.close()
            throw error
        }
        return socket
    }

    /// Starts a non-blocking connect to `address`; completion is signalled by writability.
    public static func connect(to address: SocketAddress) throws(SystemError) -> Socket {
        let domain = address.family == .ipv4 ? AF_INET : AF_INET6
        let fd = try Syscall.call("socket") {
            Glibc.socket(domain, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        }
        let socket = Socket(fd: fd)
        do {
            try address.withSockAddr { (sa, length) throws(SystemError) in
                let result = Glibc.connect(fd, sa, length)
                if result == -1 && Glibc.errno != EINPROGRESS && Glibc.errno != EINTR {
                    throw SystemError(call: "connect", errno: Glibc.errno)
                }
            }
        } catch {
            socket.close()
            throw error
        }
        return socket
    }

    /// Accepts one pending connection as a non-blocking socket, or `nil` if none is pending.
    public func accept() throws(SystemError) -> (Socket, SocketAddress?)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = try withUnsafeMutablePointer(to: &storage) { (pointer) throws(SystemError) -> Int32? in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa) throws(SystemError) -> Int32? in
                try Syscall.nonBlocking("accept4") {
                    larder_accept4(self.fd, sa, &length)
                }
            }
        }
        guard let fd else { return nil }
        return (Socket(fd: fd), SocketAddress(storage: storage))
    }

    /// Reads into `buffer`: the byte count (0 at end of stream), or `nil` if it would block.
    @inline(__always)
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try Syscall.nonBlocking("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// Writes `buffer`: the byte count written, or `nil` if it would block.
    @inline(__always)
    public func write(_ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try Syscall.nonBlocking("send") { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Gathers and writes several buffers in one call. `more` says that more data follows at
    /// once (a body sent with sendfile after its head), so TCP holds these bytes for it
    /// (MSG_MORE) rather than sending a head-only segment.
    @inline(__always)
    public func writev(_ vectors: UnsafeBufferPointer<iovec>, more: Bool = false) throws(SystemError) -> Int? {
        var header = msghdr()
        header.msg_iov = UnsafeMutablePointer(mutating: vectors.baseAddress)
        header.msg_iovlen = vectors.count
        // sendmsg rather than writev: MSG_NOSIGNAL keeps a closed peer from raising SIGPIPE.
        let flags = more ? Int32(MSG_NOSIGNAL) | Int32(MSG_MORE) : Int32(MSG_NOSIGNAL)
        return try Syscall.nonBlocking("sendmsg") { Glibc.sendmsg(fd, &header, flags) }
    }

    /// Sends `count` bytes of `file` starting at `offset` (advanced by the call) with sendfile(2).
    @inline(__always)
    public func sendfile(from file: Int32, offset: inout Int64, count: Int) throws(SystemError) -> Int? {
        var position = off_t(offset)
        defer { offset = Int64(position) }
        return try Syscall.nonBlocking("sendfile") { CLarderSystem.sendfile(fd, file, &position, count) }
    }

    /// Sets an integer socket option.
    public func setOption(_ level: Int32, _ name: Int32, _ value: Int32) throws(SystemError) {
        var value = value
        _ = try Syscall.call("setsockopt") {
            Glibc.setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Disables Nagle's algorithm: responses are written whole, so waiting only adds latency.
    public func setNoDelay() {
        try? setOption(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    /// The pending socket error (SO_ERROR), used after a non-blocking connect.
    public func pendingError() -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try? Syscall.call("getsockopt") { Glibc.getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) }
        return value
    }

    /// The bytes written that the peer has not acknowledged yet (SIOCOUTQ), or nil when the
    /// kernel cannot say: what a client has really received is what was written less these.
    public func unsentBytes() -> Int? {
        var bytes: Int32 = 0
        guard (try? Syscall.call("ioctl(SIOCOUTQ)") { larder_unsent_bytes(fd, &bytes) }) != nil else { return nil }
        return Int(bytes)
    }

    /// The local address the socket is bound to.
    public func localAddress() throws(SystemError) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { (pointer) throws(SystemError) -> Int32 in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa) throws(SystemError) -> Int32 in
                try Syscall.call("getsockname") { Glibc.getsockname(fd, sa, &length) }
            }
        }
        return SocketAddress(storage: storage)
    }

    /// Shuts down the write side (sends FIN) so the peer sees the end of the stream.
    public func shutdownWrite() {
        _ = try? Syscall.call("shutdown") { Glibc.shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Closes the descriptor.
    public func close() {
        Syscall.close(fd)
    }

    /// Puts an inherited descriptor (systemd socket activation) into non-blocking mode.
    public func setNonBlocking() throws(SystemError) {
        let flags = try Syscall.call("fcntl") { fcntl(fd, F_GETFL) }
        _ = try Syscall.call("fcntl") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }
}
