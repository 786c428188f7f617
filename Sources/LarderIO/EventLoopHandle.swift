import CLarderSystem
import Glibc

/// The thread-safe side of an ``EventLoop``: other threads hand it jobs, which run on the
/// loop's thread with the loop itself as argument.
///
/// State: `jobs` is guarded by its mutex; the eventfd is written by any thread and read only by
/// the loop thread. `pending` collapses wake-ups: only the job that finds the queue empty
/// writes the eventfd.
public final class EventLoopHandle: Sendable {
    /// A job for the loop thread.
    public typealias Job = @Sendable (EventLoop) -> Void

    let epollFD: Int32
    let wakeFD: Int32
    /// A small number naming the loop in logs and metrics.
    public let index: Int
    private let jobs = Locked<[Job]>([])

    init(index: Int) throws(SystemError) {
        self.index = index
        epollFD = try Syscall.call("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            wakeFD = try Syscall.call("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        } catch {
            Syscall.close(epollFD)
            throw error
        }
    }

    /// Runs `job` on the loop thread, soon (from any thread, including the loop's own).
    public func execute(_ job: @escaping Job) {
        let wasEmpty = jobs.withLock { queue in
            queue.append(job)
            return queue.count == 1
        }
        if wasEmpty { wake() }
    }

    func takeJobs() -> [Job] {
        jobs.withLock { queue in
            let taken = queue
            queue.removeAll(keepingCapacity: true)
            return taken
        }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = try? Syscall.nonBlocking("write") { Glibc.write(wakeFD, &one, 8) }
    }
}
