import LarderIO

/// The memory tier: stored responses by key, bounded by entry count, total bytes and object
/// size, evicting the least recently used.
///
/// State: everything lives in one `Locked` mutex; a lookup is a hash probe and two list-link updates
/// under it, so hits from several event loops contend only briefly. Stored responses are
/// immutable, so a reader keeps using one after the lock is released even if it gets evicted.
public final class MemoryCache: Sendable {
    /// Size limits; a smaller limit applied with ``setLimits(_:)`` evicts down to it.
    public struct Limits: Sendable, Equatable {
        public var maxBytes: Int
        public var maxEntries: Int
        public var maxObjectBytes: Int
        public init(maxBytes: Int, maxEntries: Int, maxObjectBytes: Int) {
            self.maxBytes = maxBytes
            self.maxEntries = maxEntries
            self.maxObjectBytes = maxObjectBytes
        }
    }

    /// Counters for metrics.
    public struct Statistics: Sendable, Equatable {
        public var entries = 0
        public var bytes = 0
        public var evictions = 0
    }

    private struct Slot: RecencyLinked {
        var key: CacheKey?
        var variants: [StoredResponse] = []
        var cost = 0
        var recency = RecencyLinks()
    }

    private struct State {
        var slots: [Slot] = []
        var free: [Int] = []
        var index: [CacheKey: Int] = [:]
        /// The slots of each object's slices (promoted from disk).
        var sliceSlots = SliceSlots()
        var recency = RecencyList()
        var bytes = 0
        var evictions = 0
        var limits: Limits
    }

    private let state: Locked<State>

    public init(limits: Limits) {
        var initial = State(limits: limits)
        MemoryCache.reserve(&initial)
        state = Locked(initial)
    }

    /// Sizes the index and slots for `maxEntries` (up to 2^20) at once: growing them on the
    /// way rehashed the whole index inside the lock at every doubling, a stall of tens of
    /// milliseconds for every client of the loop once the tier held 10^5 entries. The reserved
    /// memory is not touched until it is used.
    private static func reserve(_ state: inout State) {
        let capacity = min(max(state.limits.maxEntries, 0), 1 << 20)
        state.index.reserveCapacity(capacity)
        state.slots.reserveCapacity(capacity)
    }

    /// The stored variants for `key`, the most recent response first; marks the entry used.
    public func lookup(_ key: CacheKey) -> [StoredResponse]? {
        state.withLock { state in
            guard let slot = state.index[key] else { return nil }
            state.recency.touch(slot, in: &state.slots)
            return state.slots[slot].variants
        }
    }

    /// Stored variants whose URL starts with `prefix` (with `exactly`, is it), at most `limit`, in
    /// no particular order;
    /// listing does not count as use. The lock is let go every ``listSpan`` slots, so a
    /// listing of a large tier does not stall the loops; an entry stored or moved meanwhile may
    /// be missed.
    public func list(prefix: String, exactly: Bool = false, limit: Int) -> [StoredResponse] {
        var found: [StoredResponse] = []
        var start: Int? = 0
        while let from = start, found.count < limit {
            start = state.withLock { state -> Int? in
                var slot = from
                while slot < state.slots.count, slot < from + MemoryCache.listSpan, found.count < limit {
                    if let key = state.slots[slot].key, exactly ? key.url == prefix : key.url.hasPrefix(prefix) {
                        found += state.slots[slot].variants.prefix(limit - found.count)
                    }
                    slot += 1
                }
                return slot < state.slots.count ? slot : nil
            }
        }
        return found
    }

    /// Slots a listing looks at per hold of the lock.
    static let listSpan = 4096

    /// Removes every entry whose key `matches` (a ban); returns their keys. Walks the slots as
    /// ``list(prefix:limit:)`` does, letting go of the lock between spans: an entry stored
    /// meanwhile in a slot already passed stays (it was stored after the ban began).
    public func remove(matching matches: @Sendable (CacheKey) -> Bool) -> [CacheKey] {
        var removed: [CacheKey] = []
        var start: Int? = 0
        while let from = start {
            start = state.withLock { state -> Int? in
                var slot = from
                while slot < state.slots.count, slot < from + MemoryCache.listSpan {
                    if let key = state.slots[slot].key, matches(key) {
                        MemoryCache.removeSlot(&state, slot)
                        removed.append(key)
                    }
                    slot += 1
                }
                return slot < state.slots.count ? slot : nil
            }
        }
        return removed
    }

    /// Stored variants kept per key (RFC 9111 §4.1), newest first: a response that varies on a
    /// field its clients choose freely (`Vary: User-Agent`, or a hostile origin's) would
    /// otherwise let one client store a variant per request under one entry, each store and
    /// lookup of the key costing as many steps as it has variants, under the tier's lock.
    public static let maxVariants = 64

