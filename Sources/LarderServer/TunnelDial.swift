import Glibc
import LarderIO

/// Connects to a CONNECT target: each resolved address in turn (RFC 8305 order is left to
/// the resolver: IPv4 first), all within `upstream.connect_timeout`.
///
/// State: loop-confined; held by the exchange that asked, which cancels it if its client
/// goes away first.
final class TunnelDial: IOHandler {
    enum Failure: Error {
        /// Every address refused or was unreachable; the last error.
        case unreachable(String)
        case timedOut
    }

    private let loop: EventLoop
    private let addresses: [SocketAddress]
    private var next = 0
    private var socket: Socket?
    private var timer: EventLoop.TimerToken?
    private var completion: ((Result<Socket, Failure>) -> Void)?
    private var lastError = "no address"

    init(loop: EventLoop, addresses: [SocketAddress]) {
        self.loop = loop
        self.addresses = addresses
    }

    /// Starts connecting; `completion` runs once, on the loop (never from inside `start`).
    func start(timeout: UInt64, completion: @escaping (Result<Socket, Failure>) -> Void) {
        self.completion = completion
        timer = loop.schedule(afterNanos: timeout) { [weak self] in
            self?.timer = nil
            self?.finish(.failure(.timedOut))
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
        finish(.failure(.unreachable(lastError)))
    }

    func handleIO(_ events: IOEvents) {
        guard let socket else { return }
        // A non-blocking connect is done when the socket turns writable; SO_ERROR says how.
        let error = socket.pendingError()
        guard error == 0 else {
            lastError = "\(addresses[next - 1]): \(String(cString: strerror(error)))"
            release(closing: true)
            tryNext()
            return
        }
        release(closing: false)
        socket.setNoDelay()
        finish(.success(socket))
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

    private func finish(_ result: Result<Socket, Failure>) {
        guard let completion else {
            if case .success(let socket) = result { socket.close() }
            return
        }
        self.completion = nil
        if let timer { loop.cancel(timer) }
        timer = nil
        if case .failure = result { release(closing: true) }
        completion(result)
    }
}
