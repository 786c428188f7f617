import Glibc
import LarderIO
import Synchronization

/// Walks the disk tier in the background and drops what fails its checksums: the entries
/// over ``DiskCache/verifyEveryReadMax``, block by block and whole, at most `rate` bytes a
/// second, pass after pass, on a thread of its own. Every hit checks what it reads before it
/// is sent (smaller entries whole, larger ones block by block); the scrub finds damage in
/// entries nobody reads.
///
/// State: `rate`, `stopping` and the counters are atomics any thread may use; the thread
/// handle is behind its mutex. The scrub thread holds the cache only weakly, and strongly
/// only while it checks one entry, so the cache can go away between two checks.
public final class DiskScrubber: Sendable {
    /// Bytes per second; 0 pauses scrubbing.
    public let rate = Atomic<Int64>(0)
    private let stopping = Atomic<Bool>(false)
    private let thread = Locked<OSThread?>(nil)
    /// Entries and bytes checked, and entries dropped, since start.
    public let checkedEntries = AtomicCounter()
    public let checkedBytes = AtomicCounter()
    public let droppedEntries = AtomicCounter()
    /// Between passes, and while paused, the thread looks again after this long.
    static let idleNap: Duration = .seconds(10)

    init() {}

    /// Starts the scrub thread for `cache` (once).
    func start(_ cache: DiskCache) {
        thread.withLock { thread in
            guard thread == nil else { return }
            thread = OSThread.spawn(name: "larder-scrub") { [self, weak cache] in run(cache: { cache }) }
        }
    }

    /// Asks the thread to end at its next look, without waiting (from the cache's deinit,
    /// which may run on the scrub thread itself).
    func requestStop() {
        stopping.store(true, ordering: .releasing)
    }

    /// Stops the thread and waits for it (at most one nap slice).
    func stop() {
        requestStop()
        let running = thread.withLock { thread in
            defer { thread = nil }
            return thread
        }
        running?.join()
    }

    private func run(cache: () -> DiskCache?) {
        while !stopping.load(ordering: .acquiring) {
            guard rate.load(ordering: .relaxed) > 0 else {
                // Paused (scrub_rate = "0B"); a reload that sets a rate is seen within a slice.
                nap(DiskScrubber.idleNap) { rate.load(ordering: .relaxed) > 0 }
                continue
            }
            // The first pass starts as soon as the start-up scan is done.
            guard cache()?.isIndexComplete == true else {
                nap(.milliseconds(100))
                continue
            }
            scrubPass(cache: cache)
            nap(DiskScrubber.idleNap)
        }
    }

    /// One walk over the index, in batches of slots.
    private func scrubPass(cache: () -> DiskCache?) {
        var start: Int? = 0
        while let from = start, !stopping.load(ordering: .acquiring) {
            guard let (batch, next) = cache()?.largeEntries(start: from, count: 4096) else { return }
            start = next
            for entry in batch {
                if stopping.load(ordering: .acquiring) { return }
                guard let sound = cache()?.scrub(entry) else { return }
                if sound {
                    checkedEntries.add(1)
                } else {
                    droppedEntries.add(1)
                }
                checkedBytes.add(Int(entry.size))
                let bytesPerSecond = rate.load(ordering: .relaxed)
                guard bytesPerSecond > 0 else { return }
                nap(DiskScrubber.pause(afterChecking: entry.size, rate: bytesPerSecond))
            }
        }
    }

    /// How long to rest after checking `bytes` so that the average stays at `rate` bytes a second.
    static func pause(afterChecking bytes: Int64, rate: Int64) -> Duration {
        guard rate > 0 else { return idleNap }
        return .nanoseconds(Int64((Double(bytes) / Double(rate) * 1e9).rounded(.up)))
    }

    /// Sleeps for `duration`, in slices of at most 100 ms so that a stop (or `wake`) is seen quickly.
    private func nap(_ duration: Duration, wake: () -> Bool = { false }) {
        var left = duration
        let slice: Duration = .milliseconds(100)
        while left > .zero, !stopping.load(ordering: .acquiring), !wake() {
            let step = min(left, slice)
            let nanos = step.totalNanoseconds
            var request = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
            _ = nanosleep(&request, nil)
            left -= step
        }
    }
}
