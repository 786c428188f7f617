/// The disk tier's own record of what is stored: entries by key (with their Vary values) and
/// by file name, in least-recently-used order. Access times on the filesystem are not used
/// (relatime/noatime mounts make them unreliable). Not thread-safe: ``DiskCache`` keeps it in a
/// mutex.
struct DiskIndex {
    struct Entry {
        var key: CacheKey
        var vary: [String: String]
        var name: String
        var size: Int64
        /// Body checksum checked since this process started (written here, or verified).
        var verified: Bool
        var previous = -1
        var next = -1
    }

    // Paged and sharded rather than plain Array and Dictionary: those grow all at once, which
    // inside the index's lock stalled every loop for tens of milliseconds at 10^5 entries.
    private var slots = PagedArray<Entry?>()
    private var free: [Int] = []
    private var byName = ShardedDictionary<String, Int>()
    private var byKey = ShardedDictionary<CacheKey, [Int]>()
    private var newest = -1
    private var oldest = -1
    private(set) var totalBytes: Int64 = 0
    /// While the start-up scan runs: names removed since it started, which it must not add
    /// back from a head it read before the removal.
    private var tombstones: Set<String>?

    mutating func beginScan() { tombstones = [] }
    mutating func endScan() { tombstones = nil }

    var count: Int { byName.count }

    /// The entries stored for `key`, marked as used.
    mutating func lookup(_ key: CacheKey) -> [Entry] {
        guard let indices = byKey[key] else { return [] }
        for index in indices { touch(index) }
        return indices.compactMap { slots[$0] }
    }

    func entry(named name: String) -> Entry? {
        byName[name].flatMap { slots[$0] }
    }

    /// Adds or replaces (same file name) an entry; returns the size it replaced.
    @discardableResult
    mutating func insert(_ entry: Entry) -> Int64 {
        var replaced: Int64 = 0
        if let existing = byName[entry.name] {
            replaced = slots[existing]?.size ?? 0
            removeSlot(existing)
        }
        let index: Int
        if let reused = free.popLast() {
            index = reused
            slots[index] = entry
        } else {
            index = slots.count
            slots.append(entry)
        }
        byName[entry.name] = index
        byKey[entry.key, default: []].append(index)
        linkNewest(index)
        totalBytes += entry.size
        return replaced
    }

    /// Adds an entry found by the start-up scan, unless a newer write already indexed it.
    mutating func insertIfAbsent(_ entry: Entry) {
        guard byName[entry.name] == nil, tombstones?.contains(entry.name) != true else { return }
        insert(entry)
        // Scanned entries are older than anything used since start-up.
        if let index = byName[entry.name] {
            unlink(index)
            linkOldest(index)
        }
    }

    mutating func markVerified(_ name: String) {
        if let index = byName[name] { slots[index]?.verified = true }
    }

    /// Removes one entry; returns it.
    @discardableResult
    mutating func remove(named name: String) -> Entry? {
        tombstones?.insert(name)
        guard let index = byName[name], let entry = slots[index] else { return nil }
        removeSlot(index)
        return entry
    }

    /// Removes every entry for `key`; returns their file names.
    mutating func remove(key: CacheKey) -> [String] {
        let names = (byKey[key] ?? []).compactMap { slots[$0]?.name }
        for name in names { remove(named: name) }
        return names
    }

    /// Removes least recently used entries until the total is at most `target`; returns them.
    mutating func evict(downTo target: Int64) -> [Entry] {
        var evicted: [Entry] = []
        while totalBytes > target, oldest >= 0, let entry = slots[oldest] {
            evicted.append(entry)
            removeSlot(oldest)
        }
        return evicted
    }

    mutating func removeAll() -> [String] {
        let names = byName.keys
        self = DiskIndex()
        return names
    }

    // MARK: List maintenance

    private mutating func removeSlot(_ index: Int) {
        guard let entry = slots[index] else { return }
        unlink(index)
        byName.removeValue(forKey: entry.name)
        if var siblings = byKey[entry.key] {
            siblings.removeAll { $0 == index }
            byKey[entry.key] = siblings.isEmpty ? nil : siblings
        }
        totalBytes -= entry.size
        slots[index] = nil
        free.append(index)
    }

    private mutating func touch(_ index: Int) {
        guard newest != index else { return }
        unlink(index)
        linkNewest(index)
    }

    private mutating func linkNewest(_ index: Int) {
        slots[index]!.previous = -1
        slots[index]!.next = newest
        if newest >= 0 { slots[newest]!.previous = index }
        newest = index
        if oldest < 0 { oldest = index }
    }

    private mutating func linkOldest(_ index: Int) {
        slots[index]!.next = -1
        slots[index]!.previous = oldest
        if oldest >= 0 { slots[oldest]!.next = index }
        oldest = index
        if newest < 0 { newest = index }
    }

    private mutating func unlink(_ index: Int) {
        guard let entry = slots[index] else { return }
        if entry.previous >= 0 { slots[entry.previous]!.next = entry.next } else if newest == index { newest = entry.next }
        if entry.next >= 0 { slots[entry.next]!.previous = entry.previous } else if oldest == index { oldest = entry.previous }
        slots[index]!.previous = -1
        slots[index]!.next = -1
    }
}
