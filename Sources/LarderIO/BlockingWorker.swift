import Glibc

/// A dedicated thread that runs blocking jobs (file writes, fsync, unlink, directory scans)
/// in order, so they never run on an event loop or on Swift's cooperative pool.
///
/// State: `queue` is guarded by its mutex; the thread sleeps on a condition variable when the
/// queue is empty.
public final class BlockingWorker: Sendable {
    public typealias Job = @Sendable () -> Void

    private struct State {
        var jobs: [Job] = []
        var stopping = false
    }

    private final class Shared: Sendable {
        let state = Locked(State())
        let signal = ConditionSignal()
    }

    private let shared = Shared()
    /// Jobs queued and not yet started.
    public var pendingCount: Int { shared.state.withLock { $0.jobs.count } }

    public init(name: String) {
        let shared = self.shared
        OSThread.spawnDetached(name: name) {
            while true {
                let batch: [Job]? = shared.state.withLock { state in
                    if state.jobs.isEmpty { return state.stopping ? nil : [] }
                    let jobs = state.jobs
                    state.jobs.removeAll(keepingCapacity: true)
                    return jobs
                }
                guard let batch else { return }
                if batch.isEmpty {
                    shared.signal.wait { shared.state.withLock { !$0.jobs.isEmpty || $0.stopping } }
                    continue
                }
                for job in batch { job() }
            }
        }
    }

    /// Queues `job`. After ``stop()`` jobs are dropped (the process is shutting down; anything
    /// half-done on disk is cleaned up at the next start).
    public func submit(wake: Bool = true, _ job: @escaping Job) {
        let accepted = shared.state.withLock { state in
            guard !state.stopping else { return false }
            state.jobs.append(job)
            return true
        }
        if accepted && wake { shared.signal.notify() }
    }

    /// Wakes the thread for jobs submitted with `wake: false`.
    public func wake() { shared.signal.notify() }

    /// Lets queued jobs finish, then ends the thread.
    public func stop() {
        shared.state.withLock { $0.stopping = true }
        shared.signal.notify()
    }

    /// Runs `job` after everything queued before it and waits for it (for shutdown and tests).
    public func drain() {
        if shared.state.withLock({ $0.stopping }) { return }
        let done = Locked(false)
        let finished = ConditionSignal()
        submit {
            done.withLock { $0 = true }
            finished.notify()
        }
        finished.wait { done.withLock { $0 } }
    }
}

/// A condition variable paired with its own mutex: `wait` sleeps until `ready()` holds.
final class ConditionSignal: Sendable {
    // The pthread objects live in heap storage owned by this object and are only used through
    // pthread calls, which are thread-safe by contract.
    private let storage: Storage

    private final class Storage: @unchecked Sendable {
        // Invariant: `mutex` and `condition` are initialized in init, destroyed in deinit, and
        // only ever accessed through pthread_* calls.
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        init() {
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(condition, nil)
        }
        deinit {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            condition.deallocate()
        }
    }

    init() { storage = Storage() }

    func notify() {
        pthread_mutex_lock(storage.mutex)
        pthread_cond_broadcast(storage.condition)
        pthread_mutex_unlock(storage.mutex)
    }

    func wait(until ready: () -> Bool) {
        pthread_mutex_lock(storage.mutex)
        while !ready() {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_sec += 1  // re-check periodically; a notify between check and wait is not lost for long
            pthread_cond_timedwait(storage.condition, storage.mutex, &deadline)
        }
        pthread_mutex_unlock(storage.mutex)
    }
}
