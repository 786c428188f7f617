import CLarderSystem
import Synchronization

/// A value behind a mutex, as `Synchronization.Mutex`, whose critical sections
/// ThreadSanitizer can see. `Mutex` on Linux waits with the futex system call directly, which
/// TSan does not intercept: it then reports every access made under the lock as a race. A
/// build made for TSan (`scripts/tsan.sh`, `-D LARDER_TSAN`) tells it that entering the lock
/// acquires and leaving it releases; other builds compile to the plain mutex.
///
/// State: the value is reached only inside ``withLock(_:)``.
///
/// `withLock` is inlinable so each caller's module specializes it for its `Value`: called as an
/// unspecialized generic across the module boundary, every call looked up `Mutex<Value>`'s type
/// metadata at run time.
public final class Locked<Value>: Sendable {
    @usableFromInline let mutex: Mutex<Value>

    public init(_ value: sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with the value, holding the lock.
    @inlinable @inline(__always)
    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        #if LARDER_TSAN
            let token = Unmanaged.passUnretained(self).toOpaque()
            return try mutex.withLock { (value) throws(E) -> sending Result in
                __tsan_acquire(token)
                defer { __tsan_release(token) }
                return try body(&value)
            }
        #else
            return try mutex.withLock(body)
        #endif
    }
}
