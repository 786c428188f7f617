import Glibc
import Testing

@testable import LarderIO

/// The output queue against a real loopback TCP connection: what reaches the wire is read from
/// the kernel's own segment counter (TCP_INFO), not inferred from the bytes received.
@Suite(.timeLimit(.minutes(1))) struct OutputQueueTests {
    /// Given a client whose receive window stays small (a locked 32 KiB buffer), when large
    /// file responses are written, then each head leaves with the start of its body (MSG_MORE:
    /// one segment train, one client read), and every response arrives whole.
    @Test func largeFileResponsesLeaveHeadAndBodyTogether() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 32 << 10)
        let response = try LargeResponse()
        var queue = OutputQueue()
        for index in 0..<8 {
            response.append(to: &queue)
            _ = try queue.flush(to: pair.transport)
            #expect(pair.client.unreadByteCount() > response.head.count, "response \(index): the head left alone")
            let received = try pair.client.receive(count: response.count) {
                if !queue.isEmpty { _ = try queue.flush(to: pair.transport) }
            }
            #expect(received == response.bytes, "response \(index)")
        }
    }

    /// Given a head that cannot leave in one write (a full socket: small buffers and a large
    /// response queued before it), when it leaves over several short writes, then the bytes
    /// arrive whole and in order.
    @Test func aResponseLeavingInShortWritesArrivesWhole() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        // Locked small buffers (the kernel doubles them and stops autotuning) keep writes short.
        try pair.server.setOption(SOL_SOCKET, SO_SNDBUF, 16 << 10)
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 16 << 10)
        let large = [UInt8](repeating: 0x61, count: 1 << 20)
        let response = try LargeResponse()
        var queue = OutputQueue()
        queue.append(large)
        response.append(to: &queue)
        var results = [try queue.flush(to: pair.transport)]
        let received = try pair.client.receive(count: large.count + response.count) {
            if !queue.isEmpty { results.append(try queue.flush(to: pair.transport)) }
        }
        #expect(received == large + response.bytes)
        #expect(results.filter { $0 == .wouldBlock }.count > 1, "the test needs short writes: \(results)")
        #expect(results.last == .flushed)
    }

    /// Responses without a file body (the memory tier's small hits) and responses with a
    /// small one go out in one write and one segment.
    @Test func writesInMemoryAndSmallFileResponsesWhole() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        let response = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)
        let body = [UInt8](repeating: 7, count: 1000)
        let file = try #require(OpenFile.anonymous(copying: body))
        var queue = OutputQueue()
        for _ in 0..<32 {
            for withFile in [false, true] {
                let before = try pair.server.dataSegmentsOut()
                queue.append(response)
                if withFile { queue.appendFile(file, offset: 0, count: Int64(body.count)) }
                #expect(try queue.flush(to: pair.transport) == .flushed)
                let expected = withFile ? response + body : response
                #expect(try pair.client.receive(count: expected.count) == expected)
                #expect(try pair.server.dataSegmentsOut() - before == 1)
            }
        }
    }
}

extension OutputQueueTests {
    /// Given a transport that must see the bytes (as TLS does: no sendfile), when file
    /// responses are written through it, including over short writes, then every response
    /// arrives whole and in order: a mapped memory file's bytes are written from its mapping
    /// (no read into a buffer), an unmapped one's read by the queue itself.
    @Test(arguments: [true, false])
    func aTransportWithoutSendfileGetsFileBodiesCopied(mapped: Bool) throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        try pair.server.setOption(SOL_SOCKET, SO_SNDBUF, 16 << 10)
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 16 << 10)
        let copying = CopyingTransport(pair.server)
        let budget = MemoryFileBudget(limit: 4, mappingLimit: mapped ? 4 : 0)
        let response = try LargeResponse(bodyCount: 300_000, budget: budget)
        let mapping = response.file.mapped
        #expect((mapping != nil) == mapped)
        copying.mapping = mapping
        var queue = OutputQueue()
        for index in 0..<4 {
            response.append(to: &queue)
            _ = try queue.flush(to: copying)
            let received = try pair.client.receive(count: response.count) {
                if !queue.isEmpty { _ = try queue.flush(to: copying) }
            }
            #expect(received == response.bytes, "response \(index)")
        }
        #expect(copying.writes > 4 * 2, "bodies went through write(), in pieces")
        #expect(copying.bytesFromMapping == (mapped ? 4 * response.body.count : 0))
    }
}

extension OutputQueueTests {
    /// Given a file shorter than the range queued (truncated underneath a response), when the
    /// queue reaches its end, then the flush fails naming the call, through either transport
    /// and from a mapping or not, rather than spinning on zero-byte writes.
    @Test(arguments: [(false, true), (true, true), (true, false)])
    func aFileShorterThanPromisedFailsTheFlush(copying: Bool, mapped: Bool) throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        let body = [UInt8](repeating: 5, count: 10_000)
        let file = try #require(OpenFile.anonymous(copying: body, budget: MemoryFileBudget(limit: 1, mappingLimit: mapped ? 1 : 0)))
        #expect((file.mapped != nil) == mapped)
        var queue = OutputQueue()
        queue.appendFile(file, offset: 0, count: Int64(body.count * 2))
        let transport: any Transport = copying ? CopyingTransport(pair.server) : pair.transport
        let call = copying ? (mapped ? "mapped file" : "pread") : "sendfile"
        #expect(throws: SystemError(call: call, errno: EIO)) {
            _ = try queue.flush(to: transport)
        }
        #expect(try pair.client.receive(count: body.count) == body, "what the file had was sent")
    }
}

