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
    private let lines = Mutex<[String]>([])
    let done = DispatchSemaphore(value: 0)
    var entries: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}
