import Foundation
import Glibc
import Synchronization

/// An origin that answers each request with exactly the bytes a test scripted for its path,
/// misbehaviour included (conflicting framing, short or long bodies, interim responses). One
/// thread per connection; each connection answers one request and closes, unless the script
/// asks to keep it open. Listens on 127.0.0.1; the listening socket closes with the object.
final class RawOrigin: @unchecked Sendable {
    // @unchecked: `fd` is immutable, the scripts and counts are behind their mutexes.
    struct Script: Sendable {
        /// The pieces to write, in order, with a pause before each one after the first.
        var pieces: [[UInt8]]
        var pause: TimeInterval = 0
        /// Keep the connection after answering, and close it silently (no answer) when a next
        /// request arrives on it: a keep-alive connection the origin has dropped.
        var dropsReusedConnection = false
        /// Keep the connection after answering, and answer the next request on it (for its own
        /// path): a well-behaved keep-alive origin.
        var keepsConnection = false
        /// After answering, wait this long and write these bytes unasked (a second response,
        /// a `408`), then keep the connection as ``keepsConnection`` says, or close it.
        var late: (delay: TimeInterval, bytes: [UInt8])?
        init(_ text: String) { pieces = [Array(text.utf8)] }
        init(pieces: [[UInt8]], pause: TimeInterval) {
            self.pieces = pieces
            self.pause = pause
        }
    }

    let port: Int
    private let fd: Int32
    private let scripts = Mutex<[String: Script]>([:])
    private let counts = Mutex<[String: Int]>([:])
    /// Requests that arrived on a connection the origin then dropped without answering.
    let reusedConnections = Mutex(0)
    /// Connections accepted.
    let connections = Mutex(0)

    init() throws {
        // Close-on-exec: curl children of the test must not hold the origin's sockets open.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw TestFailure("raw origin: bind/listen failed: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let listener = fd
        Thread.detachNewThread { [weak self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                guard let self else {
                    close(client)
                    return
                }
                Thread.detachNewThread { self.serve(client) }
            }
        }
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Answers requests for `path` with `script` from now on.
    func script(_ path: String, _ script: Script) {
        scripts.withLock { $0[path] = script }
    }

    /// Requests received for `path`.
    func count(_ path: String) -> Int { counts.withLock { $0[path] ?? 0 } }

    private func serve(_ client: Int32) {
        defer { close(client) }
        connections.withLock { $0 += 1 }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            while received.headEnd == nil {
                let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                received += buffer[0..<count]
            }
            // Requests without bodies: the next one starts after this head.
            let requestLine = String(decoding: received.prefix { $0 != 13 }, as: UTF8.self)
            received.removeFirst(received.headEnd!)
            let parts = requestLine.split(separator: " ")
            guard parts.count == 3 else { return }
            let path = String(parts[1])
            counts.withLock { $0[path, default: 0] += 1 }
            let script =
                scripts.withLock { $0[path] } ?? Script("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            for (index, piece) in script.pieces.enumerated() {
                if index > 0, script.pause > 0 { Thread.sleep(forTimeInterval: script.pause) }
                guard Self.write(piece, to: client) else { return }
            }
            if let late = script.late {
                Thread.sleep(forTimeInterval: late.delay)
                guard Self.write(late.bytes, to: client) else { return }
            }
            if script.dropsReusedConnection {
                // Wait for the next request on this connection, then hang up without a word.
                let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                if count > 0 { reusedConnections.withLock { $0 += 1 } }
                return
            }
            if !script.keepsConnection { break }
        }
        shutdown(client, Int32(SHUT_WR))
        // Let the peer read everything before the close.
        while buffer.withUnsafeMutableBytes({ recv(client, $0.baseAddress, $0.count, 0) }) > 0 {}
    }

    private static func write(_ bytes: [UInt8], to client: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}

extension [UInt8] {
    /// Where the first head ends (just past its CRLFCRLF), if it has.
    fileprivate var headEnd: Int? {
        guard count >= 4 else { return nil }
        for index in 0...(count - 4) where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 {
            return index + 4
        }
        return nil
    }
}
