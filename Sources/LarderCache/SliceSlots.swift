/// The slots of each object's slice entries (keys `URL#slice=N`, ``CacheKey/slice(_:)``), by
/// the object's URL, kept beside a tier's own table: a purge or an invalidation of the object
/// finds the slices it has stored without probing every slice number (an object may have up to
/// `disk.max_object_bytes / cache.slice_size` of them, and the slice size may have changed since
/// they were stored). Empty while the tier holds no slice; not thread-safe (its tier's lock).
struct SliceSlots {
    private var byObject: [String: [Int]] = [:]

    var isEmpty: Bool { byObject.isEmpty }

    /// Records that `slot` holds `key`, if it is a slice's key.
    mutating func add(_ key: CacheKey, slot: Int) {
        guard let object = key.sliceObjectURL else { return }
        byObject[object, default: []].append(slot)
    }

    /// Forgets that `slot` held `key`.
    mutating func remove(_ key: CacheKey, slot: Int) {
        guard !byObject.isEmpty, let object = key.sliceObjectURL, var slots = byObject[object] else { return }
        slots.removeAll { $0 == slot }
        byObject[object] = slots.isEmpty ? nil : slots
    }

    /// The slots of the slices stored for the object at `url`.
    func slots(ofObject url: String) -> [Int] { byObject[url] ?? [] }
}
