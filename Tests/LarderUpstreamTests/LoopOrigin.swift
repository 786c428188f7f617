import Glibc
import LarderIO

/// An origin on a test's event loop: accepts connections, keeps them open, and answers each
/// request head read on them (the requests carry no body) with what `answer` returns for its
/// target. `accepted` sees each new connection, `received` each request head as it came.
/// Loop-confined.
final class LoopOrigin: IOHandler {
    let loop: EventLoop
    let listener: Socket
    private let accepted: (Socket) -> Void
    private let answer: (String) -> [UInt8]
    private let received: (String) -> Void
    private var connections: [Int32: Connection] = [:]

    init(
        loop: EventLoop, listener: Socket, accepted: @escaping (Socket) -> Void = { _ in }, received: @escaping (String) -> Void = { _ in },
        answer: @escaping (String) -> [UInt8]
    ) {
        self.loop = loop
        self.listener = listener
        self.accepted = accepted
        self.received = received
        self.answer = answer
    }

    func handleIO(_ events: IOEvents) {
        while let (socket, _) = try? listener.accept() {
            let connection = Connection(origin: self, socket: socket)
            connections[socket.fd] = connection
            accepted(socket)
            try? loop.register(socket.fd, interest: .readable, handler: connection)
        }
    }

    func close(_ connection: Connection) {
        loop.deregister(connection.socket.fd)
        connections[connection.socket.fd] = nil
        connection.socket.close()
    }

    final class Connection: IOHandler {
        unowned let origin: LoopOrigin
        let socket: Socket
        private var received: [UInt8] = []

        init(origin: LoopOrigin, socket: Socket) {
            self.origin = origin
            self.socket = socket
        }

        func handleIO(_ events: IOEvents) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let read: Int?
                do {
                    read = try buffer.withUnsafeMutableBytes { (bytes) throws(SystemError) in try socket.read(into: bytes) }
                } catch {
                    origin.close(self)
                    return
                }
                guard let count = read else { return }  // nothing more for now
                guard count > 0 else {
                    origin.close(self)
                    return
                }
                received += buffer[0..<count]
                while let end = headEnd() {
                    let line = String(decoding: received.prefix { $0 != 13 }, as: UTF8.self).split(separator: " ")
                    origin.received(String(decoding: received[0..<end], as: UTF8.self))
                    received.removeFirst(end)
                    let response = origin.answer(line.count == 3 ? String(line[1]) : "/")
                    _ = response.withUnsafeBytes { try? socket.write($0) }
                }
            }
        }

        private func headEnd() -> Int? {
            guard received.count >= 4 else { return nil }
            for index in 0...(received.count - 4) where received[index..<(index + 4)].elementsEqual([13, 10, 13, 10]) {
                return index + 4
            }
            return nil
        }
    }
}
