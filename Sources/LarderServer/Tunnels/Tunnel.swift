import Glibc
import LarderIO

/// A CONNECT tunnel: bytes relayed both ways between a client and the server it asked for,
/// never looked at, never cached.
///
/// Each direction has a bounded buffer (64 KiB): a side is read only while the buffer towards
/// the other side has room, so a slow reader on one end stops reading on the other (TCP
/// backpressure) instead of making Larder buffer without bound. A side that ends its stream
/// (EOF) is passed on as a half-close (shutdown of writing) once its buffered bytes are out;
/// the tunnel closes when both directions are done, on an error, or after
/// `proxy.tunnel_idle_timeout` without traffic.
///
/// State: loop-confined; both sockets are registered with the same loop.
final class Tunnel {
    /// One end of the tunnel, as the loop's handler for its socket.
    final class Side: IOHandler {
        let socket: Socket
        let isClient: Bool
        weak var tunnel: Tunnel?
        var readClosed = false
        var writeShut = false

        init(socket: Socket, isClient: Bool) {
            self.socket = socket
            self.isClient = isClient
        }

        func handleIO(_ events: IOEvents) {
            tunnel?.handle(self, events)
        }
    }

    let proxy: ProxyLoop
    let target: String
    let peer: SocketAddress?
    /// The CONNECT request's User-Agent, for the access line.
    let agent: String?
    /// The user the CONNECT was let in as (``ClientConnection/authenticatedUser``).
    let user: ProxyAuthenticator.User?
    let client: Side
    let server: Side
    /// Bytes from the client on their way to the server, and the other way.
    private let toServer = ByteBuffer(capacity: 16 * 1024)
    private let toClient = ByteBuffer(capacity: 16 * 1024)
    static let bufferLimit = 64 * 1024
    private(set) var lastActivity: UInt64
    private let started: UInt64
    private var bytesUp = 0
    private var bytesDown = 0
    private var closed = false

    /// `leftover` are bytes the client sent after its CONNECT head (already read), `greeting`
    /// the `200 Connection established` still to be written to it.
    init(
        proxy: ProxyLoop, client: Socket, peer: SocketAddress?, server: Socket, target: String, leftover: [UInt8],
        greeting: [UInt8], startNanos: UInt64, agent: String? = nil, user: ProxyAuthenticator.User? = nil
    ) {
        self.proxy = proxy
        self.target = target
        self.peer = peer
        self.agent = agent
        self.user = user
        self.client = Side(socket: client, isClient: true)
        self.server = Side(socket: server, isClient: false)
        lastActivity = proxy.loop.now
        started = startNanos
        append(greeting, to: toClient)
        append(leftover, to: toServer)
        bytesUp += leftover.count
    }

    private func append(_ bytes: [UInt8], to buffer: ByteBuffer) {
        guard !bytes.isEmpty else { return }
        let space = buffer.writableSpace(minimum: bytes.count, limit: max(Tunnel.bufferLimit, bytes.count))
        bytes.withUnsafeBytes { space.copyMemory(from: $0) }
        buffer.didWrite(bytes.count)
    }

    /// Registers both sockets and starts relaying.
    func start() throws(SystemError) {
        client.tunnel = self
        server.tunnel = self
        try proxy.loop.register(client.socket.fd, interest: [], handler: client)
        do {
            try proxy.loop.register(server.socket.fd, interest: [], handler: server)
        } catch {
            proxy.loop.deregister(client.socket.fd)
            throw error
        }
        proxy.telemetry.stats[.tunnelsOpened].add(1)
        proxy.telemetry.stats.count(.tunnel)
        pump()
    }

    fileprivate func handle(_ side: Side, _ events: IOEvents) {
        guard !closed else { return }
        lastActivity = proxy.loop.now
        // An error or reset on a side we are not reading from (its buffer is full) would
        // otherwise be reported again and again without anything to read.
        if events.contains(.hangup), !events.contains(.readable) {
            let error = side.socket.pendingError()
            if error != 0 {
                close(reason: .error)
                return
            }
        }
        pump()
    }

