import LarderIO
import Testing

@Suite struct SlotsTests {
    @Test func valuesAreFoundByTheirSlotAndFreedSlotsAreTakenAgain() {
        var slots = Slots<String>()
        let a = slots.insert("a")
        let b = slots.insert("b")
        let c = slots.insert("c")
        #expect([a, b, c] == [0, 1, 2])
        #expect(slots[b] == "b")
        #expect(slots.count == 3)

        #expect(slots.remove(at: b) == "b")
        #expect(slots[b] == nil)
        #expect(slots.count == 2)
        // Freeing a free slot, or one never handed out, changes nothing.
        #expect(slots.remove(at: b) == nil)
        #expect(slots.remove(at: 7) == nil)
        #expect(slots.remove(at: -1) == nil)
        #expect(slots.count == 2)
        #expect(slots[-1] == nil && slots[3] == nil)

        // The freed slot serves the next value; a holder of the old slot number sees the new one.
        let d = slots.insert("d")
        #expect(d == b)
        #expect(slots[d] == "d")
        #expect(slots.values == ["a", "d", "c"])
        #expect(slots.count == 3)
    }
}
