import LarderCache
import Testing

@Suite struct DoorkeeperTests {
    @Test func admitsAKeyOnItsSecondMiss() {
        var doorkeeper = Doorkeeper()
        #expect(!doorkeeper.admit(1) { 0 })
        #expect(doorkeeper.admit(1) { 0 })
        #expect(!doorkeeper.admit(2) { 0 })
    }

    @Test func remembersAKeyForOneFullWindowAfterItsGeneration() {
        var doorkeeper = Doorkeeper()
        let window = Doorkeeper.minimumWindow
        #expect(!doorkeeper.admit(-1) { 0 })
        // The current generation fills and turns over: -1 is in the previous one.
        for key in 0..<window { _ = doorkeeper.admit(key) { 0 } }
        #expect(doorkeeper.admit(-1) { 0 })
        // One more window of other first misses: the previous generation is dropped.
        for key in window..<(2 * window) { _ = doorkeeper.admit(key) { 0 } }
        #expect(!doorkeeper.admit(-1) { 0 })
        #expect(doorkeeper.count <= 2 * window)
    }

    @Test func theWindowFollowsTheEntriesTheCacheHolds() {
        var doorkeeper = Doorkeeper()
        var reads = 0
        for key in 0..<Doorkeeper.minimumWindow {
            _ = doorkeeper.admit(key) {
                reads += 1
                return 100_000
            }
        }
        #expect(reads == 1, "the entry count is read only when a generation turns over")
        #expect(doorkeeper.window == 100_000 / Doorkeeper.entriesPerWindowKey)
        for key in 0..<Doorkeeper.minimumWindow * 5 { _ = doorkeeper.admit(1_000_000 + key) { 10 } }
        #expect(doorkeeper.window == Doorkeeper.minimumWindow, "never below the minimum")
    }
}
