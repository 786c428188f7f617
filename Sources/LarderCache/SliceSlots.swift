/// The slots of each object's slice entries (keys `URL#slice=N`, ``CacheKey/slice(_:)``), by
/// the object's URL, kept beside a tier's own table: a purge or an invalidation of the object
/// finds the slices it has stored without probing every slice number (an object may have up to
/// `disk.max_object_bytes / cache.slice_size` of them, and the slice size may have changed since
/// they were stored). Empty while the tier holds no slice; not thread-safe (its tier's lock).
struct SliceSlots {
    private var byObject: [String: Set<Int>] = [:]

    var isEmpty: Bool { byObject.isEmpty }

    /// Records that `slot` holds `key`, if it is a slice's key; whether it is (one scan of the
    /// key for its tier's insert).
    @discardableResult
    mutating func add(_ key: CacheKey, slot: Int) -> Bool {
        guard let object = key.sliceObjectURL else { return false }
        byObject[object, default: []].insert(slot)
        return true
    }

    /// Forgets that `slot` held `key`.
    mutating func remove(_ key: CacheKey, slot: Int) {
        guard !byObject.isEmpty, let object = key.sliceObjectURL, let index = byObject.index(forKey: object) else { return }
        byObject.values[index].remove(slot)
        if byObject.values[index].isEmpty { byObject.remove(at: index) }
    }

    /// Takes the slots of the object at `url`'s slices out of the table, for the caller to
    /// remove them (each removal then finds nothing left to forget here: removing all of an
    /// object's slices is linear in their number).
    mutating func take(ofObject url: String) -> Set<Int> { byObject.removeValue(forKey: url) ?? [] }
}
