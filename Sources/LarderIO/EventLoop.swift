import CLarderSystem
import Dispatch
import Glibc

/// One epoll loop on its own thread. Everything registered with a loop is used only from that
/// loop's thread, so connections, curl transfers and timers need no locks; other threads talk to
/// the loop through its ``EventLoopHandle``.
///
/// State: every stored property is owned by the loop thread. Level-triggered epoll: a handler
/// that does not want readiness for a while changes its interest with ``setInterest(_:_:)``.
public final class EventLoop {
    /// The thread-safe handle of this loop.
    public let handle: EventLoopHandle

    private struct Slot {
        var handler: (any IOHandler)?
        var generation: UInt32 = 0
        var interest: IOEvents = []
    }

    private var slots: [Slot] = []
    private var timers = TimerHeap()
    private var deferred: [LoopWork] = []
    private var beforeWait: [LoopWork] = []
    /// The batch being run, swapped with `deferred` (or `beforeWait`) so that work queued while
    /// it runs goes to the other array: taking a batch by copy made the emptied queue allocate a
    /// new buffer on every pass.
    private var batch: [LoopWork] = []
    private var running = true
    private var events: UnsafeMutablePointer<epoll_event>
    private let maxEvents = 512

    /// The object that runs on this loop (the server's per-loop state), for jobs sent through
    /// the handle to find it.
    public var context: AnyObject?

    /// Monotonic nanoseconds, refreshed after every wait (cheap "now" for handlers).
    public private(set) var now: UInt64 = Clocks.monotonicNanos()

    /// How long the loop keeps polling for events (without sleeping) once it has nothing to do,
    /// before it sleeps in `epoll_wait`; 0 sleeps at once. See ``pollBusily()``.
    public var busyPollNanos: UInt64 = 0
    /// Counts how busy polls ended, for the statistics: an event arrived while polling
    /// (`caught`), or the time ran out (`expired`: the loop then sleeps, or runs a timer that
    /// came due).
    public var busyPollCounters: (caught: AtomicCounter, expired: AtomicCounter)?

    /// Starts a loop on a new thread and returns its handle once the loop is running.
    public static func start(name: String, index: Int = 0) throws(SystemError) -> EventLoopHandle {
        let handle = try EventLoopHandle(index: index)
        let ready = DispatchSemaphore(value: 0)
        OSThread.spawnDetached(name: name) {
            let loop = EventLoop(handle: handle)
            ready.signal()
            loop.run()
        }
        ready.wait()
        return handle
    }

    private init(handle: EventLoopHandle) {
        self.handle = handle
        events = .allocate(capacity: maxEvents)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = UInt64(UInt32.max)
        _ = try? Syscall.call("epoll_ctl") { epoll_ctl(handle.epollFD, EPOLL_CTL_ADD, handle.wakeFD, &event) }
    }

    deinit {
        events.deallocate()
    }

    // MARK: Descriptors

    /// Starts watching `fd` for `interest`, delivering readiness to `handler`.
    /// With `exclusive`, only one of the loops watching a shared listening socket is woken per
    /// connection (EPOLLEXCLUSIVE), instead of all of them.
    public func register(_ fd: Int32, interest: IOEvents, handler: any IOHandler, exclusive: Bool = false) throws(SystemError) {
        let index = Int(fd)
        if index >= slots.count {
            slots.append(contentsOf: repeatElement(Slot(), count: max(index + 1 - slots.count, slots.count)))
        }
        slots[index].generation &+= 1
        slots[index].handler = handler
        slots[index].interest = interest
        var event = epollEvent(fd: fd, interest: interest)
        // EPOLLEXCLUSIVE may only be combined with IN/OUT/ET/WAKEUP.
        if exclusive { event.events = (event.events & ~EPOLLRDHUP.rawValue) | EPOLLEXCLUSIVE.rawValue }
        do {
            _ = try Syscall.call("epoll_ctl") { epoll_ctl(handle.epollFD, EPOLL_CTL_ADD, fd, &event) }
        } catch {
            slots[index].handler = nil
            throw error
        }
    }

