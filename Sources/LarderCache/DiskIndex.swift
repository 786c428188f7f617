import LarderIO

/// The disk tier's own record of what is stored: entries by name (the hash of key and Vary
/// values; a key without Vary values is found by its name, the keys with variants also by key),
/// in least-recently-used order, and how full each segment file is (live bytes against its
/// size: the dead rest is reclaimed by compaction, DISK-FORMAT.md). Access times on the
/// filesystem are not used (relatime/noatime mounts make them unreliable). Not thread-safe:
/// ``DiskCache`` keeps it in a mutex.
struct DiskIndex {
    struct Entry: RecencyLinked {
        var key: CacheKey
        var vary: [String: String]
        var name: EntryName
        var size: Int64
        /// When its response arrived (wall-clock seconds, its head's `responseTime`): of two
        /// fills of one variant that overlap, the response that came later stays indexed.
        var responseTime: Double
        /// When its body arrived (``DiskEntryFormat/Head/bodyArrival``): what a refresh
        /// asks the index for when the memory tier holds no copy (``DiskCache/holdsBody(of:)``).
        var bodyTime: Double
        /// The segment file holding the entry as a record, 0 for an entry in its own file
        /// (`v1/ab/cd/<name>`).
        var segment: UInt32 = 0
        /// Where the record starts in its segment.
        var offset: Int64 = 0
        var recency = RecencyLinks()
        /// Lookups that found the entry since this process started (not kept across restarts).
        var hits = 0
        /// Set by ``DiskIndex/insert(_:)``, different for every entry it indexes in this process:
        /// whether what a lookup read is still what the index holds under the name (a response
        /// read from disk carries it, ``StoredResponse/diskSerial``).
        var serial: UInt64 = 0

        /// Whether it holds the body that arrived at `bodyTime`, to the microsecond an entry
        /// keeps: the response that stored it, or a refresh of it.
        func holdsBody(arrivedAt bodyTime: Double) -> Bool {
            StoredResponse.sameArrival(self.bodyTime, bodyTime)
        }

        /// Whether its response arrived after `responseTime` (``StoredResponse/arrival(_:isAfter:now:)``).
        func arrived(after responseTime: Double, now: () -> Double) -> Bool {
            StoredResponse.arrival(self.responseTime, isAfter: responseTime, now: now)
        }
    }

    /// Slice entries ever inserted, shared with ``DiskCache`` and never decremented: while it is
    /// 0 no slice can be indexed, so a plain miss skips the slice probe without the lock.
    let slicesInserted: AtomicCounter

    init(slicesInserted: AtomicCounter = AtomicCounter()) {
        self.slicesInserted = slicesInserted
    }

    // Paged and sharded rather than plain Array and Dictionary: those grow all at once, which
    // inside the index's lock stalled every loop for tens of milliseconds at 10^5 entries.
    private var slots = PagedArray<Entry?>()
    private var free: [Int] = []
    private var byName = ShardedDictionary<EntryName, Int>()
    /// The keys that have an entry with Vary values, each with the slots of all its entries (one
    /// without Vary values too, if it has one). A key with one entry and no Vary values, the
    /// usual case, is found by its name alone: a table of every key cost ~70 bytes an entry.
    private var varied = ShardedDictionary<CacheKey, Variants>()
    private var recency = RecencyList()
    /// The slots of each object's slices.
    private var sliceSlots = SliceSlots()
    /// The serial of the entry indexed last (``Entry/serial``).
    private var lastSerial: UInt64 = 0
    /// Bytes of the entries (files and live records).
    private(set) var totalBytes: Int64 = 0

    /// One segment file: its size, and how much of it live records hold.
    struct SegmentUsage {
        var size: Int64 = 0
        var live: Int64 = 0
        /// Full (or written by an earlier run): nothing is appended to it any more.
        var sealed = false
    }

    private(set) var segments: [UInt32: SegmentUsage] = [:]
    private var segmentBytes: Int64 = 0
    private var segmentLiveBytes: Int64 = 0

