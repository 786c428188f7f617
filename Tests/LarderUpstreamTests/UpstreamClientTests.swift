import Dispatch
import Foundation
import Glibc
import LarderHTTP
import LarderIO
import LarderUpstream
import Synchronization
import Testing

/// The client driving real libcurl transfers on a real event loop, against an origin on
/// 127.0.0.1.
@Suite(.timeLimit(.minutes(1))) struct UpstreamClientTests {
    /// A transfer's end is processed in the loop's deferred pass, after the work its body
    /// callback queued there: the clients get the bytes before the cache stores them.
    @Test func aTransfersEndComesAfterTheWorkItsBodyQueued() throws {
        let body = "hello"
        let origin = try OneConnectionOrigin(response: "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        defer { origin.stop() }
        let log = EventLog()
        let loopHandle = try EventLoop.start(name: "upstream-test")
        let url = try AbsoluteURL(parsing: "http://127.0.0.1:\(origin.port)/x")
        loopHandle.execute { loop in
            let client = UpstreamClient(loop: loop, maxConnectionsPerHost: 1)
            let recorder = Recorder(loop: loop, log: log, client: client)
            _ = client.start(UpstreamRequest(method: .get, url: url, headers: HTTPHeaders()), delegate: recorder)
        }
        let finished = log.done.wait(timeout: .now() + 10) == .success
        loopHandle.execute { loop in loop.stop() }
        #expect(finished, "the transfer did not end: \(log.events)")
        #expect(log.events == ["head", "body \(body.utf8.count)", "deferred", "finish \(body.utf8.count)"])
    }
}

/// What the delegate heard, in order, from the loop thread.
private final class EventLog: Sendable {
    private let entries = Mutex<[String]>([])
    let done = DispatchSemaphore(value: 0)
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
        client = nil
        log.done.signal()
    }
}

/// An origin on 127.0.0.1 that takes one connection and answers every request on it with the
/// same response. Its thread gives up after 10 s without a connection or a request.
private final class OneConnectionOrigin: Sendable {
    let port: UInt16
    private let listener: Int32

    init(response: String) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw OriginError.socket("socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw OriginError.socket("bind")
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let answer = Array(response.utf8)
        Thread.detachNewThread {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var wait = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { return }
                received += buffer[0..<count]
                // One answer per complete head (the requests carry no body).
                while let end = Self.headEnd(received) {
                    received.removeFirst(end)
                    guard write(connection, answer, answer.count) == answer.count else { return }
                }
            }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index..<(index + 4)].elementsEqual([13, 10, 13, 10]) {
            return index + 4
        }
        return nil
    }

    enum OriginError: Error {
        case socket(String)
    }
}
