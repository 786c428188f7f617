import Glibc
import LarderIO
import Testing

/// The output queue against a real loopback TCP connection: what reaches the wire is read from
/// the kernel's own segment counter (TCP_INFO), not inferred from the bytes received.
@Suite struct OutputQueueTests {
    /// Given a new connection, when several responses with a sendfile body are written, then
    /// the first ``OutputQueue/leadsPushedAlone`` send their head as a segment of its own (two
    /// data segments) and the later ones hold the head for the body (one segment).
    @Test func pushesTheFirstHeadsAloneThenHoldsHeadsForTheirBodies() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        let head = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".utf8)
        let body = (0..<1000).map { UInt8(truncatingIfNeeded: $0) }
        let file = try #require(OpenFile.anonymous(copying: body))
        var queue = OutputQueue()
        var segmentsPerResponse: [UInt32] = []
        for _ in 0..<(OutputQueue.leadsPushedAlone + 2) {
            let before = try pair.server.dataSegmentsOut()
            queue.append(head)
            queue.appendFile(file, offset: 0, count: Int64(body.count))
            #expect(try queue.flush(to: pair.server) == .flushed)
            // The whole response arrives intact either way.
            #expect(try pair.client.receive(count: head.count + body.count) == head + body)
            segmentsPerResponse.append(try pair.server.dataSegmentsOut() - before)
        }
        let alone = [UInt32](repeating: 2, count: OutputQueue.leadsPushedAlone)
        #expect(segmentsPerResponse == alone + [1, 1])
    }

    /// Given a head that cannot leave in one write (a full socket: small buffers and a large
    /// response queued before it), when it leaves over several short writes, then it counts as
    /// one of the ``OutputQueue/leadsPushedAlone``, not one per write: the next responses still
    /// send their heads alone.
    @Test func aHeadLeavingInShortWritesCountsOnce() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        // Locked small buffers (the kernel doubles them and stops autotuning) keep writes short.
        try pair.server.setOption(SOL_SOCKET, SO_SNDBUF, 16 << 10)
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 16 << 10)
        let large = [UInt8](repeating: 0x61, count: 1 << 20)
        let head = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".utf8)
        let body = [UInt8](repeating: 0x62, count: 1000)
        let file = try #require(OpenFile.anonymous(copying: body))
        var queue = OutputQueue()
        queue.append(large)
        queue.append(head)
        queue.appendFile(file, offset: 0, count: Int64(body.count))
        #expect(try queue.flush(to: pair.server) == .wouldBlock)
        var writes = 1
        let received = try pair.client.receive(count: large.count + head.count + body.count) {
            if !queue.isEmpty {
                _ = try queue.flush(to: pair.server)
                writes += 1
            }
        }
        #expect(received == large + head + body)
        #expect(writes > 2, "the run left in \(writes) writes; the test needs short writes")
        var segmentsPerResponse: [UInt32] = []
        for _ in 0..<OutputQueue.leadsPushedAlone {
            let before = try pair.server.dataSegmentsOut()
            queue.append(head)
            queue.appendFile(file, offset: 0, count: Int64(body.count))
            #expect(try queue.flush(to: pair.server) == .flushed)
            #expect(try pair.client.receive(count: head.count + body.count) == head + body)
            segmentsPerResponse.append(try pair.server.dataSegmentsOut() - before)
        }
        let alone = [UInt32](repeating: 2, count: OutputQueue.leadsPushedAlone - 1)
        #expect(segmentsPerResponse == alone + [1])
    }

    /// Responses without a file body (the memory tier's small hits) go out in one write, as
    /// always: the count of heads pushed alone is only spent where a file follows.
    @Test func writesInMemoryResponsesWhole() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        let response = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)
        var queue = OutputQueue()
        for _ in 0..<OutputQueue.leadsPushedAlone {
            let before = try pair.server.dataSegmentsOut()
            queue.append(response)
            #expect(try queue.flush(to: pair.server) == .flushed)
            #expect(try pair.client.receive(count: response.count) == response)
            #expect(try pair.server.dataSegmentsOut() - before == 1)
        }
        let body = [UInt8](repeating: 7, count: 1000)
        let file = try #require(OpenFile.anonymous(copying: body))
        let before = try pair.server.dataSegmentsOut()
        queue.append(response)
        queue.appendFile(file, offset: 0, count: Int64(body.count))
        #expect(try queue.flush(to: pair.server) == .flushed)
        #expect(try pair.client.receive(count: response.count + body.count) == response + body)
        #expect(try pair.server.dataSegmentsOut() - before == 2)
    }
}

/// A connected TCP pair on 127.0.0.1 (listener on port 0), the server side with TCP_NODELAY as
/// Larder's listener sets it on accepted connections.
private struct LoopbackPair {
    let server: Socket
    let client: Socket

    init() throws {
        let listener = try Socket.listen(on: SocketAddress(ipBytes: [127, 0, 0, 1], port: 0))
        defer { listener.close() }
        let address = try #require(try listener.localAddress())
        client = try Socket.connect(to: address)
        var accepted: Socket?
        for _ in 0..<200 where accepted == nil {
            accepted = try listener.accept()?.0
            if accepted == nil { usleep(5_000) }
        }
        server = try #require(accepted)
        server.setNoDelay()
    }

    func close() {
        server.close()
        client.close()
    }
}

extension Socket {
    /// Data segments this socket has sent (`tcpi_data_segs_out`, RFC 4898's DataSegsOut).
    /// glibc's `struct tcp_info` stops before it; the field sits at byte 156 of Linux's
    /// (include/uapi/linux/tcp.h, whose layout only ever grows at the end).
    fileprivate func dataSegmentsOut() throws -> UInt32 {
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        let result = info.withUnsafeMutableBytes { raw in
            getsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_INFO), raw.baseAddress, &length)
        }
        try #require(result == 0 && length >= 160, "getsockopt(TCP_INFO) failed: errno \(errno)")
        return info.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 156, as: UInt32.self) }
    }

    /// Reads exactly `count` bytes, waiting up to 5 s in all; `meanwhile` runs before each
    /// wait (the sender's next flush, when the bytes do not fit the sockets' buffers at once).
    fileprivate func receive(count: Int, meanwhile: () throws -> Void = {}) throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<500 where received.count < count {
            try meanwhile()
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 10)
            let got = try buffer.withUnsafeMutableBytes { raw in
                try read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<min(raw.count, count - received.count)]))
            }
            if let got {
                try #require(got > 0, "the connection closed after \(received.count) of \(count) bytes")
                received += buffer[0..<got]
            }
        }
        return received
    }
}
