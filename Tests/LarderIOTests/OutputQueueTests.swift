import Glibc
@testable import LarderIO
import Testing

/// The output queue against a real loopback TCP connection: what reaches the wire is read from
/// the kernel's own segment counter (TCP_INFO), not inferred from the bytes received.
@Suite struct OutputQueueTests {
    /// Given a client whose receive window stays small (a locked 32 KiB buffer), when large
    /// file responses are written, then each of the first ``OutputQueue/pausedLeads`` sends
    /// its head alone and holds the body until the next flush, and later ones go out whole.
    @Test func pausesTheBodiesOfTheFirstLargeResponsesWhileTheClientWindowIsSmall() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 32 << 10)
        let response = try LargeResponse()
        var queue = OutputQueue()
        var paused: [Bool] = []
        for index in 0..<(OutputQueue.pausedLeads + 2) {
            response.append(to: &queue)
            let result = try queue.flush(to: pair.server)
            paused.append(result == .paused)
            var received: [UInt8] = []
            if result == .paused {
                received = try pair.client.receive(count: response.head.count)
                #expect(received == response.head, "response \(index)")
                #expect(!pair.client.hasUnreadBytes(), "response \(index): the body left with its head")
            }
            // The whole response arrives intact either way.
            received += try pair.client.receive(count: response.count - received.count) {
                if !queue.isEmpty { _ = try queue.flush(to: pair.server) }
            }
            #expect(received == response.bytes, "response \(index)")
        }
        #expect(paused == [Bool](repeating: true, count: OutputQueue.pausedLeads) + [false, false])
    }

    /// Given a client whose buffer is large (locked at 4 MiB), when its window has grown past
    /// twice a response, then no later response is paused, well before the count runs out.
    @Test func stopsPausingOnceTheClientWindowHoldsTwoResponses() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 4 << 20)
        let response = try LargeResponse()
        let paused = try pair.sendWhole(response, times: OutputQueue.pausedLeads)
        let firstWhole = try #require(paused.firstIndex(of: false), "every response was paused: \(paused)")
        #expect(firstWhole < OutputQueue.pausedLeads / 2)
        #expect(!paused[firstWhole...].contains(true), "paused again after the window had grown: \(paused)")
        #expect(try #require(pair.server.peerReceiveWindow()) >= 2 * response.count)
    }

    /// Given responses too large for any window to hold two (2 MiB bodies, a client buffer
    /// locked at 2 MiB), when the client's window has grown past 1 MiB, then pausing stops:
    /// beyond that the window counts as large whatever the response.
    @Test func stopsPausingOnceTheClientWindowPassesOneMebibyte() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 2 << 20)
        let response = try LargeResponse(bodyCount: 2 << 20)
        let paused = try pair.sendWhole(response, times: OutputQueue.pausedLeads)
        let window = try #require(pair.server.peerReceiveWindow())
        #expect(window >= OutputQueue.largeClientWindow && window < 2 * response.count, "window \(window)")
        let firstWhole = try #require(paused.firstIndex(of: false), "every response was paused: \(paused)")
        #expect(!paused[firstWhole...].contains(true), "\(paused)")
    }

    /// Given a head that cannot leave in one write (a full socket: small buffers and a large
    /// response queued before it), when it leaves over several short writes, then it pauses
    /// its body once, and counts as one of the ``OutputQueue/pausedLeads``, not one per write.
    @Test func aHeadLeavingInShortWritesCountsOnce() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        // Locked small buffers (the kernel doubles them and stops autotuning) keep writes short
        // and the client's window small.
        try pair.server.setOption(SOL_SOCKET, SO_SNDBUF, 16 << 10)
        try pair.client.setOption(SOL_SOCKET, SO_RCVBUF, 16 << 10)
        let large = [UInt8](repeating: 0x61, count: 1 << 20)
        let response = try LargeResponse()
        var queue = OutputQueue()
        queue.append(large)
        response.append(to: &queue)
        var results = [try queue.flush(to: pair.server)]
        let received = try pair.client.receive(count: large.count + response.count) {
            if !queue.isEmpty { results.append(try queue.flush(to: pair.server)) }
        }
        #expect(received == large + response.bytes)
        #expect(results.filter { $0 == .wouldBlock }.count > 1, "the test needs short writes: \(results)")
        #expect(results.filter { $0 == .paused }.count == 1, "\(results)")
        var pauses = 0
        for _ in 0..<OutputQueue.pausedLeads {
            response.append(to: &queue)
            if try queue.flush(to: pair.server) == .paused { pauses += 1 }
            let bytes = try pair.client.receive(count: response.count) {
                if !queue.isEmpty { _ = try queue.flush(to: pair.server) }
            }
            #expect(bytes == response.bytes)
        }
        #expect(pauses == OutputQueue.pausedLeads - 1)
    }

    /// Responses without a file body (the memory tier's small hits) and responses with a
    /// small one go out in one write and one segment, as always: only a large file body
    /// pauses, and the others do not spend the count.
    @Test func writesInMemoryAndSmallFileResponsesWhole() throws {
        let pair = try LoopbackPair()
        defer { pair.close() }
        let response = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)
        let body = [UInt8](repeating: 7, count: 1000)
        let file = try #require(OpenFile.anonymous(copying: body))
        var queue = OutputQueue()
        for _ in 0..<OutputQueue.pausedLeads {
            for withFile in [false, true] {
                let before = try pair.server.dataSegmentsOut()
                queue.append(response)
                if withFile { queue.appendFile(file, offset: 0, count: Int64(body.count)) }
                #expect(try queue.flush(to: pair.server) == .flushed)
                let expected = withFile ? response + body : response
                #expect(try pair.client.receive(count: expected.count) == expected)
                #expect(try pair.server.dataSegmentsOut() - before == 1)
            }
        }
        let large = try LargeResponse()
        large.append(to: &queue)
        #expect(try queue.flush(to: pair.server) == .paused)
    }
}

/// A response head and a file body (100 KiB unless told): above ``OutputQueue/pausedLeadMinimum``.
private struct LargeResponse {
    let head: [UInt8]
    let body: [UInt8]
    let file: OpenFile

    init(bodyCount: Int = 102_400) throws {
        head = [UInt8]("HTTP/1.1 200 OK\r\nContent-Length: \(bodyCount)\r\n\r\n".utf8)
        body = (0..<bodyCount).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        file = try #require(OpenFile.anonymous(copying: body))
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

    /// Sends `response` `times` times through one queue, each received whole before the next;
    /// whether each first flush paused its body.
    fileprivate func sendWhole(_ response: LargeResponse, times: Int) throws -> [Bool] {
        var queue = OutputQueue()
        var paused: [Bool] = []
        for index in 0..<times {
            response.append(to: &queue)
            paused.append(try queue.flush(to: server) == .paused)
            let received = try client.receive(count: response.count) {
                if !queue.isEmpty { _ = try queue.flush(to: server) }
            }
            #expect(received == response.bytes, "response \(index)")
        }
        return paused
    }
}

extension Socket {
    /// Data segments this socket has sent (`tcpi_data_segs_out`).
    fileprivate func dataSegmentsOut() throws -> UInt32 {
        try #require(tcpInfoField(at: Socket.dataSegmentsOutOffset), "getsockopt(TCP_INFO) failed: errno \(errno)")
    }

    /// Whether bytes have arrived that were not read (a one-byte peek that does not wait).
    fileprivate func hasUnreadBytes() -> Bool {
        var byte: UInt8 = 0
        return Glibc.recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 1
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
