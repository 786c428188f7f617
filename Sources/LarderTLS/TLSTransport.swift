import Glibc
import LarderIO

/// A client's socket after an intercepted CONNECT: a TLS session, server side, that the
/// connection reads requests from and writes responses to as from a plain socket. It answers
/// only for the host the client sent CONNECT for (another SNI name is refused), shows the
/// mint's certificate for it, and speaks HTTP/1.1 (ALPN). File bodies go out by `SSL_sendfile`
/// when the kernel took over the session's sending (kTLS); otherwise they are encrypted in
/// user space and ``OutputQueue`` copies them through ``write(_:more:)``.
///
/// Stages: handshaking → open → closed; the handshake runs inside the first reads and writes,
/// non-blocking, on the connection's loop. State: loop-confined.
public final class TLSTransport: Transport {
    public enum Stage: Equatable, Sendable {
        case handshaking, open, closed
    }

    public let socket: Socket
    private let session: OpenSSL.Session
    public private(set) var stage = Stage.handshaking
    /// Why the session failed (a refused name, the client's alert, a broken record), for the log.
    public private(set) var failure: String?
    /// How it failed, once it has.
    public private(set) var ending: Ending?

    /// How a session failed.
    public enum Ending: Sendable, Equatable {
        /// The client sent an alert (during the handshake: it rejected the certificate).
        case alert
        /// The client closed the connection without one.
        case closed
        /// Anything else: bytes that are not TLS, a refused name, a broken record.
        case error
    }
    public private(set) var wantsWritable = false

    /// A session on `socket` (non-blocking, just after the 200 to CONNECT) for `host`.
    public init(socket: Socket, interceptor: TLSInterceptor, host: String) throws(LocalCA.Failure) {
        self.socket = socket
        do {
            session = try OpenSSL.Session(context: interceptor.context, fd: socket.fd, expectedName: host)
        } catch {
            throw LocalCA.Failure("cannot start a TLS session: \(error)")
        }
    }

    /// An open session on its way to another event loop (a connection moving to join the fill
    /// there): the next loop continues it with ``init(_:)``.
    public struct Handoff: Sendable {
        let socket: Socket
        let session: OpenSSL.Session
    }

    /// Gives the session up for another loop; this transport must not be used afterwards.
    /// Only an open session moves (the handshake is over, nothing is half-written).
    public func handoff() -> Handoff? {
        guard stage == .open else { return nil }
        stage = .closed
        return Handoff(socket: socket, session: session)
    }

    /// Continues a session another loop handed off.
    public init(_ handoff: Handoff) {
        socket = handoff.socket
        session = handoff.session
        stage = .open
        canSendFile = handoff.session.kernelSends
    }

    /// Whether Larder's certificate was sent: a failure after it can be the client refusing
    /// it, one before it cannot (the client never saw it).
    public var certificateSent: Bool { session.certificateSent }