extension OutputQueueTests {
    /// Given a large in-memory body (the memory tier's form past its memory-file sizes) with a
    /// pipelined response queued after it, when they are flushed, then no call is asked for more
    /// than ``OutputQueue/writeChunk`` bytes (the call that fills it leaves the rest for the
    /// next), and everything arrives whole and in order.
    @Test func aLargeInMemoryBodyIsWrittenInBoundedCalls() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        let copying = CopyingTransport(pair.server)
        let head = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n".utf8)
        // 256-byte blocks, each starting with its own number: built by copying (a byte-by-byte
        // map of 10 MiB takes seconds in a debug build), and a block out of place shows.
        var body: [UInt8] = []
        body.reserveCapacity(10 << 20)
        let ramp = [UInt8](0...255)
        for block in 0..<((10 << 20) / 256) {
            body.append(UInt8(truncatingIfNeeded: block))
            body.append(contentsOf: ramp[1...])
        }
        let next = [UInt8]("HTTP/1.1 204 No Content\r\n\r\n".utf8)
        var queue = OutputQueue()
        queue.append(head)
        queue.append(body, from: 0, count: body.count)
        queue.append(next)
        _ = try queue.flush(to: copying)
        let received = try pair.client.receive(count: head.count + body.count + next.count) {
            if !queue.isEmpty { _ = try queue.flush(to: copying) }
        }
        #expect(received == head + body + next)
        #expect(copying.largestAsked == OutputQueue.writeChunk, "each call asked for at most \(OutputQueue.writeChunk) bytes")
    }
}

/// A transport over a socket that takes bytes only through `write`, like a TLS session.
private final class CopyingTransport: Transport {
    let socket: Socket
    var writes = 0
    /// The most bytes one write was asked to take.
    var largestAsked = 0
    /// A memory file's mapping, and how many bytes written came straight from it.
    var mapping: UnsafeRawBufferPointer?
    var bytesFromMapping = 0
    init(_ socket: Socket) { self.socket = socket }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? { try socket.read(into: buffer) }
    func write(_ vectors: UnsafeBufferPointer<iovec>, more: Bool) throws(SystemError) -> Int? {
        writes += 1
        largestAsked = max(largestAsked, vectors.reduce(0) { $0 + $1.iov_len })
        let written = try socket.writev(vectors, more: more)
        if let mapping, let written, vectors.count == 1, let base = vectors[0].iov_base,
            UnsafeRawPointer(base) >= mapping.baseAddress!, UnsafeRawPointer(base) < mapping.baseAddress! + mapping.count
        {
            bytesFromMapping += written
        }
        return written
    }
    var canSendFile: Bool { false }
    func sendFile(from file: Int32, offset: inout Int64, count: Int) throws(SystemError) -> Int? {
        Issue.record("sendFile on a transport that cannot")
        return nil
    }
    var hasBufferedInput: Bool { false }
    var wantsWritable: Bool { false }
    func shutdownWrite() { socket.shutdownWrite() }
    func close() { socket.close() }
}

/// A response head and a file body (100 KiB unless told).
private struct LargeResponse {
    let head: [UInt8]
    let body: [UInt8]
    let file: OpenFile

    init(bodyCount: Int = 102_400, budget: MemoryFileBudget = .shared) throws {
        head = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: \(bodyCount)\r\n\r\n".utf8)
        body = (0..<bodyCount).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        file = try #require(OpenFile.anonymous(copying: body, budget: budget))
    }

    var bytes: [UInt8] { head + body }
    var count: Int { head.count + body.count }

    func append(to queue: inout OutputQueue) {
        queue.append(head)
        queue.appendFile(file, offset: 0, count: Int64(body.count))
    }
}

/// A connected TCP pair on 127.0.0.1 (listener on port 0), the server side with TCP_NODELAY as
/// Larder's listener sets it on accepted connections.
private struct LoopbackPair {
    let server: Socket
    let client: Socket
    let transport: SocketTransport

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
        transport = SocketTransport(server)
    }

    func close() {
        server.close()
        client.close()
    }
}

extension Socket {
    /// Data segments this socket has sent (`tcpi_data_segs_out`).
    /// Linux's `struct tcp_info` only grows at the end (include/uapi/linux/tcp.h), so the
    /// offset holds on every later kernel; glibc's declaration stops before the field.
    fileprivate func dataSegmentsOut() throws -> UInt32 {
        let offset = 156
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        let result = getsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_INFO), &info, &length)
        try #require(result == 0 && Int(length) >= offset + 4, "getsockopt(TCP_INFO) failed: errno \(errno)")
        return info.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }

    /// Bytes that have arrived and were not read (FIONREAD).
    fileprivate func unreadByteCount() -> Int {
        var count: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 ? Int(count) : -1
    }

    /// Reads exactly `count` bytes, waiting up to 5 s in all; `meanwhile` runs before each
    /// wait (the sender's next flush, when the bytes do not fit the sockets' buffers at once).
    fileprivate func receive(count: Int, meanwhile: () throws -> Void = {}) throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let deadline = ContinuousClock.now + .seconds(5)
        while received.count < count && ContinuousClock.now < deadline {
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
