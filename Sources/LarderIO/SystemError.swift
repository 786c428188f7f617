import Glibc

/// A failed system call: which call, and the `errno` it left.
///
/// Every system call in Larder goes through ``Syscall/call(_:_:)``, so every failure carries the
/// name of the call that failed; log lines read like `accept4: Too many open files (errno 24)`.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The name of the failing call, for example `"accept4"`.
    public let call: String
    /// The `errno` value the call left.
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// `strerror(errno)`.
    public var message: String { String(cString: strerror(errno)) }

    public var description: String { "\(call): \(message) (errno \(errno))" }

    /// True for EAGAIN/EWOULDBLOCK: a non-blocking call that would have blocked.
    public var wouldBlock: Bool { errno == EAGAIN || errno == EWOULDBLOCK }
}
