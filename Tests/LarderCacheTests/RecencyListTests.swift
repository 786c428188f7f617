import Testing

@testable import LarderCache

/// The least-recently-used order both tiers keep: each step of a script and the order it leaves,
/// read newest to oldest by the links and checked oldest to newest by the other links.
@Suite struct RecencyListTests {
    struct Node: RecencyLinked {
        var recency = RecencyLinks()
    }

    enum Step: Sendable {
        case newest(Int)
        case oldest(Int)
        case touch(Int)
        case unlink(Int)
    }

    /// Runs `steps` over slots `0..<8` and returns the order, newest first.
    static func run(_ steps: [Step], paged: Bool) -> [Int] {
        var list = RecencyList()
        var array = [Node](repeating: Node(), count: 8)
        var pages = PagedArray<Node?>()
        for _ in 0..<8 { pages.append(Node()) }
        for step in steps {
            switch (step, paged) {
            case (.newest(let index), false): list.linkNewest(index, in: &array)
            case (.newest(let index), true): list.linkNewest(index, in: &pages)
            case (.oldest(let index), false): list.linkOldest(index, in: &array)
            case (.oldest(let index), true): list.linkOldest(index, in: &pages)
            case (.touch(let index), false): list.touch(index, in: &array)
            case (.touch(let index), true): list.touch(index, in: &pages)
            case (.unlink(let index), false): list.unlink(index, in: &array)
            case (.unlink(let index), true): list.unlink(index, in: &pages)
            }
        }
        func links(_ index: Int) -> RecencyLinks { paged ? pages[recency: index] : array[recency: index] }
        var forward: [Int] = []
        var index = list.newest
        while index >= 0, forward.count <= 8 {
            forward.append(index)
            index = links(index).next
        }
        var backward: [Int] = []
        index = list.oldest
        while index >= 0, backward.count <= 8 {
            backward.append(index)
            index = links(index).previous
        }
        #expect(backward == Array(forward.reversed()), "both directions agree")
        #expect(list.leastRecent == forward.last)
        return forward
    }

    static let cases: [([Step], [Int])] = [
        ([], []),
        ([.newest(0)], [0]),
        ([.newest(0), .newest(1), .newest(2)], [2, 1, 0]),
        ([.newest(0), .newest(1), .newest(2), .touch(0)], [0, 2, 1]),
        ([.newest(0), .newest(1), .newest(2), .touch(1)], [1, 2, 0]),
        ([.newest(0), .newest(1), .touch(1)], [1, 0]),
        ([.newest(0), .newest(1), .newest(2), .unlink(1)], [2, 0]),
        ([.newest(0), .newest(1), .newest(2), .unlink(2)], [1, 0]),
        ([.newest(0), .newest(1), .newest(2), .unlink(0)], [2, 1]),
        ([.newest(0), .unlink(0)], []),
        ([.newest(0), .unlink(0), .newest(0)], [0]),
        ([.oldest(3)], [3]),
        ([.newest(0), .oldest(3), .newest(4)], [4, 0, 3]),
        ([.newest(0), .newest(1), .unlink(1), .oldest(1)], [0, 1]),
        ([.newest(5), .newest(6), .newest(7), .touch(5), .touch(6), .unlink(7), .newest(7)], [7, 6, 5]),
    ]

    @Test(arguments: cases) func order(_ steps: [Step], _ expected: [Int]) {
        #expect(Self.run(steps, paged: false) == expected)
        #expect(Self.run(steps, paged: true) == expected)
    }
}