    /// Bytes the tier takes on disk: entry files, plus whole segment files (dead records
    /// included, until their segment is compacted or deleted).
    var physicalBytes: Int64 { totalBytes - segmentLiveBytes + segmentBytes }
    /// While the start-up scan runs: names removed since it started, which it must not add
    /// back from a head it read before the removal.
    private var tombstones: Set<EntryName>?
    /// Keys the start-up scan gave more than ``maxVariants`` entries (a disk written by hand,
    /// or by a build without the cap), trimmed when it ends.
    private var overCap: Set<CacheKey> = []

    mutating func beginScan() { tombstones = [] }

    /// Ends the scan; returns the entries it takes out for their keys to keep ``maxVariants``
    /// (the least recent go, as a store's cap removes them), for the caller to dispose of.
    mutating func endScan() -> [Entry] {
        tombstones = nil
        var removed: [Entry] = []
        for key in overCap {
            while let variants = varied[key], variants.count > DiskIndex.maxVariants,
                let oldest = earliestArrival(of: variants, besides: -1), let entry = slots[oldest]
            {
                removed.append(entry)
                removeSlot(oldest)
            }
        }
        overCap = []
        return removed
    }

    var count: Int { byName.count }

    /// Counts a lookup that found the entry `name`.
    mutating func countHit(named name: EntryName) {
        guard let index = byName[name] else { return }
        slots[index]?.hits += 1
    }

    /// The entries stored for `key`, marked as used.
    mutating func lookup(_ key: CacheKey) -> [Entry] {
        let indices = slots(of: key)
        for index in indices { recency.touch(index, in: &slots) }
        return indices.compactMap { slots[$0] }
    }

    /// The slots of `key`'s entries.
    private func slots(of key: CacheKey) -> [Int] {
        // Not looked up while no key has entries with Vary values (the usual case), as in insert:
        // a probe hashes the key twice (its shard, then the shard's table).
        if varied.count > 0, let variants = varied[key] { return variants.indices }
        guard let index = byName[DiskCache.entryName(key: key, vary: [:])], slots[index]?.key == key else { return [] }
        return [index]
    }

    /// Whether `key` has an entry of another variant than `vary`'s, more recent than a response
    /// that arrived at `responseTime` (``StoredResponse/isMoreRecent(_:than:now:)``), that a
    /// request matching `vary` may match too (``VaryMatcher/overlap(_:_:)``). Only keys with
    /// Vary values have more than one. (`vary`'s own entry is not compared: its time, kept to the
    /// microsecond in the entry's head, may read later than the response read back from it.)
    func hasEntry(of key: CacheKey, overlapping vary: [String: String], moreRecentThan responseTime: Double) -> Bool {
        guard varied.count > 0, let variants = varied[key] else { return false }
        return variants.indices.contains { index in
            guard let entry = slots[index], entry.vary != vary else { return false }
            return StoredResponse.isMoreRecent(entry.responseTime, than: responseTime, now: Clocks.wallSeconds)
                && VaryMatcher.overlap(entry.vary, vary)
        }
    }

    /// The slot among `variants` other than `excluded` whose response is the least recent (of
    /// equal times, the first stored): the one the cap on variants removes. By arrival, not by
    /// the order of the list, which the start-up scan builds newest first.
    private func earliestArrival(of variants: Variants, besides excluded: Int) -> Int? {
        var earliest: Int?
        var earliestTime = 0.0
        for index in variants.indices where index != excluded {
            guard let time = slots[index]?.responseTime else { continue }
            if earliest == nil || StoredResponse.isMoreRecent(earliestTime, than: time, now: Clocks.wallSeconds) {
                earliest = index
                earliestTime = time
            }
        }
        return earliest
    }

    /// Entries whose URL starts with `prefix` (with `exactly`, is it) among the slots from `start` on, at most `limit`
    /// and at most `span` slots looked at; the slot to go on from, nil at the end. Slots, not the
    /// use order, so a walk can let go of the lock between calls and lose its place to nothing.
    func entries(prefix: String, exactly: Bool = false, from start: Int, span: Int, limit: Int) -> (found: [Entry], next: Int?) {
        var found: [Entry] = []
        var index = start
        while index < slots.count, index < start + span, found.count < limit {
            if let entry = slots[index], exactly ? entry.key.url == prefix : entry.key.url.hasPrefix(prefix) { found.append(entry) }
            index += 1
        }
        return (found, index < slots.count ? index : nil)
    }

