import Dispatch
import LarderHTTP
import LarderIO
import LarderUpstream
import Synchronization
import Testing

/// A transfer whose last body bytes were refused (paused for a slow client) and taken on
/// resume ends without curl watching its socket again: curl's "remove" that paused it is the
/// last word it says of that socket. Its connection is idle in curl's pool from then on, and a
/// response the origin sends on it unasked (RFC 9112 §9.3) must not answer the next request.
/// Driven here, where the delegate can refuse exactly the last bytes; through the proxy that
/// takes a client slow at the right moment (2 rounds in 25 with a 1-4 MB no-store download).
@Suite(.timeLimit(.minutes(1))) struct PausedTransferConnectionTests {
    /// `queued`: the second request waits in curl's queue (one connection per origin) while
    /// the first is paused, and gets the connection inside the call that ends the first.
    @Test(arguments: [(false, false), (true, false), (true, true)])
    func aLateResponseAfterATransferThatEndedPausedAnswersNoOtherRequest(lateWhilePaused: Bool, queued: Bool) throws {
        let listener = try Socket.listen(on: #require(SocketAddress(parsing: "127.0.0.1:0")))
        let port = try #require(try listener.localAddress()).port
        let first = try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/first")
        let second = try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/second")
        let results = Results()
        let loopHandle = try EventLoop.start(name: "paused-transfer-test")
        loopHandle.execute { loop in
            var last: Socket?
            // Each request's body is its path's last component; sendLate() writes one more
            // response, unasked, on the last connection.
            let origin = LoopOrigin(loop: loop, listener: listener, accepted: { last = $0 }) { target in
                results.requests.withLock { $0.append(target) }
                let body = target.split(separator: "/").last.map(String.init) ?? ""
                return Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
            }
            func sendLate() {
                let late = Array("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate".utf8)
                _ = late.withUnsafeBytes { try? last?.write($0) }
            }
            guard (try? loop.register(listener.fd, interest: .readable, handler: origin)) != nil else {
                results.done.signal()
                return
            }
            let client = UpstreamClient(loop: loop, maxConnectionsPerHost: 1)
            func startSecond() {
                let collector = LastBytesPauser(loop: loop, pauses: false) { body in
                    results.bodies.withLock { $0.append(body) }
                    results.done.signal()
                }
                collector.transfer = client.start(UpstreamRequest(method: .get, url: second, headers: HTTPHeaders()), delegate: collector)
            }
            let pauser = LastBytesPauser(loop: loop) { body in
                results.bodies.withLock { $0.append(body) }
                if !lateWhilePaused { sendLate() }
                // Long enough for the loop to see the late bytes on an idle, watched socket.
                if !queued { _ = loop.schedule(afterNanos: 200_000_000) { startSecond() } }
            }
            pauser.whilePaused = {
                if lateWhilePaused { sendLate() }
                if queued { startSecond() }
            }
            pauser.transfer = client.start(UpstreamRequest(method: .get, url: first, headers: HTTPHeaders()), delegate: pauser)
        }
        let finished = results.done.wait(timeout: .now() + 10) == .success
        loopHandle.execute { loop in
            loop.deregister(listener.fd)
            listener.close()
            loop.stop()
        }
        #expect(finished)
        let bodies = results.bodies.withLock { $0 }
        #expect(bodies == ["first", "second"], "the late response answered the second request: \(bodies)")
        #expect(results.requests.withLock { $0 } == ["/first", "/second"])
    }
}

/// What the loop saw, read by the test thread.
private final class Results: Sendable {
    let bodies = Mutex<[String]>([])
    /// Request targets in the order the origin read them.
    let requests = Mutex<[String]>([])
    let done = DispatchSemaphore(value: 0)
}

/// Collects a response; with `pauses`, refuses the bytes that complete the body once, then
/// takes them 100 ms later. Loop-confined.
private final class LastBytesPauser: UpstreamTransferDelegate {
    let loop: EventLoop
    let pauses: Bool
    let finished: (String) -> Void
    weak var transfer: UpstreamTransfer?
    /// Runs while the transfer is paused on its last bytes.
    var whilePaused: () -> Void = {}
    private var length = 0
    private var body: [UInt8] = []
    private var paused = false

    init(loop: EventLoop, pauses: Bool = true, finished: @escaping (String) -> Void) {
        self.loop = loop
        self.pauses = pauses
        self.finished = finished
    }

    func upstreamDidReceiveHead(_ head: consuming ResponseHead) { length = head.declaredLength ?? 0 }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if pauses, !paused, body.count + bytes.count == length {
            paused = true
            _ = loop.schedule(afterNanos: 50_000_000) { [self] in
                whilePaused()
                _ = loop.schedule(afterNanos: 50_000_000) { [self] in transfer?.resumeReceiving() }
            }
            return false
        }
        body += bytes
        return true
    }

    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk { .end }

    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) {
        switch result {
        case .success: finished(String(decoding: body, as: UTF8.self))
        case .failure(let error): finished("failed: \(error)")
        }
    }
}
