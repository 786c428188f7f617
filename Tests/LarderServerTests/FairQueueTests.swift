import Testing

@testable import LarderServer

/// Clients' items taken in turn, each client's share bounded, a full queue making room for a
/// client with few.
@Suite struct FairQueueTests {
    @Test func clientsAreServedInTurnEachOldestFirst() {
        var queue = FairQueue<String, String>(perClient: 8, total: 32)
        for index in 0..<5 { _ = queue.add("a\(index)", for: "a") }
        _ = queue.add("b0", for: "b")
        _ = queue.add("b1", for: "b")
        _ = queue.add("c0", for: "c")
        var taken: [String] = []
        while let item = queue.take() { taken.append(item) }
        #expect(taken == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"])
        #expect(queue.count == 0 && queue.take() == nil)
    }

    @Test func aClientHoldsItsShareAtMost() {
        var queue = FairQueue<String, Int>(perClient: 3, total: 32)
        let admissions = (0..<5).map { queue.add($0, for: "flood") }
        #expect(admissions.map { if case .refused = $0 { false } else { true } } == [true, true, true, false, false])
        guard case .queued = queue.add(9, for: "other") else {
            Issue.record("another client is not held back by the flood")
            return
        }
        #expect(queue.queued(for: "flood") == 3 && queue.count == 4)
    }

    /// Full, the queue takes a newcomer's item in place of the newest of the client holding the
    /// most, while that one holds two more than the newcomer would; with every client holding
    /// as few, it refuses.
    @Test func aFullQueueMakesRoomForAClientWithFew() {
        var queue = FairQueue<String, String>(perClient: 4, total: 6)
        for index in 0..<4 { _ = queue.add("a\(index)", for: "a") }
        for index in 0..<2 { _ = queue.add("b\(index)", for: "b") }
        guard case .queuedPushingOut(let out) = queue.add("c0", for: "c") else {
            Issue.record("a client with none gets in")
            return
        }
        #expect(out == "a3", "the newest of the client holding the most")
        guard case .queuedPushingOut(let second) = queue.add("d0", for: "d") else {
            Issue.record("a client with none gets in while another holds three")
            return
        }
        #expect(second == "a2" || second == "b1")
        var taken: [String] = []
        while let item = queue.take() { taken.append(item) }
        #expect(Set(taken).isSuperset(of: ["c0", "d0"]) && taken.count == 6)

        var even = FairQueue<Int, Int>(perClient: 2, total: 4)
        for client in 0..<4 { _ = even.add(client, for: client) }
        guard case .refused = even.add(9, for: 9) else {
            Issue.record("with every client holding one, a full queue refuses")
            return
        }
    }
}