    /// Removes the entries whose key `matches` among the slots from `start` on, at most `span`
    /// slots looked at; returns them and the slot to go on from (nil at the end).
    mutating func remove(matching matches: (CacheKey) -> Bool, from start: Int, span: Int) -> (removed: [Entry], next: Int?) {
        var removed: [Entry] = []
        var index = start
        while index < slots.count, index < start + span {
            if let entry = slots[index], matches(entry.key) {
                tombstones?.insert(entry.name)
                removeSlot(index)
                removed.append(entry)
            }
            index += 1
        }
        return (removed, index < slots.count ? index : nil)
    }

    func entry(named name: EntryName) -> Entry? {
        byName[name].flatMap { slots[$0] }
    }

    /// Whether `name` holds a response that arrived after `responseTime`
    /// (``Entry/arrived(after:now:)``): a file renamed over the name would replace it.
    func holdsLater(named name: EntryName, than responseTime: Double) -> Bool {
        entry(named: name)?.arrived(after: responseTime, now: Clocks.wallSeconds) ?? false
    }

    /// Whether `refreshed`, a refresh of the body that arrived at its ``Entry/bodyTime``, may
    /// take its name's place: the name holds that body still (not another fill's, stored while
    /// the refresh was being written; not nothing, after an invalidation), and nothing that
    /// arrived later.
    func accepts(refresh refreshed: Entry) -> Bool {
        guard let current = entry(named: refreshed.name) else { return false }
        return current.holdsBody(arrivedAt: refreshed.bodyTime)
            && !current.arrived(after: refreshed.responseTime, now: Clocks.wallSeconds)
    }

    /// Whether `name` holds the body that arrived at `bodyTime` (``Entry/holdsBody(arrivedAt:)``).
    func holdsBody(named name: EntryName, arrivedAt bodyTime: Double) -> Bool {
        entry(named: name)?.holdsBody(arrivedAt: bodyTime) ?? false
    }

    /// ``insert(_:capped:)`` for a refresh, decided under the same lock as the insertion
    /// (``accepts(refresh:)``): one the name no longer accepts comes back refused (serial 0).
    mutating func insert(refresh refreshed: Entry) -> Entry? {
        guard accepts(refresh: refreshed) else {
            var refused = refreshed
            refused.serial = 0
            return refused
        }
        return insert(refreshed)
    }

    /// Stored variants kept per key (RFC 9111 §4.1): a response that varies on a field its
    /// clients choose freely (`Vary: User-Agent`, or a hostile origin's) would otherwise let one
    /// client store a variant per request, and make every lookup of the key and every store of
    /// a variant cost as many steps as there are variants, under the index lock.
    static let maxVariants = MemoryCache.maxVariants

    /// Adds or replaces (same file name) an entry; returns the entry that goes: the one it
    /// replaced; or, when it is a new variant past ``maxVariants`` (`capped`: a store's, not
    /// the start-up scan's, which trims at its end: ``endScan()``), the key's oldest variant, removed for
    /// it; or `entry` itself, not added (its serial 0, as no indexed entry's is), when the name
    /// holds a response that arrived later (``Entry/arrived(after:now:)``: a slow fill that
    /// began first finished last).
    @discardableResult
    mutating func insert(_ entry: consuming Entry, capped: Bool = true) -> Entry? {
        // Moved into its slot, not copied (a copy retains every reference the entry holds);
        // what is read of it afterwards is kept in locals first.
        lastSerial += 1
        entry.serial = lastSerial
        let name = entry.name
        let responseTime = entry.responseTime
        let key = entry.key
        let vary = entry.vary
        let size = entry.size
        let segment = entry.segment
        let index: Int
        if let reused = free.popLast() {
            index = reused
            slots[index] = consume entry
        } else {
            index = slots.count
            slots.append(consume entry)
        }
        // One probe of the name: the entry it replaces, if any, comes back from the store.
        var replaced: Entry?
        if let existing = byName.updateValue(index, forKey: name) {
            if let kept = slots[existing], kept.arrived(after: responseTime, now: Clocks.wallSeconds) {
                byName.updateValue(existing, forKey: name)
                var refused = slots[index].take()
                free.append(index)
                refused?.serial = 0
                return refused
            }
            replaced = slots[existing]
            removeSlot(existing, keepingName: true)
        }
        // Not looked up while no key has entries with Vary values (the usual case).
        if varied.count > 0, let others = varied[key] {
            let variants = others.adding(index)
            varied[key] = variants
            if variants.count > DiskIndex.maxVariants {
                if !capped {
                    overCap.insert(key)
                } else if replaced == nil, let oldest = earliestArrival(of: variants, besides: index) {
                    replaced = slots[oldest]
                    removeSlot(oldest)
                }
            }
        } else if !vary.isEmpty {
            // The key's first entry with Vary values: it joins its entry without them, if any.
            let plain = byName[DiskCache.entryName(key: key, vary: [:])].flatMap { slots[$0]?.key == key ? $0 : nil }
            varied[key] = plain.map { .many([$0, index]) } ?? .one(index)
        }
        if sliceSlots.add(key, slot: index) { slicesInserted.add(1) }
        recency.linkNewest(index, in: &slots)
        totalBytes += size
        if segment != 0 {
            segments[segment, default: SegmentUsage()].live += size
            segmentLiveBytes += size
        }
        return replaced
    }

