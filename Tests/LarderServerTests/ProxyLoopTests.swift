import Dispatch
import Foundation
import Glibc
import LarderConfig
import LarderIO
import Logging
import Synchronization
import Testing

@testable import LarderServer

/// A loop's own timers (sweep, heartbeat, supervisor) reach it through ``LoopWeak``: no weak
/// reference, which would slow every retain of the loop on the request path, and no work once
/// the loop object is gone.
@Suite(.timeLimit(.minutes(1))) struct ProxyLoopTests {
    @Test func theLoopsTimersTakeNoWeakReferenceAndStopOnceItIsGone() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-proxyloop-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = Config()
        config.disk.path = directory
        let runtime = RuntimeConfig(config: config)
        let shared = SharedState(runtime: runtime, logger: Logger(label: "proxy-loop-test"))
        shared.process.heartbeats.withLock { $0 = [0] }

        let handle = try EventLoop.start(name: "proxy-loop-weak-test")
        defer { handle.execute { $0.stop() } }
        let weakReferences = Locked(0)
        let stampedWhileAlive = Locked(false)
        let released = DispatchSemaphore(value: 0)
        handle.execute { loop in
            // Held only here and by the timer below, which drops it: the deinit runs on its loop.
            var proxy: ProxyLoop? = ProxyLoop(loop: loop, shared: shared, runtime: runtime)
            proxy!.startHeartbeat(every: 1_000_000, slot: 0)
            proxy!.startSupervisor(watchdog: nil) { "test" }
            // The runtime counts one weak reference for an object that has none.
            weakReferences.withLock { $0 = Int(_getWeakRetainCount(proxy!)) }
            loop.schedule(afterNanos: 30_000_000) {
                stampedWhileAlive.withLock { $0 = shared.process.heartbeats.withLock { $0[0] } != 0 }
                shared.process.heartbeats.withLock { $0[0] = 0 }
                proxy = nil
                released.signal()
            }
        }
        #expect(released.wait(timeout: .now() + 5) == .success)
        #expect(weakReferences.withLock { $0 } == 1)
        #expect(stampedWhileAlive.withLock { $0 })
        // The heartbeat timer still queued finds nil: no stamp after the object is gone.
        usleep(20_000)
        #expect(shared.process.heartbeats.withLock { $0[0] } == 0)
    }

    /// A reload's configuration gets its own destination policy even when it is allocated where
    /// the one before it was freed: the loop knows the configuration by the object it holds, not
    /// by an address another object can take.
    @Test func eachConfigurationGetsItsOwnPolicyEvenAtAFreedOnesAddress() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-proxyloop-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = Config()
        config.disk.path = directory
        let base = config
        let first = RuntimeConfig(config: base)
        let shared = SharedState(runtime: first, logger: Logger(label: "proxy-loop-test"))
        let handle = try EventLoop.start(name: "proxy-loop-policy-test")
        defer { handle.execute { $0.stop() } }
        let wrong = Locked<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        handle.execute { loop in
            let proxy = ProxyLoop(loop: loop, shared: shared, runtime: first)
            // Reloads in a row, each configuration dropped before the next is made (as a
            // reload replaces it): allocators hand the freed address to the next one.
            for round in 0..<40 {
                var next = base
                next.proxy.allowLocalDestinations = round % 2 == 0
                let runtime = RuntimeConfig(config: next, generation: round + 1)
                if proxy.destinationPolicy(runtime).allowLocal != (round % 2 == 0) {
                    wrong.withLock { $0.append(round) }
                }
            }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(wrong.withLock { $0 } == [])
    }
}
