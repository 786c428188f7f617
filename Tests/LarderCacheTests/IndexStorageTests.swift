import LarderIO
import Testing

@testable import LarderCache

/// The disk index's containers against the standard ones, on the same operations.
@Suite(.timeLimit(.minutes(1))) struct IndexStorageTests {
    @Test func shardedDictionaryAgreesWithDictionary() {
        var sharded = ShardedDictionary<String, Int>()
        var reference: [String: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            let key = "k\(Int.random(in: 0..<3_000, using: &generator))"
            switch step % 5 {
            case 0, 1:
                sharded[key] = step
                reference[key] = step
            case 2:
                #expect(sharded.removeValue(forKey: key) == reference.removeValue(forKey: key))
            case 3:
                #expect(sharded.updateValue(step, forKey: key) == reference.updateValue(step, forKey: key))
            default:
                sharded[key, default: 0] += 1
                reference[key, default: 0] += 1
            }
            #expect(sharded[key] == reference[key])
            #expect(sharded.count == reference.count, "after step \(step)")
        }
        #expect(sharded.count == reference.count)
        #expect(Set(sharded.keys) == Set(reference.keys))
        for (key, value) in reference { #expect(sharded[key] == value) }
        sharded["k1"] = nil
        reference["k1"] = nil
        #expect(sharded.count == reference.count)
    }

    /// Names spread over the index's 64 shards from their own bits, without a second hash:
    /// URLs that differ in one character, as a client's requests do, fill every shard evenly.
    @Test func entryNamesSpreadOverEveryShard() {
        var perShard = [Int](repeating: 0, count: 64)
        for index in 0..<6_400 {
            let name = DiskCache.entryName(key: CacheKey(normalized: "http://example.test/file?\(index)"), vary: [:])
            perShard[Int(name.shardBits >> (UInt.bitWidth - 6))] += 1
        }
        // 100 a shard expected, ±10 one standard deviation: beyond ±50 no fair spread goes.
        #expect(perShard.min()! > 50, "\(perShard)")
        #expect(perShard.max()! < 150, "\(perShard)")
    }

    /// The index against a plain table of entries: names replace, keys gather their variants
    /// (one, then several, then one again; with and without Vary values), and removals by name
    /// and by key.
    @Test func diskIndexAgreesWithATableOfEntries() {
        var index = DiskIndex()
        var reference: [EntryName: CacheKey] = [:]
        var generator = SystemRandomNumberGenerator()
        let keys = (0..<40).map { CacheKey(normalized: "http://origin.test/\($0)") }
        // Variants per key from a small pool, so a key often holds several, and often one
        // without Vary values beside others.
        let varies: [[String: String]] = [[:], ["accept-encoding": "gzip"], ["accept-encoding": "br"]]
        func namesFor(_ key: CacheKey) -> Set<EntryName> { Set(reference.filter { $0.value == key }.keys) }
        for step in 0..<20_000 {
            let key = keys[Int.random(in: 0..<keys.count, using: &generator)]
            let vary = varies[Int.random(in: 0..<varies.count, using: &generator)]
            let name = DiskCache.entryName(key: key, vary: vary)
            switch step % 6 {
            case 0, 1, 2:
                let replaced = index.insert(DiskIndex.Entry(key: key, vary: vary, name: name, size: 10, responseTime: 0, bodyTime: 0))
                #expect(replaced?.name == (reference[name] != nil ? name : nil), "step \(step)")
                reference[name] = key
            case 3:
                #expect(index.remove(named: name)?.name == (reference.removeValue(forKey: name) != nil ? name : nil))
            case 4:
                let removed = Set(index.remove(key: key).map(\.name))
                #expect(removed == namesFor(key), "step \(step)")
                for name in removed { reference[name] = nil }
            default:
                #expect(Set(index.lookup(key).map(\.name)) == namesFor(key), "step \(step)")
            }
            #expect(index.count == reference.count, "step \(step)")
            #expect(index.totalBytes == Int64(reference.count * 10))
        }
        for key in keys { #expect(Set(index.lookup(key).map(\.name)) == namesFor(key)) }
        for (name, key) in reference { #expect(index.entry(named: name)?.key == key) }
    }

    /// Two keys whose names collide: the later entry replaces the earlier (as one name can
    /// hold one file), and the earlier key then finds nothing rather than the other's entry.
    @Test func aKeyFindsOnlyItsOwnEntryUnderItsName() {
        var index = DiskIndex()
        let first = CacheKey(normalized: "http://origin.test/first")
        let second = CacheKey(normalized: "http://origin.test/second")
        let name = DiskCache.entryName(key: first, vary: [:])
        index.insert(DiskIndex.Entry(key: first, vary: [:], name: name, size: 10, responseTime: 0, bodyTime: 0))
        #expect(index.lookup(first).map(\.key) == [first])
        index.insert(DiskIndex.Entry(key: second, vary: [:], name: name, size: 10, responseTime: 0, bodyTime: 0))
        #expect(index.lookup(first).isEmpty)
        #expect(index.count == 1)
        #expect(index.remove(key: first).isEmpty)
        #expect(index.count == 1)
    }

    /// Review 82 R82-1: a write that finishes after another of the same name (two fills of one
    /// variant that overlap) is not indexed over a response that arrived later than its own;
    /// it comes back, with serial 0, for its record or file to go.
    @Test func aResponseThatArrivedLaterKeepsItsName() {
        var index = DiskIndex()
        let key = CacheKey(normalized: "http://origin.test/race")
        let name = DiskCache.entryName(key: key, vary: [:])
        let now = Clocks.wallSeconds()
        func entry(_ time: Double) -> DiskIndex.Entry {
            DiskIndex.Entry(key: key, vary: [:], name: name, size: 10, responseTime: time, bodyTime: time)
        }
        #expect(index.insert(entry(now - 10)) == nil)
        let refused = index.insert(entry(now - 20))
        #expect(refused?.responseTime == now - 20 && refused?.serial == 0)
        #expect(index.entry(named: name)?.responseTime == now - 10 && index.entry(named: name)?.serial != 0)
        #expect(index.count == 1 && index.totalBytes == 10)
        #expect(index.holdsLater(named: name, than: now - 20) && !index.holdsLater(named: name, than: now - 5))
        #expect(index.insert(entry(now - 5))?.responseTime == now - 10)
        // Stamped after now: stored before the wall clock stepped back, it gives way.
        #expect(index.insert(entry(now + 3600))?.responseTime == now - 5)
        #expect(!index.holdsLater(named: name, than: now - 1))
        #expect(index.insert(entry(now - 1))?.responseTime == now + 3600)
        #expect(index.lookup(key).map(\.responseTime) == [now - 1])
        #expect(index.count == 1 && index.totalBytes == 10)
    }

    @Test func pagedArrayKeepsElementsAcrossPages() {
        var paged = PagedArray<Int?>()
        for index in 0..<10_000 { paged.append(index) }
        #expect(paged.count == 10_000)
        for index in stride(from: 0, to: 10_000, by: 3) { paged[index] = nil }
        paged[4_097]! += 1_000_000
        for index in 0..<10_000 {
            let expected: Int? = index % 3 == 0 ? nil : (index == 4_097 ? index + 1_000_000 : index)
            #expect(paged[index] == expected)
        }
    }
}

extension String: ShardedKey {}