    /// Adds an entry found by the start-up scan, unless a newer write already indexed it or it
    /// was removed since the scan began; returns whether it was added.
    @discardableResult
    mutating func insertIfAbsent(_ entry: Entry) -> Bool {
        let name = entry.name
        guard byName[name] == nil, tombstones?.contains(name) != true else { return false }
        insert(entry, capped: false)
        // Scanned entries are older than anything used since start-up.
        if let index = byName[name] {
            recency.unlink(index, in: &slots)
            recency.linkOldest(index, in: &slots)
        }
        return true
    }

    // MARK: Segments

    /// Records a segment's size after an append (or as the start-up scan found it).
    mutating func recordSegment(_ id: UInt32, size: Int64, sealed: Bool) {
        // Changed in place: one probe of the table, not a read and a write.
        let growth = Self.record(size: size, sealed: sealed, in: &segments[id, default: SegmentUsage()])
        segmentBytes += growth
    }

    /// Grows `usage` to `size` (never shrinks it) and seals it if `sealed`; returns the growth.
    private static func record(size: Int64, sealed: Bool, in usage: inout SegmentUsage) -> Int64 {
        let growth = max(usage.size, size) - usage.size
        usage.size += growth
        usage.sealed = usage.sealed || sealed
        return growth
    }

    /// Sealed segments without live records: their files can go.
    func emptySegments() -> [UInt32] {
        segments.filter { $0.value.sealed && $0.value.live == 0 }.map(\.key)
    }

    /// Forgets a segment whose file was deleted (its records must be gone from the index).
    mutating func dropSegment(_ id: UInt32) {
        guard let usage = segments.removeValue(forKey: id) else { return }
        segmentBytes -= usage.size
        segmentLiveBytes -= usage.live
    }

    /// The sealed segment with the smallest share of live bytes, if that share is at most
    /// `ratio`: the cheapest one to compact.
    func sparsestSegment(atMost ratio: Double, excluding skipped: Set<UInt32> = []) -> UInt32? {
        var best: (id: UInt32, ratio: Double)?
        for (id, usage) in segments where usage.sealed && usage.size > 0 && !skipped.contains(id) {
            let share = Double(usage.live) / Double(usage.size)
            if share <= ratio, share < best?.ratio ?? .infinity { best = (id, share) }
        }
        return best?.id
    }

    /// Points the entry `name` at a copy of its record, if it is still the record at
    /// (`segment`, `offset`) — compaction copies records without holding the lock throughout.
    mutating func move(_ name: EntryName, from segment: UInt32, at offset: Int64, to newSegment: UInt32, at newOffset: Int64) -> Bool {
        guard let index = byName[name], var entry = slots[index], entry.segment == segment, entry.offset == offset else {
            return false
        }
        segments[segment]?.live -= entry.size
        segments[newSegment, default: SegmentUsage()].live += entry.size
        entry.segment = newSegment
        entry.offset = newOffset
        slots[index] = entry
        return true
    }

