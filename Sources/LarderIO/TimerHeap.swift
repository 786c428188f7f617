/// Deadlines for one event loop: a binary min-heap of (deadline, slot, id), with the callbacks
/// in a slab of reusable slots. A timer's token names its slot and its id (unique for the
/// loop's life), so scheduling, cancelling and firing index an array and compare an id: no
/// hashing, where a table keyed by id hashed on every one of them, several times a miss. A
/// cancelled timer's heap entry stays until it surfaces (or a compaction), and is skipped
/// then because its slot holds another id or none.
struct TimerHeap {
    /// What ``schedule(at:_:)`` returns and ``cancel(_:)`` takes.
    struct Token: Hashable, Sendable {
        let slot: UInt32
        let id: UInt64
    }

    private struct Entry {
        var deadline: UInt64
        var slot: UInt32
        var id: UInt64
    }

    private var heap: [Entry] = []
    private var slots = Slots<LoopWork>()
    /// The live timer's id in each slot (0: free), apart from the callbacks: checking a heap
    /// entry then copies no closure.
    private var ids: [UInt64] = []
    private var nextID: UInt64 = 1
    /// Timers scheduled and neither cancelled nor fired.
    var count: Int { slots.count }

    var isEmpty: Bool { count == 0 }
    /// Heap entries, live and cancelled ones not yet dropped.
    var entryCount: Int { heap.count }

    mutating func schedule(at deadline: UInt64, _ body: consuming @escaping () -> Void) -> Token {
        let id = nextID
        nextID += 1
        let slot = slots.insert(LoopWork(body: body))
        if slot == ids.count { ids.append(id) } else { ids[slot] = id }
        heap.append(Entry(deadline: deadline, slot: UInt32(slot), id: id))
        siftUp(heap.count - 1)
        return Token(slot: UInt32(slot), id: id)
    }

    /// Cancels a timer that has not fired; a token of a timer that fired or was cancelled
    /// (whose slot may hold another timer by now) does nothing.
    mutating func cancel(_ token: Token) {
        guard isLive(slot: token.slot, id: token.id) else { return }
        release(token.slot)
        // Keep the heap from filling with dead entries when timers are rescheduled often.
        if heap.count > 64 && heap.count > count * 4 {
            let ids = ids
            heap.removeAll { ids[Int($0.slot)] != $0.id }
            heap.sort { $0.deadline < $1.deadline }
        }
    }

    /// The earliest live deadline.
    mutating func nextDeadline() -> UInt64? {
        while let top = heap.first {
            if isLive(slot: top.slot, id: top.id) { return top.deadline }
            popTop()
        }
        return nil
    }

    /// Removes and returns the callbacks due at `now`, earliest first.
    mutating func popDue(now: UInt64) -> [LoopWork] {
        var due: [LoopWork] = []
        while let top = heap.first, top.deadline <= now {
            popTop()
            guard isLive(slot: top.slot, id: top.id), let work = release(top.slot) else { continue }
            due.append(work)
        }
        return due
    }

    /// Frees a live timer's slot and returns its callback.
    @discardableResult
    private mutating func release(_ slot: UInt32) -> LoopWork? {
        ids[Int(slot)] = 0
        return slots.remove(at: Int(slot))
    }

    @inline(__always)
    private func isLive(slot: UInt32, id: UInt64) -> Bool {
        Int(slot) < ids.count && ids[Int(slot)] == id
    }

    private mutating func popTop() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            if heap[parent].deadline <= heap[child].deadline { break }
            heap.swapAt(parent, child)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
