/// Values kept in numbered slots, a freed slot taken again by the next insert: a value is found
/// by its slot number, an array index, where a table keyed by an id hashes the id on every
/// lookup. For loop-confined tables touched several times a request (timers, transfers in
/// flight). Whoever keeps a slot number past the value's removal must check what the slot
/// holds now (an id, an identity) before using it.
///
/// `@inlinable` throughout: specialized in the module that uses it, where a generic call across
/// modules looks its type's metadata up at run time on every call.
public struct Slots<Element> {
    @usableFromInline var storage: [Element?] = []
    @usableFromInline var free: [Int] = []
    /// Values held.
    @inlinable public var count: Int { storage.count - free.count }

    @inlinable public init() {}

    /// Stores `value` and returns its slot.
    /// `value` is taken, not copied: a caller passes on what it made.
    @inlinable public mutating func insert(_ value: consuming Element) -> Int {
        if let slot = free.popLast() {
            storage[slot] = value
            return slot
        }
        storage.append(value)
        return storage.count - 1
    }

    /// The value in `slot`, or nil when the slot is free or was never handed out.
    @inlinable public subscript(slot: Int) -> Element? {
        slot >= 0 && slot < storage.count ? storage[slot] : nil
    }

    /// Frees `slot` and returns what it held (nil, changing nothing, when it was free).
    @inlinable @discardableResult
    public mutating func remove(at slot: Int) -> Element? {
        guard slot >= 0, slot < storage.count else { return nil }
        // Moved out of its slot, which is left nil: no copy of the value to return and no
        // release of the one left behind.
        guard let value = storage[slot].take() else { return nil }
        free.append(slot)
        return value
    }

    /// Every value held, in slot order.
    @inlinable public var values: [Element] { storage.compactMap { $0 } }
}
