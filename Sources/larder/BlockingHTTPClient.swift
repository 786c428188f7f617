import Glibc
import LarderHTTP
import LarderIO

/// A small blocking HTTP/1.1 client for the command line (admin calls, warming through the
/// proxy). One request per connection; bodies can be streamed to a callback. Responses are read
/// with the daemon's own strict parsers (``ResponseHeadParser``, ``ChunkedDecoder``): a
/// malformed answer is an error, not a guess. Every answer is bounded: `timeoutSeconds` of
/// silence, `deadlineSeconds` in all, and `bodyLimit` bytes of a body kept in memory, so a
/// hostile or broken server cannot keep a command running or make it use gigabytes.
struct BlockingHTTPClient {
    struct Response {
        var status = 0
        var headers = HTTPHeaders()
        var body: [UInt8] = []
        var bodyLength = 0

        func header(_ name: String) -> String? { headers[name] }

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The largest body kept in memory unless a command says otherwise: far above any admin
    /// answer (a listing of 10,000 entries is a few MiB).
    static let defaultBodyLimit = 64 << 20

    let address: SocketAddress
    /// The longest wait for any one read or write.
    var timeoutSeconds = 60
    /// The longest the whole exchange may take, from connecting to the body's end; nil for no
    /// limit (warming streams large files through the proxy).
    var deadlineSeconds: Int? = nil
    /// The most body bytes kept in memory; a body streamed to `onBody` is not kept or limited.
    var bodyLimit = Self.defaultBodyLimit

    /// Sends `method target` with `headers`; the body is kept unless `onBody` takes it.
    func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [],
        onBody: ((UnsafeRawBufferPointer) -> Void)? = nil
    ) throws -> Response {
        let fd = socket(address.family == .ipv4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { Syscall.close(fd) }
        let deadline = deadlineSeconds.map { Clocks.monotonicNanos() + UInt64($0) * 1_000_000_000 }
        try limitWaits(fd, until: deadline)
        do {
            try address.withSockAddr { (sockaddr, length) throws(SystemError) in
                _ = try Syscall.call("connect") { connect(fd, sockaddr, length) }
            }
        } catch {
            throw Failure(description: "cannot connect to \(address): \(error.message)")
        }
        var head = "\(method) \(target) HTTP/1.1\r\nConnection: close\r\n"
        // RFC 9112 §3.2: every request names its server; the admin listener checks it.
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { head += "Host: \(address)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try send(fd, Array(head.utf8) + body)
        return try receive(fd, until: deadline, onBody: onBody)
    }

    /// Sets the socket's read and write timeouts to `timeoutSeconds`, or less when `deadline`
    /// (monotonic nanoseconds) is nearer; throws when it has passed.
    private func limitWaits(_ fd: Int32, until deadline: UInt64?) throws {
        var wait = UInt64(timeoutSeconds) * 1_000_000_000
        if let deadline {
            let now = Clocks.monotonicNanos()
            guard now < deadline else { throw Failure(description: "no whole answer within \(deadlineSeconds ?? 0) s") }
            wait = min(wait, deadline - now)
        }
        // At least 1 ms: zero would mean no timeout at all.
        wait = max(wait, 1_000_000)
        var timeout = timeval(tv_sec: Int(wait / 1_000_000_000), tv_usec: Int(wait % 1_000_000_000 / 1000))
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            _ = try? Syscall.call("setsockopt") {
                setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
            }
        }
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    private func receive(_ fd: Int32, until deadline: UInt64?, onBody: ((UnsafeRawBufferPointer) -> Void)?) throws -> Response {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        var overLimit = false
        func fill() throws -> Bool {
            if overLimit { throw Failure(description: "the answer's body is over \(bodyLimit) bytes") }
            try limitWaits(fd, until: deadline)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                guard errno == EAGAIN else { throw Failure(description: "recv: \(String(cString: strerror(errno)))") }
                // The deadline, when it is what ran out, is the reason.
                try limitWaits(fd, until: deadline)
                throw Failure(description: "timed out after \(timeoutSeconds) s")
            }
            if count == 0 { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        var parser = ResponseHeadParser()
        var head: ResponseHead?
        while head == nil {
            guard let lineEnd = find(buffer, [10]) else {
                if buffer.count > ResponseHeadParser.maxHeadBytes {
                    throw Failure(description: "malformed response: a head line over \(ResponseHeadParser.maxHeadBytes / 1024) KiB")
                }
                if try !fill() { throw Failure(description: "connection closed before a response") }
                continue
            }
            let event = try buffer.withUnsafeBytes { raw in
                do { return try parser.feed(UnsafeRawBufferPointer(rebasing: raw[0...lineEnd])) } catch {
                    throw Failure(description: "malformed response: \(error)")
                }
            }
            buffer.removeFirst(lineEnd + 1)
            if case .final(let final) = event { head = final }
        }
        var response = Response()
        response.status = head!.status
        response.headers = head!.headers
        func deliver(_ bytes: UnsafeRawBufferPointer) {
            response.bodyLength += bytes.count
            if let onBody {
                onBody(bytes)
            } else if response.bodyLength > bodyLimit {
                // Not thrown here (the decoder's callback cannot): the next read throws.
                overLimit = true
            } else {
                response.body.append(contentsOf: bytes)
            }
        }
        if let length = head!.declaredLength {
            if onBody == nil && length > bodyLimit {
                throw Failure(description: "the answer's body (\(length) bytes) is over \(bodyLimit) bytes")
            }
            var remaining = length
            while true {
                let part = buffer.prefix(remaining)
                part.withUnsafeBytes { deliver($0) }
                remaining -= part.count
                buffer.removeAll(keepingCapacity: true)
                if remaining == 0 { break }
                if try !fill() { throw Failure(description: "response ended \(remaining) bytes early") }
            }
        } else if head!.headers.hasListElement("Transfer-Encoding", "chunked") {
            var decoder = ChunkedDecoder()
            while true {
                let consumed = try buffer.withUnsafeBytes { raw in
                    do { return try decoder.decode(raw, deliver) } catch {
                        throw Failure(description: "malformed chunked body: \(error)")
                    }
                }
                buffer.removeFirst(consumed)
                if decoder.isComplete { break }
                if try !fill() { throw Failure(description: "response ended inside its chunked body") }
            }
        } else {
            buffer.withUnsafeBytes { deliver($0) }
            buffer.removeAll()
            while try fill() {
                buffer.withUnsafeBytes { deliver($0) }
                buffer.removeAll()
            }
        }
        if overLimit { throw Failure(description: "the answer's body is over \(bodyLimit) bytes") }
        return response
    }

    private func find(_ haystack: [UInt8], _ needle: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where haystack[index..<(index + needle.count)].elementsEqual(needle) {
            return index
        }
        return nil
    }
}