    /// Entries larger than `size` among slots `start..<start + count`, and where the next batch
    /// starts (nil at the end): the scrub walks the index in batches so the lock is held briefly.
    func entries(largerThan size: Int64, start: Int, count: Int) -> (entries: [Entry], next: Int?) {
        let end = min(slots.count, start + count)
        var found: [Entry] = []
        for index in start..<max(start, end) {
            if let entry = slots[index], entry.size > size { found.append(entry) }
        }
        return (found, end < slots.count ? end : nil)
    }

    /// Removes one entry; returns it.
    @discardableResult
    mutating func remove(named name: EntryName) -> Entry? {
        tombstones?.insert(name)
        guard let index = byName[name], let entry = slots[index] else { return nil }
        removeSlot(index)
        return entry
    }

    /// Removes every entry for `key`; returns them.
    mutating func remove(key: CacheKey) -> [Entry] {
        let names = slots(of: key).compactMap { slots[$0]?.name }
        return names.compactMap { remove(named: $0) }
    }

    /// Removes every slice stored for the object `key` (``CacheKey/slice(_:)``, whatever the
    /// slice size it was cut by) but `keeping`; returns them.
    mutating func removeSlices(of key: CacheKey, keeping: CacheKey? = nil) -> [Entry] {
        guard !sliceSlots.isEmpty else { return [] }
        var removed: [Entry] = []
        for slot in sliceSlots.take(ofObject: key.url) {
            guard let entry = slots[slot] else { continue }
            if entry.key == keeping {
                sliceSlots.add(entry.key, slot: slot)
            } else if let gone = remove(named: entry.name) {
                removed.append(gone)
            }
        }
        return removed
    }

    /// Removes least recently used entries until the total is at most `target`; returns them.
    mutating func evict(downTo target: Int64) -> [Entry] {
        var evicted: [Entry] = []
        while totalBytes > target, let oldest = recency.leastRecent, let entry = slots[oldest] {
            evicted.append(entry)
            removeSlot(oldest)
        }
        return evicted
    }

    mutating func removeAll() -> [EntryName] {
        let names = byName.keys
        let serial = lastSerial
        self = DiskIndex(slicesInserted: slicesInserted)
        // Never handed out twice: a lookup from before the clear holds one.
        lastSerial = serial
        return names
    }

    /// Whether the entry under `name` is still the one with `serial` (``Entry/serial``).
    func holds(_ name: EntryName, serial: UInt64) -> Bool {
        byName[name].flatMap { slots[$0]?.serial } == serial
    }

    // MARK: List maintenance

    /// Drops slot `index`; `keepingName` when its name already points at the entry replacing it.
    private mutating func removeSlot(_ index: Int, keepingName: Bool = false) {
        guard let entry = slots[index] else { return }
        recency.unlink(index, in: &slots)
        if !keepingName { byName.removeValue(forKey: entry.name) }
        if varied.count > 0, let variants = varied.removeValue(forKey: entry.key), let rest = variants.removing(index),
            rest.indices.contains(where: { slots[$0]?.vary.isEmpty == false })
        {
            varied[entry.key] = rest
        }
        if !sliceSlots.isEmpty { sliceSlots.remove(entry.key, slot: index) }
        totalBytes -= entry.size
        if entry.segment != 0 {
            segments[entry.segment]?.live -= entry.size
            segmentLiveBytes -= entry.size
        }
        slots[index] = nil
        free.append(index)
    }

    // MARK: Keys

    /// The slots of one key's entries: nearly always one (a Vary'd URL has one per variant),
    /// held without an array of its own.
    private enum Variants {
        case one(Int)
        case many([Int])

        var indices: [Int] {
            switch self {
            case .one(let index): [index]
            case .many(let indices): indices
            }
        }

        func adding(_ index: Int) -> Variants {
            .many(indices + [index])
        }

        var count: Int {
            switch self {
            case .one: 1
            case .many(let indices): indices.count
            }
        }

        /// Without `index`; nil when none is left.
        func removing(_ index: Int) -> Variants? {
            switch self {
            case .one(let only): return only == index ? nil : self
            case .many(let indices):
                let rest = indices.filter { $0 != index }
                if rest.count > 1 { return .many(rest) }
                return rest.first.map { .one($0) }
            }
        }
    }
}
