import Glibc
import LarderIO

/// A small blocking HTTP/1.1 client for the command line (admin calls, warming through the
/// proxy). One request per connection; bodies can be streamed to a callback.
struct BlockingHTTPClient {
    struct Response {
        var status = 0
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var bodyLength = 0

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

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
                throw Failure(description: errno == EAGAIN ? "timed out after \(timeoutSeconds) s" : "recv: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        var headEnd: Int?
        while headEnd == nil {
            if let index = find(buffer, [13, 10, 13, 10]) { headEnd = index } else if try !fill() {
                throw Failure(description: "connection closed before a response")
            }
        }
        let headText = String(decoding: buffer[0..<headEnd!], as: UTF8.self)
        buffer.removeFirst(headEnd! + 4)
        var lines = headText.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusParts = lines.removeFirst().split(separator: " ")
        var response = Response()
        response.status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            response.headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingSpaces))
        }
        func deliver(_ bytes: ArraySlice<UInt8>) {
            response.bodyLength += bytes.count
            if let onBody { bytes.withUnsafeBytes { onBody($0) } } else { response.body.append(contentsOf: bytes) }
        }
        if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            var remaining = length
            while true {
                let part = buffer.prefix(remaining)
                deliver(part)
                remaining -= part.count
                buffer.removeAll(keepingCapacity: true)
                if remaining == 0 { break }
                if try !fill() { throw Failure(description: "response ended \(remaining) bytes early") }
            }
        } else if response.header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            while true {
                var lineEnd = find(buffer, [13, 10])
                while lineEnd == nil { if try !fill() { return response }; lineEnd = find(buffer, [13, 10]) }
                let size = Int(String(decoding: buffer[0..<lineEnd!], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
                buffer.removeFirst(lineEnd! + 2)
                while buffer.count < size + 2 { if try !fill() { break } }
                deliver(buffer.prefix(size))
                buffer.removeFirst(min(buffer.count, size + 2))
                if size == 0 { break }
            }
        } else {
            deliver(buffer[...])
            buffer.removeAll()
            while try fill() {
                deliver(buffer[...])
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

extension String {
    var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
