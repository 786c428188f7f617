import Dispatch
import LarderIO
import Synchronization
import Testing

/// The order in which a real loop runs deferred and before-wait work.
@Suite(.timeLimit(.minutes(1))) struct EventLoopTests {
    /// Deferred work runs in the order queued; work it defers runs in the same iteration, before
    /// the before-wait work; every round sees one `now`. Several rounds on one loop, so the
    /// queues' buffers are reused.
    @Test func deferredWorkRunsInOrderThenWhatItDefersThenBeforeWaitWork() throws {
        let handle = try EventLoop.start(name: "deferred-test")
        defer { handle.execute { $0.stop() } }
        for round in 0..<3 {
            let log = Log()
            handle.execute { loop in
                let start = loop.now
                let note: (String) -> Void = { name in log.append(loop.now == start ? name : "\(name) (later)") }
                loop.enqueueDeferred {
                    note("a")
                    loop.enqueueDeferred { note("c") }
                }
                loop.enqueueDeferred { note("b") }
                loop.enqueueBeforeWait {
                    note("x")
                    log.done.signal()
                }
            }
            #expect(log.done.wait(timeout: .now() + 5) == .success, "round \(round)")
            #expect(log.entries == ["a", "b", "c", "x"], "round \(round)")
        }
    }

    /// Work that keeps deferring more cannot hold the loop: after eight passes the before-wait
    /// work runs and the loop looks at its sockets again, then the rest follows.
    @Test func deferredWorkThatDefersAgainYieldsAfterEightPasses() throws {
        let handle = try EventLoop.start(name: "deferred-bound-test")
        defer { handle.execute { $0.stop() } }
        let log = Log()
        handle.execute { loop in
            func step(_ index: Int) {
                log.append("\(index)")
                if index < 11 { loop.enqueueDeferred { step(index + 1) } } else { log.done.signal() }
            }
            loop.enqueueDeferred { step(0) }
            loop.enqueueBeforeWait { log.append("x") }
        }
        #expect(log.done.wait(timeout: .now() + 5) == .success)
        let firstPasses: [String] = (0..<8).map { String($0) }
        let nextIteration: [String] = (8..<12).map { String($0) }
        #expect(log.entries == firstPasses + ["x"] + nextIteration)
    }

    /// A closure queued through a ``LoopWeak`` neither keeps its object alive nor gives it a
    /// weak reference; run after the object's `deinit`, it finds nil.
    @Test func aLoopWeakReferenceReadsNilOnceItsObjectIsGone() throws {
        let handle = try EventLoop.start(name: "loop-weak-test")
        defer { handle.execute { $0.stop() } }
        let log = Log()
        handle.execute { loop in
            var owner: Owner? = Owner(log: log)
            owner!.queueTimer(on: loop) { found in
                log.append(found ? "found" : "gone")
                log.done.signal()
            }
            // The runtime counts one weak reference for an object that has none.
            log.append("weak references \(_getWeakRetainCount(owner!))")
            owner = nil
        }
        #expect(log.done.wait(timeout: .now() + 5) == .success)
        #expect(log.entries == ["weak references 1", "deinit", "gone"])
    }

    /// The loop lets go of a closure, and of what it captured, once: deferred and before-wait
    /// work when it has run, a timer's when it fired or was cancelled. Several rounds on one loop, so the queues' buffers are reused.
    @Test func workAndWhatItCapturesAreLetGoOnceRunCancelledOrFired() throws {
        let handle = try EventLoop.start(name: "work-lifetime-test")
        defer { handle.execute { $0.stop() } }
        for round in 0..<3 {
            let log = Log()
            handle.execute { loop in
                var deferred: Captured? = Captured("deferred", log: log)
                loop.enqueueDeferred { [deferred] in log.append("run \(deferred!.name)") }
                var cancelled: Captured? = Captured("cancelled", log: log)
                let token = loop.schedule(afterNanos: 60_000_000_000) { [cancelled] in log.append("run \(cancelled!.name)") }
                var fired: Captured? = Captured("fired", log: log)
                _ = loop.schedule(afterNanos: 1_000_000) { [fired] in
                    log.append("run \(fired!.name)")
                    loop.enqueueDeferred {
                        log.append("after fired")
                        log.done.signal()
                    }
                }
                var beforeWait: Captured? = Captured("before-wait", log: log)
                loop.enqueueBeforeWait { [beforeWait] in log.append("run \(beforeWait!.name)") }
                deferred = nil
                cancelled = nil
                fired = nil
                beforeWait = nil
                log.append("queued")
                loop.cancel(token)
            }
            #expect(log.done.wait(timeout: .now() + 5) == .success, "round \(round)")
            #expect(
                log.entries == [
                    "queued", "freed cancelled", "run deferred", "freed deferred", "run before-wait",
                    "freed before-wait", "run fired", "freed fired", "after fired",
                ], "round \(round)")
        }
    }
}

/// An object whose `deinit` is logged. Loop-confined.
private final class Captured {
    let name: String
    let log: Log
    init(_ name: String, log: Log) {
        self.name = name
        self.log = log
    }
    deinit { log.append("freed \(name)") }
}

/// Queues a timer that reaches it through a ``LoopWeak``. Loop-confined.
private final class Owner {
    let log: Log
    private lazy var weakSelf = LoopWeak(self)
    init(log: Log) { self.log = log }
    deinit {
        weakSelf.clear()
        log.append("deinit")
    }
    func queueTimer(on loop: EventLoop, _ report: @escaping (Bool) -> Void) {
        _ = loop.schedule(afterNanos: 1_000_000) { [weakSelf] in report(weakSelf.object != nil) }
    }
}

/// Entries appended on the loop thread, read by the test's.
private final class Log: Sendable {
    private let lines = Locked<[String]>([])
    let done = DispatchSemaphore(value: 0)
    var entries: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}
