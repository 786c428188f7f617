/// The two links of an element in a ``RecencyList``: indices of its newer and older
/// neighbours, -1 at either end (and while unlinked).
struct RecencyLinks {
    var previous = -1
    var next = -1
}

/// An element that carries its own ``RecencyLinks`` (the list is intrusive: no node, no
/// allocation per use).
protocol RecencyLinked {
    var recency: RecencyLinks { get set }
}

/// Slots addressed by index whose elements carry their links.
protocol RecencyStorage {
    subscript(recency index: Int) -> RecencyLinks { get set }
}

/// Least-recently-used order over slots that live in their owner's storage (the memory tier's
/// slots, the disk index's entries), by index: marking a slot used, adding one at either end,
/// unlinking one and finding the oldest cost a few stores into the slots themselves, with no
/// allocation, so a hit that marks its entry used stays as cheap as before. Not thread-safe:
/// its owner holds it with its slots, in the same lock.
struct RecencyList {
    /// The most and least recently used slots, -1 when empty.
    private(set) var newest = -1
    private(set) var oldest = -1

    /// The least recently used slot, if any.
    var leastRecent: Int? { oldest >= 0 ? oldest : nil }

    /// Marks `index` the most recently used.
    mutating func touch(_ index: Int, in slots: inout some RecencyStorage) {
        guard newest != index else { return }
        unlink(index, in: &slots)
        linkNewest(index, in: &slots)
    }

    /// Links `index` (unlinked) as the most recently used.
    mutating func linkNewest(_ index: Int, in slots: inout some RecencyStorage) {
        slots[recency: index] = RecencyLinks(previous: -1, next: newest)
        if newest >= 0 { slots[recency: newest].previous = index }
        newest = index
        if oldest < 0 { oldest = index }
    }

    /// Links `index` (unlinked) as the least recently used.
    mutating func linkOldest(_ index: Int, in slots: inout some RecencyStorage) {
        slots[recency: index] = RecencyLinks(previous: oldest, next: -1)
        if oldest >= 0 { slots[recency: oldest].next = index }
        oldest = index
        if newest < 0 { newest = index }
    }

    /// Takes `index` out of the order (it stays in its owner's storage).
    mutating func unlink(_ index: Int, in slots: inout some RecencyStorage) {
        let links = slots[recency: index]
        if links.previous >= 0 { slots[recency: links.previous].next = links.next } else if newest == index { newest = links.next }
        if links.next >= 0 { slots[recency: links.next].previous = links.previous } else if oldest == index { oldest = links.previous }
        slots[recency: index] = RecencyLinks()
    }
}

extension Array: RecencyStorage where Element: RecencyLinked {
    subscript(recency index: Int) -> RecencyLinks {
        get { self[index].recency }
        _modify { yield &self[index].recency }
    }
}

extension PagedArray: RecencyStorage where Element: RecencyLinked {
    subscript(recency index: Int) -> RecencyLinks {
        get { self[index].recency }
        _modify { yield &self[index].recency }
    }
}

/// A slot that may be empty: only occupied slots are ever linked.
extension Optional: RecencyLinked where Wrapped: RecencyLinked {
    var recency: RecencyLinks {
        get { self!.recency }
        _modify { yield &self!.recency }
    }
}
