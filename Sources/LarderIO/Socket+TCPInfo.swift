import Glibc

extension Socket {
    /// Bytes of Linux's `struct tcp_info` up to and including `tcpi_snd_wnd` (Linux 5.4), the
    /// last field read here. glibc's declaration stops long before it; the kernel's
    /// (include/uapi/linux/tcp.h) only ever grows at the end, so offsets hold on every later
    /// kernel.
    static let tcpInfoSize = 232
    /// `tcpi_data_segs_out` (RFC 4898's DataSegsOut): data segments sent.
    static let dataSegmentsOutOffset = 156
    /// `tcpi_snd_wnd`: the receive window the peer last advertised, after scaling.
    static let sendWindowOffset = 228

    /// The receive window the peer last advertised, in bytes after scaling (TCP_INFO's
    /// `tcpi_snd_wnd`), or nil where the kernel does not report it (before Linux 5.4) or the
    /// call fails.
    public func peerReceiveWindow() -> Int? {
        tcpInfoField(at: Socket.sendWindowOffset).map(Int.init)
    }

    /// The 32-bit TCP_INFO field at byte `offset` of Linux's `struct tcp_info`, or nil when
    /// the call fails or the kernel's struct ends before it.
    func tcpInfoField(at offset: Int) -> UInt32? {
        withUnsafeTemporaryAllocation(byteCount: Socket.tcpInfoSize, alignment: 8) { raw -> UInt32? in
            var length = socklen_t(raw.count)
            let result = try? Syscall.call("getsockopt") {
                Glibc.getsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_INFO), raw.baseAddress, &length)
            }
            // A shorter answer is an older kernel's struct, without the field.
            guard result != nil, Int(length) >= offset + 4 else { return nil }
            return raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
        }
    }
}
