import Glibc

/// The one door to the kernel: runs a system call, retries it on EINTR, and turns a failure
/// into a ``SystemError`` naming the call.
public enum Syscall {
    /// Runs `body` (a call returning -1 on failure) until it does not fail with EINTR.
    @inlinable
    @inline(__always)
    public static func call<Result: FixedWidthInteger>(
        _ name: StaticString, _ body: () -> Result
    ) throws(SystemError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(call: name.description, errno: code)
        }
    }

    /// ``call(_:_:)`` for calls that take paths: `body` gets them as C strings. Explicit
    /// `withCString` matters here: a `String` passed straight to a `const char *` parameter
    /// inside a closure is converted with `utf8CString`, two allocations per path, and the
    /// disk tier makes these calls on every miss.
    public static func call<Result: FixedWidthInteger>(
        _ name: StaticString, path: String, _ body: (UnsafePointer<CChar>) -> Result
    ) throws(SystemError) -> Result {
        let (result, code) = path.withCString { path in retryingEINTR { body(path) } }
        if code != 0 { throw SystemError(call: name.description, errno: code) }
        return result
    }

    /// ``call(_:path:_:)`` with two paths (rename).
    public static func call<Result: FixedWidthInteger>(
        _ name: StaticString, paths first: String, _ second: String,
        _ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> Result
    ) throws(SystemError) -> Result {
        let (result, code) = first.withCString { first in
            second.withCString { second in retryingEINTR { body(first, second) } }
        }
        if code != 0 { throw SystemError(call: name.description, errno: code) }
        return result
    }

    /// Runs `body` until it does not fail with EINTR: its result, and errno when it is -1 (else 0).
    private static func retryingEINTR<Result: FixedWidthInteger>(_ body: () -> Result) -> (Result, Int32) {
        while true {
            let result = body()
            if result != -1 { return (result, 0) }
            let code = Glibc.errno
            if code != EINTR { return (result, code) }
        }
    }

    /// Like ``call(_:_:)`` for non-blocking I/O: returns `nil` when the call would block.
    @inlinable
    @inline(__always)
    public static func nonBlocking<Result: FixedWidthInteger>(
        _ name: StaticString, _ body: () -> Result
    ) throws(SystemError) -> Result? {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError(call: name.description, errno: code)
        }
    }

    /// Closes a descriptor. EINTR is deliberately not retried: on Linux the descriptor is
    /// released even when close is interrupted, and a retry could close a reused number.
    @inlinable
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// For calls that return a pointer and NULL on failure (`opendir`, ...).
    @inlinable
    public static func pointer<Pointee>(
        _ name: StaticString, _ body: () -> Pointee?
    ) throws(SystemError) -> Pointee {
        while true {
            if let result = body() { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(call: name.description, errno: code)
        }
    }
}
