import Dispatch
import LarderHTTP
import LarderIO
import LarderUpstream
import Synchronization
import Testing

/// Body bytes a delegate refused are delivered again from inside `curl_easy_pause` when it
/// resumes the transfer. A delegate may give the transfer up there (a fill whose readers all
/// left, judging the origin too slow to finish alone; a body whose digest does not match).
/// curl refuses to remove a handle from inside that call: the removal must wait for it to
/// return, or the handle goes back to the spares still in curl's hands, and the next transfer
/// given it fails ("already added to a multi handle").
@Suite(.timeLimit(.minutes(1))) struct CancelOnResumeTests {
    @Test func aTransferCancelledByTheBytesItsResumeDeliversIsTakenOutAfterTheResume() throws {
        let listener = try Socket.listen(on: #require(SocketAddress(parsing: "127.0.0.1:0")))
        let port = try #require(try listener.localAddress()).port
        let first = try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/first")
        let second = try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/second")
        let outcome = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let loopHandle = try EventLoop.start(name: "cancel-on-resume-test")
        loopHandle.execute { loop in
            let origin = LoopOrigin(loop: loop, listener: listener) { target in
                let body = String(repeating: target == "/first" ? "a" : "b", count: 2000)
                return Array("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n\(body)".utf8)
            }
            guard (try? loop.register(listener.fd, interest: .readable, handler: origin)) != nil else {
                done.signal()
                return
            }
            let client = UpstreamClient(loop: loop, maxConnectionsPerHost: 1)
            let canceller = CancelOnResume(loop: loop)
            canceller.report = { event in outcome.withLock { $0.append(event) } }
            canceller.afterCancel = {
                // The client still works: the next transfer, on the same loop and pool, completes.
                _ = loop.schedule(afterNanos: 50_000_000) {
                    let collector = Collector { body in
                        outcome.withLock { $0.append("second \(body)") }
                        done.signal()
                    }
                    let request = UpstreamRequest(method: .get, url: second, headers: HTTPHeaders())
                    collector.transfer = client.start(request, delegate: collector)
                }
            }
            canceller.transfer = client.start(UpstreamRequest(method: .get, url: first, headers: HTTPHeaders()), delegate: canceller)
        }
        let finished = done.wait(timeout: .now() + 10) == .success
        loopHandle.execute { loop in
            loop.deregister(listener.fd)
            listener.close()
            loop.stop()
        }
        #expect(finished)
        #expect(outcome.withLock { $0 } == ["paused", "resumed", "cancelled", "second 2000 b"])
    }
}

/// Refuses the first body bytes, resumes 50 ms later, and cancels the transfer when curl hands
/// them over again (inside the resume). Loop-confined.
private final class CancelOnResume: UpstreamTransferDelegate {
    let loop: EventLoop
    weak var transfer: UpstreamTransfer?
    var report: (String) -> Void = { _ in }
    var afterCancel: () -> Void = {}
    private var paused = false
    private var cancelled = false

    init(loop: EventLoop) { self.loop = loop }

    func upstreamDidReceiveHead(_ head: consuming ResponseHead) {}

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if !paused {
            paused = true
            report("paused")
            _ = loop.schedule(afterNanos: 50_000_000) { [self] in
                report("resumed")
                transfer?.resumeReceiving()
            }
            return false
        }
        guard !cancelled else {
            report("bytes after the cancel")
            return false
        }
        cancelled = true
        transfer?.cancel()
        report("cancelled")
        afterCancel()
        return false
    }

    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk { .end }

    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) { report("finished after the cancel") }
}

/// Collects a response's body; reports its length and first byte. Loop-confined.
private final class Collector: UpstreamTransferDelegate {
    weak var transfer: UpstreamTransfer?
    private var body: [UInt8] = []
    private let finished: (String) -> Void

    init(finished: @escaping (String) -> Void) { self.finished = finished }

    func upstreamDidReceiveHead(_ head: consuming ResponseHead) {}

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        body += bytes
        return true
    }

    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk { .end }

    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) {
        switch result {
        case .success: finished("\(body.count) \(body.first.map { String(UnicodeScalar($0)) } ?? "")")
        case .failure(let error): finished("failed: \(error)")
        }
    }
}
