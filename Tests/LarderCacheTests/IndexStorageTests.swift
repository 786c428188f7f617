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