    /// Stores `response`, replacing a variant selected by the same request headers. Returns
    /// false when the object is larger than the per-object limit, when a purge or ban `log`
    /// recorded since `stamp` covers it, when `stillStored` (a promotion's: the disk tier
    /// still holds what it read) says no, both asked under the lock a removal takes, or when
    /// the variant stored is a response that arrived later (of two fills of one variant that
    /// overlap, the slow one that began first finishes last; ``StoredResponse/arrived(after:)``).
    /// `replacing` (a refresh's) is asked too, with the variant held (nil when none is).
    @discardableResult
    public func insert(
        _ response: StoredResponse, admittedBy log: InvalidationLog? = nil, since stamp: InvalidationLog.Stamp? = nil,
        stillStored: (() -> Bool)? = nil, replacing: ((StoredResponse?) -> Bool)? = nil
    ) -> Bool {
        let cost = response.memoryCost
        return state.withLock { state in
            if let log, !log.allows(response.key, since: stamp) { return false }
            if let stillStored, !stillStored() { return false }
            if let replacing {
                let slot = state.index[response.key]
                if !replacing(slot.flatMap { slot in state.slots[slot].variants.first { $0.varyValues == response.varyValues } }) {
                    return false
                }
            }
            // `memory.max_object_bytes` bounds the body as received (how the allocator rounds
            // its array is not held against it); the entry's head and bookkeeping get 4 KiB of
            // room on top.
            guard response.bodyLength <= state.limits.maxObjectBytes,
                cost - response.bodyMemoryCost + response.bodyLength <= state.limits.maxObjectBytes + 4096,
                cost <= state.limits.maxBytes
            else { return false }
            // One probe of the index: the key's slot, or one taken for it now (left empty).
            let (slot, isNew) = MemoryCache.takeSlot(&state.index[response.key, default: -1], slots: &state.slots, free: &state.free)
            if !isNew {
                var variants = state.slots[slot].variants
                if let same = variants.firstIndex(where: { $0.varyValues == response.varyValues }) {
                    if variants[same].arrived(after: response) { return false }
                    variants.remove(at: same)
                }
                // Kept in the order the responses arrived, newest first, not the order they were
                // stored: a lookup serves the first that matches (RFC 9111 §4.1: the most
                // recent), and a copy promoted from disk may be older than a variant held here.
                let position =
                    variants.firstIndex {
                        !StoredResponse.isMoreRecent($0.responseTime, than: response.responseTime, now: Clocks.wallSeconds)
                    } ?? variants.count
                guard position < MemoryCache.maxVariants else { return false }
                variants.insert(response, at: position)
                // The oldest goes past the bound: see ``maxVariants``.
                if variants.count > MemoryCache.maxVariants { variants.removeLast(variants.count - MemoryCache.maxVariants) }
                let newCost = variants.reduce(0) { $0 + $1.memoryCost }
                state.bytes += newCost - state.slots[slot].cost
                state.slots[slot].variants = variants
                state.slots[slot].cost = newCost
                state.recency.touch(slot, in: &state.slots)
            } else {
                state.slots[slot] = Slot(key: response.key, variants: [response], cost: cost)
                state.sliceSlots.add(response.key, slot: slot)
                state.recency.linkNewest(slot, in: &state.slots)
                state.bytes += cost
            }
            MemoryCache.evict(&state)
            return true
        }
    }

    /// The slot of an index entry: its own (`indexed` is one), or a free or new one, empty,
    /// which `indexed` then records (it is -1 for a key not yet indexed).
    private static func takeSlot(_ indexed: inout Int, slots: inout [Slot], free: inout [Int]) -> (slot: Int, isNew: Bool) {
        guard indexed < 0 else { return (indexed, false) }
        if let reused = free.popLast() {
            indexed = reused
        } else {
            indexed = slots.count
            slots.append(Slot())
        }
        return (indexed, true)
    }

    /// Replaces the variant `old` by `new` if `old` is still stored (a revalidation result).
    public func replace(_ old: StoredResponse, with new: StoredResponse) {
        state.withLock { state in
            guard let slot = state.index[old.key],
                let position = state.slots[slot].variants.firstIndex(where: { $0 === old })
            else { return }
            state.slots[slot].variants[position] = new
            let newCost = state.slots[slot].variants.reduce(0) { $0 + $1.memoryCost }
            state.bytes += newCost - state.slots[slot].cost
            state.slots[slot].cost = newCost
            MemoryCache.evict(&state)
        }
    }

    /// Removes one variant.
    public func remove(_ response: StoredResponse) {
        state.withLock { state in
            guard let slot = state.index[response.key],
                let position = state.slots[slot].variants.firstIndex(where: { $0 === response })
            else { return }
            MemoryCache.removeVariant(&state, slot, at: position)
        }
    }

    /// Removes the variant at `position` of `slot`, and the slot with its last variant.
    private static func removeVariant(_ state: inout State, _ slot: Int, at position: Int) {
        state.slots[slot].variants.remove(at: position)
        settle(&state, slot)
    }

