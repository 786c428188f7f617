/// A dictionary split into 64 independent dictionaries by the top bits of the key's
/// ``ShardedKey/shardBits``.
///
/// Why: a Swift `Dictionary` grows by rehashing every element at once. Inside the disk index's
/// lock at 10^5 entries that was a stall of tens of milliseconds for every client of a loop;
/// split 64 ways, each growth moves 1/64 of the entries, and the shards grow at different
/// moments.
struct ShardedDictionary<Key: ShardedKey, Value> {
    private static var shardCount: Int { 64 }
    private var shards = [[Key: Value]](repeating: [:], count: ShardedDictionary.shardCount)
    private(set) var count = 0

    @inline(__always)
    private static func shard(_ key: Key) -> Int {
        Int(truncatingIfNeeded: key.shardBits >> (UInt.bitWidth - 6))
    }

    subscript(key: Key) -> Value? {
        get { shards[Self.shard(key)][key] }
        set {
            let shard = Self.shard(key)
            if let newValue {
                if shards[shard].updateValue(newValue, forKey: key) == nil { count += 1 }
            } else if shards[shard].removeValue(forKey: key) != nil {
                count -= 1
            }
        }
    }

    /// Modifies the value for `key` in place, inserting `defaultValue` first if there is none.
    subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { shards[Self.shard(key)][key] ?? defaultValue() }
        _modify {
            // Counted from the shard's size rather than by looking the key up first: one probe.
            let shard = Self.shard(key)
            let before = shards[shard].count
            defer { count += shards[shard].count - before }
            yield &shards[shard][key, default: defaultValue()]
        }
    }

    /// Sets the value for `key`; returns the value it replaces (one probe, where a lookup and
    /// then a store are two, each hashing the key twice).
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        let old = shards[Self.shard(key)].updateValue(value, forKey: key)
        if old == nil { count += 1 }
        return old
    }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        let removed = shards[Self.shard(key)].removeValue(forKey: key)
        if removed != nil { count -= 1 }
        return removed
    }

    /// Every key, in no particular order.
    var keys: [Key] { shards.flatMap(\.keys) }
}

/// A key that names its shard in a ``ShardedDictionary``.
protocol ShardedKey: Hashable {
    /// A word whose top six bits choose the key's shard. Not predictable by a client from the
    /// key (a client that could put every key in one shard would bring back the stall sharding
    /// avoids), and not the top bits of the hash the shard's `Dictionary` buckets by, which
    /// would crowd each shard's keys into 1/64 of its buckets. By default the key's `hashValue`
    /// (its top bits, where `Dictionary` buckets by the low ones); a key that carries a hash
    /// says so instead, for a probe that hashes the key once rather than twice.
    var shardBits: UInt { get }
}

extension ShardedKey {
    var shardBits: UInt { UInt(bitPattern: hashValue) }
}