    /// Changes what `fd` is watched for (no system call when nothing changes). False when the
    /// kernel no longer has `fd` registered: it was closed (EBADF), or closed and its number
    /// reused by a descriptor nobody registered (ENOENT); the caller deregisters it.
    @discardableResult
    public func setInterest(_ fd: Int32, _ interest: IOEvents) -> Bool {
        let index = Int(fd)
        guard index < slots.count, slots[index].handler != nil, slots[index].interest != interest else { return true }
        slots[index].interest = interest
        var event = epollEvent(fd: fd, interest: interest)
        return (try? Syscall.call("epoll_ctl") { epoll_ctl(handle.epollFD, EPOLL_CTL_MOD, fd, &event) }) != nil
    }

    /// Stops watching `fd`. Call before closing it.
    public func deregister(_ fd: Int32) {
        let index = Int(fd)
        guard index < slots.count, slots[index].handler != nil else { return }
        slots[index].handler = nil
        slots[index].generation &+= 1
        _ = try? Syscall.call("epoll_ctl") { epoll_ctl(handle.epollFD, EPOLL_CTL_DEL, fd, nil) }
    }

    private func epollEvent(fd: Int32, interest: IOEvents) -> epoll_event {
        var event = epoll_event()
        // EPOLLRDHUP only while reading: a handler that stopped reading (its buffer is full)
        // learns of the peer's FIN when it reads again, instead of being woken for it in a loop
        // (the event is level-triggered). EPOLLHUP/EPOLLERR are always reported.
        var mask: UInt32 = 0
        if interest.contains(.readable) { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if interest.contains(.writable) { mask |= EPOLLOUT.rawValue }
        event.events = mask
        // The generation guards against a stale event for a descriptor number that was closed
        // and reused earlier in the same batch.
        event.data.u64 = UInt64(UInt32(bitPattern: fd)) | (UInt64(slots[Int(fd)].generation) << 32)
        return event
    }

    // MARK: Timers and deferred work

    /// A scheduled callback, cancellable with ``cancel(_:)``.
    public struct TimerToken: Hashable, Sendable {
        let token: TimerHeap.Token
    }

    /// Runs `body` after `nanoseconds` (on this loop). Like the other ways in, it takes `body`
    /// as given (`consuming`): a closure made for the call is kept, not copied and let go.
    @discardableResult
    public func schedule(afterNanos nanoseconds: UInt64, _ body: consuming @escaping () -> Void) -> TimerToken {
        TimerToken(token: timers.schedule(at: Clocks.monotonicNanos() &+ nanoseconds, body))
    }

    /// Cancels a timer that has not fired.
    public func cancel(_ token: TimerToken) {
        timers.cancel(token.token)
    }

    /// Runs `body` after the current batch of events, before the loop waits again. Used to
    /// avoid re-entering an object from inside one of its own callbacks.
    public func enqueueDeferred(_ body: consuming @escaping () -> Void) {
        deferred.append(LoopWork(body: body))
    }

    /// Runs `body` once this iteration's deferred work is done (responses queued and flushed),
    /// just before the loop waits again: for waking other threads, which on a busy core may
    /// preempt this one, only after the clients of this batch have their bytes.
    public func enqueueBeforeWait(_ body: consuming @escaping () -> Void) {
        beforeWait.append(LoopWork(body: body))
    }

    /// Stops the loop after the current iteration.
    public func stop() {
        running = false
    }

    // MARK: Running

    private func run() {
        while running {
            let timeout = waitNanos()
            let count = timeout != 0 && busyPollNanos > 0 ? pollBusily() : wait(nanoseconds: timeout)
            now = Clocks.monotonicNanos()
            if count > 0 {
                for i in 0..<Int(count) {
                    dispatch(events[i])
                }
            }
            if !timers.isEmpty {
                for due in timers.popDue(now: now) { due.body() }
            }
            runDeferred()
            if !beforeWait.isEmpty {
                swap(&beforeWait, &batch)
                runBatch()
            }
        }
        Syscall.close(handle.wakeFD)
        Syscall.close(handle.epollFD)
    }

    /// Nanoseconds the loop may sleep: 0 with deferred work, until the next timer, or nil
    /// (until an event).
    private func waitNanos() -> UInt64? {
        if !deferred.isEmpty { return 0 }
        guard let deadline = timers.nextDeadline() else { return nil }
        let current = Clocks.monotonicNanos()
        return deadline <= current ? 0 : min(deadline - current, 60_000_000_000)
    }

    /// Waits for events for at most `nanoseconds` (nil: until one arrives), rounded up to whole
    /// milliseconds (`epoll_wait`; no timer here needs finer). -1 (EINTR) goes back to the
    /// loop, which simply goes round again.
    private func wait(nanoseconds: UInt64?) -> Int32 {
        guard let nanoseconds else { return epoll_wait(handle.epollFD, events, Int32(maxEvents), -1) }
        return epoll_wait(handle.epollFD, events, Int32(maxEvents), Int32((nanoseconds + 999_999) / 1_000_000))
    }

    /// Polls for events without sleeping for up to ``busyPollNanos`` (never past the next
    /// timer), then sleeps as usual. A sleeping loop is woken by an inter-processor interrupt
    /// that the peer pays inside its `send` and this core pays leaving idle: on a virtual
    /// machine tens of microseconds per wake-up, twice per miss at one connection (the origin's
    /// answer, the client's next request) — more than the proxy's own work. A loop that is
    /// still polling takes the event at once. The cost is CPU: the loop never sleeps while
    /// events come closer together than the limit, and spends the limit once after the last.
    private func pollBusily() -> Int32 {
        var limit = Clocks.monotonicNanos() &+ busyPollNanos
        if let deadline = timers.nextDeadline() { limit = min(limit, deadline) }
        repeat {
            let count = epoll_wait(handle.epollFD, events, Int32(maxEvents), 0)
            if count > 0 { busyPollCounters?.caught.add(1) }
            // -1 (EINTR) goes back to the loop too, which simply goes round again.
            if count != 0 { return count }
        } while Clocks.monotonicNanos() < limit
        busyPollCounters?.expired.add(1)
        // Polling took time: a timer may be due now.
        return wait(nanoseconds: waitNanos())
    }

    @inline(__always)
    private func dispatch(_ event: epoll_event) {
        let data = event.data.u64
        let fd = Int(UInt32(truncatingIfNeeded: data))
        if fd == Int(UInt32.max) {
            drainJobs()
            return
        }
        let generation = UInt32(truncatingIfNeeded: data >> 32)
        guard fd < slots.count, let handler = slots[fd].handler, slots[fd].generation == generation else { return }
        var ready: IOEvents = []
        let mask = event.events
        if mask & EPOLLIN.rawValue != 0 { ready.insert(.readable) }
        if mask & EPOLLOUT.rawValue != 0 { ready.insert(.writable) }
        if mask & (EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 { ready.insert(.hangup) }
        handler.handleIO(ready)
    }

    private func drainJobs() {
        var value: UInt64 = 0
        _ = try? Syscall.nonBlocking("read") { Glibc.read(handle.wakeFD, &value, 8) }
        for job in handle.takeJobs() { job(self) }
    }

    private func runDeferred() {
        // Deferred work may defer more; bound the passes so one busy object cannot starve I/O.
        var passes = 0
        while !deferred.isEmpty && passes < 8 {
            swap(&deferred, &batch)
            runBatch()
            passes += 1
        }
    }

    /// Runs and empties `batch`, keeping its buffer for the next one. Each closure is moved
    /// out of the array to be run, a closure that does nothing left in its place, so that
    /// neither the array nor the closure is copied, and what a closure holds is let go as soon
    /// as it has run. Work queued while the batch runs goes to the other array
    /// (``runDeferred()``, ``run()``), so nothing else touches `batch` meanwhile.
    private func runBatch() {
        batch.withUnsafeMutableBufferPointer { works in
            guard let first = works.baseAddress else { return }
            for index in works.indices {
                let work = (first + index).move()
                (first + index).initialize(to: LoopWork(body: {}))
                work.body()
            }
        }
        batch.removeAll(keepingCapacity: true)
    }
}
