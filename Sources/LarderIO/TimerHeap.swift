/// Deadlines for one event loop: a binary min-heap of (deadline, id) with the callbacks in a
/// table, so cancelling is a table removal and a cancelled entry is skipped when it surfaces.
struct TimerHeap {
    private struct Entry {
        var deadline: UInt64
        var id: UInt64
    }

    private var heap: [Entry] = []
    private var callbacks: [UInt64: LoopWork] = [:]
    private var nextID: UInt64 = 1

    var isEmpty: Bool { callbacks.isEmpty }

    mutating func schedule(at deadline: UInt64, _ body: @escaping () -> Void) -> UInt64 {
        let id = nextID
        nextID += 1
        callbacks[id] = LoopWork(body: body)
        heap.append(Entry(deadline: deadline, id: id))
        siftUp(heap.count - 1)
        return id
    }

    mutating func cancel(_ id: UInt64) {
        callbacks.removeValue(forKey: id)
        // Keep the heap from filling with dead entries when timers are rescheduled often.
        if heap.count > 64 && heap.count > callbacks.count * 4 {
            heap.removeAll { callbacks[$0.id] == nil }
            heap.sort { $0.deadline < $1.deadline }
        }
    }

    /// The earliest live deadline.
    mutating func nextDeadline() -> UInt64? {
        while let top = heap.first {
            if callbacks[top.id] != nil { return top.deadline }
            popTop()
        }
        return nil
    }

    /// Removes and returns the callbacks due at `now`.
    mutating func popDue(now: UInt64) -> [LoopWork] {
        var due: [LoopWork] = []
        while let top = heap.first, top.deadline <= now {
            popTop()
            if let body = callbacks.removeValue(forKey: top.id) { due.append(body) }
        }
        return due
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
