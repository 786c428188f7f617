import Dispatch
import LarderHTTP
import LarderIO
import LarderUpstream
import Synchronization
import Testing

/// The client driving real libcurl transfers on a real event loop, against an origin on
/// 127.0.0.1 served by the same loop.
@Suite(.timeLimit(.minutes(1))) struct UpstreamClientTests {
    /// A transfer's end is processed in the loop's deferred pass, after the work its body
    /// callback queued there: the clients get the bytes before the cache stores them.
    @Test func aTransfersEndComesAfterTheWorkItsBodyQueued() throws {
        let body = "hello"
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
        let log = try Self.transfer(response: response) { port in try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/x") }
        #expect(log.events == ["head", "body \(body.utf8.count)", "deferred", "finish \(body.utf8.count)"])
    }

    /// The closures the client queues on its loop (curl's timeout, the deferred drain) reach it
    /// without a weak reference: the first one would give the client a side table, and every
    /// retain and release of it on the request path would take the runtime's slow path.
    @Test func theClientTakesNoWeakReferences() throws {
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
        let log = try Self.transfer(response: response) { port in try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/x") }
        #expect(log.events.last == "finish 2")
        // The runtime counts one weak reference for an object that has none.
        #expect(log.clientWeakReferences.withLock { $0 } == 1)
    }

    /// The request's fields go out in order as they are given, an empty value included; the
    /// fields curl would add on its own (`Accept`, `Expect`) and a `Content-Length` for a body
    /// there is none of stay out, and a client's own `Accept` goes out once.
    @Test func theRequestsFieldsGoOutAsGivenWithoutCurlsOwn() throws {
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)
        let plain = HTTPHeaders([("X-Empty", ""), ("Content-Length", "5"), ("Expect", "100-continue"), ("Via", "1.1 larder")])
        let log = try Self.transfer(response: response, headers: plain) { port in try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/x") }
        let head = try #require(log.heads.withLock { $0 }.first)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.removeFirst() == "GET /x HTTP/1.1")
        #expect(lines.removeFirst().hasPrefix("Host: 127.0.0.1:"))
        #expect(lines == ["X-Empty:", "Via: 1.1 larder", "", ""])

        let accepting = HTTPHeaders([("accept", "text/plain"), ("X-A", "1")])
        let second = try Self.transfer(response: response, headers: accepting) { port in
            try AbsoluteURL(parsing: "http://127.0.0.1:\(port)/y")
        }
        let secondHead = try #require(second.heads.withLock { $0 }.first)
        #expect(secondHead.split(separator: "\r\n").dropFirst(2) == ["accept: text/plain", "X-A: 1"])
    }

    /// curl writes the request line and `Host` from the URL's parts as they are (a URL handle,
    /// not a string its parser checks): a URL put together with bytes that would split them is
    /// refused before curl has it, and nothing reaches the origin.
    @Test(arguments: [
        ("127.0.0.1", "/x HTTP/1.1\r\nX-Injected: 1\r\nY: /"), ("127.0.0.1", "/x\ty"), ("127.0.0.1", "/\u{7F}"),
        ("127.0.0.1\r\nX-Injected: 1", "/x"), ("127.0.0.1/y", "/x"),
    ])
    func aURLThatWouldSplitTheRequestIsRefused(host: String, path: String) throws {
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)
        let log = try Self.transfer(response: response) { port in
            AbsoluteURL(scheme: "http", host: host, port: Int(port), pathAndQuery: path)
        }
        #expect(log.events.count == 1)
        #expect(log.events.first?.hasPrefix("failed: other: curl refused the URL") == true, "\(log.events)")
        #expect(log.accepted.withLock { $0 } == 0, "nothing reached the origin")
    }

    /// One transfer of `url(port)` against an origin on the loop answering `response`.
    private static func transfer(response: [UInt8], headers: HTTPHeaders = HTTPHeaders(), url: (UInt16) throws -> AbsoluteURL) throws
        -> EventLog
    {
        let listener = try Socket.listen(on: #require(SocketAddress(parsing: "127.0.0.1:0")))
        let url = try url(try #require(try listener.localAddress()).port)
        let log = EventLog()
        let loopHandle = try EventLoop.start(name: "upstream-test")
        loopHandle.execute { loop in
            let origin = LoopOrigin(
                loop: loop, listener: listener, accepted: { _ in log.accepted.withLock { $0 += 1 } },
                received: { head in log.heads.withLock { $0.append(head) } }
            ) { _ in response }
            do {
                try loop.register(listener.fd, interest: .readable, handler: origin)
            } catch {
                log.append("origin: \(error)")
                log.done.signal()
                return
            }
            let client = UpstreamClient(loop: loop, maxConnectionsPerHost: 1)
            let recorder = Recorder(loop: loop, log: log, client: client)
            _ = client.start(UpstreamRequest(method: .get, url: url, headers: headers), delegate: recorder)
        }
        let finished = log.done.wait(timeout: .now() + 10) == .success
        loopHandle.execute { loop in
            loop.deregister(listener.fd)
            listener.close()
            loop.stop()
        }
        #expect(finished, "the transfer did not end: \(log.events)")
        return log
    }
}

/// What the delegate heard, in order, from the loop thread.
private final class EventLog: Sendable {
    private let entries = Mutex<[String]>([])
    let done = DispatchSemaphore(value: 0)
    /// Connections the origin accepted.
    let accepted = Mutex(0)
    /// The request heads the origin received, as they came.
    let heads = Mutex<[String]>([])
    /// The runtime's weak reference count of the client when its transfer ended.
    let clientWeakReferences = Mutex(0)
    var events: [String] { entries.withLock { $0 } }
    func append(_ event: String) { entries.withLock { $0.append(event) } }
}

/// Loop-confined: created and called on the loop thread only. Holds the client until the
/// transfer ends (the transfer holds the delegate until then).
private final class Recorder: UpstreamTransferDelegate {
    let loop: EventLoop
    let log: EventLog
    var client: UpstreamClient?

    init(loop: EventLoop, log: EventLog, client: UpstreamClient) {
        self.loop = loop
        self.log = log
        self.client = client
    }

    func upstreamDidReceiveHead(_ head: consuming ResponseHead) { log.append("head") }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        log.append("body \(bytes.count)")
        loop.enqueueDeferred { [log] in log.append("deferred") }
        return true
    }

    func upstreamWantsRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyChunk { .end }

    func upstreamDidFinish(_ result: Result<UpstreamSummary, UpstreamError>) {
        switch result {
        case .success(let summary): log.append("finish \(summary.bodyBytes)")
        case .failure(let error): log.append("failed: \(error)")
        }
        if let client { log.clientWeakReferences.withLock { $0 = Int(_getWeakRetainCount(client)) } }
        client = nil
        log.done.signal()
    }
}