    /// After variants of `slot` went: the slot goes with its last one, else its cost is
    /// counted again.
    private static func settle(_ state: inout State, _ slot: Int) {
        if state.slots[slot].variants.isEmpty { return removeSlot(&state, slot) }
        let newCost = state.slots[slot].variants.reduce(0) { $0 + $1.memoryCost }
        state.bytes += newCost - state.slots[slot].cost
        state.slots[slot].cost = newCost
    }

    /// Removes the variant of `key` that `varyValues` select unless its response arrived after
    /// `responseTime` (``StoredResponse/arrived(after:)-(Double)``): the other variants stay. A
    /// version that arrived then is stored in the disk tier now, too large for this one.
    public func remove(_ key: CacheKey, variant varyValues: [String: String], unlessArrivedAfter responseTime: Double) {
        removeVariants(of: key, unlessArrivedAfter: responseTime) { $0 == varyValues }
    }

    /// Removes the variants of `key` that a request matching `varyValues` may match too
    /// (``VaryMatcher/overlap(_:_:)``), unless their response arrived after `responseTime`: a
    /// version that arrived then is stored in the disk tier now, too large for this one, and
    /// held here they would answer first the requests it answers (RFC 9111 §4.1).
    public func remove(_ key: CacheKey, overlapping varyValues: [String: String], unlessArrivedAfter responseTime: Double) {
        removeVariants(of: key, unlessArrivedAfter: responseTime) { VaryMatcher.overlap($0, varyValues) }
    }

    /// Removes the variants of `key` whose Vary values are `selected`, unless their response
    /// arrived after `responseTime`.
    private func removeVariants(
        of key: CacheKey, unlessArrivedAfter responseTime: Double, selected: ([String: String]) -> Bool
    ) {
        state.withLock { state in
            guard let slot = state.index[key] else { return }
            let count = state.slots[slot].variants.count
            state.slots[slot].variants.removeAll { selected($0.varyValues) && !$0.arrived(after: responseTime) }
            guard state.slots[slot].variants.count < count else { return }
            MemoryCache.settle(&state, slot)
        }
    }

    /// Removes every variant of `key`. Returns whether anything was stored.
    @discardableResult
    public func remove(_ key: CacheKey) -> Bool {
        state.withLock { state in
            guard let slot = state.index[key] else { return false }
            MemoryCache.removeSlot(&state, slot)
            return true
        }
    }

    /// Removes every slice held for the object `key` (``CacheKey/slice(_:)``) but `keeping`.
    /// Returns whether any was.
    @discardableResult
    public func removeSlices(of key: CacheKey, keeping: CacheKey? = nil) -> Bool {
        state.withLock { state in
            var removed = false
            for slot in state.sliceSlots.take(ofObject: key.url) {
                guard let held = state.slots[slot].key else { continue }
                if held == keeping {
                    state.sliceSlots.add(held, slot: slot)
                } else {
                    MemoryCache.removeSlot(&state, slot)
                    removed = true
                }
            }
            return removed
        }
    }

    /// Drops everything.
    public func removeAll() {
        state.withLock { state in
            let limits = state.limits
            let evictions = state.evictions
            state = State(limits: limits)
            state.evictions = evictions
        }
    }

    /// Applies new limits, evicting down to them.
    public func setLimits(_ limits: Limits) {
        state.withLock { state in
            state.limits = limits
            MemoryCache.reserve(&state)
            MemoryCache.evict(&state)
        }
    }

    public var limits: Limits { state.withLock { $0.limits } }

    public var statistics: Statistics {
        state.withLock { Statistics(entries: $0.index.count, bytes: $0.bytes, evictions: $0.evictions) }
    }

    /// Whether storing more means evicting: at the entry limit, or within a tenth of the byte
    /// limit (the disk tier's idea of full, ``DiskCache/isFull``; this tier evicts to the limit).
    public var isFull: Bool {
        state.withLock { state in
            state.index.count >= state.limits.maxEntries || state.bytes >= state.limits.maxBytes - state.limits.maxBytes / 10
        }
    }

    // MARK: List maintenance (callers hold the lock)

    private static func evict(_ state: inout State) {
        while state.bytes > state.limits.maxBytes || state.index.count > state.limits.maxEntries,
            let oldest = state.recency.leastRecent
        {
            removeSlot(&state, oldest)
            state.evictions += 1
        }
    }

    private static func removeSlot(_ state: inout State, _ slot: Int) {
        state.recency.unlink(slot, in: &state.slots)
        // Moved out, not copied: the slot is emptied below anyway, and an evicted key's
        // storage is cold (a copy's retain and release would each reach for it).
        if let key = state.slots[slot].key.take() {
            state.index.removeValue(forKey: key)
            if !state.sliceSlots.isEmpty { state.sliceSlots.remove(key, slot: slot) }
        }
        state.bytes -= state.slots[slot].cost
        state.slots[slot] = Slot()
        state.free.append(slot)
    }
}
