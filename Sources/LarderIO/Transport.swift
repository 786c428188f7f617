import Glibc

/// The byte stream under a client connection. ``ClientConnection`` reads and ``OutputQueue``
/// writes only through it, so the same connection code serves a plain socket
/// (``SocketTransport``) or a TLS session over one (HTTPS interception), which hands file
/// bytes to the kernel only where kernel TLS took over its sending.
///
/// A transport is driven by its connection's event loop: every call is non-blocking and
/// returns nil when it would block. State: loop-confined.
public protocol Transport: AnyObject {
    /// The socket underneath (registered with the loop, shut down, closed).
    var socket: Socket { get }
    /// Reads into `buffer`: the bytes read, 0 at the end of the stream, nil when none are ready.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int?
    /// Writes the gathered buffers; `more` says further bytes follow at once (MSG_MORE), so a
    /// head and its body can leave together. Returns the bytes taken, nil when none fit.
    func write(_ vectors: UnsafeBufferPointer<iovec>, more: Bool) throws(SystemError) -> Int?
    /// Whether ``sendFile(from:offset:count:)`` works; when it does not, ``OutputQueue`` reads
    /// file ranges itself and writes them.
    var canSendFile: Bool { get }
    /// Sends up to `count` bytes of `file` from `offset` without copying them through user
    /// space, advancing `offset`; nil when none fit.
    func sendFile(from file: Int32, offset: inout Int64, count: Int) throws(SystemError) -> Int?
    /// Bytes already read from the socket and decrypted but not yet returned: the loop will not
    /// report them as readable, so the connection reads again while this is true.
    var hasBufferedInput: Bool { get }
    /// The last read stopped because the transport must write first (a TLS handshake whose
    /// reply did not fit the socket): the connection asks for writability and reads again then.
    var wantsWritable: Bool { get }
    /// Ends the sending direction (after the last response: lingering close).
    func shutdownWrite()
    /// Closes the socket.
    func close()
}

/// A plain TCP socket: reads and gathering writes straight through, file bodies by `sendfile`.
///
/// State: loop-confined, like the connection that owns it.
public final class SocketTransport: Transport {
    public let socket: Socket

    public init(_ socket: Socket) {
        self.socket = socket
    }

    @inline(__always)
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try socket.read(into: buffer)
    }

    @inline(__always)
    public func write(_ vectors: UnsafeBufferPointer<iovec>, more: Bool) throws(SystemError) -> Int? {
        try socket.writev(vectors, more: more)
    }

    public var canSendFile: Bool { true }

    @inline(__always)
    public func sendFile(from file: Int32, offset: inout Int64, count: Int) throws(SystemError) -> Int? {
        try socket.sendfile(from: file, offset: &offset, count: count)
    }

    public var hasBufferedInput: Bool { false }

    public var wantsWritable: Bool { false }

    public func shutdownWrite() { socket.shutdownWrite() }

    public func close() { socket.close() }
}
