import CLarderSystem
import Glibc

/// A plain POSIX thread, for work that blocks (epoll_wait, fsync) and so must never run on
/// Swift's cooperative pool.
public struct OSThread: Sendable {
    private let thread: pthread_t

    private final class Entry: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts `body` on a new thread named `name` (at most 15 bytes are kept by Linux).
    public static func spawn(name: String, _ body: @escaping @Sendable () -> Void) -> OSThread {
        let entry = Unmanaged.passRetained(Entry(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { argument in
                let entry = Unmanaged<Entry>.fromOpaque(argument!).takeRetainedValue()
                entry.body()
                return nil
            }, entry)
        precondition(result == 0, "pthread_create failed: \(result)")
        _ = larder_set_thread_name(thread, String(name.prefix(15)))
        return OSThread(thread: thread)
    }

    /// Starts `body` on a new thread that nobody joins: it is detached, so its stack and
    /// bookkeeping go back to the system when it ends (BlockingWorker, EventLoop threads).
    public static func spawnDetached(name: String, _ body: @escaping @Sendable () -> Void) {
        let started = spawn(name: name, body)
        _ = pthread_detach(started.thread)
    }

    /// Waits for the thread to finish.
    public func join() {
        _ = pthread_join(thread, nil)
    }
}