    /// Moves whatever can move, in both directions, then sets what each socket waits for.
    private func pump() {
        for _ in 0..<4 {
            guard !closed else { return }
            let movedUp = relay(from: client, into: toServer, to: server)
            let movedDown = relay(from: server, into: toClient, to: client)
            if !movedUp && !movedDown { break }
        }
        guard !closed else { return }
        if client.readClosed && server.readClosed && toServer.isEmpty && toClient.isEmpty {
            finish()
            return
        }
        proxy.loop.setInterest(client.socket.fd, interest(reading: client, buffer: toServer, writing: toClient))
        proxy.loop.setInterest(server.socket.fd, interest(reading: server, buffer: toClient, writing: toServer))
    }

    private func interest(reading side: Side, buffer outgoing: ByteBuffer, writing incoming: ByteBuffer) -> IOEvents {
        var events: IOEvents = []
        if !side.readClosed && outgoing.readableCount < Tunnel.bufferLimit { events.insert(.readable) }
        if !incoming.isEmpty && !side.writeShut { events.insert(.writable) }
        return events
    }

    /// Reads from `source` into `buffer` while there is room, writes `buffer` to `sink`.
    /// Returns whether any byte moved.
    private func relay(from source: Side, into buffer: ByteBuffer, to sink: Side) -> Bool {
        var moved = false
        if !source.readClosed && buffer.readableCount < Tunnel.bufferLimit {
            let space = buffer.writableSpace(minimum: 16 * 1024, limit: Tunnel.bufferLimit)
            let room = UnsafeMutableRawBufferPointer(rebasing: space.prefix(Tunnel.bufferLimit - buffer.readableCount))
            do {
                if let count = try source.socket.read(into: room) {
                    if count == 0 {
                        source.readClosed = true
                    } else {
                        buffer.didWrite(count)
                        if source.isClient { bytesUp += count } else { bytesDown += count }
                        moved = true
                    }
                }
            } catch {
                close(reason: .error)
                return false
            }
        }
        if !buffer.isEmpty && !sink.writeShut {
            do {
                if let written = try sink.socket.write(buffer.readable) {
                    buffer.consume(written)
                    moved = moved || written > 0
                }
            } catch {
                close(reason: .error)
                return false
            }
        }
        // RFC 9110 §9.3.6: a half-close on one side is passed on once its data is through.
        if source.readClosed && buffer.isEmpty && !sink.writeShut {
            sink.socket.shutdownWrite()
            sink.writeShut = true
        }
        return moved
    }

    /// Whether nothing moved either way for `quiet` nanoseconds and everything relayed has
    /// reached its side: nothing buffered here, nothing unacknowledged in either socket (a
    /// slow reader drains a large socket buffer for seconds between writable events).
    func isQuiet(now: UInt64, for quiet: UInt64) -> Bool {
        guard !closed, now &- lastActivity >= quiet, toClient.isEmpty, toServer.isEmpty else { return false }
        return client.socket.unsentBytes() == 0 && server.socket.unsentBytes() == 0
    }

    /// Closes an idle tunnel (called from the loop's sweep).
    func checkIdle(now: UInt64, timeout: UInt64) {
        if !closed && now &- lastActivity >= timeout { close(reason: .idle) }
    }

    private func finish() {
        close(reason: nil)
    }

    /// Why a tunnel closed other than by either side ending it: its access line's outcome is
    /// `tunnel-<reason>`.
    enum CloseReason: String {
        /// A socket error on either side; logged with the cause `reset`.
        case error
        /// No bytes either way within the idle timeout.
        case idle
        /// The server is stopping.
        case shutdown
        /// Closed at `max_connections` to admit a client holding fewer connections
        /// (``ProxyLoop/makeRoom(for:)``).
        case evicted
        /// A reload changed or removed the user the CONNECT was let in as.
        case revoked
    }

    /// Closes both sockets and logs the tunnel.
    func close(reason: CloseReason?) {
        guard !closed else { return }
        closed = true
        for side in [client, server] {
            proxy.loop.deregister(side.socket.fd)
            side.socket.close()
        }
        proxy.telemetry.stats[.tunnelBytesUp].add(bytesUp)
        proxy.telemetry.stats[.tunnelBytesDown].add(bytesDown)
        proxy.tunnelClosed(self)
        proxy.accessLog.record(
            client: peer, method: "CONNECT", url: .text(target), status: 200, outcome: .tunnel(reason),
            bytes: bytesUp + bytesDown, durationNanos: Clocks.monotonicNanos() &- started, attempts: 1, agent: agent,
            detail: reason == .error ? .reset : nil)
    }
}
