import LarderIO

/// Complete responses one event loop stores on disk once its epoll batch has queued and
/// flushed its responses, so that the clients' bytes never wait for the file system. Small
/// entries are written on the loop while the disk is fast (``DiskCache/storeInline(_:budgetNanos:)``),
/// for at most ``inlineBudget`` per batch: on a busy core, handing them to the writer thread
/// costs more in wake-ups and context switches than the file calls themselves. The rest go to
/// the disk writer, woken once for the whole batch.
///
/// State: loop-confined to `loop`, one per loop.
public final class DiskStoreQueue {
    private let cache: TieredCache
    private let loop: EventLoop
    private var pending: [TieredCache.PendingStore] = []
    /// Entries are written on the loop thread until this much time (1 ms) went into it in one
    /// epoll batch.
    static let inlineBudget: UInt64 = 1_000_000

    public init(cache: TieredCache, loop: EventLoop) {
        self.cache = cache
        self.loop = loop
    }

    /// Queues `stored` (its body's bytes, its disk head) for the disk tier, if there is one.
    /// The head is moved into the queue, not copied: it holds the stored fields and the Vary
    /// values. Not indexed when a purge or ban since `stamp` covers it.
    func add(_ stored: StoredResponse, body: [UInt8], head: consuming DiskEntryFormat.Head, stamp: InvalidationLog.Stamp?) {
        guard cache.disk != nil else { return }
        pending.append(.init(response: stored, body: body, head: head, stamp: stamp))
        guard pending.count == 1 else { return }
        loop.enqueueBeforeWait { [self] in
            // The batch is taken out whole, and its emptied array comes back for the next one:
            // emptying a queue still shared with the batch would allocate a new array each time.
            var stores: [TieredCache.PendingStore] = []
            swap(&stores, &pending)
            cache.storeOnDisk(stores, budgetNanos: Self.inlineBudget)
            // One by one: `removeAll(keepingCapacity:)` goes through the generic replaceSubrange,
            // which costs more than a batch of a few.
            while stores.popLast() != nil {}
            if pending.isEmpty { pending = stores }
        }
    }
}
