import Glibc

extension Socket {
    /// Bytes of Linux's `struct tcp_info` up to and including `tcpi_snd_wnd` (Linux 5.4).
    /// glibc's declaration stops long before it; the kernel's (include/uapi/linux/tcp.h) only
    /// ever grows at the end, so the offset holds on every later kernel.
    static let tcpInfoThroughSendWindow = 232
    static let sendWindowOffset = 228

    /// The receive window the peer last advertised, in bytes after scaling (TCP_INFO's
    /// `tcpi_snd_wnd`), or nil where the kernel does not report it (before Linux 5.4) or the
    /// call fails.
    public func peerReceiveWindow() -> Int? {
        withUnsafeTemporaryAllocation(byteCount: Socket.tcpInfoThroughSendWindow, alignment: 8) { raw -> Int? in
            var length = socklen_t(raw.count)
            let result = try? Syscall.call("getsockopt") {
                Glibc.getsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_INFO), raw.baseAddress, &length)
            }
            // A shorter answer is an older kernel's struct, without the field.
            guard result != nil, Int(length) >= Socket.tcpInfoThroughSendWindow else { return nil }
            return Int(raw.loadUnaligned(fromByteOffset: Socket.sendWindowOffset, as: UInt32.self))
        }
    }
}
