import Glibc
import LarderHTTP
import LarderIO

/// A small blocking HTTP/1.1 client for the command line (admin calls, warming through the
/// proxy). One request per connection; bodies can be streamed to a callback. Responses are read
/// with the daemon's own strict parsers (``ResponseHeadParser``, ``ChunkedDecoder``): a
/// malformed answer is an error, not a guess.
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

    let address: SocketAddress
    var timeoutSeconds = 60

    /// Sends `method target` with `headers`; the body is kept unless `onBody` takes it.
    func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [],
        onBody: ((UnsafeRawBufferPointer) -> Void)? = nil
    ) throws -> Response {
        let fd = socket(address.family == .ipv4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { Syscall.close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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
        return try receive(fd, onBody: onBody)
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    private func receive(_ fd: Int32, onBody: ((UnsafeRawBufferPointer) -> Void)?) throws -> Response {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        func fill() throws -> Bool {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                throw Failure(
                    description: errno == EAGAIN ? "timed out after \(timeoutSeconds) s" : "recv: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        var parser = ResponseHeadParser()
        var head: ResponseHead?
        while head == nil {
            guard let lineEnd = find(buffer, [10]) else {
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
            if let onBody { onBody(bytes) } else { response.body.append(contentsOf: bytes) }
        }
        if let length = head!.declaredLength {
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
