import Foundation
import Glibc

/// A plain blocking TCP client for byte-exact requests (pipelining, malformed input).
final class RawConnection {
    let fd: Int32

    /// Connects to `host`:`port`, from the IPv4 address `source` if given (another client).
    init(port: Int, host: String = "127.0.0.1", from source: String? = nil, receiveTimeout: Int = 5) throws {
        let isIPv6 = host.contains(":")
        fd = socket(isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed") }
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            guard Self.withIPv4(source, port: 0, { bind(fd, $0, $1) }) == 0 else {
                close(fd)
                throw TestFailure("bind to \(source) failed: errno \(errno)")
            }
        }
        let result: Int32
        if isIPv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            result = Self.withIPv4(host, port: port) { connect(fd, $0, $1) }
        }
        guard result == 0 else {
            close(fd)
            throw TestFailure("connect to \(host):\(port) failed: errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Runs `body` (bind or connect) on the IPv4 socket address `host`:`port`.
    private static func withIPv4(_ host: String, port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    func send(_ text: String) {
        send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return }
            offset += written
        }
    }

    private var pending: [UInt8] = []

    /// Whether bytes (or end of stream) are waiting to be read, within `milliseconds`.
    func hasInput(within milliseconds: Int32) -> Bool {
        if !pending.isEmpty { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, milliseconds) > 0
    }

    /// Ends our side of the stream (the peer reads end of file; we can still read).
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Reads until the peer closes (or the receive timeout), counting bytes without keeping them.
    func countUntilClose() -> Int {
        var count = pending.count
        pending.removeAll()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let received = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if received <= 0 { return count }
            count += received
        }
    }

    /// One line (up to LF), from what was buffered and what arrives.
    func readLine() -> String? {
        while !pending.contains(10) { if !fill() { return nil } }
        let end = pending.firstIndex(of: 10)!
        defer { pending.removeFirst(end + 1) }
        return String(decoding: pending[0..<end], as: UTF8.self)
    }

    /// Reads more bytes; false at end of stream, error or timeout.
    private func fill() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        pending.append(contentsOf: buffer[0..<count])
        return true
    }

    /// Everything until the peer closes (or the receive timeout).
    func readUntilClose() -> [UInt8] {
        while fill() {}
        defer { pending.removeAll() }
        return pending
    }

    /// Whether the peer closes the connection while what arrives is read and dropped, over at
    /// most `polls` waits of 50 ms for input (a response cut short closes; one going on does not).
    func closesWhileDrained(polls: Int) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<polls where hasInput(within: 50) {
            if recv(fd, &buffer, buffer.count, 0) <= 0 { return true }
        }
        return false
    }

    /// Whether the peer closed the connection (reads return end of stream) within the timeout.
    func peerClosed() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    struct Response {
        let status: Int
        let headers: [(String, String)]
        let body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.0 == name.lowercased() }?.1 }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Reads one response (Content-Length, chunked, or until close), skipping 1xx heads.
    func readResponse(headRequest: Bool = false) throws -> Response {
        while true {
            var headEnd: Int?
            while headEnd == nil {
                if let range = findHeadEnd() {
                    headEnd = range
                } else if !fill() {
                    throw TestFailure("connection ended before a response head; got \(String(decoding: pending, as: UTF8.self))")
                }
            }
            let headText = String(decoding: pending[0..<headEnd!], as: UTF8.self)
            pending.removeFirst(headEnd! + 4)
            var lines = headText.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst()
            let status = Int(statusLine.split(separator: " ")[1]) ?? 0
            let headers = lines.compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            if (100..<200).contains(status) { continue }
            let response = { (body: [UInt8]) in Response(status: status, headers: headers, body: body) }
            if headRequest || status == 204 || status == 304 { return response([]) }
            if let length = headers.first(where: { $0.0 == "content-length" }).flatMap({ Int($0.1) }) {
                while pending.count < length { if !fill() { break } }
                let body = Array(pending.prefix(length))
                pending.removeFirst(body.count)
                return response(body)
            }
            if headers.contains(where: { $0.0 == "transfer-encoding" }) {
                var body: [UInt8] = []
                while true {
                    while !pending.contains(10) { if !fill() { return response(body) } }
                    let lineEnd = pending.firstIndex(of: 10)!
                    let sizeText = String(decoding: pending[0..<lineEnd], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                    pending.removeFirst(lineEnd + 1)
                    let size = Int(sizeText.split(separator: ";")[0], radix: 16) ?? 0
                    while pending.count < size + 2 { if !fill() { return response(body) } }
                    body.append(contentsOf: pending[0..<size])
                    pending.removeFirst(size + 2)
                    if size == 0 { return response(body) }
                }
            }
            return response(readUntilClose())
        }
    }

    private func findHeadEnd() -> Int? {
        guard pending.count >= 4 else { return nil }
        for index in 0...(pending.count - 4)
        where pending[index] == 13 && pending[index + 1] == 10 && pending[index + 2] == 13 && pending[index + 3] == 10 {
            return index
        }
        return nil
    }
}