    /// The SNI name the client sent, once the handshake has read it.
    public var serverName: String? { session.serverName }
    /// The protocol version, once open ("TLSv1.3").
    public var version: String { session.version }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        guard try handshaken() else { return nil }
        switch session.read(into: buffer) {
        case .done(let count): return count
        case .wantRead: return nil
        case .wantWrite:
            wantsWritable = true
            return nil
        case .closed:
            stage = .closed
            return 0
        case .failed(let reason): throw fail(reason, call: "SSL_read")
        }
    }

    public func write(_ vectors: UnsafeBufferPointer<iovec>, more: Bool) throws(SystemError) -> Int? {
        guard try handshaken() else { return nil }
        // Small pieces (a head, a small body, pipelined answers) are gathered into one record:
        // each SSL_write is a record and a write(2) of its own, so a head and its body written
        // apart would cost two of each.
        if vectors.count > 1, vectors[0].iov_len < TLSTransport.recordSize {
            let bytes = gathered(vectors)
            return bytes.isEmpty ? 0 : try writeOnce(bytes)
        }
        var total = 0
        for vector in vectors where vector.iov_len > 0 {
            // After a would-block, OpenSSL wants the same bytes again: the queue offers them,
            // since it advances only by what was taken.
            guard let count = try writeOnce(UnsafeRawBufferPointer(start: vector.iov_base, count: vector.iov_len)) else {
                return total == 0 ? nil : total
            }
            total += count
            if count < vector.iov_len { return total }
        }
        return total
    }

    /// The largest TLS record's plain text (RFC 8446 §5.1).
    static let recordSize = 16 * 1024
    /// Where small pieces are gathered into one record; made on first use.
    private var scratch: UnsafeMutableRawBufferPointer?

    /// The first bytes of `vectors`, up to one record, copied into the scratch buffer. The
    /// queue offers the same bytes first again after a would-block, so a retry gathers the
    /// same prefix (or a longer one), as OpenSSL requires.
    private func gathered(_ vectors: UnsafeBufferPointer<iovec>) -> UnsafeRawBufferPointer {
        let buffer = scratch ?? .allocate(byteCount: TLSTransport.recordSize, alignment: 16)
        scratch = buffer
        var filled = 0
        for vector in vectors where vector.iov_len > 0 && filled < buffer.count {
            let count = min(vector.iov_len, buffer.count - filled)
            (buffer.baseAddress! + filled).copyMemory(from: vector.iov_base!, byteCount: count)
            filled += count
        }
        return UnsafeRawBufferPointer(rebasing: buffer[0..<filled])
    }

    /// One SSL_write: the bytes taken, nil when none fit.
    private func writeOnce(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        switch session.write(bytes) {
        case .done(let count): return count
        case .wantRead, .wantWrite: return nil
        case .closed: throw fail("the client closed the session", call: "SSL_write", errno: EPIPE)
        case .failed(let reason): throw fail(reason, call: "SSL_write")
        }
    }

    deinit { scratch?.deallocate() }

    /// True once the handshake is over on a kernel with TLS offload (kTLS): file bodies then
    /// go out with SSL_sendfile, zero-copy. Otherwise ``OutputQueue`` copies them.
    public private(set) var canSendFile = false

    public func sendFile(from file: Int32, offset: inout Int64, count: Int) throws(SystemError) -> Int? {
        guard canSendFile, try handshaken() else { throw SystemError(call: "sendfile", errno: EOPNOTSUPP) }
        switch session.sendFile(file, offset: offset, count: count) {
        case .done(let sent):
            offset += Int64(sent)
            return sent
        case .wantRead, .wantWrite:
            return nil
        case .closed:
            throw fail("the client closed the session", call: "SSL_sendfile", errno: EPIPE)
        case .failed(let reason):
            throw fail(reason, call: "SSL_sendfile")
        }
    }

    /// Bytes buffered in the session, decrypted or read ahead: the socket will not report them.
    public var hasBufferedInput: Bool { stage == .open && session.hasPending }

    public func shutdownWrite() {
        if stage == .open { session.shutdown() }
        socket.shutdownWrite()
    }

    public func close() {
        stage = .closed
        socket.close()
    }

    /// Advances the handshake; whether it is complete.
    private func handshaken() throws(SystemError) -> Bool {
        switch stage {
        case .open:
            wantsWritable = false
            return true
        case .closed: throw SystemError(call: "SSL_read", errno: EPIPE)
        case .handshaking: break
        }
        wantsWritable = false
        switch session.handshake() {
        case .done:
            stage = .open
            canSendFile = session.kernelSends
            return true
        case .wantRead:
            return false
        case .wantWrite:
            wantsWritable = true
            return false
        case .closed:
            throw fail("the client closed the connection during the handshake", call: "SSL_do_handshake", errno: ECONNRESET)
        case .failed(let reason):
            throw fail(reason, call: "SSL_do_handshake")
        }
    }

    private func fail(_ reason: String, call: StaticString, errno code: Int32 = EPROTO) -> SystemError {
        stage = .closed
        failure = reason
        ending = session.peerAlerted ? .alert : code == ECONNRESET || session.peerVanished ? .closed : .error
        return SystemError(call: call.description, errno: code)
    }
}
