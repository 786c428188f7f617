import Glibc
import LarderHTTP
import LarderIO
import LarderUpstream

/// Connects to a CONNECT target: each resolved address in turn (RFC 8305 order is left to
/// the resolver: IPv4 first), all within `upstream.connect_timeout`. Through a parent proxy,
/// the addresses are the parent's and `handshake` is the CONNECT request for the real target:
/// the tunnel is ready once the parent answers 2xx (RFC 9110 §9.3.6), again within the timeout.
///
/// State: loop-confined; held by the ConnectHandler that asked, which cancels it if its client
/// goes away first.
final class TunnelDial: IOHandler {
    enum Failure: Error, CustomStringConvertible {
        /// No tunnel: the hop could not be reached, or did not answer in time or in HTTP.
        /// Classed as a fill's attempt errors are, so ``AttemptPlanner`` decides failover for
        /// both the same way.
        case failed(UpstreamError)
        /// The parent proxy answered the CONNECT with a status other than 2xx.
        case refused(status: Int, statusLine: String)

        var description: String {
            switch self {
            case .failed(let error): error.message
            case .refused(_, let statusLine): statusLine
            }
        }

        /// The hop connected but failed afterwards: it did not answer our CONNECT in time,
        /// closed or reset the connection, or answered with something that is not HTTP.
        static func afterConnect(_ kind: UpstreamError.Kind, _ message: String) -> Failure {
            .failed(UpstreamError(kind: kind, message: message, afterHead: false, connected: true))
        }
    }

    /// A connected socket and, through a parent, bytes it sent after its 2xx head (already
    /// the target's).
    struct Connected {
        let socket: Socket
        let leftover: [UInt8]
    }

    private let loop: EventLoop
    private let addresses: [SocketAddress]
    private let handshake: [UInt8]?
    private var next = 0
    private var socket: Socket?
    private var timer: EventLoop.TimerToken?
    private var timeout: UInt64 = 0
    private var completion: ((Result<Connected, Failure>) -> Void)?
    private var lastError = "no address"
    /// The parent's answer so far, and how much of the handshake is written.
    private var answer: [UInt8] = []
    private var parsedUpTo = 0
    private var answerParser = ResponseHeadParser()
    private var written = 0
    private var handshaking = false
    static let maxAnswerHead = 16 * 1024

    init(loop: EventLoop, addresses: [SocketAddress], handshake: [UInt8]? = nil) {
        self.loop = loop
        self.addresses = addresses
        self.handshake = handshake
    }

    /// Starts connecting; `completion` runs once, on the loop (never from inside `start`).
    func start(timeout: UInt64, completion: @escaping (Result<Connected, Failure>) -> Void) {
        self.completion = completion
        self.timeout = timeout
        timer = loop.schedule(afterNanos: timeout) { [weak self] in
            self?.timer = nil
            self?.finish(.failure(.failed(UpstreamError(kind: .timeout, message: "timed out", afterHead: false, connected: false))))
        }
        loop.enqueueDeferred { [weak self] in self?.tryNext() }
    }

    private func tryNext() {
        while completion != nil, next < addresses.count {
            let address = addresses[next]
            next += 1
            do {
                let candidate = try Socket.connect(to: address)
                do {
                    try loop.register(candidate.fd, interest: .writable, handler: self)
                } catch {
                    candidate.close()
                    throw error
                }
                socket = candidate
                return
            } catch {
                lastError = "\(address): \(error)"
            }
        }
        finish(.failure(.failed(UpstreamError(kind: .connect, message: lastError, afterHead: false, connected: false))))
    }

    func handleIO(_ events: IOEvents) {
        guard let socket else { return }
        if handshaking { return continueHandshake(socket, events) }
        // A non-blocking connect is done when the socket turns writable; SO_ERROR says how.
        let error = socket.pendingError()
        guard error == 0 else {
            lastError = "\(addresses[next - 1]): \(String(cString: strerror(error)))"
            release(closing: true)
            tryNext()
            return
        }
        socket.setNoDelay()
        guard handshake != nil else {
            release(closing: false)
            return finish(.success(Connected(socket: socket, leftover: [])))
        }
        // Through a parent: the parent now has its own connect to make, with a fresh deadline.
        handshaking = true
        if let timer { loop.cancel(timer) }
        timer = loop.schedule(afterNanos: timeout) { [weak self] in
            self?.timer = nil
            self?.finish(.failure(.afterConnect(.timeout, "timed out")))
        }
        continueHandshake(socket, .writable)
    }

    private func continueHandshake(_ socket: Socket, _ events: IOEvents) {
        guard let handshake else { return }
        do throws(SystemError) {
            while written < handshake.count {
                let sent = handshake.withUnsafeBytes { raw in
                    Result { () throws(SystemError) in try socket.write(UnsafeRawBufferPointer(rebasing: raw[written...])) }
                }
                guard let count = try sent.get() else {
                    loop.setInterest(socket.fd, .writable)
                    return
                }
                written += count
            }
            loop.setInterest(socket.fd, .readable)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let received = buffer.withUnsafeMutableBytes { raw in Result { () throws(SystemError) in try socket.read(into: raw) } }
                guard let count = try received.get() else {
                    return
                }
                guard count > 0 else {
                    return finish(.failure(.afterConnect(.reset, "the parent proxy closed the connection before answering CONNECT")))
                }
                answer += buffer[0..<count]
                if readAnswerLines(socket) { return }
                guard answer.count <= TunnelDial.maxAnswerHead else {
                    return finish(.failure(.afterConnect(.protocolError, "the parent proxy's answer to CONNECT is too large")))
                }
            }
        } catch {
            finish(.failure(.afterConnect(.reset, "parent proxy: \(error)")))
        }
    }

    /// Feeds the complete lines received so far to the response parser (RFC 9112 §4; interim
    /// 1xx heads are skipped). Returns true once the final head decided the handshake: only a
    /// 2xx opens the tunnel (RFC 9110 §9.3.6).
    private func readAnswerLines(_ socket: Socket) -> Bool {
        while let newline = answer[parsedUpTo...].firstIndex(of: 10) {
            let line = answer[parsedUpTo...newline]
            parsedUpTo = newline + 1
            let event = Array(line).withUnsafeBytes { raw in
                Result { () throws(HTTPParseError) in try answerParser.feed(raw) }
            }
            guard case .success(let parsed) = event else {
                finish(.failure(.afterConnect(.protocolError, "the parent proxy's answer to CONNECT is not HTTP")))
                return true
            }
            guard case .final(let head) = parsed else { continue }
            let statusLine = "\(head.status) \(head.reason)"
            guard (200..<300).contains(head.status) else {
                finish(.failure(.refused(status: head.status, statusLine: statusLine)))
                return true
            }
            let leftover = Array(answer[parsedUpTo...])
            release(closing: false)
            finish(.success(Connected(socket: socket, leftover: leftover)))
            return true
        }
        return false
    }

    /// Gives up: closes a connection in progress; the completion is not called.
    func cancel() {
        completion = nil
        release(closing: true)
        if let timer { loop.cancel(timer) }
        timer = nil
    }

    private func release(closing: Bool) {
        guard let socket else { return }
        self.socket = nil
        loop.deregister(socket.fd)
        if closing { socket.close() }
    }

    private func finish(_ result: Result<Connected, Failure>) {
        guard let completion else {
            if case .success(let connected) = result { connected.socket.close() }
            return
        }
        self.completion = nil
        if let timer { loop.cancel(timer) }
        timer = nil
        if case .failure = result { release(closing: true) }
        completion(result)
    }
}
